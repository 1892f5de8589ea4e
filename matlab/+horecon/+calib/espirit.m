function [maps, eigenvalues] = espirit(p, kspace, refDims, fov, center, varargin)
%horecon.calib.espirit  ESPIRiT coil maps (Uecker et al. 2014) at plan p's positions.
%   [maps, eig] = horecon.calib.espirit(p, kspace, refDims, fov, center, 'Kernel', 6,
%       'Calibration', 24, 'Threshold', 0.02, 'Crop', 0.8)
%   kspace: Cartesian reference k-space (prod(refDims) x L, L = p.NumCoils) on the grid
%   refDims, fov, center. maps: N x L with sum_c |S_c|^2 = 1, zero where the largest
%   eigenvalue of G(r) (eig, N x 1, ~1 inside the object) is below Crop.
opts = struct('Kernel', 6, 'Calibration', 24, 'Threshold', 0.02, 'Crop', 0.8);
opts = horecon.calib.options(opts, varargin);
[maps, eigenvalues] = horecon_mex('espirit', p.mexHandle(), refDims, fov, center, ...
  reshape(kspace, prod(refDims), []), opts.Kernel, opts.Calibration, opts.Threshold, opts.Crop);
end

