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
 * Ctrl-C: every long call (operators, cg, gridding, Fhd/Q, the toolkit) has
 * the plan-level progress callback (horecon_set_progress, and
 * horecon_sim_set_progress for the toolkit), which the library calls on
 * MATLAB's thread between chunks of work; it reports a pending interrupt
 * (utIsInterruptPending in MATLAB, octave_interrupt_state in Octave, build
 * with -DHORECON_OCTAVE), the call stops cleanly with HORECON_ERR_CANCELLED
 * and the MEX raises horecon:cancelled. cg's iteration callback (possibly on
 * a worker thread) only reads that flag; residuals are printed after the solve.
 *
 * Progress display (horecon.progress): a call still running after `delay`
 * seconds (1) shows a waitbar (MATLAB desktop, Octave GUI) or a text line
 * (terminal sessions), drawn by horecon.internal.progressDisplay at most
 * every 0.2 s; its Cancel button, or closing it, cancels the call. That
 * MATLAB code runs from inside the library call, so: trapped
 * (mexCallMATLABWithTrap: its errors never unwind through the library), with
 * Ctrl-C deferred in Octave (an interrupt would be thrown through the
 * library's frames; it is re-raised after), and horecon_mex refuses to be
 * entered from it (horecon:busy: a timer or GUI callback must not touch a
 * plan in use).
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sigaction, kill */
#endif
#include "mex.h"
#include "horecon.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(_WIN32)
#include <windows.h>
#else
#include <time.h>
#include <unistd.h>
#endif

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

/* ------------------------------------------------------ progress display */

enum { DISPLAY_OFF, DISPLAY_AUTO, DISPLAY_WAITBAR, DISPLAY_TEXT, DISPLAY_MODES };
static const char *const display_modes[DISPLAY_MODES] = {"off", "auto", "waitbar", "text"};
static int display_mode = DISPLAY_AUTO;
static double display_delay = 1.0; /* seconds before a call shows its progress */
#define DISPLAY_INTERVAL 0.2       /* seconds between two updates */

/* The display of the command running now. */
static struct {
  char label[64];
  double started, shown_at;
  int shown;   /* the display was drawn: it must be closed */
  int stopped; /* its Cancel button (or closing it) asked to stop */
  const char *cancelled_by; /* what cancelled the call: Ctrl-C or the display, NULL if nothing did */
  int broken;  /* its MATLAB code failed: not called again in this call */
} display;
static int in_display = 0; /* the display's MATLAB code is running */

/* Plans deleted by MATLAB code that ran inside the display (their handle
 * objects went away then): destroyed once the call in progress is over. */
#define PENDING_DESTROYS 64
static uint64_t pending_destroys[PENDING_DESTROYS];
static int pending_count = 0;
static void destroy_handle(uint64_t handle);

static double seconds_now(void) {
#if defined(_WIN32)
  return (double)GetTickCount64() / 1000.0;
#else
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
#endif
}

#if defined(HORECON_OCTAVE) && !defined(_WIN32)
/* Octave throws Ctrl-C as a C++ exception from inside the interpreter (it
 * would unwind through the library's frames, or past the trap): while the
 * display's code runs, a pending interrupt is set aside, a new SIGINT is only
 * noted, and both are restored after. */
static volatile sig_atomic_t deferred_interrupt = 0;
static struct sigaction saved_sigint;
static sig_atomic_t held_interrupt = 0;
static void note_sigint(int sig) {
  (void)sig;
  deferred_interrupt = 1;
}
static void defer_interrupts(int on) {
  if (on) {
    struct sigaction quiet;
    memset(&quiet, 0, sizeof quiet);
    quiet.sa_handler = note_sigint;
    sigemptyset(&quiet.sa_mask);
    sigaction(SIGINT, &quiet, &saved_sigint);
    held_interrupt = octave_interrupt_state;
    if (held_interrupt > 0) octave_interrupt_state = 0;
  } else {
    if (held_interrupt > 0) octave_interrupt_state = held_interrupt;
    held_interrupt = 0;
    sigaction(SIGINT, &saved_sigint, NULL);
    if (deferred_interrupt) {
      deferred_interrupt = 0;
      kill(getpid(), SIGINT); /* Octave's own handler now marks the interrupt */
    }
  }
}
#else
/* MATLAB traps an interrupt inside mexCallMATLABWithTrap like any error. */
static void defer_interrupts(int on) { (void)on; }
#endif

/* Draws the display (horecon.internal.progressDisplay, trapped); true when it
 * asks to cancel. finished: 0 running, 1 done, 2 stopped (an error). */
static int draw_display(double fraction, int finished) {
  mxArray *in[5], *out[1] = {NULL}, *failure;
  int i, stop = 0;
  if (display.broken) return 0;
  if (!finished && interrupt_pending()) return 1; /* Ctrl-C first: it cancels, no drawing */
  defer_interrupts(1);
  in[0] = mxCreateString(display.label);
  in[1] = mxCreateDoubleScalar(fraction);
  in[2] = mxCreateDoubleScalar(seconds_now() - display.started);
  in[3] = mxCreateDoubleScalar(finished);
  in[4] = mxCreateString(display_modes[display_mode]);
  in_display = 1;
  failure = mexCallMATLABWithTrap(1, out, 5, in, "horecon.internal.progressDisplay");
  in_display = 0;
  defer_interrupts(0);
  if (failure != NULL) {
    display.broken = 1;
    mxDestroyArray(failure);
  } else if (out[0] != NULL) {
    stop = (mxIsLogical(out[0]) || mxIsNumeric(out[0])) && mxGetNumberOfElements(out[0]) == 1 &&
           mxGetScalar(out[0]) != 0.0;
    mxDestroyArray(out[0]);
  }
  for (i = 0; i < 5; ++i) mxDestroyArray(in[i]);
  return stop;
}

/* Closes the display of the command that ran last, if it was drawn: done,
 * or stopped by an error. */
static void end_display(int stopped) {
  if (display.shown) {
    display.shown = 0;
    draw_display(1.0, stopped ? 2 : 1);
  }
  display.label[0] = '\0';
  while (pending_count > 0) destroy_handle(pending_destroys[--pending_count]);
}

static void begin_display(const char *label) {
  end_display(1); /* a command that ended in a MATLAB error left it open */
  snprintf(display.label, sizeof display.label, "%s", label);
  display.started = seconds_now();
  display.shown = display.stopped = display.broken = 0;
  display.cancelled_by = NULL;
}

static void fail(const char *id, const char *fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  end_display(1);
  mexErrMsgIdAndTxt(id, "%s", text);
}

/* Progress of the library's long calls (issue 11): called on MATLAB's thread
 * between chunks of work; a pending Ctrl-C, or the display's Cancel, cancels
 * the call (horecon:cancelled), the plan stays usable. Installed on every
 * plan and for the toolkit. */
/* Why the call must stop, or NULL. */
static const char *cancel_reason(void) {
  if (interrupt_pending()) return "interrupted (Ctrl-C)";
  if (display.stopped) return "cancelled (the progress display's Cancel)";
  return NULL;
}

static int32_t long_call_progress(void *user, double fraction) {
  double now;
  (void)user;
  if ((display.cancelled_by = cancel_reason()) != NULL) return 1;
  if (display_mode == DISPLAY_OFF || display.label[0] == '\0' || in_display) return 0;
  now = seconds_now();
  if (now - display.started < display_delay || (display.shown && now - display.shown_at < DISPLAY_INTERVAL))
    return 0;
  display.shown = 1;
  display.shown_at = now;
  if (draw_display(fraction, 0)) display.stopped = 1;
  display.cancelled_by = cancel_reason();
  return display.cancelled_by != NULL;
}

/* A failing status becomes horecon:<name> with the library's message (and
 * what cancelled a cancelled call). */
static void check(horecon_status s) {
  if (s != HORECON_OK) {
    char text[1024];
    if (s == HORECON_ERR_CANCELLED && display.cancelled_by != NULL)
      snprintf(text, sizeof text, "%s: %s", display.cancelled_by, horecon_last_error());
    else
      snprintf(text, sizeof text, "%s", horecon_last_error());
    end_display(1);
    mexErrMsgIdAndTxt(status_id(s), "%s", text);
  }
}

/* ---------------------------------------------------------- plan registry */

typedef struct {
  uint64_t id; /* the handle MATLAB holds (new_handle) */
  horecon_plan *plan;
  int64_t dims[3];
  int64_t coils;
  int64_t samples;
} plan_entry;

/* Handles are opaque ids, not addresses: a nonce drawn when this MEX is
 * loaded (high 32 bits) and a counter (low 32), so a Plan object that outlived
 * `clear horecon_mex` never names a plan of the next session (a reused
 * address would), and is refused as deleted. */
static uint64_t new_handle(void) {
  static uint64_t session = 0, counter = 0;
  if (session == 0) { /* splitmix64 of the load time and an address */
    uint64_t x = (uint64_t)(seconds_now() * 1e9) ^ ((uint64_t)(uintptr_t)&counter << 20);
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    session = (x | 1u) << 32;
  }
  counter = (counter + 1) & 0xFFFFFFFFu;
  return session | counter;
}

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
    if (registry[i].id == handle) return &registry[i];
  return NULL;
}

/* The value of a handle argument (`what`: "plan", "NUFFT plan"). */
static uint64_t handle_value(const mxArray *a, const char *what) {
  if (!mxIsUint64(a) || mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    fail("horecon:invalidArgument", "the %s handle must be a uint64 scalar", what);
  return *(const uint64_t *)mxGetData(a);
}

static plan_entry *plan_arg(const mxArray *a) {
  plan_entry *e = find_plan(handle_value(a, "plan"));
  if (e == NULL)
    fail("horecon:invalidArgument", "invalid or deleted plan (its handle is not alive)");
  return e;
}

static size_t voxels(const plan_entry *e) { return (size_t)(e->dims[0] * e->dims[1] * e->dims[2]); }

/* --------------------------------------------------------------- inputs */

static void check_numeric(const mxArray *a, const char *name) {
  if (!(mxIsDouble(a) || mxIsSingle(a)) || mxIsSparse(a))
    fail("horecon:invalidArgument", "%s must be a full double or single array, got %s%s", name,
         mxIsSparse(a) ? "a sparse " : "", mxGetClassName(a));
}

static void check_count(const mxArray *a, const char *name, size_t expected, const char *shape) {
  size_t got = mxGetNumberOfElements(a);
  if (got != expected)
    fail("horecon:sizeMismatch", "%s has %zu elements, expected %zu (%s)", name, got, expected, shape);
}

/* A matrix argument of `rows` rows, read column-major as the C API does: a
   two-dimensional array shaped as its transpose (`rows` columns and another
   number of rows, more than one) is an error, not a wrong result. Anything
   else goes by its element count: vectors, arrays of more dimensions, an
   image of the plan's grid, one coil's data as a matrix. */
static void check_rows(const mxArray *a, const char *name, size_t rows, const char *shape) {
  const mwSize *size = mxGetDimensions(a);
  if (mxGetNumberOfDimensions(a) == 2 && size[0] > 1 && (size_t)size[0] != rows && (size_t)size[1] == rows)
    fail("horecon:sizeMismatch", "%s is %zu x %zu, expected %zu rows (%s; a transposed matrix?)", name,
         (size_t)size[0], (size_t)size[1], rows, shape);
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
    fail("horecon:invalidArgument", "%s must be a real numeric scalar, got %s%s", name,
         mxIsSparse(a) ? "a sparse " : "", mxGetClassName(a));
  if (mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    fail("horecon:invalidArgument", "%s must be a real scalar", name);
  return mxGetScalar(a);
}

/* A true/false scalar: logical, or a number that is 0 or 1 (NaN is neither). */
static int flag(const mxArray *a, const char *name) {
  double v = scalar(a, name);
  if (v != 0.0 && v != 1.0) fail("horecon:invalidArgument", "%s must be true or false (1 or 0), got %g", name, v);
  return v != 0.0;
}

static int64_t integer(const mxArray *a, const char *name) {
  double v = scalar(a, name);
  if (!(v == floor(v)) || fabs(v) > 9.0e15)
    fail("horecon:invalidArgument", "%s must be an integer, got %g", name, v);
  return (int64_t)v;
}

/* An integer that fits the C API's int32_t arguments. */
static int32_t integer32(const mxArray *a, const char *name) {
  int64_t v = integer(a, name);
  if (v < INT32_MIN || v > INT32_MAX)
    fail("horecon:invalidArgument", "%s = %lld is out of range (a 32-bit integer)", name, (long long)v);
  return (int32_t)v;
}

/* A non-negative integer that fits int32_t (bit masks, counts). */
static int32_t non_negative32(const mxArray *a, const char *name) {
  int32_t v = integer32(a, name);
  if (v < 0) fail("horecon:invalidArgument", "%s must be a non-negative integer, got %d", name, (int)v);
  return v;
}

/* A non-negative integer seed (exact in a double). */
static uint64_t seed_arg(const mxArray *a, const char *name) {
  int64_t v = integer(a, name);
  if (v < 0) fail("horecon:invalidArgument", "%s must be a non-negative integer, got %lld", name, (long long)v);
  return (uint64_t)v;
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
  o.backend = integer32(prhs[4], "Backend");
  o.precision = integer32(prhs[5], "Precision");
  o.device = integer32(prhs[6], "Device");
  o.num_threads = integer32(prhs[7], "Threads");
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
  registry[registry_len].id = new_handle();
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
  *(uint64_t *)mxGetData(plhs[0]) = registry[registry_len - 1].id;
  (void)nlhs;
}

/* Destroys the plan of `handle`; an unknown handle (already destroyed) is a no-op. */
static void destroy_handle(uint64_t handle) {
  size_t i;
  for (i = 0; i < registry_len; ++i) {
    if (registry[i].id == handle) {
      horecon_plan_destroy(registry[i].plan);
      registry[i] = registry[registry_len - 1];
      --registry_len;
      return;
    }
  }
}

static void cmd_destroy(int nrhs, const mxArray *prhs[]) {
  need_args(nrhs, 2, "destroy");
  destroy_handle(handle_value(prhs[1], "plan"));
}

static void cmd_set_positions(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  need_args(nrhs, 3, "setPositions");
  e = plan_arg(prhs[1]);
  check_numeric(prhs[2], "P");
  check_rows(prhs[2], "P", voxels(e), "N x 3");
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
  if (mxIsSparse(prhs[2])) /* a sparse array stores only its non-zeros: read it full */
    fail("horecon:invalidArgument", "mask must be a full array, got a sparse %s (use full(mask))",
         mxGetClassName(prhs[2]));
  check_count(prhs[2], "mask", n, "N = nx*ny*nz, [nx ny nz] or [nx ny]");
  mask = (uint8_t *)mxMalloc((n ? n : 1) * sizeof(uint8_t));
  if (mxIsLogical(prhs[2])) {
    const mxLogical *l = mxGetLogicals(prhs[2]);
    for (i = 0; i < n; ++i) mask[i] = l[i] ? 1 : 0;
  } else {
    const double *d = real_values(prhs[2], "mask");
    for (i = 0; i < n; ++i) {
      if (d[i] != d[i]) fail("horecon:notFinite", "mask(%zu) is NaN (sampled or not?)", i + 1);
      mask[i] = d[i] != 0.0 ? 1 : 0;
    }
  }
  check(horecon_set_cartesian(e->plan, mask));
}

/* The number of columns B of an M x B (or N x B) matrix with `rows` rows. */
static int32_t columns(const mxArray *a, const char *name, size_t rows, const char *shape) {
  size_t n;
  check_numeric(a, name);
  check_rows(a, name, rows, shape);
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
  check_rows(prhs[3], "coef", (size_t)e->samples, "M x B");
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
  check_numeric(prhs[2], "S");
  check_rows(prhs[2], "S", voxels(e), "N x L or [nx ny nz L]");
  check(horecon_set_sensitivities(
      e->plan, complex_arg(prhs[2], "S", voxels(e) * (size_t)e->coils, "N x L or [nx ny nz L]")));
}

static void cmd_set_toeplitz(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int32_t segments;
  need_args(nrhs, 4, "setToeplitz");
  e = plan_arg(prhs[1]);
  segments = integer32(prhs[3], "TimeSegments");
  check(horecon_set_toeplitz(e->plan, flag(prhs[2], "enable"), segments));
}

/* Data d of a plan, M x L. */
static horecon_c32 *data_arg(const mxArray *a, const plan_entry *e) {
  check_numeric(a, "d");
  check_rows(a, "d", (size_t)e->samples, "M x L");
  return complex_arg(a, "d", (size_t)(e->samples * e->coils), "M x L");
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
  d = data_arg(prhs[2], e);
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
  d = data_arg(prhs[2], e);
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
  static const char *fields[] = {"iterations", "converged", "relResidual", "seconds", "residuals", "backend",
                                 "stopReason", "dataResidual"};
  static const char *stops[] = {"", "tolerance", "maxIterations", "discrepancy", "breakdown"};
  plan_entry *e;
  horecon_cg_options o;
  horecon_cg_info info;
  horecon_c32 *d, *x;
  cg_progress progress;
  int verbose;
  int32_t backend = 0, i;
  int64_t reweightings, neighbours, grid_axes = 0, directions;
  horecon_status s;
  if (nrhs != 18) need_args(nrhs, 15, "cg"); /* 18: + Preconditioner, DiscrepancyTau, NoiseSigma */
  e = plan_arg(prhs[1]);
  d = data_arg(prhs[2], e);
  horecon_default_cg_options(&o);
  {
    int64_t it = integer(prhs[3], "MaxIterations");
    if (it < 0 || it > 1000000) fail("horecon:invalidArgument", "MaxIterations must be 0..1e6, got %lld", (long long)it);
    o.max_iterations = (int32_t)it;
  }
  o.tolerance = scalar(prhs[4], "Tolerance");
  o.regularizer = integer32(prhs[5], "Regularizer");
  o.lambda = scalar(prhs[6], "Lambda");
  if (!mxIsEmpty(prhs[7])) o.sample_weights = real_singles(prhs[7], "SampleWeights", (size_t)e->samples, "M");
  if (!mxIsEmpty(prhs[8])) {
    x = complex_arg(prhs[8], "X0", voxels(e), "N = nx*ny*nz");
    o.warm_start = 1;
  } else {
    x = (horecon_c32 *)mxCalloc(voxels(e), sizeof(horecon_c32));
  }
  verbose = flag(prhs[9], "Verbose");
  reweightings = integer(prhs[10], "Reweightings");
  if (reweightings < 0 || reweightings > 10000)
    fail("horecon:invalidArgument", "Reweightings must be 0..1e4, got %lld", (long long)reweightings);
  o.reweightings = (int32_t)reweightings;
  o.epsilon = scalar(prhs[11], "Epsilon");
  o.sigma = scalar(prhs[12], "Sigma");
  neighbours = integer(prhs[14], "Neighbours");
  if (neighbours != 0 && neighbours != 6 && neighbours != 26)
    fail("horecon:invalidArgument", "Neighbours must be 6 (axis differences; 0 means the same, as in the C API) or 26 (all neighbours), got %lld",
         (long long)neighbours);
  o.neighbours = (int32_t)neighbours;
  if (nrhs == 18) {
    o.preconditioner = integer32(prhs[15], "Preconditioner");
    o.discrepancy_tau = scalar(prhs[16], "DiscrepancyTau");
    o.noise_sigma = scalar(prhs[17], "NoiseSigma");
  }
  for (i = 0; i < 3; ++i) grid_axes += e->dims[i] > 1;
  /* columns of FdWeights: the grid axes, or with Neighbours = 26 the 13 / 4 / 1 directions in 3D / 2D / 1D */
  directions = neighbours == 26 ? (grid_axes == 3 ? 13 : grid_axes == 2 ? 4 : 1) : (grid_axes == 0 ? 1 : grid_axes);
  if (!mxIsEmpty(prhs[13]))
    o.fd_weights = real_singles(prhs[13], "FdWeights", voxels(e) * (size_t)directions,
                                neighbours == 26 ? "N x ndirections (13 in 3D, 4 in 2D, 1 in 1D; Neighbours = 26)"
                                                 : "N x ndims (grid axes with more than one voxel)");
  /* TV and Laplace run `reweightings` CG solves: room for every iteration's residual
     (at most 2^20: later ones are not kept) */
  {
    int64_t solves = o.regularizer >= HORECON_REG_TOTAL_VARIATION && reweightings > 1 ? reweightings : 1;
    int64_t wanted = (int64_t)o.max_iterations * solves + 1;
    progress.capacity = (int32_t)(wanted < ((int64_t)1 << 20) ? wanted : ((int64_t)1 << 20));
  }
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
    plhs[1] = mxCreateStructMatrix(1, 1, 8, fields);
    mxSetField(plhs[1], 0, "iterations", mxCreateDoubleScalar(info.iterations));
    mxSetField(plhs[1], 0, "converged", mxCreateLogicalScalar(info.converged != 0));
    mxSetField(plhs[1], 0, "relResidual", mxCreateDoubleScalar(info.rel_residual));
    mxSetField(plhs[1], 0, "seconds", mxCreateDoubleScalar(info.seconds));
    mxSetField(plhs[1], 0, "residuals", res);
    mxSetField(plhs[1], 0, "backend", mxCreateString(backend == HORECON_BACKEND_CUDA ? "cuda" : "cpu"));
    mxSetField(plhs[1], 0, "stopReason",
               mxCreateString(info.stop_reason >= 1 && info.stop_reason <= 4 ? stops[info.stop_reason] : "unknown"));
    mxSetField(plhs[1], 0, "dataResidual", info.data_residual < 0 ? mxCreateDoubleMatrix(0, 0, mxREAL)
                                                                   : mxCreateDoubleScalar(info.data_residual));
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

static void cmd_set_approximation(int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  need_args(nrhs, 3, "setApproximation");
  e = plan_arg(prhs[1]);
  check(horecon_set_approximation(e->plan, scalar(prhs[2], "Approximation")));
}

static void cmd_approximation_info(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  static const char *fields[] = {"active", "rank", "estimatedError", "reason"};
  plan_entry *e;
  horecon_approximation_info info;
  need_args(nrhs, 2, "approximationInfo");
  e = plan_arg(prhs[1]);
  memset(&info, 0, sizeof info);
  info.struct_size = (uint32_t)sizeof info;
  check(horecon_get_approximation_info(e->plan, &info));
  info.reason[sizeof info.reason - 1] = '\0';
  plhs[0] = mxCreateStructMatrix(1, 1, 4, fields);
  mxSetField(plhs[0], 0, "active", mxCreateLogicalScalar(info.active != 0));
  mxSetField(plhs[0], 0, "rank", mxCreateDoubleScalar(info.rank));
  mxSetField(plhs[0], 0, "estimatedError", mxCreateDoubleScalar(info.estimated_error));
  mxSetField(plhs[0], 0, "reason", mxCreateString(info.reason));
}

/* ---------------------------------------------------------- simulation */

static size_t points(const mxArray *a, const char *name) {
  size_t n;
  check_numeric(a, name);
  n = mxGetNumberOfElements(a);
  if (n == 0 || n % 3 != 0) fail("horecon:sizeMismatch", "%s has %zu elements, not N x 3", name, n);
  check_rows(a, name, n / 3, "N x 3");
  return n / 3;
}

static void cmd_sim_shepp_logan(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  double *v;
  need_args(nrhs, 5, "simSheppLogan");
  n = points(prhs[4], "P");
  plhs[0] = real_output(n, 1, &v);
  check(horecon_sim_shepp_logan(integer32(prhs[1], "ndims"), real_arg(prhs[2], "fov", 3, "3"),
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
  check(horecon_sim_shepp_logan_kspace(integer32(prhs[1], "ndims"), real_arg(prhs[2], "fov", 3, "3"),
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

/* Trajectories: query the count, then fill. kind: 0 spiral, 1 radial, 2 epi, 3 cartesian, 4 stack;
   n[] the counts (integers), a[] the other parameters, in the order of the C API. */
static horecon_status trajectory(int kind, const int64_t *n, const double *a, int64_t *m, double *k, double *t) {
  switch (kind) {
    case 0: return horecon_sim_spiral(n[0], a[0], a[1], a[2], a[3], m, k, t);
    case 1: return horecon_sim_radial(n[0], a[0], n[1], a[1], a[2], m, k, t);
    case 2: return horecon_sim_epi(n[0], a[0], n[1], a[1], a[2], m, k, t);
    case 3: return horecon_sim_cartesian(n[0], n[1], a[0], a[1], a[2], a[3], m, k, t);
    default: return horecon_sim_stack_of_spirals(n[0], n[1], a[0], a[1], a[2], a[3], a[4], m, k, t);
  }
}

static void cmd_sim_trajectory(int kind, int nargs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  static const char *commands[] = {"simSpiral", "simRadial", "simEpi", "simCartesian", "simStackOfSpirals"};
  /* the arguments' names (as in +horecon/+sim), counts marked with '#' */
  static const char *names[5][7] = {
      {"#n", "fov", "undersampling", "dwell", "t0"},
      {"#n", "fov", "#spokes", "dwell", "t0"},
      {"#n", "fov", "#undersampling", "dwell", "t0"},
      {"#nx", "#ny", "fovX", "fovY", "dwell", "t0"},
      {"#n", "#nz", "fov", "fovZ", "undersampling", "dwell", "t0"}};
  double a[7];
  int64_t n[2];
  int i, na = 0, nn = 0, ndims = kind == 4 ? 3 : 2;
  int64_t m = 0;
  double *k, *t;
  need_args(nrhs, nargs + 1, commands[kind]);
  for (i = 0; i < nargs; ++i) {
    const char *name = names[kind][i];
    if (name[0] == '#') n[nn++] = integer(prhs[i + 1], name + 1);
    else a[na++] = scalar(prhs[i + 1], name);
  }
  check(trajectory(kind, n, a, &m, NULL, NULL));
  plhs[0] = real_output((size_t)m, (size_t)ndims, &k);
  plhs[1] = real_output((size_t)m, 1, &t);
  check(trajectory(kind, n, a, &m, k, t));
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
  double *c;
  uint64_t seed;
  need_args(nrhs, 5, "simFieldCoefficients");
  check_numeric(prhs[1], "k");
  m = mxGetM(prhs[1]);
  d = mxGetNumberOfElements(prhs[1]) / (m ? m : 1);
  if (m == 0 || d < 1 || d > 3 || m * d != mxGetNumberOfElements(prhs[1]))
    fail("horecon:sizeMismatch", "k must be M x d with d = 1..3");
  seed = seed_arg(prhs[4], "seed");
  plhs[0] = real_output(m, 16, &c);
  check(horecon_sim_field_coefficients((int64_t)m, (int32_t)d, real_values(prhs[1], "k"), scalar(prhs[2], "dwell"),
                                       scalar(prhs[3], "strength"), seed, c));
}

static void cmd_sim_add_noise(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t n;
  horecon_c32 *d;
  double sigma = 0;
  uint64_t seed;
  need_args(nrhs, 4, "simAddNoise");
  check_numeric(prhs[1], "d");
  n = mxGetNumberOfElements(prhs[1]);
  if (n == 0) fail("horecon:sizeMismatch", "d is empty");
  d = complex_values(prhs[1], "d");
  seed = seed_arg(prhs[3], "seed");
  check(horecon_sim_add_noise((int64_t)n, d, scalar(prhs[2], "snr"), seed, &sigma));
  plhs[0] = complex_output(mxGetM(prhs[1]), n / (mxGetM(prhs[1]) ? mxGetM(prhs[1]) : 1), d);
  if (nlhs > 1) plhs[1] = mxCreateDoubleScalar(sigma);
}

/* [nx ny nz] as integers (each exact in a double). */
static void grid_dims(const mxArray *a, const char *name, int64_t dims[3]) {
  double *d = real_arg(a, name, 3, "[nx ny nz]");
  int i;
  for (i = 0; i < 3; ++i) {
    if (!(d[i] == floor(d[i])) || fabs(d[i]) > 9.0e15)
      fail("horecon:invalidArgument", "%s(%d) must be an integer, got %g", name, i + 1, d[i]);
    dims[i] = (int64_t)d[i];
  }
}

static void cmd_sim_refined_grid(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  double *p;
  int64_t dims[3], n = 0;
  int32_t factor;
  need_args(nrhs, 5, "simRefinedGrid");
  grid_dims(prhs[1], "dims", dims);
  factor = integer32(prhs[4], "factor");
  check(horecon_sim_refined_grid(dims[0], dims[1], dims[2], real_arg(prhs[2], "fov", 3, "3"),
                                 real_arg(prhs[3], "center", 3, "3"), factor, &n, NULL));
  plhs[0] = real_output((size_t)n, 3, &p);
  check(horecon_sim_refined_grid(dims[0], dims[1], dims[2], real_arg(prhs[2], "fov", 3, "3"),
                                 real_arg(prhs[3], "center", 3, "3"), factor, &n, p));
}

static void cmd_sim_block_average(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  double *dims;
  int64_t f;
  size_t n, nfine, i;
  horecon_c32 *fine, *out;
  need_args(nrhs, 4, "simBlockAverage");
  dims = real_arg(prhs[1], "dims", 3, "[nx ny nz]");
  f = integer(prhs[2], "factor");
  if (f < 1 || f > 16) fail("horecon:invalidArgument", "factor must be 1..16, got %lld", (long long)f);
  for (i = 0; i < 3; ++i)
    if (dims[i] < 1 || dims[i] > 1e6 || dims[i] != floor(dims[i])) fail("horecon:invalidArgument", "dims must be positive integers");
  n = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
  nfine = 1;
  for (i = 0; i < 3; ++i) nfine *= (size_t)dims[i] > 1 ? (size_t)dims[i] * (size_t)f : 1;
  fine = complex_arg(prhs[3], "fine", nfine, "the refined grid"); /* before the output: its size first */
  out = (horecon_c32 *)mxMalloc(n * sizeof(horecon_c32));
  check(horecon_sim_block_average((int64_t)dims[0], (int64_t)dims[1], (int64_t)dims[2], (int32_t)f, fine, out));
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

/* previous = horecon_mex('progress' [, mode [, delay]]): the display of long calls. */
static void cmd_progress(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  int i, mode = -1;
  char name[16] = "";
  if (nrhs > 3) fail("horecon:invalidArgument", "horecon.progress takes at most 2 arguments (mode, delay)");
  plhs[0] = mxCreateString(display_modes[display_mode]);
  if (nrhs >= 2) {
    if (!mxIsChar(prhs[1]) || mxGetString(prhs[1], name, sizeof name) != 0)
      fail("horecon:invalidArgument", "mode must be 'auto', 'waitbar', 'text' or 'off'");
    for (i = 0; i < DISPLAY_MODES; ++i)
      if (!strcmp(name, display_modes[i])) mode = i;
    if (mode < 0) fail("horecon:invalidArgument", "mode must be 'auto', 'waitbar', 'text' or 'off', got '%s'", name);
  }
  if (nrhs >= 3) {
    double delay = scalar(prhs[2], "delay");
    if (!(delay >= 0.0 && delay <= 1e6)) fail("horecon:invalidArgument", "delay must be 0 to 1e6 seconds, got %g", delay);
    display_delay = delay;
  }
  if (mode >= 0) display_mode = mode;
}

/* ------------------------------------------------------------- gateway */

/* ------------------------------------------------ calibration (issue 12) */

/* reference geometry: dims (3), fov (3), center (3) */
static void reference_args(const mxArray *const *a, int64_t dims[3], double **fov, double **center) {
  double *d = real_arg(a[0], "refDims", 3, "[nx ny nz]");
  int i;
  for (i = 0; i < 3; ++i) {
    if (d[i] < 1 || d[i] != floor(d[i])) fail("horecon:invalidArgument", "refDims must be positive integers");
    dims[i] = (int64_t)d[i];
  }
  *fov = real_arg(a[1], "refFov", 3, "3");
  *center = real_arg(a[2], "refCenter", 3, "3");
}

static size_t dims_product(const int64_t dims[3]) { return (size_t)(dims[0] * dims[1] * dims[2]); }

static int64_t positive_count(const mxArray *a, const char *name) {
  int64_t v = integer(a, name);
  if (v < 1) fail("horecon:invalidArgument", "%s must be >= 1, got %lld", name, (long long)v);
  return v;
}

/* a covariance (L x L) and values with L columns: L and the number of values */
static void covariance_and_values(const mxArray *covariance, const mxArray *values, size_t *l, size_t *n) {
  check_numeric(covariance, "covariance");
  *l = mxGetM(covariance);
  check_count(covariance, "covariance", *l * *l, "L x L");
  check_numeric(values, "values");
  *n = mxGetNumberOfElements(values);
  if (*l == 0 || *n % *l) fail("horecon:sizeMismatch", "values must have L = %zu columns", *l);
}

/* horecon_mex('noiseCovariance', noise (Mn x L)) -> L x L */
static void cmd_noise_covariance(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t m, l;
  horecon_c32 *psi;
  need_args(nrhs, 2, "noiseCovariance");
  check_numeric(prhs[1], "noise");
  m = mxGetM(prhs[1]);
  l = mxGetN(prhs[1]);
  if (mxGetNumberOfDimensions(prhs[1]) != 2 || l > 1024)
    fail("horecon:sizeMismatch", "noise must be Mn x L (samples x coils, L at most 1024), got %zu x %zu%s", m, l,
         mxGetNumberOfDimensions(prhs[1]) != 2 ? " x ..." : "");
  psi = (horecon_c32 *)mxMalloc((l ? l * l : 1) * sizeof(horecon_c32));
  check(horecon_noise_covariance(complex_values(prhs[1], "noise"), (int64_t)m, (int64_t)l, psi));
  plhs[0] = complex_output(l, l, psi);
}

/* horecon_mex('whiten', covariance (L x L), values (P x L)) -> P x L */
static void cmd_whiten(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t l, n;
  horecon_c32 *v;
  need_args(nrhs, 3, "whiten");
  covariance_and_values(prhs[1], prhs[2], &l, &n);
  v = complex_values(prhs[2], "values");
  check(horecon_whiten(complex_values(prhs[1], "covariance"), (int64_t)l, (int64_t)(n / l), v));
  plhs[0] = complex_output(n / l, l, v);
}

/* horecon_mex('cartesianImages', refDims, fov, center, ncoils, kspace) -> N_ref x L */
static void cmd_cartesian_images(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  int64_t dims[3], l;
  double *fov, *center;
  horecon_c32 *kspace, *out;
  need_args(nrhs, 6, "cartesianImages");
  reference_args(prhs + 1, dims, &fov, &center);
  l = positive_count(prhs[4], "ncoils");
  kspace = complex_arg(prhs[5], "kspace", dims_product(dims) * (size_t)l, "nx*ny*nz x L"); /* before the output */
  out = (horecon_c32 *)mxMalloc(dims_product(dims) * (size_t)l * sizeof(horecon_c32));
  check(horecon_cartesian_images(dims, fov, center, l, kspace, out));
  plhs[0] = complex_output(dims_product(dims), (size_t)l, out);
}

/* horecon_mex('espirit', h, refDims, fov, center, kspace, kernel, calibration, threshold, crop) -> [maps, eig] */
static void cmd_espirit(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int64_t dims[3];
  double *fov, *center;
  horecon_espirit_options o;
  horecon_c32 *maps;
  float *eig;
  size_t i;
  double *ev;
  need_args(nrhs, 10, "espirit");
  e = plan_arg(prhs[1]);
  reference_args(prhs + 2, dims, &fov, &center);
  horecon_default_espirit_options(&o);
  o.kernel = integer32(prhs[6], "Kernel");
  o.calibration = integer32(prhs[7], "Calibration");
  o.threshold = scalar(prhs[8], "Threshold");
  o.crop = scalar(prhs[9], "Crop");
  maps = (horecon_c32 *)mxMalloc(voxels(e) * (size_t)e->coils * sizeof(horecon_c32));
  eig = (float *)mxMalloc(voxels(e) * sizeof(float));
  check(horecon_espirit(e->plan, dims, fov, center,
                        complex_arg(prhs[5], "kspace", dims_product(dims) * (size_t)e->coils, "nx*ny*nz x L"), &o,
                        maps, eig));
  plhs[0] = complex_output(voxels(e), (size_t)e->coils, maps);
  if (nlhs > 1) {
    plhs[1] = real_output(voxels(e), 1, &ev);
    for (i = 0; i < voxels(e); ++i) ev[i] = eig[i];
  }
}

/* horecon_mex('walsh', h, refDims, fov, center, images, window) -> maps */
static void cmd_walsh(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int64_t dims[3];
  double *fov, *center;
  horecon_c32 *maps;
  need_args(nrhs, 7, "walsh");
  e = plan_arg(prhs[1]);
  reference_args(prhs + 2, dims, &fov, &center);
  maps = (horecon_c32 *)mxMalloc(voxels(e) * (size_t)e->coils * sizeof(horecon_c32));
  check(horecon_walsh(e->plan, dims, fov, center,
                      complex_arg(prhs[5], "images", dims_product(dims) * (size_t)e->coils, "nx*ny*nz x L"),
                      integer32(prhs[6], "Window"), maps));
  plhs[0] = complex_output(voxels(e), (size_t)e->coils, maps);
}

/* horecon_mex('b0Map', h, refDims, fov, center, ncoils, echoTimes, kspace, maskThreshold, smoothness, maxIterations) */
static void cmd_b0_map(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  int64_t dims[3], l;
  double *fov, *center, *w;
  size_t echoes;
  horecon_b0_options o;
  need_args(nrhs, 11, "b0Map");
  e = plan_arg(prhs[1]);
  reference_args(prhs + 2, dims, &fov, &center);
  l = positive_count(prhs[5], "ncoils");
  check_numeric(prhs[6], "echoTimes");
  echoes = mxGetNumberOfElements(prhs[6]);
  horecon_default_b0_options(&o);
  o.mask_threshold = scalar(prhs[8], "MaskThreshold");
  o.smoothness = scalar(prhs[9], "Smoothness");
  o.max_iterations = integer32(prhs[10], "MaxIterations");
  plhs[0] = real_output(voxels(e), 1, &w);
  check(horecon_b0_map(e->plan, dims, fov, center, l, (int32_t)echoes, real_values(prhs[6], "echoTimes"),
                       complex_arg(prhs[7], "kspace", dims_product(dims) * (size_t)l * echoes,
                                   "nx*ny*nz x ncoils x nechoes"),
                       &o, w));
}

/* horecon_mex('estimateDelay', h, d, t, coef or [], range, step, tolerance, iterations, lambda, groups)
 * -> [delay, residual, curve (K x 2)] */
static void cmd_estimate_delay(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  plan_entry *e;
  horecon_delay_options o;
  double delay = 0, residual = 0, *xs, *rs, *c, *coef = NULL;
  int32_t length = 0, capacity = 4096, i;
  need_args(nrhs, 11, "estimateDelay");
  e = plan_arg(prhs[1]);
  if (!mxIsEmpty(prhs[4])) { /* shaped like the plan's phase model: M x B, B as the library holds it */
    int32_t terms = 0;
    check(horecon_plan_phase_terms(e->plan, &terms));
    if (terms == 0)
      fail("horecon:sizeMismatch", "coef has the shape of the plan's phase model, and this plan has none "
                                   "(setSolidHarmonics, setTrajectory or setBasis first)");
    check_numeric(prhs[4], "coef");
    check_rows(prhs[4], "coef", (size_t)e->samples, "M x B of the phase model");
    coef = real_arg(prhs[4], "coef", (size_t)e->samples * (size_t)terms, "M x B of the phase model");
  }
  horecon_default_delay_options(&o);
  o.range = scalar(prhs[5], "Range");
  o.step = scalar(prhs[6], "Step");
  o.tolerance = scalar(prhs[7], "Tolerance");
  o.iterations = integer32(prhs[8], "Iterations");
  o.lambda = scalar(prhs[9], "Lambda");
  o.groups = (uint32_t)non_negative32(prhs[10], "Groups");
  xs = (double *)mxMalloc((size_t)capacity * sizeof(double));
  rs = (double *)mxMalloc((size_t)capacity * sizeof(double));
  check(horecon_estimate_delay(e->plan, data_arg(prhs[2], e),
                               coef,
                               real_arg(prhs[3], "t", (size_t)e->samples, "M"), &o, &delay, &residual, capacity, xs,
                               rs, &length));
  plhs[0] = mxCreateDoubleScalar(delay);
  if (nlhs > 1) plhs[1] = mxCreateDoubleScalar(residual);
  if (nlhs > 2) {
    if (length > capacity) length = capacity;
    plhs[2] = real_output((size_t)length, 2, &c);
    for (i = 0; i < length; ++i) { c[i] = xs[i]; c[i + length] = rs[i]; }
  }
}

/* horecon_mex('simReference', refDims, fov, center, P (n x 3), rho (n), S (n x L), w or [], echoTimes, weight) */
static void cmd_sim_reference(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  int64_t dims[3];
  double *fov, *center;
  size_t n, l, echoes;
  horecon_c32 *out;
  need_args(nrhs, 10, "simReference");
  reference_args(prhs + 1, dims, &fov, &center);
  n = points(prhs[4], "P");
  check_numeric(prhs[6], "S");
  l = mxGetNumberOfElements(prhs[6]) / (n ? n : 1);
  if (l == 0 || l * n != mxGetNumberOfElements(prhs[6])) fail("horecon:sizeMismatch", "S must be n x L");
  check_rows(prhs[6], "S", n, "n x L");
  check_numeric(prhs[8], "echoTimes");
  echoes = mxGetNumberOfElements(prhs[8]);
  out = (horecon_c32 *)mxMalloc(dims_product(dims) * l * (echoes ? echoes : 1) * sizeof(horecon_c32));
  check(horecon_sim_reference(dims, fov, center, (int64_t)n, real_values(prhs[4], "P"),
                              complex_arg(prhs[5], "rho", n, "n"), (int64_t)l, complex_values(prhs[6], "S"),
                              mxIsEmpty(prhs[7]) ? NULL : real_arg(prhs[7], "w", n, "n"), (int32_t)echoes,
                              real_values(prhs[8], "echoTimes"), scalar(prhs[9], "weight"), out));
  plhs[0] = complex_output(dims_product(dims), l * echoes, out);
}

/* horecon_mex('simNoiseCovariance', ncoils, correlation, spread, seed) -> L x L */
static void cmd_sim_noise_covariance(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  int64_t l;
  uint64_t seed;
  horecon_c32 *psi;
  need_args(nrhs, 5, "simNoiseCovariance");
  l = positive_count(prhs[1], "ncoils");
  if (l > 1024) fail("horecon:invalidArgument", "ncoils must be 1..1024, got %lld", (long long)l);
  seed = seed_arg(prhs[4], "seed");
  psi = (horecon_c32 *)mxMalloc((size_t)(l * l) * sizeof(horecon_c32));
  check(horecon_sim_noise_covariance(l, scalar(prhs[2], "correlation"), scalar(prhs[3], "spread"), seed, psi));
  plhs[0] = complex_output((size_t)l, (size_t)l, psi);
}

/* horecon_mex('simCorrelatedNoise', covariance, values (P x L), seed) -> values + noise */
static void cmd_sim_correlated_noise(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  size_t l, n;
  uint64_t seed;
  horecon_c32 *v;
  need_args(nrhs, 4, "simCorrelatedNoise");
  covariance_and_values(prhs[1], prhs[2], &l, &n);
  seed = seed_arg(prhs[3], "seed");
  v = complex_values(prhs[2], "values");
  check(horecon_sim_correlated_noise(complex_values(prhs[1], "covariance"), (int64_t)l, (int64_t)(n / l),
                                     seed, v));
  plhs[0] = complex_output(n / l, l, v);
}

/* ------------------------------------------------- standalone NUFFT (issue 14)
 *
 * horecon.Nufft plans (horecon_nufft_*) have their own registry, so a Plan
 * handle is not a NUFFT handle and the other way round. Every argument is
 * checked here (class, realness, shape, finiteness) so that errors name the
 * MATLAB argument; the library checks the rest (tolerance range, options). */

typedef struct {
  uint64_t id; /* the handle MATLAB holds (new_handle) */
  horecon_nufft *nufft;
  int32_t type;        /* 1: nonuniform -> grid, 2: grid -> nonuniform */
  int32_t ndims;
  int64_t modes[3];
  size_t npoints;
  size_t ntransforms;
  int is_double;       /* HORECON_PRECISION_DOUBLE: double data, horecon_nufft_execute_c64 */
} nufft_entry;

static nufft_entry *nufft_registry = NULL;
static size_t nufft_len = 0, nufft_cap = 0;
static int nufft_exit_hook_set = 0;

static void nufft_destroy_all(void) {
  size_t i;
  for (i = 0; i < nufft_len; ++i) horecon_nufft_destroy(nufft_registry[i].nufft);
  free(nufft_registry);
  nufft_registry = NULL;
  nufft_len = nufft_cap = 0;
}

/* mexAtExit keeps one function: this one clears both registries. */
static void destroy_everything(void) {
  destroy_all();
  nufft_destroy_all();
}

static nufft_entry *nufft_arg(const mxArray *a) {
  size_t i;
  uint64_t handle = handle_value(a, "NUFFT plan");
  for (i = 0; i < nufft_len; ++i)
    if (nufft_registry[i].id == handle) return &nufft_registry[i];
  fail("horecon:invalidArgument", "invalid or deleted NUFFT plan (its handle is not alive)");
  return NULL;
}

/* Destroys the NUFFT plan of `handle`; an unknown handle is a no-op. */
static void nufft_destroy_handle(uint64_t handle) {
  size_t i;
  for (i = 0; i < nufft_len; ++i) {
    if (nufft_registry[i].id == handle) {
      horecon_nufft_destroy(nufft_registry[i].nufft);
      nufft_registry[i] = nufft_registry[nufft_len - 1];
      --nufft_len;
      return;
    }
  }
}

static size_t nufft_grid_size(const nufft_entry *e) {
  size_t n = 1;
  int32_t a;
  for (a = 0; a < e->ndims; ++a) n *= (size_t)e->modes[a];
  return n;
}

/* modes: 1 to 3 positive integers (the library bounds the grid's size). */
static int32_t nufft_modes(const mxArray *a, int64_t modes[3]) {
  size_t i, n;
  double *v;
  check_numeric(a, "modes");
  if (mxIsComplex(a)) fail("horecon:invalidArgument", "modes must be real");
  n = mxGetNumberOfElements(a);
  if (n < 1 || n > 3)
    fail("horecon:invalidArgument", "modes must have 1 to 3 elements [n1 n2 n3], got %zu", n);
  v = real_values(a, "modes");
  for (i = 0; i < n; ++i) {
    if (!(v[i] == floor(v[i])) || !(v[i] >= 1.0) || v[i] > 9.0e15)
      fail("horecon:invalidArgument", "modes(%zu) must be a positive integer, got %g", i + 1, v[i]);
    modes[i] = (int64_t)v[i];
  }
  return (int32_t)n;
}

/* "3x4x2": the size of a, for messages. */
static void nufft_size_text(const mxArray *a, char *text, size_t capacity) {
  size_t i, at = 0, nd = mxGetNumberOfDimensions(a);
  const mwSize *d = mxGetDimensions(a);
  text[0] = '\0';
  for (i = 0; i < nd && at + 24 < capacity; ++i)
    at += (size_t)snprintf(text + at, capacity - at, "%s%zu", i ? "x" : "", (size_t)d[i]);
}

/* points: npoints x ndims real, finite (radians); a vector for ndims = 1.
 * Returns the values column by column (all x, then all y, ...). */
static double *nufft_points(const mxArray *a, int32_t ndims, size_t *npoints) {
  size_t i, n, rows, cols;
  double *p;
  check_numeric(a, "points");
  if (mxIsComplex(a)) fail("horecon:invalidArgument", "points must be real (radians), got a complex array");
  n = mxGetNumberOfElements(a);
  rows = mxGetM(a);
  cols = mxGetN(a);
  if (ndims == 1 && mxGetNumberOfDimensions(a) == 2 && (rows == 1 || cols == 1 || n == 0)) {
    rows = n;
    cols = 1;
  }
  if (mxGetNumberOfDimensions(a) != 2 || cols != (size_t)ndims) {
    char size[96];
    nufft_size_text(a, size, sizeof size);
    fail("horecon:sizeMismatch", "points is %s, expected npoints x %d (one column per entry of modes)", size, ndims);
  }
  p = real_values(a, "points");
  for (i = 0; i < n; ++i)
    if (!isfinite(p[i]))
      fail("horecon:notFinite", "points(%zu, %zu) = %g is not finite", i % (rows ? rows : 1) + 1,
           i / (rows ? rows : 1) + 1, p[i]);
  *npoints = rows;
  return p;
}

/* horecon_mex('nufftCreate', type, modes, points, sign, tolerance, ntransforms, precision,
 *             backend, device, threads) -> handle.  precision: 0 single, 2 double. */
static void cmd_nufft_create(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  horecon_options o;
  horecon_nufft *nufft = NULL;
  nufft_entry e;
  int64_t type, sign, ntransforms, precision;
  double *points;
  memset(&e, 0, sizeof e);
  need_args(nrhs, 11, "nufftCreate");
  type = integer(prhs[1], "type");
  if (type != 1 && type != 2) fail("horecon:invalidArgument", "type must be 1 or 2, got %lld", (long long)type);
  e.ndims = nufft_modes(prhs[2], e.modes);
  points = nufft_points(prhs[3], e.ndims, &e.npoints);
  sign = integer(prhs[4], "Sign");
  if (sign != 1 && sign != -1) fail("horecon:invalidArgument", "Sign must be +1 or -1, got %lld", (long long)sign);
  ntransforms = integer32(prhs[6], "Transforms");
  if (ntransforms < 1)
    fail("horecon:invalidArgument", "Transforms must be a positive integer, got %lld", (long long)ntransforms);
  precision = integer(prhs[7], "Precision");
  if (precision != HORECON_PRECISION_ACCURATE && precision != HORECON_PRECISION_DOUBLE)
    fail("horecon:invalidArgument", "Precision must be 'single' or 'double'");
  horecon_default_options(&o);
  o.precision = (int32_t)precision;
  o.backend = integer32(prhs[8], "Backend");
  o.device = integer32(prhs[9], "Device");
  o.num_threads = integer32(prhs[10], "Threads");
  if (o.device < 0) fail("horecon:invalidArgument", "Device must be >= 0 (0-based), got %d", (int)o.device);
  if (o.num_threads < 0) fail("horecon:invalidArgument", "Threads must be >= 0 (0 = all), got %d", (int)o.num_threads);
  check(horecon_nufft_create(&nufft, (int32_t)type, e.ndims, e.modes, (int64_t)e.npoints, points, (int32_t)sign,
                             scalar(prhs[5], "Tolerance"), (int32_t)ntransforms, &o));
  e.id = new_handle();
  e.nufft = nufft;
  e.type = (int32_t)type;
  e.ntransforms = (size_t)ntransforms;
  e.is_double = precision == HORECON_PRECISION_DOUBLE;
  if (nufft_len == nufft_cap) {
    size_t cap = nufft_cap ? 2 * nufft_cap : 16;
    nufft_entry *grown = (nufft_entry *)realloc(nufft_registry, cap * sizeof(nufft_entry));
    if (grown == NULL) {
      horecon_nufft_destroy(nufft);
      fail("horecon:outOfMemory", "could not grow the NUFFT plan registry");
    }
    nufft_registry = grown;
    nufft_cap = cap;
  }
  nufft_registry[nufft_len++] = e;
  if (!nufft_exit_hook_set) {
    mexAtExit(destroy_everything);
    nufft_exit_hook_set = exit_hook_set = 1;
  }
  plhs[0] = mxCreateNumericMatrix(1, 1, mxUINT64_CLASS, mxREAL);
  *(uint64_t *)mxGetData(plhs[0]) = e.id;
}

static void cmd_nufft_destroy(int nrhs, const mxArray *prhs[]) {
  need_args(nrhs, 2, "nufftDestroy");
  nufft_destroy_handle(handle_value(prhs[1], "NUFFT plan"));
}

/* The input of execute has the plan's shape: type 1 c is npoints x ntransforms, type 2
 * f is modes(1) x ... x ntransforms (trailing singletons dropped, as MATLAB does); a
 * vector may be a row or a column when the shape is a vector. */
static void nufft_check_shape(const mxArray *a, const nufft_entry *e, const char *name) {
  size_t expected[4], count = 1, got_nd = mxGetNumberOfDimensions(a), nd = 0, i, nonsingleton = 0;
  const mwSize *got = mxGetDimensions(a);
  char shape[160], have[96];
  int ok = 1, at = 0;
  if (e->type == 1) {
    expected[nd++] = e->npoints;
  } else {
    for (i = 0; i < (size_t)e->ndims; ++i) expected[nd++] = (size_t)e->modes[i];
  }
  expected[nd++] = e->ntransforms;
  for (i = 0; i < nd; ++i) {
    count *= expected[i];
    if (expected[i] != 1) ++nonsingleton;
  }
  for (i = 0; i < nd || i < got_nd; ++i) {
    size_t want = i < nd ? expected[i] : 1, have = i < got_nd ? (size_t)got[i] : 1;
    if (want != have) ok = 0;
  }
  if (!ok && nonsingleton <= 1 && got_nd == 2 && (got[0] == 1 || got[1] == 1) &&
      mxGetNumberOfElements(a) == count)
    ok = 1; /* a row or column vector for a vector-shaped input */
  if (count == 0 && mxGetNumberOfElements(a) == 0) ok = 1;
  if (ok) return;
  for (i = 0; i < nd && at < (int)sizeof shape - 24; ++i)
    at += snprintf(shape + at, sizeof shape - (size_t)at, "%s%zu", i ? "x" : "", expected[i]);
  nufft_size_text(a, have, sizeof have);
  fail("horecon:sizeMismatch", "%s is %s, expected %s (%s)", name, have, shape,
       e->type == 1 ? "npoints x ntransforms" : "modes(1) x ... x ntransforms");
}

/* The first non-finite value of interleaved complex data of n values, as a MATLAB error. */
static void nufft_check_finite(const void *values, int is_double, size_t n, const char *name) {
  size_t i;
  for (i = 0; i < 2 * n; ++i) {
    double v = is_double ? ((const double *)values)[i] : (double)((const float *)values)[i];
    if (!isfinite(v))
      fail("horecon:notFinite", "%s(%zu) has a non-finite %s part (%g%s)", name, i / 2 + 1, i % 2 ? "imaginary" : "real",
           v, is_double ? "" : " as single precision, the plan's");
  }
}

/* Any double/single, real or complex array as interleaved double complex. */
static horecon_c64 *complex64_values(const mxArray *a, const char *name) {
  size_t i, n = mxGetNumberOfElements(a);
  horecon_c64 *out;
  check_numeric(a, name);
  out = (horecon_c64 *)mxMalloc((n ? n : 1) * sizeof(horecon_c64));
  if (!mxIsComplex(a)) {
    for (i = 0; i < n; ++i) {
      out[i].re = mxIsDouble(a) ? ((const double *)mxGetData(a))[i] : (double)((const float *)mxGetData(a))[i];
      out[i].im = 0.0;
    }
    return out;
  }
#if MX_HAS_INTERLEAVED_COMPLEX
  if (mxIsDouble(a)) {
    const mxComplexDouble *c = mxGetComplexDoubles(a);
    for (i = 0; i < n; ++i) { out[i].re = c[i].real; out[i].im = c[i].imag; }
  } else {
    const mxComplexSingle *c = mxGetComplexSingles(a);
    for (i = 0; i < n; ++i) { out[i].re = c[i].real; out[i].im = c[i].imag; }
  }
#else
  if (mxIsDouble(a)) {
    const double *re = (const double *)mxGetData(a), *im = (const double *)mxGetImagData(a);
    for (i = 0; i < n; ++i) { out[i].re = re[i]; out[i].im = im[i]; }
  } else {
    const float *re = (const float *)mxGetData(a), *im = (const float *)mxGetImagData(a);
    for (i = 0; i < n; ++i) { out[i].re = re[i]; out[i].im = im[i]; }
  }
#endif
  return out;
}

static mxArray *complex64_output(size_t n, const horecon_c64 *v) {
  size_t i;
  mxArray *out = mxCreateNumericMatrix(n, 1, mxDOUBLE_CLASS, mxCOMPLEX);
#if MX_HAS_INTERLEAVED_COMPLEX
  mxComplexDouble *c = mxGetComplexDoubles(out);
  for (i = 0; i < n; ++i) { c[i].real = v[i].re; c[i].imag = v[i].im; }
#else
  double *re = (double *)mxGetData(out), *im = (double *)mxGetImagData(out);
  for (i = 0; i < n; ++i) { re[i] = v[i].re; im[i] = v[i].im; }
#endif
  return out;
}

/* horecon_mex('nufftExecute', handle, in) -> out as a column (the class shapes it):
 * type 1 in = c (npoints x ntransforms), out = f (prod(modes)*ntransforms);
 * type 2 in = f, out = c. Double plans read and write double, single plans single. */
static void cmd_nufft_execute(mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  nufft_entry *e;
  const char *name;
  size_t nonuniform, grid, in_count, out_count;
  need_args(nrhs, 3, "nufftExecute");
  e = nufft_arg(prhs[1]);
  name = e->type == 1 ? "c" : "f";
  check_numeric(prhs[2], name);
  nufft_check_shape(prhs[2], e, name);
  nonuniform = e->npoints * e->ntransforms;
  grid = nufft_grid_size(e) * e->ntransforms;
  in_count = e->type == 1 ? nonuniform : grid;
  out_count = e->type == 1 ? grid : nonuniform;
  if (e->is_double) {
    horecon_c64 *in = complex64_values(prhs[2], name);
    horecon_c64 *out = (horecon_c64 *)mxMalloc((out_count ? out_count : 1) * sizeof(horecon_c64));
    nufft_check_finite(in, 1, in_count, name);
    check(e->type == 1 ? horecon_nufft_execute_c64(e->nufft, in, out) : horecon_nufft_execute_c64(e->nufft, out, in));
    plhs[0] = complex64_output(out_count, out);
  } else {
    horecon_c32 *in = complex_values(prhs[2], name);
    horecon_c32 *out = (horecon_c32 *)mxMalloc((out_count ? out_count : 1) * sizeof(horecon_c32));
    nufft_check_finite(in, 0, in_count, name);
    check(e->type == 1 ? horecon_nufft_execute(e->nufft, in, out) : horecon_nufft_execute(e->nufft, out, in));
    plhs[0] = complex_output(out_count, 1, out);
  }
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  char *command;
  if (in_display) { /* from the display's MATLAB code (a timer, a GUI callback): a plan is in use */
    char name[16] = "";
    if (nrhs == 2 && mxIsChar(prhs[0]) && mxGetString(prhs[0], name, sizeof name) == 0 && !strcmp(name, "destroy") &&
        mxIsUint64(prhs[1]) && mxGetNumberOfElements(prhs[1]) == 1 && pending_count < PENDING_DESTROYS) {
      pending_destroys[pending_count++] = *(const uint64_t *)mxGetData(prhs[1]); /* a deleted Plan: later */
      return;
    }
    if (nrhs == 2 && mxIsChar(prhs[0]) && mxGetString(prhs[0], name, sizeof name) == 0 && !strcmp(name, "nufftDestroy") &&
        mxIsUint64(prhs[1]) && mxGetNumberOfElements(prhs[1]) == 1) {
      nufft_destroy_handle(*(const uint64_t *)mxGetData(prhs[1])); /* not in use: a Plan's call is running */
      return;
    }
    mexErrMsgIdAndTxt("horecon:busy", "horecon is busy with a long call (%s); call it again when that call has returned",
                      display.label);
  }
  if (nrhs < 1 || !mxIsChar(prhs[0]))
    fail("horecon:invalidArgument", "usage: horecon_mex(command, ...); use the +horecon package");
  command = mxArrayToString(prhs[0]);
  if (command == NULL) fail("horecon:invalidArgument", "the command must be a character row vector");
  horecon_sim_set_progress(long_call_progress, NULL); /* Ctrl-C cancels toolkit calls */
  begin_display(command);

  if (!strcmp(command, "version")) plhs[0] = mxCreateString(horecon_version());
  else if (!strcmp(command, "cudaDeviceCount")) {
    int32_t count = 0;
    check(horecon_cuda_device_count(&count));
    plhs[0] = mxCreateDoubleScalar(count);
  } else if (!strcmp(command, "livePlans")) plhs[0] = mxCreateDoubleScalar((double)registry_len);
  else if (!strcmp(command, "progress")) cmd_progress(plhs, nrhs, prhs);
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
  else if (!strcmp(command, "setApproximation")) cmd_set_approximation(nrhs, prhs);
  else if (!strcmp(command, "approximationInfo")) cmd_approximation_info(plhs, nrhs, prhs);
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
  else if (!strcmp(command, "noiseCovariance")) cmd_noise_covariance(plhs, nrhs, prhs);
  else if (!strcmp(command, "whiten")) cmd_whiten(plhs, nrhs, prhs);
  else if (!strcmp(command, "cartesianImages")) cmd_cartesian_images(plhs, nrhs, prhs);
  else if (!strcmp(command, "espirit")) cmd_espirit(nlhs, plhs, nrhs, prhs);
  else if (!strcmp(command, "walsh")) cmd_walsh(plhs, nrhs, prhs);
  else if (!strcmp(command, "b0Map")) cmd_b0_map(plhs, nrhs, prhs);
  else if (!strcmp(command, "estimateDelay")) cmd_estimate_delay(nlhs, plhs, nrhs, prhs);
  else if (!strcmp(command, "simReference")) cmd_sim_reference(plhs, nrhs, prhs);
  else if (!strcmp(command, "simNoiseCovariance")) cmd_sim_noise_covariance(plhs, nrhs, prhs);
  else if (!strcmp(command, "simCorrelatedNoise")) cmd_sim_correlated_noise(plhs, nrhs, prhs);
  else if (!strcmp(command, "nufftCreate")) cmd_nufft_create(plhs, nrhs, prhs);
  else if (!strcmp(command, "nufftExecute")) cmd_nufft_execute(plhs, nrhs, prhs);
  else if (!strcmp(command, "nufftDestroy")) cmd_nufft_destroy(nrhs, prhs);
  else if (!strcmp(command, "liveNuffts")) plhs[0] = mxCreateDoubleScalar((double)nufft_len);
  else fail("horecon:invalidArgument", "unknown command '%s'", command);
  end_display(0);
}
