function w = densityWeights(k)
%horecon.sim.densityWeights  Density-compensation weights (M x 1, mean 1) of a 2D readout k (M x 2).
w = horecon_mex('simDensityWeights', k);
end
