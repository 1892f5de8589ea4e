function [delay, residual, curve] = estimateDelay(p, d, t, coef, varargin)
%horecon.calib.estimateDelay  Delay (s) between field-monitoring coefficients (or the
%   nominal trajectory) and the data d (M x L), with sample times t (M x 1):
%   coefficients resampled at t + delay, a short CG reconstruction per candidate, the
%   data residual minimised over a coarse grid then by golden-section search.
%   coef: M x B in the shape of p's phase model ([] = p's own). Options 'Range' 20e-6,
%   'Step' 4e-6, 'Tolerance' 0.05e-6, 'Iterations' 10, 'Lambda' 0, 'Groups' 0
%   (bit o = solid-harmonic order o; 0 = all). curve: K x 2 [delay residual].
opts = struct('Range', 20e-6, 'Step', 4e-6, 'Tolerance', 0.05e-6, 'Iterations', 10, 'Lambda', 0, 'Groups', 0);
opts = horecon.calib.options(opts, varargin);
[delay, residual, curve] = horecon_mex('estimateDelay', p.mexHandle(), d, t, coef, opts.Range, opts.Step, ...
                                       opts.Tolerance, opts.Iterations, opts.Lambda, opts.Groups);
end
