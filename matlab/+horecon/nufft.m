function out = nufft(type, modes, points, in, varargin)
%horecon.nufft  One non-uniform FFT (a horecon.Nufft plan made, executed and freed).
%
%   f = horecon.nufft(1, modes, points, c, ...)   type 1: f(k) = sum_j c(j) exp(s*1i*k.x_j)
%   c = horecon.nufft(2, modes, points, f, ...)   type 2: c(j) = sum_k f(k) exp(s*1i*k.x_j)
%
%   The arguments of horecon.Nufft followed by the input; options 'Sign' (+1 for type 1,
%   -1 for type 2 by default), 'Tolerance' (1e-6), 'Precision' ('single' for single
%   input, else 'double'), 'Transforms' (from the input's size: c npoints x ntransforms,
%   f modes(1) x ... x ntransforms), 'Backend', 'Device', 'Threads'. modes [n1 ...]
%   (k = -floor(n/2) ... at index 1, first index fastest), points npoints x numel(modes)
%   in radians. To apply the same points many times, keep a horecon.Nufft plan instead.
%   See also horecon.Nufft, horecon.nufft1, horecon.nufft2.
if nargin < 4
  error('horecon:invalidArgument', 'usage: out = horecon.nufft(type, modes, points, in, ...): 4 arguments needed, got %d', nargin);
end
defaults = {'Transforms', transforms(type, modes, points, in), 'Precision', 'double'};
if isa(in, 'single')
  defaults{4} = 'single';
end
plan = horecon.Nufft(type, modes, points, defaults{:}, varargin{:});   % later pairs win
out = plan.execute(in);
delete(plan);
end

function t = transforms(type, modes, points, in)
% The number of transforms the input's size implies: its count over the size of one
% transform, else its last dimension (the plan then reports the input's size as wrong).
t = 1;
if ~isnumeric(modes) || isempty(modes) || ~isnumeric(in)
  return;
end
if isequal(type, 1)
  if numel(modes) == 1
    per = numel(points);
  else
    per = size(points, 1);
  end
else
  per = prod(double(modes(:)));
end
if per > 0 && numel(in) > 0 && mod(numel(in), per) == 0
  t = numel(in) / per;
elseif isequal(type, 1)
  t = max(1, size(in, 2));                    % c: npoints x ntransforms
else
  t = max(1, size(in, numel(modes) + 1));     % f: modes(1) x ... x ntransforms
end
end
