function coef = fieldCoefficients(k, dwell, strength, seed)
%horecon.sim.fieldCoefficients  M x 16 higher-order coefficients (rad/m^order):
%   the nominal trajectory k (M x d) in terms 1..d plus eddy-current-like
%   deviations of orders 0-3 (scaled by strength, drawn from seed).
if nargin < 3, strength = 1; end
if nargin < 4, seed = 2011; end
coef = horecon_mex('simFieldCoefficients', k, dwell, strength, seed);
end
