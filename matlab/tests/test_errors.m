function test_errors()
%TEST_ERRORS  Every status becomes its horecon:<name> error, and Octave/MATLAB
%   keeps running (and the plan stays usable) afterwards.
test_seed('test_errors');
pr = random_problem([4 4 1], 2, 12, 4, true);
p = make_plan(pr);
d_before = p.forward(pr.x);

% invalidArgument: from the library (bad sizes, nterms) and from the package
expect_error('horecon:invalidArgument', @() horecon.Plan([0 4 1], 1, 10));
expect_error('horecon:invalidArgument', @() horecon.Plan([4 4 1], -1, 10));
expect_error('horecon:invalidArgument', @() p.setSolidHarmonics(zeros(pr.M, 5)));
expect_error('horecon:invalidArgument', @() horecon.Plan([4 4 1], 1, 10, 'Precision', 'bogus'));
expect_error('horecon:invalidArgument', @() p.forward({1, 2}));
expect_error('horecon:invalidArgument', @() p.setPositions(complex(pr.P, 1)));
expect_error('horecon:invalidArgument', @() p.cg(pr.d, 'Regularizer', 'bogus'));
expect_error('horecon:invalidArgument', @() p.cg(pr.d, 'Regularizer', 'finitedifference', 'Lambda', 1, 'FdWeights', -ones(16, 2)));
expect_error('horecon:invalidArgument', @() p.cg(pr.d, 'Regularizer', 'totalvariation', 'Lambda', 1, 'Epsilon', 0));
expect_error('horecon:invalidArgument', @() p.cg(pr.d, 'Regularizer', 'finitedifference', 'Lambda', 1, 'Neighbours', 8));
expect_error('horecon:invalidArgument', @() p.cg(pr.d, 'SampleWeights', -ones(pr.M, 1)));

% sizeMismatch, checked in the MEX before any data is read
expect_error('horecon:sizeMismatch', @() p.forward(ones(15, 1)));
expect_error('horecon:sizeMismatch', @() p.adjoint(ones(pr.M, pr.L + 1)));
expect_error('horecon:sizeMismatch', @() p.normal(ones(17, 1)));
expect_error('horecon:sizeMismatch', @() p.setPositions(ones(16, 2)));
expect_error('horecon:sizeMismatch', @() p.setSensitivities(ones(16, 3)));
expect_error('horecon:sizeMismatch', @() p.setOffResonance(ones(16, 1), ones(pr.M + 1, 1)));
expect_error('horecon:sizeMismatch', @() p.setSolidHarmonics(ones(pr.M + 1, 4)));
expect_error('horecon:sizeMismatch', @() p.cg(pr.d, 'X0', ones(3, 1)));
expect_error('horecon:sizeMismatch', @() p.cg(pr.d, 'Regularizer', 'finitedifference', 'Lambda', 1, 'FdWeights', ones(16, 2), 'Neighbours', 26));

% notFinite
x = pr.x; x(3) = NaN;
expect_error('horecon:notFinite', @() p.forward(x));
expect_error('horecon:notFinite', @() p.setOffResonance([Inf; zeros(15, 1)], pr.t));

% incompletePlan
q = horecon.Plan([4 4 1], 1, 12);
expect_error('horecon:incompletePlan', @() q.forward(pr.x));
expect_error('horecon:incompletePlan', @() q.setSolidHarmonics(pr.coef));
q2 = horecon.Plan([4 4 1], 2, 12);
q2.setPositions(pr.P);
q2.setSolidHarmonics(pr.coef);
expect_error('horecon:incompletePlan', @() q2.forward(pr.x));

% outOfMemory: positions of a 2^33-voxel grid (192 GB) cannot be allocated
big = horecon.Plan([2^17 2^16 1], 1, 1);
expect_error('horecon:outOfMemory', @() big.setGridPositions([0.2 0.2 0.2], [0 0 0]));
delete(big);

% backendUnavailable (only where no CUDA device is usable)
if horecon.cudaDeviceCount() == 0
  expect_error('horecon:backendUnavailable', @() horecon.Plan([4 4 1], 1, 10, 'Backend', 'cuda'));
end

% Statuses no input can produce here go through the same mapping (MEX test hook).
names = {1, 'horecon:nullPointer'; 2, 'horecon:invalidArgument'; 3, 'horecon:sizeMismatch'; ...
         4, 'horecon:notFinite'; 5, 'horecon:incompletePlan'; 6, 'horecon:outOfMemory'; ...
         7, 'horecon:backendUnavailable'; 8, 'horecon:backend'; 9, 'horecon:cancelled'; ...
         99, 'horecon:internal'};
for i = 1:size(names, 1)
  expect_error(names{i, 2}, @() horecon_mex('raiseStatus', names{i, 1}));
end

% Still running, and the plan still works and gives the same result.
d_after = p.forward(pr.x);
assert(isequal(d_before, d_after), 'the plan changed after failing calls');
fprintf('    all error identifiers raised; the session and the plan are still usable\n');
end
