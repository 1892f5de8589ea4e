function run_tests()
%RUN_TESTS  Runs every matlab/tests/test_*.m; any failure makes it error, so
%   octave-cli / matlab -batch exit non-zero.
here = fileparts(mfilename('fullpath'));
addpath(fileparts(here));                      % matlab/: the MEX and +horecon
addpath(fullfile(fileparts(here), 'examples'));
addpath(here);
files = dir(fullfile(here, 'test_*.m'));
names = sort({files.name});
failed = {};
fprintf('horecon %s: %d MATLAB/Octave tests (CUDA devices: %d)\n', horecon.version(), numel(names), ...
        horecon.cudaDeviceCount());
for i = 1:numel(names)
  name = names{i}(1:end - 2);
  if strcmp(name, 'test_seed')
    continue;
  end
  fprintf('%s\n', name);
  started = tic;
  try
    feval(name);
    fprintf('  ok (%.1f s)\n', toc(started));
  catch err
    fprintf('  FAILED: %s (%s)\n', err.message, err.identifier);
    for s = 1:numel(err.stack)
      fprintf('    at %s line %d\n', err.stack(s).name, err.stack(s).line);
    end
    failed{end + 1} = name; %#ok<AGROW>
  end
end
if ~isempty(failed)
  error('horecon:testsFailed', '%d test(s) failed: %s', numel(failed), strjoin(failed, ', '));
end
fprintf('all tests passed\n');
end
