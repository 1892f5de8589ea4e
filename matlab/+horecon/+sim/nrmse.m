function e = nrmse(x, ref)
%horecon.sim.nrmse  norm(x - ref) / norm(ref).
e = horecon_mex('simNrmse', x, ref);
end
