//! The calibration chain on simulated data with known truth (issue 12):
//! ESPIRiT and Walsh maps, the B0 map, whitening, delay estimation.
//! Every test prints its seed (HORECON_TEST_SEED replays it).

mod common;

use common::Rng;
use horecon::calib::b0::B0Options;
use horecon::calib::delay::{estimate_delay, resample, DelayOptions};
use horecon::calib::espirit::EspiritOptions;
use horecon::calib::noise::{noise_covariance, whiten};
use horecon::calib::reference::ReferenceGrid;
use horecon::sim;
use horecon::sim::reference::{
    add_correlated_noise, cartesian_reference, covariance_for_snr, noise_covariance_model,
};
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan};
use num_complex::Complex64;

const FOV: f64 = 0.22;
const PHANTOM_FOV: [f64; 3] = [0.2, 0.2, 0.0];
const COIL_RADIUS: f64 = 0.15;

fn cpu() -> Options {
    Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    }
}

/// A 2D scene: the object and coils, continuous in space.
struct Scene {
    center: [f64; 3],
    coils: usize,
}

impl Scene {
    fn object(&self, positions: &[f64]) -> Vec<Complex32> {
        sim::shepp_logan(2, PHANTOM_FOV, self.center, positions)
            .unwrap()
            .into_iter()
            .map(|v| Complex32::new(v as f32, 0.0))
            .collect()
    }
    fn sensitivities(&self, positions: &[f64]) -> Vec<Complex32> {
        sim::coil_sensitivities(positions, self.coils, COIL_RADIUS, self.center).unwrap()
    }
    fn omega(&self, positions: &[f64], max_hz: f64) -> Vec<f64> {
        sim::off_resonance_map(positions, [FOV, FOV, 0.0], self.center, max_hz).unwrap()
    }
    /// Reference k-space (N_ref×L×E) simulated on a 2× finer grid, with noise at `snr`.
    fn reference(
        &self,
        grid: &ReferenceGrid,
        echo_times: &[f64],
        max_hz: f64,
        snr: f64,
        seed: u64,
    ) -> Vec<Complex32> {
        let (_, fine) = sim::refined_grid(grid.dims, grid.fov, grid.center, 2).unwrap();
        let omega = self.omega(&fine, max_hz);
        let mut y = cartesian_reference(
            grid,
            &fine,
            &self.object(&fine),
            &self.sensitivities(&fine),
            self.coils,
            Some(&omega),
            echo_times,
            0.25,
        )
        .unwrap();
        sim::add_noise(&mut y, snr, seed).unwrap();
        y
    }
}

fn grid_plan(n: usize, coils: usize, samples: usize, center: [f64; 3]) -> Plan {
    let mut plan = Plan::new(cpu(), n as i64, n as i64, 1, coils as i64, samples as i64).unwrap();
    plan.set_grid_positions([FOV, FOV, FOV / n as f64], center)
        .unwrap();
    plan
}

fn positions(plan: &Plan) -> Vec<f64> {
    plan.model().positions.clone().unwrap()
}

/// NRMSE over the voxels of `mask` of maps (N×L) against the truth
/// normalised to Σ_c|S_c|² = 1, after removing each voxel's common phase.
fn map_nrmse(maps: &[Complex32], truth: &[Complex32], coils: usize, mask: &[bool]) -> f64 {
    let n = mask.len();
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for v in (0..n).filter(|&v| mask[v]) {
        let t: Vec<Complex64> = (0..coils)
            .map(|c| Complex64::new(truth[c * n + v].re as f64, truth[c * n + v].im as f64))
            .collect();
        let tn = t.iter().map(|c| c.norm_sqr()).sum::<f64>().sqrt();
        let m: Vec<Complex64> = (0..coils)
            .map(|c| Complex64::new(maps[c * n + v].re as f64, maps[c * n + v].im as f64))
            .collect();
        let overlap: Complex64 = m.iter().zip(&t).map(|(a, b)| a.conj() * b).sum();
        let phase = if overlap.norm() > 0.0 {
            overlap / overlap.norm()
        } else {
            Complex64::new(1.0, 0.0)
        };
        for c in 0..coils {
            err += (m[c] * phase - t[c] / tn).norm_sqr();
            norm += (t[c] / tn).norm_sqr();
        }
    }
    (err / norm).sqrt()
}

fn object_mask(scene: &Scene, positions: &[f64]) -> Vec<bool> {
    scene
        .object(positions)
        .iter()
        .map(|v| v.re > 0.05)
        .collect()
}

#[test]
fn espirit_maps_match_the_truth_and_reconstruct_as_well() {
    let mut rng = Rng::fresh("espirit_maps_match_the_truth_and_reconstruct_as_well");
    let coils = rng.int(4, 8);
    let snr = rng.range(30.0, 100.0);
    let scene = Scene {
        center: [rng.range(-0.005, 0.005), rng.range(-0.005, 0.005), 0.0],
        coils,
    };
    // Reference 48² over a larger FOV, reconstruction 64² (a different grid).
    let grid = ReferenceGrid::new([48, 48, 1], [0.24, 0.24, 0.005], [0.0, 0.0, 0.0]).unwrap();
    let kspace = scene.reference(&grid, &[3e-3], 0.0, snr, rng.next_u64());
    let n = 64;
    let spiral = sim::spiral(n as i64, FOV, 1.0, 4e-6, 1e-3).unwrap();
    let m = spiral.samples();
    let mut plan = grid_plan(n, coils, m, scene.center);
    let p = positions(&plan);
    let result = plan
        .espirit(&grid, &kspace, &EspiritOptions::default())
        .unwrap();
    let truth_maps = scene.sensitivities(&p);
    let mask = object_mask(&scene, &p);
    let error = map_nrmse(&result.maps, &truth_maps, coils, &mask);
    let inside: f64 = (0..n * n)
        .filter(|&v| mask[v])
        .map(|v| result.eigenvalues[v] as f64)
        .sum::<f64>()
        / mask.iter().filter(|&&m| m).count() as f64;
    eprintln!(
        "ESPIRiT: {coils} coils, SNR {snr:.0}, rank {}, mean eigenvalue inside {inside:.3}, map NRMSE {:.2} %",
        result.rank,
        100.0 * error
    );
    assert!(error <= 0.05, "map NRMSE {error}");

    // Reconstructions: data from the true maps (on a finer grid), recon with
    // the normalised true maps and with the ESPIRiT maps (phase aligned).
    let (_, fine) =
        sim::refined_grid([n, n, 1], [FOV, FOV, FOV / n as f64], scene.center, 2).unwrap();
    let mut fine_plan = Plan::new(cpu(), (4 * n * n) as i64, 1, 1, coils as i64, m as i64).unwrap();
    fine_plan.set_positions(&fine).unwrap();
    fine_plan.set_trajectory(2, &spiral.k).unwrap();
    fine_plan
        .set_sensitivities(Some(&scene.sensitivities(&fine)))
        .unwrap();
    let fine_object: Vec<Complex32> = scene.object(&fine).iter().map(|v| v * 0.25).collect();
    let mut data = vec![Complex32::default(); m * coils];
    fine_plan.forward(&fine_object, &mut data).unwrap();
    sim::add_noise(&mut data, snr, rng.next_u64()).unwrap();

    let norm: Vec<f32> = (0..n * n)
        .map(|v| {
            (0..coils)
                .map(|c| truth_maps[c * n * n + v].norm_sqr())
                .sum::<f32>()
                .sqrt()
        })
        .collect();
    let normalised: Vec<Complex32> = (0..n * n * coils)
        .map(|i| truth_maps[i] / norm[i % (n * n)])
        .collect();
    let truth_image: Vec<Complex32> = scene
        .object(&p)
        .iter()
        .zip(&norm)
        .map(|(o, s)| o * *s)
        .collect();
    let mut aligned = result.maps.clone();
    for v in 0..n * n {
        let overlap: Complex32 = (0..coils)
            .map(|c| aligned[c * n * n + v].conj() * normalised[c * n * n + v])
            .sum();
        if overlap.norm() > 0.0 {
            let phase = overlap / overlap.norm();
            (0..coils).for_each(|c| aligned[c * n * n + v] *= phase);
        }
    }
    plan.set_trajectory(2, &spiral.k).unwrap();
    let recon_error = |plan: &mut Plan, maps: &[Complex32]| {
        plan.set_sensitivities(Some(maps)).unwrap();
        let mut x = vec![Complex32::default(); n * n];
        let cg = CgOptions {
            max_iterations: 20,
            tolerance: 0.0,
            ..CgOptions::default()
        };
        plan.cg(&data, &cg, &mut x).unwrap();
        let (mut e, mut r) = (0.0f64, 0.0f64);
        for v in (0..n * n).filter(|&v| mask[v]) {
            e += (x[v] - truth_image[v]).norm_sqr() as f64;
            r += truth_image[v].norm_sqr() as f64;
        }
        (e / r).sqrt()
    };
    let with_truth = recon_error(&mut plan, &normalised);
    let with_espirit = recon_error(&mut plan, &aligned);
    eprintln!(
        "reconstruction NRMSE: true maps {:.2} %, ESPIRiT maps {:.2} % (ratio {:.3})",
        100.0 * with_truth,
        100.0 * with_espirit,
        with_espirit / with_truth
    );
    assert!(with_espirit <= 1.2 * with_truth);
}

#[test]
fn espirit_3d_and_walsh_maps_match_the_truth() {
    let mut rng = Rng::fresh("espirit_3d_and_walsh_maps_match_the_truth");
    let coils = 4;
    let center = [0.0, 0.0, 0.0];
    let grid = ReferenceGrid::new([20, 20, 16], [0.24, 0.24, 0.2], center).unwrap();
    let (_, fine) = sim::refined_grid(grid.dims, grid.fov, grid.center, 2).unwrap();
    let object: Vec<Complex32> = sim::shepp_logan(3, [0.2, 0.2, 0.2], center, &fine)
        .unwrap()
        .into_iter()
        .map(|v| Complex32::new(v as f32, 0.0))
        .collect();
    let s_fine = sim::coil_sensitivities(&fine, coils, COIL_RADIUS, center).unwrap();
    let mut kspace =
        cartesian_reference(&grid, &fine, &object, &s_fine, coils, None, &[0.0], 0.125).unwrap();
    sim::add_noise(&mut kspace, 50.0, rng.next_u64()).unwrap();
    let n = [18usize, 18, 12];
    let mut plan = Plan::new(cpu(), 18, 18, 12, coils as i64, 1).unwrap();
    plan.set_grid_positions([0.22, 0.22, 0.18], center).unwrap();
    let p = positions(&plan);
    let options = EspiritOptions {
        kernel: 5,
        calibration: 14,
        ..EspiritOptions::default()
    };
    let result = plan.espirit(&grid, &kspace, &options).unwrap();
    let truth = sim::coil_sensitivities(&p, coils, COIL_RADIUS, center).unwrap();
    let mask: Vec<bool> = sim::shepp_logan(3, [0.2, 0.2, 0.2], center, &p)
        .unwrap()
        .iter()
        .map(|&v| v > 0.05)
        .collect();
    let error = map_nrmse(&result.maps, &truth, coils, &mask);
    eprintln!(
        "3D ESPIRiT {n:?}: rank {}, map NRMSE {:.2} %",
        result.rank,
        100.0 * error
    );
    assert!(error <= 0.05, "3D map NRMSE {error}");

    let images: Vec<Complex32> = grid
        .images(&kspace, coils)
        .unwrap()
        .iter()
        .map(|c| Complex32::new(c.re as f32, c.im as f32))
        .collect();
    let walsh = plan.walsh(&grid, &images, 5).unwrap();
    let error = map_nrmse(&walsh, &truth, coils, &mask);
    eprintln!("3D Walsh: map NRMSE {:.2} %", 100.0 * error);
    assert!(error <= 0.1, "Walsh map NRMSE {error}");

    // The data's scale does not matter: at 1e20 the calibration's products
    // would leave float32's range, at 1e-25 fall below it; 3e-39 is subnormal.
    for scale in [1e20f32, 1e-25, 3e-39] {
        let scaled = |v: &[Complex32]| -> Vec<Complex32> { v.iter().map(|x| x * scale).collect() };
        let again = plan.espirit(&grid, &scaled(&kspace), &options).unwrap();
        let espirit_change = map_nrmse(&again.maps, &result.maps, coils, &mask);
        let walsh_change = map_nrmse(
            &plan.walsh(&grid, &scaled(&images), 5).unwrap(),
            &walsh,
            coils,
            &mask,
        );
        eprintln!("data x {scale:e}: maps change by {espirit_change:.1e} (ESPIRiT), {walsh_change:.1e} (Walsh)");
        assert!(
            espirit_change <= 1e-3 && walsh_change <= 1e-3,
            "x {scale:e}"
        );
    }
}

#[test]
fn b0_map_matches_the_truth_within_2_hz() {
    let mut rng = Rng::fresh("b0_map_matches_the_truth_within_2_hz");
    let scene = Scene {
        center: [0.0, 0.0, 0.0],
        coils: 6,
    };
    // About 216 Hz peak in the FOV: echo phases wrap, and so does the 2.5 ms difference
    // (ω·ΔTE up to 3.4 rad > π: unwrapped in space).
    let max_hz = 500.0;
    let echo_times = [2e-3, 4.5e-3, 7e-3];
    let grid = ReferenceGrid::new([64, 64, 1], [FOV, FOV, 0.005], scene.center).unwrap();
    let kspace = scene.reference(&grid, &echo_times, max_hz, 50.0, rng.next_u64());
    let plan = grid_plan(80, 1, 1, scene.center);
    let p = positions(&plan);
    let result = plan
        .b0_map(
            &grid,
            &kspace,
            scene.coils,
            &echo_times,
            &B0Options::default(),
        )
        .unwrap();
    let truth = scene.omega(&p, max_hz);
    let mask = object_mask(&scene, &p);
    let count = mask.iter().filter(|&&m| m).count() as f64;
    let rms_hz = ((0..p.len() / 3)
        .filter(|&v| mask[v])
        .map(|v| (result.omega[v] - truth[v]).powi(2))
        .sum::<f64>()
        / count)
        .sqrt()
        / std::f64::consts::TAU;
    let peak = truth.iter().fold(0.0f64, |a, &b| a.max(b.abs())) / std::f64::consts::TAU;
    eprintln!(
        "B0: RMS error inside the object {rms_hz:.3} Hz (peak {peak:.0} Hz, 3 echoes, SNR 50)"
    );
    assert!(rms_hz <= 2.0, "RMS {rms_hz} Hz");
}

#[test]
fn whitening_gives_identity_covariance_and_improves_the_reconstruction() {
    let mut rng = Rng::fresh("whitening_gives_identity_covariance_and_improves_the_reconstruction");
    let coils = 6;
    let shape = noise_covariance_model(coils, 0.6, 2.0, rng.next_u64()).unwrap();
    // Covariance estimate from noise-only samples; whitened fresh noise has I.
    let samples = 20000;
    let mut noise = vec![Complex32::default(); samples * coils];
    add_correlated_noise(&mut noise, coils, &shape, rng.next_u64()).unwrap();
    let psi = noise_covariance(&noise, coils).unwrap();
    let mut fresh = vec![Complex32::default(); samples * coils];
    add_correlated_noise(&mut fresh, coils, &shape, rng.next_u64()).unwrap();
    whiten(&psi, coils, &mut fresh).unwrap();
    let white = noise_covariance(&fresh, coils).unwrap();
    let worst = (0..coils * coils)
        .map(|i| {
            let identity = if i % (coils + 1) == 0 { 1.0 } else { 0.0 };
            (white[i] - Complex64::new(identity, 0.0)).norm()
        })
        .fold(0.0f64, f64::max);
    // Sampling error of each entry ≈ 1/√M (two estimates involved): allow 6/√M.
    let bound = 6.0 / (samples as f64).sqrt();
    eprintln!("whitened covariance: largest deviation from I {worst:.4} (bound {bound:.4})");
    assert!(worst <= bound);

    // Reconstruction: correlated noise at SNR 10 on a fully sampled 32² radial
    // scan, CG run to convergence (the error is then the noise's).
    let scene = Scene {
        center: [0.0, 0.0, 0.0],
        coils,
    };
    let n = 32;
    let radial = sim::radial(n as i64, FOV, 48, 4e-6, 1e-3).unwrap();
    let m = radial.samples();
    let mut plan = grid_plan(n, coils, m, scene.center);
    let p = positions(&plan);
    let s = scene.sensitivities(&p);
    let truth = scene.object(&p);
    plan.set_trajectory(2, &radial.k).unwrap();
    plan.set_sensitivities(Some(&s)).unwrap();
    let mut data = vec![Complex32::default(); m * coils];
    plan.forward(&truth, &mut data).unwrap();
    let scaled = covariance_for_snr(&data, &shape, coils, 10.0).unwrap();
    add_correlated_noise(&mut data, coils, &scaled, rng.next_u64()).unwrap();
    let mut prescan = vec![Complex32::default(); 2000 * coils];
    add_correlated_noise(&mut prescan, coils, &scaled, rng.next_u64()).unwrap();
    let psi = noise_covariance(&prescan, coils).unwrap();
    let cg = CgOptions {
        max_iterations: 300,
        tolerance: 1e-7,
        ..CgOptions::default()
    };
    plan.set_toeplitz(true, 0).unwrap();
    let mut plain = vec![Complex32::default(); n * n];
    plan.cg(&data, &cg, &mut plain).unwrap();
    let mut white_data = data.clone();
    whiten(&psi, coils, &mut white_data).unwrap();
    let mut white_s = s.clone();
    whiten(&psi, coils, &mut white_s).unwrap();
    plan.set_sensitivities(Some(&white_s)).unwrap();
    let mut whitened = vec![Complex32::default(); n * n];
    plan.cg(&white_data, &cg, &mut whitened).unwrap();
    let e_plain = sim::nrmse(&plain, &truth).unwrap();
    let e_white = sim::nrmse(&whitened, &truth).unwrap();
    eprintln!(
        "reconstruction NRMSE with correlated noise: unwhitened {:.2} %, whitened {:.2} %",
        100.0 * e_plain,
        100.0 * e_white
    );
    assert!(e_white < e_plain);
}

#[test]
fn delays_are_recovered_within_a_quarter_microsecond() {
    let mut rng = Rng::fresh("delays_are_recovered_within_a_quarter_microsecond");
    let scene = Scene {
        center: [0.0, 0.0, 0.01],
        coils: 4,
    };
    let n = 32;
    // Readouts sampled 2 and 4 µs apart (the default coarse grid is 4 µs).
    for dwell in [2e-6, 4e-6] {
        let spiral = sim::spiral(n as i64, FOV, 1.0, dwell, 1e-3).unwrap();
        let m = spiral.samples();
        let coefficients =
            sim::field_coefficients(&spiral.k, 2, dwell, 1.0, rng.next_u64()).unwrap();
        let mut plan = grid_plan(n, scene.coils, m, scene.center);
        let p = positions(&plan);
        plan.set_sensitivities(Some(&scene.sensitivities(&p)))
            .unwrap();
        plan.set_solid_harmonics(16, &coefficients).unwrap();
        let mut data = vec![Complex32::default(); m * scene.coils];
        plan.forward(&scene.object(&p), &mut data).unwrap();
        sim::add_noise(&mut data, 50.0, rng.next_u64()).unwrap();
        for _ in 0..3 {
            let delay = rng.range(-10e-6, 10e-6);
            // Monitored coefficients lag the data: k_meas(t) = k(t − δ).
            let monitored: Vec<f64> = coefficients
                .chunks_exact(m)
                .flat_map(|c| resample(c, &spiral.times, -delay))
                .collect();
            let result = estimate_delay(
                &plan,
                &data,
                Some(&monitored),
                &spiral.times,
                &DelayOptions::default(),
            )
            .unwrap();
            eprintln!(
                "dwell {:.0} µs: delay true {:.3} µs, estimated {:.3} µs ({} evaluations)",
                dwell * 1e6,
                delay * 1e6,
                result.delay * 1e6,
                result.curve.len()
            );
            assert!((result.delay - delay).abs() <= 0.25e-6);
        }
    }
}
