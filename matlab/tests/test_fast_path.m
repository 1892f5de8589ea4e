function test_fast_path()
%TEST_FAST_PATH  p.Approximation (the fast path, issue 17) from MATLAB/Octave:
%   a 3D higher-order problem with B0 against the float64 direct sum at 1e-2
%   and 1e-3, the info (active, rank, estimatedError within 3x of the true
%   error), bad tolerances, the exact path for voxels off a lattice, and the
%   workflow's scenario (f) reaching the exact path's image quality.
rng(17);
dims = [9 8 5];
N = prod(dims);
M = 300;
L = 2;
fov = [0.2 0.2 0.1];
P = horecon.sim.refinedGrid(dims, fov, [0 0 0.01], 1);
tau = (0:M - 1)' / M;
coef = zeros(M, 9);
coef(:, 1) = sin(2 * pi * tau);
coef(:, 2) = (pi * 8 / 0.2) * tau .* cos(8 * pi * tau);
coef(:, 3) = (pi * 8 / 0.2) * tau .* sin(8 * pi * tau);
coef(:, 4) = (pi * 5 / 0.1) * (2 * mod(3 * tau, 1) - 1) / 2;
coef(:, 5:9) = 300 * (1 - exp(-tau ./ [0.2 0.3 0.4 0.5 0.6])) .* [1 -1 0.5 -0.7 0.8];
t = 0.03 * tau;
w = 2 * pi * 60 * exp(-sum(P .^ 2, 2) / (2 * 0.05 ^ 2));
S = complex(randn(N, L), randn(N, L));
p = horecon.Plan(dims, L, M, 'Backend', 'cpu');
p.setPositions(P);
p.setSolidHarmonics(coef);
p.setOffResonance(w, t);
p.setSensitivities(S);
assert(p.Approximation == 0);
info = p.approximationInfo();
assert(~info.active && info.rank == 0 && ~isempty(info.reason));
x = complex(randn(N, 1), randn(N, 1));
E = ref_encoding(ref_solid_harmonics(P, 9), coef, w, t, S);
for tol = [1e-2 1e-3]
  p.Approximation = tol;
  info = p.approximationInfo();
  assert(info.active, info.reason);
  e = rel_error(p.forward(x), E * x);
  fprintf('    tol %g: K %d, estimated %.2e, true %.2e\n', tol, info.rank, info.estimatedError, e);
  assert(e <= tol, 'forward error %g at tolerance %g', e, tol);
  assert(info.estimatedError <= 3 * e * 1.5 && e <= 3 * info.estimatedError * 1.5);
end
expect_error('horecon:invalidArgument', @() set_approximation(p, -1));
expect_error('horecon:invalidArgument', @() set_approximation(p, NaN));
assert(p.Approximation == 1e-3, 'a refused tolerance leaves the plan as it was');
% Voxels off any lattice: exact path with the reason.
p.setPositions(P + 1e-3 * rand(N, 3));
p.setSolidHarmonics(coef);
info = p.approximationInfo();
assert(~info.active && ~isempty(strfind(info.reason, 'lattice')), info.reason);
delete(p);
% The workflow's fast-path scenario (f).
r = higher_order_workflow('Size', 48, 'Dwell', 2e-5, 'Iterations', 15, 'Output', '', ...
                          'Quiet', true, 'Approximation', 1e-3);
fprintf('    workflow NRMSE exact %.4f, fast path %.4f\n', r(1).nrmse, r(5).nrmse);
assert(abs(r(5).nrmse - r(1).nrmse) <= 0.05 * r(1).nrmse, 'the fast path must match the exact image quality');
end

function set_approximation(p, tol)
p.Approximation = tol;
end
