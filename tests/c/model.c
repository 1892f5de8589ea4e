/* The model of design/MODEL.md through the C API, against float64 direct
 * sums written here in C: this pins the C layouts (positions N x 3,
 * coefficients M x B, basis N x B, sensitivities N x L, data M x L, first
 * index fastest), the +i sign, the solid-harmonic order, the grid helper,
 * and the equations CG solves (sample weights, Tikhonov). */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include "check.h"


/* The real solid harmonics of MODEL.md, in field-camera order. */
static double solid_harmonic(int b, double x, double y, double z)
{
    double r2 = x * x + y * y + z * z;
    switch (b) {
    case 0: return 1.0;
    case 1: return x;
    case 2: return y;
    case 3: return z;
    case 4: return x * y;
    case 5: return z * y;
    case 6: return 3.0 * z * z - r2;
    case 7: return x * z;
    case 8: return x * x - y * y;
    case 9: return 3.0 * y * x * x - y * y * y;
    case 10: return x * y * z;
    case 11: return (5.0 * z * z - r2) * y;
    case 12: return 5.0 * z * z * z - 3.0 * z * r2;
    case 13: return (5.0 * z * z - r2) * x;
    case 14: return z * (x * x - y * y);
    default: return x * x * x - 3.0 * x * y * y;
    }
}

/* A problem in MODEL.md's layouts, with h evaluated (N x B). */
typedef struct problem {
    size_t n, m, l, terms;
    double *h;            /* N x B */
    double *coefficients; /* M x B */
    double *omega, *times; /* N, M; omega NULL: none */
    horecon_c32 *s;       /* N x L; NULL: S = 1 */
} problem;

static double phase(const problem *p, size_t j, size_t v)
{
    double phi = 0.0;
    size_t b;
    for (b = 0; b < p->terms; b++) phi += p->coefficients[b * p->m + j] * p->h[b * p->n + v];
    if (p->omega != NULL) phi += p->omega[v] * p->times[j];
    return phi;
}

/* d = E x in float64: d[(j,c)] = sum_n S_c(n) exp(+i phi(j,n)) x_n; out is 2*M*L doubles. */
static void forward_f64(const problem *p, const horecon_c32 *x, double *out)
{
    size_t j, c, v;
    for (c = 0; c < p->l; c++) {
        for (j = 0; j < p->m; j++) {
            double re = 0.0, im = 0.0;
            for (v = 0; v < p->n; v++) {
                double phi = phase(p, j, v), cr = cos(phi), ci = sin(phi);
                double sr = p->s ? p->s[c * p->n + v].re : 1.0, si = p->s ? p->s[c * p->n + v].im : 0.0;
                double er = sr * cr - si * ci, ei = sr * ci + si * cr;
                re += er * x[v].re - ei * x[v].im;
                im += er * x[v].im + ei * x[v].re;
            }
            out[2 * (c * p->m + j)] = re;
            out[2 * (c * p->m + j) + 1] = im;
        }
    }
}

/* x = E^H W d in float64 (w NULL: W = 1); out is 2*N doubles. */
static void adjoint_f64(const problem *p, const double *d, const float *w, double *out)
{
    size_t j, c, v;
    for (v = 0; v < p->n; v++) {
        double re = 0.0, im = 0.0;
        for (c = 0; c < p->l; c++) {
            double sr = p->s ? p->s[c * p->n + v].re : 1.0, si = p->s ? p->s[c * p->n + v].im : 0.0;
            for (j = 0; j < p->m; j++) {
                double phi = phase(p, j, v), cr = cos(phi), ci = -sin(phi);
                /* conj(S) exp(-i phi) */
                double er = sr * cr + si * ci, ei = sr * ci - si * cr;
                double dr = d[2 * (c * p->m + j)], di = d[2 * (c * p->m + j) + 1];
                double wj = w ? (double)w[j] : 1.0;
                re += wj * (er * dr - ei * di);
                im += wj * (er * di + ei * dr);
            }
        }
        out[2 * v] = re;
        out[2 * v + 1] = im;
    }
}

static void c32_to_f64(const horecon_c32 *a, size_t n, double *out)
{
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = a[i].re;
        out[2 * i + 1] = a[i].im;
    }
}

/* ‖a − ref‖ / ‖ref‖ with a in float32, ref in float64 (interleaved). */
static double rel_error(const horecon_c32 *a, const double *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double dr = a[i].re - ref[2 * i], di = a[i].im - ref[2 * i + 1];
        num += dr * dr + di * di;
        den += ref[2 * i] * ref[2 * i] + ref[2 * i + 1] * ref[2 * i + 1];
    }
    return sqrt(num / den);
}

static const int32_t precisions[3] = {HORECON_PRECISION_ACCURATE, HORECON_PRECISION_FAST,
                                      HORECON_PRECISION_DOUBLE};
static const double bounds[3] = {1e-5, 1e-3, 1e-7};
static const char *const precision_names[3] = {"accurate", "fast", "double"};

/* --------------------------------------------------------------- sign */

static void test_sign(void)
{
    /* one voxel at r0 and one sample with k: d = exp(+i k.r0) */
    double r0[3], k[3], kr;
    horecon_c32 one = {1.0f, 0.0f}, d;
    horecon_plan *plan = NULL;
    horecon_options o = test_options(1);
    fill_real(r0, 3, -0.1, 0.1);
    fill_real(k, 3, -300.0, 300.0);
    kr = k[0] * r0[0] + k[1] * r0[1] + k[2] * r0[2];
    o.precision = HORECON_PRECISION_DOUBLE;
    CHECK(horecon_plan_create(&o, 1, 1, 1, 1, 1, &plan) == HORECON_OK, "create: %s", horecon_last_error());
    CHECK(horecon_set_positions(plan, r0) == HORECON_OK, "positions: %s", horecon_last_error());
    CHECK(horecon_set_trajectory(plan, 3, k) == HORECON_OK, "trajectory: %s", horecon_last_error());
    CHECK(horecon_forward(plan, &one, &d) == HORECON_OK, "forward: %s", horecon_last_error());
    CHECK(fabs(d.re - cos(kr)) < 1e-6 && fabs(d.im - sin(kr)) < 1e-6,
          "sign: k.r0 = %g gives d = %g%+gi, expected exp(+i k.r0) = %g%+gi", kr, d.re, d.im, cos(kr),
          sin(kr));
    horecon_plan_destroy(plan);
}

/* ------------------------------------------------- random problems */

static void compare_operators(const char *what, const problem *p, horecon_plan *plan, int precision)
{
    size_t n = p->n, ml = p->m * p->l;
    horecon_c32 *x = new_c32(n), *d = new_c32(ml), *fwd = new_c32(ml), *adj = new_c32(n), *nrm = new_c32(n);
    double *ref_f = new_real(2 * ml), *ref_a = new_real(2 * n), *ref_n = new_real(2 * n), *tmp = new_real(2 * ml);
    double ef, ea, en, lhs_re, rhs_re, norm_f = 0.0, norm_d = 0.0;
    size_t i;
    fill_c32(x, n);
    fill_c32(d, ml);
    forward_f64(p, x, ref_f);
    c32_to_f64(d, ml, tmp);
    adjoint_f64(p, tmp, NULL, ref_a);
    adjoint_f64(p, ref_f, NULL, ref_n);
    CHECK(horecon_forward(plan, x, fwd) == HORECON_OK, "%s forward: %s", what, horecon_last_error());
    CHECK(horecon_adjoint(plan, d, adj) == HORECON_OK, "%s adjoint: %s", what, horecon_last_error());
    CHECK(horecon_normal(plan, x, nrm) == HORECON_OK, "%s normal: %s", what, horecon_last_error());
    ef = rel_error(fwd, ref_f, ml);
    ea = rel_error(adj, ref_a, n);
    en = rel_error(nrm, ref_n, n);
    printf("model: %-28s %-8s forward %.2e adjoint %.2e normal %.2e (bound %.0e)\n", what,
           precision_names[precision], ef, ea, en, bounds[precision]);
    CHECK(ef <= bounds[precision], "%s %s forward error %.3e", what, precision_names[precision], ef);
    CHECK(ea <= bounds[precision], "%s %s adjoint error %.3e", what, precision_names[precision], ea);
    CHECK(en <= 2.0 * bounds[precision], "%s %s normal error %.3e", what, precision_names[precision], en);
    /* adjointness <E x, d> = <x, E^H d> (real parts), on the library's results */
    lhs_re = 0.0;
    rhs_re = 0.0;
    for (i = 0; i < ml; i++) {
        lhs_re += (double)fwd[i].re * d[i].re + (double)fwd[i].im * d[i].im;
        norm_f += (double)fwd[i].re * fwd[i].re + (double)fwd[i].im * fwd[i].im;
        norm_d += (double)d[i].re * d[i].re + (double)d[i].im * d[i].im;
    }
    for (i = 0; i < n; i++) rhs_re += (double)x[i].re * adj[i].re + (double)x[i].im * adj[i].im;
    CHECK(fabs(lhs_re - rhs_re) <= 4.0 * bounds[precision] * sqrt(norm_f * norm_d),
          "%s %s adjointness %.9g vs %.9g", what, precision_names[precision], lhs_re, rhs_re);
    free(x);
    free(d);
    free(fwd);
    free(adj);
    free(nrm);
    free(ref_f);
    free(ref_a);
    free(ref_n);
    free(tmp);
}

/* Random sizes, 16-term solid harmonics with off-resonance and coils, on
 * explicit positions and on the grid helper, in all three precisions. */
static void test_solid_harmonics(void)
{
    int64_t nx = 2 + (int64_t)(rng_next() % 5), ny = 1 + (int64_t)(rng_next() % 5), nz = 1 + (int64_t)(rng_next() % 3);
    int64_t nc = 1 + (int64_t)(rng_next() % 3), ns = 20 + (int64_t)(rng_next() % 60);
    size_t n = (size_t)(nx * ny * nz), m = (size_t)ns, l = (size_t)nc, b, v, j, ix, iy, iz;
    double fov[3], center[3], *positions = new_real(3 * n);
    problem p;
    int prec;
    p.n = n;
    p.m = m;
    p.l = l;
    p.terms = 16;
    p.h = new_real(16 * n);
    p.coefficients = new_real(16 * m);
    p.omega = new_real(n);
    p.times = new_real(m);
    p.s = new_c32(n * l);
    fov[0] = rng_uniform(0.1, 0.3);
    fov[1] = rng_uniform(0.1, 0.3);
    fov[2] = rng_uniform(0.05, 0.2);
    fill_real(center, 3, -0.03, 0.03);
    /* MODEL.md's grid: x_i = c_x + (i - floor(nx/2)) fov_x / nx; a singleton axis at its centre */
    for (iz = 0; iz < (size_t)nz; iz++)
        for (iy = 0; iy < (size_t)ny; iy++)
            for (ix = 0; ix < (size_t)nx; ix++) {
                size_t at = ix + (size_t)nx * (iy + (size_t)ny * iz);
                size_t idx[3];
                int64_t dims[3];
                int a;
                idx[0] = ix; idx[1] = iy; idx[2] = iz;
                dims[0] = nx; dims[1] = ny; dims[2] = nz;
                for (a = 0; a < 3; a++) {
                    positions[a * n + at] = dims[a] == 1 ? center[a]
                        : center[a] + ((double)idx[a] - (double)(dims[a] / 2)) * fov[a] / (double)dims[a];
                }
            }
    for (v = 0; v < n; v++)
        for (b = 0; b < 16; b++)
            p.h[b * n + v] = solid_harmonic((int)b, positions[v], positions[n + v], positions[2 * n + v]);
    /* orders 0..3 scaled so that each contributes up to a few tens of radians */
    for (j = 0; j < m; j++) {
        for (b = 0; b < 16; b++) {
            double scale = b == 0 ? 3.0 : b < 4 ? 150.0 : b < 9 ? 1500.0 : 15000.0;
            p.coefficients[b * m + j] = rng_nonzero(-1.0, 1.0) * scale;
        }
        p.times[j] = 1e-3 + 2e-5 * (double)j;
    }
    fill_real(p.omega, n, -600.0, 600.0);
    fill_c32(p.s, n * l);

    for (prec = 0; prec < 3; prec++) {
        horecon_options o = test_options(2);
        horecon_plan *explicit_plan = NULL, *grid_plan = NULL;
        horecon_status s;
        o.precision = precisions[prec];
        s = horecon_plan_create(&o, nx, ny, nz, nc, ns, &explicit_plan);
        if (s == HORECON_OK) s = horecon_set_positions(explicit_plan, positions);
        if (s == HORECON_OK) s = horecon_set_solid_harmonics(explicit_plan, 16, p.coefficients);
        if (s == HORECON_OK) s = horecon_set_off_resonance(explicit_plan, p.omega, p.times);
        if (s == HORECON_OK) s = horecon_set_sensitivities(explicit_plan, p.s);
        CHECK(s == HORECON_OK, "explicit plan: %s", horecon_last_error());
        s = horecon_plan_create(&o, nx, ny, nz, nc, ns, &grid_plan);
        if (s == HORECON_OK) s = horecon_set_grid_positions(grid_plan, fov, center);
        if (s == HORECON_OK) s = horecon_set_solid_harmonics(grid_plan, 16, p.coefficients);
        if (s == HORECON_OK) s = horecon_set_off_resonance(grid_plan, p.omega, p.times);
        if (s == HORECON_OK) s = horecon_set_sensitivities(grid_plan, p.s);
        CHECK(s == HORECON_OK, "grid plan: %s", horecon_last_error());
        if (explicit_plan != NULL) compare_operators("solid harmonics, positions", &p, explicit_plan, prec);
        if (grid_plan != NULL) compare_operators("solid harmonics, grid", &p, grid_plan, prec);
        horecon_plan_destroy(explicit_plan);
        horecon_plan_destroy(grid_plan);
    }
    printf("model: dims %dx%dx%d, %d coils, %d samples\n", (int)nx, (int)ny, (int)nz, (int)nc, (int)ns);
    free(positions);
    free(p.h);
    free(p.coefficients);
    free(p.omega);
    free(p.times);
    free(p.s);
}

/* A user basis (any B) and a plain 2D trajectory, single coil. */
static void test_basis_and_trajectory(void)
{
    const int64_t nx = 6, ny = 5, ns = 40;
    const size_t n = 30, m = 40, terms = 7;
    double *positions = new_real(3 * n), *k = new_real(2 * m);
    problem p;
    size_t j, v;
    horecon_plan *plan = NULL;
    horecon_options o = test_options(2);
    p.n = n;
    p.m = m;
    p.l = 1;
    p.terms = terms;
    p.h = new_real(terms * n);
    p.coefficients = new_real(terms * m);
    p.omega = NULL;
    p.times = NULL;
    p.s = NULL;
    fill_real(p.h, terms * n, -1.0, 1.0);
    fill_real(p.coefficients, terms * m, -20.0, 20.0);
    CHECK(horecon_plan_create(&o, nx, ny, 1, 1, ns, &plan) == HORECON_OK, "%s", horecon_last_error());
    CHECK(horecon_set_basis(plan, (int32_t)terms, p.h, p.coefficients) == HORECON_OK, "basis: %s",
          horecon_last_error());
    compare_operators("user basis (B = 7)", &p, plan, 0);

    /* trajectory: h = (x, y) of the positions, coefficients = k (M x 2) */
    fill_real(positions, 3 * n, -0.1, 0.1);
    fill_real(k, 2 * m, -150.0, 150.0);
    CHECK(horecon_set_positions(plan, positions) == HORECON_OK, "%s", horecon_last_error());
    CHECK(horecon_set_trajectory(plan, 2, k) == HORECON_OK, "%s", horecon_last_error());
    p.terms = 2;
    for (v = 0; v < n; v++) {
        p.h[v] = positions[v];
        p.h[n + v] = positions[n + v];
    }
    for (j = 0; j < 2 * m; j++) p.coefficients[j] = k[j];
    compare_operators("trajectory (ndims = 2)", &p, plan, 0);
    horecon_plan_destroy(plan);
    free(positions);
    free(k);
    free(p.h);
    free(p.coefficients);
}

/* --------------------------------------------------------------- cg */

/* CG's solution satisfies (E^H W E + lambda I) x = E^H W d, measured with
 * the library's forward and adjoint (checked against float64 above), and
 * the residual horecon_cg reports agrees with the measured one. */
static void test_cg_equations(void)
{
    const int64_t nx = 5, ny = 4, nc = 2, ns = 45;
    const size_t n = 20, m = 45, l = 2;
    horecon_options o = test_options(2);
    horecon_plan *plan = complete_plan(&o, nx, ny, 1, nc, ns);
    horecon_cg_options c;
    horecon_cg_info info;
    horecon_c32 *d = new_c32(m * l), *x = new_c32(n), *ex = new_c32(m * l), *rhs = new_c32(n), *lhs = new_c32(n);
    float *w = new_f32(m);
    size_t i, j, pass;
    if (plan == NULL) return;
    fill_c32(d, m * l);
    for (j = 0; j < m; j++) w[j] = (float)rng_uniform(0.2, 3.0);
    for (pass = 0; pass < 2; pass++) {
        double num = 0.0, den = 0.0, lambda = pass == 0 ? 0.0 : 0.7, res;
        horecon_default_cg_options(&c);
        c.max_iterations = 200;
        c.tolerance = 1e-5;
        c.sample_weights = w;
        if (pass == 1) {
            c.regularizer = HORECON_REG_TIKHONOV;
            c.lambda = lambda;
        }
        CHECK(horecon_cg(plan, d, &c, x, &info) == HORECON_OK, "cg: %s", horecon_last_error());
        /* E^H W E x + lambda x and E^H W d through the library's own operators */
        CHECK(horecon_forward(plan, x, ex) == HORECON_OK, "forward: %s", horecon_last_error());
        for (i = 0; i < l; i++)
            for (j = 0; j < m; j++) {
                ex[i * m + j].re *= w[j];
                ex[i * m + j].im *= w[j];
            }
        CHECK(horecon_adjoint(plan, ex, lhs) == HORECON_OK, "adjoint: %s", horecon_last_error());
        for (i = 0; i < l; i++)
            for (j = 0; j < m; j++) {
                ex[i * m + j].re = d[i * m + j].re * w[j];
                ex[i * m + j].im = d[i * m + j].im * w[j];
            }
        CHECK(horecon_adjoint(plan, ex, rhs) == HORECON_OK, "adjoint: %s", horecon_last_error());
        for (i = 0; i < n; i++) {
            double rr = (double)rhs[i].re - (lhs[i].re + lambda * x[i].re);
            double ri = (double)rhs[i].im - (lhs[i].im + lambda * x[i].im);
            num += rr * rr + ri * ri;
            den += (double)rhs[i].re * rhs[i].re + (double)rhs[i].im * rhs[i].im;
        }
        res = sqrt(num / den);
        printf("model: cg %s, weights: %d iterations, reported residual %.2e, measured %.2e\n",
               pass == 0 ? "no regularizer" : "Tikhonov 0.7", (int)info.iterations, info.rel_residual, res);
        CHECK(info.converged == 1 && info.rel_residual <= 1e-5, "cg did not converge: %d, %.3e",
              (int)info.converged, info.rel_residual);
        CHECK(fabs(res - info.rel_residual) <= 0.1 * info.rel_residual + 1e-6,
              "reported residual %.3e, measured %.3e", info.rel_residual, res);
        CHECK(res <= 1e-4, "the cg solution leaves a residual %.3e in (E^H W E + lambda I) x = E^H W d", res);
    }
    horecon_plan_destroy(plan);
    free(d);
    free(x);
    free(ex);
    free(rhs);
    free(lhs);
    free(w);
}


/* ------------------------------------------------ setters after use */

/* The state of a model built step by step. */
typedef struct model_state {
    int grid;          /* grid positions instead of explicit ones */
    int phase;         /* 0 solid harmonics (9), 1 user basis (5), 2 trajectory (3) */
    int off_resonance; /* 0 none, 1 set */
    int coil_set;      /* which of two sensitivity sets */
} model_state;

#define SN 12
#define SM 30
#define SL 2
static double st_positions[3 * SN], st_fov[3] = {0.2, 0.18, 0.03}, st_center[3];
static double st_harmonics[9 * SM], st_basis[5 * SN], st_basis_coefficients[5 * SM], st_k[3 * SM];
static double st_omega[SN], st_times[SM];
static horecon_c32 st_s[2][SN * SL];

static horecon_status apply_positions(horecon_plan *p, const model_state *st)
{
    return st->grid ? horecon_set_grid_positions(p, st_fov, st_center) : horecon_set_positions(p, st_positions);
}
static horecon_status apply_phase(horecon_plan *p, const model_state *st)
{
    return st->phase == 0 ? horecon_set_solid_harmonics(p, 9, st_harmonics)
         : st->phase == 1 ? horecon_set_basis(p, 5, st_basis, st_basis_coefficients)
                          : horecon_set_trajectory(p, 3, st_k);
}
static horecon_status apply_off_resonance(horecon_plan *p, const model_state *st)
{
    return horecon_set_off_resonance(p, st->off_resonance ? st_omega : NULL, st_times);
}
static horecon_status apply_coils(horecon_plan *p, const model_state *st)
{
    return horecon_set_sensitivities(p, st_s[st->coil_set]);
}

/* A fresh plan with the whole state, set in the usual order. */
static horecon_plan *fresh_plan(const model_state *st)
{
    horecon_options o = test_options(2);
    horecon_plan *p = NULL;
    horecon_status s = horecon_plan_create(&o, 3, 2, 2, SL, SM, &p);
    if (s == HORECON_OK) s = apply_positions(p, st);
    if (s == HORECON_OK) s = apply_phase(p, st);
    if (s == HORECON_OK) s = apply_off_resonance(p, st);
    if (s == HORECON_OK) s = apply_coils(p, st);
    CHECK(s == HORECON_OK, "fresh plan: %s", horecon_last_error());
    return p;
}

/* Every setter called on a plan whose operator was already built takes
 * effect: the next forward equals that of a fresh plan with the same model. */
static void test_setters_after_use(void)
{
    model_state st = {0, 0, 1, 0};
    horecon_options o = test_options(2);
    horecon_plan *plan = NULL;
    horecon_c32 x[SN], d[SM * SL], ref[SM * SL], previous[SM * SL];
    int step;
    fill_real(st_positions, 3 * SN, -0.1, 0.1);
    fill_real(st_center, 3, -0.01, 0.01);
    fill_real(st_harmonics, 9 * SM, -80.0, 80.0);
    fill_real(st_basis, 5 * SN, -1.0, 1.0);
    fill_real(st_basis_coefficients, 5 * SM, -10.0, 10.0);
    fill_real(st_k, 3 * SM, -80.0, 80.0);
    fill_real(st_omega, SN, -300.0, 300.0);
    fill_real(st_times, SM, 1e-4, 5e-3);
    fill_c32(st_s[0], SN * SL);
    fill_c32(st_s[1], SN * SL);
    fill_c32(x, SN);
    CHECK(horecon_plan_create(&o, 3, 2, 2, SL, SM, &plan) == HORECON_OK, "%s", horecon_last_error());
    CHECK(apply_positions(plan, &st) == HORECON_OK && apply_phase(plan, &st) == HORECON_OK &&
              apply_off_resonance(plan, &st) == HORECON_OK && apply_coils(plan, &st) == HORECON_OK,
          "initial model: %s", horecon_last_error());
    CHECK(horecon_forward(plan, x, previous) == HORECON_OK, "%s", horecon_last_error());
    for (step = 0; step < 8; step++) {
        const char *what = "";
        horecon_status s = HORECON_OK;
        horecon_plan *fresh;
        switch (step) {
        case 0: st.grid = 1; what = "grid positions"; s = apply_positions(plan, &st); break;
        case 1: st.phase = 1; what = "user basis"; s = apply_phase(plan, &st); break;
        case 2: st.off_resonance = 0; what = "off-resonance cleared"; s = apply_off_resonance(plan, &st); break;
        case 3: st.phase = 2; what = "trajectory"; s = apply_phase(plan, &st); break;
        case 4: st.coil_set = 1; what = "sensitivities"; s = apply_coils(plan, &st); break;
        case 5: st.off_resonance = 1; what = "off-resonance set"; s = apply_off_resonance(plan, &st); break;
        case 6: st.grid = 0; what = "explicit positions"; s = apply_positions(plan, &st); break;
        default: st.phase = 0; what = "solid harmonics"; s = apply_phase(plan, &st); break;
        }
        CHECK(s == HORECON_OK, "%s: %s", what, horecon_last_error());
        CHECK(horecon_forward(plan, x, d) == HORECON_OK, "%s: %s", what, horecon_last_error());
        fresh = fresh_plan(&st);
        CHECK(fresh != NULL && horecon_forward(fresh, x, ref) == HORECON_OK, "%s: %s", what,
              horecon_last_error());
        CHECK(same_c32(d, ref, SM * SL), "after setting %s on a used plan, forward differs from a fresh plan",
              what);
        CHECK(!same_c32(d, previous, SM * SL), "setting %s did not change the result", what);
        memcpy(previous, d, sizeof d);
        horecon_plan_destroy(fresh);
    }
    horecon_plan_destroy(plan);
}

/* ------------------------------------------------- float _Complex (C only) */

#ifndef __cplusplus
#include <complex.h>
/* horecon_c32 has the layout of C99 float _Complex: arrays of either work. */
static void test_float_complex(void)
{
    horecon_options o = test_options(2);
    horecon_plan *plan = complete_plan(&o, 3, 3, 1, 2, 16);
    float _Complex x[9], d[32];
    horecon_c32 xs[9], ds[32];
    size_t i;
    CHECK(sizeof(horecon_c32) == sizeof(float _Complex), "sizeof horecon_c32 %lu, float _Complex %lu",
          (unsigned long)sizeof(horecon_c32), (unsigned long)sizeof(float _Complex));
    if (plan == NULL) return;
    for (i = 0; i < 9; i++) {
        xs[i].re = (float)rng_nonzero(-1.0, 1.0);
        xs[i].im = (float)rng_nonzero(-1.0, 1.0);
        x[i] = xs[i].re + xs[i].im * (float _Complex)I;
    }
    CHECK(horecon_forward(plan, (const horecon_c32 *)(const void *)x, (horecon_c32 *)(void *)d) == HORECON_OK,
          "forward on float _Complex: %s", horecon_last_error());
    CHECK(horecon_forward(plan, xs, ds) == HORECON_OK, "forward: %s", horecon_last_error());
    for (i = 0; i < 32; i++) {
        CHECK(crealf(d[i]) == ds[i].re && cimagf(d[i]) == ds[i].im, "float _Complex result %lu differs",
              (unsigned long)i);
    }
    horecon_plan_destroy(plan);
}
#endif

/* ------------------------------------------------------------ verbosity */

/* Runs cg at a verbosity and returns the number of lines the library wrote
 * to stderr (-1 if stderr could not be captured). */
static int stderr_lines_of_cg(int32_t verbosity, int also_fail, int32_t *iterations)
{
    horecon_options o = test_options(2);
    horecon_plan *plan;
    horecon_cg_options c;
    horecon_cg_info info;
    horecon_c32 d[2 * 24], x[12];
    FILE *capture = tmpfile();
    int saved, lines = 0, ch;
    o.verbosity = verbosity;
    plan = complete_plan(&o, 4, 3, 1, 2, 24);
    if (plan == NULL || capture == NULL) return -1;
    fill_c32(d, 2 * 24);
    horecon_default_cg_options(&c);
    c.max_iterations = 5;
    c.tolerance = 0.0;
    fflush(stderr);
    saved = dup(2);
    if (saved < 0 || dup2(fileno(capture), 2) < 0) return -1;
    CHECK(horecon_cg(plan, d, &c, x, &info) == HORECON_OK, "cg: %s", horecon_last_error());
    if (also_fail) {
        /* failures report through the status and horecon_last_error only */
        horecon_forward(plan, NULL, d);
        horecon_cg(plan, NULL, &c, x, &info);
        horecon_plan_create(&o, -1, 1, 1, 1, 1, NULL);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *iterations = info.iterations;
    rewind(capture);
    while ((ch = fgetc(capture)) != EOF) {
        if (ch == '\n') lines++;
        if (verbosity == 0) fputc(ch, stdout); /* show what should not be there */
    }
    fclose(capture);
    horecon_plan_destroy(plan);
    return lines;
}

static void test_verbosity(void)
{
    int32_t iterations = 0;
    int lines = stderr_lines_of_cg(0, 1, &iterations);
    CHECK(lines == 0, "verbosity 0 (with failing calls) wrote %d lines to stderr", lines);
    lines = stderr_lines_of_cg(1, 0, &iterations);
    CHECK(lines == 1, "verbosity 1 wrote %d lines for one solve, expected 1", lines);
    lines = stderr_lines_of_cg(2, 0, &iterations);
    CHECK(lines == iterations + 1, "verbosity 2 wrote %d lines for %d iterations, expected one per "
          "iteration and a summary", lines, (int)iterations);
}

int main(void)
{
    rng_seed("model");
    test_sign();
    test_solid_harmonics();
    test_basis_and_trajectory();
    test_cg_equations();
    test_setters_after_use();
#ifndef __cplusplus
    test_float_complex();
#endif
    test_verbosity();
    return check_summary("model");
}
