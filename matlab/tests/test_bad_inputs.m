function test_bad_inputs()
%TEST_BAD_INPUTS  Wrong types, classes, shapes and values through every entry of
%   the MEX binding (issue 11): each is an error with the identifier of its
%   status (horecon:invalidArgument, horecon:sizeMismatch, ...) and a message
%   that names the argument; nothing crashes, and the plan still works after.
%   Prints the count of inputs tried.
test_seed('test_bad_inputs');
pr = random_problem([4 4 1], 2, 12, 4, true);
p = make_plan(pr);
d_before = p.forward(pr.x);
x = pr.x; d = pr.d;
inv = 'horecon:invalidArgument';
siz = 'horecon:sizeMismatch';
% {call, identifier, the argument's name in the message}
cases = {
  % the image, the data and other complex arrays: classes, sparse, shape
  @() p.forward('abcdefghijklmnop'), inv, 'x'
  @() p.forward(num2cell(x)), inv, 'x'
  @() p.forward(struct('x', x)), inv, 'x'
  @() p.forward(int32(ones(16, 1))), inv, 'x'
  @() p.forward(true(16, 1)), inv, 'x'
  @() p.forward(sparse(ones(16, 1))), inv, 'x'
  @() p.forward(@sin), inv, 'x'
  @() p.cg(d, 'Lambda', sparse(1)), inv, 'Lambda'
  @() p.forward(ones(15, 1)), siz, 'x'
  @() p.forward(ones(4, 4, 2)), siz, 'x'
  @() p.forward([]), siz, 'x'
  @() p.adjoint(uint8(ones(12, 2))), inv, 'd'
  @() p.adjoint(ones(12, 3)), siz, 'd'
  @() p.normal({x}), inv, 'x'
  @() p.gridding(d, 'dcf'), inv, 'dcf'
  @() p.gridding(d, ones(11, 1)), siz, 'dcf'
  @() p.gridding(int16(real(d))), inv, 'd'
  % the model: real arrays where complex ones are refused, counts and columns
  @() p.setPositions(complex(pr.P, 1)), inv, 'P'
  @() p.setPositions(single(pr.P(1:15, :))), siz, 'P'
  @() p.setPositions('positions'), inv, 'P'
  @() p.setGridPositions('fov', [0 0 0]), inv, 'fov'
  @() p.setGridPositions([0.2 0.2], [0 0 0]), siz, 'fov'
  @() p.setGridPositions([0.2 0.2 0.01], {0, 0, 0}), inv, 'center'
  @() p.setSolidHarmonics(int8(pr.coef)), inv, 'coef'
  @() p.setSolidHarmonics(ones(13, 4)), siz, 'coef'
  @() p.setSolidHarmonics(ones(12, 5000)), inv, 'coef'
  @() p.setTrajectory(ones(11, 2)), siz, 'k'
  @() p.setBasis(ones(16, 2), ones(12, 3)), siz, 'coef'
  @() p.setBasis('H', ones(12, 2)), inv, 'H'
  @() p.setOffResonance(ones(16, 1), 't'), inv, 't'
  @() p.setOffResonance(complex(ones(16, 1)), pr.t), inv, 'w'
  @() p.setSensitivities(ones(16, 3)), siz, 'S'
  @() p.setSensitivities(struct()), inv, 'S'
  @() p.setCartesian('mask'), siz, 'mask'
  @() p.setToeplitz(true, 'auto'), inv, 'TimeSegments'
  @() p.setToeplitz(true, 2^40), inv, 'TimeSegments'
  @() p.setToeplitz(true, 1.5), inv, 'TimeSegments'
  % cg's options: classes, shapes, non-integers, ranges
  @() p.cg(d, 'MaxIterations', 'ten'), inv, 'MaxIterations'
  @() p.cg(d, 'MaxIterations', 2.5), inv, 'MaxIterations'
  @() p.cg(d, 'MaxIterations', -1), inv, 'MaxIterations'
  @() p.cg(d, 'MaxIterations', [1 2]), inv, 'MaxIterations'
  @() p.cg(d, 'Tolerance', {1e-3}), inv, 'Tolerance'
  @() p.cg(d, 'Tolerance', complex(1, 1)), inv, 'Tolerance'
  @() p.cg(d, 'Lambda', 'big'), inv, 'Lambda'
  @() p.cg(d, 'Regularizer', {'tikhonov'}), inv, 'Regularizer'
  @() p.cg(d, 'Regularizer', {}), inv, 'Regularizer'
  @() p.cg(d, 'Regularizer', 2^33), inv, 'Regularizer'
  @() p.cg(d, 'SampleWeights', 'w'), inv, 'SampleWeights'
  @() p.cg(d, 'SampleWeights', ones(13, 1)), siz, 'SampleWeights'
  @() p.cg(d, 'X0', 'x0'), inv, 'X0'
  @() p.cg(d, 'X0', ones(17, 1)), siz, 'X0'
  @() p.cg(d, 'Verbose', 'yes'), inv, 'Verbose'
  @() p.cg(d, 'Reweightings', 1e5), inv, 'Reweightings'
  @() p.cg(d, 'Epsilon', [1 2]), inv, 'Epsilon'
  @() p.cg(d, 'Sigma', struct()), inv, 'Sigma'
  @() p.cg(d, 'Regularizer', 'finitedifference', 'Lambda', 1, 'FdWeights', int8(ones(16, 2))), inv, 'FdWeights'
  @() p.cg(d, 'Neighbours', 'all'), inv, 'Neighbours'
  @() p.cg(d, 'MaxIterations'), inv, 'name/value'
  @() p.cg(d, 'Bogus', 1), inv, 'Bogus'
  @() p.cg(single(d(1:end - 1, :))), siz, 'd'
  % plans: sizes, options
  @() horecon.Plan('abc', 1, 10), inv, 'dims'
  @() horecon.Plan({4, 4}, 1, 10), inv, 'dims'
  @() horecon.Plan(sparse([4 4]), 1, 10), inv, 'dims'
  @() horecon.Plan([4 4] + 1i, 1, 10), inv, 'dims'
  @() horecon.Plan([4 4 1 1], 1, 10), inv, 'dims'
  @() horecon.Plan([4.5 4 1], 1, 10), inv, 'dims'
  @() horecon.Plan([4 4 1], 'one', 10), inv, 'ncoils'
  @() horecon.Plan([4 4 1], 1, {10}), inv, 'nsamples'
  @() horecon.Plan([4 4 1], 1, 10, 'Device', 'gpu'), inv, 'Device'
  @() horecon.Plan([4 4 1], 1, 10, 'Threads', 2^40), inv, 'Threads'
  @() horecon.Plan([4 4 1], 1, 10, 'Backend', {'cpu'}), inv, 'Backend'
  @() horecon.Plan([4 4 1], 1, 10, 'Precision', 7), inv, 'precision'
  % the simulation toolkit: each argument by its name
  @() horecon.sim.spiral('n', 0.2, 1, 1e-5), inv, 'n'
  @() horecon.sim.spiral(64.5, 0.2, 1, 1e-5), inv, 'n'
  @() horecon.sim.spiral(1e300, 0.2, 1, 1e-5), inv, 'n'
  @() horecon.sim.spiral(64, 'fov', 1, 1e-5), inv, 'fov'
  @() horecon.sim.radial(64, 0.2, 2.5, 1e-5), inv, 'spokes'
  @() horecon.sim.cartesian(64, {64}, 0.2, 0.2, 1e-5), inv, 'ny'
  @() horecon.sim.stackOfSpirals(32, 4, 0.2, 'fovZ', 2, 1e-5), inv, 'fovZ'
  @() horecon.sim.sheppLogan(2, [0.2 0.2], [0 0 0], pr.P), siz, 'fov'
  @() horecon.sim.sheppLogan(2^40, [0.2 0.2 0.2], [0 0 0], pr.P), inv, 'ndims'
  @() horecon.sim.sheppLogan(2, [0.2 0.2 0.2], [0 0 0], ones(5, 2)), siz, 'P'
  @() horecon.sim.coilSensitivities(pr.P, 0, 0.1), inv, 'ncoils'
  @() horecon.sim.coilSensitivities(pr.P, 2, 'r'), inv, 'radius'
  @() horecon.sim.addNoise(d, 20, -1), inv, 'seed'
  @() horecon.sim.addNoise(d, 20, 1e300), inv, 'seed'
  @() horecon.sim.addNoise('data', 20), inv, 'd'
  @() horecon.sim.fieldCoefficients(ones(10, 2), 1e-5, 1, 2.5), inv, 'seed'
  @() horecon.sim.refinedGrid([1e300 4 1], [0.2 0.2 0.01], [0 0 0], 2), inv, 'dims'
  @() horecon.sim.refinedGrid([4 4 1], [0.2 0.2 0.01], [0 0 0], 2^40), inv, 'factor'
  @() horecon.sim.nrmse(ones(4, 1), ones(5, 1)), siz, 'x'
  @() horecon.sim.densityWeights('k'), inv, 'k'
  % arrays read element by element: sparse or NaN masks, out-of-range integers
  @() p.setCartesian(sparse(true(16, 1))), inv, 'mask'
  @() p.setCartesian([NaN; ones(15, 1)]), 'horecon:notFinite', 'mask'
  @() p.setToeplitz(NaN, 0), inv, 'enable'
  @() p.cg(d, 'Preconditioner', 2^32 + 1), inv, 'Preconditioner'
  @() horecon.calib.estimateDelay(p, d, (1:12)' * 1e-5, 5), siz, 'coef'
  @() horecon.calib.estimateDelay(p, d, (1:12)' * 1e-5, [], 'Groups', -1), inv, 'Groups'
  @() horecon.calib.estimateDelay(p, d, (1:12)' * 1e-5, [], 'Groups'), inv, 'name/value'
  @() horecon.calib.estimateDelay(p, d, (1:12)' * 1e-5, [], 'Iterations', 2^32 + 2), inv, 'Iterations'
  @() horecon.calib.walsh(p, ones(16, 2), [4 4 1], [0.2 0.2 0.01], [0 0 0], 2^32 + 3), inv, 'Window'
  % transposed matrices: the element count fits, the shape does not (read as is, the values would be wrong)
  @() p.setPositions(pr.P.'), siz, 'P'
  @() p.setSolidHarmonics(pr.coef.'), siz, 'coef'
  @() p.setTrajectory(ones(2, 12)), siz, 'k'
  @() p.setBasis(ones(2, 16), ones(12, 2)), siz, 'H'
  @() p.setBasis(ones(16, 2), ones(2, 12)), siz, 'coef'
  @() p.setSensitivities(complex(ones(2, 16), 1)), siz, 'S'
  @() p.adjoint(d.'), siz, 'd'
  @() p.cg(d.'), siz, 'd'
  @() horecon.sim.sheppLogan(2, [0.2 0.2 0.2], [0 0 0], pr.P.'), siz, 'P'
  % a NaN flag, seeds beyond what a double holds exactly
  @() p.cg(d, 'Verbose', NaN), inv, 'Verbose'
  @() horecon.sim.noiseCovariance(3, 0.2, 0.3, 1e20), inv, 'seed'
  @() horecon.sim.noiseCovariance(3, 0.2, 0.3, Inf), inv, 'seed'
  % the gateway itself
  @() horecon_mex(42), inv, 'command'
  @() horecon_mex('bogus'), inv, 'bogus'
  @() horecon_mex('forward'), inv, 'forward'
  @() horecon_mex('forward', 42, x), inv, 'handle'
  @() horecon_mex('forward', uint64(42), x), inv, 'plan'
  @() horecon.progress(1), inv, 'mode'
  @() horecon.progress('text', -1), inv, 'delay'
};
for i = 1:size(cases, 1)
  err = expect_error(cases{i, 2}, cases{i, 1});
  % the name as a word of the message
  word = ['(^|[^A-Za-z0-9_])' regexptranslate('escape', cases{i, 3}) '([^A-Za-z0-9_]|$)'];
  assert(~isempty(regexpi(err.message, word, 'once')), ...
         'case %d (%s): the message does not name %s: %s', i, func2str(cases{i, 1}), cases{i, 3}, err.message);
end
assert(isequal(p.forward(pr.x), d_before), 'the plan changed after the failing calls');
% not transposed: a one-coil 2-D plan's sensitivities as an nx x ny image, a row of one sample's data
q = horecon.Plan([4 3], 1, 1, 'Backend', 'cpu');
q.setSensitivities(complex(ones(4, 3), 1));
q.setSensitivities(complex(ones(12, 1), 1));
q2 = horecon.Plan([4 3], 2, 1, 'Backend', 'cpu');
q2.setGridPositions([0.2 0.2 0.01], [0 0 0]);
q2.setTrajectory([10 20]);
q2.setSensitivities(complex(ones(4, 3, 2), 1));
assert(isequal(size(q2.adjoint([1 2])), [4 3]), 'one sample of two coils as a row');
% one coil's data as a matrix (nread x nshots), a [1 ny nz] plan's squeezed image as S
q3 = horecon.Plan([4 3], 1, 12, 'Backend', 'cpu');
q3.setGridPositions([0.2 0.2 0.01], [0 0 0]);
q3.setTrajectory(randn(12, 2) * 10);
assert(isequal(q3.adjoint(ones(4, 3)), q3.adjoint(ones(12, 1))), 'one coil''s data as a 4 x 3 matrix');
q4 = horecon.Plan([1 4 3], 1, 2, 'Backend', 'cpu');
q4.setSensitivities(complex(ones(4, 3), 1));
fprintf('    %d wrong inputs tried: each an error naming its argument\n', size(cases, 1));
end
