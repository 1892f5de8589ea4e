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
% Weighted finite differences against the .m normal equations
% (E'E + lambda D'UD) x = E'd, D forward differences along x and y (no wrap:
% the last voxel of each axis has no edge).
[ix, iy] = ndgrid(1:dims(1), 1:dims(2));
D = zeros(0, N);
u = 0.5 + rand(N, 2);
U = [];
for axis = 1:2
  step = [1 dims(1)];
  last = {ix(:) == dims(1), iy(:) == dims(2)};
  for n = 1:N
    if ~last{axis}(n)
      row = zeros(1, N); row(n) = -1; row(n + step(axis)) = 1;
      D(end + 1, :) = row; %#ok<AGROW>
      U(end + 1, 1) = u(n, axis); %#ok<AGROW>
    end
  end
end
x_ref = (E' * E + lambda * D' * (U .* D)) \ (E' * double(d(:)));
x = p.cg(d, 'Regularizer', 'finitedifference', 'Lambda', lambda, 'FdWeights', u, 'MaxIterations', 300, ...
         'Tolerance', 1e-8);
assert(rel_error(x(:), x_ref) < 1e-4, 'finite-difference cg: %g', rel_error(x(:), x_ref));
% 'Neighbours', 26 on this 2D grid: the 8-neighbourhood, directions e0, e1,
% e0+e1, e0-e1 (offsets [1 0], [0 1], [1 1], [1 -1]) weighted 1/|d|^2.
offsets = [1 0; 0 1; 1 1; 1 -1];
u4 = 0.5 + rand(N, 4);
D = zeros(0, N);
U = [];
for k = 1:4
  for n = 1:N
    jx = ix(n) + offsets(k, 1);
    jy = iy(n) + offsets(k, 2);
    if jx >= 1 && jx <= dims(1) && jy >= 1 && jy <= dims(2)
      row = zeros(1, N); row(n) = -1; row(jx + dims(1) * (jy - 1)) = 1;
      D(end + 1, :) = row; %#ok<AGROW>
      U(end + 1, 1) = u4(n, k) / sum(offsets(k, :) .^ 2); %#ok<AGROW>
    end
  end
end
x_ref = (E' * E + lambda * D' * (U .* D)) \ (E' * double(d(:)));
x = p.cg(d, 'Regularizer', 'finitedifference', 'Lambda', lambda, 'FdWeights', u4, 'Neighbours', 26, ...
         'MaxIterations', 300, 'Tolerance', 1e-8);
assert(rel_error(x(:), x_ref) < 1e-4, 'finite-difference cg, 26 neighbours: %g', rel_error(x(:), x_ref));
% TV runs its reweighting steps; every iteration's residual is reported.
[x, info] = p.cg(d, 'Regularizer', 'totalvariation', 'Lambda', 0.1, 'Reweightings', 3, 'MaxIterations', 10, ...
                 'Tolerance', 0);
assert(all(isfinite(x(:))) && info.iterations == 30 && numel(info.residuals) == 30, 'TV: %d iterations', ...
       info.iterations);
% Verbose prints per iteration (and does not fail).
[~, info] = p.cg(d, 'MaxIterations', 2, 'Verbose', true);
assert(info.iterations == 2);
end
