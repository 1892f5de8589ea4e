// The Toeplitz kernels T(Δ) from the type-1 NUFFT of their weights
// (src/backend/cuda/toeplitz.rs; model::toeplitz has the math). Defines:
// DOUBLE (the NUFFT's arithmetic), MODE (the Toeplitz grids: 2 = double2,
// else float2).
//
// The NUFFT gives T at the modes Δ = −n … n − 1 of each doubled axis
// (index Δ + n; 2n modes, singleton axes one); the kernel grid (g ≥ 2n cells
// per doubled axis) holds Δ ∈ (−n, n) at index Δ mod g, and its unused
// indices n … g − n are zero. Each of the `pairs` grids is scaled by
// `scale` (the FFT normalisation 1/G).

#if DOUBLE
typedef double2 nufft_complex;
#else
typedef float2 nufft_complex;
#endif
#if MODE == 2
typedef double2 grid_complex;
typedef double grid_real;
#else
typedef float2 grid_complex;
typedef float grid_real;
#endif

// The NUFFT mode index of kernel-grid index p on an axis of n voxels and g
// cells (g = 1: not doubled), or -1 where p is unused (n <= p <= g - n).
__device__ __forceinline__ long long mode_index(long long p, int n, int g) {
    if (g == 1) return 0;
    if (p < n) return p + n;
    if (p > g - n) return p - g + n;
    return -1;
}

// The NUFFT's modes along an axis of n voxels and g cells: 2n, or 1.
__device__ __forceinline__ long long mode_count(int n, int g) { return g == 1 ? 1 : 2LL * n; }

extern "C" __global__ void toeplitz_from_modes(const nufft_complex* __restrict__ modes, double scale, int nx, int ny,
                                               int nz, int gx, int gy, int gz, long long G, int pairs,
                                               grid_complex* __restrict__ out) {
    const long long wx = mode_count(nx, gx), wy = mode_count(ny, gy);
    const long long W = wx * wy * mode_count(nz, gz);
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < G * pairs;
         q += (long long)blockDim.x * gridDim.x) {
        const long long pair = q / G, p = q - pair * G;
        const long long px = p % gx, r = p / gx;
        const long long py = r % gy, pz = r / gy;
        const long long mx = mode_index(px, nx, gx), my = mode_index(py, ny, gy), mz = mode_index(pz, nz, gz);
        grid_complex v;
        v.x = 0;
        v.y = 0;
        if (mx >= 0 && my >= 0 && mz >= 0) {
            const nufft_complex t = modes[pair * W + mx + wx * (my + wy * mz)];
            v.x = (grid_real)(scale * (double)t.x);
            v.y = (grid_real)(scale * (double)t.y);
        }
        out[q] = v;
    }
}
