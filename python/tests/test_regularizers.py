"""The finite-difference, total-variation and Laplace regularizers through
the binding: the FD solution against normal equations built here with numpy,
the fd_weights layouts and errors, and TV / Laplace against Tikhonov on a
piecewise-constant phantom."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def difference_matrix(dims):
    """D (edges x N) of forward differences along the axes of more than one
    voxel, no edge from the last voxel of an axis; rows a*N + n."""
    n = int(np.prod(dims))
    axes = [a for a in range(3) if dims[a] > 1] or [0]
    d = np.zeros((len(axes) * n, n))
    idx = np.arange(n).reshape(dims[::-1]).T  # idx[ix, iy, iz] = ix + nx*(iy + ny*iz)
    for a, axis in enumerate(axes):
        for c in np.ndindex(*dims):
            if c[axis] + 1 < dims[axis]:
                s = list(c)
                s[axis] += 1
                v = idx[c]
                d[a * n + v, v] = -1.0
                d[a * n + v, idx[tuple(s)]] = 1.0
    return d


def grid_plan(rng, dims, nsamples, ncoils=1):
    plan = horecon.Plan(dims, ncoils=ncoils, nsamples=nsamples, backend="cpu", precision="double")
    plan.set_grid_positions(0.2)
    kmax = np.pi * max(dims) / 0.2
    ndims = len(dims)
    plan.set_trajectory(rng.uniform(-kmax, kmax, (nsamples, ndims)))
    if ncoils > 1:
        plan.set_sensitivities(rng.complex(int(np.prod(dims)), ncoils))
    return plan


@pytest.mark.parametrize("dims", [(5, 4), (4, 3, 3)])
def test_finite_difference_solves_its_normal_equations(rng, dims):
    n = int(np.prod(dims))
    dims3 = tuple(dims) + (1,) * (3 - len(dims))
    ndims = sum(1 for d in dims3 if d > 1)
    with grid_plan(rng, dims, nsamples=n // 2, ncoils=2) as plan:
        data = rng.complex(plan.nsamples, plan.ncoils).astype(np.complex64)
        u = rng.uniform(0.2, 2.0, (n, ndims))
        lam = 0.3 * plan.nsamples * plan.ncoils
        image, info = plan.cg(
            data, max_iterations=500, tolerance=1e-9, regularizer="finite_difference", lambda_=lam, fd_weights=u
        )
        assert info["converged"], info
        x = image.reshape(-1, order="F").astype(np.complex128)
        d = difference_matrix(dims3)
        lhs = plan.normal(x.astype(np.complex64)).reshape(-1, order="F") + lam * d.T @ (
            u.reshape(-1, order="F") * (d @ x)
        )
        rhs = plan.adjoint(data).reshape(-1, order="F")
        err = rel_rms(lhs, rhs)
        print(f"seed {rng.seed}: {info}, normal-equation residual {err:.1e}")
        assert err < 1e-5, f"seed {rng.seed}"
        # the same weights in the other accepted layouts
        for layout in (u.T.copy(), u.reshape(tuple(dims) + (ndims,), order="F")):
            again, _ = plan.cg(
                data,
                max_iterations=500,
                tolerance=1e-9,
                regularizer="finite_difference",
                lambda_=lam,
                fd_weights=layout,
            )
            assert rel_rms(again, image) < 1e-6
        # and unit weights give another solution
        unit, _ = plan.cg(data, max_iterations=500, tolerance=1e-9, regularizer="finite_difference", lambda_=lam)
        assert rel_rms(unit, image) > 1e-3


def test_fd_weights_errors(rng):
    with grid_plan(rng, (4, 3), nsamples=6) as plan:
        data = rng.complex(6).astype(np.complex64)
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(data, regularizer="finite_difference", lambda_=1.0, fd_weights=np.ones((12, 3)))
        assert info.value.status == horecon.HORECON_ERR_SIZE_MISMATCH and "fd_weights" in str(info.value)
        u = np.ones((12, 2))
        u[5, 1] = -1.0
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(data, regularizer="finite_difference", lambda_=1.0, fd_weights=u)
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "fd_weights[17]" in str(info.value)
        u[5, 1] = np.nan
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(data, regularizer="total_variation", lambda_=1.0, fd_weights=u)
        assert info.value.status == horecon.HORECON_ERR_NOT_FINITE
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(data, regularizer="tikhonov", lambda_=1.0, fd_weights=np.ones((12, 2)))
        assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and "fd_weights" in str(info.value)
        for kwargs, word in (
            (dict(regularizer="laplace", sigma=0.0), "sigma"),
            (dict(regularizer="laplace", epsilon=-1.0), "epsilon"),
            (dict(regularizer="total_variation", reweightings=-2), "reweightings"),
        ):
            with pytest.raises(horecon.HoreconError) as info:
                plan.cg(data, lambda_=1.0, **kwargs)
            assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT and word in str(info.value)


def phantom(nx, ny):
    fx, fy = np.meshgrid((np.arange(nx) + 0.5) / nx - 0.5, (np.arange(ny) + 0.5) / ny - 0.5, indexing="ij")
    x = np.zeros((nx, ny))
    x[(fx / 0.42) ** 2 + (fy / 0.36) ** 2 <= 1] = 1.0
    x[(fx >= -0.25) & (fx < -0.05) & (fy >= -0.2) & (fy < 0.15)] = 0.4
    x[(fx >= 0.08) & (fx < 0.28) & (fy >= -0.1) & (fy < 0.05)] = 1.6
    return x.astype(np.complex64)


def test_tv_and_laplace_beat_tikhonov_on_a_piecewise_constant_phantom(rng):
    nx = ny = 24
    spokes = 10  # M = 240 samples for N = 576 unknowns
    angles = np.pi * np.arange(spokes) / spokes
    kmax = np.pi * nx / 0.2
    radius = kmax * (np.arange(nx) - nx // 2) / (nx // 2)
    k = np.stack([np.outer(np.cos(angles), radius).ravel(), np.outer(np.sin(angles), radius).ravel()], axis=1)
    m = k.shape[0]
    with horecon.Plan((nx, ny), nsamples=m, backend="cpu") as plan:
        plan.set_grid_positions(0.2)
        plan.set_trajectory(k)
        truth = phantom(nx, ny)
        data = plan.forward(truth)
        noise = 0.01 * np.sqrt(np.mean(np.abs(data) ** 2))
        data = (data + noise * rng.complex(m, 1)).astype(np.complex64)

        def best(regularizer, lambdas, **kwargs):
            errors = []
            for lam in lambdas:
                image, info = plan.cg(
                    data, max_iterations=40, tolerance=1e-6, regularizer=regularizer, lambda_=lam * m, **kwargs
                )
                errors.append(rel_rms(image, truth))
            return min(errors)

        tikhonov = best("tikhonov", [1e-4, 1e-3, 1e-2, 1e-1])
        tv = best("total_variation", [3e-3, 1e-2, 3e-2], reweightings=8, epsilon=1e-2)
        laplace = best("laplace", [3e-3, 1e-2, 3e-2], reweightings=8, epsilon=0.1, sigma=0.2)
        print(f"seed {rng.seed}: NRMSE Tikhonov {tikhonov:.3f}, TV {tv:.3f}, Laplace {laplace:.3f}")
        assert tv < 0.7 * tikhonov and laplace < 0.7 * tikhonov, f"seed {rng.seed}"
        # reweighting: iterations over all outer steps
        _, info = plan.cg(data, max_iterations=5, tolerance=0.0, regularizer="laplace", lambda_=0.01 * m, reweightings=3)
        assert info["iterations"] == 15 and not info["converged"]
