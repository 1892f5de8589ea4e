function [k, t] = stackOfSpirals(n, nz, fov, fovZ, undersampling, dwell, t0)
%horecon.sim.stackOfSpirals  nz spiral partitions, k: M x 3 (rad/m).
if nargin < 7, t0 = 0; end
[k, t] = horecon_mex('simStackOfSpirals', n, nz, fov, fovZ, undersampling, dwell, t0);
end
