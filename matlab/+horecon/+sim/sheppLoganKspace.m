function F = sheppLoganKspace(ndims, fov, center, k)
%horecon.sim.sheppLoganKspace  Analytic F(k) = integral rho(r) exp(+1i*k*r) dr.
%   k is M x d (rad/m); F is M x 1 complex double (m^2 in 2D, m^3 in 3D).
%   A voxel sum sum_n rho(r_n) exp(+1i*k*r_n)*dV approximates it.
F = horecon_mex('simSheppLoganKspace', ndims, fov, center, k, size(k, 2));
end
