function S = coilSensitivities(P, ncoils, radius, center)
%horecon.sim.coilSensitivities  N x L sensitivities of L coils on a circle of
%   radius (m) around center in the xy plane (a smooth analytic model).
if nargin < 4, center = [0 0 0]; end
S = horecon_mex('simCoilSensitivities', P, ncoils, radius, center);
end
