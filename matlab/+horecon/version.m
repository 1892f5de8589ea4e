function v = version()
%horecon.version  The library version, 'MAJOR.MINOR.PATCH'.
v = horecon_mex('version');
end
