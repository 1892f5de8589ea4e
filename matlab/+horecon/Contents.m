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
%     .Approximation, .approximationInfo          (the fast path: tolerance and its state)
%     .delete                                                              (delete(p) frees it)
%     .mexHandle                                  (the handle horecon.calib.* hand to the MEX)
%   version         - the library version, 'MAJOR.MINOR.PATCH'
%   progress        - how long calls show their progress (waitbar, text line, off); Ctrl-C cancels them
%   cudaDeviceCount - usable CUDA devices (0 without a GPU)
%
% Non-uniform FFT (types 1 and 2, 1D/2D/3D, FINUFFT's conventions; help horecon.Nufft; issue 14)
%   Nufft           - a NUFFT plan: nu = horecon.Nufft(type, modes, points, 'Sign', 'Tolerance',
%                     'Transforms', 'Precision', 'Backend', ...); out = nu.execute(in); delete(nu)
%   nufft           - one NUFFT in one call: out = horecon.nufft(type, modes, points, in, ...)
%   nufft1          - type 1 (nonuniform -> grid): f = horecon.nufft1(points, c, modes, ...)
%   nufft2          - type 2 (grid -> nonuniform): c = horecon.nufft2(points, f, ...)
%
% Simulation toolkit (help horecon.sim)
%   sim.sheppLogan, sim.sheppLoganKspace, sim.sheppLoganBandLimited  - phantoms
%   sim.spiral, sim.radial, sim.epi, sim.cartesian, sim.stackOfSpirals - trajectories (rad/m, s)
%   sim.coilSensitivities, sim.offResonance, sim.fieldCoefficients     - coils, B0, field model
%   sim.addNoise, sim.refinedGrid, sim.blockAverage, sim.densityWeights - data and grids
%   sim.nrmse, sim.psnr, sim.percentError                              - metrics
%   sim.reference, sim.noiseCovariance, sim.correlatedNoise            - reference scans, coil noise
%
% Calibration chain (help horecon.calib; issue 12)
%   calib.noiseCovariance, calib.whiten     - noise covariance and whitening of data and coils
%   calib.espirit, calib.walsh              - coil maps (ESPIRiT; adaptive combine)
%   calib.cartesianImages                   - coil images from Cartesian reference k-space
%   calib.b0Map                             - B0 map from a multi-echo gradient-echo reference
%   calib.estimateDelay                     - delay between field-camera coefficients and data
%   calib.options                           - the option parser of horecon.calib.*
%
% Outside the package (matlab/)
%   horecon_install - set up horecon in this MATLAB/Octave and check it works
%   build_mex       - build the MEX gateway only
%   examples/higher_order_workflow, examples/fhd_precision_validation
%
% Model: phi(j,n) = sum_b coef(j,b)*h_b(r_n) + w(n)*t(j), E((j,c),n) = S(n,c)*exp(+1i*phi(j,n)).
% Errors have identifiers horecon:<status> (horecon:sizeMismatch, horecon:notFinite, ...).
