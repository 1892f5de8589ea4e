function test_input_types()
%TEST_INPUT_TYPES  double/single, real/complex inputs and image-shaped arrays
%   give the same results; results are single complex and shaped as documented.
test_seed('test_input_types');
pr = random_problem([5 4 1], 2, 30, 9, true);
p = make_plan(pr);
d_ref = double(p.forward(pr.x));
variants = {single(pr.x), complex(double(single(real(pr.x))), double(single(imag(pr.x)))), ...
            reshape(pr.x, 5, 4), single(reshape(pr.x, 5, 4))};
for i = 1:numel(variants)
  d = p.forward(variants{i});
  assert(isa(d, 'single') && ~isreal(d), 'forward returns single complex');
  assert(rel_error(d, d_ref) < 1e-6, 'variant %d differs: %g', i, rel_error(d, d_ref));
end
% Real input (Octave narrows complex arrays with zero imaginary parts to real).
xr = real(pr.x);
d1 = p.forward(xr);
d2 = p.forward(complex(xr, zeros(size(xr))));
d3 = p.forward(single(xr));
assert(isequal(d1, d2) && rel_error(d3, d1) < 1e-6, 'real and complex-with-zero-imaginary input agree');
% Real results stay complex single: normal of a real image.
y = p.normal(xr);
assert(isa(y, 'single') && ~isreal(y), 'normal returns single complex');
% adjoint returns the image shaped [nx ny] (squeezed); normal keeps the input's shape.
x = p.adjoint(pr.d);
assert(isequal(size(x), [5 4]), 'adjoint returns [nx ny]');
assert(isequal(size(p.normal(reshape(pr.x, 5, 4))), [5 4]));
assert(rel_error(p.adjoint(single(pr.d)), x) < 1e-6);
% Sensitivities as N x L or [nx ny nz L], double or single, give the same operator.
q = make_plan(pr);
q.setSensitivities(single(reshape(pr.S, 5, 4, 1, 2)));
assert(rel_error(q.forward(pr.x), d_ref) < 1e-6, 'sensitivities as [nx ny nz L] single');
% Positions and coefficients as single.
r = horecon.Plan(pr.dims, pr.L, pr.M);
r.setPositions(single(pr.P));
r.setSolidHarmonics(pr.coef);
r.setOffResonance(single(pr.w), pr.t);
r.setSensitivities(pr.S);
assert(rel_error(r.forward(pr.x), d_ref) < 1e-3, 'single positions (rounded) give nearly the same operator');
% A 1-D plan returns a column.
s = horecon.Plan([6 1 1], 1, 4);
s.setPositions([linspace(-0.1, 0.1, 6).', zeros(6, 2)]);
s.setTrajectory((1:4).' * 30);
assert(isequal(size(s.adjoint(ones(4, 1))), [6 1]));
test_integer_scalars();
fprintf('    double/single/real/complex/shaped/integer inputs agree\n');
end

function test_integer_scalars()
%TEST_INTEGER_SCALARS  Counts and options may be integers or logicals.
[k, t] = horecon.sim.spiral(int32(16), 0.2, single(2), 1e-5, 0);
[k2, t2] = horecon.sim.spiral(16, 0.2, 2, 1e-5, 0);
assert(isequal(k, k2) && isequal(t, t2));
p = horecon.Plan(int16([4 4]), uint8(1), int32(size(k, 1)));
p.setGridPositions([0.2 0.2 0.01], [0 0 0]);
p.setTrajectory(k);
[~, info] = p.cg(complex(ones(size(k, 1), 1)), 'MaxIterations', int32(3), 'Verbose', false);
assert(info.iterations == 3);
end
