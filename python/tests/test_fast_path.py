"""The fast path through the binding (issue 17): Plan.set_approximation and
Plan.approximation_info on shared/bench/cases.py problems against their float64
references, the certificate, bad tolerances, and the exact fallback."""

import numpy as np
import pytest

import horecon
from reference import rel_rms


def case_plan(c, **options):
    plan = horecon.Plan((c["nx"], c["ny"], c["nz"]), ncoils=c["L"], nsamples=c["M"], backend="cpu", **options)
    plan.set_positions(c["positions"])  # (3, N)
    plan.set_solid_harmonics(c["coefficients"])  # (B, M)
    plan.set_off_resonance(c["off_resonance"], c["times"])
    plan.set_sensitivities(c["sensitivities"])  # (L, N)
    return plan


@pytest.mark.parametrize("name", ["tiny-2d", "tiny-3d"])
@pytest.mark.parametrize("tolerance", [1e-2, 1e-3, 1e-4])
def test_fast_operators_meet_the_tolerance(cases, name, tolerance):
    c = cases.make_case(name)
    with case_plan(c) as plan:
        info = plan.approximation_info
        assert not info["active"] and info["rank"] == 0 and info["reason"]
        plan.set_approximation(tolerance)
        info = plan.approximation_info
        assert info["active"], info["reason"]
        ef = rel_rms(plan.forward(c["image"]), cases.reference_forward(c).T)
        ea = rel_rms(plan.adjoint(c["data"]).ravel(order="F"), cases.reference_adjoint(c))
        print(f"{name} tol {tolerance:.0e}: K {info['rank']} estimated {info['estimated_error']:.2e} "
              f"forward {ef:.2e} adjoint {ea:.2e}")
        assert ef <= tolerance and ea <= tolerance
        assert info["estimated_error"] <= tolerance


def test_bad_tolerances_and_the_exact_fallback(cases, rng):
    c = cases.make_case("tiny-2d")
    with case_plan(c) as plan:
        plan.set_approximation(1e-3)
        for bad in (-1e-3, float("nan"), float("inf"), 0.5):
            with pytest.raises(horecon.HoreconError) as e:
                plan.set_approximation(bad)
            assert e.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT
        assert plan.approximation_info["active"]
        # Voxels off any lattice: the exact path, and the reason says why.
        plan.set_positions(c["positions"] + 1e-4 * rng.uniform(-1, 1, c["positions"].shape))
        plan.set_solid_harmonics(c["coefficients"])
        info = plan.approximation_info
        assert not info["active"] and "lattice" in info["reason"], info
