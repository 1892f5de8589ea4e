function psi = noiseCovariance(ncoils, correlation, spread, seed)
%horecon.sim.noiseCovariance  A plausible coil noise covariance (L x L): standard
%   deviations in [1, 1 + spread], correlation^|a-b|, random phases.
psi = horecon_mex('simNoiseCovariance', ncoils, correlation, spread, seed);
end
