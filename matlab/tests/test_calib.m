function test_calib()
%TEST_CALIB  The calibration chain from MATLAB/Octave: the workflow with
%   'Calibrate' at 48x48 (maps, B0 map, delay against the truth), the CG
%   preconditioners and the discrepancy rule, and bad-input identifiers.
r = higher_order_workflow('Size', 48, 'Dwell', 2e-5, 'Iterations', 15, 'Output', '', 'Calibrate', true, ...
                          'Undersampling', 1.5);
c = r(5);
fprintf('    maps %.2f %%, B0 %.2f Hz, delay error %.2f us, NRMSE (e) %.4f vs (b) nominal %.4f\n', ...
        100 * c.mapNrmse, c.b0RmsHz, c.delayErrorUs, c.nrmse, r(2).nrmse);
assert(c.mapNrmse < 0.05, 'ESPIRiT map NRMSE %g', c.mapNrmse);
assert(c.b0RmsHz < 2, 'B0 RMS %g Hz', c.b0RmsHz);
assert(c.delayErrorUs < 0.5, 'delay error %g us', c.delayErrorUs);
assert(c.nrmse < r(2).nrmse, 'the calibrated reconstruction must beat the nominal one');

% preconditioned CG and the discrepancy rule report why they stopped
n = 24;
[k, ~] = horecon.sim.radial(n, 0.22, 30, 4e-6, 0);
p = horecon.Plan([n n 1], 1, size(k, 1), 'Backend', 'cpu');
p.setGridPositions([0.22 0.22 0.005], [0 0 0]);
p.setTrajectory(k);
p.setToeplitz(true);
x0 = horecon.sim.sheppLogan(2, [0.2 0.2 0], [0 0 0], horecon.sim.refinedGrid([n n 1], [0.22 0.22 0.005], [0 0 0], 1));
d = p.forward(x0);
[~, a] = p.cg(d, 'MaxIterations', 300, 'Tolerance', 1e-4);
[~, b] = p.cg(d, 'MaxIterations', 300, 'Tolerance', 1e-4, 'Preconditioner', 'circulant');
fprintf('    iterations to 1e-4: CG %d, circulant PCG %d\n', a.iterations, b.iterations);
assert(strcmp(a.stopReason, 'tolerance') && strcmp(b.stopReason, 'tolerance'));
assert(b.iterations < a.iterations);
[dn, sigma] = horecon.sim.addNoise(d, 30, 3);
[~, c2] = p.cg(dn, 'MaxIterations', 200, 'Tolerance', 0, 'DiscrepancyTau', 1, 'NoiseSigma', sigma);
assert(strcmp(c2.stopReason, 'discrepancy'), 'stop reason %s', c2.stopReason);

% bad input
q = horecon.Plan([16 16 1], 2, 8, 'Backend', 'cpu');
q.setGridPositions([0.2 0.2 0.01], [0 0 0]);
y = single(mod(0:511, 7) - 3).';
expect_error('horecon:invalidArgument', ...
             @() horecon.calib.espirit(q, reshape(y, 256, 2), [16 16 1], [0.2 0.2 0.01], [0 0 0], 'Calibration', 4));
expect_error('horecon:invalidArgument', @() horecon.calib.espirit(q, zeros(256, 2), [16 16 1], [0.2 0.2 0.01], [0 0 0]));
expect_error('horecon:invalidArgument', ...
             @() horecon.calib.b0Map(q, reshape(y, 256, 2), 2e-3, [16 16 1], [0.2 0.2 0.01], [0 0 0]));
expect_error('horecon:invalidArgument', @() horecon.calib.whiten(ones(2), ones(4, 2)));
delete(q);
delete(p);
end
