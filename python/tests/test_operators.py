"""The operators through the binding against a float64 direct sum of MODEL.md,
each precision mode against its accuracy class, plus adjointness, the normal
operator, the sign convention and the shared benchmark reference."""

import threading

import numpy as np
import pytest

import horecon
from reference import BACKENDS, FOV, grid_positions, random_problem, rel_rms, solid_harmonics

CLASSES = [("accurate", 1e-5), ("fast", 1e-3), ("double", 1e-7)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["harmonics", "basis", "trajectory"])
def test_forward_and_adjoint_match_float64_direct_sum(rng, kind, backend):
    for round_ in range(6):
        prob = random_problem(rng, kind=kind)
        image = rng.complex(prob.nvoxels).astype(np.complex64)
        data = rng.complex(prob.nsamples, prob.ncoils).astype(np.complex64)
        forward_ref, adjoint_ref = prob.forward(image), prob.adjoint(data)
        for precision, bound in CLASSES:
            with prob.plan(precision, backend) as plan:
                assert plan.backend == backend
                d = plan.forward(image)
                x = plan.adjoint(data)
            assert d.shape == (prob.nsamples, prob.ncoils) and d.dtype == np.complex64
            assert x.shape == plan.shape
            ef, ea = rel_rms(d, forward_ref), rel_rms(x, adjoint_ref)
            print(
                f"round {round_} {backend} {precision}: dims {prob.dims} M {prob.nsamples} L {prob.ncoils} "
                f"B {prob.coefficients.shape[1]} off-res {prob.omega is not None}: "
                f"forward {ef:.2e} adjoint {ea:.2e}"
            )
            assert ef <= bound, f"seed {rng.seed}: {precision} forward error {ef:.3e} > {bound:.0e}"
            assert ea <= bound, f"seed {rng.seed}: {precision} adjoint error {ea:.3e} > {bound:.0e}"


def test_adjointness_and_normal(rng):
    for _ in range(4):
        prob = random_problem(rng)
        x = rng.complex(prob.nvoxels).astype(np.complex64)
        y = rng.complex(prob.nsamples, prob.ncoils).astype(np.complex64)
        with prob.plan("accurate") as plan:
            ex = plan.forward(x).astype(np.complex128)
            ehy = plan.adjoint(y).ravel(order="F").astype(np.complex128)
            lhs = np.vdot(y.astype(np.complex128).ravel(order="F"), ex.ravel(order="F"))  # <Ex, y>
            rhs = np.vdot(ehy, x.astype(np.complex128))  # <x, E^H y>
            scale = np.linalg.norm(ex) * np.linalg.norm(y)
            assert abs(lhs - rhs) <= 1e-5 * scale, f"seed {rng.seed}: <Ex,y> {lhs} vs <x,E^H y> {rhs}"
            normal = plan.normal(x)
            composed = plan.adjoint(plan.forward(x))
            assert normal.shape == plan.shape
            err = rel_rms(normal, composed)
            assert err <= 1e-5, f"seed {rng.seed}: normal vs adjoint(forward) {err:.3e}"
            err_ref = rel_rms(normal, prob.adjoint(prob.forward(x)))
            assert err_ref <= 1e-5, f"seed {rng.seed}: normal vs float64 {err_ref:.3e}"


def test_sign_convention(rng):
    """One voxel at r0, one sample with k: d = exp(+i k.r0) (MODEL.md)."""
    r0 = rng.uniform(-0.1, 0.1, 3)
    k = rng.uniform(-500.0, 500.0, 3)  # rad/m
    with horecon.Plan(1, nsamples=1, precision="double") as plan:
        plan.set_positions(r0.reshape(1, 3))
        plan.set_trajectory(k.reshape(1, 3))
        d = plan.forward(np.ones(1))
        expected = np.exp(1j * k @ r0)
        assert abs(d[0, 0] - expected) < 1e-6, (
            f"seed {rng.seed}: got {d[0, 0]}, want exp(+i k.r0) = {expected}"
        )
        assert abs(d[0, 0] - np.conj(expected)) > 1e-3 or abs(expected.imag) < 1e-3
        x = plan.adjoint(np.ones((1, 1)))
        assert abs(x[0] - np.conj(expected)) < 1e-6


def test_model_setters_agree(rng):
    """Grid helper = explicit grid positions; basis (x, y, z) = trajectory;
    user basis = built-in solid harmonics; clearing off-resonance and S = None work."""
    dims = (int(rng.integers(2, 9)), int(rng.integers(2, 9)), int(rng.integers(1, 4)))
    n, m = int(np.prod(dims)), int(rng.integers(5, 60))
    fov = rng.uniform(0.1, 0.3, 3)
    center = rng.uniform(-0.02, 0.02, 3)
    positions = grid_positions(dims, fov, center)
    coefficients = rng.uniform(-1, 1, (m, 9)) * [3, 300, 300, 300, 300, 300, 300, 300, 300]
    x = rng.complex(*dims).astype(np.complex64)
    omega = 2 * np.pi * 100 * rng.uniform(-1, 1, n)
    times = np.linspace(0, 0.02, m)
    with (
        horecon.Plan(dims, nsamples=m, precision="double") as a,
        horecon.Plan(dims, nsamples=m, precision="double") as b,
    ):
        a.set_grid_positions(fov, center)
        b.set_positions(positions)
        a.set_solid_harmonics(coefficients)
        b.set_basis(solid_harmonics(positions, 9), coefficients)
        assert rel_rms(a.forward(x), b.forward(x)) < 1e-6
        a.set_trajectory(coefficients[:, 1:4])
        b.set_basis(positions, coefficients[:, 1:4])
        base = a.forward(x)
        assert rel_rms(base, b.forward(x)) < 1e-6
        a.set_off_resonance(omega.reshape(dims, order="F"), times)  # image-shaped omega
        with_offres = a.forward(x)
        b.set_off_resonance(omega, times)
        assert rel_rms(with_offres, b.forward(x)) < 1e-6
        assert rel_rms(with_offres, base) > 1e-2
        a.set_off_resonance(None)
        assert np.array_equal(a.forward(x), base)
        a.set_sensitivities(np.ones(n))
        assert rel_rms(a.forward(x), base) < 1e-6
        a.set_sensitivities(None)
        assert np.array_equal(a.forward(x), base)


@pytest.mark.parametrize("name", ["tiny-2d", "tiny-3d"])
@pytest.mark.parametrize("precision,bound", [("accurate", 1e-5), ("double", 1e-7)])
def test_shared_bench_reference(cases, name, precision, bound):
    """shared/bench/cases.py float64 reference; its arrays are C-ordered with
    reversed MODEL.md shapes, so they go in unchanged (their memory is the layout)."""
    c = cases.make_case(name)
    nx, ny, nz, L, M = c["nx"], c["ny"], c["nz"], c["L"], c["M"]
    with horecon.Plan((nx, ny, nz), ncoils=L, nsamples=M, precision=precision) as plan:
        plan.set_positions(c["positions"])  # (3, N)
        plan.set_solid_harmonics(c["coefficients"])  # (B, M)
        plan.set_off_resonance(c["off_resonance"], c["times"])
        plan.set_sensitivities(c["sensitivities"])  # (L, N)
        d = plan.forward(c["image"])
        x = plan.adjoint(c["data"])  # (L, M)
        ef = rel_rms(d, cases.reference_forward(c).T)  # reference is (L, M)
        ea = rel_rms(x.ravel(order="F"), cases.reference_adjoint(c))
        print(f"{name} {precision}: forward {ef:.2e} adjoint {ea:.2e}")
        assert ef <= bound, f"{name} {precision} forward {ef:.3e} > {bound:.0e}"
        assert ea <= bound, f"{name} {precision} adjoint {ea:.3e} > {bound:.0e}"
        # the grid helper reproduces the case's positions
        plan.set_grid_positions((cases.FOV,) * 3)
        assert rel_rms(plan.forward(c["image"]), d) < 10 * bound


def test_concurrent_operators_on_one_plan(rng):
    prob = random_problem(rng, max_voxels=400, max_samples=300)
    images = [rng.complex(prob.nvoxels).astype(np.complex64) for _ in range(4)]
    with prob.plan() as plan:
        serial = [plan.forward(x) for x in images]
        results = [None] * len(images)

        def work(i):
            for _ in range(5):
                results[i] = plan.forward(images[i])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(images))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s, r in zip(serial, results, strict=True):
            assert np.array_equal(s, r)


def test_module_functions():
    assert horecon.version().count(".") == 2
    assert horecon.cuda_device_count() >= 0
    assert horecon.status_string(horecon.HORECON_ERR_NOT_FINITE).startswith("HORECON_ERR_NOT_FINITE")
    assert horecon.library_path()
    assert FOV > 0
