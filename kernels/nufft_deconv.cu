// Between the modes and the fine grid (after nufft_common.cu): mode
// k_a = −⌊n_a/2⌋ + i_a sits at fine index k_a mod n_f,a and is divided by
// ψ̂(k) = Π_a ψ̂_a(k_a) (deconvolution[modes_offset[a] + i_a] = 1/ψ̂_a(k_a)).
// Type 1 reads the transformed fine grid into the modes; type 2 writes the
// pre-divided modes into a zeroed fine grid before its transform.
// Both are transforms × Π n_a, one grid after another.

__device__ __forceinline__ void mode_place(const Geometry& g, const real* __restrict__ deconvolution, long long m,
                                           long long* fine_index, real* factor) {
    const int i0 = (int)(m % g.modes[0]);
    const long long r = m / g.modes[0];
    const int i1 = (int)(r % g.modes[1]);
    const int i2 = (int)(r / g.modes[1]);
    const int idx[3] = {i0, i1, i2};
    long long f = 0, stride = 1;
    real w = 1;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        int k = idx[a] - g.modes[a] / 2;
        if (k < 0) k += g.fine[a];
        f += stride * k;
        stride *= g.fine[a];
        w *= deconvolution[g.modes_offset[a] + idx[a]];
    }
    *fine_index = f;
    *factor = w;
}

extern "C" __global__ void nufft_modes_from_fine(Geometry g, const real* __restrict__ deconvolution,
                                                 const complex_t* __restrict__ fine, complex_t* __restrict__ modes) {
    GRID_STRIDE(q, (long long)g.transforms * g.modes_total) {
        const long long t = q / g.modes_total, m = q - t * g.modes_total;
        long long f;
        real w;
        mode_place(g, deconvolution, m, &f, &w);
        modes[q] = cmul_real(fine[t * g.fine_total + f], w);
    }
}

extern "C" __global__ void nufft_fine_from_modes(Geometry g, const real* __restrict__ deconvolution,
                                                 const complex_t* __restrict__ modes, complex_t* __restrict__ fine) {
    GRID_STRIDE(q, (long long)g.transforms * g.modes_total) {
        const long long t = q / g.modes_total, m = q - t * g.modes_total;
        long long f;
        real w;
        mode_place(g, deconvolution, m, &f, &w);
        fine[t * g.fine_total + f] = cmul_real(modes[q], w);
    }
}
