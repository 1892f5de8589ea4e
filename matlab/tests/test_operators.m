function test_operators()
%TEST_OPERATORS  forward, adjoint and normal against the plain .m direct sum,
%   each precision mode within its accuracy class (MODEL.md).
test_seed('test_operators');
classes = {'accurate', 1e-5; 'fast', 1e-3; 'double', 1e-6};
shapes = {[5 4 1], 3, 40, 16, true; [3 3 2], 2, 25, 9, false; [7 1 1], 1, 30, 4, true; [4 4 1], 4, 20, 1, true};
for s = 1:size(shapes, 1)
  pr = random_problem(shapes{s, :});
  E = ref_encoding(pr.H, pr.coef, pr.w, pr.t, pr.S);
  d_ref = reshape(E * pr.x, pr.M, pr.L);
  x_ref = E' * pr.d(:);
  y_ref = E' * (E * pr.x);
  for c = 1:size(classes, 1)
    p = make_plan(pr, 'Precision', classes{c, 1});
    d = p.forward(pr.x);
    x = p.adjoint(pr.d);
    y = p.normal(pr.x);
    assert(isa(d, 'single') && ~isreal(d) && isequal(size(d), [pr.M pr.L]), 'forward returns M x L single complex');
    errs = [rel_error(d, d_ref), rel_error(x(:), x_ref), rel_error(y(:), y_ref)];
    fprintf('    dims [%s] L %d M %d B %d %-8s forward %.1e adjoint %.1e normal %.1e\n', ...
            num2str(pr.dims), pr.L, pr.M, pr.nterms, classes{c, 1}, errs);
    assert(all(errs <= classes{c, 2}), '%s: errors [%s] exceed %g', classes{c, 1}, num2str(errs), classes{c, 2});
    delete(p);
  end
end

% A trajectory (B = 2, h = x, y) and a user basis give the same operator as the direct sum.
pr = random_problem([4 3 1], 2, 30, 4, false);
k = pr.coef(:, 2:3);
p = horecon.Plan(pr.dims, pr.L, pr.M);
p.setPositions(pr.P);
p.setTrajectory(k);
p.setSensitivities(pr.S);
E = ref_encoding(pr.P(:, 1:2), k, [], [], pr.S);
assert(rel_error(p.forward(pr.x), E * pr.x) < 1e-5, 'trajectory forward');
Hu = randn(prod(pr.dims), 3) * 0.1;
cu = randn(pr.M, 3) * 200;
p.setBasis(Hu, cu);
E = ref_encoding(Hu, cu, [], [], pr.S);
assert(rel_error(p.forward(pr.x), E * pr.x) < 1e-5, 'user basis forward');

% setGridPositions: x_i = c + (i - floor(n/2)) * fov/n.
p = horecon.Plan([4 2 1], 1, 5);
p.setGridPositions([0.2 0.1 0.005], [0.01 0 0.02]);
kx = (1:5).' * 40;
p.setTrajectory(kx);
[ix, iy] = ndgrid(0:3, 0:1);
Pg = [0.01 + (ix(:) - 2) * 0.05, (iy(:) - 1) * 0.05, 0.02 * ones(8, 1)];
x = complex(randn(8, 1), randn(8, 1));
assert(rel_error(p.forward(x), exp(1i * kx * Pg(:, 1).') * x) < 1e-5, 'grid positions');

% The sign: one voxel at r0 and one sample k give d = exp(+1i*k*r0).
p = horecon.Plan([1 1 1], 1, 1);
r0 = [0.03 -0.02 0.01];
p.setPositions(r0);
kk = [120 -70 40];
p.setTrajectory(kk);
d = p.forward(1);
assert(abs(double(d) - exp(1i * (kk * r0.'))) < 1e-6, 'the sign convention exp(+i k r)');
end
