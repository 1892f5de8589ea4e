"""Cartesian FFT mode through the binding: E, E^H and E^H E against numpy
direct sums of MODEL.md's E for the mask's trajectory, and the errors."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def grid(dims, fov, center):
    axes = [c + (np.arange(n) - n // 2) * (f / n if n > 1 else 0.0) for n, f, c in zip(dims, fov, center)]
    return np.stack([g.ravel(order="F") for g in np.meshgrid(*axes, indexing="ij")], axis=1)


@pytest.mark.parametrize("dims", [(8, 6, 1), (7, 5, 1), (4, 5, 3)])
@pytest.mark.parametrize("precision", ["accurate", "double"])
def test_cartesian_matches_the_direct_sum(rng, dims, precision):
    fov = rng.uniform(0.1, 0.3, 3)
    center = rng.uniform(-0.05, 0.05, 3)
    mask = rng.uniform(0, 1, dims) < 0.4
    mask[0, 0, 0] = True
    m, ncoils = int(mask.sum()), 2
    shape = dims if dims[2] > 1 else dims[:2]
    with horecon.Plan(shape, ncoils=ncoils, nsamples=m, backend="cpu", precision=precision) as plan:
        plan.set_grid_positions(fov, center)
        plan.set_cartesian(mask.reshape(shape))
        s = rng.complex(int(np.prod(dims)), ncoils)
        plan.set_sensitivities(s)
        # The sampled points in Fortran order and their k (rad/m).
        idx = np.flatnonzero(mask.ravel(order="F"))
        p = np.stack(np.unravel_index(idx, dims, order="F"), axis=1)
        k = np.where(np.array(dims) > 1, 2 * np.pi * (p - np.array(dims) // 2) / fov, 0.0)
        e1 = np.exp(1j * grid(dims, fov, center) @ k.T).T  # M x N
        x = rng.complex(int(np.prod(dims)))
        d = plan.forward(x.reshape(shape, order="F"))
        want = np.stack([e1 @ (s[:, c] * x) for c in range(ncoils)], axis=1)
        assert rel_rms(d, want) < 1e-5, f"seed {rng.seed}"
        y = rng.complex(m, ncoils)
        xa = plan.adjoint(y).reshape(-1, order="F")
        want = sum(np.conj(s[:, c]) * (e1.conj().T @ y[:, c]) for c in range(ncoils))
        assert rel_rms(xa, want) < 1e-5, f"seed {rng.seed}"
        xn = plan.normal(x.reshape(shape, order="F")).reshape(-1, order="F")
        want = sum(np.conj(s[:, c]) * (e1.conj().T @ (e1 @ (s[:, c] * x))) for c in range(ncoils))
        assert rel_rms(xn, want) < 1e-5, f"seed {rng.seed}"


def test_cartesian_errors(rng):
    mask = np.zeros((6, 5), dtype=bool)
    mask[:, ::2] = True
    m = int(mask.sum())
    with horecon.Plan((6, 5), nsamples=m, backend="cpu") as plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_cartesian(mask)
        assert info.value.status == horecon.HORECON_ERR_INCOMPLETE_PLAN
        plan.set_grid_positions(0.2)
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_cartesian(mask[:, :4])
        assert info.value.status == horecon.HORECON_ERR_SIZE_MISMATCH
        more = mask.copy()
        more[0, 1] = True
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_cartesian(more)
        assert info.value.status == horecon.HORECON_ERR_SIZE_MISMATCH
        assert str(m + 1) in str(info.value) and str(m) in str(info.value)
        with pytest.raises(TypeError):
            plan.set_cartesian(mask.astype(np.complex64))
        plan.set_cartesian(mask)
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_off_resonance(np.zeros(30), np.zeros(m))
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT
