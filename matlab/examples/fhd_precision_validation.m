function results = fhd_precision_validation(varargin)
%FHD_PRECISION_VALIDATION  The seeds' F^H d validation (Kirk & Hwu, ch. 14,
%   fig. 14.19; Stone et al. 2008): how much do single precision and fast
%   sin/cos cost against double precision?
%
%   results = fhd_precision_validation('Size', 64, 'Iterations', 15)
%
%   Pure Fourier data of the 2D Shepp-Logan phantom on a fully sampled spiral
%   (its analytic transform, so no inverse crime), then for each precision
%   mode of horecon ('double' = CPU.DP, 'accurate' = single precision,
%   'fast' = hardware-like fast sin/cos as the seeds' FastTrig):
%     - F^H d and its relative error and PSNR against a float64 direct sum in .m;
%     - the least-squares reconstruction (CG on F^H F x = F^H d) and its
%       percent error (Stone et al.) and PSNR (Kirk-Hwu fig. 14.18) against
%       the true image.
%   In the model's terms (MODEL.md) Stone's F_{m,n} = exp(-i 2 pi k_m x_n) is
%   E with coefficients -2 pi k; here k is already in rad/m with E's +i sign.
%
%   results: struct array (mode, seconds, fhdError, fhdPsnr, percentError, psnr).
opts = struct('Size', 64, 'Iterations', 15, 'Backend', 'auto', 'Quiet', false);
names = fieldnames(opts);
for i = 1:2:numel(varargin)
  match = find(strcmpi(names, varargin{i}));
  if isempty(match)
    error('horecon:invalidArgument', 'unknown option %s', varargin{i});
  end
  opts.(names{match}) = varargin{i + 1};
end
n = opts.Size;
dims = [n n 1];
fov = [0.22 0.22 0.22 / n];
center = [0 0 0];
phantomFov = [0.2 0.2 0];
[k, ~] = horecon.sim.spiral(n, fov(1), 1, 4e-6, 0);
M = size(k, 1);
% Voxel-sum units: sum_n rho(r_n) exp(+i k r_n) ~ F(k) / (dx dy).
d = horecon.sim.sheppLoganKspace(2, phantomFov, center, k) / (fov(1) * fov(2) / n^2);
truth = horecon.sim.blockAverage(horecon.sim.sheppLogan(2, phantomFov, center, ...
          horecon.sim.refinedGrid(dims, fov, center, 4)), dims, 4);
P = horecon.sim.refinedGrid(dims, fov, center, 1);

% float64 reference F^H d in plain .m, in chunks of samples
fhd_ref = zeros(n * n, 1);
for j0 = 1:2048:M
  j = j0:min(M, j0 + 2047);
  fhd_ref = fhd_ref + exp(-1i * (P(:, 1:2) * k(j, :).')) * d(j);
end

modes = {'double', 'accurate', 'fast'};
results = struct('mode', {}, 'seconds', {}, 'fhdError', {}, 'fhdPsnr', {}, 'percentError', {}, 'psnr', {});
if ~opts.Quiet
  fprintf('F^H d validation (Kirk-Hwu fig. 14.19): %dx%d, spiral with %d samples, %d CG iterations\n', ...
          n, n, M, opts.Iterations);
  fprintf('%-9s %9s %12s %12s %12s %12s\n', 'mode', 'F^H d s', 'F^H d error', 'F^H d PSNR', 'recon error', 'recon PSNR');
end
for m = 1:numel(modes)
  p = horecon.Plan(dims, 1, M, 'Precision', modes{m}, 'Backend', opts.Backend);
  p.setGridPositions(fov, center);
  p.setTrajectory(k);
  started = tic;
  fhd = p.adjoint(d);
  r.mode = modes{m};
  r.seconds = toc(started);
  r.fhdError = norm(double(fhd(:)) - fhd_ref) / norm(fhd_ref);
  r.fhdPsnr = horecon.sim.psnr(fhd(:), fhd_ref);
  x = p.cg(d, 'MaxIterations', opts.Iterations, 'Tolerance', 1e-9);
  r.percentError = horecon.sim.percentError(x(:), truth);
  r.psnr = horecon.sim.psnr(x(:), truth);
  results(end + 1) = r; %#ok<AGROW>
  if ~opts.Quiet
    fprintf('%-9s %9.3f %12.2e %9.1f dB %10.2f %% %9.2f dB\n', r.mode, r.seconds, r.fhdError, r.fhdPsnr, ...
            r.percentError, r.psnr);
  end
  delete(p);
end
end
