// Bin sort of the points, once per plan (after nufft_common.cu): every point's
// bin and rank in it (nufft_bin_count), then, once the host has turned the
// counts into bin starts, its sorted position and its per-axis footprint
// start s and offset t = s − g (nufft_bin_scatter), all in float64 before
// t is rounded to the arithmetic's type.

// The bin of point j (x: DIM × M, axis-major) and its fine-grid positions g.
__device__ __forceinline__ int point_bin(const Geometry& g, const double* __restrict__ x, long long j, double* pos) {
    int bin = 0, stride = 1;
#pragma unroll
    for (int a = 0; a < DIM; a++) {
        pos[a] = fold_to_fine(x[(long long)a * g.points + j], g.fine[a]);
        int b = (int)(pos[a] / (double)g.bins[a]);
        if (b >= g.nbins[a]) b = g.nbins[a] - 1;
        bin += b * stride;
        stride *= g.nbins[a];
    }
    return bin;
}

extern "C" __global__ void nufft_bin_count(Geometry g, const double* __restrict__ x, int* __restrict__ counts,
                                           int* __restrict__ bin_of, int* __restrict__ rank_of) {
    GRID_STRIDE(j, g.points) {
        double pos[DIM];
        const int bin = point_bin(g, x, j, pos);
        rank_of[j] = atomicAdd(&counts[bin], 1);
        bin_of[j] = bin;
    }
}

// perm[p] = j for sorted position p = bin_start[bin] + rank; start/offset:
// DIM × M (axis-major, sorted order).
extern "C" __global__ void nufft_bin_scatter(Geometry g, const double* __restrict__ x,
                                             const int* __restrict__ bin_start, const int* __restrict__ bin_of,
                                             const int* __restrict__ rank_of, int* __restrict__ perm,
                                             int* __restrict__ start, offset_t* __restrict__ offset) {
    GRID_STRIDE(j, g.points) {
        const long long p = (long long)bin_start[bin_of[j]] + rank_of[j];
        perm[p] = (int)j;
#pragma unroll
        for (int a = 0; a < DIM; a++) {
            const double pos = fold_to_fine(x[(long long)a * g.points + j], g.fine[a]);
            const double s = ceil(pos - 0.5 * WIDTH);
            start[(long long)a * g.points + p] = (int)s;
            offset[(long long)a * g.points + p] = (offset_t)(s - pos);
        }
    }
}
