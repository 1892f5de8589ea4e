// The O(N) kernels around cuFFT of the FFT-based operators (Toeplitz normal
// operator and Cartesian mode). NVRTC compiles them appended to complex.cu and
// util.cu as one module (src/backend/cuda/vectors.rs, UTIL);
// scripts/gpu/fft_ops_host/run.sh compiles complex.cu + this file for the host. Images (CG vectors) and data are double2 on
// the device in every mode; the FFT grids are REAL2 (float2 in accurate and
// fast modes, double2 in double mode: -D MODE as in util.cu). Products are
// formed in float64 and rounded once into the grid.
//
// Layouts: an image is N = nx*ny*nz, index n = ix + nx*(iy + ny*iz). A batch
// of B grids holds grid b at offset b*G. Sensitivities are float2 N x L (coil
// c at offset c*N), NULL meaning S = 1; coils c >= L of a batch are zero.

// (REAL2, GRID_STRIDE, cmul, cmulc, widen2, narrow2, coil: complex.cu, prepended.)

// ---------------------------------------------------------------- Toeplitz

// out[b][p] = S_{c0+b}(n) * phase(n) * x(n) where grid point p of the gx*gy*gz
// grid is voxel n of the nx*ny*nz image (ix < nx, iy < ny, iz < nz), else 0.
// phase == NULL means 1 (a time segment's exp(i omega tau_l) otherwise).
extern "C" __global__ void pad_coils(const double2* __restrict__ x, const float2* __restrict__ sens,
                                     const double2* __restrict__ phase, int nx, int ny, int nz, int gx, int gy,
                                     long long N, long long G, int L, int c0, int B, REAL2* __restrict__ out) {
    GRID_STRIDE(q, G * B) {
        const long long b = q / G, p = q - b * G;
        const int c = c0 + (int)b;
        const long long px = p % gx, t = p / gx;
        const long long py = t % gy, pz = t / gy;
        double2 v = make_double2(0.0, 0.0);
        if (c < L && px < nx && py < ny && pz < nz) {
            const long long n = px + nx * (py + (long long)ny * pz);
            v = x[n];
            if (phase) v = cmul(phase[n], v);
            v = cmul(coil(sens, c, N, n), v);
        }
        out[q] = narrow2(v);
    }
}

// y(n) (+)= conj(phase(n)) * sum_b conj(S_{c0+b}(n)) * grid[b][p(n)], the crop of
// the kernel grid back to the image (p(n) as in pad_coils).
extern "C" __global__ void crop_accumulate(const REAL2* __restrict__ grid, const float2* __restrict__ sens,
                                           const double2* __restrict__ phase, int nx, int ny, int gx, int gy,
                                           long long N, long long G, int L, int c0, int B, int accumulate,
                                           double2* __restrict__ y) {
    GRID_STRIDE(n, N) {
        const long long ix = n % nx, t = n / nx;
        const long long iy = t % ny, iz = t / ny;
        const long long p = ix + gx * (iy + (long long)gy * iz);
        double2 sum = make_double2(0.0, 0.0);
        for (int b = 0; b < B && c0 + b < L; ++b) {
            const double2 g = widen2(grid[(long long)b * G + p]);
            const double2 v = cmulc(coil(sens, c0 + b, N, n), g);
            sum.x += v.x;
            sum.y += v.y;
        }
        if (phase) sum = cmulc(phase[n], sum);
        if (accumulate) {
            const double2 prev = y[n];
            sum.x += prev.x;
            sum.y += prev.y;
        }
        y[n] = sum;
    }
}

// V[b][p] (+)= K'(p) * U[b][p], K' = K or conj(K) (conj_k): the kernel product in
// the Fourier domain (V may be U when not accumulating).
extern "C" __global__ void kernel_multiply(const REAL2* __restrict__ K, int conj_k, const REAL2* U, long long G,
                                           int B, int accumulate, REAL2* V) {
    GRID_STRIDE(q, G * B) {
        double2 k = widen2(K[q % G]);
        if (conj_k) k.y = -k.y;
        double2 v = cmul(k, widen2(U[q]));
        if (accumulate) {
            const double2 prev = widen2(V[q]);
            v.x += prev.x;
            v.y += prev.y;
        }
        V[q] = narrow2(v);
    }
}

// ---------------------------------------------------------------- Cartesian
// (src/model/cartesian.rs: d_{m,c} = exp(i theta_m) * IFFT(S_c x)(q_m), q_m the
// sample's FFT bin; theta as exp(i theta_m) per sample, double2.)

// out[b][n] = S_{c0+b}(n) * x(n).
extern "C" __global__ void cart_spread(const double2* __restrict__ x, const float2* __restrict__ sens, long long N,
                                       int L, int c0, int B, REAL2* __restrict__ out) {
    GRID_STRIDE(q, N * B) {
        const long long b = q / N, n = q - b * N;
        const int c = c0 + (int)b;
        double2 v = make_double2(0.0, 0.0);
        if (c < L) v = cmul(coil(sens, c, N, n), x[n]);
        out[q] = narrow2(v);
    }
}

// y(n) (+)= sum_b conj(S_{c0+b}(n)) * grid[b][n].
extern "C" __global__ void cart_collect(const REAL2* __restrict__ grid, const float2* __restrict__ sens, long long N,
                                        int L, int c0, int B, int accumulate, double2* __restrict__ y) {
    GRID_STRIDE(n, N) {
        double2 sum = make_double2(0.0, 0.0);
        for (int b = 0; b < B && c0 + b < L; ++b) {
            const double2 v = cmulc(coil(sens, c0 + b, N, n), widen2(grid[(long long)b * N + n]));
            sum.x += v.x;
            sum.y += v.y;
        }
        if (accumulate) {
            const double2 prev = y[n];
            sum.x += prev.x;
            sum.y += prev.y;
        }
        y[n] = sum;
    }
}

// d[c0+b][m] = W(m) * exp(i theta_m) * grid[b][q_m] (W == NULL means 1).
extern "C" __global__ void cart_gather(const REAL2* __restrict__ grid, const unsigned* __restrict__ bins,
                                       const double2* __restrict__ theta, long long N, long long M, int L, int c0,
                                       int B, const double* __restrict__ sw, double2* __restrict__ d) {
    GRID_STRIDE(q, M * B) {
        const long long b = q / M, m = q - b * M;
        const int c = c0 + (int)b;
        if (c >= L) continue;
        double2 v = cmul(theta[m], widen2(grid[b * N + bins[m]]));
        if (sw) {
            v.x *= sw[m];
            v.y *= sw[m];
        }
        d[(long long)c * M + m] = v;
    }
}

// grid[b][q_m] = exp(-i theta_m) * d[c0+b][m] (the grid cleared before: the
// other bins stay 0; the q_m are distinct, one per sampled grid point).
extern "C" __global__ void cart_scatter(const double2* __restrict__ d, const unsigned* __restrict__ bins,
                                        const double2* __restrict__ theta, long long N, long long M, int L, int c0,
                                        int B, REAL2* __restrict__ grid) {
    GRID_STRIDE(q, M * B) {
        const long long b = q / M, m = q - b * M;
        const int c = c0 + (int)b;
        if (c >= L) continue;
        grid[b * N + bins[m]] = narrow2(cmulc(theta[m], d[(long long)c * M + m]));
    }
}

// wgrid[q_m] = W(m) (the grid cleared before; W == NULL means 1; distinct q_m).
extern "C" __global__ void cart_weights(const double* __restrict__ sw, const unsigned* __restrict__ bins, long long M,
                                        REAL* __restrict__ wgrid) {
    GRID_STRIDE(m, M) { wgrid[bins[m]] = sw ? (REAL)sw[m] : (REAL)1; }
}

// grid[b][n] *= wgrid[n].
extern "C" __global__ void grid_weight(const REAL* __restrict__ wgrid, long long N, int B, REAL2* __restrict__ grid) {
    GRID_STRIDE(q, N * B) {
        const REAL w = wgrid[q % N];
        REAL2 v = grid[q];
        v.x *= w;
        v.y *= w;
        grid[q] = v;
    }
}
