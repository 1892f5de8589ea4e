% horecon.sim: the simulation toolkit (the library's src/sim, shared with Rust and Python)
%
% Phantoms
%   sheppLogan            - Shepp-Logan values at positions (2D or 3D)
%   sheppLoganKspace      - its analytic Fourier transform at k (rad/m)
%   sheppLoganBandLimited - the 2D phantom seen through |k| <= kmax on a grid
% Trajectories (k in rad/m, t in s)
%   spiral, radial, epi, cartesian, stackOfSpirals
%   densityWeights        - density-compensation weights of a 2D readout
% Coils, B0, field model
%   coilSensitivities     - N x L sensitivities of coils on a circle
%   offResonance          - a smooth off-resonance map (rad/s)
%   fieldCoefficients     - M x 16 higher-order coefficients around a nominal trajectory
% Data and grids
%   addNoise, refinedGrid, blockAverage
% Metrics
%   nrmse, psnr, percentError
