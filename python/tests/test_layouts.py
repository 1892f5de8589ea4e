"""Array layouts: every accepted spelling of an argument (semantic shape in C
or Fortran order, the reversed shape, strided views, image-shaped arrays)
gives bit-identical results; anything else is rejected, never misread."""

import numpy as np
import pytest

import horecon
from reference import random_problem, rel_rms


def spellings(a):
    """The semantic 2-D array a (rows, cols) in C order, Fortran order, as the
    C-ordered reversed shape (cols, rows), the Fortran-ordered reversed shape,
    and a strided view."""
    big = np.zeros((a.shape[0] * 2, a.shape[1] * 3), dtype=a.dtype)
    big[::2, ::3] = a
    return {
        "C (rows, cols)": np.ascontiguousarray(a),
        "F (rows, cols)": np.asfortranarray(a),
        "C (cols, rows)": np.ascontiguousarray(a.T),
        "F (cols, rows)": np.asfortranarray(a.T),
        "strided (rows, cols)": big[::2, ::3],
    }


def make_problem(rng):
    while True:
        prob = random_problem(rng, kind="harmonics")
        n, m, b, L = prob.nvoxels, prob.nsamples, prob.coefficients.shape[1], prob.ncoils
        # the reversed spellings are only unambiguous when the two sizes differ
        # b >= 4: the phase depends on the positions (b = 1 is the constant term only)
        if n != 3 and m != b and n != L and m != L and n > 1 and L > 1 and b >= 4:
            return prob


def forward_with(prob, image, **replace):
    """forward(image) on a plan built from prob, with some arguments replaced."""
    args = dict(
        positions=prob.positions,
        coefficients=prob.coefficients,
        sensitivities=prob.sensitivities,
        omega=prob.omega,
    )
    args.update(replace)
    with horecon.Plan(prob.dims, ncoils=prob.ncoils, nsamples=prob.nsamples) as plan:
        plan.set_positions(args["positions"])
        plan.set_solid_harmonics(args["coefficients"])
        if args["omega"] is not None:
            plan.set_off_resonance(args["omega"], prob.times)
        plan.set_sensitivities(args["sensitivities"])
        return plan.forward(image)


def test_positions_coefficients_sensitivities_spellings(rng):
    prob = make_problem(rng)
    image = rng.complex(prob.nvoxels).astype(np.complex64)
    base = forward_with(prob, image)
    assert rel_rms(base, prob.forward(image)) < 1e-5, f"seed {rng.seed}"
    for argument in ["positions", "coefficients", "sensitivities"]:
        for label, spelled in spellings(getattr(prob, argument)).items():
            got = forward_with(prob, image, **{argument: spelled})
            assert np.array_equal(got, base), f"seed {rng.seed}: {argument} as {label} differs"
    # image-shaped sensitivities (nx, ny, nz, L) indexed [ix, iy, iz, c], C or F order
    s4 = prob.sensitivities.reshape(prob.dims + (prob.ncoils,), order="F")
    for s in (s4, np.ascontiguousarray(s4)):
        assert np.array_equal(forward_with(prob, image, sensitivities=s), base)


def test_positions_c_and_f_order_of_n_by_3(rng):
    """The issue's explicit case: (N, 3) C-order and F-order give identical results."""
    prob = make_problem(rng)
    image = rng.complex(prob.nvoxels).astype(np.complex64)
    pc = np.ascontiguousarray(prob.positions)
    pf = np.asfortranarray(prob.positions)
    assert pc.flags.c_contiguous and pf.flags.f_contiguous
    a, b = forward_with(prob, image, positions=pc), forward_with(prob, image, positions=pf)
    assert np.array_equal(a, b)
    # and a C-order (N, 3) misread as x-block/y-block/z-block would differ
    misread = pc.reshape(-1).reshape((prob.nvoxels, 3), order="F")
    assert not np.array_equal(forward_with(prob, image, positions=misread), a)


def test_image_and_data_spellings(rng):
    prob = make_problem(rng)
    nz = prob.dims[2]
    flat = rng.complex(prob.nvoxels).astype(np.complex64)
    cube = flat.reshape(prob.dims, order="F")  # cube[ix, iy, iz]
    data = rng.complex(prob.nsamples, prob.ncoils).astype(np.complex64)
    with prob.plan() as plan:
        base = plan.forward(flat)
        for image in (cube, np.ascontiguousarray(cube), cube.astype(np.complex128), cube[:, :, :]):
            assert np.array_equal(plan.forward(image), base)
        if nz == 1:
            assert np.array_equal(plan.forward(cube[:, :, 0]), base)
        assert base.shape == (prob.nsamples, prob.ncoils) and base.flags.f_contiguous
        ref = plan.adjoint(data)
        assert ref.shape == plan.shape and ref.flags.f_contiguous
        for label, spelled in spellings(data).items():
            assert np.array_equal(plan.adjoint(spelled), ref), label
        # returned images are indexed [ix, iy, iz]
        assert np.array_equal(ref.ravel(order="F"), plan.adjoint(data).reshape(-1, order="F"))
    # real input accepted and equal to its complex spelling
    real = rng.standard_normal(prob.nvoxels)
    with prob.plan() as plan:
        assert np.array_equal(plan.forward(real), plan.forward(real.astype(np.complex64)))


def test_returned_image_shape():
    for shape, expected in [(5, (5,)), ((5, 4), (5, 4)), ((5, 4, 1), (5, 4)), ((5, 4, 3), (5, 4, 3))]:
        n = int(np.prod(shape))
        with horecon.Plan(shape, nsamples=7) as plan:
            assert plan.shape == expected
            plan.set_grid_positions(0.2)
            plan.set_trajectory(np.linspace(1, 50, 21).reshape(7, 3))
            assert plan.adjoint(np.ones(7)).shape == expected
            assert plan.normal(np.ones(n)).shape == expected


def test_ambiguous_square_shapes_take_the_semantic_reading(rng):
    """N = 3: a (3, 3) positions array is read as (N, 3), never transposed."""
    positions = rng.uniform(-0.1, 0.1, (3, 3))
    k = rng.uniform(-100, 100, (4, 3))
    image = rng.complex(3)
    with horecon.Plan(3, nsamples=4, precision="double") as plan:
        plan.set_positions(positions)
        plan.set_trajectory(k)
        d = plan.forward(image)
    want = np.exp(1j * k @ positions.T) @ image
    assert rel_rms(d[:, 0], want) < 1e-6


@pytest.mark.parametrize(
    "method,args",
    [
        ("set_positions", [np.zeros((12, 2))]),
        ("set_positions", [np.zeros((4, 3, 3))]),
        ("set_positions", [np.zeros(36)]),
        ("set_solid_harmonics", [np.zeros((6, 4))]),
        ("set_trajectory", [np.zeros((5, 2, 1))]),
        ("set_sensitivities", [np.ones((12, 3))]),
        ("set_sensitivities", [np.ones((3, 4, 3))]),
        ("forward", [np.ones(13)]),
        ("forward", [np.ones((3, 4))]),  # (ny, nx): the image must be indexed [ix, iy]
        ("adjoint", [np.ones((5, 3))]),
        ("adjoint", [np.ones(5)]),
        ("normal", [np.ones((12, 1, 1, 1))]),
        ("set_off_resonance", [np.ones(12), np.ones(4)]),
        ("set_grid_positions", [(0.2, 0.2)]),
        ("cg", [np.ones((5, 2)), 5, 1e-6, "none", 0.0, np.ones(4)]),
    ],
)
def test_wrong_shapes_raise_value_error_naming_the_expected_shape(method, args):
    with horecon.Plan((4, 3), ncoils=2, nsamples=5) as plan:
        with pytest.raises(ValueError) as info:
            getattr(plan, method)(*args)
        assert isinstance(info.value, horecon.HoreconError)
        assert info.value.status == horecon.HORECON_ERR_SIZE_MISMATCH
        assert "expected" in info.value.message


def test_wrong_dtypes_raise_type_error():
    with horecon.Plan((4, 3), nsamples=5) as plan:
        with pytest.raises(TypeError):
            plan.set_positions(np.zeros((12, 3), dtype=np.complex128))
        with pytest.raises(TypeError):
            plan.set_positions(np.array([["a"] * 3] * 12))
        with pytest.raises(TypeError):
            plan.forward(np.array(["x"] * 12))
