function maps = walsh(p, images, refDims, fov, center, window)
%horecon.calib.walsh  Adaptive-combine coil maps (Walsh et al. 2000) at plan p's
%   positions from coil images (prod(refDims) x L) on the grid refDims, fov, center,
%   with a window^d box (default 5); maps N x L with sum_c |S_c|^2 = 1.
if nargin < 6, window = 5; end
maps = horecon_mex('walsh', p.mexHandle(), refDims, fov, center, reshape(images, prod(refDims), []), window);
end
