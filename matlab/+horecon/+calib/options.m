function opts = options(opts, args)
%horecon.calib.options  Name-value pairs args (case-insensitive) over the defaults opts
%   (the option parser of horecon.calib.*); unknown names are horecon:invalidArgument.
names = fieldnames(opts);
if mod(numel(args), 2) ~= 0
  error('horecon:invalidArgument', 'options must be name/value pairs, got %d arguments', numel(args));
end
for i = 1:2:numel(args)
  if ~ischar(args{i})
    error('horecon:invalidArgument', 'an option name must be text, got a %s (name/value pairs)', class(args{i}));
  end
  match = find(strcmpi(names, args{i}));
  if isempty(match)
    error('horecon:invalidArgument', 'unknown option %s (known: %s)', num2str(args{i}), strjoin(names.', ', '));
  end
  opts.(names{match}) = args{i + 1};
end
end
