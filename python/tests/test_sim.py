"""The simulation toolkit from Python (python/horecon_sim.py, exposed as horecon.sim)."""

import numpy as np

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
