function [k, t] = cartesian(nx, ny, fovX, fovY, dwell, t0)
%horecon.sim.cartesian  The full nx x ny Cartesian grid, one line per shot.
if nargin < 6, t0 = 0; end
[k, t] = horecon_mex('simCartesian', nx, ny, fovX, fovY, dwell, t0);
end
