// The float32 modes' phase sum (kernels/phase_sum.cu) with the coil
// accumulation on the tensor cores (sm_80+):
//
//   partial_l(o) = sum_{i in split} w_l(i) * exp(SIGN * i*2*pi * phase(i, o)).
//
// Per 4 inner points x 8 outer points x 8 coils it is one mma.m16n8k8
// (tf32 inputs, float32 accumulation), D = A B with
//
//   A[l][k] = Re w_l(k),  A[l][k+4] = -Im w_l(k),       (rows l < 8: real parts)
//   A[l+8][k] = Im w_l(k), A[l+8][k+4] = Re w_l(k),     (rows l + 8: imaginary)
//   B[k][n] = cos(theta(k, n)), B[k+4][n] = sin(theta(k, n)),
//   theta   = SIGN * 2*pi * phase(k, n),
//   D[l][n] = Re partial_l(n), D[l+8][n] = Im partial_l(n).
//
// Lane (g = lane/4, t = lane%4) holds B's entries (t, g) and (t+4, g): each lane
// computes exactly one phase and one sin/cos per mma, in the fragment's own
// registers (no shuffles). Its A fragment {Re, Im, -Im, Re} of w_g(t) is built
// once per tile in shared memory and serves MT mma.
//
// The phase is computed as in phase_sum.cu (float64 block reference, float32
// differences). Fast mode works in radians: the inner features and the
// reference are scaled by SIGN*2*pi when the tile is loaded, which saves the
// multiply before the hardware sin/cos. Accurate mode keeps phase_sum.cu's
// instruction stream for the phase (cycles, NS split terms) unchanged.
//
// Accuracy. tf32 keeps 11 significant bits:
// - fast (class 1e-3): both factors rounded once (1xTF32), about 3e-4 relative
//   RMS on the result;
// - accurate (class 1e-5): both factors split, x = hi + lo with hi = tf32(x),
//   and hi*hi + hi*lo + lo*hi accumulated ("3xTF32"; lo*lo is ~2^-22 relative),
//   the small products in their own accumulator.
// The tensor cores add with truncation, so the sums restart from zero every SEG
// inner points and are then added in float32 with rounding to nearest.
//
// Compile-time constants (NVRTC -D): MODE (0 accurate, 1 fast), FE effective
// terms, NS split terms (accurate only), LB (<= 8) coils per group, SIGN (+1/-1),
// THREADS (multiple of 32), MT 8-point outer tiles per warp, TILE (multiple of
// SEG) inner points per shared-memory tile, SEG (multiple of 4) inner points per
// tensor-core sum, UNROLL, REDUCE (reduce the phase before sin/cos), MINB.
// A block owns BLK = THREADS/32 * MT * 8 outer points.

#define WARPS (THREADS / 32)
#define BLK (WARPS * MT * 8)
#define FE_ARR (FE > 0 ? FE : 1)
#define NS_ARR (NS > 0 ? NS : 1)
#define NA (FE + NS)
// a-record per inner point: FE features, NS low parts, then the reference phase, padded to 4.
#define FA (((NA + 1) + 3) / 4 * 4)
#define TWO_PI 6.28318530717958647692
#define TF32_MASK 0xffffe000u

// x rounded to nearest tf32 (11 significant bits), as bits with the low 13 zero.
__device__ __forceinline__ unsigned tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r & TF32_MASK;
}

// The same for |x| <= 1 (sin, cos), in one instruction, as an mma operand: the
// mma ignores the low 13 bits, so adding half of their range rounds to nearest
// (ties away), as cvt.rna does once it has ruled out infinities and NaN.
__device__ __forceinline__ unsigned tf32_unit(float x) { return __float_as_uint(x) + 0x1000u; }

// c += A B for one m16n8k8 tile (A row-major 16x8 fragment a, B column-major 8x8 fragment b0, b1).
__device__ __forceinline__ void mma_tf32(float* c, uint4 a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// A fragment {Re, Im, -Im, Re} of one tf32 complex weight.
__device__ __forceinline__ uint4 fragment(unsigned re, unsigned im) {
    return make_uint4(re, im, im ^ 0x80000000u, re);
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
phase_sum_tc(const float* __restrict__ dv,           // [FE + NS][ostride], permuted outer order
             const double* __restrict__ vref,        // [blocks][FF]
             const double* __restrict__ inner_full,  // [FF][I]
             const float* __restrict__ inner_eff,    // [FE + NS][I]
             const float2* __restrict__ w,           // [LB][I]
             float2* __restrict__ partial,           // [splits][LB][ch]
             int I, int split_len, long long ostride, long long k0, long long ch, int FF)
{
    __shared__ __align__(16) float s_a[TILE * FA];
    // A fragments in lane order: (inner k, coil l) at (k/4)*32 + 4l + k%4, so that a
    // warp reads 512 contiguous bytes per k-step (the order k*8 + l put the 4 lanes
    // of a coil in one bank group: 4-way conflicts, measured L1-bound)
    __shared__ uint4 s_w[TILE * 8];
#if MODE == 0
    __shared__ uint4 s_wl[TILE * 8];  // the low parts
#endif

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const long long kb = k0 + (long long)blockIdx.x * BLK;   // first outer point of the block
    const double* __restrict__ vr = vref + (kb / BLK) * FF;
    const int local0 = warp * MT * 8 + g;                    // this lane's outer point of tile m: local0 + 8m

    float d[MT][FE_ARR];
    float dl[MT][NS_ARR];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        const long long o = kb + local0 + 8 * m;
#pragma unroll
        for (int f = 0; f < FE_ARR; ++f) d[m][f] = (f < FE) ? dv[(long long)f * ostride + o] : 0.f;
#pragma unroll
        for (int f = 0; f < NS_ARR; ++f) dl[m][f] = (f < NS) ? dv[(long long)(FE + f) * ostride + o] : 0.f;
    }

    float acc[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) { acc[m][0] = 0.f; acc[m][1] = 0.f; acc[m][2] = 0.f; acc[m][3] = 0.f; }

    const int i_begin = blockIdx.y * split_len;
    int i_end = i_begin + split_len;
    if (i_end > I) i_end = I;

    for (int i0 = i_begin; i0 < i_end; i0 += TILE) {
        __syncthreads();
        for (int k = threadIdx.x; k < TILE; k += THREADS) {
            const int i = i0 + k;
            float r[FA];
#pragma unroll
            for (int f = 0; f < FA; ++f) r[f] = 0.f;
            if (i < i_end) {
                const double ref = reference_phase(inner_full, vr, FF, I, i);
#if MODE == 0
#pragma unroll
                for (int f = 0; f < NA; ++f) r[f] = inner_eff[(long long)f * I + i];
                r[NA] = (float)ref;
#else
#pragma unroll
                for (int f = 0; f < FE; ++f) r[f] = (float)(SIGN * TWO_PI * (double)inner_eff[(long long)f * I + i]);
                r[FE] = (float)(SIGN * TWO_PI * ref);
#endif
            }
            // 16-byte stores: a warp's records then fill distinct banks
            float4* rec = reinterpret_cast<float4*>(s_a + k * FA);
#pragma unroll
            for (int j = 0; j < FA / 4; ++j) rec[j] = make_float4(r[4 * j], r[4 * j + 1], r[4 * j + 2], r[4 * j + 3]);
        }
        for (int q = threadIdx.x; q < TILE * 8; q += THREADS) {
            const int k = (q >> 5) * 4 + (q & 3), l = (q >> 2) & 7;
            const int i = i0 + k;
            float2 v = make_float2(0.f, 0.f);
            if (l < LB && i < i_end) v = w[(long long)l * I + i];
            const unsigned re = tf32(v.x), im = tf32(v.y);
            s_w[q] = fragment(re, im);
#if MODE == 0
            s_wl[q] = fragment(tf32(v.x - __uint_as_float(re)), tf32(v.y - __uint_as_float(im)));
#endif
        }
        __syncthreads();

        for (int s0 = 0; s0 < TILE; s0 += SEG) {
            float tac[MT][4];  // this segment's sums (hi*hi in accurate mode)
#if MODE == 0
            float tlo[MT][4];  // hi*lo + lo*hi
#endif
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    tac[m][j] = 0.f;
#if MODE == 0
                    tlo[m][j] = 0.f;
#endif
                }

#pragma unroll UNROLL
            for (int k4 = s0; k4 < s0 + SEG; k4 += 4) {
                const int k = k4 + t;  // this lane's inner point
                const float* rec = s_a + k * FA;
                float a[FE_ARR];
#pragma unroll
                for (int f = 0; f < FE_ARR; ++f) a[f] = (f < FE) ? rec[f] : 0.f;
                const float ref = rec[NA];
                const uint4 af = s_w[k4 * 8 + lane];
#if MODE == 0
                const uint4 afl = s_wl[k4 * 8 + lane];
#endif
#pragma unroll
                for (int m = 0; m < MT; ++m) {
                    float sn, cs;
#if MODE == 0
                    // phase_sum.cu's accurate phase (cycles)
                    float ph = pair_phase<NS, FE>(ref, a, rec + FE, d[m], dl[m]);
#if REDUCE
                    ph -= rintf(ph);
#endif
                    __sincosf((float)SIGN * 6.28318530717958647692f * ph, &sn, &cs);
                    const unsigned c_hi = tf32_unit(cs) & TF32_MASK, s_hi = tf32_unit(sn) & TF32_MASK;
                    // the low parts go in unrounded: truncated to tf32 they keep ~2^-22 of x
                    const unsigned c_lo = __float_as_uint(cs - __uint_as_float(c_hi));
                    const unsigned s_lo = __float_as_uint(sn - __uint_as_float(s_hi));
                    mma_tf32(tlo[m], af, c_lo, s_lo);
                    mma_tf32(tlo[m], afl, c_hi, s_hi);
                    mma_tf32(tac[m], af, c_hi, s_hi);
#else
                    float th = ref;
#pragma unroll
                    for (int f = 0; f < FE; ++f) th = fmaf(a[f], d[m][f], th);
#if REDUCE
                    // th - 2*pi*rint(th / 2*pi), 2*pi in two parts (Cody-Waite)
                    const float r = rintf(th * 0.159154943f);
                    th = fmaf(r, -6.28318548f, th);
                    th = fmaf(r, 1.74845553e-7f, th);
#endif
                    __sincosf(th, &sn, &cs);
                    mma_tf32(tac[m], af, tf32_unit(cs), tf32_unit(sn));
#endif
                }
            }
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
#if MODE == 0
                    acc[m][j] += tac[m][j] + tlo[m][j];
#else
                    acc[m][j] += tac[m][j];
#endif
                }
        }
    }

    // acc[m] = {Re(coil g, col 2t), Re(g, 2t+1), Im(g, 2t), Im(g, 2t+1)}, columns of tile m
    if (g < LB) {
        const long long base = (long long)blockIdx.x * BLK + warp * MT * 8 + 2 * t;
        float2* out = partial + ((long long)blockIdx.y * LB + g) * ch + base;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            out[8 * m] = make_float2(acc[m][0], acc[m][2]);
            out[8 * m + 1] = make_float2(acc[m][1], acc[m][3]);
        }
    }
}
