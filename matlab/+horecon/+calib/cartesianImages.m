function m = cartesianImages(kspace, refDims, fov, center)
%horecon.calib.cartesianImages  Coil images (N_ref x L) from Cartesian k-space
%   (nx*ny*nz x L, any shape with nx*ny*nz rows): the exact inverse of
%   y(p) = sum_n m(r_n) exp(+1i*k_p.r_n) on the grid refDims, fov, center
%   (MODEL.md's grid helper; k = 2*pi*(p - floor(n/2))/fov as setCartesian).
if nargin < 4, center = [0 0 0]; end
N = prod(refDims);
L = numel(kspace) / N;
m = horecon_mex('cartesianImages', refDims, fov, center, L, reshape(kspace, N, L));
end
