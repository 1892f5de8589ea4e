"""horecon.calib from Python: the calibration chain end to end (the example at
32x32) and its bad-input codes; preconditioned CG and the discrepancy rule."""

import sys
from pathlib import Path

import numpy as np
import pytest

import horecon
import horecon.calib as calib
import horecon.sim as sim

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import calibration_workflow  # noqa: E402


def test_calib_is_a_module_of_the_package():
    assert horecon.calib is calib


def test_the_workflow_recovers_maps_b0_and_delay():
    f = calibration_workflow.run(n=32, verbose=True)
    assert f["whitening_deviation"] < 0.1
    assert f["map_nrmse"] < 0.05
    assert f["b0_rms_hz"] < 2.0
    assert f["delay_error_us"] < 0.5
    assert f["recon_nrmse"] < 0.8 * f["nominal_nrmse"]


def test_bad_input_codes():
    n, coils = 16, 2
    with horecon.Plan((n, n), ncoils=coils, nsamples=8) as plan:
        plan.set_grid_positions((0.2, 0.2, 0.01))
        y = (np.arange(n * n * coils) % 7 - 3).astype(np.complex64).reshape(n, n, coils, order="F")
        with pytest.raises(horecon.HoreconError) as e:
            calib.espirit(plan, y, (0.2, 0.2, 0.01), calibration=4)
        assert e.value.name == "HORECON_ERR_INVALID_ARGUMENT" and "smaller than the kernel" in str(e.value)
        with pytest.raises(horecon.HoreconError) as e:
            calib.espirit(plan, np.zeros_like(y), (0.2, 0.2, 0.01))
        assert e.value.name == "HORECON_ERR_INVALID_ARGUMENT" and "all zero" in str(e.value)
        with pytest.raises(horecon.HoreconError) as e:
            calib.b0_map(plan, y[..., None], [2e-3], (0.2, 0.2, 0.01))
        assert "at least 2 echoes" in str(e.value)
        with pytest.raises(horecon.HoreconError) as e:
            calib.whiten(np.ones((2, 2), np.complex64), np.ones((4, 2), np.complex64))
        assert "positive definite" in str(e.value)


def test_preconditioned_cg_and_the_discrepancy_rule_report_their_stop():
    n, fov = 24, 0.22
    k, _ = sim.radial(n, fov, 30, 4e-6)
    with horecon.Plan((n, n), nsamples=k.shape[0]) as plan:
        plan.set_grid_positions((fov, fov, 0.005))
        plan.set_trajectory(k)
        plan.set_toeplitz(True)
        p = sim.refined_grid((n, n, 1), (fov, fov, 0.005), (0.0, 0.0, 0.0), 1)
        truth = sim.shepp_logan(2, (0.2, 0.2, 0.0), (0.0, 0.0, 0.0), p).astype(np.complex64)
        data = plan.forward(truth)
        plain, a = plan.cg(data, max_iterations=300, tolerance=1e-4)
        pcg, b = plan.cg(data, max_iterations=300, tolerance=1e-4, preconditioner="circulant")
        print(f"iterations to 1e-4: CG {a['iterations']}, circulant PCG {b['iterations']}")
        assert a["stop_reason"] == b["stop_reason"] == "tolerance"
        assert b["iterations"] < a["iterations"]
        noisy, sigma = sim.add_noise(data, 30.0, 5)
        _, c = plan.cg(noisy, max_iterations=200, tolerance=0.0, discrepancy_tau=1.0, noise_sigma=sigma)
        assert c["stop_reason"] == "discrepancy"
        assert c["data_residual"] <= sigma * np.sqrt(noisy.size) * (1 + 1e-6)


def test_arrays_of_the_wrong_size_are_refused_before_the_library_reads_them():
    """espirit, walsh and estimate_delay get bare pointers: a coil count or a
    length that does not match the plan must raise here (it read past the
    arrays: a segfault for walsh), and the plan must still work after."""
    n, coils, m = 12, 4, 10
    rng = np.random.default_rng(3)
    with horecon.Plan((n, n), ncoils=coils, nsamples=m) as plan:
        plan.set_grid_positions((0.2, 0.2, 0.01))
        plan.set_trajectory(rng.normal(size=(m, 2)) * 10)
        plan.set_sensitivities(np.ones((n * n, coils), np.complex64))
        one_coil = rng.normal(size=(n, n, 1)).astype(np.complex64)
        cases = [
            lambda: calib.walsh(plan, one_coil, (0.2, 0.2, 0.01)),
            lambda: calib.espirit(plan, one_coil, (0.2, 0.2, 0.01)),
            lambda: calib.walsh(plan, np.ones((2, 2, 2, 2, coils), np.complex64), 0.2),
            lambda: calib.estimate_delay(plan, np.ones(m - 1, np.complex64), np.zeros(m - 1)),
            lambda: calib.estimate_delay(plan, np.ones((m, coils), np.complex64), np.zeros(1)),
            lambda: calib.estimate_delay(plan, np.ones((m, coils), np.complex64), np.zeros(m),
                                         coefficients=np.zeros((m, 3))),
        ]
        points = np.zeros((16, 3))
        cases += [
            lambda: calib.sim_reference((4, 4), 0.2, 0.0, points, np.ones(1), np.ones((16, 2))),
            lambda: calib.sim_reference((4, 4), 0.2, 0.0, points, np.ones(16), np.ones((2, 2))),
            lambda: calib.sim_reference((4, 4), 0.2, 0.0, points, np.ones(16), np.ones((16, 2)), omega=np.ones(1)),
            lambda: calib.sim_correlated_noise(np.ones(3, np.complex64), np.ones((5, 2), np.complex64)),
        ]
        for i, call in enumerate(cases):
            with pytest.raises(horecon.HoreconError) as e:
                call()
            assert e.value.name == "HORECON_ERR_SIZE_MISMATCH", (i, str(e.value))
        x = rng.normal(size=(n, n)).astype(np.complex64)
        assert np.isfinite(plan.forward(x)).all()
        # Cartesian mode installs a 3-term trajectory in the library: coefficients follow it
        plan.set_trajectory(rng.normal(size=(m, 2)))
        mask = np.zeros((n, n), bool)
        mask.flat[:m] = True
        plan.set_cartesian(mask)
        assert plan._phase_terms() == 3
        with pytest.raises(horecon.HoreconError, match=r"\(M, B\) = \(10, 3\)"):
            calib.estimate_delay(plan, np.ones((m, coils), np.complex64), np.zeros(m), coefficients=np.zeros((m, 2)))


def test_whitening_and_correlated_noise_leave_their_input_alone():
    psi = calib.sim_noise_covariance(2, seed=4)
    for values in (np.ones((5, 1), np.complex64), np.asfortranarray(np.ones((5, 2), np.complex64))):
        before = values.copy()
        cov = psi[:1, :1] if values.shape[1] == 1 else psi
        out = calib.whiten(cov, values)
        noisy = calib.sim_correlated_noise(cov, values, seed=2)
        assert np.array_equal(values, before)
        assert not np.shares_memory(out, values) and not np.shares_memory(noisy, values)
        assert not np.array_equal(noisy, values)


def test_walsh_as_the_first_calibration_call_of_a_process():
    # horecon_walsh's argument types were declared only by the other calib
    # functions: called first, the 64-bit plan handle went through as an int.
    code = (
        "import numpy as np, horecon, horecon.calib as calib\n"
        "p = horecon.Plan((16, 16), 2, 4, backend='cpu')\n"
        "p.set_grid_positions((0.2, 0.2, 0.01))\n"
        "rng = np.random.default_rng(3)\n"
        "img = (rng.standard_normal((16, 16, 2)) + 1j * rng.standard_normal((16, 16, 2))).astype(np.complex64)\n"
        "maps = calib.walsh(p, img, (0.2, 0.2, 0.01))\n"
        "assert maps.shape == (256, 2) and np.all(np.isfinite(maps))\n"
        "print('ok')\n"
    )
    import os
    import subprocess

    # the package as this process imported it (the tests may put it on sys.path themselves)
    package_root = str(Path(horecon.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-2000:])


def test_results_beyond_the_arithmetic_and_meaningless_geometry_are_refused():
    """A calibration call returns finite results or an error naming its cause
    (found by a fuzz sweep, 2026-11-27: these returned OK with NaN or Inf)."""

    def fails(name, text, call, *args, **kwargs):
        with pytest.raises(horecon.HoreconError) as e:
            call(*args, **kwargs)
        assert e.value.name == name and text in str(e.value), str(e.value)

    k = np.ones((4, 4, 1), np.complex64)
    fails("HORECON_ERR_INVALID_ARGUMENT", "fov[0]", calib.cartesian_images, k, fov=(1e-310, 0.2, 0.2))
    fails("HORECON_ERR_INVALID_ARGUMENT", "center[0]", calib.cartesian_images, k, fov=0.2, center=(1e307, 0, 0))
    fails("HORECON_ERR_NOT_FINITE", "overflowed", calib.whiten, np.eye(2) * 1e-30, np.full((3, 2), 1e30))
    fails("HORECON_ERR_INVALID_ARGUMENT", "not real", calib.whiten, [[1 + 1j, 0], [0, 1]], np.ones((1, 2)))
    with horecon.Plan((4, 4), ncoils=1, nsamples=8) as plan:
        plan.set_grid_positions((0.2, 0.2, 0.01))
        echoes = np.ones((4, 4, 1, 2), np.complex64)
        fails("HORECON_ERR_INVALID_ARGUMENT", "1 ns apart", calib.b0_map, plan, echoes, [0.0, 5e-324], 0.2)
        fails("HORECON_ERR_INVALID_ARGUMENT", "float64's range", calib.b0_map, plan, echoes, [-1e308, 1e308], 0.2)
        with pytest.raises(ValueError, match="window must be a whole number"):
            calib.walsh(plan, np.ones((4, 4, 1), np.complex64), 0.2, window=2.5)
    # data of 1e20: the residual is summed in float64 (its float32 squares overflowed)
    with horecon.Plan((6, 6), 1, 40, backend="cpu") as p:
        p.set_grid_positions(0.2)
        p.set_trajectory(np.stack([np.linspace(-60, 60, 40), np.linspace(40, -40, 40)], 1))
        d = (np.random.default_rng(1).standard_normal(40) * 1e20).astype(np.complex64)
        delay, residual, curve = calib.estimate_delay(p, d, np.arange(40) * 1e-5)
        assert np.isfinite(residual) and residual > 1e20 and np.isfinite(np.asarray(curve, dtype=float)).all()
        fails("HORECON_ERR_INVALID_ARGUMENT", "1 ns apart", calib.estimate_delay, p, d, np.arange(40) * 5e-324)
