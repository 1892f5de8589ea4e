// The Toeplitz kernels T(Δ) from the type-1 NUFFT of their weights
// (src/backend/cuda/toeplitz.rs; model::toeplitz has the math). Defines:
// DOUBLE (the NUFFT's arithmetic), MODE (the Toeplitz grids: 2 = double2,
// else float2).
//
// The NUFFT gives T at the modes Δ = −n … n − 1 of each doubled axis
// (index Δ + n; singleton axes: one mode); the kernel grid holds Δ at
// index Δ mod 2n, and its unused index n (Δ = −n) is zero. Each of the
// `pairs` grids is scaled by `scale` (the FFT normalisation 1/G).

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

// The NUFFT mode index of kernel-grid index p on an axis of n voxels (g = 2n, or 1).
__device__ __forceinline__ long long mode_index(long long p, int n, int g) {
    if (g == 1) return 0;
    return p < n ? p + n : p - n;
}

extern "C" __global__ void toeplitz_from_modes(const nufft_complex* __restrict__ modes, double scale, int nx, int ny,
                                               int nz, int gx, int gy, int gz, long long G, int pairs,
                                               grid_complex* __restrict__ out) {
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < G * pairs;
         q += (long long)blockDim.x * gridDim.x) {
        const long long pair = q / G, p = q - pair * G;
        const long long px = p % gx, r = p / gx;
        const long long py = r % gy, pz = r / gy;
        const bool unused = (gx > 1 && px == nx) || (gy > 1 && py == ny) || (gz > 1 && pz == nz);
        grid_complex v;
        v.x = 0;
        v.y = 0;
        if (!unused) {
            const long long m = mode_index(px, nx, gx) + gx * (mode_index(py, ny, gy) + gy * mode_index(pz, nz, gz));
            const nufft_complex t = modes[pair * G + m];
            v.x = (grid_real)(scale * (double)t.x);
            v.y = (grid_real)(scale * (double)t.y);
        }
        out[q] = v;
    }
}
