function n = cudaDeviceCount()
%horecon.cudaDeviceCount  Usable CUDA devices (0 without driver or GPU; never an error).
n = horecon_mex('cudaDeviceCount');
end
