function opts = options(opts, args)
%horecon.calib.options  Name-value pairs args (case-insensitive) over the defaults opts
%   (the option parser of horecon.calib.*); unknown names are horecon:invalidArgument.
names = fieldnames(opts);
for i = 1:2:numel(args)
  match = find(strcmpi(names, args{i}));
  if isempty(match)
    error('horecon:invalidArgument', 'unknown option %s (known: %s)', num2str(args{i}), strjoin(names.', ', '));
  end
  opts.(names{match}) = args{i + 1};
end
end
