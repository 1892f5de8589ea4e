// The one GPU kernel behind E and E^H (the CUDA twin of src/backend/cpu/kernel.rs):
//
//   partial_l(o) = sum_{i in split} w_l(i) * exp(SIGN * i*2*pi * phase(i, o)),
//   phase(i, o)  = sum_f a_f(i) * v_f(o)                                  [cycles]
//
// over inner points i of one split (blockIdx.y) for every outer point o and coil l
// of one coil group. Adjoint: outer = voxels, inner = samples, w = data, SIGN = -1.
// Forward: outer = samples, inner = voxels, w = S*rho, SIGN = +1.
//
// Accuracy: every thread block owns BLK outer points that are compact in feature
// space (the host sorts them, Morton order) and a reference feature vector v_ref.
// Per inner point the block computes ref(i) = frac(sum_f a_f(i) v_ref_f) ONCE in
// float64; each thread adds sum_f a_f(i) * dv_f(o), dv = v(o) - v_ref (small), in REAL.
// Features constant over all outer points (dv = 0) or zero on the inner side are
// folded into ref and skipped (FE <= FF terms per pair).
//
// When the differences still reach many cycles (scattered points), the first NS
// terms are computed split (accurate mode; kernels/phase_pair.cu).
//
// Compile-time constants (NVRTC -D): FE effective terms, NS split terms, LB coils per group, MODE
// (0 accurate, 1 fast, 2 double), SIGN (+1/-1), THREADS, R outer points per thread,
// TILE inner points per shared-memory tile, UNROLL of the inner loop, TWO_LEVEL
// (sum each tile separately, then add: float32 error ~ u(sqrt(TILE) + sqrt(n/TILE))),
// MINB (blocks per SM the registers must allow), REDUCE (subtract rint before sin/cos; off when |phase| stays within a few cycles).

#if MODE == 2
typedef double REAL;
typedef double2 REAL2;
#else
typedef float REAL;
typedef float2 REAL2;
#endif

#define BLK (THREADS * R)
#define FE_ARR (FE > 0 ? FE : 1)
#define NS_ARR (NS > 0 ? NS : 1)
#define NA (FE + NS)
// a-record per inner point: FE features, NS low parts, then ref, padded to 4.
#define FA (((NA + 1) + 3) / 4 * 4)

// (sin, cos) of SIGN*2*pi*x: the sign is folded into the constant.
__device__ __forceinline__ void sincos_cycles(REAL x, REAL* s, REAL* c) {
#if MODE == 2
    sincospi((double)(2 * SIGN) * x, s, c);
#else
    __sincosf((float)SIGN * 6.28318530717958647692f * x, s, c);
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
phase_sum(const REAL* __restrict__ dv,          // [FE + NS][ostride], permuted outer order
          const double* __restrict__ vref,      // [blocks][FF]
          const double* __restrict__ inner_full,// [FF][I]
          const REAL* __restrict__ inner_eff,   // [FE + NS][I]
          const REAL2* __restrict__ w,          // [LB][I]
          REAL2* __restrict__ partial,          // [splits][LB][ch]
          int I, int split_len, long long ostride, long long k0, long long ch, int FF)
{
    __shared__ __align__(16) REAL s_a[TILE * FA];
    __shared__ __align__(16) REAL2 s_w[TILE * LB];

    const long long kb = k0 + (long long)blockIdx.x * BLK;   // first outer point of the block
    const double* __restrict__ vr = vref + (kb / BLK) * FF;

    REAL d[R][FE_ARR];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int f = 0; f < FE_ARR; ++f)
            d[r][f] = (f < FE) ? dv[(long long)f * ostride + kb + threadIdx.x + r * THREADS] : (REAL)0;
    }
    REAL dl[R][NS_ARR];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int f = 0; f < NS_ARR; ++f)
            dl[r][f] = (f < NS) ? dv[(long long)(FE + f) * ostride + kb + threadIdx.x + r * THREADS] : (REAL)0;
    }

    REAL acc[R][LB][2];
#if TWO_LEVEL
    REAL tac[R][LB][2];
#endif
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int l = 0; l < LB; ++l) { acc[r][l][0] = 0; acc[r][l][1] = 0; }

    const int i_begin = blockIdx.y * split_len;
    int i_end = i_begin + split_len;
    if (i_end > I) i_end = I;

    for (int i0 = i_begin; i0 < i_end; i0 += TILE) {
        __syncthreads();
        for (int k = threadIdx.x; k < TILE; k += THREADS) {
            const int i = i0 + k;
            REAL* rec = s_a + k * FA;
            if (i < i_end) {
                const double ref = reference_phase(inner_full, vr, FF, I, i);
#pragma unroll
                for (int f = 0; f < NA; ++f) rec[f] = inner_eff[(long long)f * I + i];
                rec[NA] = (REAL)ref;
            } else {
#pragma unroll
                for (int f = 0; f <= NA; ++f) rec[f] = 0;
            }
#pragma unroll
            for (int f = NA + 1; f < FA; ++f) rec[f] = 0;
        }
        for (int q = threadIdx.x; q < TILE * LB; q += THREADS) {
            const int l = q / TILE, k = q - l * TILE;
            const int i = i0 + k;
            REAL2 v;
            v.x = 0; v.y = 0;
            if (i < i_end) v = w[(long long)l * I + i];
            s_w[k * LB + l] = v;
        }
        __syncthreads();

#if TWO_LEVEL
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int l = 0; l < LB; ++l) { tac[r][l][0] = 0; tac[r][l][1] = 0; }
#define SUM tac
#else
#define SUM acc
#endif

#pragma unroll UNROLL
        for (int k = 0; k < TILE; ++k) {
            const REAL* rec = s_a + k * FA;
            REAL a[FE_ARR];
#pragma unroll
            for (int f = 0; f < FE_ARR; ++f) a[f] = (f < FE) ? rec[f] : (REAL)0;
            const REAL ref = rec[NA];
            REAL cs[R], sn[R];  // cos and SIGN*sin
#pragma unroll
            for (int r = 0; r < R; ++r) {
                REAL ph = pair_phase<NS, FE>(ref, a, rec + FE, d[r], dl[r]);
#if REDUCE
                ph -= rint(ph);  // exact; without it (|ph| <= a few cycles) MUFU reduces
#endif
                sincos_cycles(ph, &sn[r], &cs[r]);
            }
#pragma unroll
            for (int l = 0; l < LB; ++l) {
                const REAL2 u = s_w[k * LB + l];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    SUM[r][l][0] = fma(u.x, cs[r], fma(-u.y, sn[r], SUM[r][l][0]));
                    SUM[r][l][1] = fma(u.x, sn[r], fma(u.y, cs[r], SUM[r][l][1]));
                }
            }
        }
#if TWO_LEVEL
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int l = 0; l < LB; ++l) { acc[r][l][0] += tac[r][l][0]; acc[r][l][1] += tac[r][l][1]; }
#endif
#undef SUM
    }

    const long long base = (long long)blockIdx.x * BLK + threadIdx.x;
#pragma unroll
    for (int l = 0; l < LB; ++l)
#pragma unroll
        for (int r = 0; r < R; ++r) {
            REAL2 v;
            v.x = acc[r][l][0];
            v.y = acc[r][l][1];
            partial[((long long)blockIdx.y * LB + l) * ch + base + r * THREADS] = v;
        }
}
