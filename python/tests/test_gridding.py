"""The gridding baseline through the binding: against numpy direct sums of
sum_j w_j d_jc exp(-i (k0_j + k_j . r_n)), coil combination, Pipe-Menon
weights on a smooth object, and refusals."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def grid_plan(dims, m, ncoils=1, fov=0.2):
    dims = tuple(dims)
    plan = horecon.Plan(dims, ncoils=ncoils, nsamples=m, backend="cpu")
    plan.set_grid_positions(fov)
    axes = [(np.arange(n) - n // 2) * fov / n for n in dims]
    x = np.stack([g.ravel(order="F") for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    return plan, x


@pytest.mark.parametrize("dims", [(12, 9), (7, 6, 5)])
def test_gridding_matches_the_direct_sum(rng, dims):
    m = 300
    plan, x = grid_plan(dims, m)
    with plan:
        k = rng.uniform(-1.5, 1.5, (m, len(dims))) * np.pi * np.array(dims) / 0.2
        plan.set_trajectory(k)
        data = rng.complex(m)
        w = rng.uniform(0.0, 2.0, m)
        out = plan.gridding(data, w)
        assert out.shape == dims
        expect = np.exp(-1j * x @ k.T) @ (w * data)
        err = rel_rms(out.reshape(-1, order="F"), expect)
        print(f"seed {rng.seed}: gridding vs direct sum {err:.1e}")
        assert err < 1e-4, f"seed {rng.seed}"


def test_sensitivities_and_root_sum_of_squares(rng):
    dims, m, L = (10, 8), 250, 3
    k = rng.uniform(-1.0, 1.0, (m, 2)) * np.pi * np.array(dims) / 0.2
    data = rng.complex(m, L)
    w = rng.uniform(0.0, 2.0, m)
    plan, x = grid_plan(dims, m, ncoils=L)
    with plan:
        plan.set_trajectory(k)
        per_coil = np.exp(-1j * x @ k.T) @ (w[:, None] * data)  # N x L
        rss = plan.gridding(data, w).reshape(-1, order="F")
        assert rel_rms(rss, np.sqrt(np.sum(np.abs(per_coil) ** 2, axis=1))) < 1e-4, f"seed {rng.seed}"
        S = rng.complex(x.shape[0], L)
        plan.set_sensitivities(S)
        combined = plan.gridding(data, w).reshape(-1, order="F")
        expect = np.sum(np.conj(S) * per_coil, axis=1) / np.sum(np.abs(S) ** 2, axis=1)
        assert rel_rms(combined, expect) < 1e-4, f"seed {rng.seed}"


def test_pipe_menon_recovers_a_smooth_object(rng):
    dims, fov = (32, 32), 0.22
    spokes, n = 64, 32
    # radial: 2n samples per spoke through the centre
    t = (np.arange(2 * n) - n) * np.pi / fov
    angles = np.arange(spokes) * np.pi / spokes
    k = np.concatenate([np.stack([t * np.cos(a), t * np.sin(a)], axis=1) for a in angles])
    plan, x = grid_plan(dims, k.shape[0], fov=fov)
    with plan:
        plan.set_trajectory(k)
        c = rng.uniform(-0.03, 0.03, 2)
        obj = np.exp(-np.sum((x[:, :2] - c) ** 2, axis=1) / (2 * 0.02**2)).astype(np.complex64)
        data = plan.forward(obj.reshape(dims, order="F"))
        out = plan.gridding(data).reshape(-1, order="F")
        err = rel_rms(out, obj)
        print(f"seed {rng.seed}: Pipe-Menon gridding error {err:.3f}")
        assert err < 0.05, f"seed {rng.seed}"


def test_refusals(rng):
    m = 20
    plan, _ = grid_plan((4, 3), m)
    with plan:
        plan.set_trajectory(rng.uniform(-40, 40, (m, 2)))
        with pytest.raises(horecon.HoreconError) as info:
            plan.gridding(rng.complex(m), -np.ones(m))
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "negative" in str(info.value)
        bad = rng.complex(m)
        bad[2] = np.nan
        with pytest.raises(horecon.HoreconError) as info:
            plan.gridding(bad)
        assert info.value.status == horecon.HORECON_ERR_NOT_FINITE
        with pytest.raises(ValueError):
            plan.gridding(rng.complex(m + 1))
        plan.set_basis(rng.uniform(-0.1, 0.1, (12, 2)), rng.uniform(-50, 50, (m, 2)))
        with pytest.raises(horecon.HoreconError) as info:
            plan.gridding(rng.complex(m))
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "user basis" in str(info.value)
