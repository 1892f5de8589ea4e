/* Concurrency (design/C-API.md: operators take a const plan and may be
 * called from several threads at once):
 *
 *  - 8 pthreads apply one plan concurrently (forward, adjoint, normal and
 *    cg, in a different order per thread) and every result is bitwise
 *    identical to the single-thread result;
 *  - the same with a fresh plan whose operator is built lazily by the first
 *    of the racing calls;
 *  - horecon_last_error() is thread-local: failures in one thread neither
 *    show in another nor are cleared by another's success;
 *  - the cg progress callback runs on the thread that called horecon_cg
 *    (MATLAB's MEX API and other thread-bound code depend on it) and may
 *    itself call the operators of the same plan.
 *
 * Usage: threads [rounds [nx ny nsamples [pool_threads]]] (small values under
 * valgrind; pool_threads is the plan's num_threads, 3 by default, 0 = all
 * cores). HORECON_TEST_PRECISION=0|1|2 picks the precision mode (default 0). */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>

#include "check.h"

#define THREADS 8
#define COILS 3

static int64_t nx = 12, ny = 10, nsamples = 300;
static int rounds = 12;
static int pool_threads = 3;
static size_t n, m;

/* One problem's inputs, so that several identical plans can be built. */
static double fov[3], center[3], *harmonics, *omega, *times;
static horecon_c32 *sensitivities, *image, *data;
static horecon_options opts;

/* Single-thread references. */
static horecon_c32 *ref_forward, *ref_adjoint, *ref_normal, *ref_cg;
static horecon_cg_options cg_opts;

static horecon_plan *build_plan(void)
{
    horecon_plan *plan = NULL;
    horecon_status s = horecon_plan_create(&opts, nx, ny, 1, COILS, nsamples, &plan);
    if (s == HORECON_OK) s = horecon_set_grid_positions(plan, fov, center);
    if (s == HORECON_OK) s = horecon_set_solid_harmonics(plan, 9, harmonics);
    if (s == HORECON_OK) s = horecon_set_off_resonance(plan, omega, times);
    if (s == HORECON_OK) s = horecon_set_sensitivities(plan, sensitivities);
    CHECK(s == HORECON_OK, "build_plan: %d (%s)", (int)s, horecon_last_error());
    if (s != HORECON_OK) {
        horecon_plan_destroy(plan);
        exit(check_summary("threads"));
    }
    return plan;
}

static pthread_barrier_t barrier;

typedef struct worker {
    int id;
    const horecon_plan *plan;
    int calls;
    int mismatches;     /* results that differ from the reference */
    int bad_status;     /* unexpected status codes */
    int leaked_errors;  /* last error not as this thread left it */
    int callbacks;      /* progress callbacks seen */
    int foreign_callbacks; /* progress callbacks on another thread */
    pthread_t self;
} worker;

static int32_t worker_progress(void *user, int32_t iteration, double rel_residual)
{
    worker *w = (worker *)user;
    (void)iteration;
    (void)rel_residual;
    w->callbacks++;
    if (!pthread_equal(w->self, pthread_self())) w->foreign_callbacks++;
    return 0;
}

static void *work(void *arg)
{
    worker *w = (worker *)arg;
    horecon_c32 *d = new_c32(m * COILS), *x = new_c32(n);
    horecon_cg_info info;
    horecon_cg_options c = cg_opts;
    int r, k;
    w->self = pthread_self();
    c.progress = worker_progress;
    c.progress_user = w;
    pthread_barrier_wait(&barrier);
    for (r = 0; r < rounds; r++) {
        for (k = 0; k < 4; k++) {
            int op = (k + w->id + r) % 4;
            horecon_status s;
            switch (op) {
            case 0:
                poison_c32(d, m * COILS);
                s = horecon_forward(w->plan, image, d);
                if (s == HORECON_OK && !same_c32(d, ref_forward, m * COILS)) w->mismatches++;
                break;
            case 1:
                poison_c32(x, n);
                s = horecon_adjoint(w->plan, data, x);
                if (s == HORECON_OK && !same_c32(x, ref_adjoint, n)) w->mismatches++;
                break;
            case 2:
                poison_c32(x, n);
                s = horecon_normal(w->plan, image, x);
                if (s == HORECON_OK && !same_c32(x, ref_normal, n)) w->mismatches++;
                break;
            default:
                poison_c32(x, n);
                s = horecon_cg(w->plan, data, &c, x, &info);
                if (s == HORECON_OK && !same_c32(x, ref_cg, n)) w->mismatches++;
                break;
            }
            w->calls++;
            if (s != HORECON_OK) w->bad_status++;
            if (horecon_last_error()[0] != '\0') w->leaked_errors++;
        }
        /* a failure of this thread's own, with an argument named per thread */
        if (w->id % 2 == 0) {
            if (horecon_forward(w->plan, NULL, d) != HORECON_ERR_NULL_POINTER) w->bad_status++;
        } else {
            if (horecon_adjoint(w->plan, data, NULL) != HORECON_ERR_NULL_POINTER) w->bad_status++;
        }
        /* let the other threads run calls (successes and failures) meanwhile */
        sched_yield();
        {
            const char *e = horecon_last_error();
            const char *want = w->id % 2 == 0 ? "horecon_forward: image is NULL"
                                              : "horecon_adjoint: image is NULL";
            if (strcmp(e, want) != 0) w->leaked_errors++;
        }
    }
    free(d);
    free(x);
    return NULL;
}

typedef struct reentrant_state {
    const horecon_plan *plan;
    pthread_t caller;
    horecon_c32 *out;
    int calls, foreign, wrong;
} reentrant_state;

/* Applies the plan's normal operator from inside its own cg. */
static int32_t reentrant_progress(void *user, int32_t iteration, double rel_residual)
{
    reentrant_state *st = (reentrant_state *)user;
    (void)iteration;
    (void)rel_residual;
    st->calls++;
    if (!pthread_equal(st->caller, pthread_self())) st->foreign++;
    poison_c32(st->out, n);
    if (horecon_normal(st->plan, image, st->out) != HORECON_OK || !same_c32(st->out, ref_normal, n))
        st->wrong++;
    return 0;
}

/* Runs THREADS workers on `plan`; returns 1 if all results were identical. */
static void run_workers(const horecon_plan *plan, const char *what)
{
    pthread_t threads[THREADS];
    worker workers[THREADS];
    int i, started = 0, calls = 0, mismatches = 0, bad_status = 0, leaked = 0;
    int callbacks = 0, foreign = 0;
    CHECK(pthread_barrier_init(&barrier, NULL, THREADS) == 0, "pthread_barrier_init");
    for (i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].id = i;
        workers[i].plan = plan;
        if (pthread_create(&threads[i], NULL, work, &workers[i]) == 0) started++;
    }
    CHECK(started == THREADS, "started %d of %d threads", started, THREADS);
    if (started != THREADS) exit(check_summary("threads"));
    for (i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        calls += workers[i].calls;
        mismatches += workers[i].mismatches;
        bad_status += workers[i].bad_status;
        leaked += workers[i].leaked_errors;
        callbacks += workers[i].callbacks;
        foreign += workers[i].foreign_callbacks;
    }
    pthread_barrier_destroy(&barrier);
    printf("threads: %s: %d threads, %d calls, %d differing results, %d bad status, %d last-error mix-ups, "
           "%d of %d progress callbacks on a foreign thread\n",
           what, THREADS, calls, mismatches, bad_status, leaked, foreign, callbacks);
    CHECK(calls == THREADS * rounds * 4, "%s: %d calls", what, calls);
    CHECK(mismatches == 0, "%s: %d results differ from the single-thread ones", what, mismatches);
    CHECK(bad_status == 0, "%s: %d unexpected status codes", what, bad_status);
    CHECK(leaked == 0, "%s: %d times the last error was another thread's or was lost", what, leaked);
    CHECK(callbacks >= THREADS * rounds && foreign == 0,
          "%s: %d of %d progress callbacks ran on another thread than their horecon_cg call", what,
          foreign, callbacks);
}

int main(int argc, char **argv)
{
    horecon_plan *plan, *fresh;
    horecon_cg_info info;
    size_t j, b;
    if (argc >= 2) rounds = atoi(argv[1]);
    if (argc >= 5) {
        nx = atoll(argv[2]);
        ny = atoll(argv[3]);
        nsamples = atoll(argv[4]);
    }
    if (argc >= 6) pool_threads = atoi(argv[5]);
    if (rounds < 1 || nx < 1 || ny < 1 || nsamples < 1 || pool_threads < 0) {
        fprintf(stderr, "usage: threads [rounds [nx ny nsamples [pool_threads]]]\n");
        return 2;
    }
    rng_seed("threads");
    n = (size_t)(nx * ny);
    m = (size_t)nsamples;
    opts = test_options(pool_threads);
    if (getenv("HORECON_TEST_PRECISION") != NULL) opts.precision = atoi(getenv("HORECON_TEST_PRECISION"));
    fov[0] = 0.24;
    fov[1] = 0.2;
    fov[2] = 0.005;
    fill_real(center, 3, -0.01, 0.01);
    harmonics = new_real(9 * m);
    omega = new_real(n);
    times = new_real(m);
    for (j = 0; j < m; j++) {
        harmonics[j] = rng_nonzero(-1.0, 1.0);
        for (b = 1; b < 4; b++) harmonics[b * m + j] = rng_nonzero(-1.0, 1.0) * 3.14159 * (double)nx / fov[0];
        for (b = 4; b < 9; b++) harmonics[b * m + j] = rng_nonzero(-40.0, 40.0);
        times[j] = 2e-5 * (double)j;
    }
    fill_real(omega, n, -250.0, 250.0);
    sensitivities = new_c32(n * COILS);
    image = new_c32(n);
    data = new_c32(m * COILS);
    fill_c32(sensitivities, n * COILS);
    fill_c32(image, n);
    fill_c32(data, m * COILS);
    ref_forward = new_c32(m * COILS);
    ref_adjoint = new_c32(n);
    ref_normal = new_c32(n);
    ref_cg = new_c32(n);
    horecon_default_cg_options(&cg_opts);
    cg_opts.max_iterations = 4;
    cg_opts.regularizer = HORECON_REG_TIKHONOV;
    cg_opts.lambda = 1e-3;

    plan = build_plan();
    CHECK(horecon_forward(plan, image, ref_forward) == HORECON_OK, "forward: %s", horecon_last_error());
    CHECK(horecon_adjoint(plan, data, ref_adjoint) == HORECON_OK, "adjoint: %s", horecon_last_error());
    CHECK(horecon_normal(plan, image, ref_normal) == HORECON_OK, "normal: %s", horecon_last_error());
    CHECK(horecon_cg(plan, data, &cg_opts, ref_cg, &info) == HORECON_OK, "cg: %s", horecon_last_error());
    {
        /* the single-thread results are reproducible call after call */
        horecon_c32 *again = new_c32(n);
        CHECK(horecon_normal(plan, image, again) == HORECON_OK && same_c32(again, ref_normal, n),
              "normal is not reproducible on one thread");
        CHECK(horecon_cg(plan, data, &cg_opts, again, &info) == HORECON_OK && same_c32(again, ref_cg, n),
              "cg is not reproducible on one thread");
        free(again);
    }

    {
        /* the callback runs on this thread and may apply the same plan */
        reentrant_state st;
        horecon_cg_options c = cg_opts;
        horecon_c32 *x = new_c32(n);
        st.plan = plan;
        st.caller = pthread_self();
        st.calls = st.foreign = st.wrong = 0;
        st.out = new_c32(n);
        c.progress = reentrant_progress;
        c.progress_user = &st;
        CHECK(horecon_cg(plan, data, &c, x, &info) == HORECON_OK, "cg with a re-entrant callback: %s",
              horecon_last_error());
        CHECK(st.calls == info.iterations && st.calls > 0, "re-entrant callback: %d calls, %d iterations",
              st.calls, (int)info.iterations);
        CHECK(st.foreign == 0, "%d of %d progress callbacks ran on another thread", st.foreign, st.calls);
        CHECK(st.wrong == 0, "%d normal calls inside the callback were wrong", st.wrong);
        CHECK(same_c32(x, ref_cg, n), "cg with a re-entrant callback differs from the reference");
        free(st.out);
        free(x);
    }

    /* operator already built */
    run_workers(plan, "built plan");
    /* a fresh, identical plan: the racing first calls build the operator */
    fresh = build_plan();
    run_workers(fresh, "fresh plan");

    horecon_plan_destroy(fresh);
    horecon_plan_destroy(plan);
    free(harmonics);
    free(omega);
    free(times);
    free(sensitivities);
    free(image);
    free(data);
    free(ref_forward);
    free(ref_adjoint);
    free(ref_normal);
    free(ref_cg);
    return check_summary("threads");
}
