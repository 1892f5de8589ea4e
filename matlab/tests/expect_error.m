function err = expect_error(identifier, fn)
%EXPECT_ERROR  Runs fn and checks that it fails with this identifier and a message.
try
  fn();
catch err
  assert(strcmp(err.identifier, identifier), ...
         'expected error %s, got %s: %s', identifier, err.identifier, err.message);
  assert(~isempty(err.message), 'error %s has no message', identifier);
  return;
end
error('horecon:test', 'expected error %s, but the call succeeded', identifier);
end
