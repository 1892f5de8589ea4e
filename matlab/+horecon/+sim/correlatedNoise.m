function v = correlatedNoise(psi, values, seed)
%horecon.sim.correlatedNoise  values (P x L) plus complex Gaussian noise of covariance psi.
L = size(psi, 1);
v = horecon_mex('simCorrelatedNoise', psi, reshape(values, [], L), seed);
end
