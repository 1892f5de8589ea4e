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

// Coil compression (src/backend/fast/coils.rs), A = conj(V_R) (L x R): to[o*M + j] = Σ_i W(o, i) * from[i*M + j]
// with W(o, i) = A[o*inputs + i] (the plan's L coils from the R virtual coils' data, o < L, i < R) or,
// `adjoint`, W(o, i) = conj(A[i*outputs + o]) (the virtual coils' from the plan's, o < R, i < L).
extern "C" __global__ void fast_mix(const double2* __restrict__ from, const double2* __restrict__ A, long long M,
                                    int outputs, int inputs, int adjoint, double2* __restrict__ to) {
    GRID_STRIDE(q, M * outputs) {
        const long long o = q / M, j = q - o * M;
        double2 s = make_double2(0.0, 0.0);
        for (int i = 0; i < inputs; ++i) {
            const double2 x = from[(long long)i * M + j];
            const double2 t = adjoint ? cmulc(A[(long long)i * outputs + o], x) : cmul(A[o * inputs + i], x);
            s.x += t.x;
            s.y += t.y;
        }
        to[q] = s;
    }
}

// One factor of the expansion at `count` points (src/model/separation: Factor, Skeleton):
//   out[l*count + i] = exp(2πi·o_i) · Σ_s exp(i Σ_p x[p*count + i]·f[p*S + s]) · c[s*K + l],  l < K,
// x P×count and f P×S float64 (point fastest), c S×K double2, o (cycles) NULL meaning 0;
// in float64 (the host's arithmetic and order of terms) and rounded once. The K terms in passes
// of FACTOR_CHUNK, each recomputing the S phasors (K ≤ 16 in one pass).
#define FACTOR_CHUNK 16
extern "C" __global__ void fast_factor(const double* __restrict__ x, int P, long long count,
                                       const double* __restrict__ f, const double2* __restrict__ c, int S,
                                       int K, const double* __restrict__ o, REAL2* __restrict__ out) {
    GRID_STRIDE(i, count) {
        double2 shift = make_double2(1.0, 0.0);
        if (o) {
            double sn, cs;
            sincos(6.283185307179586 * o[i], &sn, &cs);
            shift = make_double2(cs, sn);
        }
        for (int l0 = 0; l0 < K; l0 += FACTOR_CHUNK) {
            const int kc = min(FACTOR_CHUNK, K - l0);
            double2 acc[FACTOR_CHUNK];
#pragma unroll
            for (int l = 0; l < FACTOR_CHUNK; ++l) acc[l] = make_double2(0.0, 0.0);
            for (int s = 0; s < S; ++s) {
                double phase = 0.0;
                for (int p = 0; p < P; ++p) phase += x[(long long)p * count + i] * f[(long long)p * S + s];
                double sn, cs;
                sincos(phase, &sn, &cs);
                const double2 e = make_double2(cs, sn);
                const double2* row = c + (long long)s * K + l0;
#pragma unroll
                for (int l = 0; l < FACTOR_CHUNK; ++l) {
                    if (l < kc) {
                        const double2 v = cmul(row[l], e);
                        acc[l].x += v.x;
                        acc[l].y += v.y;
                    }
                }
            }
            for (int l = 0; l < kc; ++l) out[(long long)(l0 + l) * count + i] = narrow2(cmul(acc[l], shift));
        }
    }
}
