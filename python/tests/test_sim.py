"""The simulation toolkit from Python (python/horecon_sim.py, exposed as horecon.sim)."""

import numpy as np
import pytest

import horecon
import horecon.sim as horecon_sim


def test_toolkit_is_horecon_sim():
    assert horecon.sim is horecon_sim


def test_toolkit_self_check():
    # analytic Shepp-Logan F(k) vs a voxel sum, trajectory units, field model,
    # coil maps, noise at a given SNR, metrics and a refused bad argument
    horecon_sim._selftest()


def test_simulated_cartesian_scan_reconstructs_with_the_plan():
    # a fully sampled Cartesian trajectory determines the image: CG must recover it
    n, fov = 32, 0.22
    k, t = horecon.sim.cartesian(n, n, fov, fov, 4e-6)
    with horecon.Plan((n, n), nsamples=k.shape[0]) as plan:
        plan.set_grid_positions(fov=(fov, fov, 0.005))
        plan.set_trajectory(k)
        p = horecon.sim.refined_grid((n, n, 1), (fov, fov, 0.005), (0.0, 0.0, 0.0), 1)
        truth = horecon.sim.shepp_logan(2, (fov, fov, 0.0), (0.0, 0.0, 0.0), p).reshape((n, n), order="F")
        data = plan.forward(truth)
        recon, info = plan.cg(data, max_iterations=60, tolerance=1e-7)
    err = horecon.sim.nrmse(recon.ravel(order="F"), truth.ravel(order="F").astype(np.complex64))
    print(f"cartesian {n}x{n}: {info['iterations']} iterations, NRMSE {err:.3f}")
    assert err < 1e-3


def test_bad_arguments_are_named_with_their_values():
    # a negative factor or ndims was reported as "got 0"; a negative or tiny
    # fov gave an infinite off-resonance map with an OK status
    p = horecon.sim.refined_grid((4, 4, 1), (0.2, 0.2, 0.01), (0.0, 0.0, 0.0), 1)
    for call, text in (
        (lambda: horecon.sim.refined_grid((4, 4, 1), (0.2, 0.2, 0.01), (0.0, 0.0, 0.0), -3), "got -3"),
        (lambda: horecon.sim.shepp_logan(-2, (0.2, 0.2, 0.0), (0.0, 0.0, 0.0), p), "got -2"),
        (lambda: horecon.sim.off_resonance(p, (-0.2, 0.2, 0.0), (0.0, 0.0, 0.0), 50.0), "fov must be >= 0"),
        (lambda: horecon.sim.off_resonance(p, (1e-170, 0.2, 0.0), (0.0, 0.0, 0.0), 50.0), "overflows"),
    ):
        with pytest.raises(horecon.sim.SimError) as e:
            call()
        assert "HORECON_ERR_INVALID_ARGUMENT" in str(e.value) and text in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="1 to 3 entries"):
        horecon.sim.block_average(np.ones(36), (2, 2, 1, 2), 3)  # a 4th entry shifted every argument
    omega = horecon.sim.off_resonance(p, (0.2, 0.0, 0.0), (0.0, 0.0, 0.0), 50.0)
    assert np.isfinite(omega).all()
