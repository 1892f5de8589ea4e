/* horecon quickstart: a 2D higher-order reconstruction through the C API.
 *
 *   phi(j,n) = sum_b k_b(t_j) h_b(r_n) + omega_n t_j
 *   E[(j,c),n] = S_c(r_n) exp(+i phi(j,n))
 *
 * A 32x32 image on a grid, a Cartesian readout disturbed by second-order
 * (eddy-current-like) field terms given as solid-harmonic coefficients,
 * static off-resonance and two receive coils. We simulate data d = E rho,
 * apply the adjoint, and reconstruct rho by conjugate gradient from d.
 *
 * Build (from the repository root, after `cargo build --release`):
 *   gcc -std=c99 -Wall -Wextra -pedantic -Werror -Iinclude examples/quickstart.c \
 *       -Ltarget/release -lhorecon -Wl,-rpath,$PWD/target/release -o quickstart
 * (no libm needed). Exits non-zero on any failure or if the reconstruction
 * error is too large. */
#include <stdio.h>
#include <stdlib.h>

#include "horecon.h"

#define NX 32
#define NY 32
#define N (NX * NY)       /* voxels */
#define M (NX * NY)       /* samples per coil: one Cartesian line per ky */
#define L 2               /* coils */
#define TERMS 9           /* solid harmonics up to second order */

static const double PI = 3.14159265358979323846;

static double absolute(double x) { return x < 0.0 ? -x : x; }

/* Square root by Newton's method (keeps the example free of libm). */
static double root(double x)
{
    double r = x > 1.0 ? x : 1.0;
    int i;
    if (x <= 0.0) return 0.0;
    for (i = 0; i < 200; i++) r = 0.5 * (r + x / r);
    return r;
}

/* Stops on the first failing call with the library's message. */
#define TRY(call)                                                                   \
    do {                                                                            \
        horecon_status status_ = (call);                                            \
        if (status_ != HORECON_OK) {                                                \
            fprintf(stderr, "%s failed: %s\n  %s\n", #call,                         \
                    horecon_status_string(status_), horecon_last_error());          \
            goto done;                                                              \
        }                                                                           \
    } while (0)

int main(void)
{
    int exit_code = 1;
    horecon_plan *plan = NULL;
    horecon_options opts;
    horecon_cg_options cg;
    horecon_cg_info info;
    const double fov[3] = {0.22, 0.22, 0.005};     /* m */
    const double center[3] = {0.0, 0.0, 0.0};      /* m */
    double *coefficients = malloc(sizeof(double) * M * TERMS); /* M x 9, rad/m^order */
    double *omega = malloc(sizeof(double) * N);                /* rad/s */
    double *times = malloc(sizeof(double) * M);                /* s */
    horecon_c32 *sensitivities = malloc(sizeof(horecon_c32) * N * L);
    horecon_c32 *truth = malloc(sizeof(horecon_c32) * N);
    horecon_c32 *data = malloc(sizeof(horecon_c32) * M * L);
    horecon_c32 *adjoint = malloc(sizeof(horecon_c32) * N);
    horecon_c32 *recon = malloc(sizeof(horecon_c32) * N);
    double num = 0.0, den = 0.0, error;
    int ix, iy, j, b;

    if (!coefficients || !omega || !times || !sensitivities || !truth || !data || !adjoint ||
        !recon) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    printf("horecon %s\n", horecon_version());

    /* The plan: 32x32x1 voxels, 2 coils, M samples per coil, on the CPU
     * (HORECON_BACKEND_AUTO would pick a GPU when there is one). */
    horecon_default_options(&opts);
    opts.backend = HORECON_BACKEND_CPU;
    TRY(horecon_plan_create(&opts, NX, NY, 1, L, M, &plan));
    TRY(horecon_set_grid_positions(plan, fov, center));

    /* The phase model. Sample j = jx + NX*jy is point jx of line jy. The
     * linear terms are the nominal Cartesian k-space, k = 2*pi*(i - n/2)/fov
     * (rad/m; the sign is +i, so a user with exp(-i k.r) passes -k); the
     * second-order terms (rad/m^2) and k0 (rad) drift along each readout. */
    for (j = 0; j < M; j++) {
        int jx = j % NX, jy = j / NX;
        double t = 1e-5 * jx; /* time along the readout */
        double *k = coefficients;
        for (b = 0; b < TERMS; b++) k[b * M + j] = 0.0;
        k[0 * M + j] = 3.0 * t / 3e-4 * (1.0 - t / 3e-4);      /* k0: 1      */
        k[1 * M + j] = 2.0 * PI * (jx - NX / 2) / fov[0];       /* x          */
        k[2 * M + j] = 2.0 * PI * (jy - NY / 2) / fov[1];       /* y          */
        k[4 * M + j] = 40.0 * t / (t + 1e-4);                   /* xy         */
        k[6 * M + j] = 15.0 * t / (t + 2e-4);                   /* 3z^2 - r^2 */
        k[8 * M + j] = -30.0 * t / (t + 1.5e-4);                /* x^2 - y^2  */
        times[j] = 2e-3 + t;                                    /* TE + readout */
    }
    TRY(horecon_set_solid_harmonics(plan, TERMS, coefficients));

    /* Off-resonance (a smooth B0 map, rad/s), coils and the true image. */
    for (iy = 0; iy < NY; iy++) {
        for (ix = 0; ix < NX; ix++) {
            int n = ix + NX * iy;
            double x = (ix - NX / 2) * fov[0] / NX, y = (iy - NY / 2) * fov[1] / NY;
            double r2 = x * x + y * y;
            omega[n] = 2.0 * PI * (40.0 * x / 0.1 - 25.0 * r2 / 0.01);
            sensitivities[n].re = (float)(1.0 + 3.0 * x);
            sensitivities[n].im = (float)(2.0 * y);
            sensitivities[N + n].re = (float)(1.0 - 3.0 * x);
            sensitivities[N + n].im = (float)(-2.0 * y + 0.3);
            truth[n].re = (float)(r2 < 0.08 * 0.08 ? 1.0 : 0.0) +
                          (float)(absolute(x) < 0.03 && absolute(y) < 0.02 ? 0.5 : 0.0);
            truth[n].im = (float)(r2 < 0.08 * 0.08 ? 0.2 * x / 0.08 : 0.0);
        }
    }
    TRY(horecon_set_off_resonance(plan, omega, times));
    TRY(horecon_set_sensitivities(plan, sensitivities));

    /* Forward: simulated data; adjoint: E^H d. */
    TRY(horecon_forward(plan, truth, data));
    TRY(horecon_adjoint(plan, data, adjoint));
    {
        /* adjointness: <E rho, d> = <rho, E^H d> (real parts) */
        double lhs = 0.0, rhs = 0.0;
        for (j = 0; j < M * L; j++) lhs += (double)data[j].re * data[j].re + (double)data[j].im * data[j].im;
        for (j = 0; j < N; j++) rhs += (double)truth[j].re * adjoint[j].re + (double)truth[j].im * adjoint[j].im;
        printf("<E rho, d> = %.6e, <rho, E^H d> = %.6e\n", lhs, rhs);
        if (absolute(lhs - rhs) > 1e-4 * absolute(lhs)) {
            fprintf(stderr, "adjoint test failed\n");
            goto done;
        }
    }

    /* Reconstruction: CG on E^H E rho = E^H d. */
    horecon_default_cg_options(&cg);
    cg.max_iterations = 100;
    cg.tolerance = 1e-6;
    TRY(horecon_cg(plan, data, &cg, recon, &info));
    for (j = 0; j < N; j++) {
        double dr = (double)recon[j].re - truth[j].re, di = (double)recon[j].im - truth[j].im;
        num += dr * dr + di * di;
        den += (double)truth[j].re * truth[j].re + (double)truth[j].im * truth[j].im;
    }
    error = root(num / den);
    printf("cg: %d iterations, converged %d, relative residual %.2e, %.3f s\n", (int)info.iterations,
           (int)info.converged, info.rel_residual, info.seconds);
    printf("relative reconstruction error %.3e\n", error);
    if (!(error < 1e-3)) {
        fprintf(stderr, "reconstruction error %.3e is too large\n", error);
        goto done;
    }
    exit_code = 0;

done:
    horecon_plan_destroy(plan);
    free(coefficients);
    free(omega);
    free(times);
    free(sensitivities);
    free(truth);
    free(data);
    free(adjoint);
    free(recon);
    return exit_code;
}
