"""Conjugate gradient through the binding: convergence, regularisation,
sample weights, warm start, and the progress callback (cancellation, errors)."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def fourier_problem(rng, dims=(8, 8), oversampling=4, ncoils=1):
    """A well-conditioned 2-D problem: random k inside the Nyquist disc, M = 4N."""
    n = int(np.prod(dims))
    m = oversampling * n
    dx = 0.2 / dims[0]
    k = rng.uniform(-np.pi / dx, np.pi / dx, (m, 2))
    plan = horecon.Plan(dims, ncoils=ncoils, nsamples=m, precision="accurate")
    plan.set_grid_positions(0.2)
    plan.set_trajectory(k)
    if ncoils > 1:
        plan.set_sensitivities(rng.complex(n, ncoils) * 0.5 + 1.0)
    return plan


def test_cg_converges_and_recovers_the_image(rng):
    with fourier_problem(rng) as plan:
        truth = rng.complex(*plan.shape).astype(np.complex64)
        data = plan.forward(truth)
        seen = []
        image, info = plan.cg(
            data, max_iterations=200, tolerance=1e-5, progress=lambda i, r: seen.append((i, r)) and False
        )
        print(f"seed {rng.seed}: {info}, error {rel_rms(image, truth):.2e}")
        assert info["converged"] and info["rel_residual"] <= 1e-5
        assert 0 < info["iterations"] <= 200 and info["seconds"] >= 0
        assert len(seen) == info["iterations"]
        assert [i for i, _ in seen] == list(range(1, len(seen) + 1)), "iterations count from 1"
        assert seen[-1][1] <= 1e-5 < seen[0][1]
        assert image.shape == plan.shape
        assert rel_rms(image, truth) < 1e-3, f"seed {rng.seed}"
        # not converging within max_iterations is not an error
        _, short = plan.cg(data, max_iterations=2, tolerance=1e-12)
        assert short["iterations"] == 2 and not short["converged"]


def test_cg_tikhonov_and_weights_solve_their_normal_equations(rng):
    with fourier_problem(rng, dims=(6, 5), oversampling=2, ncoils=2) as plan:
        data = rng.complex(plan.nsamples, plan.ncoils).astype(np.complex64)
        lam = 0.3 * np.linalg.norm(plan.normal(np.ones(plan.nvoxels))) / np.sqrt(plan.nvoxels)
        image, info = plan.cg(data, max_iterations=300, tolerance=1e-6, regularizer="tikhonov", lambda_=lam)
        assert info["converged"]
        lhs = plan.normal(image).astype(np.complex128) + lam * image
        rhs = plan.adjoint(data)
        assert rel_rms(lhs, rhs) < 1e-4, f"seed {rng.seed}"
        # the regulariser matters: without it the solution differs
        plain, _ = plan.cg(data, max_iterations=300, tolerance=1e-6)
        assert rel_rms(plain, image) > 1e-2
        # per-sample weights W: E^H W E x = E^H W d
        w = rng.uniform(0.2, 2.0, plan.nsamples)
        weighted, info = plan.cg(data, max_iterations=300, tolerance=1e-6, sample_weights=w)
        assert info["converged"]
        wd = (w[:, None] * data).astype(np.complex64)
        lhs = plan.adjoint((w[:, None] * plan.forward(weighted)).astype(np.complex64))
        assert rel_rms(lhs, plan.adjoint(wd)) < 1e-4, f"seed {rng.seed}"


def test_cg_warm_start(rng):
    with fourier_problem(rng) as plan:
        data = plan.forward(rng.complex(plan.nvoxels).astype(np.complex64))
        solution, first = plan.cg(data, max_iterations=200, tolerance=1e-5)
        x0 = solution.copy()
        again, second = plan.cg(data, max_iterations=200, tolerance=1e-5, x0=x0)
        assert second["converged"] and second["iterations"] < first["iterations"]
        assert np.array_equal(x0, solution), "x0 must not be modified"
        assert rel_rms(again, solution) < 1e-4


def test_cg_cancellation_through_progress(rng):
    with fourier_problem(rng) as plan:
        data = plan.forward(rng.complex(plan.nvoxels).astype(np.complex64))
        calls = []

        def stop_at_three(iteration, rel_residual):
            calls.append(iteration)
            return len(calls) == 3

        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(data, max_iterations=100, tolerance=0.0, progress=stop_at_three)
        assert info.value.status == horecon.HORECON_ERR_CANCELLED
        assert len(calls) == 3


def test_cg_exception_in_progress_is_reraised(rng):
    with fourier_problem(rng) as plan:
        data = plan.forward(rng.complex(plan.nvoxels).astype(np.complex64))

        def broken(iteration, rel_residual):
            if iteration >= 2:
                raise ZeroDivisionError("from the callback")
            return False

        with pytest.raises(ZeroDivisionError, match="from the callback") as info:
            plan.cg(data, progress=broken)
        assert isinstance(info.value.__cause__, horecon.HoreconError)
        assert info.value.__cause__.status == horecon.HORECON_ERR_CANCELLED
        with pytest.raises(TypeError):
            plan.cg(data, progress=42)
        # the plan still works afterwards
        _, ok = plan.cg(data, max_iterations=200, tolerance=1e-5)
        assert ok["converged"]


def test_keyboard_interrupt_stops_the_solve(rng, sigint):
    """Ctrl-C (SIGINT) during cg stops the solve after the current iteration
    and re-raises KeyboardInterrupt, chained to the CANCELLED error."""
    import signal
    import time

    if not hasattr(signal, "pthread_kill"):
        pytest.skip("needs signal.pthread_kill")
    import threading

    main = threading.main_thread().ident
    if threading.get_ident() != main:
        pytest.skip("signals reach only the main thread")
    with fourier_problem(rng) as plan:
        data = plan.forward(rng.complex(plan.nvoxels).astype(np.complex64))
        calls = []

        def slow(iteration, rel_residual):
            calls.append(iteration)
            if iteration == 3:
                signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.02)
            return False

        with pytest.raises(KeyboardInterrupt) as info:
            plan.cg(data, max_iterations=500, tolerance=0.0, progress=slow)
        assert 3 <= len(calls) < 500, calls
        assert isinstance(info.value.__cause__, horecon.HoreconError)
        assert info.value.__cause__.status == horecon.HORECON_ERR_CANCELLED
        _, ok = plan.cg(data, max_iterations=200, tolerance=1e-5)
        assert ok["converged"]
