function psi = noiseCovariance(noise)
%horecon.calib.noiseCovariance  Coil noise covariance (L x L) from noise-only samples (Mn x L):
%   psi(a,b) = mean_j noise(j,a)*conj(noise(j,b)).
psi = horecon_mex('noiseCovariance', noise);
end
