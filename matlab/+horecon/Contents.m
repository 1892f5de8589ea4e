% horecon: exact MRI reconstruction with higher-order field models (MATLAB / GNU Octave)
%
% Start here: cd <repo>/matlab; horecon_install   (builds the MEX, adds the path, self-test)
%
% Plans and operators
%   Plan            - a reconstruction plan: geometry, phase model, coils, operators, CG
%     .setPositions, .setGridPositions, .setTrajectory, .setSolidHarmonics, .setBasis,
%     .setOffResonance, .setSensitivities, .setToeplitz, .setCartesian   (the model)
%     .forward, .adjoint, .normal                                          (E, E^H, E^H E)
%     .cg, .gridding, .fhd, .q, .qDims, .backend                           (reconstruction)
%     .delete                                                              (delete(p) frees it)
%   version         - the library version, 'MAJOR.MINOR.PATCH'
%   cudaDeviceCount - usable CUDA devices (0 without a GPU)
%
% Simulation toolkit (help horecon.sim)
%   sim.sheppLogan, sim.sheppLoganKspace, sim.sheppLoganBandLimited  - phantoms
%   sim.spiral, sim.radial, sim.epi, sim.cartesian, sim.stackOfSpirals - trajectories (rad/m, s)
%   sim.coilSensitivities, sim.offResonance, sim.fieldCoefficients     - coils, B0, field model
%   sim.addNoise, sim.refinedGrid, sim.blockAverage, sim.densityWeights - data and grids
%   sim.nrmse, sim.psnr, sim.percentError                              - metrics
%
% Outside the package (matlab/)
%   horecon_install - set up horecon in this MATLAB/Octave and check it works
%   build_mex       - build the MEX gateway only
%   examples/higher_order_workflow, examples/fhd_precision_validation
%
% Model: phi(j,n) = sum_b coef(j,b)*h_b(r_n) + w(n)*t(j), E((j,c),n) = S(n,c)*exp(+1i*phi(j,n)).
% Errors have identifiers horecon:<status> (horecon:sizeMismatch, horecon:notFinite, ...).
