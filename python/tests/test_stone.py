"""Stone et al.'s F^H d and Q through the binding, against numpy direct sums
of their eqs. 4 and 3, and Q as the Toeplitz kernel of the plan's normal."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def stone_plan(rng, dims, m, fov=0.2):
    """A single-coil trajectory plan for Stone's k (cycles/m): the plan gets -2 pi k."""
    dims = tuple(dims)
    ndims = len(dims)
    k = rng.uniform(-0.5, 0.5, (m, ndims)) * np.array(dims) / fov
    plan = horecon.Plan(dims, nsamples=m, backend="cpu")
    plan.set_grid_positions(fov)
    plan.set_trajectory(-2 * np.pi * k)
    axes = [(np.arange(n) - n // 2) * fov / n for n in dims]
    x = np.stack([g.ravel(order="F") for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    return plan, k, x


@pytest.mark.parametrize("dims", [(8, 6), (7, 5), (4, 5, 3)])
def test_fhd_and_q_match_stones_sums(rng, dims):
    m = 60
    plan, k, x = stone_plan(rng, dims, m)
    with plan:
        data = rng.complex(m)
        phi = rng.complex(m)
        out = plan.fhd(data, phi)
        expect = np.exp(2j * np.pi * x @ k.T) @ (np.conj(phi) * data)
        assert rel_rms(out.reshape(-1, order="F"), expect) < 1e-5, f"seed {rng.seed}"
        assert rel_rms(plan.fhd(data).reshape(-1, order="F"), np.exp(2j * np.pi * x @ k.T) @ data) < 1e-5
        # Q on the 2x grid: offsets (i - n) * fov / n along each axis
        w = rng.uniform(0.1, 2.0, m)
        q = plan.q(w)
        assert q.shape == tuple(2 * n for n in dims) == plan.q_dims()[: len(dims)]
        offsets = [(np.arange(2 * n) - n) * 0.2 / n for n in dims]
        r = np.stack([g.ravel(order="F") for g in np.meshgrid(*offsets, indexing="ij")], axis=1)
        want = np.exp(2j * np.pi * r @ k.T) @ w
        err = rel_rms(q.reshape(-1, order="F"), want)
        print(f"seed {rng.seed}: Q vs eq. 3 {err:.1e}")
        assert err < 1e-5, f"seed {rng.seed}"
        # the Toeplitz property with phi = 1: E^H E rho = sum_n' Q[i_n - i_n' + n] rho_n'
        q1 = plan.q()
        rho = rng.complex(*dims).astype(np.complex64)
        idx = np.stack(np.meshgrid(*[np.arange(n) for n in dims], indexing="ij"), axis=-1).reshape(-1, len(dims), order="F")
        diff = idx[:, None, :] - idx[None, :, :] + np.array(dims)
        kernel = q1[tuple(diff[..., a] for a in range(len(dims)))]
        conv = kernel @ rho.reshape(-1, order="F")
        assert rel_rms(plan.normal(rho).reshape(-1, order="F"), conv) < 2e-5, f"seed {rng.seed}"


def test_stone_plans_only(rng):
    with horecon.Plan((4, 3), ncoils=2, nsamples=5, backend="cpu") as plan:
        plan.set_grid_positions(0.2)
        plan.set_trajectory(rng.uniform(-40, 40, (5, 2)))
        plan.set_sensitivities(rng.complex(12, 2))
        with pytest.raises(horecon.HoreconError) as info:
            plan.q()
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "single-coil" in str(info.value)
    with horecon.Plan((4, 3), nsamples=5, backend="cpu") as plan:
        plan.set_grid_positions(0.2)
        plan.set_solid_harmonics(rng.uniform(-40, 40, (5, 4)))
        with pytest.raises(horecon.HoreconError) as info:
            plan.fhd(np.ones(5))
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "set_trajectory" in str(info.value)
