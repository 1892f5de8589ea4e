function results = higher_order_workflow(varargin)
%HIGHER_ORDER_WORKFLOW  Higher-order reconstruction as in Bieri et al. 2011 /
%   Wilm et al. 2011, on simulated data (the MATLAB/Octave twin of
%   `cargo run --release --example demo`, same settings and seeds).
%
%   results = higher_order_workflow('Size', 128, 'Iterations', 20, ...)
%
%   An off-centre axial slice (z = 20 mm, so the z-dependent terms matter) of
%   the Shepp-Logan phantom, 8 coils, a 3-fold undersampled single-shot
%   spiral, 16-term higher-order field coefficients (nominal trajectory plus
%   eddy-current-like deviations of orders 0-3) and a B0 map. The data are
%   simulated on a 2x finer grid with noise (no inverse crime) and
%   reconstructed by CG with
%     (a) the full model            (16 solid harmonics + B0)
%     (b) the nominal trajectory    (k only)
%     (c) higher order without B0
%     (d) B0 without higher order.
%   Prints NRMSE, PSNR and seconds for each and writes a PNG montage (top:
%   truth, (a)-(d); bottom: B0 map, |error| x5 of (a)-(d)). With
%   'Approximation', tol > 0 it also runs
%     (f) the full model on the fast path (p.Approximation = tol: separable
%         expansion + NUFFT, relative error vs the exact operator <= tol)
%   and prints its rank K and measured error (p.approximationInfo()).
%
%   Options (defaults): Size 128, Iterations 20, SNR 100, MaxHz 120 (B0 peak),
%   Strength 1 (eddy currents), Dwell 1e-5 s, Undersampling 3, Coils 8,
%   Z 0.02 m, Backend 'auto', Output 'higher_order_workflow.png' ('' = none),
%   Quiet false, Calibrate false, Approximation 0 (no scenario (f)).
%
%   'Calibrate', true adds the calibration chain (issue 12) as reconstruction
%   (e): the data get correlated coil noise; a noise prescan and a 3-echo
%   Cartesian reference (SNR 50, same noise) are simulated; the chain then
%   whitens (noise covariance from the prescan), computes ESPIRiT maps from
%   the reference's first echo, the B0 map from its three echoes, and the
%   delay of the field camera's coefficients (which lag the data by 6.3 us),
%   and reconstructs with all of them, printing each step's figure against
%   the truth (results(5) has the figures in fields mapNrmse, b0RmsHz,
%   delayErrorUs).
%
%   results: struct array with fields name, nrmse, psnr, seconds,
%   iterations, backend, image; results(1) is (a), results(2) is (b).
opts = struct('Size', 128, 'Iterations', 20, 'SNR', 100, 'MaxHz', 120, 'Strength', 1, ...
              'Dwell', 1e-5, 'Undersampling', 3, 'Coils', 8, 'Z', 0.02, 'Backend', 'auto', ...
              'Output', 'higher_order_workflow.png', 'Quiet', false, 'Calibrate', false, ...
              'Approximation', 0);
names = fieldnames(opts);
for i = 1:2:numel(varargin)
  match = find(strcmpi(names, varargin{i}));
  if isempty(match)
    error('horecon:invalidArgument', 'unknown option %s', varargin{i});
  end
  opts.(names{match}) = varargin{i + 1};
end
say = @(varargin) [];
if ~opts.Quiet
  say = @(varargin) fprintf(varargin{:});
end

n = opts.Size;
L = opts.Coils;
dims = [n n 1];
fov = [0.22 0.22 0.22 / n];
center = [0 0 opts.Z];
phantomFov = [0.2 0.2 0];

% Acquisition: spiral (readout starts 2 ms after excitation), field model, coils, B0.
[k, t] = horecon.sim.spiral(n, fov(1), opts.Undersampling, opts.Dwell, 2e-3);
M = size(k, 1);
coef = horecon.sim.fieldCoefficients(k, opts.Dwell, opts.Strength, 2011);
say('horecon %s: %dx%d slice at z = %g mm, %d coils, spiral R = %g (%d samples, %.1f ms), 16 terms, B0 ~%g Hz, SNR %g\n', ...
    horecon.version(), n, n, 1e3 * opts.Z, L, opts.Undersampling, M, 1e3 * M * opts.Dwell, opts.MaxHz, opts.SNR);

% Data on the 2x finer grid; voxel weight 1/4 so four sub-voxels add up to one voxel.
started = tic;
Pf = horecon.sim.refinedGrid(dims, fov, center, 2);
rhof = horecon.sim.sheppLogan(2, phantomFov, center, Pf);
pf = horecon.Plan([2 * n, 2 * n, 1], L, M, 'Backend', opts.Backend);
pf.setPositions(Pf);
pf.setSolidHarmonics(coef);
pf.setOffResonance(horecon.sim.offResonance(Pf, phantomFov, center, opts.MaxHz), t);
pf.setSensitivities(horecon.sim.coilSensitivities(Pf, L, 0.15));
d = pf.forward(rhof / 4);
dclean = d;
delete(pf);
d = horecon.sim.addNoise(d, opts.SNR, 7);
truth = reshape(horecon.sim.blockAverage(rhof, dims, 2), n, n);
say('data simulated on the %dx%d grid in %.1f s\n', 2 * n, 2 * n, toc(started));

% Reconstruction on the grid, with the coils and B0 map known there.
P = horecon.sim.refinedGrid(dims, fov, center, 1);
w = horecon.sim.offResonance(P, phantomFov, center, opts.MaxHz);
p = horecon.Plan(dims, L, M, 'Backend', opts.Backend);
p.setGridPositions(fov, center);
p.setSensitivities(horecon.sim.coilSensitivities(P, L, 0.15));
scenarios = {'(a) full model: 16 terms + B0', true, true; ...
             '(b) nominal trajectory only', false, false; ...
             '(c) higher order, no B0', true, false; ...
             '(d) B0, no higher order', false, true};
results = struct('name', {}, 'nrmse', {}, 'psnr', {}, 'seconds', {}, 'iterations', {}, ...
                 'backend', {}, 'image', {}, 'mapNrmse', {}, 'b0RmsHz', {}, 'delayErrorUs', {});
say('%-34s %8s %9s %9s  backend (%d CG iterations)\n', 'reconstruction', 'NRMSE', 'PSNR/dB', 'seconds', opts.Iterations);
for s = 1:size(scenarios, 1)
  if scenarios{s, 2}
    p.setSolidHarmonics(coef);
  else
    p.setTrajectory(k);
  end
  if scenarios{s, 3}
    p.setOffResonance(w, t);
  else
    p.setOffResonance([]);
  end
  started = tic;
  [x, info] = p.cg(d, 'MaxIterations', opts.Iterations, 'Tolerance', 1e-9);
  seconds = toc(started);
  r.name = scenarios{s, 1};
  r.nrmse = horecon.sim.nrmse(x, truth);
  r.psnr = horecon.sim.psnr(x, truth);
  r.seconds = seconds;
  r.iterations = info.iterations;
  r.backend = info.backend;
  r.image = x;
  [r.mapNrmse, r.b0RmsHz, r.delayErrorUs] = deal([]);
  results(end + 1) = r; %#ok<AGROW>
  say('%-34s %8.4f %9.2f %9.2f  %s\n', r.name, r.nrmse, r.psnr, r.seconds, r.backend);
end
say('full model vs nominal: NRMSE %.1fx lower\n', results(2).nrmse / results(1).nrmse);

if opts.Calibrate
  r = calibrated(p, opts, dims, fov, center, phantomFov, Pf, rhof, P, truth, w, dclean, coef, t, say);
  results(end + 1) = r;
end

if opts.Approximation > 0
  % (f) The full model on the fast path: same data, same CG, E by separable expansion + NUFFT.
  p.setSolidHarmonics(coef);
  p.setOffResonance(w, t);
  p.Approximation = opts.Approximation;
  started = tic;
  approx = p.approximationInfo();
  [x, info] = p.cg(d, 'MaxIterations', opts.Iterations, 'Tolerance', 1e-9);
  r.name = sprintf('(f) (a) on the fast path, tol %g', opts.Approximation);
  r.nrmse = horecon.sim.nrmse(x, truth);
  r.psnr = horecon.sim.psnr(x, truth);
  r.seconds = toc(started);
  r.iterations = info.iterations;
  r.backend = info.backend;
  r.image = x;
  results(end + 1) = r;
  say('%-34s %8.4f %9.2f %9.2f  %s (K = %d, measured error %.1e, set-up included)\n', r.name, ...
      r.nrmse, r.psnr, r.seconds, r.backend, approx.rank, approx.estimatedError);
  p.Approximation = 0;
end

if ~isempty(opts.Output)
  peak = max(abs(truth(:)));
  tile = @(v) flipud(min(max(v.', 0), 1));        % x across, y up
  gap = 0.15 * ones(n, 4);
  top = tile(abs(truth) / peak);
  bottom = tile(0.5 + 0.5 * reshape(w, n, n) / max(abs(w)));
  for s = 1:4
    top = [top, gap, tile(abs(results(s).image) / peak)]; %#ok<AGROW>
    bottom = [bottom, gap, tile(5 * abs(results(s).image - truth) / peak)]; %#ok<AGROW>
  end
  montage = [top; 0.15 * ones(4, size(top, 2)); bottom];
  imwrite(uint8(round(255 * montage)), opts.Output);
  say('montage written to %s (top: truth, (a)-(d); bottom: B0 map, |error| x5)\n', opts.Output);
end
end

function r = calibrated(p, opts, dims, fov, center, phantomFov, Pf, rhof, P, truth, w, dclean, coef, t, say)
% The calibration chain on simulated reference scans (see 'Calibrate' above).
L = opts.Coils;
N = prod(dims);
te = [2 4.5 7] * 1e-3;
say('calibration chain: noise prescan, 3-echo Cartesian reference, field camera 6.3 us late\n');
started = tic;
level = sqrt(mean(abs(dclean(:)) .^ 2)) / opts.SNR;
psi = horecon.sim.noiseCovariance(L, 0.5, 1, 12);
psi = psi * (level ^ 2 / mean(real(diag(psi))));
d = horecon.sim.correlatedNoise(psi, dclean, 7);
psiHat = horecon.calib.noiseCovariance(horecon.sim.correlatedNoise(psi, zeros(4000, L), 8));
white = horecon.calib.whiten(psiHat, horecon.sim.correlatedNoise(psi, zeros(4000, L), 10));
say('  1. whitening: largest |cov - I| of whitened fresh noise %.3f\n', ...
    max(max(abs(horecon.calib.noiseCovariance(white) - eye(L)))));
Sf = horecon.sim.coilSensitivities(Pf, L, 0.15);
wf = horecon.sim.offResonance(Pf, phantomFov, center, opts.MaxHz);
ref = horecon.sim.reference(dims, fov, center, Pf, rhof, Sf, wf, te, 1 / 4);
refLevel = sqrt(mean(abs(ref(:)) .^ 2)) / 50;
rows = reshape(permute(reshape(ref, N, L, 3), [1 3 2]), N * 3, L);   % (voxel, echo) x coil
rows = horecon.sim.correlatedNoise(psi * (refLevel / level) ^ 2, rows, 9);
whiteRows = horecon.calib.whiten(psiHat, rows);
[maps, ~] = horecon.calib.espirit(p, whiteRows(1:N, :), dims, fov, center);
SW = horecon.calib.whiten(psiHat, horecon.sim.coilSensitivities(P, L, 0.15));
g = sum(conj(maps) .* SW, 2);                       % |C\S| times the maps' phase
mask = abs(truth(:)) > 0.05;
tn = SW ./ sqrt(sum(abs(SW) .^ 2, 2));
aligned = maps .* (g ./ max(abs(g), eps));
r.mapNrmse = norm(aligned(mask, :) - tn(mask, :), 'fro') / norm(tn(mask, :), 'fro');
say('  2. ESPIRiT maps: NRMSE inside the object %.2f %%\n', 100 * r.mapNrmse);
wHat = horecon.calib.b0Map(p, reshape(permute(reshape(rows, N, 3, L), [1 3 2]), N, L * 3), te, dims, fov, center);
r.b0RmsHz = sqrt(mean((wHat(mask) - w(mask)) .^ 2)) / (2 * pi);
say('  3. B0 map: RMS error inside the object %.2f Hz\n', r.b0RmsHz);
trueDelay = 6.3e-6;
lagging = interp1(t, coef, t - trueDelay, 'spline', 'extrap');
dW = horecon.calib.whiten(psiHat, d);
p.setSensitivities(maps);
p.setOffResonance(wHat, t);
p.setSolidHarmonics(lagging);
delay = horecon.calib.estimateDelay(p, dW, t, [], 'Iterations', 6, 'Step', 3e-6, 'Range', 12e-6);
r.delayErrorUs = abs(delay - trueDelay) * 1e6;
say('  4. delay: true %.2f us, estimated %.2f us\n', 1e6 * trueDelay, 1e6 * delay);
p.setSolidHarmonics(interp1(t, lagging, t + delay, 'spline', 'extrap'));
[x, info] = p.cg(dW, 'MaxIterations', opts.Iterations, 'Tolerance', 1e-9);
target = reshape(truth(:) .* g, size(truth));     % what the calibrated model reconstructs
r.name = '(e) calibrated: whitened, ESPIRiT, B0, delay';
r.nrmse = horecon.sim.nrmse(x, target);
r.psnr = horecon.sim.psnr(x, target);
r.seconds = toc(started);
r.iterations = info.iterations;
r.backend = info.backend;
r.image = x;
say('  5. %-34s NRMSE %.4f (%.1f s for the chain)\n', r.name, r.nrmse, r.seconds);
end
