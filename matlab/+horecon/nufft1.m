function f = nufft1(points, c, modes, varargin)
%horecon.nufft1  Type-1 non-uniform FFT (nonuniform -> grid), in one call.
%
%   f = horecon.nufft1(points, c, modes, 'Sign', +1, 'Tolerance', 1e-6, ...)
%   f(k) = sum_j c(j) * exp(Sign*1i * k.x_j) with x_j = points(j, :) (radians) and
%   k = -floor(n/2) ... ceil(n/2)-1 along each axis (index 1 = -floor(n/2), first index
%   fastest). points npoints x numel(modes); c npoints x ntransforms; f is
%   modes(1) x ... x modes(end) x ntransforms. Options as horecon.nufft ('Precision'
%   follows c's class unless given). FINUFFT's finufft1d1/2d1/3d1 with modeord 0.
%   See also horecon.nufft2, horecon.Nufft.
if nargin < 3
  error('horecon:invalidArgument', 'usage: f = horecon.nufft1(points, c, modes, ...): 3 arguments needed, got %d', nargin);
end
f = horecon.nufft(1, modes, points, c, varargin{:});
end
