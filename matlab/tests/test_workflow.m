function test_workflow()
%TEST_WORKFLOW  examples/higher_order_workflow.m at a reduced size (80x80,
%   a 34 ms readout): the full model lowers the NRMSE at least 3x against the
%   nominal trajectory, beats every partial model, and the montage is written.
output = [tempname() '.png'];
r = higher_order_workflow('Size', 80, 'Dwell', 2e-5, 'Iterations', 20, 'Output', output);
gain = r(2).nrmse / r(1).nrmse;
fprintf('    NRMSE (a) %.4f (b) %.4f (c) %.4f (d) %.4f: full model %.2fx better than nominal\n', ...
        r.nrmse, gain);
assert(gain >= 3, 'the full model must lower the NRMSE >= 3x against the nominal trajectory, got %.2fx', gain);
assert(r(1).nrmse < min([r(2:4).nrmse]), 'the full model must beat every partial model');
assert(r(1).psnr > max([r(2:4).psnr]));
img = imread(output);
assert(isequal(size(img), [2 * 80 + 4, 5 * 80 + 4 * 4]), 'montage size');
delete(output);
end
