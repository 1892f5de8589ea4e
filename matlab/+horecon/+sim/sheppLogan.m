function v = sheppLogan(ndims, fov, center, P)
%horecon.sim.sheppLogan  Shepp-Logan phantom values at positions P (N x 3, m).
%   ndims 2 (Toft's modified 2D; z ignored) or 3 (modified Kak-Slaney 3D);
%   the phantom spans fov ([fx fy fz], m) around center (m).
v = horecon_mex('simSheppLogan', ndims, fov, center, P);
end
