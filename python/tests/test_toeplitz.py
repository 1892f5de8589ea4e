"""The Toeplitz normal operator through the binding: Plan.set_toeplitz
against a numpy float64 E^H E, time segmentation, CG, and the refusals."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def lattice_plan(rng, dims, m, coils=2, fov=0.2, higher=False, off_resonance=None):
    """A plan with solid harmonics (k0, x, y, z; terms above order 1 zero
    unless `higher`) on a grid, and its dense float64 E."""
    dims = tuple(dims)
    n = int(np.prod(dims))
    plan = horecon.Plan(dims, ncoils=coils, nsamples=m, backend="cpu")
    plan.set_grid_positions(fov)
    axes = [(np.arange(d) - d // 2) * fov / d for d in dims] + [np.zeros(1)] * (3 - len(dims))
    r = np.stack([g.ravel(order="F") for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    c = np.zeros((m, 9))
    c[:, 0] = rng.uniform(-3, 3, m)
    c[:, 1:4] = rng.uniform(-1, 1, (m, 3)) * np.pi * max(dims) / fov
    if higher:
        c[3, 4] = 50.0
    plan.set_solid_harmonics(c)
    phase = c[:, :1] + c[:, 1:4] @ r.T
    if off_resonance is not None:
        omega = 2 * np.pi * off_resonance * rng.uniform(-1, 1, n)
        times = np.linspace(0, 0.01, m)
        plan.set_off_resonance(omega, times)
        phase = phase + np.outer(times, omega)
    s = rng.complex(n, coils)
    plan.set_sensitivities(s)
    e = np.concatenate([np.exp(1j * phase) * s[:, l][None, :] for l in range(coils)])
    return plan, e


@pytest.mark.parametrize("dims", [(8, 6), (7, 5), (4, 5, 3)])
def test_toeplitz_normal_matches_dense(rng, dims):
    m = 80
    plan, e = lattice_plan(rng, dims, m)
    with plan:
        rho = rng.complex(*dims).astype(np.complex64)
        exact = plan.normal(rho)
        plan.set_toeplitz(True)
        fast = plan.normal(rho)
        want = e.conj().T @ (e @ rho.reshape(-1, order="F"))
        err = rel_rms(fast.reshape(-1, order="F"), want)
        print(f"seed {rng.seed}: Toeplitz vs dense {err:.1e}")
        assert err < 1e-5, f"seed {rng.seed}"
        assert rel_rms(fast, exact) < 2e-5
        data = rng.complex(m, 2).astype(np.complex64)
        x_fast, _ = plan.cg(data, max_iterations=4, tolerance=0, regularizer="tikhonov", lambda_=float(m))
        plan.set_toeplitz(False)
        x_exact, _ = plan.cg(data, max_iterations=4, tolerance=0, regularizer="tikhonov", lambda_=float(m))
        assert rel_rms(x_fast, x_exact) < 1e-5, f"seed {rng.seed}"


def test_toeplitz_time_segmentation(rng):
    dims, m = (8, 7), 120
    plan, e = lattice_plan(rng, dims, m, off_resonance=80.0)
    with plan:
        plan.set_toeplitz(True, 0)
        rho = rng.complex(*dims).astype(np.complex64)
        want = e.conj().T @ (e @ rho.reshape(-1, order="F"))
        err = rel_rms(plan.normal(rho).reshape(-1, order="F"), want)
        print(f"seed {rng.seed}: time-segmented Toeplitz vs dense {err:.1e}")
        assert err < 1e-3, f"seed {rng.seed}"


def test_toeplitz_refusals(rng):
    plan, _ = lattice_plan(rng, (5, 4), 20, higher=True)
    with plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_toeplitz(True, -1)
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "time_segments" in str(info.value)
        plan.set_toeplitz(True)
        with pytest.raises(horecon.HoreconError) as info:
            plan.normal(np.ones((5, 4), np.complex64))
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "order 2" in str(info.value)
        plan.set_toeplitz(False)
        plan.normal(np.ones((5, 4), np.complex64))
