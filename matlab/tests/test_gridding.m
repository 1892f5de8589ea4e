function test_gridding()
%TEST_GRIDDING  p.gridding against the direct sum sum_j w_j d_j exp(-i k_j.r_n)
%   (2D and 3D, odd and even sizes), with S^H and root-sum-of-squares coil
%   combination, Pipe-Menon weights on a smooth object, and refusals.
test_seed('test_gridding');
fov = 0.2;
dimsList = {[12 9 1], [7 6 5]};
for c = 1:numel(dimsList)
  dims = dimsList{c};
  nd = nnz(dims > 1);
  M = 250;
  L = 2;
  P = grid_of(dims, fov);
  k = (2 * rand(M, nd) - 1) * 1.5 * pi .* (dims(1:nd) / fov);
  d = complex(randn(M, L), randn(M, L));
  w = 2 * rand(M, 1);
  p = horecon.Plan(dims, L, M, 'Backend', 'cpu');
  p.setGridPositions([fov fov fov], [0 0 0]);
  p.setTrajectory(k);
  percoil = exp(-1i * P(:, 1:nd) * k.') * (w .* d);    % N x L
  x = p.gridding(d, w);
  e = rel_error(x(:), sqrt(sum(abs(percoil).^2, 2)));
  fprintf('  %s rss: %.1e\n', mat2str(dims), e);
  assert(e < 1e-4, 'rss %s: %g', mat2str(dims), e);
  S = complex(randn(prod(dims), L), randn(prod(dims), L));
  p.setSensitivities(S);
  x = p.gridding(d, w);
  expect = sum(conj(S) .* percoil, 2) ./ sum(abs(S).^2, 2);
  e = rel_error(x(:), expect);
  fprintf('  %s S^H: %.1e\n', mat2str(dims), e);
  assert(e < 1e-4, 'S^H %s: %g', mat2str(dims), e);
  expect_error('horecon:invalidArgument', @() p.gridding(d, -w));
  expect_error('horecon:sizeMismatch', @() p.gridding(d, w(1:end - 1)));
  dn = d; dn(4) = NaN;
  expect_error('horecon:notFinite', @() p.gridding(dn, w));
end

% Pipe-Menon weights (dcf omitted): a smooth object from its exact data on a radial trajectory
n = 32; fov = 0.22;
t = ((0:2 * n - 1) - n).' * pi / fov;
k = [];
for a = (0:2 * n - 1) * pi / (2 * n)
  k = [k; t * cos(a), t * sin(a)]; %#ok<AGROW>
end
p = horecon.Plan([n n 1], 1, size(k, 1), 'Backend', 'cpu');
p.setGridPositions([fov fov fov], [0 0 0]);
p.setTrajectory(k);
P = grid_of([n n 1], fov);
x0 = exp(-sum((P(:, 1:2) - 0.02 * (2 * rand(1, 2) - 1)).^2, 2) / (2 * 0.02^2));
x = p.gridding(p.forward(x0));
e = rel_error(x(:), x0);
fprintf('  Pipe-Menon gridding of a smooth object: %.3f\n', e);
assert(e < 0.05, 'Pipe-Menon: %g', e);

% A user basis has no k-space positions.
q = horecon.Plan([4 3 1], 1, 10, 'Backend', 'cpu');
q.setBasis(rand(12, 2), rand(10, 2));
expect_error('horecon:invalidArgument', @() q.gridding(ones(10, 1)));
end

function P = grid_of(dims, fov)
% MODEL.md's grid positions (centre 0), N x 3.
ax = cell(1, 3);
for a = 1:3
  if dims(a) == 1
    ax{a} = 0;
  else
    ax{a} = ((0:dims(a) - 1) - floor(dims(a) / 2)) * fov / dims(a);
  end
end
[X, Y, Z] = ndgrid(ax{1}, ax{2}, ax{3});
P = [X(:), Y(:), Z(:)];
end
