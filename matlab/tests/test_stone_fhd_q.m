function test_stone_fhd_q()
%TEST_STONE_FHD_Q  p.fhd and p.q against Stone et al.'s eqs. 4 and 3 summed in
%   double precision here, on a random 2D trajectory; bad inputs raise the
%   library's identifiers.
nx = 7; ny = 6; M = 50; fov = [0.2 0.18 0.01];
k = (rand(M, 2) - 0.5) .* [nx / fov(1), ny / fov(2)];     % Stone's k, cycles/m
d = complex(randn(M, 1), randn(M, 1));
phi = complex(randn(M, 1), randn(M, 1));
p = horecon.Plan([nx ny 1], 1, M, 'Backend', 'cpu');
p.setGridPositions(fov);
p.setTrajectory(-2 * pi * k);
[X, Y] = ndgrid(((0:nx - 1) - floor(nx / 2)) * fov(1) / nx, ((0:ny - 1) - floor(ny / 2)) * fov(2) / ny);
r = [X(:) Y(:)];
expect = exp(1i * 2 * pi * r * k.') * (conj(phi) .* d);                % eq. 4
x = p.fhd(single(d), single(phi));
assert(isequal(size(x), [nx ny]));
assert(rel_error(x(:), expect) < 1e-5, 'fhd error %g', rel_error(x(:), expect));
x1 = p.fhd(single(d));
assert(rel_error(x1(:), exp(1i * 2 * pi * r * k.') * d) < 1e-5);
assert(isequal(p.qDims(), [2 * nx, 2 * ny, 1]));
w = rand(M, 1);
[QX, QY] = ndgrid((-nx:nx - 1) * fov(1) / nx, (-ny:ny - 1) * fov(2) / ny);
expectQ = exp(1i * 2 * pi * [QX(:) QY(:)] * k.') * w;                  % eq. 3
q = p.q(single(w));
assert(isequal(size(q), [2 * nx, 2 * ny]));
assert(rel_error(q(:), expectQ) < 1e-5, 'q error %g', rel_error(q(:), expectQ));
fprintf('    fhd %.1e, q %.1e relative to the double sums\n', rel_error(x(:), expect), rel_error(q(:), expectQ));
expect_error('horecon:sizeMismatch', @() p.fhd(single(d(1:end - 1))));
expect_error('horecon:invalidArgument', @() p.q(single(-w)));
bad = single(d); bad(3) = NaN;
expect_error('horecon:notFinite', @() p.fhd(bad));
two = horecon.Plan([nx ny 1], 2, M, 'Backend', 'cpu');
two.setGridPositions(fov);
two.setTrajectory(-2 * pi * k);
two.setSensitivities(complex(ones(nx * ny, 2, 'single')));
expect_error('horecon:invalidArgument', @() two.q());
end
