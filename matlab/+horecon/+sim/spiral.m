function [k, t] = spiral(n, fov, undersampling, dwell, t0)
%horecon.sim.spiral  Single-shot Archimedean spiral for an n x n grid (fov in m):
%   out to kmax = pi*n/fov with n/(2*undersampling) turns, one Nyquist step
%   2*pi/fov per dwell (s) after a 0.2 ms ramp. k: M x 2 (rad/m), t: M x 1 (s).
if nargin < 5, t0 = 0; end
[k, t] = horecon_mex('simSpiral', n, fov, undersampling, dwell, t0);
end
