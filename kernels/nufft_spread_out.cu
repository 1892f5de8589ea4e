// Output-driven spreading (type 1) into shared-memory tiles, after
// nufft_common.cu; its own NVRTC module (compiled only for plans that use
// it). Defines beyond the common ones: SPREAD_BATCH (points whose kernel
// values are staged at a time), FLUSH_PAIRS and SM_THREADS.
//
// One block per (subproblem, transform), as nufft_spread_sm: the bin's
// padded tile (bin + w cells per axis) lives in shared memory, here as two
// planes (real parts, then imaginary parts) so that neighbouring cells are
// neighbouring 4-byte words. The subproblem's points are taken in batches of
// SPREAD_BATCH: first one thread per point stages its strength c_j, its
// footprint's first tile cell and its kernel values
//
//     k_a[i] = φ(2(s_a + i − g_a)/w),   i < w, a < DIM      (DIM·w evaluations, not w^DIM)
//
// in shared memory; then the block's threads share out the batch's
// footprints by cells rather than by points: thread e takes point
// q = e / w^(DIM−1) and the cell (i, j) of its footprint across the first
// DIM − 1 axes, and adds c_q·k_0[i]·k_1[j]·k_2[m] for every m along the last
// axis (in 1D: q = e / w and the one cell i = e mod w) with shared atomics. The lanes of a warp thus write distinct, mostly consecutive
// cells of one point — no atomic contention and few bank conflicts, where
// one thread per point has the warp's 32 points of a bin collide on the
// same cells. Finally the tile's non-zero cells are added to the fine grid
// (global atomics, periodic wrap).
//
// Work per point: DIM·w kernel values, w^DIM shared adds of a complex value
// (2 atomics, 3 flops each); per block: tile cells zeroed and flushed.

#ifndef SPREAD_BATCH
#define SPREAD_BATCH 64
#endif
// FLUSH_PAIRS (float only, n_f,0 even): the tile goes to the fine grid in
// 16-byte atomics of two cells.
#ifndef FLUSH_PAIRS
#define FLUSH_PAIRS 0
#endif

// Threads per point (ROW_CELLS) and the cells each adds along the last
// axis (INNER): in 1D one cell per thread.
#if DIM == 1
#define ROW_CELLS WIDTH
#define INNER 1
#elif DIM == 2
#define ROW_CELLS WIDTH
#define INNER WIDTH
#else
#define ROW_CELLS (WIDTH * WIDTH)
#define INNER WIDTH
#endif

extern "C" __global__ void __launch_bounds__(SM_THREADS)
    nufft_spread_out(Geometry g, const int* __restrict__ sub_bin, const int* __restrict__ sub_first,
                     const int* __restrict__ sub_count, const int* __restrict__ perm, const int* __restrict__ start,
                     const offset_t* __restrict__ offset, const complex_t* __restrict__ c, complex_t* __restrict__ fine) {
    DYNAMIC_SHARED(real, planes);
    __shared__ real kv[SPREAD_BATCH][DIM][WIDTH];
    __shared__ complex_t value[SPREAD_BATCH];
    __shared__ int base[SPREAD_BATCH];
    const int sp = blockIdx.x;
    const long long t = blockIdx.y;
    const int n0 = tile_size(g, 0), n1 = tile_size(g, 1);
    const int total = n0 * n1 * tile_size(g, 2);
    real* re = planes;
    real* im = planes + total;
    for (int i = threadIdx.x; i < 2 * total; i += blockDim.x) planes[i] = (real)0;
    int origin[3];
    tile_origin(g, sub_bin[sp], origin);
    const int first = sub_first[sp], count = sub_count[sp];
    const complex_t* ct = c + t * g.points;
    const offset_t beta = (offset_t)g.beta;
#if DIM > 1
    // The stride of the last spread axis in the tile.
    const int last_stride = DIM == 2 ? n0 : n0 * n1;
#endif
    for (int b0 = 0; b0 < count; b0 += SPREAD_BATCH) {
        const int nb = min(SPREAD_BATCH, count - b0);
        // The tile is zeroed and the previous batch's values are consumed.
        __syncthreads();
        for (int q = threadIdx.x; q < nb; q += blockDim.x) {
            const long long p = (long long)first + b0 + q;
            value[q] = ct[perm[p]];
            int cell = 0, stride = 1;
#pragma unroll
            for (int a = 0; a < DIM; a++) {
                cell += (start[(long long)a * g.points + p] - origin[a]) * stride;
                stride *= tile_size(g, a);
                kernel_values(offset[(long long)a * g.points + p], beta, kv[q][a]);
            }
            base[q] = cell;
        }
        __syncthreads();
        const int work = nb * ROW_CELLS;
        for (int e = threadIdx.x; e < work; e += blockDim.x) {
            const int q = e / ROW_CELLS;
            const int r = e - q * ROW_CELLS;
#if DIM == 1
            const complex_t v = cmul_real(value[q], kv[q][0][r]);
            atomicAdd(&re[base[q] + r], v.x);
            atomicAdd(&im[base[q] + r], v.y);
#else
            const int i = r % WIDTH;
            int cell = base[q] + i;
            real w = kv[q][0][i];
#if DIM == 3
            const int j = r / WIDTH;
            cell += j * n0;
            w *= kv[q][1][j];
#endif
            const complex_t v = cmul_real(value[q], w);
#pragma unroll
            for (int m = 0; m < INNER; m++) {
                const real k = kv[q][DIM - 1][m];
                atomicAdd(&re[cell + m * last_stride], v.x * k);
                atomicAdd(&im[cell + m * last_stride], v.y * k);
            }
#endif
        }
    }
    __syncthreads();
    complex_t* ft = fine + t * g.fine_total;
#if FLUSH_PAIRS
    // Float: two neighbouring cells along x whose first fine index is even
    // go as one 16-byte atomic (n_f,0 is even, so such a pair is aligned and
    // never wraps); a row's odd cell at either end goes alone.
    const int lead = origin[0] & 1;
    const int slots = (n0 + lead + 1) / 2;
    const int rows = total / n0;
    const complex_t zero = make_float2(0.f, 0.f);
    for (int item = threadIdx.x; item < slots * rows; item += blockDim.x) {
        const int row = item / slots;
        const int c0 = 2 * (item - row * slots) - lead;
        const int cell = row * n0 + c0;
        const bool has0 = c0 >= 0, has1 = c0 + 1 < n0;
        const complex_t a = has0 ? make_float2(re[cell], im[cell]) : zero;
        const complex_t b = has1 ? make_float2(re[cell + 1], im[cell + 1]) : zero;
        const bool nz0 = a.x != 0.f || a.y != 0.f, nz1 = b.x != 0.f || b.y != 0.f;
        if (has0 && has1) {
            if (nz0 || nz1)
                atomicAdd((float4*)&ft[tile_to_fine(g, origin, cell)], make_float4(a.x, a.y, b.x, b.y));
        } else if (has0) {
            if (nz0) add_complex_global(&ft[tile_to_fine(g, origin, cell)], a);
        } else if (nz1) {
            add_complex_global(&ft[tile_to_fine(g, origin, cell + 1)], b);
        }
    }
#else
    for (int cell = threadIdx.x; cell < total; cell += blockDim.x) {
        complex_t v;
        v.x = re[cell];
        v.y = im[cell];
        if (v.x != (real)0 || v.y != (real)0) add_complex_global(&ft[tile_to_fine(g, origin, cell)], v);
    }
#endif
}
