classdef Nufft < handle
%horecon.Nufft  A non-uniform FFT plan: types 1 and 2, 1D/2D/3D (FINUFFT's conventions).
%
%   nu = horecon.Nufft(type, modes, points, 'Sign', s, 'Tolerance', 1e-6, 'Transforms', 1,
%                      'Precision', 'double', 'Backend', 'auto', 'Device', 0, 'Threads', 0)
%   out = nu.execute(in)        (as often as needed: the points are sorted once)
%   delete(nu)                  (or clear the last reference)
%
%   type 1 (nonuniform -> grid):  f(k) = sum_j c(j) * exp(s*1i * k.x_j)
%   type 2 (grid -> nonuniform):  c(j) = sum_k f(k) * exp(s*1i * k.x_j)
%
%   modes      [n1], [n1 n2] or [n1 n2 n3] modes per axis. Index i (1-based) along an axis
%              of n modes holds mode k = i - 1 - floor(n/2): -n/2 ... n/2-1 for even n,
%              k = 0 at index floor(n/2)+1 (fftshift's order), first index fastest.
%   points     npoints x ndims real (ndims = numel(modes); any vector for 1D), radians,
%              finite: k.x_j = k1*points(j,1) + k2*points(j,2) + ... Any value is used
%              modulo 2*pi ([-3*pi, 3*pi) is exact to rounding). A trajectory in rad/m on a
%              grid of voxel size dx becomes points = k*dx.
%   Sign       +1 or -1; default +1 for type 1 and -1 for type 2 (FINUFFT's). Type 1 with
%              sign s and type 2 with sign -s are adjoint (gridding / E^H and E).
%   Tolerance  the relative l2 error promised against the exact sums: [1e-6, 0.1] in
%              single precision, [1e-12, 0.1] in double (default 1e-6); in single
%              precision on CUDA at 1e-6 itself rounding is about as large (up to 1.1e-6
%              measured; the CPU computes single-precision plans below 1e-5 in double).
%   Transforms how many vectors one execute transforms (coils, time segments); they
%              share the points (default 1).
%   Precision  'double' (default: float64 arithmetic, double results) or 'single'.
%   Backend    'auto' (CUDA when usable, else CPU) | 'cpu' | 'cuda';
%   Device     first CUDA device (0-based); Threads: CPU threads (0 = all).
%
%   Shapes: type 1 takes c, npoints x ntransforms, and returns f, modes(1) x ... x
%   modes(end) x ntransforms; type 2 takes f and returns c. Inputs may be double or
%   single, real or complex; results are complex of the plan's precision.
%
%   Errors have identifiers horecon:<status> (horecon:sizeMismatch, horecon:notFinite,
%   horecon:invalidArgument, ...) and messages that name the argument.
%   See also horecon.nufft, horecon.nufft1, horecon.nufft2.

  properties (SetAccess = private)
    Type           % 1 (nonuniform -> grid) or 2 (grid -> nonuniform)
    Modes          % [n1 ...], one entry per dimension
    NumPoints      % npoints
    NumTransforms  % vectors per execute
    Sign           % +1 or -1
    Tolerance      % the requested relative l2 error
    Precision      % 'single' or 'double'
  end

  properties (Access = private)
    Handle = uint64(0)
  end

  methods
    function obj = Nufft(type, modes, points, varargin)
      %NUFFT  nu = horecon.Nufft(type, modes, points, 'Sign', s, 'Tolerance', tol,
      %   'Transforms', n, 'Precision', 'single'|'double', 'Backend', 'auto'|'cpu'|'cuda',
      %   'Device', 0, 'Threads', 0): a plan of `type` (1 or 2) over the grid `modes`
      %   and the points (npoints x numel(modes), radians); see help horecon.Nufft.
      if nargin < 3
        error('horecon:invalidArgument', 'usage: horecon.Nufft(type, modes, points, ...): type, modes and points are needed');
      end
      opts = struct('Sign', [], 'Tolerance', 1e-6, 'Transforms', 1, 'Precision', 'double', ...
                    'Backend', 'auto', 'Device', 0, 'Threads', 0);
      opts = horecon.internal.parseOptions(opts, varargin);
      precision = horecon.Nufft.code(opts.Precision, {'single', 'double'}, [0 2], 'Precision');
      backend = horecon.Nufft.code(opts.Backend, {'auto', 'cpu', 'cuda'}, [0 1 2], 'Backend');
      sign = opts.Sign;
      if isempty(sign) && isnumeric(sign)
        sign = 1 - 2 * isequal(type, 2);   % FINUFFT's: +1 for type 1, -1 for type 2
      end
      % the MEX checks every argument's class, shape and value and names it
      obj.Handle = horecon_mex('nufftCreate', type, modes, points, sign, opts.Tolerance, ...
                               opts.Transforms, precision, backend, opts.Device, opts.Threads);
      obj.Type = double(type);
      obj.Modes = double(modes(:).');
      if numel(modes) == 1
        obj.NumPoints = numel(points);
      else
        obj.NumPoints = size(points, 1);
      end
      obj.NumTransforms = double(opts.Transforms);
      obj.Sign = double(sign);
      obj.Tolerance = double(opts.Tolerance);
      obj.Precision = lower(opts.Precision);
    end

    function delete(obj)
      %DELETE  delete(nu): frees the plan once; deleting again does nothing, and a
      %   deleted plan is rejected (horecon:invalidArgument).
      if obj.Handle ~= 0
        h = obj.Handle;
        obj.Handle = uint64(0);
        horecon_mex('nufftDestroy', h);
      end
    end

    function out = execute(obj, in)
      %EXECUTE  out = nu.execute(in): the plan's transforms. Type 1: in = c (npoints x
      %   ntransforms) -> out = f (modes(1) x ... x ntransforms); type 2: in = f -> out = c
      %   (npoints x ntransforms). Complex results of the plan's precision.
      if nargin < 2
        error('horecon:invalidArgument', 'usage: out = nu.execute(in): the input array is missing');
      end
      out = horecon_mex('nufftExecute', obj.Handle, in);
      if obj.Type == 1
        out = reshape(out, [obj.Modes, obj.NumTransforms]);
      else
        out = reshape(out, obj.NumPoints, obj.NumTransforms);
      end
    end
  end

  methods (Static, Access = private)
    function c = code(value, names, codes, what)
      match = [];
      if ischar(value)
        match = find(strcmpi(names, value));
      end
      if isempty(match)
        error('horecon:invalidArgument', '%s must be one of: %s', what, strjoin(names, ', '));
      end
      c = codes(match);
    end
  end
end
