function test_fhd_validation()
%TEST_FHD_VALIDATION  examples/fhd_precision_validation.m at 32x32: F^H d in each
%   precision mode within its accuracy class against the float64 .m sum, and
%   the reconstructions' PSNR nearly independent of the mode (Kirk-Hwu fig. 14.19).
r = fhd_precision_validation('Size', 32, 'Iterations', 10, 'Quiet', true);
bounds = struct('double', 1e-6, 'accurate', 1e-5, 'fast', 1e-3);
for i = 1:numel(r)
  fprintf('    %-8s F^H d error %.1e (PSNR %.1f dB), recon %.2f %% (PSNR %.2f dB)\n', r(i).mode, ...
          r(i).fhdError, r(i).fhdPsnr, r(i).percentError, r(i).psnr);
  assert(r(i).fhdError <= bounds.(r(i).mode), '%s: F^H d error %g', r(i).mode, r(i).fhdError);
end
assert(abs(r(3).psnr - r(1).psnr) < 0.5, 'fast sin/cos changes the reconstruction PSNR by %.2f dB', ...
       r(3).psnr - r(1).psnr);
assert(abs(r(2).psnr - r(1).psnr) < 0.5);
end
