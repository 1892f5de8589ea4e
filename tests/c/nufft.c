/* The standalone NUFFT through the C API (issue 14):
 *
 *  - types 1 and 2, 1D/2D/3D, both signs, single and double data and
 *    arithmetic, several transforms per call, against direct sums in C
 *    (long double phases): relative l2 error <= tolerance;
 *  - type 1 with sign s and type 2 with sign -s are adjoint;
 *  - every bad argument of create and execute gives its exact code, a
 *    message that starts with the function's name and names the argument,
 *    and leaves *out and the outputs untouched (poisoned buffers);
 *  - destroy(NULL) is a no-op.
 *
 * Compiled as C99 and C++11 and run under valgrind by tests/c/run.sh. */
#include "check.h"

#define PI 3.14159265358979323846

/* The call returns `want`; on failure the last error starts with `function` and contains `part`. */
static void expect(horecon_status got, horecon_status want, const char *function, const char *part,
                   int line)
{
    const char *message = horecon_last_error();
    check_report(got == want, __FILE__, line, "%s returned %d, expected %d (\"%s\")", function,
                 (int)got, (int)want, message ? message : "(NULL)");
    if (want != HORECON_OK && message != NULL) {
        check_report(strncmp(message, function, strlen(function)) == 0 && contains(message, part),
                     __FILE__, line, "%s: message \"%s\" should start with the function and name \"%s\"",
                     function, message, part);
    }
}
#define EXPECT(call, want, function, part) expect((call), (want), (function), (part), __LINE__)

/* grid[k] or c_j by the direct sum in long double, one transform. */
static void direct_type1(int ndims, const int64_t *modes, int64_t m, const double *x, int sign,
                         const double *c /* re, im interleaved */, double *f)
{
    int64_t n[3] = {1, 1, 1}, i0, i1, i2, j;
    int a;
    for (a = 0; a < ndims; a++) n[a] = modes[a];
    for (i2 = 0; i2 < n[2]; i2++)
        for (i1 = 0; i1 < n[1]; i1++)
            for (i0 = 0; i0 < n[0]; i0++) {
                long double re = 0.0L, im = 0.0L;
                int64_t k[3], idx = i0 + n[0] * (i1 + n[1] * i2);
                k[0] = i0 - n[0] / 2;
                k[1] = i1 - n[1] / 2;
                k[2] = i2 - n[2] / 2;
                for (j = 0; j < m; j++) {
                    long double phase = 0.0L, cr = c[2 * j], ci = c[2 * j + 1];
                    for (a = 0; a < ndims; a++) phase += (long double)k[a] * x[a * m + j];
                    phase *= sign;
                    re += cr * cosl(phase) - ci * sinl(phase);
                    im += cr * sinl(phase) + ci * cosl(phase);
                }
                f[2 * idx] = (double)re;
                f[2 * idx + 1] = (double)im;
            }
}

static void direct_type2(int ndims, const int64_t *modes, int64_t m, const double *x, int sign,
                         const double *f, double *c)
{
    int64_t n[3] = {1, 1, 1}, i0, i1, i2, j;
    int a;
    for (a = 0; a < ndims; a++) n[a] = modes[a];
    for (j = 0; j < m; j++) {
        long double re = 0.0L, im = 0.0L;
        for (i2 = 0; i2 < n[2]; i2++)
            for (i1 = 0; i1 < n[1]; i1++)
                for (i0 = 0; i0 < n[0]; i0++) {
                    int64_t k[3], idx = i0 + n[0] * (i1 + n[1] * i2);
                    long double phase = 0.0L, fr = f[2 * idx], fi = f[2 * idx + 1];
                    k[0] = i0 - n[0] / 2;
                    k[1] = i1 - n[1] / 2;
                    k[2] = i2 - n[2] / 2;
                    for (a = 0; a < ndims; a++) phase += (long double)k[a] * x[a * m + j];
                    phase *= sign;
                    re += fr * cosl(phase) - fi * sinl(phase);
                    im += fr * sinl(phase) + fi * cosl(phase);
                }
        c[2 * j] = (double)re;
        c[2 * j + 1] = (double)im;
    }
}

static double rel_error(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    size_t i;
    for (i = 0; i < 2 * n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0.0 ? den : 1.0));
}

static horecon_options with_precision(int32_t precision)
{
    horecon_options o = test_options(2);
    o.precision = precision;
    return o;
}

/* One plan of each type, `transforms` transforms, through the single or double entry point. */
static void round_trip(int ndims, const int64_t *modes, int64_t m, int sign, double tolerance,
                       int32_t transforms, int32_t precision, int c64)
{
    size_t n = 1, t, i;
    int a, type;
    double *x = new_real((size_t)(ndims * m));
    horecon_options o = with_precision(precision);
    for (a = 0; a < ndims; a++) n *= (size_t)modes[a];
    for (i = 0; i < (size_t)(ndims * m); i++) {
        /* uniform in [-3π, 3π), every seventh point on a cluster near 0.3 */
        x[i] = (i % 7 == 0) ? 0.3 + 1e-3 * rng_uniform(0.0, 1.0) : rng_uniform(-3.0 * PI, 3.0 * PI);
    }
    for (type = 1; type <= 2; type++) {
        size_t in_len = (type == 1 ? (size_t)m : n), out_len = (type == 1 ? n : (size_t)m);
        double *input = new_real(2 * in_len * transforms), *expect_out = new_real(2 * out_len * transforms);
        double *got = new_real(2 * out_len * transforms);
        horecon_nufft *plan = NULL;
        horecon_status s;
        double worst = 0.0;
        for (i = 0; i < 2 * in_len * transforms; i++) {
            /* values representable in float, so both entry points see the same input */
            input[i] = (double)(float)rng_nonzero(-1.0, 1.0);
        }
        for (t = 0; t < (size_t)transforms; t++) {
            if (type == 1) {
                direct_type1(ndims, modes, m, x, sign, input + 2 * t * in_len, expect_out + 2 * t * out_len);
            } else {
                direct_type2(ndims, modes, m, x, sign, input + 2 * t * in_len, expect_out + 2 * t * out_len);
            }
        }
        s = horecon_nufft_create(&plan, type, ndims, modes, m, x, sign, tolerance, transforms, &o);
        CHECK(s == HORECON_OK, "create type %d ndims %d: %d (%s)", type, ndims, (int)s, horecon_last_error());
        if (s != HORECON_OK) {
            free(input);
            free(expect_out);
            free(got);
            continue;
        }
        if (c64) {
            horecon_c64 *cin = (horecon_c64 *)xmalloc(in_len * transforms * sizeof(horecon_c64));
            horecon_c64 *cout = (horecon_c64 *)xmalloc(out_len * transforms * sizeof(horecon_c64));
            for (i = 0; i < in_len * transforms; i++) {
                cin[i].re = input[2 * i];
                cin[i].im = input[2 * i + 1];
            }
            s = type == 1 ? horecon_nufft_execute_c64(plan, cin, cout)
                          : horecon_nufft_execute_c64(plan, cout, cin);
            for (i = 0; i < out_len * transforms; i++) {
                got[2 * i] = cout[i].re;
                got[2 * i + 1] = cout[i].im;
            }
            free(cin);
            free(cout);
        } else {
            horecon_c32 *cin = new_c32(in_len * transforms), *cout = new_c32(out_len * transforms);
            for (i = 0; i < in_len * transforms; i++) {
                cin[i].re = (float)input[2 * i];
                cin[i].im = (float)input[2 * i + 1];
            }
            s = type == 1 ? horecon_nufft_execute(plan, cin, cout) : horecon_nufft_execute(plan, cout, cin);
            for (i = 0; i < out_len * transforms; i++) {
                got[2 * i] = cout[i].re;
                got[2 * i + 1] = cout[i].im;
            }
            free(cin);
            free(cout);
        }
        CHECK(s == HORECON_OK, "execute type %d: %d (%s)", type, (int)s, horecon_last_error());
        for (t = 0; t < (size_t)transforms; t++) {
            double e = rel_error(got + 2 * t * out_len, expect_out + 2 * t * out_len, out_len);
            if (e > worst) worst = e;
        }
        /* float32 outputs add their own rounding (6e-8) to the transform's error */
        CHECK(worst <= tolerance + (c64 ? 0.0 : 2e-7),
              "type %d ndims %d M=%ld sign %d tolerance %g precision %d %s: error %.3e", type, ndims,
              (long)m, sign, tolerance, (int)precision, c64 ? "c64" : "c32", worst);
        printf("ok: type %d, %dD, M = %ld, sign %+d, %d transforms, tolerance %.0e, %s arithmetic, %s data: error %.2e\n",
               type, ndims, (long)m, sign, (int)transforms, tolerance,
               precision == HORECON_PRECISION_DOUBLE ? "float64" : "float32", c64 ? "c64" : "c32", worst);
        horecon_nufft_destroy(plan);
        free(input);
        free(expect_out);
        free(got);
    }
    free(x);
}

/* <type1(c), f> = <c, type2_{-s}(f)> through the double entry point. */
static void adjointness(void)
{
    const int64_t modes[2] = {12, 9};
    const int64_t m = 200;
    size_t n = 108, i;
    double *x = new_real(2 * m);
    horecon_c64 *c = (horecon_c64 *)xmalloc(m * sizeof(horecon_c64));
    horecon_c64 *f = (horecon_c64 *)xmalloc(n * sizeof(horecon_c64));
    horecon_c64 *ac = (horecon_c64 *)xmalloc(n * sizeof(horecon_c64));
    horecon_c64 *ahf = (horecon_c64 *)xmalloc(m * sizeof(horecon_c64));
    horecon_options o = with_precision(HORECON_PRECISION_DOUBLE);
    horecon_nufft *a = NULL, *ah = NULL;
    long double lr = 0, li = 0, rr = 0, ri = 0, na = 0, nf = 0;
    fill_real(x, 2 * m, -PI, PI);
    for (i = 0; i < (size_t)m; i++) {
        c[i].re = rng_nonzero(-1, 1);
        c[i].im = rng_nonzero(-1, 1);
    }
    for (i = 0; i < n; i++) {
        f[i].re = rng_nonzero(-1, 1);
        f[i].im = rng_nonzero(-1, 1);
    }
    CHECK(horecon_nufft_create(&a, 1, 2, modes, m, x, -1, 1e-10, 1, &o) == HORECON_OK, "create A");
    CHECK(horecon_nufft_create(&ah, 2, 2, modes, m, x, +1, 1e-10, 1, &o) == HORECON_OK, "create A^H");
    CHECK(horecon_nufft_execute_c64(a, c, ac) == HORECON_OK, "A c");
    CHECK(horecon_nufft_execute_c64(ah, ahf, f) == HORECON_OK, "A^H f");
    for (i = 0; i < n; i++) { /* <Ac, f> = sum Ac conj(f) */
        lr += (long double)ac[i].re * f[i].re + (long double)ac[i].im * f[i].im;
        li += (long double)ac[i].im * f[i].re - (long double)ac[i].re * f[i].im;
        na += (long double)ac[i].re * ac[i].re + (long double)ac[i].im * ac[i].im;
        nf += (long double)f[i].re * f[i].re + (long double)f[i].im * f[i].im;
    }
    for (i = 0; i < (size_t)m; i++) { /* <c, A^H f> */
        rr += (long double)c[i].re * ahf[i].re + (long double)c[i].im * ahf[i].im;
        ri += (long double)c[i].im * ahf[i].re - (long double)c[i].re * ahf[i].im;
    }
    {
        double err = (double)(sqrtl((lr - rr) * (lr - rr) + (li - ri) * (li - ri)) / sqrtl(na * nf));
        CHECK(err < 1e-12, "adjointness: %.3e", err);
        printf("ok: <A c, f> = <c, A^H f> to %.2e\n", err);
    }
    horecon_nufft_destroy(a);
    horecon_nufft_destroy(ah);
    free(x);
    free(c);
    free(f);
    free(ac);
    free(ahf);
}

static void bad_arguments(void)
{
    const char *create = "horecon_nufft_create", *exec = "horecon_nufft_execute";
    int64_t modes[3] = {6, 5, 4}, bad_modes[2] = {6, 0}, negative[2] = {-3, 4};
    double x[2 * 10], nan_x[2 * 10];
    horecon_options o = test_options(1), bad;
    horecon_nufft *plan = NULL, *sentinel = (horecon_nufft *)&o;
    horecon_c32 c[2 * 10], f[2 * 30], poison_f[2 * 30];
    horecon_c64 c64[10], f64_[30];
    size_t i;
    fill_real(x, 20, -PI, PI);
    memcpy(nan_x, x, sizeof x);
    nan_x[13] = NAN;
    fill_c32(c, 20);
    fill_c32(f, 60);

#define CREATE(type, ndims, m, pts, sign, tol, t, opts) \
    horecon_nufft_create(&plan, (type), (ndims), modes, (m), (pts), (sign), (tol), (t), (opts))

    plan = sentinel;
    EXPECT(horecon_nufft_create(NULL, 1, 2, modes, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_NULL_POINTER, create, "out");
    EXPECT(CREATE(0, 2, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "type");
    EXPECT(CREATE(3, 2, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "type");
    EXPECT(CREATE(1, 0, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "ndims");
    EXPECT(CREATE(1, 4, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "ndims");
    EXPECT(horecon_nufft_create(&plan, 1, 2, NULL, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_NULL_POINTER, create, "modes");
    EXPECT(horecon_nufft_create(&plan, 1, 2, bad_modes, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "modes[1]");
    EXPECT(horecon_nufft_create(&plan, 1, 2, negative, 10, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "modes[0]");
    EXPECT(CREATE(1, 2, -1, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "npoints");
    EXPECT(CREATE(1, 2, INT64_MAX, x, 1, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "npoints");
    EXPECT(CREATE(1, 2, 10, NULL, 1, 1e-6, 1, &o), HORECON_ERR_NULL_POINTER, create, "points");
    EXPECT(CREATE(1, 2, 10, nan_x, 1, 1e-6, 1, &o), HORECON_ERR_NOT_FINITE, create, "points[13]");
    EXPECT(CREATE(1, 2, 10, x, 0, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "sign");
    EXPECT(CREATE(1, 2, 10, x, -2, 1e-6, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "sign");
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-7, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "tolerance");
    EXPECT(CREATE(1, 2, 10, x, 1, 0.5, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "tolerance");
    EXPECT(CREATE(1, 2, 10, x, 1, 0.0, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "tolerance");
    EXPECT(CREATE(1, 2, 10, x, 1, NAN, 1, &o), HORECON_ERR_INVALID_ARGUMENT, create, "tolerance");
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 0, &o), HORECON_ERR_INVALID_ARGUMENT, create, "ntransforms");
    bad = o;
    bad.struct_size = 4;
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 1, &bad), HORECON_ERR_INVALID_ARGUMENT, create, "options->struct_size");
    bad = o;
    bad.backend = 9;
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 1, &bad), HORECON_ERR_INVALID_ARGUMENT, create, "options->backend");
    bad = o;
    bad.precision = 3;
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 1, &bad), HORECON_ERR_INVALID_ARGUMENT, create, "options->precision");
    bad = o;
    bad.num_threads = -1;
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 1, &bad), HORECON_ERR_INVALID_ARGUMENT, create, "num_threads");
    CHECK(plan == sentinel, "a failing create wrote *out");
    bad = o;
    bad.backend = HORECON_BACKEND_CUDA;
    {
        int32_t gpus = 0;
        horecon_cuda_device_count(&gpus);
        if (gpus == 0) {
            EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 1, &bad), HORECON_ERR_BACKEND_UNAVAILABLE, create, "CUDA");
            CHECK(plan == sentinel, "a failing create wrote *out");
        } else {
            EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 1, &bad), HORECON_OK, create, "");
            horecon_nufft_destroy(plan);
        }
    }

    /* what works: NULL options, NULL points with no points, double precision at 1e-12 */
    EXPECT(horecon_nufft_create(&plan, 2, 2, modes, 0, NULL, 1, 1e-6, 1, NULL), HORECON_OK, create, "");
    CHECK(plan != sentinel && plan != NULL, "create wrote no plan");
    horecon_nufft_destroy(plan);
    bad = with_precision(HORECON_PRECISION_DOUBLE);
    EXPECT(CREATE(1, 2, 10, x, -1, 1e-12, 2, &bad), HORECON_OK, create, "");
    horecon_nufft_destroy(plan);
    horecon_nufft_destroy(NULL);

    /* execute: NULL arrays, non-finite input, outputs untouched */
    EXPECT(CREATE(1, 2, 10, x, 1, 1e-6, 2, &o), HORECON_OK, create, "");
    EXPECT(horecon_nufft_execute(NULL, c, f), HORECON_ERR_NULL_POINTER, exec, "nufft");
    EXPECT(horecon_nufft_execute(plan, NULL, f), HORECON_ERR_NULL_POINTER, exec, "nonuniform");
    EXPECT(horecon_nufft_execute(plan, c, NULL), HORECON_ERR_NULL_POINTER, exec, "grid");
    poison_c32(f, 60);
    memcpy(poison_f, f, sizeof f);
    c[17].im = INFINITY;
    EXPECT(horecon_nufft_execute(plan, c, f), HORECON_ERR_NOT_FINITE, exec, "nonuniform[17]");
    CHECK(same_c32(f, poison_f, 60), "a failing type-1 execute wrote the grid");
    for (i = 0; i < 10; i++) {
        c64[i].re = NAN;
        c64[i].im = 0.0;
    }
    EXPECT(horecon_nufft_execute_c64(plan, c64, f64_), HORECON_ERR_NOT_FINITE, "horecon_nufft_execute_c64", "nonuniform[0]");
    c[17].im = 0.5f;
    EXPECT(horecon_nufft_execute(plan, c, f), HORECON_OK, exec, "");
    CHECK(!same_c32(f, poison_f, 60), "a type-1 execute wrote nothing");
    horecon_nufft_destroy(plan);

    EXPECT(CREATE(2, 2, 10, x, 1, 1e-6, 1, &o), HORECON_OK, create, "");
    poison_c32(c, 10);
    fill_c32(f, 30);
    f[29].re = NAN;
    EXPECT(horecon_nufft_execute(plan, c, f), HORECON_ERR_NOT_FINITE, exec, "grid[29]");
    CHECK(is_poisoned_c32(c, 10), "a failing type-2 execute wrote the points' values");
    EXPECT(horecon_nufft_execute(plan, NULL, f), HORECON_ERR_NULL_POINTER, exec, "nonuniform");
    horecon_nufft_destroy(plan);
#undef CREATE
}

int main(void)
{
    const int64_t m1[1] = {37}, m2[2] = {16, 11}, m3[3] = {6, 7, 5}, single[2] = {1, 9};
    rng_seed("nufft");
    bad_arguments();
    round_trip(1, m1, 150, 1, 1e-6, 1, HORECON_PRECISION_ACCURATE, 0);
    round_trip(2, m2, 300, -1, 1e-6, 3, HORECON_PRECISION_ACCURATE, 0);
    round_trip(2, m2, 300, 1, 1e-3, 2, HORECON_PRECISION_FAST, 1);
    round_trip(3, m3, 200, -1, 1e-6, 2, HORECON_PRECISION_ACCURATE, 1);
    round_trip(2, single, 40, 1, 1e-9, 1, HORECON_PRECISION_DOUBLE, 1);
    round_trip(3, m3, 200, 1, 1e-12, 1, HORECON_PRECISION_DOUBLE, 1);
    round_trip(2, m2, 300, -1, 1e-6, 2, HORECON_PRECISION_DOUBLE, 0);
    adjointness();
    return check_summary("nufft");
}
