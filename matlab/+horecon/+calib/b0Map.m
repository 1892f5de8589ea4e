function w = b0Map(p, kspace, echoTimes, refDims, fov, center, varargin)
%horecon.calib.b0Map  Off-resonance map (N x 1, rad/s) at plan p's positions from a
%   multi-echo gradient-echo reference: kspace prod(refDims) x L x E (echo last),
%   echoTimes (E >= 2, s, increasing). Options 'MaskThreshold' 0.1, 'Smoothness' 1,
%   'MaxIterations' 2000.
opts = struct('MaskThreshold', 0.1, 'Smoothness', 1, 'MaxIterations', 2000);
opts = horecon.calib.options(opts, varargin);
E = numel(echoTimes);
L = numel(kspace) / (prod(refDims) * E);
w = horecon_mex('b0Map', p.mexHandle(), refDims, fov, center, L, echoTimes, ...
                reshape(kspace, prod(refDims), []), opts.MaskThreshold, opts.Smoothness, opts.MaxIterations);
end
