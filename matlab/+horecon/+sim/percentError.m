function p = percentError(x, ref)
%horecon.sim.percentError  100*norm(x - ref)/norm(ref) (Stone et al. 2008).
p = horecon_mex('simPercentError', x, ref);
end
