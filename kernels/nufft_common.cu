// Shared by the NUFFT kernels (kernels/nufft_*.cu, one NVRTC module per
// precision, dimension, kernel width and bin shape; src/backend/cuda/nufft).
//
// Defines: DOUBLE (0/1: float or double arithmetic), DIM (1..3 spread axes:
// the transform's axes with a fine grid of more than one point, in order),
// WIDTH (w, fine cells the kernel spans). Bin sizes are in the geometry.
//
// Conventions (src/nufft/mod.rs): a point x (radians, any finite value) lies
// at g = (x/2π mod 1)·n_f in fine cells; its kernel covers the w cells
// s, ..., s + w − 1 with s = ⌈g − w/2⌉ and weights φ(2(s + i − g)/w),
// φ(z) = exp(β(√(1 − z²) − 1)). The fine grid is periodic.

#if DOUBLE
typedef double real;
typedef double2 complex_t;
#else
typedef float real;
typedef float2 complex_t;
#endif

// PRECISE (float type-1 plans asked for less than 1e-5): the footprint offsets are
// stored and the kernel values computed in float64, then rounded to float.
// In float the value φ carries a relative error of about β·ε₃₂ (β ≈ 2.3w), the
// same for points at the same offset: a cluster of points adds it up
// coherently (1.2e-6 measured at a requested 1e-6, 2250 points within 1e-3
// rad, H100 2026-11-24), where random offsets average it out.
#ifndef PRECISE
#define PRECISE 0
#endif
#if DOUBLE || PRECISE
typedef double offset_t;
#else
typedef float offset_t;
#endif

#define GRID_STRIDE(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

#ifndef DYNAMIC_SHARED
#define DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) unsigned char name##_raw[]; type* name = (type*)name##_raw
#endif

// The plan's sizes, passed by value to every kernel (src/backend/cuda/nufft/kernels.rs
// mirrors it field by field: 104 bytes).
struct Geometry {
    long long points;       // M
    long long modes_total;  // Π n_a
    long long fine_total;   // Π n_f,a
    double beta;            // β of φ
    int fine[3];            // n_f per spread axis (1 beyond DIM)
    int modes[3];           // n per spread axis (1 beyond DIM)
    int nbins[3];           // bins per axis (1 beyond DIM)
    int bins[3];            // fine cells per bin and axis (1 beyond DIM)
    int modes_offset[3];    // where axis a's 1/ψ̂ starts in the deconvolution array
    int transforms;         // transforms in this launch
    int subproblems;        // subproblems (bins split into at most MAX_SUBPROBLEM points)
    int reserved;
};

// Padding of a tile below its bin: a point of the bin starting at s reaches
// down to s ≥ bin origin − ⌊w/2⌋ and up to below origin + bin + ⌈w/2⌉.
#define PAD (WIDTH / 2)

// Tile (padded bin) cells along axis a.
__device__ __forceinline__ int tile_size(const Geometry& g, int a) { return a < DIM ? g.bins[a] + WIDTH : 1; }

// x (radians) → g ∈ [0, n_f) fine cells, in float64.
__device__ __forceinline__ double fold_to_fine(double x, int nf) {
    double u = x * 0.15915494309189535;  // 1/(2π)
    u -= floor(u);
    double g = u * (double)nf;
    if (g >= (double)nf) g -= (double)nf;
    if (g < 0.0) g = 0.0;
    return g;
}

// k[i] = φ(2(t + i)/w) for i < w, t = s − g ∈ [−w/2, −w/2 + 1).
__device__ __forceinline__ void kernel_values(offset_t t, offset_t beta, real* k) {
    const offset_t scale = (offset_t)2 / (offset_t)WIDTH;
#pragma unroll
    for (int i = 0; i < WIDTH; i++) {
        const offset_t z = (t + (offset_t)i) * scale;
        const offset_t s = (offset_t)1 - z * z;
        k[i] = s >= (offset_t)0 ? (real)exp(beta * (sqrt(s) - (offset_t)1)) : (real)0;
    }
}

// A cell index of a tile or footprint, wrapped onto the periodic fine grid
// (the index lies in [−n_f, 2n_f): bins are at most n_f long).
__device__ __forceinline__ int wrap(int i, int nf) { return i < 0 ? i + nf : (i >= nf ? i - nf : i); }

// The origin (fine index of tile cell 0) of bin `bin` along every axis.
__device__ __forceinline__ void tile_origin(const Geometry& g, int bin, int* origin) {
    int rest = bin;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        if (a < DIM) {
            origin[a] = (rest % g.nbins[a]) * g.bins[a] - PAD;
            rest /= g.nbins[a];
        } else {
            origin[a] = 0;
        }
    }
}

// The fine-grid index of tile cell `cell` (tile of origin `origin`).
__device__ __forceinline__ long long tile_to_fine(const Geometry& g, const int* origin, int cell) {
    const int c0 = cell % tile_size(g, 0);
    const int r = cell / tile_size(g, 0);
    const int c1 = r % tile_size(g, 1);
    const int c2 = r / tile_size(g, 1);
    long long f = wrap(origin[0] + c0, g.fine[0]);
    if (DIM > 1) f += (long long)g.fine[0] * wrap(origin[1] + c1, g.fine[1]);
    if (DIM > 2) f += (long long)g.fine[0] * g.fine[1] * wrap(origin[2] + c2, g.fine[2]);
    return f;
}

__device__ __forceinline__ complex_t cmul_real(complex_t v, real k) {
    complex_t r;
    r.x = v.x * k;
    r.y = v.y * k;
    return r;
}

__device__ __forceinline__ void add_complex(complex_t* target, complex_t v) {
    atomicAdd(&target->x, v.x);
    atomicAdd(&target->y, v.y);
}

// The same into global memory: one vector atomic for float2 on sm_90 and later.
__device__ __forceinline__ void add_complex_global(complex_t* target, complex_t v) {
#if !DOUBLE && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(target, v);
#else
    add_complex(target, v);
#endif
}
