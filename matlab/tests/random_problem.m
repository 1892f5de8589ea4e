function pr = random_problem(dims, L, M, nterms, with_b0)
%RANDOM_PROBLEM  A tiny random higher-order problem (positions, coefficients,
%   off-resonance, coil sensitivities) with phases of tens of radians.
N = prod(dims);
fov = 0.22;
pr.dims = dims; pr.L = L; pr.M = M; pr.nterms = nterms;
pr.P = (rand(N, 3) - 0.5) * fov;
scale = [3, 400 * [1 1 1], 300 * ones(1, 5), 3000 * ones(1, 7)];
pr.coef = (rand(M, nterms) * 2 - 1) .* scale(1:nterms);
if with_b0
  pr.w = (rand(N, 1) * 2 - 1) * 2 * pi * 150;
  pr.t = linspace(0, 0.02, M).';
else
  pr.w = []; pr.t = [];
end
pr.S = complex(randn(N, L), randn(N, L));
pr.H = ref_solid_harmonics(pr.P, nterms);
pr.x = complex(randn(N, 1), randn(N, 1));
pr.d = complex(randn(M, L), randn(M, L));
end
