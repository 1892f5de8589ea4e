function test_plan_deletion()
%TEST_PLAN_DELETION  delete destroys the plan once; double deletion and use
%   after deletion are safe; clearing the last reference destroys it too.
live0 = horecon_mex('livePlans');
p = horecon.Plan([4 4 1], 1, 10);
assert(horecon_mex('livePlans') == live0 + 1, 'create registers a plan');
delete(p);
assert(horecon_mex('livePlans') == live0, 'delete destroys the plan');
try
  delete(p);   % second deletion: a no-op (MATLAB may also just ignore it)
catch err
  error('horecon:test', 'double deletion failed: %s', err.message);
end
try
  p.forward(ones(16, 1));
  error('horecon:test', 'a deleted plan must not be usable');
catch err
  % MATLAB: invalid/deleted object; Octave: the MEX's registry check
  assert(~strcmp(err.identifier, 'horecon:test'), err.message);
end
% A stale or foreign handle is an error, never a crash; destroying it is a no-op.
expect_error('horecon:invalidArgument', @() horecon_mex('forward', uint64(12345), ones(16, 1)));
expect_error('horecon:invalidArgument', @() horecon_mex('forward', 12345, ones(16, 1)));
horecon_mex('destroy', uint64(12345));
% Clearing the only reference destroys the plan (both MATLAB and Octave call delete).
q = horecon.Plan([2 2 1], 1, 3);
assert(horecon_mex('livePlans') == live0 + 1);
clear q;
assert(horecon_mex('livePlans') == live0, 'clear destroys the plan');
% Handles are ids, not addresses: a Plan that outlived `clear horecon_mex`
% (every plan destroyed) is refused, and never drives a plan created after.
p1 = horecon.Plan([8 8 1], 1, 30);
h1 = p1.mexHandle();
clear horecon_mex
p2 = horecon.Plan([8 8 1], 1, 30);
assert(~isequal(p2.mexHandle(), h1), 'a new plan got the handle of a destroyed one');
expect_error('horecon:invalidArgument', @() horecon_mex('backend', h1));
clear p1;  % its delete destroys nothing of p2's
assert(strcmp(horecon_mex('backend', p2.mexHandle()), p2.backend()), 'p2 broken by the stale p1');
clear p2;
live0 = horecon_mex('livePlans');
% A plan created inside a function is destroyed when the function returns.
make_and_forget();
assert(horecon_mex('livePlans') == live0, 'a plan local to a function leaks');
fprintf('    plans alive before and after: %d\n', live0);
end

function make_and_forget()
p = horecon.Plan([2 2 1], 1, 3); %#ok<NASGU>
end
