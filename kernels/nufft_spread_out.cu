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
// FIXED_POINT (float plans): the tile adds up in 32-bit integers instead of
// floats. A float atomicAdd on shared memory is a compare-and-swap loop on
// sm_90 (ATOMS.CAST.SPIN: load, add, swap, retry), an integer one a single
// native ATOMS.ADD (H100, 2026-11-26: 96³ modes × 208 transforms, w 7:
// 64.0 → 31.4 ms). Per block, S = Σ_j max(|Re c_j|, |Im c_j|) over the
// subproblem bounds every cell's parts (φ ≤ 1); values are scaled by
// s = 2³⁰ / (1.01·S) (as s₁·s₂, s₁ = 2^((29 − e) / 2) for 2^e ≤ S < 2^(e+1), so
// that both factors are normal floats for any finite S: s₁ on the staged
// strength, s₂ per add) and
// rounded to the nearest integer per add, so a cell stays below
// 2³⁰ + count/2 < 2³¹ (1 % covers the float sum's rounding). The rounding,
// ≤ S·2⁻³¹ per add, is above float rounding where many points share a
// subproblem, so only plans asked for 5e-4 or more use it
// (src/backend/cuda/nufft/layout.rs `FIXED_POINT_TOLERANCE`). A non-finite S
// gives NaN cells, as float sums would.
#ifndef FIXED_POINT
#define FIXED_POINT 0
#endif
#if FIXED_POINT && DOUBLE
#error "fixed-point tiles are for float plans"
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

// TILE_ADD(cell, x, y): tile[cell] += x + iy; TILE_VALUE(cell): the cell as complex_t.
#if FIXED_POINT
#define TILE_ADD(cell, x, y) \
    (atomicAdd(&re[cell], __float2int_rn((x) * scale2)), atomicAdd(&im[cell], __float2int_rn((y) * scale2)))
#define TILE_VALUE(cell) tile_complex((real)re[cell] * unscale1 * unscale2, (real)im[cell] * unscale1 * unscale2)
#else
#define TILE_ADD(cell, x, y) (atomicAdd(&re[cell], (x)), atomicAdd(&im[cell], (y)))
#define TILE_VALUE(cell) tile_complex(re[cell], im[cell])
#endif

__device__ __forceinline__ complex_t tile_complex(real x, real y) {
    complex_t v;
    v.x = x;
    v.y = y;
    return v;
}

extern "C" __global__ void __launch_bounds__(SM_THREADS)
    nufft_spread_out(Geometry g, const int* __restrict__ sub_bin, const int* __restrict__ sub_first,
                     const int* __restrict__ sub_count, const int* __restrict__ perm, const int* __restrict__ start,
                     const offset_t* __restrict__ offset, const complex_t* __restrict__ c, complex_t* __restrict__ fine) {
    DYNAMIC_SHARED(real, planes);
    __shared__ real kv[SPREAD_BATCH][DIM][WIDTH];
#if FIXED_POINT
    __shared__ real partial[SM_THREADS / 32];
#endif
    __shared__ complex_t value[SPREAD_BATCH];
    __shared__ int base[SPREAD_BATCH];
    const int sp = blockIdx.x;
    const long long t = blockIdx.y;
    const int n0 = tile_size(g, 0), n1 = tile_size(g, 1);
    const int total = n0 * n1 * tile_size(g, 2);
#if FIXED_POINT
    int* re = (int*)planes;
    int* im = re + total;
#else
    real* re = planes;
    real* im = planes + total;
#endif
    for (int i = threadIdx.x; i < 2 * total; i += blockDim.x) planes[i] = (real)0;
    int origin[3];
    tile_origin(g, sub_bin[sp], origin);
    const int first = sub_first[sp], count = sub_count[sp];
    const complex_t* ct = c + t * g.points;
    const offset_t beta = (offset_t)g.beta;
#if FIXED_POINT
    // The scale s = s1·s2 (FIXED_POINT above): S by a block reduction.
    float bound = 0.f;
    for (int q = threadIdx.x; q < count; q += blockDim.x) {
        const complex_t v = ct[perm[(long long)first + q]];
        bound += fmaxf(fabsf(v.x), fabsf(v.y));
    }
    for (int o = 16; o > 0; o >>= 1) bound += __shfl_xor_sync(0xffffffffu, bound, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = bound;
    __syncthreads();
    bound = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) bound += partial[w];
    const bool usable = bound > 0.f && isfinite(bound);
    const float scale1 = ldexpf(1.f, usable ? (29 - ilogbf(bound)) / 2 : 0);
    const float scale2 = usable ? 1073741824.f / (1.01f * (bound * scale1)) : 1.f;
    const float unscale1 = isfinite(bound) ? 1.f / scale1 : __int_as_float(0x7fc00000), unscale2 = 1.f / scale2;
#endif
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
#if FIXED_POINT
            value[q] = cmul_real(ct[perm[p]], scale1);
#else
            value[q] = ct[perm[p]];
#endif
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
            TILE_ADD(base[q] + r, v.x, v.y);
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
                TILE_ADD(cell + m * last_stride, v.x * k, v.y * k);
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
        const complex_t a = has0 ? TILE_VALUE(cell) : zero;
        const complex_t b = has1 ? TILE_VALUE(cell + 1) : zero;
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
        const complex_t v = TILE_VALUE(cell);
        if (v.x != (real)0 || v.y != (real)0) add_complex_global(&ft[tile_to_fine(g, origin, cell)], v);
    }
#endif
}
