function test_cg()
%TEST_CG  cg recovers an image from consistent data, reports info, takes
%   weights, warm starts and Tikhonov, and matches the .m normal equations.
test_seed('test_cg');
dims = [8 8 1];
N = prod(dims);
[k, t] = horecon.sim.spiral(8, 0.2, 0.5, 4e-6, 0);
M = size(k, 1);
p = horecon.Plan(dims, 4, M);
p.setGridPositions([0.2 0.2 0.005], [0 0 0.02]);
p.setTrajectory(k);
P = horecon.sim.refinedGrid(dims, [0.2 0.2 0.005], [0 0 0.02], 1);
S = horecon.sim.coilSensitivities(P, 4, 0.15);
p.setSensitivities(S);
x_true = complex(randn(N, 1), randn(N, 1));
d = p.forward(x_true);
[x, info] = p.cg(d, 'MaxIterations', 200, 'Tolerance', 1e-7);
fprintf('    %d iterations, converged %d, relative residual %.1e, %.3f s on %s, error %.1e\n', ...
        info.iterations, info.converged, info.relResidual, info.seconds, info.backend, rel_error(x(:), x_true));
assert(info.converged && rel_error(x(:), x_true) < 1e-3, 'cg recovers the image');
assert(numel(info.residuals) == info.iterations);
% Tikhonov against the .m normal equations (E'WE + lambda I) x = E'W d.
E = ref_encoding(P(:, 1:2), k, [], [], double(S));
w = 0.5 + rand(M, 1);
lambda = 3;
W = repmat(w, 4, 1);
x_ref = (E' * (W .* E) + lambda * eye(N)) \ (E' * (W .* double(d(:))));
x = p.cg(d, 'Regularizer', 'tikhonov', 'Lambda', lambda, 'SampleWeights', w, 'MaxIterations', 300, 'Tolerance', 1e-8);
assert(rel_error(x(:), x_ref) < 1e-4, 'weighted Tikhonov cg: %g', rel_error(x(:), x_ref));
% A warm start at the solution converges at once.
[~, info] = p.cg(d, 'X0', x_true, 'Tolerance', 1e-4);
assert(info.iterations <= 1, 'warm start at the solution');
% Verbose prints per iteration (and does not fail).
[~, info] = p.cg(d, 'MaxIterations', 2, 'Verbose', true);
assert(info.iterations == 2);
end
