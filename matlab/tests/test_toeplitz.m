function test_toeplitz()
%TEST_TOEPLITZ  p.setToeplitz: the Toeplitz normal operator against the .m
%   direct sum E'*E*x on a grid (2D and 3D, odd and even sizes), with time
%   segmentation, CG against the exact normal operator, and the refusals.
test_seed('test_toeplitz');
fov = 0.22;
shapes = {[6 5 1], 2, 60, false; [4 3 3], 2, 50, false; [7 6 1], 1, 90, true};
for s = 1:size(shapes, 1)
  [dims, L, M, with_b0] = shapes{s, :};
  N = prod(dims);
  axes = arrayfun(@(n) ((0:n - 1) - floor(n / 2)) * fov / n, dims, 'UniformOutput', false);
  for a = 1:3
    if dims(a) == 1
      axes{a} = 0;
    end
  end
  [X, Y, Z] = ndgrid(axes{:});
  P = [X(:), Y(:), Z(:)];
  coef = zeros(M, 9);
  coef(:, 1) = (rand(M, 1) * 2 - 1) * 3;
  coef(:, 2:4) = (rand(M, 3) * 2 - 1) * pi * max(dims) / fov;
  if with_b0
    w = (rand(N, 1) * 2 - 1) * 2 * pi * 80;
    t = linspace(0, 0.01, M).';
  else
    w = []; t = [];
  end
  S = complex(randn(N, L), randn(N, L));
  x = complex(randn(N, 1), randn(N, 1));
  E = ref_encoding(ref_solid_harmonics(P, 9), coef, w, t, S);
  y_ref = E' * (E * x);
  p = horecon.Plan(dims, L, M);
  p.setPositions(P);
  p.setSolidHarmonics(coef);
  if with_b0
    p.setOffResonance(w, t);
  end
  p.setSensitivities(S);
  p.setToeplitz(true, 0);
  y = p.normal(x);
  err = rel_error(y(:), y_ref);
  bound = 1e-5;
  if with_b0
    bound = 1e-3;
  end
  fprintf('    dims [%s] L %d M %d off-resonance %d: Toeplitz normal %.1e\n', num2str(dims), L, M, with_b0, err);
  assert(err <= bound, 'Toeplitz normal error %g > %g', err, bound);
  d = complex(randn(M, L), randn(M, L));
  xt = p.cg(d, 'MaxIterations', 4, 'Tolerance', 0, 'Regularizer', 'tikhonov', 'Lambda', M);
  p.setToeplitz(false);
  xe = p.cg(d, 'MaxIterations', 4, 'Tolerance', 0, 'Regularizer', 'tikhonov', 'Lambda', M);
  assert(rel_error(xt(:), xe(:)) <= 10 * bound, 'CG with Toeplitz differs by %g', rel_error(xt(:), xe(:)));
  % A term of order 2 is refused at the next normal, negative segments at once.
  p.setToeplitz(true);
  coef(5, 6) = 40;
  p.setSolidHarmonics(coef);
  expect_error('horecon:invalidArgument', @() p.normal(x));
  expect_error('horecon:invalidArgument', @() p.setToeplitz(true, -1));
  delete(p);
end
end
