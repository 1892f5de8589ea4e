function [k, t] = epi(n, fov, undersampling, dwell, t0)
%horecon.sim.epi  Single-shot EPI with n/undersampling lines of n samples.
if nargin < 5, t0 = 0; end
[k, t] = horecon_mex('simEpi', n, fov, undersampling, dwell, t0);
end
