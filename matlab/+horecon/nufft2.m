function c = nufft2(points, f, varargin)
%horecon.nufft2  Type-2 non-uniform FFT (grid -> nonuniform), in one call.
%
%   c = horecon.nufft2(points, f, 'Sign', -1, 'Tolerance', 1e-6, ...)
%   c(j) = sum_k f(k) * exp(Sign*1i * k.x_j) with x_j = points(j, :) (radians,
%   npoints x ndims, ndims 1..3). The modes are the first ndims sizes of f (index 1 =
%   mode -floor(n/2), first index fastest), further sizes are transforms: f is
%   n1 x ... x nd x ntransforms and c npoints x ntransforms. Options as horecon.nufft
%   ('Precision' follows f's class unless given). FINUFFT's finufft1d2/2d2/3d2.
%   See also horecon.nufft1, horecon.Nufft.
if nargin < 2
  error('horecon:invalidArgument', 'usage: c = horecon.nufft2(points, f, ...): 2 arguments needed, got %d', nargin);
end
if ~isnumeric(points) || ndims(points) ~= 2 || size(points, 2) < 1 || size(points, 2) > 3
  error('horecon:sizeMismatch', 'points is %s %s, expected a numeric npoints x ndims matrix (ndims 1, 2 or 3)', ...
        mat2str(size(points)), class(points));
end
if ~isnumeric(f)
  error('horecon:invalidArgument', 'f must be a full double or single array, got %s', class(f));
end
dims = [size(f), ones(1, 3)];
c = horecon.nufft(2, dims(1:size(points, 2)), points, f, varargin{:});
end
