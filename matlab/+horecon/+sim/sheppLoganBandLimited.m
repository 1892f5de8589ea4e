function x = sheppLoganBandLimited(fov, center, P, gridFov, kmax)
%horecon.sim.sheppLoganBandLimited  The 2D phantom seen through |k| <= kmax (rad/m)
%   on a grid of field of view gridFov ([fx fy], m): (1/(fx*fy)) sum over the
%   Cartesian grid dk = 2*pi./gridFov inside the disk of F(k) exp(-1i*k*r), at P (N x 3).
x = horecon_mex('simSheppLoganBandLimited', fov, center, P, gridFov, kmax);
end
