function p = psnr(x, ref)
%horecon.sim.psnr  20*log10(max|ref| / sqrt(mean|x - ref|^2)) in dB (Kirk-Hwu fig. 14.18).
p = horecon_mex('simPsnr', x, ref);
end
