function test_help()
%TEST_HELP  Every public function has help text: horecon.Plan and horecon.Nufft and each
%   of their public methods, every function of +horecon and +horecon/+sim, horecon_install and build_mex;
%   and +horecon/Contents.m names every one of them.
here = fileparts(fileparts(mfilename('fullpath')));   % matlab/
private = {'shape', 'parseOptions', 'code'};            % methods (Access = private)
names = {'horecon.Plan', 'horecon_install', 'build_mex'};
contents = fileread(fullfile(here, '+horecon', 'Contents.m'));
methodNames = setdiff(methods('horecon.Plan'), [private, {'Plan'}]);
for i = 1:numel(methodNames)
  names{end + 1} = ['horecon.Plan.' methodNames{i}]; %#ok<AGROW>
  assert(~isempty(strfind(contents, ['.' methodNames{i}])), ...
         'Contents.m does not list horecon.Plan.%s', methodNames{i});
end
% horecon.Nufft (+horecon/@Nufft: a folder, so Nufft.m and nufft.m never share one
% directory on case-insensitive file systems) and its public methods
names{end + 1} = 'horecon.Nufft';
assert(~isempty(strfind(contents, 'Nufft ')), 'Contents.m does not list horecon.Nufft');
inherited = methods('handle');    % MATLAB lists addlistener, eq, ... (Octave: delete)
nufftMethods = setdiff(methods('horecon.Nufft'), [private, {'Nufft'}, inherited(:).']);
for i = 1:numel(nufftMethods)
  names{end + 1} = ['horecon.Nufft.' nufftMethods{i}]; %#ok<AGROW>
  assert(~isempty(strfind(contents, ['.' nufftMethods{i}])) || ~isempty(strfind(contents, [nufftMethods{i} '('])), ...
         'Contents.m does not list horecon.Nufft.%s', nufftMethods{i});
end
packages = {'+horecon', fullfile('+horecon', '+sim')};
for p = 1:numel(packages)
  files = dir(fullfile(here, packages{p}, '*.m'));
  prefix = strrep(strrep(packages{p}, filesep, '.'), '+', '');
  for i = 1:numel(files)
    name = files(i).name(1:end - 2);
    if strcmp(name, 'Contents') || strcmp(name, 'Plan')
      continue;
    end
    names{end + 1} = [prefix '.' name]; %#ok<AGROW>
    listed = name;
    if strcmp(prefix, 'horecon.sim')
      listed = ['sim.' name];
    end
    assert(~isempty(strfind(contents, listed)), 'Contents.m does not list %s.%s', prefix, name);
  end
end
missing = {};
for i = 1:numel(names)
  text = help(names{i});
  if numel(strtrim(text)) < 20
    missing{end + 1} = names{i}; %#ok<AGROW>
  end
end
assert(isempty(missing), 'no help text: %s', strjoin(missing, ', '));
fprintf('    %d public functions and methods have help text\n', numel(names));
end
