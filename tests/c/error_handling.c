/* Every status code of design/C-API.md from a call that must give it, in the
 * spirit of FINUFFT's test/error_handling.c:
 *
 *  - the exact code;
 *  - horecon_last_error() names the function and the argument;
 *  - outputs are left untouched on failure (buffers are poisoned first and
 *    checked afterwards), and a failing setter leaves the plan as it was;
 *  - in-place and overlapping calls equal out-of-place ones bitwise.
 *
 * Compiled as C99 and as C++11 from the committed header and run under
 * valgrind by tests/c/run.sh. Exit status 0 only if every check passed. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stddef.h>

#include "check.h"

/* Sizes of the small test plans: N = 24 voxels, L = 2 coils, M = 20 samples. */
#define NX 4
#define NY 3
#define NZ 2
#define NV (NX * NY * NZ)
#define NC 2
#define NS 20

/* EXPECT(call, status, part): the call returns `status`; on failure the
 * last error starts with the function's name and contains `part` (NULL:
 * anything); on success the last error is "". */
#define EXPECT(call, want, part) expect_status((call), (want), (part), #call, __FILE__, __LINE__)

static void expect_status(horecon_status got, horecon_status want, const char *part,
                          const char *call, const char *file, int line)
{
    /* read the message before any other horecon call can replace it */
    const char *message = horecon_last_error();
    char function[64];
    size_t len = strcspn(call, "(");
    if (len >= sizeof function) len = sizeof function - 1;
    memcpy(function, call, len);
    function[len] = '\0';
    check_report(got == want, file, line, "%s returned %d, expected %d; last error \"%s\"", call,
                 (int)got, (int)want, message ? message : "(NULL)");
    if (message == NULL) {
        check_report(0, file, line, "%s: horecon_last_error() returned NULL", call);
        return;
    }
    if (want == HORECON_OK) {
        check_report(message[0] == '\0', file, line,
                     "%s succeeded but the last error is \"%s\", expected \"\"", call, message);
        return;
    }
    check_report(strncmp(message, function, len) == 0, file, line,
                 "%s: last error \"%s\" does not start with the function name \"%s\"", call,
                 message, function);
    if (part != NULL) {
        check_report(contains(message, part), file, line,
                     "%s: last error \"%s\" does not contain \"%s\"", call, message, part);
    }
}

/* Valid inputs for the small plans. */
typedef struct inputs {
    double positions[3 * NV];
    double fov[3], center[3];
    double harmonics[9 * NS];
    double basis[5 * NV], basis_coefficients[5 * NS];
    double k[3 * NS];
    double omega[NV], times[NS];
    horecon_c32 sensitivities[NV * NC];
    horecon_c32 image[NV];
    horecon_c32 data[NS * NC];
    float weights[NS];
} inputs;

static inputs in;

static void make_inputs(void)
{
    size_t j;
    fill_real(in.positions, 3 * NV, -0.1, 0.1);
    in.fov[0] = 0.2;
    in.fov[1] = 0.22;
    in.fov[2] = 0.05;
    fill_real(in.center, 3, -0.01, 0.01);
    fill_real(in.harmonics, 9 * NS, -60.0, 60.0);
    fill_real(in.basis, 5 * NV, -1.0, 1.0);
    fill_real(in.basis_coefficients, 5 * NS, -10.0, 10.0);
    fill_real(in.k, 3 * NS, -60.0, 60.0);
    fill_real(in.omega, NV, -200.0, 200.0);
    for (j = 0; j < NS; j++) in.times[j] = 1e-5 * (double)(j + 1);
    fill_c32(in.sensitivities, NV * NC);
    fill_c32(in.image, NV);
    fill_c32(in.data, NS * NC);
    for (j = 0; j < NS; j++) in.weights[j] = (float)rng_uniform(0.5, 2.0);
}

static horecon_options cpu;

/* A plan with positions, solid harmonics, off-resonance and sensitivities. */
static horecon_plan *full_plan(int64_t ncoils)
{
    horecon_plan *plan = NULL;
    horecon_status s = horecon_plan_create(&cpu, NX, NY, NZ, ncoils, NS, &plan);
    if (s == HORECON_OK) s = horecon_set_positions(plan, in.positions);
    if (s == HORECON_OK) s = horecon_set_solid_harmonics(plan, 9, in.harmonics);
    if (s == HORECON_OK) s = horecon_set_off_resonance(plan, in.omega, in.times);
    if (s == HORECON_OK && ncoils > 1) s = horecon_set_sensitivities(plan, in.sensitivities);
    CHECK(s == HORECON_OK, "full_plan: status %d (%s)", (int)s, horecon_last_error());
    if (s != HORECON_OK) {
        horecon_plan_destroy(plan);
        exit(check_summary("error_handling"));
    }
    return plan;
}

/* ---------------------------------------------------------------- info */

static const horecon_status all_codes[] = {
    HORECON_OK,
    HORECON_ERR_NULL_POINTER,
    HORECON_ERR_INVALID_ARGUMENT,
    HORECON_ERR_SIZE_MISMATCH,
    HORECON_ERR_NOT_FINITE,
    HORECON_ERR_INCOMPLETE_PLAN,
    HORECON_ERR_OUT_OF_MEMORY,
    HORECON_ERR_BACKEND_UNAVAILABLE,
    HORECON_ERR_BACKEND,
    HORECON_ERR_CANCELLED,
    HORECON_ERR_INTERNAL,
};
static const char *const all_names[] = {
    "HORECON_OK",
    "HORECON_ERR_NULL_POINTER",
    "HORECON_ERR_INVALID_ARGUMENT",
    "HORECON_ERR_SIZE_MISMATCH",
    "HORECON_ERR_NOT_FINITE",
    "HORECON_ERR_INCOMPLETE_PLAN",
    "HORECON_ERR_OUT_OF_MEMORY",
    "HORECON_ERR_BACKEND_UNAVAILABLE",
    "HORECON_ERR_BACKEND",
    "HORECON_ERR_CANCELLED",
    "HORECON_ERR_INTERNAL",
};
#define NCODES (sizeof all_codes / sizeof all_codes[0])

static void test_codes_and_strings(void)
{
    /* the fixed values of C-API.md (never renumbered) */
    static const int values[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 99};
    static const horecon_status unknown[] = {-1, 10, 11, 98, 100, INT_MAX, INT_MIN};
    const char *text[NCODES + sizeof unknown / sizeof unknown[0]];
    size_t i, j, count = 0;
    for (i = 0; i < NCODES; i++) {
        const char *s = horecon_status_string(all_codes[i]);
        CHECK(all_codes[i] == values[i], "%s is %d, expected %d", all_names[i], (int)all_codes[i],
              values[i]);
        CHECK(s != NULL && s[0] != '\0', "horecon_status_string(%d) is empty", (int)all_codes[i]);
        /* "HORECON_ERR_BACKEND" is a prefix of "..._UNAVAILABLE": compare up to the ':' */
        CHECK(s != NULL && strncmp(s, all_names[i], strlen(all_names[i])) == 0 &&
                  (s[strlen(all_names[i])] == ':' || s[strlen(all_names[i])] == '\0'),
              "horecon_status_string(%d) = \"%s\" does not name %s", (int)all_codes[i],
              s ? s : "(NULL)", all_names[i]);
        text[count++] = s;
    }
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = horecon_status_string(unknown[i]);
        CHECK(s != NULL && s[0] != '\0', "horecon_status_string(%d) (unknown) is empty",
              (int)unknown[i]);
        text[count++] = s;
    }
    /* every known code distinct from every other and from the unknown text */
    for (i = 0; i < NCODES; i++) {
        for (j = 0; j < count; j++) {
            if (i == j || text[i] == NULL || text[j] == NULL) continue;
            CHECK(strcmp(text[i], text[j]) != 0, "status strings %lu and %lu are equal: \"%s\"",
                  (unsigned long)i, (unsigned long)j, text[i]);
        }
    }
}

static void test_version_and_defaults(void)
{
    char expected[64];
    horecon_options o;
    horecon_cg_options c;
    int32_t count = -7;
    const char *v = horecon_version();
    CHECK(v != NULL && strcmp(v, HORECON_VERSION_STRING) == 0, "horecon_version() = \"%s\", header says \"%s\"",
          v ? v : "(NULL)", HORECON_VERSION_STRING);
    snprintf(expected, sizeof expected, "%d.%d.%d", HORECON_VERSION_MAJOR, HORECON_VERSION_MINOR,
             HORECON_VERSION_PATCH);
    CHECK(strcmp(expected, HORECON_VERSION_STRING) == 0, "version macros %s vs string %s", expected,
          HORECON_VERSION_STRING);

    /* NULL: nothing happens (and nothing crashes) */
    horecon_default_options(NULL);
    (horecon_default_cg_options)(NULL); /* the function itself, not the header's sized macro */
    CHECK(horecon_init_cg_options(NULL, sizeof(horecon_cg_options)) == HORECON_ERR_NULL_POINTER,
          "init_cg_options(NULL)");
    CHECK(1, "default options with NULL");
    {
        /* horecon_init_cg_options writes exactly the caller's struct: an older
         * header's size gets its own bytes and nothing beyond (the rest stays
         * 0x5a); a size no header ever had is refused and nothing written */
        unsigned char raw[sizeof(horecon_cg_options)];
        size_t older = offsetof(horecon_cg_options, neighbours), i;
        int untouched = 1;
        memset(raw, 0x5a, sizeof raw);
        CHECK(horecon_init_cg_options((horecon_cg_options *)raw, older) == HORECON_OK,
              "init_cg_options with the size before `neighbours`: %s", horecon_last_error());
        for (i = older; i < sizeof raw; i++)
            untouched &= raw[i] == 0x5a;
        CHECK(untouched, "init_cg_options wrote past an older struct's %lu bytes", (unsigned long)older);
        CHECK(((horecon_cg_options *)raw)->struct_size == older && ((horecon_cg_options *)raw)->max_iterations == 50,
              "init_cg_options older struct: struct_size %u", (unsigned)((horecon_cg_options *)raw)->struct_size);
        memset(raw, 0x5a, sizeof raw);
        EXPECT(horecon_init_cg_options((horecon_cg_options *)raw, 13), HORECON_ERR_INVALID_ARGUMENT, "size");
        for (i = 0, untouched = 1; i < sizeof raw; i++)
            untouched &= raw[i] == 0x5a;
        CHECK(untouched, "init_cg_options wrote after refusing the size");
    }

    memset(&o, 0x5a, sizeof o);
    horecon_default_options(&o);
    CHECK(o.struct_size == sizeof(horecon_options), "options struct_size %u, sizeof %lu",
          (unsigned)o.struct_size, (unsigned long)sizeof(horecon_options));
    CHECK(o.backend == HORECON_BACKEND_AUTO && o.device == 0 && o.num_devices == 1 &&
              o.num_threads == 0 && o.precision == HORECON_PRECISION_ACCURATE && o.verbosity == 0,
          "default options: backend %d device %d num_devices %d num_threads %d precision %d verbosity %d",
          (int)o.backend, (int)o.device, (int)o.num_devices, (int)o.num_threads, (int)o.precision,
          (int)o.verbosity);

    memset(&c, 0x5a, sizeof c);
    horecon_default_cg_options(&c);
    CHECK(c.struct_size == sizeof(horecon_cg_options), "cg options struct_size %u, sizeof %lu",
          (unsigned)c.struct_size, (unsigned long)sizeof(horecon_cg_options));
    CHECK(c.max_iterations == 50 && c.tolerance == 1e-6 && c.regularizer == HORECON_REG_NONE &&
              c.lambda == 0.0 && c.sample_weights == NULL && c.fd_weights == NULL &&
              c.warm_start == 0 && c.progress == NULL && c.progress_user == NULL,
          "default cg options: max_iterations %d tolerance %g regularizer %d lambda %g",
          (int)c.max_iterations, c.tolerance, (int)c.regularizer, c.lambda);

    EXPECT(horecon_cuda_device_count(&count), HORECON_OK, NULL);
    CHECK(count >= 0, "horecon_cuda_device_count gave %d", (int)count);
    EXPECT(horecon_plan_destroy(NULL), HORECON_OK, NULL);
}

/* -------------------------------------------------------- NULL_POINTER */

static void test_null_pointers(void)
{
    horecon_plan *plan = full_plan(NC);
    horecon_plan *one = full_plan(1);
    horecon_c32 image[NV], data[NS * NC];
    horecon_cg_info info;
    int32_t backend = -5, count = -5;
    const int E = HORECON_ERR_NULL_POINTER;

    EXPECT(horecon_plan_create(&cpu, NX, NY, NZ, NC, NS, NULL), E, "plan_out is NULL");

    EXPECT(horecon_set_positions(NULL, in.positions), E, "plan is NULL");
    EXPECT(horecon_set_positions(plan, NULL), E, "positions is NULL");
    EXPECT(horecon_set_grid_positions(NULL, in.fov, in.center), E, "plan is NULL");
    EXPECT(horecon_set_grid_positions(plan, NULL, in.center), E, "fov is NULL");
    EXPECT(horecon_set_grid_positions(plan, in.fov, NULL), E, "center is NULL");
    EXPECT(horecon_set_solid_harmonics(NULL, 9, in.harmonics), E, "plan is NULL");
    EXPECT(horecon_set_solid_harmonics(plan, 9, NULL), E, "coefficients is NULL");
    EXPECT(horecon_set_basis(NULL, 5, in.basis, in.basis_coefficients), E, "plan is NULL");
    EXPECT(horecon_set_basis(plan, 5, NULL, in.basis_coefficients), E, "basis is NULL");
    EXPECT(horecon_set_basis(plan, 5, in.basis, NULL), E, "coefficients is NULL");
    EXPECT(horecon_set_trajectory(NULL, 3, in.k), E, "plan is NULL");
    EXPECT(horecon_set_trajectory(plan, 3, NULL), E, "k is NULL");
    EXPECT(horecon_set_off_resonance(NULL, in.omega, in.times), E, "plan is NULL");
    /* omega NULL clears the off-resonance; times NULL with omega given is an error */
    EXPECT(horecon_set_off_resonance(plan, in.omega, NULL), E, "times is NULL");
    EXPECT(horecon_set_sensitivities(NULL, in.sensitivities), E, "plan is NULL");

    poison_c32(data, NS * NC);
    EXPECT(horecon_forward(NULL, in.image, data), E, "plan is NULL");
    EXPECT(horecon_forward(plan, NULL, data), E, "image is NULL");
    CHECK(is_poisoned_c32(data, NS * NC), "forward wrote data on failure");
    EXPECT(horecon_forward(plan, in.image, NULL), E, "data is NULL");

    poison_c32(image, NV);
    EXPECT(horecon_adjoint(NULL, in.data, image), E, "plan is NULL");
    EXPECT(horecon_adjoint(plan, NULL, image), E, "data is NULL");
    CHECK(is_poisoned_c32(image, NV), "adjoint wrote image on failure");
    EXPECT(horecon_adjoint(plan, in.data, NULL), E, "image is NULL");

    EXPECT(horecon_normal(NULL, in.image, image), E, "plan is NULL");
    EXPECT(horecon_normal(plan, NULL, image), E, "image is NULL");
    CHECK(is_poisoned_c32(image, NV), "normal wrote out on failure");
    EXPECT(horecon_normal(plan, in.image, NULL), E, "out is NULL");

    memset(&info, 0x5a, sizeof info);
    EXPECT(horecon_cg(NULL, in.data, NULL, image, &info), E, "plan is NULL");
    EXPECT(horecon_cg(plan, NULL, NULL, image, &info), E, "data is NULL");
    CHECK(is_poisoned_c32(image, NV), "cg wrote image on failure");
    EXPECT(horecon_cg(plan, in.data, NULL, NULL, &info), E, "image is NULL");
    {
        horecon_cg_info untouched;
        memset(&untouched, 0x5a, sizeof untouched);
        CHECK(memcmp(&info, &untouched, sizeof info) == 0, "cg wrote info on failure");
    }

    {
        horecon_c32 q[8 * NV]; /* (2nx)(2ny)(2nz) */
        int64_t qdims[3] = {-5, -5, -5};
        uint8_t mask[NV];
        memset(mask, 1, sizeof mask);
        EXPECT(horecon_set_cartesian(NULL, mask), E, "plan is NULL");
        EXPECT(horecon_set_cartesian(plan, NULL), E, "mask is NULL");
        EXPECT(horecon_fhd(NULL, in.data, NULL, image), E, "plan is NULL");
        EXPECT(horecon_fhd(plan, NULL, NULL, image), E, "data is NULL");
        CHECK(is_poisoned_c32(image, NV), "fhd wrote out on failure");
        EXPECT(horecon_fhd(plan, in.data, NULL, NULL), E, "out is NULL");
        poison_c32(q, 8 * NV);
        EXPECT(horecon_q(NULL, NULL, q), E, "plan is NULL");
        EXPECT(horecon_q(plan, NULL, NULL), E, "q is NULL");
        EXPECT(horecon_q_dims(NULL, qdims), E, "plan is NULL");
        EXPECT(horecon_set_toeplitz(NULL, 1, 0), E, "plan is NULL");
        EXPECT(horecon_q_dims(plan, NULL), E, "dims is NULL");
        CHECK(qdims[0] == -5, "q_dims wrote its output on failure");
        EXPECT(horecon_q_dims(plan, qdims), HORECON_OK, NULL);
        CHECK(qdims[0] == 2 * NX && qdims[1] == 2 * NY && qdims[2] == 2 * NZ,
              "q_dims gave %lld %lld %lld", (long long)qdims[0], (long long)qdims[1],
              (long long)qdims[2]);
        /* a multi-coil plan is no Stone plan: refused, nothing written */
        EXPECT(horecon_q(plan, NULL, q), HORECON_ERR_INVALID_ARGUMENT, "single-coil");
        CHECK(is_poisoned_c32(q, 8 * NV), "q wrote q on failure");
    }

    {
        float dcf[NS];
        for (int j = 0; j < NS; j++) dcf[j] = 1.0f;
        dcf[NS / 2] = -1.0f;
        EXPECT(horecon_gridding(NULL, in.data, NULL, image), E, "plan is NULL");
        EXPECT(horecon_gridding(plan, NULL, NULL, image), E, "data is NULL");
        EXPECT(horecon_gridding(plan, in.data, NULL, NULL), E, "image is NULL");
        EXPECT(horecon_gridding(plan, in.data, dcf, image), HORECON_ERR_INVALID_ARGUMENT, "negative");
        CHECK(is_poisoned_c32(image, NV), "gridding wrote image on failure");
    }

    {
        /* the fast path (issue 17): every argument of its two functions */
        horecon_approximation_info ai, untouched;
        memset(&ai, 0x5a, sizeof ai);
        memset(&untouched, 0x5a, sizeof untouched);
        EXPECT(horecon_set_approximation(NULL, 1e-3), E, "plan is NULL");
        EXPECT(horecon_set_approximation(plan, -1e-3), HORECON_ERR_INVALID_ARGUMENT, "tolerance");
        EXPECT(horecon_set_approximation(plan, 0.0 / 0.0), HORECON_ERR_INVALID_ARGUMENT, "tolerance");
        EXPECT(horecon_set_approximation(plan, 1.0 / 0.0), HORECON_ERR_INVALID_ARGUMENT, "tolerance");
        EXPECT(horecon_get_approximation_info(NULL, &ai), E, "plan is NULL");
        EXPECT(horecon_get_approximation_info(plan, NULL), E, "info is NULL");
        ai.struct_size = 3;
        EXPECT(horecon_get_approximation_info(plan, &ai), HORECON_ERR_INVALID_ARGUMENT, "struct_size");
        untouched.struct_size = 3;
        CHECK(memcmp(&ai, &untouched, sizeof ai) == 0, "get_approximation_info wrote info on failure");
        ai.struct_size = sizeof ai;
        EXPECT(horecon_get_approximation_info(plan, &ai), HORECON_OK, NULL);
        CHECK(ai.active == 0 && ai.rank == 0 && ai.reason[0] != '\0', "tolerance 0 is the exact path");
    }

    EXPECT(horecon_cuda_device_count(NULL), E, "count is NULL");
    EXPECT(horecon_plan_backend(NULL, &backend), E, "plan is NULL");
    EXPECT(horecon_plan_backend(plan, NULL), E, "backend is NULL");
    CHECK(backend == -5, "plan_backend wrote its output on failure");
    {
        int32_t terms = -5;
        EXPECT(horecon_plan_phase_terms(NULL, &terms), E, "plan is NULL");
        EXPECT(horecon_plan_phase_terms(plan, NULL), E, "terms is NULL");
        CHECK(terms == -5, "plan_phase_terms wrote its output on failure");
        EXPECT(horecon_plan_phase_terms(plan, &terms), HORECON_OK, NULL);
        CHECK(terms >= 0, "plan_phase_terms: B of the phase model, 0 when none");
    }

    /* the optional pointers: NULL is fine */
    EXPECT(horecon_cg(one, in.data, NULL, image, NULL), HORECON_OK, NULL);
    EXPECT(horecon_cuda_device_count(&count), HORECON_OK, NULL);
    EXPECT(horecon_set_sensitivities(one, NULL), HORECON_OK, NULL);
    EXPECT(horecon_set_off_resonance(one, NULL, NULL), HORECON_OK, NULL);
    EXPECT(horecon_set_off_resonance(one, NULL, in.times), HORECON_OK, NULL);
    {
        horecon_plan *defaults = NULL;
        EXPECT(horecon_plan_create(NULL, NX, NY, NZ, 1, NS, &defaults), HORECON_OK, NULL);
        CHECK(defaults != NULL, "plan_create(NULL options) gave no plan");
        EXPECT(horecon_plan_backend(defaults, &backend), HORECON_OK, NULL);
        CHECK(backend == HORECON_BACKEND_CPU || backend == HORECON_BACKEND_CUDA,
              "plan_backend of an AUTO plan gave %d (never AUTO)", (int)backend);
        if (count == 0) {
            CHECK(backend == HORECON_BACKEND_CPU, "AUTO without GPU gave backend %d", (int)backend);
        }
        EXPECT(horecon_plan_destroy(defaults), HORECON_OK, NULL);
    }
    horecon_plan_destroy(one);
    horecon_plan_destroy(plan);
}

/* ---------------------------------------------------- INVALID_ARGUMENT */

/* plan_create must fail with `want`, naming `part`, and leave *plan_out as it was. */
static void expect_create_fails(const horecon_options *o, int64_t nx, int64_t ny, int64_t nz,
                                int64_t nc, int64_t ns, horecon_status want, const char *part,
                                int line)
{
    static int sentinel;
    horecon_plan *plan = (horecon_plan *)(void *)&sentinel;
    horecon_status s = horecon_plan_create(o, nx, ny, nz, nc, ns, &plan);
    expect_status(s, want, part, "horecon_plan_create(...)", __FILE__, line);
    CHECK(plan == (horecon_plan *)(void *)&sentinel, "line %d: plan_create wrote *plan_out on failure",
          line);
    if (s == HORECON_OK) horecon_plan_destroy(plan);
}

static int32_t stop_at_first(void *user, int32_t iteration, double rel_residual)
{
    (void)user;
    (void)iteration;
    (void)rel_residual;
    return 1;
}

static void test_invalid_arguments(void)
{
    const int E = HORECON_ERR_INVALID_ARGUMENT;
    const int64_t big = (int64_t)1 << 40;
    horecon_options o;
    horecon_plan *plan = full_plan(NC);
    horecon_c32 image[NV];
    horecon_cg_options c;
    horecon_cg_info info;
    float weights[NS];
    size_t i;

    /* sizes */
    expect_create_fails(&cpu, 0, NY, NZ, NC, NS, E, "nx", __LINE__);
    expect_create_fails(&cpu, NX, -1, NZ, NC, NS, E, "ny", __LINE__);
    expect_create_fails(&cpu, NX, NY, 0, NC, NS, E, "nz", __LINE__);
    expect_create_fails(&cpu, NX, NY, NZ, 0, NS, E, "ncoils", __LINE__);
    expect_create_fails(&cpu, NX, NY, NZ, NC, -20, E, "nsamples", __LINE__);
    expect_create_fails(&cpu, INT64_MIN, NY, NZ, NC, NS, E, "nx", __LINE__);
    expect_create_fails(&cpu, INT64_MAX, NY, NZ, NC, NS, E, "nx", __LINE__);
    expect_create_fails(&cpu, big, big, big, 1, 1, E, "nx*ny*nz", __LINE__);
    expect_create_fails(&cpu, NX, NY, NZ, big, big, E, "nsamples*ncoils", __LINE__);

    /* options: struct_size and every enum / count field */
    o = cpu;
    o.struct_size = 0;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "struct_size", __LINE__);
    o.struct_size = (uint32_t)sizeof(horecon_options) + 8;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "struct_size", __LINE__);
    o = cpu;
    o.backend = 3;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "backend", __LINE__);
    o.backend = -1;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "backend", __LINE__);
    o = cpu;
    o.precision = 3;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "precision", __LINE__);
    o.precision = -1;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "precision", __LINE__);
    o = cpu;
    o.num_threads = -2;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "num_threads", __LINE__);
    o = cpu;
    o.device = -1;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "device", __LINE__);
    o = cpu;
    o.num_devices = 0;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "num_devices", __LINE__);
    o = cpu;
    o.verbosity = 3;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "verbosity", __LINE__);
    o.verbosity = -1;
    expect_create_fails(&o, NX, NY, NZ, NC, NS, E, "verbosity", __LINE__);
    {
        /* a caller built against a smaller (older) options struct: only
         * struct_size may be read (valgrind sees any read past it) */
        uint32_t *older = (uint32_t *)xmalloc(sizeof(uint32_t));
        horecon_plan *p = NULL;
        *older = (uint32_t)sizeof(uint32_t);
        EXPECT(horecon_plan_create((const horecon_options *)(void *)older, NX, NY, NZ, 1, NS, &p), E,
               "struct_size");
        CHECK(p == NULL, "plan_create with a short options struct wrote *plan_out");
        free(older);
    }

    /* model setters */
    EXPECT(horecon_set_solid_harmonics(plan, 0, in.harmonics), E, "nterms");
    EXPECT(horecon_set_solid_harmonics(plan, 2, in.harmonics), E, "nterms");
    EXPECT(horecon_set_solid_harmonics(plan, 5, in.harmonics), E, "nterms");
    EXPECT(horecon_set_solid_harmonics(plan, 17, in.harmonics), E, "nterms");
    EXPECT(horecon_set_solid_harmonics(plan, -4, in.harmonics), E, "nterms");
    EXPECT(horecon_set_basis(plan, 0, in.basis, in.basis_coefficients), E, "nterms");
    EXPECT(horecon_set_basis(plan, -5, in.basis, in.basis_coefficients), E, "nterms");
    EXPECT(horecon_set_basis(plan, 4097, in.basis, in.basis_coefficients), E, "nterms");
    EXPECT(horecon_set_trajectory(plan, 0, in.k), E, "ndims");
    EXPECT(horecon_set_trajectory(plan, 4, in.k), E, "ndims");
    EXPECT(horecon_set_trajectory(plan, -1, in.k), E, "ndims");
    {
        double fov[3];
        memcpy(fov, in.fov, sizeof fov);
        fov[1] = 0.0;
        EXPECT(horecon_set_grid_positions(plan, fov, in.center), E, "fov[1]");
        fov[1] = in.fov[1];
        fov[2] = -0.2;
        EXPECT(horecon_set_grid_positions(plan, fov, in.center), E, "fov[2]");
    }
    /* NULL sensitivities mean S = 1, which needs a single coil */
    EXPECT(horecon_set_sensitivities(plan, NULL), E, "sensitivities");

    /* CG options; the image must stay untouched after each */
    poison_c32(image, NV);
    memset(&info, 0x5a, sizeof info);
    horecon_default_cg_options(&c);
    c.struct_size = (uint32_t)sizeof(horecon_cg_options) - 4;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "struct_size");
    c.struct_size = (uint32_t)sizeof(horecon_cg_options) + 8;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "struct_size");
    c.struct_size = 0;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "struct_size");
    horecon_default_cg_options(&c);
    c.regularizer = 5;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "regularizer");
    c.regularizer = -1;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "regularizer");
    /* the options of finite differences, TV and Laplace */
    {
        float fd_weights[3 * NV]; /* N x ndims, ndims = 3 grid axes */
        for (i = 0; i < 3 * NV; i++)
            fd_weights[i] = 1.0f;
        fd_weights[7] = -0.5f;
        horecon_default_cg_options(&c);
        c.regularizer = HORECON_REG_FINITE_DIFFERENCE;
        c.lambda = 0.1;
        c.fd_weights = fd_weights;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "fd_weights[7]");
        fd_weights[7] = 1.0f;
        c.regularizer = HORECON_REG_TIKHONOV; /* fd_weights only with the FD priors */
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "fd_weights");
        horecon_default_cg_options(&c);
        c.regularizer = HORECON_REG_TOTAL_VARIATION;
        c.lambda = 0.1;
        c.reweightings = 0;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "reweightings");
        c.reweightings = -3;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "reweightings");
        c.reweightings = 2;
        c.epsilon = 0.0;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "epsilon");
        c.epsilon = NAN;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "epsilon");
        horecon_default_cg_options(&c);
        c.regularizer = HORECON_REG_LAPLACE;
        c.lambda = 0.1;
        c.sigma = 0.0;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "sigma");
        c.sigma = -INFINITY;
        EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "sigma");
    }
    horecon_default_cg_options(&c);
    CHECK(c.neighbours == 6, "default neighbours %d", (int)c.neighbours);
    c.regularizer = HORECON_REG_FINITE_DIFFERENCE;
    c.lambda = 0.1;
    c.neighbours = 8;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "neighbours");
    c.neighbours = -26;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "neighbours");
    horecon_default_cg_options(&c);
    c.max_iterations = -1;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "max_iterations");
    horecon_default_cg_options(&c);
    c.tolerance = -1e-6;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "tolerance");
    c.tolerance = NAN;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "tolerance");
    c.tolerance = INFINITY;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "tolerance");
    horecon_default_cg_options(&c);
    c.regularizer = HORECON_REG_TIKHONOV;
    c.lambda = -0.5;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "lambda");
    c.lambda = NAN;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "lambda");
    c.lambda = INFINITY;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "lambda");
    horecon_default_cg_options(&c);
    memcpy(weights, in.weights, sizeof weights);
    weights[NS / 2] = -1.0f;
    c.sample_weights = weights;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "sample_weights");
    CHECK(is_poisoned_c32(image, NV), "cg wrote the image after an invalid argument");
    {
        horecon_cg_info untouched;
        memset(&untouched, 0x5a, sizeof untouched);
        CHECK(memcmp(&info, &untouched, sizeof info) == 0, "cg wrote info after an invalid argument");
    }
    {
        /* a smaller (older) cg options struct that ends before `progress`:
         * it must be refused without reading past its end (valgrind checks) */
        size_t bytes = offsetof(horecon_cg_options, progress);
        horecon_cg_options *older = (horecon_cg_options *)xmalloc(bytes);
        horecon_cg_options full;
        horecon_default_cg_options(&full);
        full.progress = stop_at_first;
        full.struct_size = (uint32_t)bytes;
        memcpy(older, &full, bytes);
        EXPECT(horecon_cg(plan, in.data, older, image, &info), E, "struct_size");
        CHECK(is_poisoned_c32(image, NV), "cg wrote the image with a short options struct");
        free(older);
    }
    {
        /* the cg options struct as it was before `neighbours` was added at its
         * end: accepted, nothing past it read (valgrind checks), neighbours = 6 */
        size_t bytes = offsetof(horecon_cg_options, neighbours);
        horecon_cg_options *older = (horecon_cg_options *)xmalloc(bytes);
        horecon_cg_options full;
        horecon_c32 solution[NV];
        horecon_default_cg_options(&full);
        full.struct_size = (uint32_t)bytes;
        full.regularizer = HORECON_REG_TOTAL_VARIATION;
        full.lambda = 0.1;
        full.max_iterations = 3;
        full.reweightings = 2;
        memcpy(older, &full, bytes);
        CHECK(horecon_cg(plan, in.data, older, solution, NULL) == HORECON_OK,
              "cg with the struct before `neighbours`: %s", horecon_last_error());
        free(older);
    }
    {
        /* the structs as they were before `preconditioner` (options, padded to
         * 8 bytes) and `stop_reason` (info) were added at their ends: accepted,
         * nothing read past the options or written past the info (valgrind) */
        size_t bytes = (offsetof(horecon_cg_options, preconditioner) + 7) & ~(size_t)7;
        size_t info_bytes = offsetof(horecon_cg_info, stop_reason);
        horecon_cg_options *older = (horecon_cg_options *)xmalloc(bytes);
        horecon_cg_info *older_info = (horecon_cg_info *)xmalloc(info_bytes);
        horecon_cg_options full;
        horecon_c32 solution[NV];
        horecon_default_cg_options(&full);
        full.struct_size = (uint32_t)bytes;
        full.max_iterations = 3;
        memcpy(older, &full, bytes);
        CHECK(horecon_cg(plan, in.data, older, solution, older_info) == HORECON_OK,
              "cg with the struct before `preconditioner`: %s", horecon_last_error());
        CHECK(older_info->iterations <= 3, "older info: %d iterations", (int)older_info->iterations);
        free(older);
        free(older_info);
    }
    horecon_plan_destroy(plan);
}

/* --------------------------------------------------------- SIZE_MISMATCH
 * HORECON_ERR_SIZE_MISMATCH cannot be reached from C: every array length is
 * implied by the plan (N, M, L, nterms, ndims), so the C API has no size
 * argument that could disagree. The Rust API (Plan::forward & co. with
 * slices) returns it; the Rust tests cover it. Here only its number and
 * string are checked (test_codes_and_strings). */

/* ---------------------------------------------------------- NOT_FINITE */

/* NaN, +Inf, -Inf */
#define NBAD 3
static double bad(size_t i) { return i == 0 ? NAN : i == 1 ? INFINITY : -INFINITY; }

static size_t pick(size_t n) { return (size_t)(rng_next() % n); }

/* the plan's forward result, to see that failing setters change nothing */
static void forward_of(const horecon_plan *plan, horecon_c32 *data)
{
    EXPECT(horecon_forward(plan, in.image, data), HORECON_OK, NULL);
}

/* forward, adjoint and normal of `image` and `data` fail with NOT_FINITE
 * (messages naming `image_says` and `data_says`), their outputs untouched */
static void operators_refuse(const horecon_plan *plan, const horecon_c32 *image, const horecon_c32 *data,
                             const char *image_says, const char *data_says)
{
    const int E = HORECON_ERR_NOT_FINITE;
    horecon_c32 out[NS * NC], x[NV];
    poison_c32(out, NS * NC);
    EXPECT(horecon_forward(plan, image, out), E, image_says);
    CHECK(is_poisoned_c32(out, NS * NC), "forward wrote data on NOT_FINITE");
    poison_c32(x, NV);
    EXPECT(horecon_adjoint(plan, data, x), E, data_says);
    CHECK(is_poisoned_c32(x, NV), "adjoint wrote image on NOT_FINITE");
    EXPECT(horecon_normal(plan, image, x), E, image_says);
    CHECK(is_poisoned_c32(x, NV), "normal wrote out on NOT_FINITE");
}

static void test_not_finite(void)
{
    const int E = HORECON_ERR_NOT_FINITE;
    horecon_plan *plan = full_plan(NC);
    horecon_c32 before[NS * NC], after[NS * NC], image[NV];
    horecon_cg_options c;
    horecon_cg_info info;
    size_t v, i;
    forward_of(plan, before);
    for (v = 0; v < NBAD; v++) {
        double x = bad(v);
        float xf = (float)x;
        {
            double positions[3 * NV];
            memcpy(positions, in.positions, sizeof positions);
            for (i = 0; i < 3; i++) { /* x, y and z columns */
                size_t at = i * NV + pick(NV);
                positions[at] = x;
                EXPECT(horecon_set_positions(plan, positions), E, "positions[");
                positions[at] = in.positions[at];
            }
        }
        {
            double fov[3], center[3];
            memcpy(fov, in.fov, sizeof fov);
            memcpy(center, in.center, sizeof center);
            i = pick(3);
            fov[i] = x;
            EXPECT(horecon_set_grid_positions(plan, fov, center), E, "fov[");
            fov[i] = in.fov[i];
            center[i] = x;
            EXPECT(horecon_set_grid_positions(plan, fov, center), E, "center[");
        }
        {
            double h[9 * NS];
            memcpy(h, in.harmonics, sizeof h);
            i = pick(9 * NS);
            h[i] = x;
            EXPECT(horecon_set_solid_harmonics(plan, 9, h), E, "coefficients[");
        }
        {
            double basis[5 * NV], coefficients[5 * NS];
            memcpy(basis, in.basis, sizeof basis);
            memcpy(coefficients, in.basis_coefficients, sizeof coefficients);
            i = pick(5 * NV);
            basis[i] = x;
            EXPECT(horecon_set_basis(plan, 5, basis, coefficients), E, "basis[");
            basis[i] = in.basis[i];
            i = pick(5 * NS);
            coefficients[i] = x;
            EXPECT(horecon_set_basis(plan, 5, basis, coefficients), E, "coefficients[");
        }
        {
            double k[3 * NS];
            memcpy(k, in.k, sizeof k);
            i = pick(3 * NS);
            k[i] = x;
            EXPECT(horecon_set_trajectory(plan, 3, k), E, "k[");
        }
        {
            double omega[NV], times[NS];
            memcpy(omega, in.omega, sizeof omega);
            memcpy(times, in.times, sizeof times);
            i = pick(NV);
            omega[i] = x;
            EXPECT(horecon_set_off_resonance(plan, omega, times), E, "omega[");
            omega[i] = in.omega[i];
            i = pick(NS);
            times[i] = x;
            EXPECT(horecon_set_off_resonance(plan, omega, times), E, "times[");
        }
        {
            horecon_c32 s[NV * NC];
            memcpy(s, in.sensitivities, sizeof s);
            i = pick(NV * NC);
            s[i].re = xf;
            EXPECT(horecon_set_sensitivities(plan, s), E, "sensitivities[");
            s[i] = in.sensitivities[i];
            s[i].im = xf;
            EXPECT(horecon_set_sensitivities(plan, s), E, "sensitivities[");
        }
        /* none of the failing setters changed the plan */
        forward_of(plan, after);
        CHECK(same_c32(before, after, NS * NC), "a failing setter changed the plan (value %g)", x);

        /* operator inputs; outputs stay poisoned */
        {
            horecon_c32 bad_image[NV], bad_data[NS * NC];
            memcpy(bad_image, in.image, sizeof bad_image);
            memcpy(bad_data, in.data, sizeof bad_data);
            i = pick(NV);
            if (v == 0) bad_image[i].re = xf; else bad_image[i].im = xf;
            i = pick(NS * NC);
            if (v == 0) bad_data[i].im = xf; else bad_data[i].re = xf;
            operators_refuse(plan, bad_image, bad_data, "image[", "data[");

            horecon_default_cg_options(&c);
            memset(&info, 0x5a, sizeof info);
            poison_c32(image, NV);
            EXPECT(horecon_cg(plan, bad_data, &c, image, &info), E, "data[");
            CHECK(is_poisoned_c32(image, NV), "cg wrote image on NOT_FINITE data");
            /* a warm start image with NaN/Inf */
            memcpy(image, bad_image, sizeof image);
            c.warm_start = 1;
            EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "image");
            CHECK(same_c32(image, bad_image, NV), "cg changed the warm-start image on NOT_FINITE");
            /* sample weights */
            {
                float weights[NS];
                memcpy(weights, in.weights, sizeof weights);
                weights[pick(NS)] = xf;
                horecon_default_cg_options(&c);
                c.sample_weights = weights;
                poison_c32(image, NV);
                EXPECT(horecon_cg(plan, in.data, &c, image, &info), E, "sample_weights[");
                CHECK(is_poisoned_c32(image, NV), "cg wrote image on NOT_FINITE weights");
            }
            {
                horecon_cg_info untouched;
                memset(&untouched, 0x5a, sizeof untouched);
                CHECK(memcmp(&info, &untouched, sizeof info) == 0, "cg wrote info on NOT_FINITE");
            }
        }
    }
    /* finite inputs whose results leave float32's range: NOT_FINITE naming
     * the output, outputs untouched */
    {
        horecon_c32 huge_image[NV], huge_data[NS * NC];
        for (i = 0; i < NV; i++) { huge_image[i].re = 3e38f; huge_image[i].im = -3e38f; }
        for (i = 0; i < NS * NC; i++) { huge_data[i].re = 3e38f; huge_data[i].im = 3e38f; }
        operators_refuse(plan, huge_image, huge_data, "overflowed", "overflowed");
        horecon_default_cg_options(&c);
        poison_c32(image, NV);
        EXPECT(horecon_cg(plan, huge_data, &c, image, &info), E, "overflowed");
        CHECK(is_poisoned_c32(image, NV), "cg wrote image on overflow");
    }
    horecon_plan_destroy(plan);
}

/* ----------------------------------------------------- INCOMPLETE_PLAN */

/* Every operator on `plan` fails with INCOMPLETE_PLAN naming `part`, outputs untouched. */
static void expect_operators_incomplete(const horecon_plan *plan, const char *part, int line)
{
    const int E = HORECON_ERR_INCOMPLETE_PLAN;
    horecon_c32 data[NS * NC], image[NV];
    horecon_cg_info info;
    poison_c32(data, NS * NC);
    poison_c32(image, NV);
    expect_status(horecon_forward(plan, in.image, data), E, part, "horecon_forward(...)", __FILE__, line);
    expect_status(horecon_adjoint(plan, in.data, image), E, part, "horecon_adjoint(...)", __FILE__, line);
    expect_status(horecon_normal(plan, in.image, image), E, part, "horecon_normal(...)", __FILE__, line);
    memset(&info, 0x5a, sizeof info);
    expect_status(horecon_cg(plan, in.data, NULL, image, &info), E, part, "horecon_cg(...)", __FILE__,
                  line);
    CHECK(is_poisoned_c32(data, NS * NC) && is_poisoned_c32(image, NV),
          "line %d: an incomplete plan wrote outputs", line);
}

static void test_incomplete_plan(void)
{
    const int E = HORECON_ERR_INCOMPLETE_PLAN;
    horecon_plan *plan = NULL;
    horecon_c32 data[NS];

    /* a fresh single-coil plan: nothing set */
    EXPECT(horecon_plan_create(&cpu, NX, NY, NZ, 1, NS, &plan), HORECON_OK, NULL);
    expect_operators_incomplete(plan, "positions", __LINE__);
    /* the built-in bases are evaluated at the positions: they need them first */
    EXPECT(horecon_set_solid_harmonics(plan, 4, in.harmonics), E, "positions");
    EXPECT(horecon_set_trajectory(plan, 2, in.k), E, "positions");
    /* off-resonance alone is no phase model */
    EXPECT(horecon_set_off_resonance(plan, in.omega, in.times), HORECON_OK, NULL);
    expect_operators_incomplete(plan, "positions", __LINE__);
    /* positions but no phase model */
    EXPECT(horecon_set_grid_positions(plan, in.fov, in.center), HORECON_OK, NULL);
    expect_operators_incomplete(plan, "phase model", __LINE__);
    EXPECT(horecon_set_trajectory(plan, 2, in.k), HORECON_OK, NULL);
    EXPECT(horecon_forward(plan, in.image, data), HORECON_OK, NULL);
    horecon_plan_destroy(plan);

    /* a user basis carries its own h_b(r_n): no positions needed */
    plan = NULL;
    EXPECT(horecon_plan_create(&cpu, NX, NY, NZ, 1, NS, &plan), HORECON_OK, NULL);
    EXPECT(horecon_set_basis(plan, 5, in.basis, in.basis_coefficients), HORECON_OK, NULL);
    EXPECT(horecon_forward(plan, in.image, data), HORECON_OK, NULL);
    horecon_plan_destroy(plan);

    /* several coils without sensitivities */
    plan = NULL;
    EXPECT(horecon_plan_create(&cpu, NX, NY, NZ, NC, NS, &plan), HORECON_OK, NULL);
    EXPECT(horecon_set_positions(plan, in.positions), HORECON_OK, NULL);
    EXPECT(horecon_set_solid_harmonics(plan, 4, in.harmonics), HORECON_OK, NULL);
    expect_operators_incomplete(plan, "sensitivities", __LINE__);
    EXPECT(horecon_set_sensitivities(plan, in.sensitivities), HORECON_OK, NULL);
    {
        horecon_c32 d[NS * NC];
        EXPECT(horecon_forward(plan, in.image, d), HORECON_OK, NULL);
    }
    horecon_plan_destroy(plan);
}

/* ------------------------------------------------------- OUT_OF_MEMORY
 * One allocation too large for any machine this runs on. tests/c/oom.c
 * checks every allocating call under RLIMIT_AS limits as well. */

static int memory_is_overcommitted(void)
{
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = 0;
    if (f != NULL) {
        if (fscanf(f, "%d", &mode) != 1) mode = 0;
        fclose(f);
    }
    return mode == 1;
}

/* RAM + swap in GiB from /proc/meminfo (0 if unknown). */
static double memory_gib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char key[64];
    double kib, total = 0.0;
    if (f == NULL) return 0.0;
    while (fscanf(f, "%63s %lf kB\n", key, &kib) == 2) {
        if (strcmp(key, "MemTotal:") == 0 || strcmp(key, "SwapTotal:") == 0) total += kib;
    }
    fclose(f);
    return total / (1024.0 * 1024.0);
}

static void test_out_of_memory(void)
{
    /* 2^34 voxels (the largest plan allowed): the grid positions alone are
     * 3·2^34 doubles = 384 GiB, which the library must refuse with a status
     * instead of aborting (it allocates fallibly). */
    const int64_t nx = (int64_t)1 << 12, ny = (int64_t)1 << 11, nz = (int64_t)1 << 11;
    horecon_plan *plan = NULL;
    int32_t backend = -1;
    if (getenv("HORECON_TEST_SKIP_OOM") != NULL) {
        printf("error_handling: OUT_OF_MEMORY test skipped (HORECON_TEST_SKIP_OOM is set)\n");
        return;
    }
    if (memory_is_overcommitted()) {
        /* with vm.overcommit_memory = 1 the allocation succeeds and the
         * process is killed on first touch: nothing a library can catch */
        printf("error_handling: OUT_OF_MEMORY test skipped (vm.overcommit_memory = 1)\n");
        return;
    }
    if (memory_gib() >= 384.0) {
        /* the 384 GiB would fit: the call would succeed (slowly) */
        printf("error_handling: OUT_OF_MEMORY test skipped (%.0f GiB of RAM + swap)\n", memory_gib());
        return;
    }
    EXPECT(horecon_plan_create(&cpu, nx, ny, nz, 1, 1, &plan), HORECON_OK, NULL);
    EXPECT(horecon_set_grid_positions(plan, in.fov, in.center), HORECON_ERR_OUT_OF_MEMORY,
           "grid positions");
    /* the plan survives the failure (its operators would need N-element arrays) */
    EXPECT(horecon_plan_backend(plan, &backend), HORECON_OK, NULL);
    CHECK(backend == HORECON_BACKEND_CPU, "huge plan backend %d", (int)backend);
    EXPECT(horecon_plan_destroy(plan), HORECON_OK, NULL);
}

/* ------------------------------------------------- BACKEND_UNAVAILABLE */

static void test_backend_unavailable(void)
{
    int32_t devices = -1, backend = -1;
    horecon_options o = cpu;
    static int sentinel;
    horecon_plan *plan = (horecon_plan *)(void *)&sentinel;
    horecon_status s;
    EXPECT(horecon_cuda_device_count(&devices), HORECON_OK, NULL);
    o.backend = HORECON_BACKEND_CUDA;
    s = horecon_plan_create(&o, NX, NY, NZ, 1, NS, &plan);
    if (devices == 0) {
        expect_status(s, HORECON_ERR_BACKEND_UNAVAILABLE, "CUDA", "horecon_plan_create(CUDA)",
                      __FILE__, __LINE__);
        CHECK(plan == (horecon_plan *)(void *)&sentinel, "plan_create(CUDA) wrote *plan_out on failure");
    } else {
        /* a GPU is present: CUDA must work */
        expect_status(s, HORECON_OK, NULL, "horecon_plan_create(CUDA)", __FILE__, __LINE__);
        if (s == HORECON_OK) {
            EXPECT(horecon_plan_backend(plan, &backend), HORECON_OK, NULL);
            CHECK(backend == HORECON_BACKEND_CUDA, "a CUDA plan reports backend %d", (int)backend);
            horecon_plan_destroy(plan);
        }
        /* a device index past the last one */
        o.device = devices;
        plan = (horecon_plan *)(void *)&sentinel;
        s = horecon_plan_create(&o, NX, NY, NZ, 1, NS, &plan);
        CHECK(s == HORECON_ERR_BACKEND_UNAVAILABLE || s == HORECON_ERR_INVALID_ARGUMENT,
              "CUDA device %d of %d gave %d (%s)", (int)devices, (int)devices, (int)s,
              horecon_last_error());
        if (s == HORECON_OK) horecon_plan_destroy(plan);
    }
}

/* ----------------------------------------------------------- CANCELLED */

typedef struct progress_log {
    int32_t calls;
    int32_t last_iteration;
    int32_t stop_at; /* return 1 at this iteration */
    int ordered;     /* iterations came as 1, 2, 3, ... */
    int finite;      /* every residual finite and >= 0 */
} progress_log;

static int32_t log_progress(void *user, int32_t iteration, double rel_residual)
{
    progress_log *log = (progress_log *)user;
    log->calls++;
    if (iteration != log->last_iteration + 1) log->ordered = 0;
    if (!(rel_residual >= 0.0 && rel_residual < INFINITY)) log->finite = 0;
    log->last_iteration = iteration;
    return iteration >= log->stop_at ? 1 : 0;
}

static void test_cancelled(void)
{
    horecon_plan *plan = full_plan(NC);
    horecon_c32 image[NV], start[NV];
    horecon_cg_options c;
    horecon_cg_info info, untouched;
    progress_log log = {0, 0, 2, 1, 1};

    horecon_default_cg_options(&c);
    c.max_iterations = 10;
    c.tolerance = 0.0;
    c.progress = log_progress;
    c.progress_user = &log;
    poison_c32(image, NV);
    memset(&info, 0x5a, sizeof info);
    memset(&untouched, 0x5a, sizeof untouched);
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), HORECON_ERR_CANCELLED, "cancelled");
    CHECK(log.calls == 2 && log.ordered && log.finite,
          "progress: %d calls (expected 2), ordered %d, finite %d", (int)log.calls, log.ordered,
          log.finite);
    CHECK(is_poisoned_c32(image, NV), "cg wrote the image when cancelled");
    CHECK(memcmp(&info, &untouched, sizeof info) == 0, "cg wrote info when cancelled");

    /* warm start: the start image itself is left as it was */
    fill_c32(start, NV);
    memcpy(image, start, sizeof image);
    log.calls = 0;
    log.last_iteration = 0;
    log.stop_at = 1;
    c.warm_start = 1;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), HORECON_ERR_CANCELLED, "cancelled");
    CHECK(log.calls == 1 && same_c32(image, start, NV), "warm-start cg changed the image when cancelled");

    /* a callback that never stops: called once per iteration, and the solve succeeds */
    log.calls = 0;
    log.last_iteration = 0;
    log.stop_at = INT32_MAX;
    c.warm_start = 0;
    c.max_iterations = 7;
    EXPECT(horecon_cg(plan, in.data, &c, image, &info), HORECON_OK, NULL);
    CHECK(info.iterations == log.calls && log.calls >= 1 && log.calls <= 7 && log.ordered &&
              log.finite,
          "progress calls %d vs iterations %d", (int)log.calls, (int)info.iterations);
    CHECK(info.converged == 0 && info.rel_residual > 0.0 && info.seconds >= 0.0,
          "tolerance 0 cannot converge in 7 iterations: converged %d residual %g seconds %g",
          (int)info.converged, info.rel_residual, info.seconds);
    CHECK(!is_poisoned_c32(image, NV), "cg did not write the image");
    horecon_plan_destroy(plan);
}

/* --------------------------------------------------- in-place and overlap */

static void test_in_place(void)
{
    /* N = M·L so that forward and adjoint can also run in place */
    const int64_t nx = 5, ny = 4, nz = 1, nc = 2, ns = 10;
    const size_t n = 20;
    horecon_plan *plan = complete_plan(&cpu, nx, ny, nz, nc, ns);
    horecon_c32 x[20], y[20], buf[40];
    horecon_cg_options c;
    horecon_cg_info info;
    size_t shift;
    if (plan == NULL) return;
    fill_c32(x, n);

    EXPECT(horecon_normal(plan, x, y), HORECON_OK, NULL);
    memcpy(buf, x, sizeof x);
    EXPECT(horecon_normal(plan, buf, buf), HORECON_OK, NULL);
    CHECK(same_c32(buf, y, n), "normal in place differs from out of place");
    CHECK(!same_c32(y, x, n), "normal is the identity?");
    /* partial overlap in both directions */
    for (shift = 1; shift < n; shift += 7) {
        memcpy(buf, x, sizeof x);
        EXPECT(horecon_normal(plan, buf, buf + shift), HORECON_OK, NULL);
        CHECK(same_c32(buf + shift, y, n), "normal with output shifted by %lu differs",
              (unsigned long)shift);
        memcpy(buf + shift, x, sizeof x);
        EXPECT(horecon_normal(plan, buf + shift, buf), HORECON_OK, NULL);
        CHECK(same_c32(buf, y, n), "normal with input shifted by %lu differs", (unsigned long)shift);
    }

    EXPECT(horecon_forward(plan, x, y), HORECON_OK, NULL);
    memcpy(buf, x, sizeof x);
    EXPECT(horecon_forward(plan, buf, buf), HORECON_OK, NULL);
    CHECK(same_c32(buf, y, n), "forward in place differs from out of place");

    EXPECT(horecon_adjoint(plan, x, y), HORECON_OK, NULL);
    memcpy(buf, x, sizeof x);
    EXPECT(horecon_adjoint(plan, buf, buf), HORECON_OK, NULL);
    CHECK(same_c32(buf, y, n), "adjoint in place differs from out of place");

    /* cg with the data buffer as the image buffer */
    horecon_default_cg_options(&c);
    c.max_iterations = 5;
    EXPECT(horecon_cg(plan, x, &c, y, &info), HORECON_OK, NULL);
    memcpy(buf, x, sizeof x);
    EXPECT(horecon_cg(plan, buf, &c, buf, &info), HORECON_OK, NULL);
    CHECK(same_c32(buf, y, n), "cg in place differs from out of place");
    horecon_plan_destroy(plan);
}

/* ---------------------------------------------------------- last error */

static void test_last_error(void)
{
    horecon_plan *plan = full_plan(1);
    horecon_c32 data[NS];
    const char *a, *b;
    horecon_forward(plan, NULL, data);
    a = horecon_last_error();
    CHECK(contains(a, "image"), "last error after a failure: \"%s\"", a);
    /* reading it does not clear it */
    b = horecon_last_error();
    CHECK(contains(b, "image"), "last error read twice: \"%s\"", b);
    /* a success clears it */
    EXPECT(horecon_forward(plan, in.image, data), HORECON_OK, NULL);
    horecon_plan_destroy(plan);
}

int main(void)
{
    rng_seed("error_handling");
    cpu = test_options(2);
    make_inputs();
    test_codes_and_strings();
    test_version_and_defaults();
    test_null_pointers();
    test_invalid_arguments();
    test_not_finite();
    test_incomplete_plan();
    test_out_of_memory();
    test_backend_unavailable();
    test_cancelled();
    test_in_place();
    test_last_error();
    return check_summary("error_handling");
}
