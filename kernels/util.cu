// Small O(N) and O(M*L) kernels around the phase sum: weights in, partial sums
// out, and CG's vector operations. Vectors (images, data) are double2 on the
// device in every mode; REAL (-D MODE) is the phase-sum kernel's type.

// (REAL, REAL2 and GRID_STRIDE: complex.cu, prepended.)

// w[l][n] = S_{l0+l}(n) * x(n) (zero rows for padded coils); S == NULL means S = 1.
extern "C" __global__ void prep_forward(const double2* __restrict__ x, const float2* __restrict__ sens,
                                        long long N, int L, int l0, int LB, REAL2* __restrict__ w) {
    GRID_STRIDE(q, N * LB) {
        const long long l = q / N, n = q - l * N;
        const int c = l0 + (int)l;
        REAL2 v;
        v.x = 0; v.y = 0;
        if (c < L) {
            const double2 xv = x[n];
            double sr = 1.0, si = 0.0;
            if (sens) { const float2 s = sens[(long long)c * N + n]; sr = s.x; si = s.y; }
            v.x = (REAL)(sr * xv.x - si * xv.y);
            v.y = (REAL)(sr * xv.y + si * xv.x);
        }
        w[q] = v;
    }
}

// w[l][j] = d[l0+l][j] (zero rows for padded coils).
extern "C" __global__ void prep_adjoint(const double2* __restrict__ d, long long M, int L, int l0, int LB,
                                        REAL2* __restrict__ w) {
    GRID_STRIDE(q, M * LB) {
        const long long l = q / M, j = q - l * M;
        const int c = l0 + (int)l;
        REAL2 v;
        v.x = 0; v.y = 0;
        if (c < L) { const double2 dv = d[(long long)c * M + j]; v.x = (REAL)dv.x; v.y = (REAL)dv.y; }
        w[q] = v;
    }
}

// Forward epilogue: out[c][o] = W(o) * exp(+i2pi rot) * sum_s partial[s][l][kk], o = perm[k0 + kk].
extern "C" __global__ void finish_forward(const REAL2* __restrict__ partial, int splits, int LB, long long ch,
                                          long long k0, long long count, const unsigned* __restrict__ perm,
                                          long long M, int L, int l0, const double* __restrict__ sw,
                                          const double* __restrict__ rot, double2* __restrict__ out) {
    GRID_STRIDE(kk, count) {
        const unsigned o = perm[k0 + kk];
        if (o >= M) continue;
        double wt = sw ? sw[o] : 1.0, er = 1.0, ei = 0.0;
        if (rot) sincospi(2.0 * rot[k0 + kk], &ei, &er);  // exp(+i 2 pi rot)
        for (int l = 0; l < LB && l0 + l < L; ++l) {
            double re = 0.0, im = 0.0;
            for (int s = 0; s < splits; ++s) {
                const REAL2 p = partial[((long long)s * LB + l) * ch + kk];
                re += p.x; im += p.y;
            }
            out[(long long)(l0 + l) * M + o] = make_double2(wt * (re * er - im * ei), wt * (re * ei + im * er));
        }
    }
}

// Adjoint epilogue: out[o] (+)= exp(-i2pi rot) * sum_l conj(S_{l0+l}(o)) * sum_s partial[s][l][kk].
extern "C" __global__ void finish_adjoint(const REAL2* __restrict__ partial, int splits, int LB, long long ch,
                                          long long k0, long long count, const unsigned* __restrict__ perm,
                                          long long N, int L, int l0, const float2* __restrict__ sens,
                                          int accumulate, const double* __restrict__ rot,
                                          double2* __restrict__ out) {
    GRID_STRIDE(kk, count) {
        const unsigned o = perm[k0 + kk];
        if (o >= N) continue;
        double re = 0.0, im = 0.0;
        for (int l = 0; l < LB && l0 + l < L; ++l) {
            double pr = 0.0, pi = 0.0;
            for (int s = 0; s < splits; ++s) {
                const REAL2 p = partial[((long long)s * LB + l) * ch + kk];
                pr += p.x; pi += p.y;
            }
            double sr = 1.0, si = 0.0;
            if (sens) { const float2 sv = sens[(long long)(l0 + l) * N + o]; sr = sv.x; si = sv.y; }
            re += sr * pr + si * pi;
            im += sr * pi - si * pr;
        }
        if (rot) {  // exp(-i 2 pi rot)
            double er, ei;
            sincospi(-2.0 * rot[k0 + kk], &ei, &er);
            const double t = re * er - im * ei;
            im = re * ei + im * er;
            re = t;
        }
        if (accumulate) { const double2 prev = out[o]; re += prev.x; im += prev.y; }
        out[o] = make_double2(re, im);
    }
}

// d[c][j] *= W(j).
extern "C" __global__ void scale_samples(double2* __restrict__ d, const double* __restrict__ sw, long long M, int L) {
    GRID_STRIDE(q, M * L) {
        const double wt = sw[q % M];
        double2 v = d[q];
        v.x *= wt; v.y *= wt;
        d[q] = v;
    }
}

// partial[block] = sum over the block's share of Re(conj(a) b), in float64.
extern "C" __global__ void dot_re(const double2* __restrict__ a, const double2* __restrict__ b, long long n,
                                  double* __restrict__ partial) {
    __shared__ double s[256];
    double sum = 0.0;
    GRID_STRIDE(i, n) { const double2 x = a[i], y = b[i]; sum += x.x * y.x + x.y * y.y; }
    s[threadIdx.x] = sum;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// y <- y + alpha x
extern "C" __global__ void axpy(double alpha, const double2* __restrict__ x, double2* __restrict__ y, long long n) {
    GRID_STRIDE(i, n) { double2 v = y[i]; const double2 u = x[i]; v.x += alpha * u.x; v.y += alpha * u.y; y[i] = v; }
}

// y <- x + beta y
extern "C" __global__ void xpay(const double2* __restrict__ x, double beta, double2* __restrict__ y, long long n) {
    GRID_STRIDE(i, n) { double2 v = y[i]; const double2 u = x[i]; v.x = u.x + beta * v.x; v.y = u.y + beta * v.y; y[i] = v; }
}

// Host vectors travel as float2 and are widened / narrowed on the device.
extern "C" __global__ void widen(const float2* __restrict__ in, double2* __restrict__ out, long long n) {
    GRID_STRIDE(i, n) { const float2 v = in[i]; out[i] = make_double2(v.x, v.y); }
}

extern "C" __global__ void narrow(const double2* __restrict__ in, float2* __restrict__ out, long long n) {
    GRID_STRIDE(i, n) { const double2 v = in[i]; out[i] = make_float2((float)v.x, (float)v.y); }
}
