function opts = parseOptions(opts, args)
%PARSEOPTIONS  Name/value pairs ARGS (a cell array) into the struct OPTS of defaults.
%   Names match the fields of OPTS case-insensitively; an odd count, a name
%   that is not a string or an unknown name raise horecon:invalidArgument
%   listing the known names. Values are stored unchecked (the caller checks).
if mod(numel(args), 2) ~= 0
  error('horecon:invalidArgument', 'options must be name/value pairs');
end
names = fieldnames(opts);
for i = 1:2:numel(args)
  match = [];
  if ischar(args{i})
    match = find(strcmpi(names, args{i}));
  end
  if isempty(match)
    error('horecon:invalidArgument', 'unknown option %s (known: %s)', ...
          num2str(args{i}), strjoin(names.', ', '));
  end
  opts.(names{match}) = args{i + 1};
end
end
