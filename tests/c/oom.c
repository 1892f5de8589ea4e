/* HORECON_ERR_OUT_OF_MEMORY instead of an abort, whatever the allocation
 * that fails (C-API.md: no call ever aborts). Each call that allocates in
 * proportion to its inputs runs in a forked child under an address-space
 * limit (RLIMIT_AS), for a sweep of limits from "the test's own inputs
 * barely fit" up to "the call succeeds". Every child must end with
 * HORECON_OK or HORECON_ERR_OUT_OF_MEMORY: a signal (Rust's allocation
 * failure handler aborts) or any other status is a failure.
 *
 * Not run under valgrind (which replaces the allocator). Linux only. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Large side of the problems: 2^20 voxels or samples (arrays of 8-24 MB). */
#define BIG ((size_t)1 << 20)
#define INPUTS_DO_NOT_FIT 77

enum scenario {
    POSITIONS,
    GRID_POSITIONS,
    SOLID_HARMONICS,
    BASIS,
    TRAJECTORY,
    OFF_RESONANCE,
    SENSITIVITIES,
    FORWARD,
    ADJOINT,
    NORMAL,
    CG,
    NUFFT_CREATE,
    NUFFT_EXECUTE,
    SCENARIOS
};
static const char *const names[SCENARIOS] = {
    "horecon_set_positions", "horecon_set_grid_positions", "horecon_set_solid_harmonics",
    "horecon_set_basis",     "horecon_set_trajectory",     "horecon_set_off_resonance",
    "horecon_set_sensitivities", "horecon_forward",       "horecon_adjoint",
    "horecon_normal",        "horecon_cg",              "horecon_nufft_create",
    "horecon_nufft_execute",
};

static double *real_array(size_t n, double value)
{
    double *v = (double *)malloc(n * sizeof(double));
    size_t i;
    if (v == NULL) _exit(INPUTS_DO_NOT_FIT);
    for (i = 0; i < n; i++) v[i] = value * (1.0 + 1e-7 * (double)(i % 1000));
    return v;
}

static horecon_c32 *c32_array(size_t n)
{
    horecon_c32 *v = (horecon_c32 *)malloc(n * sizeof(horecon_c32));
    size_t i;
    if (v == NULL) _exit(INPUTS_DO_NOT_FIT);
    for (i = 0; i < n; i++) {
        v[i].re = 1.0f + 1e-3f * (float)(i % 100);
        v[i].im = -0.5f;
    }
    return v;
}

/* The NUFFT scenarios: create with BIG points on a 256² grid; execute a
 * type-2 plan of 1024² modes (a 32 MB fine grid) at 8 points. */
static int run_nufft(int which)
{
    const int64_t small[2] = {256, 256}, large[2] = {1024, 1024};
    int64_t m = which == NUFFT_CREATE ? (int64_t)BIG : 8;
    double *x = real_array(2 * (size_t)m, 1.0);
    horecon_options o;
    horecon_nufft *nufft = NULL;
    horecon_status s;
    horecon_default_options(&o);
    o.backend = HORECON_BACKEND_CPU;
    o.num_threads = 1;
    s = horecon_nufft_create(&nufft, 2, 2, which == NUFFT_CREATE ? small : large, m, x, 1, 1e-6, 1,
                             &o);
    if (s != HORECON_OK || which == NUFFT_CREATE) return s;
    {
        horecon_c32 *grid = c32_array((size_t)(large[0] * large[1])), *c = c32_array((size_t)m);
        return horecon_nufft_execute(nufft, c, grid);
    }
}

/* Runs one scenario in this (child) process; returns the call's status.
 * "Big voxels" scenarios use N = BIG, M = 8; "big samples" ones N = 8, M = BIG. */
static int run_scenario(int which)
{
    const double fov[3] = {0.2, 0.2, 0.01}, center[3] = {0.0, 0.0, 0.0};
    int big_samples = which == SOLID_HARMONICS || which == TRAJECTORY || which == ADJOINT || which == CG;
    size_t n = big_samples ? 8 : BIG, m = big_samples ? BIG : 8, l = 2;
    if (which == SOLID_HARMONICS) m = BIG / 4; /* 16 terms */
    horecon_options o;
    horecon_plan *plan = NULL;
    horecon_status s;
    double *k;
    if (which == NUFFT_CREATE || which == NUFFT_EXECUTE) return run_nufft(which);
    k = real_array(2 * m, 3.0);
    horecon_default_options(&o);
    o.backend = HORECON_BACKEND_CPU;
    o.num_threads = 1;
    s = horecon_plan_create(&o, (int64_t)n, 1, 1, (int64_t)l, (int64_t)m, &plan);
    if (s != HORECON_OK) return s;
    switch (which) {
    case POSITIONS:
        return horecon_set_positions(plan, real_array(3 * n, 0.01));
    case GRID_POSITIONS:
        return horecon_set_grid_positions(plan, fov, center);
    case SOLID_HARMONICS:
        s = horecon_set_grid_positions(plan, fov, center);
        return s != HORECON_OK ? s : horecon_set_solid_harmonics(plan, 16, real_array(16 * m, 2.0));
    case BASIS:
        return horecon_set_basis(plan, 2, real_array(2 * n, 0.5), k);
    case TRAJECTORY:
        s = horecon_set_grid_positions(plan, fov, center);
        return s != HORECON_OK ? s : horecon_set_trajectory(plan, 2, k);
    case OFF_RESONANCE:
        return horecon_set_off_resonance(plan, real_array(n, 100.0), real_array(m, 1e-3));
    case SENSITIVITIES:
        return horecon_set_sensitivities(plan, c32_array(n * l));
    default:
        break;
    }
    /* operators: a complete plan first */
    {
        horecon_c32 *image = c32_array(n), *data = c32_array(m * l), *out = c32_array(n);
        s = horecon_set_grid_positions(plan, fov, center);
        if (s == HORECON_OK) s = horecon_set_trajectory(plan, 2, k);
        if (s == HORECON_OK) s = horecon_set_off_resonance(plan, real_array(n, 100.0), real_array(m, 1e-3));
        if (s == HORECON_OK) s = horecon_set_sensitivities(plan, c32_array(n * l));
        if (s != HORECON_OK) return s;
        switch (which) {
        case FORWARD:
            return horecon_forward(plan, image, data);
        case ADJOINT:
            return horecon_adjoint(plan, data, image);
        case NORMAL:
            return horecon_normal(plan, image, out);
        default: {
            horecon_cg_options c;
            float *weights = (float *)malloc(m * sizeof(float));
            size_t j;
            if (weights == NULL) _exit(INPUTS_DO_NOT_FIT);
            for (j = 0; j < m; j++) weights[j] = 0.5f + (float)(j % 7);
            horecon_default_cg_options(&c);
            c.max_iterations = 2;
            c.sample_weights = weights;
            return horecon_cg(plan, data, &c, image, NULL);
        }
        }
    }
}

/* Runs `which` in a child limited to `megabytes` of address space.
 * Returns the exit status, or -signal. */
static int run_limited(int which, long megabytes)
{
    pid_t pid;
    int status;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) return -1000;
    if (pid == 0) {
        struct rlimit r;
        int s;
        r.rlim_cur = r.rlim_max = (rlim_t)megabytes << 20;
        if (setrlimit(RLIMIT_AS, &r) != 0) _exit(98);
        s = run_scenario(which);
        if (s != HORECON_OK && s != HORECON_ERR_OUT_OF_MEMORY) {
            fprintf(stderr, "  %s under %ld MB: status %d: %s\n", names[which], megabytes, (int)s,
                    horecon_last_error());
        }
        _exit(s >= 0 && s < 77 ? s : 99);
    }
    if (waitpid(pid, &status, 0) != pid) return -1001;
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* Classifies one run; returns 1 once the call succeeded. */
typedef struct tally {
    int runs, out_of_memory, aborted, other, succeeded;
    long first_fit, success;
} tally;

static void record(tally *t, int which, long mb, int r)
{
    t->runs++;
    if (r == INPUTS_DO_NOT_FIT) return;
    if (t->first_fit < 0) t->first_fit = mb;
    if (r == HORECON_OK) {
        if (!t->succeeded) t->success = mb;
        t->succeeded = 1;
    } else if (r == HORECON_ERR_OUT_OF_MEMORY) {
        t->out_of_memory++;
    } else if (r < 0) {
        t->aborted++;
        fprintf(stderr, "  %s under %ld MB: killed by signal %d\n", names[which], mb, -r);
    } else {
        t->other++;
    }
}

int main(void)
{
    int which;
    printf("oom: calls under RLIMIT_AS limits; each must return OK or OUT_OF_MEMORY\n");
    for (which = 0; which < SCENARIOS; which++) {
        tally t = {0, 0, 0, 0, 0, -1, -1};
        long mb, lo, hi, i;
        /* coarse: find where the inputs fit and where the call succeeds */
        for (mb = 8; mb <= 4096 && !t.succeeded; mb += 24) record(&t, which, mb, run_limited(which, mb));
        /* fine: 16 limits in between (allocation failures at every stage of the call) */
        lo = t.first_fit > 24 ? t.first_fit - 24 : 8;
        hi = t.success;
        for (i = 0; t.succeeded && i < 16; i++) {
            mb = lo + (hi - lo) * i / 16;
            record(&t, which, mb, run_limited(which, mb));
        }
        printf("oom: %-28s %2d limits: %2d OUT_OF_MEMORY, %d aborted, %d other; inputs fit at %ld MB, "
               "success at %ld MB\n",
               names[which], t.runs, t.out_of_memory, t.aborted, t.other, t.first_fit, t.success);
        CHECK(t.aborted == 0, "%s aborted %d times instead of returning OUT_OF_MEMORY", names[which],
              t.aborted);
        CHECK(t.other == 0, "%s returned %d times a status other than OK or OUT_OF_MEMORY", names[which],
              t.other);
        CHECK(t.succeeded, "%s never succeeded up to 4 GB", names[which]);
        CHECK(t.out_of_memory > 0, "%s: never OUT_OF_MEMORY between 'inputs fit' and 'success'",
              names[which]);
    }
    return check_summary("oom");
}
