function test_nufft()
%TEST_NUFFT  horecon.Nufft, horecon.nufft, horecon.nufft1 and horecon.nufft2 (issue 14):
%   types 1 and 2 against double-precision direct sums on fresh random points, 1D/2D/3D,
%   odd/even/singleton sizes, tolerances 1e-3 and 1e-6 (single) and 1e-9 (double),
%   both signs, several transforms; adjointness; the one-shot functions against the
%   plan; no points; every bad input an error with its identifier naming the argument;
%   deletion. Prints the seed and the worst error relative to each tolerance.
test_seed('test_nufft');
live0 = horecon_mex('liveNuffts');
check_accuracy();
check_adjointness();
check_one_shot();
check_edge_cases();
check_bad_inputs();
check_deletion(live0);
assert(horecon_mex('liveNuffts') == live0, 'NUFFT plans leaked: %d alive, %d before', ...
       horecon_mex('liveNuffts'), live0);
end

% ------------------------------------------------------------------ accuracy

function check_accuracy()
% {modes, npoints, transforms}: 1D/2D/3D, odd, even and singleton axes, 1 or 3 transforms
shapes = {[9], 40, 1; [10], 33, 3; [1], 7, 2; [8 7], 60, 1; [6 1], 25, 2; [1 5], 30, 1; ...
          [5 4 3], 70, 2; [4 1 5], 41, 1; [1 1 1], 9, 3; [3 6 1], 50, 1; ...
          [101], 3000, 1; [40 33], 2500, 2; [12 11 10], 2000, 2};   % more points than modes
% {precision, tolerance}: single down to its floor, double
tolerances = {'single', 1e-3; 'single', 1e-6; 'double', 1e-9};
worst = zeros(1, size(tolerances, 1));
cases = 0;
for s = 1:size(shapes, 1)
  [modes, npoints, ntrans] = shapes{s, :};
  points = random_points(npoints, numel(modes), mod(s, 2) == 0);
  for t = 1:size(tolerances, 1)
    [precision, tol] = tolerances{t, :};
    for type = 1:2
      sign = 1 - 2 * mod(s + t + type, 2);        % both signs over the cases
      nu = horecon.Nufft(type, modes, points, 'Sign', sign, 'Tolerance', tol, ...
                         'Transforms', ntrans, 'Precision', precision);
      in = random_input(type, modes, npoints, ntrans);
      out = nu.execute(in);
      ref = direct_sum(type, modes, points, in, sign);
      assert(isequal(size(out), size(ref)), 'modes %s type %d: size %s, expected %s', ...
             mat2str(modes), type, mat2str(size(out)), mat2str(size(ref)));
      assert(isa(out, precision) && ~isreal(out), 'modes %s type %d: a %s result, expected complex %s', ...
             mat2str(modes), type, class(out), precision);
      e = rel_error(out, ref);
      assert(e <= tol, 'modes %s, %d points, %d transforms, type %d, sign %+d, %s %g: error %.3g', ...
             mat2str(modes), npoints, ntrans, type, sign, precision, tol, e);
      worst(t) = max(worst(t), e / tol);
      % each transform alone gives the same as in the batch (within the tolerance)
      if ntrans > 1
        one = horecon.Nufft(type, modes, points, 'Sign', sign, 'Tolerance', tol, 'Precision', precision);
        last = one.execute(slice(in, modes, ntrans, type == 2));
        e1 = rel_error(last, slice(ref, modes, ntrans, type == 1));
        assert(e1 <= tol, 'modes %s type %d: the last transform alone, error %.3g', mat2str(modes), type, e1);
      end
      % a plan executes again with the same result, up to float rounding: the parts of
      % a split heavy bin (clustered points) add to the grid in the order they finish
      again = rel_error(nu.execute(in), out);
      assert(again <= 10 * eps(precision), 'modes %s type %d: a second execute differs by %.3g', ...
             mat2str(modes), type, again);
      cases = cases + 1;
    end
  end
end
for t = 1:size(tolerances, 1)
  fprintf('    %s tolerance %g: worst error / tolerance %.3f\n', tolerances{t, :}, worst(t));
end
fprintf('    %d plans against double direct sums\n', cases);
end

% ---------------------------------------------------------------- adjointness

function check_adjointness()
% Type 1 with sign s and type 2 with sign -s are adjoint: <A c, f> = <c, A^H f> within
% what the two errors allow (tol each, relative to |A c||f| and |c||A^H f|).
cases = {[12 9], 80, 2, 'double', 1e-9; [7], 30, 1, 'single', 1e-6; [4 5 3], 60, 3, 'single', 1e-3; ...
         [6 5 4], 50, 1, 'double', 1e-12};
for i = 1:size(cases, 1)
  [modes, npoints, ntrans, precision, tol] = cases{i, :};
  points = random_points(npoints, numel(modes), true);
  sign = 1 - 2 * mod(i, 2);
  a = horecon.Nufft(1, modes, points, 'Sign', sign, 'Tolerance', tol, 'Transforms', ntrans, 'Precision', precision);
  ah = horecon.Nufft(2, modes, points, 'Sign', -sign, 'Tolerance', tol, 'Transforms', ntrans, 'Precision', precision);
  c = random_input(1, modes, npoints, ntrans);
  f = random_input(2, modes, npoints, ntrans);
  Ac = double(a.execute(c));
  Ahf = double(ah.execute(f));
  lhs = f(:)' * Ac(:);
  rhs = Ahf(:)' * c(:);
  bound = norm(Ac(:)) * norm(f(:)) + norm(c(:)) * norm(Ahf(:));
  e = abs(lhs - rhs) / bound;
  fprintf('    adjointness %s, %s %g: %.2g (bound %g)\n', mat2str(modes), precision, tol, e, tol);
  assert(e <= tol, 'adjointness %s %s %g: %.3g', mat2str(modes), precision, tol, e);
end
end

% ------------------------------------------------------------ one-shot calls

function check_one_shot()
modes = [6 5];
npoints = 45;
points = random_points(npoints, 2, false);
c = random_input(1, modes, npoints, 2);
f = random_input(2, modes, npoints, 2);
% nufft1/nufft2/nufft infer the transforms, and the precision from the data's class
plan1 = horecon.Nufft(1, modes, points, 'Tolerance', 1e-9, 'Transforms', 2);
plan2 = horecon.Nufft(2, modes, points, 'Tolerance', 1e-9, 'Transforms', 2);
assert(isequal(horecon.nufft1(points, c, modes, 'Tolerance', 1e-9), plan1.execute(c)), 'nufft1 differs from the plan');
assert(isequal(horecon.nufft2(points, f, 'Tolerance', 1e-9), plan2.execute(f)), 'nufft2 differs from the plan');
assert(isequal(horecon.nufft(1, modes, points, c, 'Tolerance', 1e-9), plan1.execute(c)), 'nufft(1, ...) differs');
assert(isequal(horecon.nufft(2, modes, points, f, 'Tolerance', 1e-9), plan2.execute(f)), 'nufft(2, ...) differs');
% defaults: sign +1 for type 1, -1 for type 2, tolerance 1e-6, double
assert(rel_error(horecon.nufft1(points, c, modes), direct_sum(1, modes, points, c, 1)) <= 1e-6, 'nufft1 default sign');
assert(rel_error(horecon.nufft2(points, f), direct_sum(2, modes, points, f, -1)) <= 1e-6, 'nufft2 default sign');
assert(rel_error(horecon.nufft2(points, f, 'Sign', 1), direct_sum(2, modes, points, f, 1)) <= 1e-6, 'nufft2 Sign +1');
s1 = horecon.nufft1(points, single(c), modes);
assert(isa(s1, 'single') && isequal(size(s1), [modes 2]), 'single data gives a single plan');
assert(isa(horecon.nufft1(points, single(c), modes, 'Precision', 'double'), 'double'), 'Precision overrides the class');
% 1D and 3D one-shots with one transform: a column and a grid
x1 = random_points(20, 1, true);
c1 = random_input(1, 8, 20, 1);
g1 = horecon.nufft1(x1, c1, 8, 'Tolerance', 1e-9);
assert(isequal(size(g1), [8 1]) && rel_error(g1, direct_sum(1, 8, x1, c1, 1)) <= 1e-9, '1D nufft1');
x3 = random_points(30, 3, false);
f3 = random_input(2, [3 4 5], 30, 1);
c3 = horecon.nufft2(x3, f3, 'Tolerance', 1e-9);
assert(isequal(size(c3), [30 1]) && rel_error(c3, direct_sum(2, [3 4 5], x3, f3, -1)) <= 1e-9, '3D nufft2');
% real input (Octave narrows complex arrays with zero imaginary parts) and single input
assert(rel_error(plan1.execute(real(c)), direct_sum(1, modes, points, real(c), 1)) <= 1e-9, 'real input');
assert(rel_error(plan1.execute(single(c)), direct_sum(1, modes, points, double(single(c)), 1)) <= 1e-9, 'single input');
% the input may be a row vector where the shape is a vector
v = horecon.Nufft(2, 8, x1, 'Tolerance', 1e-9);
assert(isequal(v.execute(f3(1:8)), v.execute(f3(1:8).')), 'row and column vectors differ');
fprintf('    one-shot calls equal the plan\n');
end

function check_edge_cases()
% no points: type 1 gives a zero grid, type 2 an empty result
z1 = horecon.Nufft(1, [4 3], zeros(0, 2), 'Transforms', 2);
g = z1.execute(zeros(0, 2));
assert(isequal(size(g), [4 3 2]) && ~any(g(:)), 'no points: a zero grid');
z2 = horecon.Nufft(2, [4 3], zeros(0, 2));
assert(isempty(z2.execute(ones(4, 3))), 'no points: no values');
% points far outside [-pi, pi): used modulo 2*pi
x = random_points(25, 2, false);
c = random_input(1, [5 6], 25, 1);
far = x + 2 * pi * round(4 * randn(size(x)));
e = rel_error(horecon.nufft1(far, c, [5 6], 'Tolerance', 1e-9), direct_sum(1, [5 6], x, c, 1));
assert(e <= 1e-8, 'points shifted by multiples of 2*pi: error %.3g', e);
% backends: the CPU explicitly; CUDA against the same sums where a GPU is usable
for backend = {'cpu', 'cuda'}
  if strcmp(backend{1}, 'cuda') && horecon.cudaDeviceCount() == 0
    err = expect_error('horecon:backendUnavailable', @() horecon.Nufft(1, [5 6], x, 'Backend', 'cuda'));
    assert(~isempty(strfind(err.message, 'CUDA')), 'no GPU: %s', err.message);
    fprintf('    CUDA: no device (horecon:backendUnavailable), skipped\n');
    continue;
  end
  for type = 1:2
    in = random_input(type, [5 6], 25, 2);
    for precision = {'single', 'double'}
      tol = 1e-6 * strcmp(precision{1}, 'single') + 1e-9 * strcmp(precision{1}, 'double');
      nu = horecon.Nufft(type, [5 6], x, 'Transforms', 2, 'Tolerance', tol, 'Precision', precision{1}, ...
                         'Backend', backend{1});
      out = nu.execute(in);
      e = rel_error(out, direct_sum(type, [5 6], x, in, 3 - 2 * type));
      assert(e <= tol, '%s %s type %d: error %.3g', backend{1}, precision{1}, type, e);
    end
  end
end
% the plan keeps its settings
nu = horecon.Nufft(2, [4 5], x, 'Tolerance', 1e-3, 'Precision', 'single', 'Transforms', 3);
assert(nu.Type == 2 && isequal(nu.Modes, [4 5]) && nu.NumPoints == 25 && nu.NumTransforms == 3 && ...
       nu.Sign == -1 && nu.Tolerance == 1e-3 && strcmp(nu.Precision, 'single'), 'the plan''s properties');
end

% --------------------------------------------------------------- bad inputs

function check_bad_inputs()
x = random_points(12, 2, false);
c = random_input(1, [4 5], 12, 2);
f = random_input(2, [4 5], 12, 2);
nu1 = horecon.Nufft(1, [4 5], x, 'Transforms', 2, 'Tolerance', 1e-9);
nu2 = horecon.Nufft(2, [4 5], x, 'Transforms', 2, 'Precision', 'single');
before1 = nu1.execute(c);
before2 = nu2.execute(f);
p = horecon.Plan([2 2 1], 1, 3);
bad = x; bad(3, 2) = NaN;
inf_points = x; inf_points(5, 1) = -Inf;
c_nan = c; c_nan(4, 2) = NaN;
f_inf = f; f_inf(2, 3, 1) = Inf;
inv = 'horecon:invalidArgument';
siz = 'horecon:sizeMismatch';
fin = 'horecon:notFinite';
% {call, identifier, the argument's name in the message}
cases = {
  % type, modes
  @() horecon.Nufft(3, [4 5], x), inv, 'type'
  @() horecon.Nufft(0, [4 5], x), inv, 'type'
  @() horecon.Nufft('1', [4 5], x), inv, 'type'
  @() horecon.Nufft(1.5, [4 5], x), inv, 'type'
  @() horecon.Nufft(1, {4, 5}, x), inv, 'modes'
  @() horecon.Nufft(1, [4 5 6 7], x), inv, 'modes'
  @() horecon.Nufft(1, [], x), inv, 'modes'
  @() horecon.Nufft(1, [4 0], x), inv, 'modes'
  @() horecon.Nufft(1, [4 -5], x), inv, 'modes'
  @() horecon.Nufft(1, [4 5.5], x), inv, 'modes'
  @() horecon.Nufft(1, [4 NaN], x), inv, 'modes'
  @() horecon.Nufft(1, complex([4 5], 1), x), inv, 'modes'
  @() horecon.Nufft(1, [2^40 2^40], x), inv, 'modes'
  % points: class, realness, shape, finiteness
  @() horecon.Nufft(1, [4 5], complex(x, 1)), inv, 'points'
  @() horecon.Nufft(1, [4 5], int32(x)), inv, 'points'
  @() horecon.Nufft(1, [4 5], num2cell(x)), inv, 'points'
  @() horecon.Nufft(1, [4 5], 'points'), inv, 'points'
  @() horecon.Nufft(1, [4 5], sparse(x)), inv, 'points'
  @() horecon.Nufft(1, [4 5], x > 0), inv, 'points'
  @() horecon.Nufft(1, [4 5], [x, x(:, 1)]), siz, 'points'
  @() horecon.Nufft(1, [4 5 6], x), siz, 'points'
  @() horecon.Nufft(1, 4, x), siz, 'points'
  @() horecon.Nufft(1, [4 5], reshape(x, 6, 2, 2)), siz, 'points'
  @() horecon.Nufft(1, [4 5], bad), fin, 'points'
  @() horecon.Nufft(1, [4 5], inf_points), fin, 'points'
  @() horecon.Nufft(1, 4, [0.1 NaN 0.2]), fin, 'points'
  % options
  @() horecon.Nufft(1, [4 5], x, 'Sign', 0), inv, 'Sign'
  @() horecon.Nufft(1, [4 5], x, 'Sign', 2), inv, 'Sign'
  @() horecon.Nufft(1, [4 5], x, 'Sign', 'plus'), inv, 'Sign'
  @() horecon.Nufft(1, [4 5], x, 'Sign', [1 -1]), inv, 'Sign'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', 1e-9, 'Precision', 'single'), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', 1e-13), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', 0.5), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', 0), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', -1e-6), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', NaN), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', Inf), inv, 'tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', 'small'), inv, 'Tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance', complex(1e-6, 1)), inv, 'Tolerance'
  @() horecon.Nufft(1, [4 5], x, 'Transforms', 0), inv, 'Transforms'
  @() horecon.Nufft(1, [4 5], x, 'Transforms', 2.5), inv, 'Transforms'
  @() horecon.Nufft(1, [4 5], x, 'Transforms', 'two'), inv, 'Transforms'
  @() horecon.Nufft(1, [4 5], x, 'Transforms', 2^40), inv, 'Transforms'
  @() horecon.Nufft(1, [4 5], x, 'Precision', 'half'), inv, 'Precision'
  @() horecon.Nufft(1, [4 5], x, 'Precision', 2), inv, 'Precision'
  @() horecon.Nufft(1, [4 5], x, 'Backend', 'gpu'), inv, 'Backend'
  @() horecon.Nufft(1, [4 5], x, 'Threads', -1), inv, 'Threads'
  @() horecon.Nufft(1, [4 5], x, 'Threads', 'all'), inv, 'Threads'
  @() horecon.Nufft(1, [4 5], x, 'Device', -1), inv, 'Device'
  @() horecon.Nufft(1, [4 5], x, 'Bogus', 1), inv, 'Bogus'
  @() horecon.Nufft(1, [4 5], x, 'Tolerance'), inv, 'name/value'
  @() horecon.Nufft(1, [4 5]), inv, 'points'
  % execute: class, shape, finiteness
  @() nu1.execute(c(1:end - 1, :)), siz, 'c'
  @() nu1.execute(c.'), siz, 'c'
  @() nu1.execute(c(:, 1)), siz, 'c'
  @() nu1.execute([]), siz, 'c'
  @() nu1.execute(c_nan), fin, 'c'
  @() nu1.execute(int16(real(c))), inv, 'c'
  @() nu1.execute(num2cell(c)), inv, 'c'
  @() nu1.execute(sparse(real(c))), inv, 'c'
  @() nu1.execute(true(12, 2)), inv, 'c'
  @() nu1.execute('c'), inv, 'c'
  @() nu1.execute(), inv, 'input'
  @() nu2.execute(permute(f, [2 1 3])), siz, 'f'
  @() nu2.execute(f(:, :, 1)), siz, 'f'
  @() nu2.execute(f(:)), siz, 'f'
  @() nu2.execute(f_inf), fin, 'f'
  @() nu2.execute(1e300 * f), fin, 'f'
  @() nu2.execute(struct('f', f)), inv, 'f'
  % the one-shot functions
  @() horecon.nufft1(x, c, [4 5], 'Tolerance', 2), inv, 'tolerance'
  @() horecon.nufft1(x, c(1:end - 1, :), [4 5]), siz, 'c'
  @() horecon.nufft1(bad, c, [4 5]), fin, 'points'
  @() horecon.nufft1(x, c), inv, 'nufft1'
  @() horecon.nufft2(ones(5, 4), f), siz, 'points'
  @() horecon.nufft2({x}, f), siz, 'points'
  @() horecon.nufft2(complex(x, 1), f), inv, 'points'
  @() horecon.nufft2(x, 'f'), inv, 'f'
  @() horecon.nufft2(x), inv, 'nufft2'
  @() horecon.nufft(3, [4 5], x, c), inv, 'type'
  @() horecon.nufft(1, [4 5], x), inv, 'nufft'
  % the gateway: handles of deleted, foreign or other plans
  @() horecon_mex('nufftExecute', uint64(42), c), inv, 'NUFFT'
  @() horecon_mex('nufftExecute', p.mexHandle(), c), inv, 'NUFFT'
  @() horecon_mex('nufftExecute', 42, c), inv, 'handle'
  @() horecon_mex('nufftExecute', uint64(42)), inv, 'nufftExecute'
  @() horecon_mex('nufftCreate', 1, [4 5], x), inv, 'nufftCreate'
  @() horecon_mex('nufftDestroy', 'h'), inv, 'handle'
};
for i = 1:size(cases, 1)
  err = expect_error(cases{i, 2}, cases{i, 1});
  word = ['(^|[^A-Za-z0-9_])' regexptranslate('escape', cases{i, 3}) '([^A-Za-z0-9_]|$)'];
  assert(~isempty(regexpi(err.message, word, 'once')), ...
         'case %d (%s): the message does not name %s: %s', i, func2str(cases{i, 1}), cases{i, 3}, err.message);
end
assert(isequal(nu1.execute(c), before1) && isequal(nu2.execute(f), before2), 'the plans changed after the failing calls');
fprintf('    %d wrong inputs tried: each an error naming its argument\n', size(cases, 1));
end

% ----------------------------------------------------------------- deletion

function check_deletion(live0)
x = random_points(10, 1, false);
nu = horecon.Nufft(2, 6, x);
assert(horecon_mex('liveNuffts') == live0 + 1, 'create registers a NUFFT plan');
state = warning('off', 'all');   % struct() of an object warns that it reads private properties
h = struct(nu);                  % ... which gives the private handle (Octave and MATLAB)
warning(state);
delete(nu);
assert(horecon_mex('liveNuffts') == live0, 'delete frees the NUFFT plan');
delete(nu);       % a second deletion does nothing
try
  nu.execute(ones(6, 1));
  error('horecon:test', 'a deleted NUFFT plan must not be usable');
catch err
  % MATLAB: an invalid (deleted) handle object; Octave: the MEX's registry check
  if exist('OCTAVE_VERSION', 'builtin')
    assert(strcmp(err.identifier, 'horecon:invalidArgument') && ~isempty(strfind(err.message, 'deleted')), ...
           'use after delete: %s (%s)', err.message, err.identifier);
  else
    assert(~strcmp(err.identifier, 'horecon:test'), err.message);
  end
end
if isfield(h, 'Handle')
  % ... so the stale handle itself is refused, and destroying it again is a no-op
  expect_error('horecon:invalidArgument', @() horecon_mex('nufftExecute', h.Handle, ones(6, 1)));
  horecon_mex('nufftDestroy', h.Handle);
end
% clearing the only reference, or leaving a function, frees the plan
q = horecon.Nufft(1, 6, x); %#ok<NASGU>
clear q;
assert(horecon_mex('liveNuffts') == live0, 'clear frees the NUFFT plan');
make_and_forget(x);
assert(horecon_mex('liveNuffts') == live0, 'a NUFFT plan local to a function leaks');
fprintf('    NUFFT plans alive before and after: %d\n', live0);
end

function make_and_forget(x)
nu = horecon.Nufft(1, 6, x); %#ok<NASGU>
end

% ----------------------------------------------------------------- helpers

function points = random_points(npoints, ndims, wide)
% npoints x ndims radians in [-pi, pi), or FINUFFT's whole range [-3pi, 3pi) when wide
points = (rand(npoints, ndims) * 2 - 1) * pi * (1 + 2 * wide);
end

function in = random_input(type, modes, npoints, ntrans)
if type == 1
  shape = [npoints, ntrans];
else
  shape = [modes, ntrans];
end
in = complex(randn(shape), randn(shape));
end

function k = mode_vectors(modes)
% prod(modes) x ndims integer modes, first index fastest, k = i - 1 - floor(n/2)
axes = cell(1, numel(modes));
for a = 1:numel(modes)
  axes{a} = (0:modes(a) - 1) - floor(modes(a) / 2);
end
grids = cell(1, numel(modes));
if numel(modes) == 1
  grids{1} = axes{1}(:);
else
  [grids{:}] = ndgrid(axes{:});
end
k = zeros(prod(modes), numel(modes));
for a = 1:numel(modes)
  k(:, a) = grids{a}(:);
end
end

function out = direct_sum(type, modes, points, in, sign)
% The exact sums in double: type 1 grid(k) = sum_j c_j e^{sign i k.x_j}, type 2 the transpose.
points = reshape(points, [], numel(modes));
e = exp(sign * 1i * mode_vectors(modes) * points.');   % prod(modes) x npoints
if type == 1
  out = reshape(e * reshape(double(in), size(points, 1), []), [modes, numel(in) / max(size(points, 1), 1)]);
else
  out = e.' * reshape(double(in), prod(modes), []);
end
end

function part = slice(values, modes, ntrans, grid)
% the last transform of a batch: a grid of size modes, or a column of nonuniform values
part = reshape(values, [], ntrans);
part = part(:, end);
if grid
  part = reshape(part, [modes 1]);
end
end
