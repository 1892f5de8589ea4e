function v = whiten(psi, values)
%horecon.calib.whiten  Whitening (Pruessmann et al. 2001): every row x of values (P x L)
%   becomes C\x with psi = C*C' (Cholesky). Apply it to the data (M x L) and the
%   sensitivities (N x L) alike; CG on them is the noise-optimal reconstruction and
%   the discrepancy rule then uses NoiseSigma = 1.
L = size(psi, 1);
v = horecon_mex('whiten', psi, reshape(values, [], L));
end
