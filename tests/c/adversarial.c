/* The adversarial suite of the C API (issue 11): every exported function
 * called with edge and random arguments -- zero, negative, huge, NaN/Inf,
 * NULL, wrong struct_size, garbage enums, calls out of order (plans in
 * every state), callbacks that cancel -- each call in a forked child under
 * an address-space limit (RLIMIT_AS, 4 GiB) and a time limit. Every call
 * must return a status code (never HORECON_ERR_INTERNAL), set a message
 * with every error, and leave the library working; the parent asserts the
 * child exited normally (no signal, no abort, no hang) and prints the count
 * of inputs tried.
 *
 * Adding a function: one line in FUNCTIONS below, naming its arguments with
 * the generators (P plan, D/F/C/U8 arrays, I32/I64/R scalars, ...).
 *
 *   adversarial [cases-per-function [only-this-function]]
 *   adversarial --list   the functions of the table, one a line (run.sh
 *                        compares them with the header's: a function
 *                        without an entry fails the C tests)
 *   HORECON_TEST_SEED=<seed> replays a run (the seed is printed).
 *
 * Linux only (fork, setrlimit, alarm). Not run under valgrind (the limit
 * is on the address space, which valgrind changes). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "horecon.h"

/* Elements of each argument array: every size a valid argument can imply
 * (plans of <= 512 voxels and samples, toolkit counts <= 4096, refined
 * grids <= 2^21 points) fits, and every "huge" count is >= 2^31, whose
 * allocation fails under the 4 GiB limit before anything is read. */
#define CAP ((size_t)1 << 21)
#define ADDRESS_SPACE ((rlim_t)4 << 30)
#define DEADLINE_SECONDS 2.0 /* callbacks and horecon_cancel stop a call after this */
#define HARD_LIMIT_SECONDS 20 /* a call still running then is a hang */

/* Child exit codes beyond the status codes (0..99). */
#define BAD_STATUS 120
#define NO_MESSAGE 121
#define LIBRARY_BROKEN 122
#define SETUP_FAILED 123

/* ---------------------------------------------------------------- state */
enum { FRESH, TRAJECTORY, HARMONICS, TOEPLITZ, CARTESIAN, USER_BASIS, PLANS };
enum { NUFFT_TYPE1, NUFFT_TYPE2, NUFFTS };

struct ctx {
    uint64_t rng;
    horecon_plan *plans[PLANS];
    horecon_plan *plan_out;
    horecon_nufft *nuffts[NUFFTS];
    horecon_nufft *nufft_out;
    horecon_c64 *z;
    double *d;
    float *f;
    horecon_c32 *c;
    uint8_t *u8;
    int64_t cells[4];
    int32_t i32_cell;
    horecon_options opts;
    horecon_cg_options cg;
    horecon_cg_info info;
    int64_t ref[3];
    horecon_espirit_options espirit;
    horecon_b0_options b0;
    horecon_delay_options delay;
    horecon_approximation_info ainfo;
    char log[512]; /* the arguments drawn, for the failure report */
};

static double *g_d;
static float *g_f;
static horecon_c32 *g_c;
static uint8_t *g_u8;
static horecon_c64 *g_z;
static volatile double g_deadline;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t next(struct ctx *c)
{
    uint64_t z = (c->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int pick(struct ctx *c, int n) { return (int)(next(c) % (uint64_t)n); }
static double uniform(struct ctx *c) { return (double)(next(c) >> 11) / 9007199254740992.0; }

static void note(struct ctx *c, const char *fmt, ...)
{
    size_t used = strlen(c->log);
    va_list ap;
    if (used + 2 >= sizeof c->log) return;
    va_start(ap, fmt);
    vsnprintf(c->log + used, sizeof c->log - used, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ callbacks */
static int32_t deadline_fraction(void *user, double fraction)
{
    (void)user;
    (void)fraction;
    return now() > g_deadline;
}
static int32_t always_cancel(void *user, double fraction)
{
    (void)user;
    (void)fraction;
    return 1;
}
static int32_t deadline_iteration(void *user, int32_t iteration, double rel)
{
    (void)user;
    (void)iteration;
    (void)rel;
    return now() > g_deadline;
}

/* ----------------------------------------------------------- generators */
static horecon_plan *P(struct ctx *c)
{
    int i = pick(c, PLANS + 1);
    note(c, " plan%d", i);
    return i == PLANS ? NULL : c->plans[i];
}

static int32_t I32(struct ctx *c)
{
    static const int32_t edge[] = {0, 1, -1, 2, 3, 4, 9, 16, 26, 100, 4096, 4097, INT32_MAX, INT32_MIN};
    int32_t v = pick(c, 3) == 0 ? (int32_t)(next(c) % 64) : edge[pick(c, (int)(sizeof edge / sizeof *edge))];
    note(c, " %d", (int)v);
    return v;
}

/* Counts: small (safe to read and write with CAP arrays) or huge (>= 2^31,
 * whose allocation fails under the limit) or invalid. */
static int64_t I64(struct ctx *c)
{
    static const int64_t edge[] = {0, 1, -1, 2, 3, 16, 64, 4096, (int64_t)1 << 31, (int64_t)1 << 35,
                                   (int64_t)1 << 40, ((int64_t)1 << 40) + 1, (int64_t)1 << 62,
                                   INT64_MAX, INT64_MIN};
    int64_t v = pick(c, 2) == 0 ? 1 + (int64_t)(next(c) % 4096) : edge[pick(c, (int)(sizeof edge / sizeof *edge))];
    note(c, " %lld", (long long)v);
    return v;
}

/* Grid sizes for the toolkit's grids: small or invalid/huge. */
static int64_t DIM(struct ctx *c)
{
    static const int64_t edge[] = {0, -1, 1, 2, 8, (int64_t)1 << 31, INT64_MAX};
    int64_t v = pick(c, 2) == 0 ? 1 + (int64_t)(next(c) % 8) : edge[pick(c, (int)(sizeof edge / sizeof *edge))];
    note(c, " %lld", (long long)v);
    return v;
}

static double R(struct ctx *c)
{
    double edge[8];
    double v;
    edge[0] = 0.0;
    edge[1] = -1.0;
    edge[2] = NAN;
    edge[3] = INFINITY;
    edge[4] = -INFINITY;
    edge[5] = 1e300;
    edge[6] = 1e-300;
    edge[7] = 1e6;
    switch (pick(c, 3)) {
    case 0: v = uniform(c); break;
    case 1: v = 0.001 + 0.5 * uniform(c); break;
    default: v = edge[pick(c, 8)]; break;
    }
    note(c, " %g", v);
    return v;
}

static uint64_t SEED(struct ctx *c) { return next(c); }

/* Arrays: NULL, finite values, or one NaN / Inf among them. */
static void poison(struct ctx *c, double *d, float *f, horecon_c32 *x)
{
    size_t at = (size_t)(next(c) % 512);
    float bad = pick(c, 2) ? NAN : INFINITY;
    if (d) d[at] = (double)bad;
    if (f) f[at] = bad;
    if (x) x[at].im = bad;
    note(c, "[bad@%zu]", at);
}
static double *D(struct ctx *c)
{
    int k = pick(c, 10);
    if (k == 0) { note(c, " NULL"); return NULL; }
    note(c, " d");
    if (k == 1) poison(c, c->d, NULL, NULL);
    return c->d;
}
static float *F(struct ctx *c)
{
    int k = pick(c, 10);
    if (k == 0) { note(c, " NULL"); return NULL; }
    note(c, " f");
    if (k == 1) poison(c, NULL, c->f, NULL);
    if (k == 2) { c->f[next(c) % 512] = -1.0f; note(c, "[negative]"); }
    return c->f;
}
static horecon_c32 *C(struct ctx *c)
{
    int k = pick(c, 10);
    if (k == 0) { note(c, " NULL"); return NULL; }
    note(c, " c");
    if (k == 1) poison(c, NULL, NULL, c->c);
    return c->c;
}
static uint8_t *U8(struct ctx *c)
{
    if (pick(c, 10) == 0) { note(c, " NULL"); return NULL; }
    note(c, " mask");
    return c->u8;
}
static int64_t *I64P(struct ctx *c)
{
    if (pick(c, 8) == 0) { note(c, " NULL"); return NULL; }
    c->cells[0] = pick(c, 2) ? 0 : I64(c);
    return c->cells;
}
static int32_t *I32P(struct ctx *c)
{
    if (pick(c, 8) == 0) { note(c, " NULL"); return NULL; }
    return &c->i32_cell;
}
static horecon_plan **PP(struct ctx *c)
{
    if (pick(c, 10) == 0) { note(c, " NULL"); return NULL; }
    return &c->plan_out;
}

static horecon_nufft *NU(struct ctx *c)
{
    int i = pick(c, NUFFTS + 1);
    note(c, " nufft%d", i);
    return i == NUFFTS ? NULL : c->nuffts[i];
}
static horecon_nufft **NUPP(struct ctx *c)
{
    if (pick(c, 10) == 0) { note(c, " NULL"); return NULL; }
    return &c->nufft_out;
}
static horecon_c64 *Z(struct ctx *c)
{
    int k = pick(c, 10);
    if (k == 0) { note(c, " NULL"); return NULL; }
    note(c, " z");
    if (k == 1) {
        size_t at = (size_t)(next(c) % 512);
        c->z[at].re = pick(c, 2) ? NAN : -INFINITY;
        note(c, "[bad@%zu]", at);
    }
    return c->z;
}
/* modes[3] of a NUFFT: small, or edge/huge values, or NULL. */
static int64_t *MODES(struct ctx *c)
{
    int a;
    if (pick(c, 10) == 0) { note(c, " NULL"); return NULL; }
    for (a = 0; a < 3; a++) c->cells[a] = pick(c, 2) ? 1 + (int64_t)(next(c) % 24) : DIM(c);
    return c->cells;
}
/* A NUFFT type, dimension or sign: mostly valid, else any I32. */
static int32_t SMALL(struct ctx *c, int32_t lo, int32_t hi)
{
    int32_t v = pick(c, 4) ? lo + (int32_t)(next(c) % (uint64_t)(hi - lo + 1)) : I32(c);
    note(c, " %d", (int)v);
    return v;
}
/* A NUFFT tolerance: in range, or any R. */
static double TOL(struct ctx *c)
{
    static const double valid[] = {1e-1, 1e-3, 1e-6, 1e-9, 1e-12};
    double v = pick(c, 2) ? valid[pick(c, 5)] : R(c);
    note(c, " tol=%g", v);
    return v;
}

static horecon_options *O(struct ctx *c)
{
    int k = pick(c, 6);
    horecon_default_options(&c->opts);
    c->opts.backend = HORECON_BACKEND_CPU;
    c->opts.num_threads = 1;
    if (k == 0) { note(c, " opts=NULL"); return NULL; }
    if (k == 1) {
        static const uint32_t sizes[] = {0, 1, 4, sizeof(horecon_options) - 4, sizeof(horecon_options) + 4,
                                         UINT32_MAX};
        c->opts.struct_size = sizes[pick(c, 6)];
        note(c, " opts.struct_size=%u", (unsigned)c->opts.struct_size);
    }
    if (k >= 2) {
        c->opts.backend = I32(c);
        c->opts.device = I32(c);
        c->opts.num_devices = I32(c);
        c->opts.num_threads = pick(c, 2) ? 1 : I32(c);
        c->opts.precision = I32(c);
        c->opts.verbosity = pick(c, 2) ? 0 : I32(c);
        note(c, " (opts)");
    }
    return &c->opts;
}

static horecon_cg_options *CGO(struct ctx *c)
{
    int k = pick(c, 6);
    horecon_default_cg_options(&c->cg);
    c->cg.progress = deadline_iteration;
    if (k == 0) { note(c, " cg=NULL"); return NULL; }
    if (k == 1) {
        static const uint32_t sizes[] = {0, 8, sizeof(horecon_cg_options) - 4, sizeof(horecon_cg_options) + 8,
                                         UINT32_MAX};
        c->cg.struct_size = sizes[pick(c, 5)];
        note(c, " cg.struct_size=%u", (unsigned)c->cg.struct_size);
    }
    if (k >= 2) {
        c->cg.max_iterations = pick(c, 2) ? (int32_t)(next(c) % 20) : I32(c);
        c->cg.tolerance = R(c);
        c->cg.regularizer = pick(c, 2) ? pick(c, 5) : I32(c);
        c->cg.lambda = R(c);
        c->cg.reweightings = pick(c, 2) ? 1 + pick(c, 3) : I32(c);
        c->cg.epsilon = R(c);
        c->cg.sigma = R(c);
        c->cg.sample_weights = pick(c, 2) ? NULL : F(c);
        c->cg.fd_weights = pick(c, 2) ? NULL : F(c);
        c->cg.warm_start = pick(c, 2);
        c->cg.neighbours = pick(c, 2) ? 6 : I32(c);
        if (pick(c, 4) == 0) c->cg.progress = NULL;
        note(c, " (cg)");
    }
    return &c->cg;
}
/* sizes for horecon_init_cg_options: this header's, an older one's, and wrong ones */
static size_t CGSIZE(struct ctx *c)
{
    static const size_t sizes[] = {sizeof(horecon_cg_options), offsetof(horecon_cg_options, neighbours),
                                   0, 1, sizeof(horecon_cg_options) + 8, (size_t)-1};
    return sizes[pick(c, 6)];
}
static horecon_cg_info *INFO(struct ctx *c) { return pick(c, 4) == 0 ? NULL : &c->info; }

/* Counts of the calibration functions (coils, points): small valid ones,
 * or 0, -1, INT64_MIN (their arrays are not sized by a plan, so no huge
 * count can be told from a short array). */
static int64_t COUNT(struct ctx *c, int64_t hi)
{
    static const int64_t edge[] = {0, -1, INT64_MIN};
    int64_t v = pick(c, 4) ? 1 + (int64_t)(next(c) % (uint64_t)hi) : edge[pick(c, 3)];
    note(c, " %lld", (long long)v);
    return v;
}
/* An echo count: 1..4, or 0, -1, INT32_MIN. Never a large one: it sizes the
 * reference k-space (<= 24^3 x 4 coils x echoes must fit the CAP arrays), and
 * a large count with an array that long is valid, so no call can refuse it. */
static int32_t ECHOES(struct ctx *c)
{
    static const int32_t edge[] = {0, -1, INT32_MIN};
    int32_t v = pick(c, 4) ? 1 + (int32_t)(next(c) % 4) : edge[pick(c, 3)];
    note(c, " %d", (int)v);
    return v;
}
/* A reference grid (3 dims, <= 24^3 voxels), or edge values, or NULL. */
static int64_t *REF(struct ctx *c)
{
    static const int64_t edge[] = {0, -1, 1, INT64_MIN};
    int a;
    if (pick(c, 10) == 0) { note(c, " ref=NULL"); return NULL; }
    for (a = 0; a < 3; a++) {
        c->ref[a] = pick(c, 5) ? 1 + (int64_t)(next(c) % 24) : edge[pick(c, 4)];
        note(c, " %lld", (long long)c->ref[a]);
    }
    return c->ref;
}
/* A struct_size: the header's, or a wrong one. */
static uint32_t struct_size(struct ctx *c, uint32_t size)
{
    static const uint32_t wrong[] = {0, 4, UINT32_MAX};
    uint32_t v = pick(c, 3) ? size : wrong[pick(c, 3)];
    if (v != size) note(c, " struct_size=%u", (unsigned)v);
    return v;
}
static horecon_espirit_options *ESPIRIT(struct ctx *c)
{
    if (pick(c, 8) == 0) { note(c, " o=NULL"); return NULL; }
    horecon_default_espirit_options(&c->espirit);
    c->espirit.struct_size = struct_size(c, sizeof c->espirit);
    if (pick(c, 2)) {
        c->espirit.kernel = SMALL(c, 1, 7);
        c->espirit.calibration = SMALL(c, 1, 24);
        c->espirit.threshold = R(c);
        c->espirit.crop = R(c);
    }
    return &c->espirit;
}
static horecon_b0_options *B0O(struct ctx *c)
{
    if (pick(c, 8) == 0) { note(c, " o=NULL"); return NULL; }
    horecon_default_b0_options(&c->b0);
    c->b0.struct_size = struct_size(c, sizeof c->b0);
    if (pick(c, 2)) {
        c->b0.max_iterations = SMALL(c, 0, 50);
        c->b0.mask_threshold = R(c);
        c->b0.smoothness = R(c);
    }
    return &c->b0;
}
static horecon_delay_options *DELAY(struct ctx *c)
{
    if (pick(c, 8) == 0) { note(c, " o=NULL"); return NULL; }
    horecon_default_delay_options(&c->delay);
    c->delay.struct_size = struct_size(c, sizeof c->delay);
    if (pick(c, 2)) {
        c->delay.iterations = SMALL(c, 1, 4);
        c->delay.range = pick(c, 2) ? 20e-6 * uniform(c) : R(c);
        c->delay.step = pick(c, 2) ? 5e-6 : R(c);
        c->delay.tolerance = pick(c, 2) ? 1e-7 : R(c);
        c->delay.lambda = R(c);
        c->delay.groups = (uint32_t)(pick(c, 2) ? 0 : next(c) % 8);
    }
    return &c->delay;
}
static horecon_approximation_info *AINFO(struct ctx *c)
{
    if (pick(c, 6) == 0) { note(c, " info=NULL"); return NULL; }
    c->ainfo.struct_size = struct_size(c, sizeof c->ainfo);
    return &c->ainfo;
}

static horecon_fraction_fn CB(struct ctx *c)
{
    int k = pick(c, 3);
    note(c, k == 0 ? " cb=NULL" : k == 1 ? " cb=deadline" : " cb=cancel");
    return k == 0 ? NULL : k == 1 ? deadline_fraction : always_cancel;
}
static void *USER(struct ctx *c) { return pick(c, 2) ? NULL : (void *)c; }

/* ------------------------------------------------------------ the table */
/* S(name, args...): a function returning a status; V(name, args...): one
 * returning void or a pointer (it must simply return). */
#define FUNCTIONS(S, V)                                                                 \
    V(horecon_default_options, O(c))                                                    \
    V(horecon_default_cg_options, CGO(c))                                               \
    S(horecon_init_cg_options, CGO(c), CGSIZE(c))                                       \
    S(horecon_plan_create, O(c), DIM(c), DIM(c), DIM(c), I64(c), I64(c), PP(c))         \
    S(horecon_plan_destroy, P(c))                                                       \
    S(horecon_set_positions, P(c), D(c))                                                \
    S(horecon_set_grid_positions, P(c), D(c), D(c))                                     \
    S(horecon_set_solid_harmonics, P(c), I32(c), D(c))                                  \
    S(horecon_set_basis, P(c), I32(c), D(c), D(c))                                      \
    S(horecon_set_trajectory, P(c), I32(c), D(c))                                       \
    S(horecon_set_off_resonance, P(c), D(c), D(c))                                      \
    S(horecon_set_sensitivities, P(c), C(c))                                            \
    S(horecon_forward, P(c), C(c), C(c))                                                \
    S(horecon_adjoint, P(c), C(c), C(c))                                                \
    S(horecon_normal, P(c), C(c), C(c))                                                 \
    S(horecon_cg, P(c), C(c), CGO(c), C(c), INFO(c))                                    \
    V(horecon_last_error, )                                                             \
    V(horecon_status_string, I32(c))                                                    \
    V(horecon_version, )                                                                \
    S(horecon_cuda_device_count, I32P(c))                                               \
    S(horecon_plan_backend, P(c), I32P(c))                                              \
    S(horecon_set_cartesian, P(c), U8(c))                                               \
    S(horecon_fhd, P(c), C(c), C(c), C(c))                                              \
    S(horecon_q_dims, P(c), I64P(c))                                                    \
    S(horecon_q, P(c), F(c), C(c))                                                      \
    S(horecon_gridding, P(c), C(c), F(c), C(c))                                         \
    S(horecon_sim_shepp_logan, I32(c), D(c), D(c), I64(c), D(c), D(c))                  \
    S(horecon_sim_shepp_logan_kspace, I32(c), D(c), D(c), I64(c), I32(c), D(c), D(c), D(c)) \
    S(horecon_sim_shepp_logan_band_limited, D(c), D(c), I64(c), D(c), D(c), R(c), C(c)) \
    S(horecon_sim_spiral, I64(c), R(c), R(c), R(c), R(c), I64P(c), D(c), D(c))          \
    S(horecon_sim_density_weights, I64(c), D(c), F(c))                                  \
    S(horecon_sim_radial, I64(c), R(c), I64(c), R(c), R(c), I64P(c), D(c), D(c))        \
    S(horecon_sim_epi, I64(c), R(c), I64(c), R(c), R(c), I64P(c), D(c), D(c))           \
    S(horecon_sim_cartesian, I64(c), I64(c), R(c), R(c), R(c), R(c), I64P(c), D(c), D(c)) \
    S(horecon_sim_stack_of_spirals, I64(c), I64(c), R(c), R(c), R(c), R(c), R(c), I64P(c), D(c), D(c)) \
    S(horecon_sim_coil_sensitivities, I64(c), D(c), I32(c), R(c), D(c), C(c))           \
    S(horecon_sim_off_resonance, I64(c), D(c), D(c), D(c), R(c), D(c))                  \
    S(horecon_sim_field_coefficients, I64(c), I32(c), D(c), R(c), R(c), SEED(c), D(c))  \
    S(horecon_sim_add_noise, I64(c), C(c), R(c), SEED(c), D(c))                         \
    S(horecon_sim_refined_grid, DIM(c), DIM(c), DIM(c), D(c), D(c), I32(c), I64P(c), D(c)) \
    S(horecon_sim_block_average, DIM(c), DIM(c), DIM(c), I32(c), C(c), C(c))            \
    S(horecon_sim_nrmse, I64(c), C(c), C(c), D(c))                                      \
    S(horecon_sim_psnr, I64(c), C(c), C(c), D(c))                                       \
    S(horecon_sim_percent_error, I64(c), C(c), C(c), D(c))                              \
    S(horecon_set_toeplitz, P(c), I32(c), I32(c))                                       \
    S(horecon_set_progress, P(c), CB(c), USER(c))                                       \
    S(horecon_cancel, P(c))                                                             \
    S(horecon_sim_set_progress, CB(c), USER(c))                                         \
    S(horecon_plan_memory, P(c), I32(c), I64P(c), I64P(c))                              \
    S(horecon_nufft_create, NUPP(c), SMALL(c, 1, 2), SMALL(c, 1, 3), MODES(c), I64(c), D(c), SMALL(c, -1, 1), TOL(c), SMALL(c, 1, 4), O(c)) \
    S(horecon_nufft_execute, NU(c), C(c), C(c))                                         \
    S(horecon_nufft_execute_c64, NU(c), Z(c), Z(c))                                     \
    V(horecon_nufft_destroy, NU(c))                                                     \
    S(horecon_set_approximation, P(c), R(c))                                            \
    S(horecon_get_approximation_info, P(c), AINFO(c))                                   \
    S(horecon_plan_phase_terms, P(c), I32P(c))                                          \
    V(horecon_default_espirit_options, pick(c, 4) ? &c->espirit : NULL)                 \
    V(horecon_default_b0_options, pick(c, 4) ? &c->b0 : NULL)                           \
    V(horecon_default_delay_options, pick(c, 4) ? &c->delay : NULL)                     \
    S(horecon_noise_covariance, C(c), COUNT(c, 512), COUNT(c, 8), C(c))                 \
    S(horecon_whiten, C(c), COUNT(c, 8), COUNT(c, 512), C(c))                           \
    S(horecon_sim_noise_covariance, COUNT(c, 8), R(c), R(c), SEED(c), C(c))             \
    S(horecon_sim_correlated_noise, C(c), COUNT(c, 8), COUNT(c, 512), SEED(c), C(c))    \
    S(horecon_cartesian_images, REF(c), D(c), D(c), COUNT(c, 4), C(c), C(c))            \
    S(horecon_sim_reference, REF(c), D(c), D(c), COUNT(c, 512), D(c), C(c), COUNT(c, 4), C(c), D(c), ECHOES(c), D(c), R(c), C(c)) \
    S(horecon_espirit, P(c), REF(c), D(c), D(c), C(c), ESPIRIT(c), C(c), F(c))         \
    S(horecon_walsh, P(c), REF(c), D(c), D(c), C(c), SMALL(c, 1, 7), C(c))             \
    S(horecon_b0_map, P(c), REF(c), D(c), D(c), COUNT(c, 4), ECHOES(c), D(c), C(c), B0O(c), D(c)) \
    S(horecon_estimate_delay, P(c), C(c), D(c), D(c), DELAY(c), D(c), D(c), SMALL(c, 0, 64), D(c), D(c), I32P(c))

/* Arguments are evaluated in an unspecified order, but deterministically
 * for one build: a seed replays a case. */
#define STUB_S(name, ...) \
    static int call_##name(struct ctx *c) { return (int)name(__VA_ARGS__); }
#define STUB_V(name, ...) \
    static int call_##name(struct ctx *c) { (void)c; (void)name(__VA_ARGS__); return HORECON_OK; }
FUNCTIONS(STUB_S, STUB_V)

struct entry {
    const char *name;
    int (*call)(struct ctx *);
    int returns_status;
};
#define ENTRY_S(name, ...) {#name, call_##name, 1},
#define ENTRY_V(name, ...) {#name, call_##name, 0},
static const struct entry table[] = {FUNCTIONS(ENTRY_S, ENTRY_V)};
#define ENTRIES ((int)(sizeof table / sizeof *table))

/* ------------------------------------------------------------- the child */
static int ok(horecon_status s) { return s == HORECON_OK; }

/* Plans in every state a call can meet (small: 64 to 512 voxels and samples). */
static int make_plans(struct ctx *c)
{
    horecon_options o;
    double fov[3] = {0.2, 0.2, 0.01}, center[3] = {0.0, 0.0, 0.0};
    size_t i, count = 0;
    horecon_default_options(&o);
    o.backend = HORECON_BACKEND_CPU;
    o.num_threads = 1 + pick(c, 2);
    for (i = 0; i < 3 * 512; i++) c->d[i] = 0.1 * (uniform(c) - 0.5);
    if (!ok(horecon_plan_create(&o, 8, 8, 1, 1, 64, &c->plans[FRESH]))) return 0;
    /* 2D trajectory, 2 coils */
    if (!ok(horecon_plan_create(&o, 16, 16, 1, 2, 512, &c->plans[TRAJECTORY])) ||
        !ok(horecon_set_grid_positions(c->plans[TRAJECTORY], fov, center)) ||
        !ok(horecon_set_trajectory(c->plans[TRAJECTORY], 2, c->d)) ||
        !ok(horecon_set_sensitivities(c->plans[TRAJECTORY], c->c)))
        return 0;
    /* 3D, 16 solid harmonics, off-resonance, 3 coils */
    if (!ok(horecon_plan_create(&o, 8, 8, 4, 3, 300, &c->plans[HARMONICS])) ||
        !ok(horecon_set_positions(c->plans[HARMONICS], c->d)) ||
        !ok(horecon_set_solid_harmonics(c->plans[HARMONICS], 16, c->d)) ||
        !ok(horecon_set_off_resonance(c->plans[HARMONICS], c->d, c->d)) ||
        !ok(horecon_set_sensitivities(c->plans[HARMONICS], c->c)))
        return 0;
    /* Toeplitz with off-resonance (automatic segments) */
    if (!ok(horecon_plan_create(&o, 16, 16, 1, 1, 400, &c->plans[TOEPLITZ])) ||
        !ok(horecon_set_grid_positions(c->plans[TOEPLITZ], fov, center)) ||
        !ok(horecon_set_trajectory(c->plans[TOEPLITZ], 2, c->d)) ||
        !ok(horecon_set_off_resonance(c->plans[TOEPLITZ], c->d, c->d)) ||
        !ok(horecon_set_toeplitz(c->plans[TOEPLITZ], 1, 0)))
        return 0;
    /* Cartesian: the mask's points are the samples */
    for (i = 0; i < 16 * 12; i++) count += c->u8[i] != 0;
    if (!ok(horecon_plan_create(&o, 16, 12, 1, 2, (int64_t)count, &c->plans[CARTESIAN])) ||
        !ok(horecon_set_grid_positions(c->plans[CARTESIAN], fov, center)) ||
        !ok(horecon_set_sensitivities(c->plans[CARTESIAN], c->c)) ||
        !ok(horecon_set_cartesian(c->plans[CARTESIAN], c->u8)))
        return 0;
    /* user basis, no positions */
    if (!ok(horecon_plan_create(&o, 10, 10, 1, 1, 100, &c->plans[USER_BASIS])) ||
        !ok(horecon_set_basis(c->plans[USER_BASIS], 3, c->d, c->d)))
        return 0;
    /* NUFFTs: type 1 on a 16x12 grid at 300 points, type 2 on 6x5x4 at 200 (ACCURATE, 1e-6) */
    {
        const int64_t two[2] = {16, 12}, three[3] = {6, 5, 4};
        if (!ok(horecon_nufft_create(&c->nuffts[NUFFT_TYPE1], 1, 2, two, 300, c->d, 1, 1e-6, 2, &o)) ||
            !ok(horecon_nufft_create(&c->nuffts[NUFFT_TYPE2], 2, 3, three, 200, c->d, -1, 1e-6, 1, &o)))
            return 0;
    }
    for (i = 0; i < PLANS; i++)
        if (!ok(horecon_set_progress(c->plans[i], deadline_fraction, NULL))) return 0;
    return ok(horecon_sim_set_progress(deadline_fraction, NULL));
}

/* Cancels every plan's calls at the deadline (horecon_cancel from another thread). */
static void *watchdog(void *arg)
{
    struct ctx *c = (struct ctx *)arg;
    int i;
    struct timespec pause;
    pause.tv_sec = 0;
    pause.tv_nsec = 2000000L;
    while (now() < g_deadline) nanosleep(&pause, NULL);
    for (i = 0; i < PLANS; i++) horecon_cancel(c->plans[i]);
    return NULL;
}

static int known(int s)
{
    return (s >= HORECON_OK && s <= HORECON_ERR_CANCELLED) || s == HORECON_ERR_INTERNAL;
}

/* The library still works after the call: a fresh plan, a forward, its message slot. */
static int library_works(struct ctx *c)
{
    horecon_plan *p = NULL;
    double k[4] = {10.0, -20.0, 5.0, 0.0};
    double fov[3] = {0.2, 0.2, 0.01}, center[3] = {0, 0, 0};
    horecon_c32 x[4] = {{1, 0}, {0, 1}, {1, 1}, {0, 0}}, d[2];
    (void)c;
    if (!ok(horecon_plan_create(NULL, 2, 2, 1, 1, 2, &p))) return 0;
    if (!ok(horecon_set_grid_positions(p, fov, center)) || !ok(horecon_set_trajectory(p, 2, k)) ||
        !ok(horecon_forward(p, x, d)) || !isfinite(d[0].re) || strcmp(horecon_last_error(), "") != 0)
        return 0;
    return ok(horecon_plan_destroy(p));
}

static void child(int which, uint64_t seed, int quiet)
{
    struct ctx c;
    struct rlimit limit;
    pthread_t dog;
    int status, dog_running = 0;
    memset(&c, 0, sizeof c);
    c.rng = seed;
    c.d = g_d;
    c.f = g_f;
    c.c = g_c;
    c.u8 = g_u8;
    c.z = g_z;
    limit.rlim_cur = limit.rlim_max = ADDRESS_SPACE;
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(SETUP_FAILED);
    alarm(HARD_LIMIT_SECONDS);
    if (!make_plans(&c)) {
        fprintf(stderr, "setup failed: %s\n", horecon_last_error());
        _exit(SETUP_FAILED);
    }
    g_deadline = now() + DEADLINE_SECONDS;
    /* destroy must not race the watchdog's horecon_cancel of the same plan */
    if (strcmp(table[which].name, "horecon_plan_destroy") != 0 && pthread_create(&dog, NULL, watchdog, &c) == 0)
        dog_running = 1;
    status = table[which].call(&c);
    if (!quiet) fprintf(stderr, "%s(%s) -> %d %s\n", table[which].name, c.log, status, horecon_last_error());
    if (table[which].returns_status) {
        if (!known(status)) _exit(BAD_STATUS);
        if (status != HORECON_OK && horecon_last_error()[0] == '\0') _exit(NO_MESSAGE);
    }
    if (dog_running) {
        g_deadline = 0; /* let the watchdog finish now */
        pthread_join(dog, NULL);
    }
    if (!library_works(&c)) _exit(LIBRARY_BROKEN);
    _exit(status);
}

/* ------------------------------------------------------------ the parent */
static void fill(uint64_t seed)
{
    size_t i;
    uint64_t s = seed;
    g_d = (double *)malloc(CAP * sizeof *g_d);
    g_f = (float *)malloc(CAP * sizeof *g_f);
    g_c = (horecon_c32 *)malloc(CAP * sizeof *g_c);
    g_u8 = (uint8_t *)malloc(CAP);
    g_z = (horecon_c64 *)malloc(CAP * sizeof *g_z);
    if (!g_d || !g_f || !g_c || !g_u8 || !g_z) {
        fprintf(stderr, "cannot allocate the argument arrays\n");
        exit(2);
    }
    for (i = 0; i < CAP; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        g_d[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        g_f[i] = (float)((s >> 40) & 0xffff) / 65536.0f;
        g_c[i].re = (float)g_d[i];
        g_c[i].im = 0.5f - g_f[i];
        g_u8[i] = (uint8_t)((s >> 33) % 3 == 0);
        g_z[i].re = g_d[i];
        g_z[i].im = (double)g_f[i];
    }
}

int main(int argc, char **argv)
{
    int cases;
    const char *only = argc > 2 ? argv[2] : NULL;
    const char *env = getenv("HORECON_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    long tried = 0, failures = 0, by_status[100] = {0};
    int e, k, s;
    double started = now();
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (e = 0; e < ENTRIES; e++) printf("%s\n", table[e].name);
        return 0;
    }
    cases = argc > 1 ? atoi(argv[1]) : 30;
    printf("adversarial: seed %llu (rerun with HORECON_TEST_SEED=%llu), %d functions x %d cases\n",
           (unsigned long long)seed, (unsigned long long)seed, ENTRIES, cases);
    fflush(stdout);
    fill(seed);
    for (e = 0; e < ENTRIES; e++) {
        if (only && strcmp(only, table[e].name) != 0) continue;
        for (k = 0; k < cases; k++) {
            uint64_t case_seed = seed ^ ((uint64_t)(e + 1) * 0x9E3779B97F4A7C15ull) ^ (uint64_t)k * 1000003ull;
            pid_t pid;
            int wstatus;
            fflush(stdout);
            fflush(stderr);
            pid = fork();
            if (pid < 0) {
                perror("fork");
                return 2;
            }
            if (pid == 0) child(e, case_seed, only == NULL);
            while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
            }
            tried++;
            if (WIFSIGNALED(wstatus) || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) >= 99) {
                const char *why = WIFSIGNALED(wstatus)
                                      ? (WTERMSIG(wstatus) == SIGALRM ? "hang (time limit)" : "killed by a signal")
                                  : WEXITSTATUS(wstatus) == HORECON_ERR_INTERNAL ? "HORECON_ERR_INTERNAL"
                                  : WEXITSTATUS(wstatus) == BAD_STATUS           ? "unknown status code"
                                  : WEXITSTATUS(wstatus) == NO_MESSAGE           ? "error without a message"
                                  : WEXITSTATUS(wstatus) == LIBRARY_BROKEN       ? "library broken after the call"
                                  : WEXITSTATUS(wstatus) == SETUP_FAILED         ? "set-up failed"
                                                                                  : "bad exit";
                failures++;
                printf("FAIL %s case %d: %s (signal %d, exit %d); replay: HORECON_TEST_SEED=%llu %s %d %s\n",
                       table[e].name, k, why, WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0,
                       WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, (unsigned long long)seed, argv[0],
                       cases, table[e].name);
            } else {
                by_status[WEXITSTATUS(wstatus)]++;
            }
        }
    }
    printf("statuses:");
    for (s = 0; s < 100; s++)
        if (by_status[s]) printf(" %s=%ld", horecon_status_string(s), by_status[s]);
    printf("\nadversarial: %ld inputs tried, %ld failures (%.1f s)\n", tried, failures, now() - started);
    printf("%ld passed, %ld failed\n", tried - failures, failures);
    return failures == 0 ? 0 : 1;
}
