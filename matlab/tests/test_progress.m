function test_progress()
%TEST_PROGRESS  The progress display of long calls (horecon.progress, issue 11):
%   the text line with a delay of 0 (every call), nothing when 'off', no line
%   for calls shorter than the delay, 'stopped' after a call that fails, the
%   waitbar mode falling back to the text line where no waitbar can be drawn,
%   and the mode round trip.
test_seed('test_progress');
saved = horecon.progress();
restore = onCleanup(@() horecon.progress(saved, 1));
pr = random_problem([6 5 1], 2, 40, 4, true);
p = make_plan(pr);

horecon.progress('text', 0);
assert(strcmp(horecon.progress(), 'text'), 'the mode is kept');
out = evalc('d = p.forward(pr.x);');
assert(~isempty(regexp(out, 'horecon forward: +0 %', 'once')), 'no progress line: [%s]', out);
assert(~isempty(strfind(out, 'horecon forward: done in')), 'no final line: [%s]', out);
assert(isequal(d, evalc_forward(p, pr.x)), 'the display changes no result');
out = evalc('[x, info] = p.cg(pr.d, ''MaxIterations'', 3);');
assert(~isempty(strfind(out, 'horecon cg: done in')), 'no line for cg: [%s]', out);
out = evalc('P = horecon.sim.refinedGrid([6 5 1], [0.2 0.2 0.01], [0 0 0], 2);');
assert(~isempty(strfind(out, 'horecon simRefinedGrid: done in')), 'no line for the toolkit: [%s]', out);

% A call that fails after it started: the line says so.
q = horecon.Plan([6 5 1], 1, 40);
q.setBasis(randn(30, 2), randn(40, 2));
q.setToeplitz(true, 0);
out = evalc('try, q.normal(pr.x); catch, end');
assert(~isempty(strfind(out, 'horecon normal: stopped after')), 'no stopped line: [%s]', out);

% 'off', and calls shorter than the delay, show nothing.
horecon.progress('off', 0);
assert(isempty(evalc('p.forward(pr.x);')), 'output while off');
horecon.progress('text', 60);
assert(isempty(evalc('p.forward(pr.x);')), 'output before the delay');

% Where no waitbar can be drawn (GNU Octave without its GUI), 'waitbar' and
% 'auto' fall back to the text line.
if exist('OCTAVE_VERSION', 'builtin') ~= 0 && ~isguirunning()
  for mode = {'waitbar', 'auto'}
    horecon.progress(mode{1}, 0);
    out = evalc('p.forward(pr.x);');
    assert(~isempty(strfind(out, 'horecon forward: done in')), '%s: no text line: [%s]', mode{1}, out);
  end
end
% MATLAB code run by the display (a timer, a GUI callback) cannot use horecon
% (horecon:busy), and a Plan deleted there is destroyed when the call is over.
global HORECON_PROGRESS_HOOK HORECON_PROGRESS_SEEN HORECON_PROGRESS_VICTIM
HORECON_PROGRESS_SEEN = {};
HORECON_PROGRESS_VICTIM = horecon.Plan([4 4 1], 1, 10);
live = horecon_mex('livePlans');
HORECON_PROGRESS_HOOK = @nested_calls;
horecon.progress('text', 0);
evalc('p.forward(pr.x);');
HORECON_PROGRESS_HOOK = [];
assert(any(strcmp(HORECON_PROGRESS_SEEN, 'horecon:busy')), 'a nested call was not refused: %s', ...
       strjoin(HORECON_PROGRESS_SEEN, ', '));
assert(horecon_mex('livePlans') == live - 1, 'the Plan deleted during the call was not destroyed after it');
assert(isequal(evalc_forward(p, pr.x), d), 'the plan works after the nested calls');
previous = horecon.progress('off');
assert(ischar(previous) && any(strcmp(previous, {'off', 'auto', 'waitbar', 'text'})));
fprintf('    text line, off, delay, stopped and waitbar fallback as documented\n');
end

function nested_calls(label, fraction) %#ok<INUSD>
global HORECON_PROGRESS_SEEN HORECON_PROGRESS_VICTIM
try
  horecon.version();
  HORECON_PROGRESS_SEEN{end + 1} = 'allowed';
catch err
  HORECON_PROGRESS_SEEN{end + 1} = err.identifier;
end
HORECON_PROGRESS_VICTIM = [];  % the last reference: Plan.delete runs now
end

function d = evalc_forward(p, x)
evalc('d = p.forward(x);');
end
