classdef Plan < handle
%horecon.Plan  A reconstruction plan: geometry, phase model, coils and operators.
%
%   p = horecon.Plan([nx ny nz], ncoils, nsamples, 'Backend', 'auto', ...
%                    'Precision', 'accurate', 'Device', 0, 'Threads', 0)
%
%   Backend    'auto' (CUDA when usable, else CPU) | 'cpu' | 'cuda'
%   Precision  'accurate' (<= 1e-5) | 'fast' (<= 1e-3) | 'double' (<= 1e-7)
%   Device     first CUDA device (0-based);  Threads  CPU threads (0 = all)
%
%   Model (MODEL.md): phi(j,n) = sum_b coef(j,b)*H(n,b) + w(n)*t(j),
%   E((j,c),n) = S(n,c)*exp(+1i*phi(j,n)). Positions in metres, k in rad/m;
%   a user whose convention is exp(-1i*k*r) passes -k.
%
%   Methods: setPositions(P) (N x 3), setGridPositions(fov, center),
%   setCartesian(mask) (logical [nx ny nz]: Cartesian FFT mode),
%   setSolidHarmonics(coef) (M x B, B = 1, 4, 9, 16), setBasis(H, coef),
%   setTrajectory(k) (M x d), setOffResonance(w, t) (w = [] clears),
%   setSensitivities(S) (N x L or [nx ny nz L]), d = forward(x),
%   x = adjoint(d), y = normal(x), [x, info] = cg(d, ...), x = gridding(d, dcf), backend().
%
%   Fast path: p.Approximation = 1e-3 makes forward, adjoint, normal and cg use
%   a separable expansion of the higher-order and off-resonance phase on top of
%   a NUFFT (relative RMS error vs the exact operator <= Approximation; 0, the
%   default, = exact). p.approximationInfo() returns active, rank,
%   estimatedError (measured against the exact operator) and reason.
%
%   Inputs may be double or single, real or complex; results are single
%   complex. Errors have identifiers horecon:<status> (horecon:sizeMismatch,
%   horecon:notFinite, ...) and messages that name the argument. delete(p)
%   (or clearing the last reference) destroys the plan; deleting twice is
%   harmless. Long calls show their progress (horecon.progress) and Ctrl-C
%   cancels them (horecon:cancelled; the plan stays usable).

  properties (SetAccess = private)
    Dims        % [nx ny nz]
    NumCoils    % L
    NumSamples  % M
  end

  properties (Access = private)
    Handle = uint64(0)
  end

  properties (Dependent)
    Approximation  % 0 = exact (default); 1e-5 .. 0.1 = the fast path's tolerance
  end

  properties (Access = private)
    ApproximationValue = 0
  end

  methods
    function obj = Plan(dims, ncoils, nsamples, varargin)
      %PLAN  p = horecon.Plan([nx ny nz], ncoils, nsamples, 'Backend', 'auto', 'Precision',
      %   'accurate', 'Device', 0, 'Threads', 0): a plan for nx*ny*nz voxels, ncoils receive
      %   coils and nsamples samples per coil (see help horecon.Plan).
      if nargin < 3
        error('horecon:invalidArgument', 'usage: horecon.Plan([nx ny nz], ncoils, nsamples, ...)');
      end
      opts = struct('Backend', 'auto', 'Precision', 'accurate', 'Device', 0, 'Threads', 0);
      opts = horecon.internal.parseOptions(opts, varargin);
      backend = horecon.Plan.code(opts.Backend, {'auto', 'cpu', 'cuda'}, 'Backend');
      precision = horecon.Plan.code(opts.Precision, {'accurate', 'fast', 'double'}, 'Precision');
      if ~(isnumeric(dims) || islogical(dims)) || ~isreal(dims) || issparse(dims)
        kind = class(dims);
        if issparse(dims), kind = ['sparse ' kind]; elseif ~isreal(dims), kind = ['complex ' kind]; end
        error('horecon:invalidArgument', 'dims must be a real full numeric vector [nx ny nz], got %s', kind);
      end
      dims = double(dims(:).');
      % counts and options keep their class: horecon_mex names a non-numeric one
      obj.Handle = horecon_mex('create', dims, ncoils, nsamples, ...
                               backend, precision, opts.Device, opts.Threads);
      obj.Dims = [dims, ones(1, 3 - numel(dims))];
      obj.NumCoils = double(ncoils);
      obj.NumSamples = double(nsamples);
    end

    function delete(obj)
      %DELETE  delete(p): destroys the plan once; later calls (and Octave's own
      %   deletion) do nothing, and a deleted plan's handle is rejected.
      if obj.Handle ~= 0
        h = obj.Handle;
        obj.Handle = uint64(0);
        horecon_mex('destroy', h);
      end
    end

    function setPositions(obj, P)
      %SETPOSITIONS  p.setPositions(P): voxel positions r_n, P is N x 3 (x, y, z) in metres;
      %   any positions (oblique slices, masks). Re-evaluates a solid-harmonic basis.
      horecon_mex('setPositions', obj.Handle, P);
    end

    function setGridPositions(obj, fov, center)
      %SETGRIDPOSITIONS  p.setGridPositions(fov, center): an axis-aligned grid,
      %   x_i = center(1) + (i - floor(nx/2))*fov(1)/nx (likewise y, z), fov and center
      %   [x y z] in metres (center defaults to [0 0 0]).
      if nargin < 3
        center = [0 0 0];
      end
      horecon_mex('setGridPositions', obj.Handle, fov, center);
    end

    function setCartesian(obj, mask)
      %SETCARTESIAN  Cartesian FFT mode: the samples are the grid points where
      %   mask (nx x ny x nz, logical or numeric, ~= 0 = sampled) is set, in
      %   column-major order (mask(:)), so NumSamples must equal nnz(mask).
      %   Needs setGridPositions (or setPositions on an axis-aligned grid). Sets
      %   the trajectory k = 2*pi*(p - floor(n/2))./fov and computes E, E^H,
      %   E^H E and cg exactly with FFTs. A later positions or phase-model setter
      %   leaves Cartesian mode; off-resonance is refused.
      horecon_mex('setCartesian', obj.Handle, mask);
    end

    function setSolidHarmonics(obj, coef)
      %SETSOLIDHARMONICS  p.setSolidHarmonics(coef): the built-in real solid harmonics
      %   (field-camera order 1, x, y, z, xy, zy, 3z^2-r^2, xz, x^2-y^2, ...), coef M x B
      %   in rad/m^order with B = 1, 4, 9 or 16. Needs positions first.
      horecon_mex('setSolidHarmonics', obj.Handle, coef);
    end

    function setBasis(obj, H, coef)
      %SETBASIS  p.setBasis(H, coef): a user basis H (N x B, real) with coefficients coef
      %   (M x B): phi(j,n) = sum_b coef(j,b)*H(n,b) (+ w(n)*t(j)).
      horecon_mex('setBasis', obj.Handle, H, coef);
    end

    function setTrajectory(obj, k)
      %SETTRAJECTORY  p.setTrajectory(k): a k-space trajectory, k M x d (d = 1..3) in
      %   rad/m, phi = k*r (sign +i: for exp(-1i*k*r) pass -k). Needs positions first.
      horecon_mex('setTrajectory', obj.Handle, k);
    end

    function setOffResonance(obj, w, t)
      %SETOFFRESONANCE  p.setOffResonance(w, t): off-resonance w (N x 1 or the image
      %   size, rad/s) and sample times t (M x 1, s after excitation); w = [] clears it.
      if nargin < 3
        t = [];
      end
      horecon_mex('setOffResonance', obj.Handle, w, t);
    end

    function setSensitivities(obj, S)
      %SETSENSITIVITIES  p.setSensitivities(S): complex coil sensitivities, N x L or
      %   [nx ny nz L]; [] means S = 1 (one coil only).
      horecon_mex('setSensitivities', obj.Handle, S);
    end

    function setToeplitz(obj, enable, timeSegments)
      %SETTOEPLITZ  p.setToeplitz(true, 0): normal and cg use the Toeplitz normal
      %   operator (E^H W E by FFTs of the 2x-oversampled grid with exact kernels;
      %   forward and adjoint stay exact). Needs a phase linear in position (a
      %   trajectory, or solid harmonics with terms above order 1 zero) on a voxel
      %   grid, checked at the next normal/cg. With off-resonance, time segmentation
      %   with timeSegments segments (0 = automatic, normal operator within 1e-3).
      %   p.setToeplitz(false) restores the exact normal operator.
      if nargin < 2
        enable = true;
      end
      if nargin < 3
        timeSegments = 0;
      end
      horecon_mex('setToeplitz', obj.Handle, enable, timeSegments);
    end

    function d = forward(obj, x)
      %FORWARD  d = p.forward(x): d = E x, image x (N or [nx ny nz]) to data d (M x L).
      d = horecon_mex('forward', obj.Handle, x);
    end

    function x = adjoint(obj, d)
      %ADJOINT  x = p.adjoint(d): x = E^H d, data d (M x L) to an image of the plan's size.
      x = obj.shape(horecon_mex('adjoint', obj.Handle, d));
    end

    function y = normal(obj, x)
      %NORMAL  y = p.normal(x): y = E^H E x (Toeplitz if setToeplitz(true)), same size as x.
      y = reshape(horecon_mex('normal', obj.Handle, x), size(x));
    end

    function [x, info] = cg(obj, d, varargin)
      %CG  x = p.cg(d, 'MaxIterations', 50, 'Tolerance', 1e-6, 'Regularizer',
      %    'none'|'tikhonov'|'finitedifference'|'totalvariation'|'laplace', 'Lambda', 0,
      %    'SampleWeights', w, 'X0', x0, 'Reweightings', 5, 'Epsilon', 1e-3, 'Sigma', 1,
      %    'FdWeights', u (N x ndims edge weights), 'Neighbours', 6, 'Verbose', false)
      %    solves (E'WE + Lambda*R) x = E'W d (TV and Laplace by 'Reweightings' outer
      %    reweighted finite-difference solves, on the CPU and CUDA backends).
      %    'Neighbours' 6 (or 0): differences along the grid axes; 26: to every neighbour, each edge
      %    once, weighted 1/|d|^2: over the axes e0, e1, e2 of more than one voxel the directions
      %    e0, e1, e2, e0+e1, e0-e1, e0+e2, e0-e2, e1+e2, e1-e2, e0+e1+e2, e0+e1-e2, e0-e1+e2,
      %    e0-e1-e2 (those within the grid's axes: 4 in 2D), one FdWeights column each.
      %    'Preconditioner' 'none'|'diagonal'|'circulant' (circulant needs setToeplitz),
      %    'DiscrepancyTau' tau (0 = off), 'NoiseSigma' sigma: stop at the first iterate with
      %    ||W^1/2 (E x - d)|| <= tau*sigma*sqrt(L*sum(W)) (sigma = 1 for whitened data).
      %    info has iterations, converged,
      %    relResidual, seconds, residuals (per iteration), backend, stopReason
      %    ('tolerance'|'maxIterations'|'discrepancy'|'breakdown') and dataResidual.
      %    Ctrl-C stops it cleanly (error horecon:cancelled).
      opts = struct('MaxIterations', 50, 'Tolerance', 1e-6, 'Regularizer', 'none', 'Lambda', 0, ...
                    'SampleWeights', [], 'X0', [], 'Verbose', false, 'Reweightings', 5, ...
                    'Epsilon', 1e-3, 'Sigma', 1, 'FdWeights', [], 'Neighbours', 6, ...
                    'Preconditioner', 'none', 'DiscrepancyTau', 0, 'NoiseSigma', 1);
      opts = horecon.internal.parseOptions(opts, varargin);
      reg = horecon.Plan.code(opts.Regularizer, ...
        {'none', 'tikhonov', 'finitedifference', 'totalvariation', 'laplace'}, 'Regularizer');
      [x, info] = horecon_mex('cg', obj.Handle, d, opts.MaxIterations, opts.Tolerance, ...
                              reg, opts.Lambda, opts.SampleWeights, opts.X0, opts.Verbose, ...
                              opts.Reweightings, opts.Epsilon, opts.Sigma, opts.FdWeights, ...
                              opts.Neighbours, ...
                              horecon.Plan.code(opts.Preconditioner, {'none', 'diagonal', 'circulant'}, 'Preconditioner'), ...
                              opts.DiscrepancyTau, opts.NoiseSigma);
      x = obj.shape(x);
    end

    function x = gridding(obj, d, dcf)
      %GRIDDING  x = p.gridding(d) or p.gridding(d, dcf): the gridding reconstruction
      %    (Kaiser-Bessel width 6, 2x oversampling, FFT, deapodization), the seeds'
      %    comparison method. Approximates x_c(r_n) = sum_j dcf_j d_jc exp(-i(k0_j + k_j.r_n)),
      %    combined as sum_c conj(S_c) x_c / sum_c |S_c|^2 with sensitivities and as the
      %    root-sum-of-squares for several coils without. Voxels on a regular grid; phase
      %    model setTrajectory or solid harmonics (orders 0 and 1 used, higher orders and
      %    off-resonance ignored); a user basis is refused. dcf M x 1 >= 0, or omitted/[]
      %    for Pipe-Menon weights (scaled so the uniform object's centre voxel is 1).
      if nargin < 3
        dcf = [];
      end
      x = obj.shape(horecon_mex('gridding', obj.Handle, d, dcf));
    end

    function x = fhd(obj, d, phi)
      %FHD  x = p.fhd(d, phi): Stone et al.'s F^H d (eq. 4) for a single-coil
      %    trajectory plan: x_n = sum_m conj(phi_m) d_m exp(+i 2 pi k_m . x_n) with
      %    Stone's k (cycles/m) given to the plan as -2*pi*k; phi omitted or [] = 1.
      if nargin < 3
        phi = [];
      end
      x = obj.shape(horecon_mex('fhd', obj.Handle, d, phi));
    end

    function q = q(obj, phiMag2)
      %Q  q = p.q(phiMag2): Stone et al.'s Q (eq. 3) on the 2x-oversampled grid
      %    of lattice offsets (size p.qDims(); index nx+1, ny+1, nz+1 is offset 0),
      %    q(x) = sum_m |phi_m|^2 exp(+i 2 pi k_m . x); phiMag2 omitted or [] = 1.
      if nargin < 2
        phiMag2 = [];
      end
      dims = horecon_mex('qDims', obj.Handle);
      q = squeeze(reshape(horecon_mex('q', obj.Handle, phiMag2), dims));
    end

    function dims = qDims(obj)
      %QDIMS  The size of Q: 2n along every axis of more than one voxel, else 1.
      dims = horecon_mex('qDims', obj.Handle);
    end

    function h = mexHandle(obj)
      % The plan's handle for horecon_mex (used by horecon.calib.*).
      h = obj.Handle;
    end

    function set.Approximation(obj, tolerance)
      horecon_mex('setApproximation', obj.Handle, tolerance);
      obj.ApproximationValue = double(tolerance);
    end

    function tolerance = get.Approximation(obj)
      tolerance = obj.ApproximationValue;
    end

    function info = approximationInfo(obj)
      %APPROXIMATIONINFO  The fast path's state: active (logical), rank (K),
      %   estimatedError (relative RMS error of E and E^H vs the exact operator,
      %   measured on random probes when the plan is prepared) and reason (why
      %   inactive). Prepares the plan if needed.
      info = horecon_mex('approximationInfo', obj.Handle);
    end

    function name = backend(obj)
      %BACKEND  'cpu' or 'cuda': where the operators of this plan run.
      name = horecon_mex('backend', obj.Handle);
    end
  end

  methods (Access = private)
    function x = shape(obj, x)
      x = squeeze(reshape(x, obj.Dims));
      if isvector(x)
        x = x(:);
      end
    end
  end

  methods (Static, Access = private)
    function c = code(value, names, what)
      if isnumeric(value) && isscalar(value)
        c = double(value);
        return;
      end
      c = [];
      if ischar(value), c = find(strcmpi(names, value)) - 1; end
      if isempty(c)
        error('horecon:invalidArgument', '%s must be one of: %s', what, strjoin(names, ', '));
      end
    end
  end
end
