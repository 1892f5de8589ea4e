// The phase of one (inner, outer) pair in cycles, shared by kernels/phase_sum.cu
// and kernels/phase_sum_tc.cu (prepended to each when it is compiled):
//
//   phase = ref + sum_f a_f * d_f,
//
// with ref = frac(inner point . block reference) (float64, per tile) and d_f the
// outer point's small difference from the block reference. The first NSPLIT terms
// are computed split (accurate mode): a = a_hi + a_lo, d = d_hi + d_lo,
// p = a_hi*d_hi rounded with its exact error e = fma(a_hi, d_hi, -p), then
// frac(p) + e + a_hi*d_lo + a_lo*d_hi, so the float32 phase stays near [-1, 1].

__device__ __forceinline__ float mul_rn(float x, float y) { return __fmul_rn(x, y); }
__device__ __forceinline__ double mul_rn(double x, double y) { return __dmul_rn(x, y); }
__device__ __forceinline__ float add_rn(float x, float y) { return __fadd_rn(x, y); }
__device__ __forceinline__ double add_rn(double x, double y) { return __dadd_rn(x, y); }
__device__ __forceinline__ float sub_rn(float x, float y) { return __fsub_rn(x, y); }
__device__ __forceinline__ double sub_rn(double x, double y) { return __dsub_rn(x, y); }

// a: the inner point's NTERMS features, a_lo: the low parts of its first NSPLIT;
// d, d_lo: the same for the outer point.
template <int NSPLIT, int NTERMS, typename T>
__device__ __forceinline__ T pair_phase(T ref, const T* a, const T* a_lo, const T* d, const T* d_lo) {
    T ph = ref;
#pragma unroll
    for (int f = 0; f < NSPLIT; ++f) {
        T p = mul_rn(a[f], d[f]);
        T e = fma(a[f], d[f], -p);
        e = fma(a[f], d_lo[f], e);
        e = fma(a_lo[f], d[f], e);
        p = sub_rn(p, rint(p));
        ph = add_rn(ph, p);
        ph = add_rn(ph, e);
    }
#pragma unroll
    for (int f = NSPLIT; f < NTERMS; ++f) ph = fma(a[f], d[f], ph);
    return ph;
}

// The block's reference phase of inner point i, frac(sum_f inner_full[f][i] * vref[f])
// in float64 (cycles, in [-1/2, 1/2]): once per inner point and tile.
__device__ __forceinline__ double reference_phase(const double* __restrict__ inner_full,
                                                  const double* __restrict__ vref, int FF, int I, int i) {
    double ref = 0.0;
    for (int f = 0; f < FF; ++f) ref = fma(inner_full[(long long)f * I + i], vref[f], ref);
    return ref - rint(ref);
}
