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


FULL_ORDER = [
    (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, -1, 0), (1, 0, 1), (1, 0, -1),
    (0, 1, 1), (0, 1, -1), (1, 1, 1), (1, 1, -1), (1, -1, 1), (1, -1, -1),
]  # fmt: skip


def neighbour_differences(dims):
    """neighbours=26: D (ndirs*N x N) of the differences to every neighbour,
    each edge once, in the documented direction order over the axes of more
    than one voxel, and the weight 1/|d|^2 of each row."""
    n = int(np.prod(dims))
    axes = [a for a in range(3) if dims[a] > 1]
    dirs = [o for o in FULL_ORDER if all(o[k] == 0 or k < len(axes) for k in range(3))] or [(1, 0, 0)]
    d = np.zeros((len(dirs) * n, n))
    c = np.zeros(len(dirs) * n)
    idx = np.arange(n).reshape(dims[::-1]).T
    for k, o in enumerate(dirs):
        off = [0, 0, 0]
        for j, a in enumerate(axes):
            off[a] = o[j]
        c[k * n : (k + 1) * n] = 1.0 / sum(v * v for v in o)
        for at in np.ndindex(*dims):
            to = tuple(at[a] + off[a] for a in range(3))
            if all(0 <= to[a] < dims[a] for a in range(3)):
                d[k * n + idx[at], idx[at]] = -1.0
                d[k * n + idx[at], idx[to]] = 1.0
    return d, c, len(dirs)


@pytest.mark.parametrize("dims", [(5, 4), (4, 3, 3)])
def test_all_neighbour_differences_solve_their_normal_equations(rng, dims):
    n = int(np.prod(dims))
    dims3 = tuple(dims) + (1,) * (3 - len(dims))
    d, c, ndirs = neighbour_differences(dims3)
    assert ndirs == (4 if len(dims) == 2 else 13)
    with grid_plan(rng, dims, nsamples=n // 2, ncoils=2) as plan:
        data = rng.complex(plan.nsamples, plan.ncoils).astype(np.complex64)
        u = rng.uniform(0.2, 2.0, (n, ndirs))
        lam = 0.3 * plan.nsamples * plan.ncoils
        image, info = plan.cg(
            data,
            max_iterations=500,
            tolerance=1e-9,
            regularizer="finite_difference",
            lambda_=lam,
            fd_weights=u,
            neighbours=26,
        )
        assert info["converged"], info
        x = image.reshape(-1, order="F").astype(np.complex128)
        w = c * u.reshape(-1, order="F")
        lhs = plan.normal(x.astype(np.complex64)).reshape(-1, order="F") + lam * d.T @ (w * (d @ x))
        rhs = plan.adjoint(data).reshape(-1, order="F")
        err = rel_rms(lhs, rhs)
        print(f"seed {rng.seed}: {info}, normal-equation residual {err:.1e}")
        assert err < 1e-5, f"seed {rng.seed}"
        # the axis differences (default, or 6) give another solution
        axes, _ = plan.cg(data, max_iterations=500, tolerance=1e-9, regularizer="finite_difference", lambda_=lam)
        six, _ = plan.cg(
            data, max_iterations=500, tolerance=1e-9, regularizer="finite_difference", lambda_=lam, neighbours=6
        )
        full, _ = plan.cg(
            data, max_iterations=500, tolerance=1e-9, regularizer="finite_difference", lambda_=lam, neighbours=26
        )
        assert rel_rms(six, axes) < 1e-6 and rel_rms(full, axes) > 1e-3


def test_cg_options_of_the_older_size_are_accepted(rng):
    """A caller built before `neighbours` existed passes the smaller
    struct_size; the library then reads no further and uses 6."""
    import ctypes

    lib = horecon._load()
    old_size = horecon._CgOptions.neighbours.offset
    assert ctypes.sizeof(horecon._CgOptions) > old_size
    with grid_plan(rng, (4, 3, 2), nsamples=12) as plan:
        data = rng.complex(12).astype(np.complex64)
        want, _ = plan.cg(data, max_iterations=20, tolerance=0.0, regularizer="total_variation", lambda_=2.0)
        opts = horecon._CgOptions()
        lib.horecon_default_cg_options(ctypes.byref(opts))
        opts.struct_size = old_size
        opts.max_iterations = 20
        opts.tolerance = 0.0
        opts.regularizer = 3
        opts.lambda_ = 2.0
        opts.neighbours = 12345  # beyond the old struct: must not be read
        d = np.ascontiguousarray(data)
        x = np.zeros(plan.nvoxels, dtype=np.complex64)
        ptr = lambda a: a.ctypes.data_as(horecon._C32P)
        status = lib.horecon_cg(plan._handle, ptr(d), ctypes.byref(opts), ptr(x), None)
        assert status == horecon.HORECON_OK, horecon._last_error()
        assert rel_rms(x, want.reshape(-1, order="F")) < 1e-6
        # any other size is an error naming struct_size
        opts.struct_size = old_size + 4
        status = lib.horecon_cg(plan._handle, ptr(d), ctypes.byref(opts), ptr(x), None)
        assert status == horecon.HORECON_ERR_INVALID_ARGUMENT and "struct_size" in horecon._last_error()


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
        # neighbours=26 on this 2D grid: 4 directions
        plan.cg(data, regularizer="finite_difference", lambda_=1.0, fd_weights=np.ones((12, 4)), neighbours=26)
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(data, regularizer="finite_difference", lambda_=1.0, fd_weights=np.ones((12, 2)), neighbours=26)
        assert info.value.status == horecon.HORECON_ERR_SIZE_MISMATCH and "fd_weights" in str(info.value)
        for kwargs, word in (
            (dict(regularizer="finite_difference", neighbours=8), "neighbours"),
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
