// Finite differences of the FD / TV / Laplace regularizers on the GPU: the same
// operator D as src/backend/cpu/fd.rs (read its module docs). Images are double2 in
// every precision mode (like CG's other vectors), so everything here is float64.
//
// The grid is given by its compact dims c0 x c1 x c2 (the axes of more than one voxel,
// padded with ones: the same voxel numbering n = i0 + c0 (i1 + c1 i2) as nx x ny x nz).
// Direction d (0 <= d < ndirs) has the offset dirs[4d .. 4d+2] along the compact axes,
// the voxel stride dirs[4d+3] and the weight cw[d] = 1/|offset|^2. The edge (d, n) from
// voxel n to n + offset exists when n + offset lies inside the grid. fd_weights u are
// N x ndirs (entry d N + n), NULL = 1.

#define GRID_STRIDE(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

// Whether voxel (i0, i1, i2) + sign * offset lies inside the grid.
__device__ __forceinline__ bool inside(long long i0, long long i1, long long i2, const long long* __restrict__ o,
                                       long long sign, long long c0, long long c1, long long c2) {
    const long long j0 = i0 + sign * o[0], j1 = i1 + sign * o[1], j2 = i2 + sign * o[2];
    return j0 >= 0 && j0 < c0 && j1 >= 0 && j1 < c1 && j2 >= 0 && j2 < c2;
}

// nu[n] = psi'(g_n)/g_n with g_n = sqrt(sum_d cw_d u_{d,n} |x[n + d] - x[n]|^2):
// penalty 1 = total variation, 1/sqrt(g^2 + eps^2); penalty 2 = Laplace,
// exp(-t/sigma)/(sigma t) with t = sqrt(g^2 + eps^2) (solver::reweight::Penalty::weight).
extern "C" __global__ void fd_reweight(const double2* __restrict__ x, long long c0, long long c1, long long c2,
                                       int ndirs, const long long* __restrict__ dirs,
                                       const double* __restrict__ cw, const float* __restrict__ u, int penalty,
                                       double eps, double sigma, double* __restrict__ nu) {
    const long long N = c0 * c1 * c2;
    GRID_STRIDE(n, N) {
        const long long i0 = n % c0, r = n / c0, i1 = r % c1, i2 = r / c1;
        const double2 xn = x[n];
        double sum = 0.0;
        for (int d = 0; d < ndirs; ++d) {
            const long long* o = dirs + 4 * d;
            if (inside(i0, i1, i2, o, 1, c0, c1, c2)) {
                const double2 xs = x[n + o[3]];
                const double re = xs.x - xn.x, im = xs.y - xn.y;
                const double w = u ? cw[d] * (double)u[(long long)d * N + n] : cw[d];
                sum += w * (re * re + im * im);
            }
        }
        const double t = hypot(sqrt(sum), eps);
        nu[n] = penalty == 2 ? exp(-t / sigma) / (sigma * t) : 1.0 / t;
    }
}

// y[n] += lambda sum_d [w_{d,n} (x[n] - x[n + d]) + w_{d,n-d} (x[n] - x[n - d])] with the edge
// weights w_{d,n} = cw_d u_{d,n} nu_n (u or nu NULL = 1): y += lambda D^H diag(w) D x.
extern "C" __global__ void fd_normal(const double2* __restrict__ x, double2* __restrict__ y, long long c0,
                                     long long c1, long long c2, int ndirs, const long long* __restrict__ dirs,
                                     const double* __restrict__ cw, const float* __restrict__ u,
                                     const double* __restrict__ nu, double lambda) {
    const long long N = c0 * c1 * c2;
    GRID_STRIDE(n, N) {
        const long long i0 = n % c0, r = n / c0, i1 = r % c1, i2 = r / c1;
        const double2 xn = x[n];
        double re = 0.0, im = 0.0;
        for (int d = 0; d < ndirs; ++d) {
            const long long* o = dirs + 4 * d;
            const long long s = o[3];
            if (inside(i0, i1, i2, o, 1, c0, c1, c2)) {
                double w = cw[d];
                if (u) w *= (double)u[(long long)d * N + n];
                if (nu) w *= nu[n];
                const double2 xs = x[n + s];
                re += w * (xn.x - xs.x);
                im += w * (xn.y - xs.y);
            }
            if (inside(i0, i1, i2, o, -1, c0, c1, c2)) {
                const long long p = n - s;
                double w = cw[d];
                if (u) w *= (double)u[(long long)d * N + p];
                if (nu) w *= nu[p];
                const double2 xp = x[p];
                re += w * (xn.x - xp.x);
                im += w * (xn.y - xp.y);
            }
        }
        double2 v = y[n];
        v.x += lambda * re;
        v.y += lambda * im;
        y[n] = v;
    }
}
