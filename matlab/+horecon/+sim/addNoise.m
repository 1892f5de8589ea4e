function [d, sigma] = addNoise(d, snr, seed)
%horecon.sim.addNoise  Adds complex Gaussian noise with rms(|d|)/rms(|noise|) = snr.
if nargin < 3, seed = 1; end
[d, sigma] = horecon_mex('simAddNoise', d, snr, seed);
end
