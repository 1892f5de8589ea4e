function x = blockAverage(fine, dims, factor)
%horecon.sim.blockAverage  Averages a refined-grid image back onto the grid dims.
dims = [dims(:).', ones(1, 3 - numel(dims))];
x = horecon_mex('simBlockAverage', dims, factor, fine);
end
