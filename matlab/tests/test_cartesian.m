function test_cartesian()
%TEST_CARTESIAN  Cartesian FFT mode (setCartesian): forward, adjoint and
%   normal against the float64 .m encoding matrix of the mask's trajectory
%   k = 2*pi*(p - floor(n/2))./fov, 2D and 3D, with coils; and its errors.
dimsList = {[8 6 1], [7 5 1], [4 5 3]};
for i = 1:numel(dimsList)
  dims = dimsList{i};
  N = prod(dims);
  L = 2;
  fov = 0.1 + 0.2 * rand(1, 3);
  center = 0.1 * rand(1, 3) - 0.05;
  mask = rand(dims) < 0.4;
  mask(1) = true;
  M = nnz(mask);
  p = horecon.Plan(dims, L, M, 'Backend', 'cpu');
  p.setGridPositions(fov, center);
  p.setCartesian(mask);
  S = complex(randn(N, L), randn(N, L));
  p.setSensitivities(S);
  % positions and k in MODEL.md's formulas
  [ix, iy, iz] = ndgrid(0:dims(1) - 1, 0:dims(2) - 1, 0:dims(3) - 1);
  idx = [ix(:) iy(:) iz(:)];
  h = floor(dims / 2);
  step = fov ./ dims .* (dims > 1);
  P = center + (idx - h) .* step;
  k = 2 * pi * (idx(mask(:), :) - h) ./ fov .* (dims > 1);
  E = ref_encoding(P, k, [], [], S);
  x = complex(randn(N, 1), randn(N, 1));
  d = complex(randn(M * L, 1), randn(M * L, 1));
  ef = double(p.forward(x));
  assert(rel_error(ef(:), E * x) < 1e-5, 'forward %s', mat2str(dims));
  ea = double(p.adjoint(reshape(d, M, L)));
  assert(rel_error(ea(:), E' * d) < 1e-5, 'adjoint %s', mat2str(dims));
  en = double(p.normal(x));
  assert(rel_error(en(:), E' * (E * x)) < 1e-5, 'normal %s', mat2str(dims));
  delete(p);
end
% errors
p = horecon.Plan([6 5 1], 1, 15, 'Backend', 'cpu');
mask = false(6, 5);
mask(:, 1:2:5) = true;          % 18 points, not 15
expect_error('horecon:incompletePlan', @() p.setCartesian(mask));
p.setGridPositions([0.2 0.2 0.01], [0 0 0]);
expect_error('horecon:sizeMismatch', @() p.setCartesian(mask));
expect_error('horecon:sizeMismatch', @() p.setCartesian(true(1, 7)));
mask(:, 5) = false;
mask(1:3, 5) = true;            % 15 points
p.setCartesian(mask);
expect_error('horecon:invalidArgument', @() p.setOffResonance(zeros(30, 1), zeros(15, 1)));
delete(p);
end
