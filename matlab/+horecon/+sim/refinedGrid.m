function P = refinedGrid(dims, fov, center, factor)
%horecon.sim.refinedGrid  Positions (N*factor^d x 3) of the grid refined by factor
%   (sub-voxels symmetric around each voxel of setGridPositions' grid).
dims = [dims(:).', ones(1, 3 - numel(dims))];
P = horecon_mex('simRefinedGrid', dims, fov, center, factor);
end
