// Spreading (type 1) and interpolation (type 2) on the fine grid, after
// nufft_common.cu. The points are in bin order (nufft_sort.cu): perm[p] is
// the caller's index of sorted point p, start/offset its footprint (DIM × M).
//
// "SM" kernels: one block per (subproblem, transform); a subproblem is at
// most MAX_SUBPROBLEM points of one bin, whose footprints all lie in the
// bin's padded tile (bin + w cells per axis), held in shared memory:
// spreading adds into the tile (shared atomics) and then adds the tile to
// the fine grid (global atomics, empty cells skipped); interpolation loads
// the tile once and sums from it. "GM" kernels: one thread per sorted point,
// straight on the fine grid (for few points per bin).
//
// blockIdx.y is the transform of the launch; c is transforms × M, fine
// transforms × Π n_f.

// The outer two loops of a 3D footprint are unrolled for w ≤ 8 only (wider
// kernels would take NVRTC minutes to compile; their per-point kernel
// values then come from local memory, a small share of the w³ work).
#if WIDTH <= 8
#define UNROLL_OUTER _Pragma("unroll")
#else
#define UNROLL_OUTER _Pragma("unroll 1")
#endif

// Calls visit(index, weight) for the w^DIM cells of a footprint whose
// first cell along axis a is l[a] in a box of extents (n0, n1, ·) and
// weights k[a][·].
template <typename Visit>
__device__ __forceinline__ void footprint(const int* l, int n0, int n1, const real (*k)[WIDTH], Visit visit) {
#if DIM == 1
#pragma unroll
    for (int i = 0; i < WIDTH; i++) visit(l[0] + i, k[0][i]);
#elif DIM == 2
#pragma unroll
    for (int j = 0; j < WIDTH; j++) {
        const int row = (l[1] + j) * n0 + l[0];
#pragma unroll
        for (int i = 0; i < WIDTH; i++) visit(row + i, k[1][j] * k[0][i]);
    }
#else
    UNROLL_OUTER
    for (int m = 0; m < WIDTH; m++) {
        UNROLL_OUTER
        for (int j = 0; j < WIDTH; j++) {
            const int row = ((l[2] + m) * n1 + l[1] + j) * n0 + l[0];
            const real kmj = k[2][m] * k[1][j];
#pragma unroll
            for (int i = 0; i < WIDTH; i++) visit(row + i, kmj * k[0][i]);
        }
    }
#endif
}

// The kernel weights of sorted point p and its footprint start along each axis.
__device__ __forceinline__ void point_kernel(const Geometry& g, const int* __restrict__ start,
                                             const offset_t* __restrict__ offset, long long p, int* s,
                                             real (*k)[WIDTH]) {
    const offset_t beta = (offset_t)g.beta;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        if (a < DIM) {
            s[a] = start[(long long)a * g.points + p];
            kernel_values(offset[(long long)a * g.points + p], beta, k[a]);
        } else {
            s[a] = 0;
        }
    }
}

extern "C" __global__ void __launch_bounds__(SM_THREADS)
    nufft_spread_sm(Geometry g, const int* __restrict__ sub_bin, const int* __restrict__ sub_first,
                    const int* __restrict__ sub_count, const int* __restrict__ perm, const int* __restrict__ start,
                    const offset_t* __restrict__ offset, const complex_t* __restrict__ c, complex_t* __restrict__ fine) {
    DYNAMIC_SHARED(complex_t, tile);
    const int sp = blockIdx.x;
    const long long t = blockIdx.y;
    const int n0 = tile_size(g, 0), n1 = tile_size(g, 1);
    const int total = n0 * n1 * tile_size(g, 2);
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
        tile[i].x = 0;
        tile[i].y = 0;
    }
    int origin[3];
    tile_origin(g, sub_bin[sp], origin);
    const int first = sub_first[sp], count = sub_count[sp];
    const complex_t* ct = c + t * g.points;
    __syncthreads();
    for (int q = threadIdx.x; q < count; q += blockDim.x) {
        const long long p = (long long)first + q;
        const complex_t v = ct[perm[p]];
        int l[3];
        real k[3][WIDTH];
        point_kernel(g, start, offset, p, l, k);
#pragma unroll
        for (int a = 0; a < DIM; a++) l[a] -= origin[a];
        footprint(l, n0, n1, k, [&](int cell, real w) { add_complex(&tile[cell], cmul_real(v, w)); });
    }
    __syncthreads();
    complex_t* ft = fine + t * g.fine_total;
    for (int cell = threadIdx.x; cell < total; cell += blockDim.x) {
        const complex_t v = tile[cell];
        if (v.x != (real)0 || v.y != (real)0) add_complex_global(&ft[tile_to_fine(g, origin, cell)], v);
    }
}

extern "C" __global__ void __launch_bounds__(SM_THREADS)
    nufft_interp_sm(Geometry g, const int* __restrict__ sub_bin, const int* __restrict__ sub_first,
                    const int* __restrict__ sub_count, const int* __restrict__ perm, const int* __restrict__ start,
                    const offset_t* __restrict__ offset, const complex_t* __restrict__ fine, complex_t* __restrict__ c) {
    DYNAMIC_SHARED(complex_t, tile);
    const int sp = blockIdx.x;
    const long long t = blockIdx.y;
    const int n0 = tile_size(g, 0), n1 = tile_size(g, 1);
    const int total = n0 * n1 * tile_size(g, 2);
    int origin[3];
    tile_origin(g, sub_bin[sp], origin);
    const complex_t* ft = fine + t * g.fine_total;
    for (int cell = threadIdx.x; cell < total; cell += blockDim.x) tile[cell] = ft[tile_to_fine(g, origin, cell)];
    const int first = sub_first[sp], count = sub_count[sp];
    complex_t* ct = c + t * g.points;
    __syncthreads();
    for (int q = threadIdx.x; q < count; q += blockDim.x) {
        const long long p = (long long)first + q;
        int l[3];
        real k[3][WIDTH];
        point_kernel(g, start, offset, p, l, k);
#pragma unroll
        for (int a = 0; a < DIM; a++) l[a] -= origin[a];
        real re = 0, im = 0;
        footprint(l, n0, n1, k, [&](int cell, real w) {
            const complex_t v = tile[cell];
            re += v.x * w;
            im += v.y * w;
        });
        complex_t out;
        out.x = re;
        out.y = im;
        ct[perm[p]] = out;
    }
}

// The fine-grid indices of a footprint along each axis (wrapped), as
// offsets into one transform's grid (fewer than 2^31 points: cuFFT's limit).
__device__ __forceinline__ void footprint_indices(const Geometry& g, const int* s, int (*index)[WIDTH]) {
#pragma unroll
    for (int a = 0; a < 3; a++) {
        int stride = 1;
        for (int b = 0; b < a; b++) stride *= g.fine[b];
#pragma unroll
        for (int i = 0; i < WIDTH; i++) index[a][i] = a < DIM ? stride * wrap(s[a] + i, g.fine[a]) : 0;
    }
}

// Calls visit(fine index, weight) for the footprint of a point on the fine grid.
template <typename Visit>
__device__ __forceinline__ void footprint_fine(const int (*index)[WIDTH], const real (*k)[WIDTH], Visit visit) {
#if DIM == 1
#pragma unroll
    for (int i = 0; i < WIDTH; i++) visit(index[0][i], k[0][i]);
#elif DIM == 2
#pragma unroll
    for (int j = 0; j < WIDTH; j++) {
#pragma unroll
        for (int i = 0; i < WIDTH; i++) visit(index[1][j] + index[0][i], k[1][j] * k[0][i]);
    }
#else
    UNROLL_OUTER
    for (int m = 0; m < WIDTH; m++) {
        UNROLL_OUTER
        for (int j = 0; j < WIDTH; j++) {
            const int row = index[2][m] + index[1][j];
            const real kmj = k[2][m] * k[1][j];
#pragma unroll
            for (int i = 0; i < WIDTH; i++) visit(row + index[0][i], kmj * k[0][i]);
        }
    }
#endif
}

extern "C" __global__ void nufft_spread_gm(Geometry g, const int* __restrict__ perm, const int* __restrict__ start,
                                           const offset_t* __restrict__ offset, const complex_t* __restrict__ c,
                                           complex_t* __restrict__ fine) {
    const long long t = blockIdx.y;
    const complex_t* ct = c + t * g.points;
    complex_t* ft = fine + t * g.fine_total;
    GRID_STRIDE(p, g.points) {
        const complex_t v = ct[perm[p]];
        int s[3];
        real k[3][WIDTH];
        point_kernel(g, start, offset, p, s, k);
        int index[3][WIDTH];
        footprint_indices(g, s, index);
        footprint_fine(index, k, [&](int f, real w) { add_complex_global(&ft[f], cmul_real(v, w)); });
    }
}

extern "C" __global__ void nufft_interp_gm(Geometry g, const int* __restrict__ perm, const int* __restrict__ start,
                                           const offset_t* __restrict__ offset, const complex_t* __restrict__ fine,
                                           complex_t* __restrict__ c) {
    const long long t = blockIdx.y;
    complex_t* ct = c + t * g.points;
    const complex_t* ft = fine + t * g.fine_total;
    GRID_STRIDE(p, g.points) {
        int s[3];
        real k[3][WIDTH];
        point_kernel(g, start, offset, p, s, k);
        int index[3][WIDTH];
        footprint_indices(g, s, index);
        real re = 0, im = 0;
        footprint_fine(index, k, [&](int f, real w) {
            const complex_t v = ft[f];
            re += v.x * w;
            im += v.y * w;
        });
        complex_t out;
        out.x = re;
        out.y = im;
        ct[perm[p]] = out;
    }
}
