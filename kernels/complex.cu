// Shared by the modules of util.cu + fft_ops.cu and of fast.cu (prepended to
// each by NVRTC's source string, and by scripts/gpu/fft_ops_host/run.sh): the
// grid type REAL2 (float2, or double2 with -D MODE=2), the grid-stride loop,
// and float64 complex helpers. Vectors (images, data) are double2 on the device.

#if MODE == 2
typedef double REAL;
typedef double2 REAL2;
#else
typedef float REAL;
typedef float2 REAL2;
#endif

#define GRID_STRIDE(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

// a * b
__device__ __forceinline__ double2 cmul(double2 a, double2 b) {
    return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// conj(a) * b
__device__ __forceinline__ double2 cmulc(double2 a, double2 b) {
    return make_double2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}

__device__ __forceinline__ double2 widen2(REAL2 v) { return make_double2((double)v.x, (double)v.y); }

__device__ __forceinline__ REAL2 narrow2(double2 v) {
    REAL2 r;
    r.x = (REAL)v.x;
    r.y = (REAL)v.y;
    return r;
}

// S_c(n) (float2 N x L, coil c at c*N) in float64; sens == NULL means S = 1.
__device__ __forceinline__ double2 coil(const float2* __restrict__ sens, int c, long long N, long long n) {
    if (!sens) return make_double2(1.0, 0.0);
    const float2 s = sens[(long long)c * N + n];
    return make_double2(s.x, s.y);
}
