/* horecon_mex: the one MEX gateway of the MATLAB/Octave binding over the C API
 * (include/horecon.h). Called only by the +horecon package:
 *
 *   horecon_mex(command, args...)
 *
 * Plans are handed out as uint64 handles and kept in a registry here, so a
 * deleted or foreign handle is an error (horecon:invalidArgument) and never a
 * crash; destroying an unknown handle is a no-op (double deletion is safe);
 * all plans still alive are destroyed when the MEX is cleared.
 *
 * Every size is checked against the plan before any data is read; every
 * library status becomes a MATLAB error with identifier horecon:<name> and
 * the library's message. Inputs may be double or single, real or complex;
 * complex results are single complex.
 *
 * Complex data: MATLAB >= R2018a built with -R2018a uses the interleaved API
 * (MX_HAS_INTERLEAVED_COMPLEX); everywhere else (GNU Octave, whose
 * interleaved API is broken in 7.x) the separate real/imaginary API.
 *
 * Ctrl-C: horecon_cg calls its progress callback after every iteration; the
 * callback reports a pending interrupt (utIsInterruptPending in MATLAB,
 * octave_interrupt_state in Octave, build with -DHORECON_OCTAVE), the solve
 * stops cleanly with HORECON_ERR_CANCELLED and the MEX raises
 * horecon:cancelled. The callback only reads that flag (it may run on a
 * worker thread of the library); residuals are printed after the solve.
 */
#include "mex.h"
#include "horecon.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MX_HAS_INTERLEAVED_COMPLEX
#define MX_HAS_INTERLEAVED_COMPLEX 0
#endif

#if defined(HORECON_OCTAVE)
extern sig_atomic_t octave_interrupt_state;
static int interrupt_pending(void) { return octave_interrupt_state > 0; }
#elif defined(MATLAB_MEX_FILE)
#include <stdbool.h>
extern bool utIsInterruptPending(void);
static int interrupt_pending(void) { return utIsInterruptPending() ? 1 : 0; }
#else
static int interrupt_pending(void) { return 0; }
#endif

/* ---------------------------------------------------------------- errors */

static const char *status_id(horecon_status s) {
  switch (s) {
    case HORECON_ERR_NULL_POINTER: return "horecon:nullPointer";
    case HORECON_ERR_INVALID_ARGUMENT: return "horecon:invalidArgument";
    case HORECON_ERR_SIZE_MISMATCH: return "horecon:sizeMismatch";
    case HORECON_ERR_NOT_FINITE: return "horecon:notFinite";
    case HORECON_ERR_INCOMPLETE_PLAN: return "horecon:incompletePlan";
    case HORECON_ERR_OUT_OF_MEMORY: return "horecon:outOfMemory";
    case HORECON_ERR_BACKEND_UNAVAILABLE: return "horecon:backendUnavailable";
    case HORECON_ERR_BACKEND: return "horecon:backend";
    case HORECON_ERR_CANCELLED: return "horecon:cancelled";
    default: return "horecon:internal";
  }
}

static void fail(const char *id, const char *fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  mexErrMsgIdAndTxt(id, "%s", text);
}

/* Progress of the library's long calls (issue 11): called on MATLAB's thread
 * between chunks of work; a pending Ctrl-C cancels the call (horecon:cancelled),
 * the plan stays usable. Installed on every plan and for the toolkit. */
static int32_t long_call_progress(void *user, double fraction) {
  (void)user;
  (void)fraction;
  return interrupt_pending();
}

/* A failing status becomes horecon:<name> with the library's message. */
static void check(horecon_status s) {
  if (s != HORECON_OK) {
    char text[1024];
    snprintf(text, sizeof text, "%s", horecon_last_error());
    mexErrMsgIdAndTxt(status_id(s), "%s", text);
  }
}

/* ---------------------------------------------------------- plan registry */

typedef struct {
  horecon_plan *plan;
  int64_t dims[3];
  int64_t coils;
  int64_t samples;
} plan_entry;

static plan_entry *registry = NULL;
static size_t registry_len = 0, registry_cap = 0;
static int exit_hook_set = 0;

static void destroy_all(void) {
  size_t i;
  for (i = 0; i < registry_len; ++i) horecon_plan_destroy(registry[i].plan);
  free(registry);
  registry = NULL;
  registry_len = registry_cap = 0;
}

static plan_entry *find_plan(uint64_t handle) {
  size_t i;
  for (i = 0; i < registry_len; ++i)
    if ((uint64_t)(uintptr_t)registry[i].plan == handle) return &registry[i];
  return NULL;
}

static uint64_t handle_value(const mxArray *a) {
  if (!mxIsUint64(a) || mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    fail("horecon:invalidArgument", "the plan handle must be a uint64 scalar");
  return *(const uint64_t *)mxGetData(a);
}

static plan_entry *plan_arg(const mxArray *a) {
  plan_entry *e = find_plan(handle_value(a));
  if (e == NULL)
    fail("horecon:invalidArgument", "invalid or deleted plan (its handle is not alive)");
  return e;
}

static size_t voxels(const plan_entry *e) { return (size_t)(e->dims[0] * e->dims[1] * e->dims[2]); }

/* --------------------------------------------------------------- inputs */

static void check_numeric(const mxArray *a, const char *name) {
  if (!(mxIsDouble(a) || mxIsSingle(a)) || mxIsSparse(a))
    fail("horecon:invalidArgument", "%s must be a full double or single array, got %s", name,
         mxGetClassName(a));
}

static void check_count(const mxArray *a, const char *name, size_t expected, const char *shape) {
  size_t got = mxGetNumberOfElements(a);
  if (got != expected)
    fail("horecon:sizeMismatch", "%s has %zu elements, expected %zu (%s)", name, got, expected, shape);
}

/* A real double/single array as doubles (a copy, freed by MATLAB after the call). */
static double *real_values(const mxArray *a, const char *name) {
  size_t i, n = mxGetNumberOfElements(a);
  double *out;
  check_numeric(a, name);
  if (mxIsComplex(a)) fail("horecon:invalidArgument", "%s must be real", name);
  out = (double *)mxMalloc((n ? n : 1) * sizeof(double));
  if (mxIsDouble(a)) {
    if (n) memcpy(out, mxGetData(a), n * sizeof(double));
  } else {
    const float *f = (const float *)mxGetData(a);
    for (i = 0; i < n; ++i) out[i] = f[i];
  }
  return out;
}

static double *real_arg(const mxArray *a, const char *name, size_t expected, const char *shape) {
  check_numeric(a, name);
  check_count(a, name, expected, shape);
  return real_values(a, name);
}

static float *real_singles(const mxArray *a, const char *name, size_t expected, const char *shape) {
  size_t i;
  double *d = real_arg(a, name, expected, shape);
  float *out = (float *)mxMalloc((expected ? expected : 1) * sizeof(float));
  for (i = 0; i < expected; ++i) out[i] = (float)d[i];
  return out;
}

/* Scalars (counts, options) may be of any real numeric or logical class. */
static double scalar(const mxArray *a, const char *name) {
  if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxIsSparse(a))
    fail("horecon:invalidArgument", "%s must be a real numeric scalar, got %s", name, mxGetClassName(a));
  if (mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    fail("horecon:invalidArgument", "%s must be a real scalar", name);
  return mxGetScalar(a);
}

static int64_t integer(const mxArray *a, const char *name) {
  double v = scalar(a, name);
  if (!(v == floor(v)) || fabs(v) > 9.0e15)
    fail("horecon:invalidArgument", "%s must be an integer, got %g", name, v);
  return (int64_t)v;
}

/* Any double/single, real or complex array as interleaved single complex. */
static horecon_c32 *complex_values(const mxArray *a, const char *name) {
  size_t i, n = mxGetNumberOfElements(a);
  horecon_c32 *out;
  check_numeric(a, name);
  out = (horecon_c32 *)mxMalloc((n ? n : 1) * sizeof(horecon_c32));
  if (!mxIsComplex(a)) {
    if (mxIsDouble(a)) {
      const double *re = (const double *)mxGetData(a);
      for (i = 0; i < n; ++i) { out[i].re = (float)re[i]; out[i].im = 0.0f; }
    } else {
      const float *re = (const float *)mxGetData(a);
      for (i = 0; i < n; ++i) { out[i].re = re[i]; out[i].im = 0.0f; }
    }
    return out;
  }
#if MX_HAS_INTERLEAVED_COMPLEX
  if (mxIsDouble(a)) {
    const mxComplexDouble *c = mxGetComplexDoubles(a);
    for (i = 0; i < n; ++i) { out[i].re = (float)c[i].real; out[i].im = (float)c[i].imag; }
  } else {
    const mxComplexSingle *c = mxGetComplexSingles(a);
    for (i = 0; i < n; ++i) { out[i].re = c[i].real; out[i].im = c[i].imag; }
  }
#else
  if (mxIsDouble(a)) {
    const double *re = (const double *)mxGetData(a), *im = (const double *)mxGetImagData(a);
    for (i = 0; i < n; ++i) { out[i].re = (float)re[i]; out[i].im = (float)im[i]; }
  } else {
    const float *re = (const float *)mxGetData(a), *im = (const float *)mxGetImagData(a);
    for (i = 0; i < n; ++i) { out[i].re = re[i]; out[i].im = im[i]; }
  }
#endif
  return out;
}

static horecon_c32 *complex_arg(const mxArray *a, const char *name, size_t expected, const char *shape) {
  check_numeric(a, name);
  check_count(a, name, expected, shape);
  return complex_values(a, name);
}

/* -------------------------------------------------------------- outputs */

static mxArray *complex_output(size_t rows, size_t cols, const horecon_c32 *v) {
  size_t i, n = rows * cols;
  mxArray *out = mxCreateNumericMatrix(rows, cols, mxSINGLE_CLASS, mxCOMPLEX);
#if MX_HAS_INTERLEAVED_COMPLEX
  mxComplexSingle *c = mxGetComplexSingles(out);
  for (i = 0; i < n; ++i) { c[i].real = v[i].re; c[i].imag = v[i].im; }
#else
  float *re = (float *)mxGetData(out), *im = (float *)mxGetImagData(out);
  for (i = 0; i < n; ++i) { re[i] = v[i].re; im[i] = v[i].im; }
#endif
  return out;
}

static mxArray *complex_double_output(size_t rows, size_t cols, const double *re_in, const double *im_in) {
  size_t i, n = rows * cols;
  mxArray *out = mxCreateNumericMatrix(rows, cols, mxDOUBLE_CLASS, mxCOMPLEX);
#if MX_HAS_INTERLEAVED_COMPLEX
  mxComplexDouble *c = mxGetComplexDoubles(out);
  for (i = 0; i < n; ++i) { c[i].real = re_in[i]; c[i].imag = im_in[i]; }
#else
  double *re = (double *)mxGetData(out), *im = (double *)mxGetImagData(out);
  for (i = 0; i < n; ++i) { re[i] = re_in[i]; im[i] = im_in[i]; }
#endif
  return out;
}

static mxArray *real_output(size_t rows, size_t cols, double **data) {
  mxArray *out = mxCreateNumericMatrix(rows, cols, mxDOUBLE_CLASS, mxREAL);
  *data = (double *)mxGetData(out);
  return out;
}

static void need_args(int nrhs, int expected, const char *command) {
  if (nrhs != expected)
    fail("horecon:invalidArgument", "horecon_mex('%s', ...) takes %d arguments, got %d", command,
         expected - 1, nrhs - 1);
}

/* --------------------------------------------------------------- plans */

static void cmd_create(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  horecon_options o;
  horecon_plan *plan = NULL;
  int64_t dims[3] = {1, 1, 1}, coils, samples;
  size_t i, ndims;
  double *d;
  need_args(nrhs, 8, "create");
  check_numeric(prhs[1], "dims");
  ndims = mxGetNumberOfElements(prhs[1]);
  if (ndims < 1 || ndims > 3) fail("horecon:invalidArgument", "dims must have 1 to 3 elements, got %zu", ndims);
  d = real_values(prhs[1], "dims");
  for (i = 0; i < ndims; ++i) {
    if (!(d[i] == floor(d[i])) || d[i] > 9.0e15 || d[i] < -9.0e15)
      fail("horecon:invalidArgument", "dims(%zu) must be an integer, got %g", i + 1, d[i]);
    dims[i] = (int64_t)d[i];
  }
  coils = integer(prhs[2], "ncoils");
  samples = integer(prhs[3], "nsamples");
  horecon_default_options(&o);
  o.backend = (int32_t)integer(prhs[4], "Backend");
  o.precision = (int32_t)integer(prhs[5], "Precision");
  o.device = (int32_t)integer(prhs[6], "Device");
  o.num_threads = (int32_t)integer(prhs[7], "Threads");
  check(horecon_plan_create(&o, dims[0], dims[1], dims[2], coils, samples, &plan));
  horecon_set_progress(plan, long_call_progress, NULL); /* Ctrl-C cancels long calls */
  if (registry_len == registry_cap) {
    size_t cap = registry_cap ? 2 * registry_cap : 16;
    plan_entry *grown = (plan_entry *)realloc(registry, cap * sizeof(plan_entry));
    if (grown == NULL) {
      horecon_plan_destroy(plan);
      fail("horecon:outOfMemory", "could not grow the plan registry");
    }
    registry = grown;
    registry_cap = cap;
  }
  registry[registry_len].plan = plan;
  memcpy(registry[registry_len].dims, dims, sizeof dims);
  registry[registry_len].coils = coils;
  registry[registry_len].samples = samples;
  ++registry_len;
  if (!exit_hook_set) {
    mexAtExit(destroy_all);
    exit_hook_set = 1;
  }
  plhs[0] = mxCreateNumericMatrix(1, 1, mxUINT64_CLASS, mxREAL);
  *(uint64_t *)mxGetData(plhs[0]) = (uint64_t)(uintptr_t)plan;
  (void)nlhs;
}

static void cmd_destroy(int nrhs, const mxArray *prhs[]) {
  size_t i;
  uint64_t h;
  need_args(nrhs, 2, "destroy");
  h = handle_value(prhs[1]);
  for (i = 0; i < registry_len; ++i) {
    if ((uint64_t)(uintptr_t)registry[i].plan == h) {
      horecon_plan_destroy(registry[i].plan);
      registry[i] = registry[registry_len - 1];
      --registry_len;
      return;
    }
  }
  /* unknown handle: already destroyed, nothing to do */
}

static void cmd_set_positions(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  need_args(nrhs, 3, "setPositions");
  e = plan_arg(prhs[1]);
  check(horecon_set_positions(e->plan, real_arg(prhs[2], "P", 3 * voxels(e), "N x 3")));
}

static void cmd_set_grid_positions(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  double *fov, *center;
  need_args(nrhs, 4, "setGridPositions");
  e = plan_arg(prhs[1]);
  fov = real_arg(prhs[2], "fov", 3, "[fx fy fz] in metres");
  center = real_arg(prhs[3], "center", 3, "[cx cy cz] in metres");
  check(horecon_set_grid_positions(e->plan, fov, center));
}

/* Cartesian FFT mode: mask (N elements, logical, double or single; ~= 0 = sampled). */
static void cmd_set_cartesian(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  uint8_t *mask;
  size_t i, n;
  need_args(nrhs, 3, "setCartesian");
  e = plan_arg(prhs[1]);
  n = voxels(e);
  check_count(prhs[2], "mask", n, "N = nx*ny*nz, [nx ny nz] or [nx ny]");
  mask = (uint8_t *)mxMalloc((n ? n : 1) * sizeof(uint8_t));
  if (mxIsLogical(prhs[2])) {
    const mxLogical *l = mxGetLogicals(prhs[2]);
    for (i = 0; i < n; ++i) mask[i] = l[i] ? 1 : 0;
  } else {
    const double *d = real_values(prhs[2], "mask");
    for (i = 0; i < n; ++i) mask[i] = d[i] != 0.0 ? 1 : 0;
  }
  check(horecon_set_cartesian(e->plan, mask));
}

/* The number of columns B of an M x B (or N x B) matrix with `rows` rows. */
static int32_t columns(const mxArray *a, const char *name, size_t rows, const char *shape) {
  size_t n;
  check_numeric(a, name);
  n = mxGetNumberOfElements(a);
  if (rows == 0 || n == 0 || n % rows != 0)
    fail("horecon:sizeMismatch", "%s has %zu elements, not a multiple of %zu (%s)", name, n, rows, shape);
  if (n / rows > 4096) fail("horecon:invalidArgument", "%s has %zu columns, at most 4096", name, n / rows);
  return (int32_t)(n / rows);
}

static void cmd_set_solid_harmonics(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int32_t b;
  need_args(nrhs, 3, "setSolidHarmonics");
  e = plan_arg(prhs[1]);
  b = columns(prhs[2], "coef", (size_t)e->samples, "M x B");
  check(horecon_set_solid_harmonics(e->plan, b, real_values(prhs[2], "coef")));
}

static void cmd_set_basis(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int32_t b;
  need_args(nrhs, 4, "setBasis");
  e = plan_arg(prhs[1]);
  b = columns(prhs[2], "H", voxels(e), "N x B");
  check_count(prhs[3], "coef", (size_t)b * (size_t)e->samples, "M x B, B = columns of H");
  check(horecon_set_basis(e->plan, b, real_values(prhs[2], "H"), real_values(prhs[3], "coef")));
}

static void cmd_set_trajectory(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int32_t d;
  need_args(nrhs, 3, "setTrajectory");
  e = plan_arg(prhs[1]);
  d = columns(prhs[2], "k", (size_t)e->samples, "M x d");
  check(horecon_set_trajectory(e->plan, d, real_values(prhs[2], "k")));
}

static void cmd_set_off_resonance(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  need_args(nrhs, 4, "setOffResonance");
  e = plan_arg(prhs[1]);
  if (mxIsEmpty(prhs[2])) {
    check(horecon_set_off_resonance(e->plan, NULL, NULL));
    return;
  }
  {
    double *w = real_arg(prhs[2], "w", voxels(e), "N rad/s");
    double *t = real_arg(prhs[3], "t", (size_t)e->samples, "M seconds");
    check(horecon_set_off_resonance(e->plan, w, t));
  }
}

static void cmd_set_sensitivities(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  need_args(nrhs, 3, "setSensitivities");
  e = plan_arg(prhs[1]);
  if (mxIsEmpty(prhs[2])) {
    check(horecon_set_sensitivities(e->plan, NULL));
    return;
  }
  check(horecon_set_sensitivities(
      e->plan, complex_arg(prhs[2], "S", voxels(e) * (size_t)e->coils, "N x L or [nx ny nz L]")));
}

static void cmd_set_toeplitz(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int64_t segments;
  need_args(nrhs, 4, "setToeplitz");
  e = plan_arg(prhs[1]);
  segments = integer(prhs[3], "TimeSegments");
  if (segments < INT32_MIN || segments > INT32_MAX)
    fail("horecon:invalidArgument", "TimeSegments = %lld is out of range", (long long)segments);
  check(horecon_set_toeplitz(e->plan, scalar(prhs[2], "enable") != 0.0, (int32_t)segments));
}

static void cmd_forward(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  horecon_c32 *x, *d;
  need_args(nrhs, 3, "forward");
  e = plan_arg(prhs[1]);
  x = complex_arg(prhs[2], "x", voxels(e), "N = nx*ny*nz");
  d = (horecon_c32 *)mxMalloc((size_t)(e->samples * e->coils) * sizeof(horecon_c32));
  check(horecon_forward(e->plan, x, d));
  plhs[0] = complex_output((size_t)e->samples, (size_t)e->coils, d);
}

static void cmd_adjoint(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  horecon_c32 *d, *x;
  need_args(nrhs, 3, "adjoint");
  e = plan_arg(prhs[1]);
  d = complex_arg(prhs[2], "d", (size_t)(e->samples * e->coils), "M x L");
  x = (horecon_c32 *)mxMalloc(voxels(e) * sizeof(horecon_c32));
  check(horecon_adjoint(e->plan, d, x));
  plhs[0] = complex_output(voxels(e), 1, x);
}

static void cmd_normal(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  horecon_c32 *x, *y;
  need_args(nrhs, 3, "normal");
  e = plan_arg(prhs[1]);
  x = complex_arg(prhs[2], "x", voxels(e), "N = nx*ny*nz");
  y = (horecon_c32 *)mxMalloc(voxels(e) * sizeof(horecon_c32));
  check(horecon_normal(e->plan, x, y));
  plhs[0] = complex_output(voxels(e), 1, y);
}

/* x = gridding(d, dcf): dcf [] = Pipe-Menon weights. */
static void cmd_gridding(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  horecon_c32 *d, *x;
  float *w = NULL;
  need_args(nrhs, 4, "gridding");
  e = plan_arg(prhs[1]);
  d = complex_arg(prhs[2], "d", (size_t)(e->samples * e->coils), "M x L");
  if (!mxIsEmpty(prhs[3])) w = real_singles(prhs[3], "dcf", (size_t)e->samples, "M");
  x = (horecon_c32 *)mxMalloc(voxels(e) * sizeof(horecon_c32));
  check(horecon_gridding(e->plan, d, w, x));
  plhs[0] = complex_output(voxels(e), 1, x);
}

/* Stone et al.'s F^H d (eq. 4): x = horecon_mex('fhd', h, d, phi), phi [] = ones. */
static void cmd_fhd(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  horecon_c32 *d, *phi = NULL, *x;
  need_args(nrhs, 4, "fhd");
  e = plan_arg(prhs[1]);
  d = complex_arg(prhs[2], "d", (size_t)e->samples, "M (one coil)");
  if (!mxIsEmpty(prhs[3])) phi = complex_arg(prhs[3], "phi", (size_t)e->samples, "M");
  x = (horecon_c32 *)mxMalloc(voxels(e) * sizeof(horecon_c32));
  check(horecon_fhd(e->plan, d, phi, x));
  plhs[0] = complex_output(voxels(e), 1, x);
}

/* Stone et al.'s Q (eq. 3) on the 2x grid: q = horecon_mex('q', h, phiMag2), [] = ones;
   returned as a column (the class reshapes it with qDims). */
static void cmd_q(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  float *w = NULL;
  horecon_c32 *q;
  int64_t dims[3];
  size_t count;
  need_args(nrhs, 3, "q");
  e = plan_arg(prhs[1]);
  check(horecon_q_dims(e->plan, dims));
  count = (size_t)(dims[0] * dims[1] * dims[2]);
  if (!mxIsEmpty(prhs[2])) w = real_singles(prhs[2], "phiMag2", (size_t)e->samples, "M");
  q = (horecon_c32 *)mxMalloc(count * sizeof(horecon_c32));
  check(horecon_q(e->plan, w, q));
  plhs[0] = complex_output(count, 1, q);
}

static void cmd_q_dims(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int64_t dims[3];
  double *out;
  int i;
  need_args(nrhs, 2, "qDims");
  e = plan_arg(prhs[1]);
  check(horecon_q_dims(e->plan, dims));
  plhs[0] = real_output(1, 3, &out);
  for (i = 0; i < 3; ++i) out[i] = (double)dims[i];
}

/* Progress of a CG solve: residual history, and Ctrl-C. */
typedef struct {
  double *residuals;
  int32_t capacity;
  int32_t count;
  int interrupted;
} cg_progress;

static int32_t on_progress(void *user, int32_t iteration, double rel_residual) {
  cg_progress *p = (cg_progress *)user;
  if (p->count < p->capacity) p->residuals[p->count++] = rel_residual;
  (void)iteration;
  if (interrupt_pending()) {
    p->interrupted = 1;
    return 1;
  }
  return 0;
}

static void cmd_cg(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  static const char *fields[] = {"iterations", "converged", "relResidual", "seconds", "residuals", "backend"};
  plan_entry *e;
  horecon_cg_options o;
  horecon_cg_info info;
  horecon_c32 *d, *x;
  cg_progress progress;
  int verbose;
  int32_t backend = 0, i;
  int64_t reweightings, neighbours, grid_axes = 0, directions;
  horecon_status s;
  need_args(nrhs, 15, "cg");
  e = plan_arg(prhs[1]);
  d = complex_arg(prhs[2], "d", (size_t)(e->samples * e->coils), "M x L");
  horecon_default_cg_options(&o);
  {
    int64_t it = integer(prhs[3], "MaxIterations");
    if (it < 0 || it > 1000000) fail("horecon:invalidArgument", "MaxIterations must be 0..1e6, got %lld", (long long)it);
    o.max_iterations = (int32_t)it;
  }
  o.tolerance = scalar(prhs[4], "Tolerance");
  o.regularizer = (int32_t)integer(prhs[5], "Regularizer");
  o.lambda = scalar(prhs[6], "Lambda");
  if (!mxIsEmpty(prhs[7])) o.sample_weights = real_singles(prhs[7], "SampleWeights", (size_t)e->samples, "M");
  if (!mxIsEmpty(prhs[8])) {
    x = complex_arg(prhs[8], "X0", voxels(e), "N = nx*ny*nz");
    o.warm_start = 1;
  } else {
    x = (horecon_c32 *)mxCalloc(voxels(e), sizeof(horecon_c32));
  }
  verbose = scalar(prhs[9], "Verbose") != 0.0;
  reweightings = integer(prhs[10], "Reweightings");
  if (reweightings < 0 || reweightings > 10000)
    fail("horecon:invalidArgument", "Reweightings must be 0..1e4, got %lld", (long long)reweightings);
  o.reweightings = (int32_t)reweightings;
  o.epsilon = scalar(prhs[11], "Epsilon");
  o.sigma = scalar(prhs[12], "Sigma");
  neighbours = integer(prhs[14], "Neighbours");
  if (neighbours != 0 && neighbours != 6 && neighbours != 26)
    fail("horecon:invalidArgument", "Neighbours must be 6 (axis differences) or 26 (all neighbours), got %lld",
         (long long)neighbours);
  o.neighbours = (int32_t)neighbours;
  for (i = 0; i < 3; ++i) grid_axes += e->dims[i] > 1;
  /* columns of FdWeights: the grid axes, or with Neighbours = 26 the 13 / 4 / 1 directions in 3D / 2D / 1D */
  directions = neighbours == 26 ? (grid_axes == 3 ? 13 : grid_axes == 2 ? 4 : 1) : (grid_axes == 0 ? 1 : grid_axes);
  if (!mxIsEmpty(prhs[13]))
    o.fd_weights = real_singles(prhs[13], "FdWeights", voxels(e) * (size_t)directions,
                                neighbours == 26 ? "N x ndirections (13 in 3D, 4 in 2D, 1 in 1D; Neighbours = 26)"
                                                 : "N x ndims (grid axes with more than one voxel)");
  /* TV and Laplace run `reweightings` CG solves: room for every iteration's residual */
  progress.capacity = o.max_iterations * (o.regularizer >= HORECON_REG_TOTAL_VARIATION && reweightings > 1 ? (int32_t)reweightings : 1) + 1;
  progress.residuals = (double *)mxCalloc((size_t)progress.capacity, sizeof(double));
  progress.count = 0;
  progress.interrupted = 0;
  o.progress = on_progress;
  o.progress_user = &progress;
  s = horecon_cg(e->plan, d, &o, x, &info);
  if (s == HORECON_ERR_CANCELLED && progress.interrupted)
    fail("horecon:cancelled", "horecon cg: interrupted (Ctrl-C) after %d iterations; the plan is still usable",
         progress.count);
  check(s);
  check(horecon_plan_backend(e->plan, &backend));
  if (verbose) {
    for (i = 0; i < progress.count; ++i)
      mexPrintf("horecon cg: iteration %4d  relative residual %.3e\n", i + 1, progress.residuals[i]);
    mexPrintf("horecon cg: %d iterations, relative residual %.3e, %s, %.3f s on %s\n", info.iterations,
              info.rel_residual, info.converged ? "converged" : "not converged", info.seconds,
              backend == HORECON_BACKEND_CUDA ? "cuda" : "cpu");
  }
  plhs[0] = complex_output(voxels(e), 1, x);
  if (nlhs > 1) {
    double *r;
    mxArray *res = real_output((size_t)progress.count, 1, &r);
    for (i = 0; i < progress.count; ++i) r[i] = progress.residuals[i];
    plhs[1] = mxCreateStructMatrix(1, 1, 6, fields);
    mxSetField(plhs[1], 0, "iterations", mxCreateDoubleScalar(info.iterations));
    mxSetField(plhs[1], 0, "converged", mxCreateLogicalScalar(info.converged != 0));
    mxSetField(plhs[1], 0, "relResidual", mxCreateDoubleScalar(info.rel_residual));
    mxSetField(plhs[1], 0, "seconds", mxCreateDoubleScalar(info.seconds));
    mxSetField(plhs[1], 0, "residuals", res);
    mxSetField(plhs[1], 0, "backend", mxCreateString(backend == HORECON_BACKEND_CUDA ? "cuda" : "cpu"));
  }
}

static void cmd_backend(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int32_t backend = 0;
  need_args(nrhs, 2, "backend");
  e = plan_arg(prhs[1]);
  check(horecon_plan_backend(e->plan, &backend));
  plhs[0] = mxCreateString(backend == HORECON_BACKEND_CUDA ? "cuda" : "cpu");
}

/* ---------------------------------------------------------- simulation */

static size_t points(const mxArray *a, const char *name) {
  size_t n;
  check_numeric(a, name);
  n = mxGetNumberOfElements(a);
  if (n == 0 || n % 3 != 0) fail("horecon:sizeMismatch", "%s has %zu elements, not N x 3", name, n);
  return n / 3;
}

static void cmd_sim_shepp_logan(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  double *v;
  need_args(nrhs, 5, "simSheppLogan");
  n = points(prhs[4], "P");
  plhs[0] = real_output(n, 1, &v);
  check(horecon_sim_shepp_logan((int32_t)integer(prhs[1], "ndims"), real_arg(prhs[2], "fov", 3, "3"),
                                real_arg(prhs[3], "center", 3, "3"), (int64_t)n, real_values(prhs[4], "P"), v));
}

static void cmd_sim_shepp_logan_kspace(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t m, total;
  int64_t kdims;
  double *re, *im;
  need_args(nrhs, 6, "simSheppLoganKspace");
  kdims = integer(prhs[5], "kdims");
  check_numeric(prhs[4], "k");
  total = mxGetNumberOfElements(prhs[4]);
  if (kdims < 1 || kdims > 3 || total == 0 || total % (size_t)kdims != 0)
    fail("horecon:sizeMismatch", "k has %zu elements, not M x %lld", total, (long long)kdims);
  m = total / (size_t)kdims;
  re = (double *)mxMalloc(m * sizeof(double));
  im = (double *)mxMalloc(m * sizeof(double));
  check(horecon_sim_shepp_logan_kspace((int32_t)integer(prhs[1], "ndims"), real_arg(prhs[2], "fov", 3, "3"),
                                       real_arg(prhs[3], "center", 3, "3"), (int64_t)m, (int32_t)kdims,
                                       real_values(prhs[4], "k"), re, im));
  plhs[0] = complex_double_output(m, 1, re, im);
}

static void cmd_sim_band_limited(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  horecon_c32 *v;
  need_args(nrhs, 6, "simSheppLoganBandLimited");
  n = points(prhs[3], "P");
  v = (horecon_c32 *)mxMalloc(n * sizeof(horecon_c32));
  check(horecon_sim_shepp_logan_band_limited(real_arg(prhs[1], "fov", 3, "3"), real_arg(prhs[2], "center", 3, "3"),
                                             (int64_t)n, real_values(prhs[3], "P"),
                                             real_arg(prhs[4], "gridFov", 2, "[fx fy]"), scalar(prhs[5], "kmax"), v));
  plhs[0] = complex_output(n, 1, v);
}

/* Trajectories: query the count, then fill. kind: 0 spiral, 1 radial, 2 epi, 3 cartesian, 4 stack. */
static horecon_status trajectory(int kind, const double *a, int64_t *m, double *k, double *t) {
  switch (kind) {
    case 0: return horecon_sim_spiral((int64_t)a[0], a[1], a[2], a[3], a[4], m, k, t);
    case 1: return horecon_sim_radial((int64_t)a[0], a[1], (int64_t)a[2], a[3], a[4], m, k, t);
    case 2: return horecon_sim_epi((int64_t)a[0], a[1], (int64_t)a[2], a[3], a[4], m, k, t);
    case 3: return horecon_sim_cartesian((int64_t)a[0], (int64_t)a[1], a[2], a[3], a[4], a[5], m, k, t);
    default: return horecon_sim_stack_of_spirals((int64_t)a[0], (int64_t)a[1], a[2], a[3], a[4], a[5], a[6], m, k, t);
  }
}

static void cmd_sim_trajectory(int kind, int nargs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  static const char *names[] = {"simSpiral", "simRadial", "simEpi", "simCartesian", "simStackOfSpirals"};
  double a[7];
  int i, ndims = kind == 4 ? 3 : 2;
  int64_t m = 0;
  double *k, *t;
  need_args(nrhs, nargs + 1, names[kind]);
  for (i = 0; i < nargs; ++i) a[i] = scalar(prhs[i + 1], "trajectory parameter");
  check(trajectory(kind, a, &m, NULL, NULL));
  plhs[0] = real_output((size_t)m, (size_t)ndims, &k);
  plhs[1] = real_output((size_t)m, 1, &t);
  check(trajectory(kind, a, &m, k, t));
}

static void cmd_sim_coils(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  int64_t l;
  horecon_c32 *s;
  need_args(nrhs, 5, "simCoilSensitivities");
  n = points(prhs[1], "P");
  l = integer(prhs[2], "ncoils");
  if (l < 1 || l > 1024) fail("horecon:invalidArgument", "ncoils must be 1..1024, got %lld", (long long)l);
  s = (horecon_c32 *)mxMalloc(n * (size_t)l * sizeof(horecon_c32));
  check(horecon_sim_coil_sensitivities((int64_t)n, real_values(prhs[1], "P"), (int32_t)l, scalar(prhs[3], "radius"),
                                       real_arg(prhs[4], "center", 3, "3"), s));
  plhs[0] = complex_output(n, (size_t)l, s);
}

static void cmd_sim_off_resonance(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  double *w;
  need_args(nrhs, 5, "simOffResonance");
  n = points(prhs[1], "P");
  plhs[0] = real_output(n, 1, &w);
  check(horecon_sim_off_resonance((int64_t)n, real_values(prhs[1], "P"), real_arg(prhs[2], "fov", 3, "3"),
                                  real_arg(prhs[3], "center", 3, "3"), scalar(prhs[4], "maxHz"), w));
}

static void cmd_sim_field_coefficients(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t m, d;
  double *c, seed;
  need_args(nrhs, 5, "simFieldCoefficients");
  check_numeric(prhs[1], "k");
  m = mxGetM(prhs[1]);
  d = mxGetNumberOfElements(prhs[1]) / (m ? m : 1);
  if (m == 0 || d < 1 || d > 3 || m * d != mxGetNumberOfElements(prhs[1]))
    fail("horecon:sizeMismatch", "k must be M x d with d = 1..3");
  seed = scalar(prhs[4], "seed");
  if (seed < 0 || seed != floor(seed)) fail("horecon:invalidArgument", "seed must be a non-negative integer");
  plhs[0] = real_output(m, 16, &c);
  check(horecon_sim_field_coefficients((int64_t)m, (int32_t)d, real_values(prhs[1], "k"), scalar(prhs[2], "dwell"),
                                       scalar(prhs[3], "strength"), (uint64_t)seed, c));
}

static void cmd_sim_add_noise(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  horecon_c32 *d;
  double sigma = 0, seed;
  need_args(nrhs, 4, "simAddNoise");
  check_numeric(prhs[1], "d");
  n = mxGetNumberOfElements(prhs[1]);
  if (n == 0) fail("horecon:sizeMismatch", "d is empty");
  d = complex_values(prhs[1], "d");
  seed = scalar(prhs[3], "seed");
  if (seed < 0 || seed != floor(seed)) fail("horecon:invalidArgument", "seed must be a non-negative integer");
  check(horecon_sim_add_noise((int64_t)n, d, scalar(prhs[2], "snr"), (uint64_t)seed, &sigma));
  plhs[0] = complex_output(mxGetM(prhs[1]), n / (mxGetM(prhs[1]) ? mxGetM(prhs[1]) : 1), d);
  if (nlhs > 1) plhs[1] = mxCreateDoubleScalar(sigma);
}

static void cmd_sim_refined_grid(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  double *dims, *p;
  int64_t n = 0;
  int32_t factor;
  need_args(nrhs, 5, "simRefinedGrid");
  dims = real_arg(prhs[1], "dims", 3, "[nx ny nz]");
  factor = (int32_t)integer(prhs[4], "factor");
  check(horecon_sim_refined_grid((int64_t)dims[0], (int64_t)dims[1], (int64_t)dims[2], real_arg(prhs[2], "fov", 3, "3"),
                                 real_arg(prhs[3], "center", 3, "3"), factor, &n, NULL));
  plhs[0] = real_output((size_t)n, 3, &p);
  check(horecon_sim_refined_grid((int64_t)dims[0], (int64_t)dims[1], (int64_t)dims[2], real_arg(prhs[2], "fov", 3, "3"),
                                 real_arg(prhs[3], "center", 3, "3"), factor, &n, p));
}

static void cmd_sim_block_average(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  double *dims;
  int64_t f;
  size_t n, nfine, i;
  horecon_c32 *out;
  need_args(nrhs, 4, "simBlockAverage");
  dims = real_arg(prhs[1], "dims", 3, "[nx ny nz]");
  f = integer(prhs[2], "factor");
  if (f < 1 || f > 16) fail("horecon:invalidArgument", "factor must be 1..16, got %lld", (long long)f);
  for (i = 0; i < 3; ++i)
    if (dims[i] < 1 || dims[i] > 1e6 || dims[i] != floor(dims[i])) fail("horecon:invalidArgument", "dims must be positive integers");
  n = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
  nfine = 1;
  for (i = 0; i < 3; ++i) nfine *= (size_t)dims[i] > 1 ? (size_t)dims[i] * (size_t)f : 1;
  out = (horecon_c32 *)mxMalloc(n * sizeof(horecon_c32));
  check(horecon_sim_block_average((int64_t)dims[0], (int64_t)dims[1], (int64_t)dims[2], (int32_t)f,
                                  complex_arg(prhs[3], "fine", nfine, "the refined grid"), out));
  plhs[0] = complex_output(n, 1, out);
}

static void cmd_sim_metric(int which, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  double out = 0;
  horecon_c32 *x, *r;
  need_args(nrhs, 3, which == 0 ? "simNrmse" : which == 1 ? "simPsnr" : "simPercentError");
  check_numeric(prhs[2], "reference");
  n = mxGetNumberOfElements(prhs[2]);
  x = complex_arg(prhs[1], "x", n, "numel(reference)");
  r = complex_values(prhs[2], "reference");
  if (n == 0) fail("horecon:sizeMismatch", "the images are empty");
  if (which == 0) check(horecon_sim_nrmse((int64_t)n, x, r, &out));
  else if (which == 1) check(horecon_sim_psnr((int64_t)n, x, r, &out));
  else check(horecon_sim_percent_error((int64_t)n, x, r, &out));
  plhs[0] = mxCreateDoubleScalar(out);
}

static void cmd_sim_density_weights(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t m;
  float *w;
  double *out;
  size_t i;
  need_args(nrhs, 2, "simDensityWeights");
  check_numeric(prhs[1], "k");
  m = mxGetM(prhs[1]);
  if (m < 2 || mxGetNumberOfElements(prhs[1]) != 2 * m) fail("horecon:sizeMismatch", "k must be M x 2");
  w = (float *)mxMalloc(m * sizeof(float));
  check(horecon_sim_density_weights((int64_t)m, real_values(prhs[1], "k"), w));
  plhs[0] = real_output(m, 1, &out);
  for (i = 0; i < m; ++i) out[i] = w[i];
}

/* ------------------------------------------------------------- gateway */

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  char *command;
  if (nrhs < 1 || !mxIsChar(prhs[0]))
    fail("horecon:invalidArgument", "usage: horecon_mex(command, ...); use the +horecon package");
  command = mxArrayToString(prhs[0]);
  if (command == NULL) fail("horecon:invalidArgument", "the command must be a character row vector");
  horecon_sim_set_progress(long_call_progress, NULL); /* Ctrl-C cancels toolkit calls */

  if (!strcmp(command, "version")) plhs[0] = mxCreateString(horecon_version());
  else if (!strcmp(command, "cudaDeviceCount")) {
    int32_t count = 0;
    check(horecon_cuda_device_count(&count));
    plhs[0] = mxCreateDoubleScalar(count);
  } else if (!strcmp(command, "livePlans")) plhs[0] = mxCreateDoubleScalar((double)registry_len);
  else if (!strcmp(command, "raiseStatus")) {
    /* test hook: the error a status becomes, for statuses no MATLAB input can
       produce here (null pointers, CUDA failures, internal errors) */
    horecon_status s;
    need_args(nrhs, 2, "raiseStatus");
    s = (horecon_status)integer(prhs[1], "status");
    if (s != HORECON_OK) mexErrMsgIdAndTxt(status_id(s), "%s", horecon_status_string(s));
  }
  else if (!strcmp(command, "create")) cmd_create(nlhs, plhs, nrhs, prhs);
  else if (!strcmp(command, "destroy")) cmd_destroy(nrhs, prhs);
  else if (!strcmp(command, "backend")) cmd_backend(plhs, nrhs, prhs);
  else if (!strcmp(command, "setPositions")) cmd_set_positions(nrhs, prhs);
  else if (!strcmp(command, "setGridPositions")) cmd_set_grid_positions(nrhs, prhs);
  else if (!strcmp(command, "setCartesian")) cmd_set_cartesian(nrhs, prhs);
  else if (!strcmp(command, "setSolidHarmonics")) cmd_set_solid_harmonics(nrhs, prhs);
  else if (!strcmp(command, "setBasis")) cmd_set_basis(nrhs, prhs);
  else if (!strcmp(command, "setTrajectory")) cmd_set_trajectory(nrhs, prhs);
  else if (!strcmp(command, "setOffResonance")) cmd_set_off_resonance(nrhs, prhs);
  else if (!strcmp(command, "setSensitivities")) cmd_set_sensitivities(nrhs, prhs);
  else if (!strcmp(command, "setToeplitz")) cmd_set_toeplitz(nrhs, prhs);
  else if (!strcmp(command, "forward")) cmd_forward(plhs, nrhs, prhs);
  else if (!strcmp(command, "adjoint")) cmd_adjoint(plhs, nrhs, prhs);
  else if (!strcmp(command, "normal")) cmd_normal(plhs, nrhs, prhs);
  else if (!strcmp(command, "cg")) cmd_cg(nlhs, plhs, nrhs, prhs);
  else if (!strcmp(command, "gridding")) cmd_gridding(plhs, nrhs, prhs);
  else if (!strcmp(command, "fhd")) cmd_fhd(plhs, nrhs, prhs);
  else if (!strcmp(command, "q")) cmd_q(plhs, nrhs, prhs);
  else if (!strcmp(command, "qDims")) cmd_q_dims(plhs, nrhs, prhs);
  else if (!strcmp(command, "simSheppLogan")) cmd_sim_shepp_logan(plhs, nrhs, prhs);
  else if (!strcmp(command, "simSheppLoganKspace")) cmd_sim_shepp_logan_kspace(plhs, nrhs, prhs);
  else if (!strcmp(command, "simSheppLoganBandLimited")) cmd_sim_band_limited(plhs, nrhs, prhs);
  else if (!strcmp(command, "simSpiral")) cmd_sim_trajectory(0, 5, plhs, nrhs, prhs);
  else if (!strcmp(command, "simRadial")) cmd_sim_trajectory(1, 5, plhs, nrhs, prhs);
  else if (!strcmp(command, "simEpi")) cmd_sim_trajectory(2, 5, plhs, nrhs, prhs);
  else if (!strcmp(command, "simCartesian")) cmd_sim_trajectory(3, 6, plhs, nrhs, prhs);
  else if (!strcmp(command, "simStackOfSpirals")) cmd_sim_trajectory(4, 7, plhs, nrhs, prhs);
  else if (!strcmp(command, "simCoilSensitivities")) cmd_sim_coils(plhs, nrhs, prhs);
  else if (!strcmp(command, "simOffResonance")) cmd_sim_off_resonance(plhs, nrhs, prhs);
  else if (!strcmp(command, "simFieldCoefficients")) cmd_sim_field_coefficients(plhs, nrhs, prhs);
  else if (!strcmp(command, "simAddNoise")) cmd_sim_add_noise(nlhs, plhs, nrhs, prhs);
  else if (!strcmp(command, "simRefinedGrid")) cmd_sim_refined_grid(plhs, nrhs, prhs);
  else if (!strcmp(command, "simBlockAverage")) cmd_sim_block_average(plhs, nrhs, prhs);
  else if (!strcmp(command, "simNrmse")) cmd_sim_metric(0, plhs, nrhs, prhs);
  else if (!strcmp(command, "simPsnr")) cmd_sim_metric(1, plhs, nrhs, prhs);
  else if (!strcmp(command, "simPercentError")) cmd_sim_metric(2, plhs, nrhs, prhs);
  else if (!strcmp(command, "simDensityWeights")) cmd_sim_density_weights(plhs, nrhs, prhs);
  else fail("horecon:invalidArgument", "unknown command '%s'", command);
}
