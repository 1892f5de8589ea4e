function E = ref_encoding(H, coef, w, t, S)
%REF_ENCODING  The encoding matrix of MODEL.md as a plain float64 direct sum:
%   E((j,c), n) = S(n,c) * exp(+1i*(sum_b coef(j,b)*H(n,b) + w(n)*t(j))),
%   rows sample-fastest (M x L data), columns voxels. w = [] means no off-resonance,
%   S = [] means one coil with S = 1.
phi = coef * H.';                      % M x N
if ~isempty(w)
  phi = phi + t(:) * w(:).';
end
F = exp(1i * phi);
if isempty(S)
  E = F;
else
  [M, N] = size(F);
  L = size(S, 2);
  E = zeros(M * L, N);
  for c = 1:L
    E((c - 1) * M + (1:M), :) = F .* S(:, c).';
  end
end
end
