function [k, t] = radial(n, fov, spokes, dwell, t0)
%horecon.sim.radial  spokes radial spokes of 2n samples each; times restart per spoke.
if nargin < 5, t0 = 0; end
[k, t] = horecon_mex('simRadial', n, fov, spokes, dwell, t0);
end
