// The fast path's O(K·L·(N + M)) kernels around the batched NUFFTs
// (src/backend/cuda/fast.rs; FAST-PATH.md §3):
//
//   E ρ  = Σ_l ã_l(t) ⊙ NUFFT₂(b_l ⊙ S_c ⊙ ρ)
//   Eᴴ d = Σ_c conj(S_c) ⊙ Σ_l conj(b_l) ⊙ NUFFT₁(conj(ã_l) ⊙ d_c)
//
// Layouts: images (CG vectors) and data are double2 (N, and M x L with coil
// c at c*M); a_l is K x M and b_l K x N in REAL2 (float2, or double2 when
// -D MODE=2: the NUFFT's arithmetic). A chunk of B coils starting at c0
// has K*B transforms, transform t = ci*K + l: grids t*G (G lattice modes,
// voxel n at idx[n], idx == NULL meaning n) and non-uniform vectors t*M.
// Sensitivities are float2 N x L, NULL meaning S = 1. Products are formed in
// float64 and rounded once.

// (REAL2 by -D MODE, GRID_STRIDE, cmul, cmulc, widen2, narrow2, coil: complex.cu, prepended.)

// grid[(ci*K + l)*G + idx(n)] = b_l(n) * S_{c0+ci}(n) * x(n), ci < B, l < K.
// Grid points of no voxel (masked lattices) are left as they are (zeroed by the caller).
extern "C" __global__ void fast_grids(const double2* __restrict__ x, const float2* __restrict__ sens,
                                      const REAL2* __restrict__ b, const int* __restrict__ idx, long long N,
                                      long long G, int K, int c0, int B, REAL2* __restrict__ grid) {
    GRID_STRIDE(q, N * B) {
        const long long ci = q / N, n = q - ci * N;
        const double2 sx = cmul(coil(sens, c0 + (int)ci, N, n), x[n]);
        const long long p = idx ? (long long)idx[n] : n;
        for (int l = 0; l < K; ++l) {
            grid[(ci * K + l) * G + p] = narrow2(cmul(widen2(b[(long long)l * N + n]), sx));
        }
    }
}

// d[(c0+ci)*M + j] = w_j * Σ_l a_l(j) * y[(ci*K + l)*M + j]; w == NULL means 1.
extern "C" __global__ void fast_collect(const REAL2* __restrict__ y, const REAL2* __restrict__ a,
                                        const double* __restrict__ w, long long M, int K, int c0, int B,
                                        double2* __restrict__ d) {
    GRID_STRIDE(q, M * B) {
        const long long ci = q / M, j = q - ci * M;
        double2 s = make_double2(0.0, 0.0);
        for (int l = 0; l < K; ++l) {
            const double2 v = cmul(widen2(a[(long long)l * M + j]), widen2(y[(ci * K + l) * M + j]));
            s.x += v.x;
            s.y += v.y;
        }
        const double wt = w ? w[j] : 1.0;
        d[(c0 + ci) * M + j] = make_double2(wt * s.x, wt * s.y);
    }
}

// y[(ci*K + l)*M + j] = conj(a_l(j)) * d[(c0+ci)*M + j].
extern "C" __global__ void fast_spread_data(const double2* __restrict__ d, const REAL2* __restrict__ a,
                                            long long M, int K, int c0, int B, REAL2* __restrict__ y) {
    GRID_STRIDE(q, M * B) {
        const long long ci = q / M, j = q - ci * M;
        const double2 dv = d[(c0 + ci) * M + j];
        for (int l = 0; l < K; ++l) {
            y[(ci * K + l) * M + j] = narrow2(cmulc(widen2(a[(long long)l * M + j]), dv));
        }
    }
}

// out(n) (+)= Σ_ci conj(S_{c0+ci}(n)) * Σ_l conj(b_l(n)) * grid[(ci*K + l)*G + idx(n)];
// accumulate == 0 overwrites out.
extern "C" __global__ void fast_gather(const REAL2* __restrict__ grid, const float2* __restrict__ sens,
                                       const REAL2* __restrict__ b, const int* __restrict__ idx, long long N,
                                       long long G, int K, int c0, int B, int accumulate,
                                       double2* __restrict__ out) {
    GRID_STRIDE(n, N) {
        const long long p = idx ? (long long)idx[n] : n;
        double2 acc = accumulate ? out[n] : make_double2(0.0, 0.0);
        for (int ci = 0; ci < B; ++ci) {
            double2 s = make_double2(0.0, 0.0);
            for (int l = 0; l < K; ++l) {
                const double2 v = cmulc(widen2(b[(long long)l * N + n]), widen2(grid[((long long)ci * K + l) * G + p]));
                s.x += v.x;
                s.y += v.y;
            }
            const double2 v = cmulc(coil(sens, c0 + ci, N, n), s);
            acc.x += v.x;
            acc.y += v.y;
        }
        out[n] = acc;
    }
}
