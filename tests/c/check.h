/* A tiny test harness shared by the C tests (C99 and C++11 alike): check
 * counters, a seeded generator (the seed is printed; HORECON_TEST_SEED
 * replays it), poisoned output buffers, and problem builders.
 *
 * Everything is `static inline` so a program that uses only part of it
 * compiles cleanly with -Wall -Wextra -Werror. */
#ifndef HORECON_TEST_CHECK_H
#define HORECON_TEST_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "horecon.h"

static int check_passed = 0;
static int check_failed = 0;

static inline void check_report(int ok, const char *file, int line, const char *format, ...)
{
    if (ok) {
        check_passed++;
        return;
    }
    check_failed++;
    {
        va_list args;
        fprintf(stderr, "FAIL %s:%d: ", file, line);
        va_start(args, format);
        vfprintf(stderr, format, args);
        va_end(args);
        fprintf(stderr, "\n");
    }
}

/* CHECK(condition, "printf format", ...): counts and reports one check. */
#define CHECK(cond, ...) check_report((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

/* Prints the summary line and returns the exit code of the program. */
static inline int check_summary(const char *program)
{
    printf("%s: %d checks passed, %d failed\n", program, check_passed, check_failed);
    return check_failed == 0 && check_passed > 0 ? 0 : 1;
}

/* ---- seeded generator (SplitMix64) ---- */

static uint64_t rng_state = 0;

static inline void rng_seed(const char *program)
{
    const char *env = getenv("HORECON_TEST_SEED");
    uint64_t seed;
    if (env != NULL && *env != '\0') {
        seed = (uint64_t)strtoull(env, NULL, 10);
    } else {
        seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
    }
    rng_state = seed;
    printf("%s: seed %llu (rerun with HORECON_TEST_SEED=%llu)\n", program,
           (unsigned long long)seed, (unsigned long long)seed);
}

static inline uint64_t rng_next(void)
{
    uint64_t z;
    rng_state += 0x9E3779B97F4A7C15ull;
    z = rng_state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double rng_uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rng_next() >> 11) / 9007199254740992.0);
}

/* Uniform in [lo, hi), never exactly zero (tests never run on zeros). */
static inline double rng_nonzero(double lo, double hi)
{
    double v;
    do {
        v = rng_uniform(lo, hi);
    } while (v == 0.0);
    return v;
}

static inline void fill_real(double *v, size_t n, double lo, double hi)
{
    size_t i;
    for (i = 0; i < n; i++) {
        v[i] = rng_nonzero(lo, hi);
    }
}

static inline void fill_c32(horecon_c32 *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        v[i].re = (float)rng_nonzero(-1.0, 1.0);
        v[i].im = (float)rng_nonzero(-1.0, 1.0);
    }
}

/* ---- allocation and poisoned outputs ---- */

static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory allocating %lu bytes in a test\n", (unsigned long)bytes);
        exit(2);
    }
    return p;
}

static inline double *new_real(size_t n) { return (double *)xmalloc(n * sizeof(double)); }
static inline float *new_f32(size_t n) { return (float *)xmalloc(n * sizeof(float)); }
static inline horecon_c32 *new_c32(size_t n) { return (horecon_c32 *)xmalloc(n * sizeof(horecon_c32)); }

/* A value no operator produces on these inputs: outputs left untouched keep it. */
static inline void poison_c32(horecon_c32 *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        v[i].re = 1234.5f + (float)i;
        v[i].im = -6789.25f;
    }
}

static inline int is_poisoned_c32(const horecon_c32 *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (v[i].re != 1234.5f + (float)i || v[i].im != -6789.25f) {
            return 0;
        }
    }
    return 1;
}

static inline int same_c32(const horecon_c32 *a, const horecon_c32 *b, size_t n)
{
    return memcmp(a, b, n * sizeof(horecon_c32)) == 0;
}

/* ‖a − b‖ / ‖b‖ in double. */
static inline double rel_error_c32(const horecon_c32 *a, const horecon_c32 *b, size_t n)
{
    double num = 0.0, den = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double dr = (double)a[i].re - (double)b[i].re, di = (double)a[i].im - (double)b[i].im;
        num += dr * dr + di * di;
        den += (double)b[i].re * b[i].re + (double)b[i].im * b[i].im;
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static inline int contains(const char *text, const char *part)
{
    return text != NULL && part != NULL && strstr(text, part) != NULL;
}

/* ---- problems ---- */

/* Options for the tests: the CPU backend with a fixed, small thread count. */
static inline horecon_options test_options(int32_t num_threads)
{
    horecon_options o;
    horecon_default_options(&o);
    o.backend = HORECON_BACKEND_CPU;
    o.num_threads = num_threads;
    return o;
}

/* A complete plan: grid positions, 9-term solid harmonics, off-resonance
 * and (for ncoils > 1) random sensitivities, all random. Returns NULL on
 * failure (after reporting it). */
static inline horecon_plan *complete_plan(const horecon_options *opts, int64_t nx, int64_t ny,
                                          int64_t nz, int64_t ncoils, int64_t nsamples)
{
    horecon_plan *plan = NULL;
    size_t n = (size_t)(nx * ny * nz), m = (size_t)nsamples, l = (size_t)ncoils;
    double fov[3], center[3];
    double *coefficients = new_real(9 * m), *omega = new_real(n), *times = new_real(m);
    horecon_c32 *sensitivities = new_c32(n * l);
    horecon_status s;
    size_t j, b;
    fov[0] = rng_uniform(0.15, 0.3);
    fov[1] = rng_uniform(0.15, 0.3);
    fov[2] = rng_uniform(0.01, 0.2);
    fill_real(center, 3, -0.02, 0.02);
    /* k0 in rad, linear terms up to ~ N/2 cycles over the FOV, small higher orders */
    for (j = 0; j < m; j++) {
        coefficients[j] = rng_nonzero(-1.0, 1.0);
        for (b = 1; b < 4; b++) {
            coefficients[b * m + j] = rng_nonzero(-1.0, 1.0) * 3.14159 * (double)nx / fov[0];
        }
        for (b = 4; b < 9; b++) {
            coefficients[b * m + j] = rng_nonzero(-50.0, 50.0);
        }
        times[j] = 1e-5 * (double)j + rng_uniform(0.0, 1e-6);
    }
    fill_real(omega, n, -300.0, 300.0);
    fill_c32(sensitivities, n * l);
    s = horecon_plan_create(opts, nx, ny, nz, ncoils, nsamples, &plan);
    if (s == HORECON_OK) s = horecon_set_grid_positions(plan, fov, center);
    if (s == HORECON_OK) s = horecon_set_solid_harmonics(plan, 9, coefficients);
    if (s == HORECON_OK) s = horecon_set_off_resonance(plan, omega, times);
    if (s == HORECON_OK && ncoils > 1) s = horecon_set_sensitivities(plan, sensitivities);
    CHECK(s == HORECON_OK, "building a complete plan: status %d (%s)", (int)s, horecon_last_error());
    if (s != HORECON_OK) {
        horecon_plan_destroy(plan);
        plan = NULL;
    }
    free(coefficients);
    free(omega);
    free(times);
    free(sensitivities);
    return plan;
}

#endif /* HORECON_TEST_CHECK_H */
