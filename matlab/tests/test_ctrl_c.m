function test_ctrl_c()
%TEST_CTRL_C  (GNU Octave only) SIGINT, as Ctrl-C sends it, during cg stops the
%   solve cleanly with horecon:cancelled; the session and the plan stay usable.
if exist('OCTAVE_VERSION', 'builtin') == 0 || ~isunix()
  fprintf('    skipped (needs GNU Octave on a POSIX system)\n');
  return;
end
n = 96;
[k, ~] = horecon.sim.spiral(n, 0.22, 3, 1e-5);
p = horecon.Plan([n n 1], 8, size(k, 1));
p.setGridPositions([0.22 0.22 0.002], [0 0 0.02]);
p.setTrajectory(k);
P = horecon.sim.refinedGrid([n n 1], [0.22 0.22 0.002], [0 0 0.02], 1);
p.setSensitivities(horecon.sim.coilSensitivities(P, 8, 0.15));
d = p.forward(ones(n * n, 1));
system(sprintf('sleep 3; kill -INT %d', getpid()), false, 'async');
started = tic;
try
  p.cg(d, 'MaxIterations', 3000, 'Tolerance', 0);
  error('horecon:test', 'cg was not interrupted');
catch err
  assert(strcmp(err.identifier, 'horecon:cancelled'), 'got %s: %s', err.identifier, err.message);
end
fprintf('    interrupted after %.1f s: %s\n', toc(started), err.message);
assert(isequal(p.forward(ones(n * n, 1)), d), 'the plan is still usable after Ctrl-C');

% A long operator (not cg): Ctrl-C cancels it between chunks of work (issue 11).
n = 192;
[k, ~] = horecon.sim.spiral(n, 0.22, 1, 1e-5);
q = horecon.Plan([n n 1], 8, size(k, 1));
q.setGridPositions([0.22 0.22 0.002], [0 0 0.02]);
q.setTrajectory(k);
P = horecon.sim.refinedGrid([n n 1], [0.22 0.22 0.002], [0 0 0.02], 1);
q.setSensitivities(horecon.sim.coilSensitivities(P, 8, 0.15));
system(sprintf('sleep 2; kill -INT %d', getpid()), false, 'async');
started = tic;
try
  q.forward(ones(n * n, 1));
  error('horecon:test', 'forward was not interrupted');
catch err
  assert(strcmp(err.identifier, 'horecon:cancelled'), 'got %s: %s', err.identifier, err.message);
end
fprintf('    forward interrupted after %.1f s: %s\n', toc(started), err.message);
assert(toc(started) < 30, 'forward took %.1f s to see Ctrl-C', toc(started));
assert(isequal(p.forward(ones(96 * 96, 1)), d), 'plans are still usable after Ctrl-C');
end
