"""The calibration chain end to end on simulated scans (issue 12), in Python.

Simulated with the toolkit (horecon.sim, horecon.calib.sim_*): a noise
prescan and a 3-echo Cartesian gradient-echo reference (multi-coil, with
correlated noise), and an off-centre spiral scan with 16-term higher-order
field coefficients, a B0 map, coil noise correlation and a clock delay
between the field camera and the data. Then:

  1. whitening from the prescan's noise covariance,
  2. ESPIRiT coil maps from the reference (first echo),
  3. the B0 map from the three echoes,
  4. the delay between the monitored coefficients and the data,
  5. the higher-order reconstruction with everything estimated,

printing each step's figure against the truth.

    PYTHONPATH=python python3 python/examples/calibration_workflow.py [n]
"""

from __future__ import annotations

import sys
import time

import numpy as np

import horecon
import horecon.calib as calib
import horecon.sim as sim

FOV = 0.22
CENTER = (0.0, 0.0, 0.02)
PHANTOM_FOV = (0.2, 0.2, 0.0)
COIL_RADIUS = 0.15


def run(n: int = 64, coils: int = 8, delay: float = 6.3e-6, seed: int = 12, verbose: bool = True) -> dict:
    say = print if verbose else (lambda *a, **k: None)
    fov3 = (FOV, FOV, FOV / n)
    figures = {}

    # ---- simulation: truth on a 2x finer grid (no inverse crime)
    fine = sim.refined_grid((n, n, 1), fov3, CENTER, 2)
    psi_shape = calib.sim_noise_covariance(coils, correlation=0.5, spread=1.0, seed=seed)
    rho_fine = sim.shepp_logan(2, PHANTOM_FOV, CENTER, fine).astype(np.complex64)
    s_fine = sim.coil_sensitivities(fine, coils, COIL_RADIUS, CENTER)
    omega_fine = sim.off_resonance(fine, fov3, CENTER, 120.0)
    echo_times = (2.0e-3, 4.5e-3, 7.0e-3)
    ref_dims = (n, n, 1)
    reference = calib.sim_reference(ref_dims, fov3, CENTER, fine, rho_fine, s_fine, omega_fine, echo_times, 0.25)
    level = np.sqrt(np.mean(np.abs(reference) ** 2)) / 50.0  # SNR 50
    psi_true = psi_shape * (level**2 / np.mean(np.real(np.diag(psi_shape))))
    # coil axis last for the noise (and whitening), then back to [x, y, z, coil, echo]
    reference = calib.sim_correlated_noise(psi_true, reference.transpose(0, 1, 2, 4, 3), seed + 1)
    reference = reference.transpose(0, 1, 2, 4, 3)
    prescan = calib.sim_correlated_noise(psi_true, np.zeros((4000, coils), np.complex64), seed + 2)

    spiral_k, times = sim.spiral(n, FOV, 1.0, 4e-6, 2e-3)
    m = spiral_k.shape[0]
    coefficients = sim.field_coefficients(spiral_k, 4e-6, 1.0, seed)
    with horecon.Plan((2 * n) ** 2, ncoils=coils, nsamples=m) as fine_plan:
        fine_plan.set_positions(fine)
        fine_plan.set_solid_harmonics(coefficients)
        fine_plan.set_off_resonance(omega_fine, times)
        fine_plan.set_sensitivities(s_fine)
        data = fine_plan.forward(rho_fine * 0.25)
    data = calib.sim_correlated_noise(psi_true, data, seed + 3)
    # The field camera's clock lags: monitored k(t) = true k(t - delay).
    monitored = np.stack([np.interp(times - delay, times, c) for c in coefficients.T], axis=1)

    with horecon.Plan((n, n), ncoils=coils, nsamples=m) as plan:
        plan.set_grid_positions(fov3, CENTER)
        positions = sim.refined_grid((n, n, 1), fov3, CENTER, 1)
        truth_s = sim.coil_sensitivities(positions, coils, COIL_RADIUS, CENTER)
        truth_omega = sim.off_resonance(positions, fov3, CENTER, 120.0)
        truth_rho = sim.block_average(rho_fine, (n, n, 1), 2)
        mask = np.abs(truth_rho) > 0.05

        # 1. whitening
        t0 = time.perf_counter()
        psi = calib.noise_covariance(prescan)
        white_noise = calib.whiten(psi, calib.sim_correlated_noise(psi_true, np.zeros((4000, coils), np.complex64),
                                                                   seed + 4))
        deviation = np.max(np.abs(calib.noise_covariance(white_noise) - np.eye(coils)))
        figures["whitening_deviation"] = float(deviation)
        say(f"1. whitening: noise covariance from {prescan.shape[0]} samples; whitened fresh noise: "
            f"largest |cov - I| = {deviation:.3f} ({time.perf_counter() - t0:.2f} s)")
        white_reference = calib.whiten(psi, reference.transpose(0, 1, 2, 4, 3)).transpose(0, 1, 2, 4, 3)
        white_data = calib.whiten(psi, data)

        # 2. ESPIRiT maps (whitened coils) from the first echo
        t0 = time.perf_counter()
        maps, eig = calib.espirit(plan, white_reference[..., 0], fov3, CENTER)
        truth_white = calib.whiten(psi, truth_s)
        tn = truth_white / np.linalg.norm(truth_white, axis=1, keepdims=True)
        phase = np.sum(np.conj(maps) * tn, axis=1)
        phase = np.where(np.abs(phase) > 0, phase / np.maximum(np.abs(phase), 1e-30), 1)
        aligned = maps * phase[:, None]
        m_mask = mask.reshape(-1, order="F")
        map_error = np.linalg.norm((aligned - tn)[m_mask]) / np.linalg.norm(tn[m_mask])
        figures["map_nrmse"] = float(map_error)
        say(f"2. ESPIRiT: map NRMSE inside the object {100 * map_error:.2f} % "
            f"(mean eigenvalue {np.mean(eig[m_mask]):.3f}; {time.perf_counter() - t0:.2f} s)")

        # 3. B0 map
        t0 = time.perf_counter()
        omega = calib.b0_map(plan, reference[:, :, :, :, :], echo_times, fov3, CENTER)
        b0_rms = np.sqrt(np.mean((omega - truth_omega)[m_mask] ** 2)) / (2 * np.pi)
        figures["b0_rms_hz"] = float(b0_rms)
        say(f"3. B0 map: RMS error inside the object {b0_rms:.2f} Hz ({time.perf_counter() - t0:.2f} s)")

        # 4. delay
        t0 = time.perf_counter()
        plan.set_sensitivities(maps)
        plan.set_off_resonance(omega, times)
        plan.set_solid_harmonics(monitored)
        estimate, _, curve = calib.estimate_delay(plan, white_data, times, iterations=6, step=3e-6, range=12e-6)
        figures["delay_error_us"] = float(abs(estimate - delay) * 1e6)
        say(f"4. delay: true {delay * 1e6:.2f} us, estimated {estimate * 1e6:.2f} us "
            f"({len(curve)} short reconstructions, {time.perf_counter() - t0:.1f} s)")

        # 5. reconstruction with everything estimated vs the nominal model
        t0 = time.perf_counter()
        corrected = np.stack([np.interp(times + estimate, times, c) for c in monitored.T], axis=1)
        plan.set_solid_harmonics(corrected)
        image, info = plan.cg(white_data, max_iterations=20, tolerance=0.0)
        rho = image.reshape(-1, order="F")
        truth_img = (truth_rho.reshape(-1, order="F") * np.linalg.norm(truth_white, axis=1)
                     * phase)
        err = np.linalg.norm((rho - truth_img)[m_mask]) / np.linalg.norm(truth_img[m_mask])
        plan.set_trajectory(spiral_k)
        plan.set_off_resonance(None)
        nominal, _ = plan.cg(white_data, max_iterations=20, tolerance=0.0)
        err_nominal = np.linalg.norm((nominal.reshape(-1, order="F") - truth_img)[m_mask]) / np.linalg.norm(
            truth_img[m_mask])
        figures["recon_nrmse"] = float(err)
        figures["nominal_nrmse"] = float(err_nominal)
        say(f"5. reconstruction (estimated maps, B0 and delay, whitened): NRMSE {100 * err:.1f} % "
            f"vs {100 * err_nominal:.1f} % with the nominal trajectory and no B0 "
            f"({info['iterations']} iterations, {time.perf_counter() - t0:.1f} s)")
    return figures


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
