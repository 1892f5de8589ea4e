//! Simulated reference scans for the calibration chain: Cartesian
//! (multi-echo) k-space of an object with coil sensitivities and
//! off-resonance, and correlated coil noise.

use crate::calib::reference::ReferenceGrid;
use crate::error::{try_vec, Error, Result};
use crate::plan::{BackendKind, Options, Plan};
use crate::sim::SimRng;
use num_complex::{Complex32, Complex64};

/// Reference k-space N_ref×L×E (echo slowest) of an object ρ given at
/// `positions` (N×3), with sensitivities S (N×L), off-resonance ω (N, rad/s)
/// and echo times TE_e (s): the exact sum
///
/// y_{c,e}(p) = Σ_n weight·ρ_n·S_c(r_n)·e^{iω_n TE_e}·e^{+ik_p·r_n}
///
/// at the k-space points of `grid` (give a finer grid's positions and
/// weight = 1/f^d to avoid the inverse crime).
#[allow(clippy::too_many_arguments)]
pub fn cartesian_reference(
    grid: &ReferenceGrid,
    positions: &[f64],
    image: &[Complex32],
    sensitivities: &[Complex32],
    coils: usize,
    omega: Option<&[f64]>,
    echo_times: &[f64],
    weight: f64,
) -> Result<Vec<Complex32>> {
    let n = image.len();
    if positions.len() != 3 * n || sensitivities.len() != n * coils {
        return Err(Error::size(format!(
            "positions ({}) and sensitivities ({}) must be N x 3 and N x L for N = {n}, L = {coils}",
            positions.len(),
            sensitivities.len()
        )));
    }
    if echo_times.is_empty() {
        return Err(Error::invalid("echo_times is empty"));
    }
    let k_points = grid.voxels();
    let echoes = echo_times.len();
    let m = k_points * echoes;
    let options = Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    };
    let mut plan = Plan::new(options, n as i64, 1, 1, coils as i64, m as i64)?;
    plan.set_positions(positions)?;
    let mut k = try_vec(3 * m, 0.0f64, "reference trajectory")?;
    let mut times = try_vec(m, 0.0f64, "reference times")?;
    for (e, &echo_time) in echo_times.iter().enumerate() {
        for p in 0..k_points {
            let index = [
                p % grid.dims[0],
                (p / grid.dims[0]) % grid.dims[1],
                p / (grid.dims[0] * grid.dims[1]),
            ];
            let j = e * k_points + p;
            for a in 0..3 {
                k[a * m + j] = grid.k(a, index[a]);
            }
            times[j] = echo_time;
        }
    }
    plan.set_trajectory(3, &k)?;
    if let Some(w) = omega {
        plan.set_off_resonance(Some((w, &times)))?;
    }
    plan.set_sensitivities(Some(sensitivities))?;
    let scaled: Vec<Complex32> = image.iter().map(|v| v * weight as f32).collect();
    let mut data = try_vec(m * coils, Complex32::default(), "reference data")?;
    plan.forward(&scaled, &mut data)?;
    let mut out = try_vec(m * coils, Complex32::default(), "reference k-space")?;
    for c in 0..coils {
        for e in 0..echoes {
            for p in 0..k_points {
                out[p + k_points * (c + coils * e)] = data[e * k_points + p + m * c];
            }
        }
    }
    Ok(out)
}

/// A plausible coil noise covariance (L×L, column major): standard
/// deviations spread over [1, 1 + spread], correlation ρ^{|a−b|} (positive
/// definite for |ρ| < 1) with random phases e^{i(θ_a − θ_b)}.
pub fn noise_covariance_model(
    coils: usize,
    correlation: f64,
    spread: f64,
    seed: u64,
) -> Result<Vec<Complex64>> {
    if !(correlation.is_finite() && correlation.abs() < 1.0) {
        return Err(Error::invalid(format!(
            "correlation must be in (-1, 1), got {correlation}"
        )));
    }
    if !(spread.is_finite() && spread >= 0.0) {
        return Err(Error::invalid(format!("spread must be >= 0, got {spread}")));
    }
    if coils == 0 {
        return Err(Error::invalid("ncoils must be >= 1"));
    }
    let mut rng = SimRng::new(seed);
    let sd: Vec<f64> = (0..coils).map(|_| 1.0 + spread * rng.uniform()).collect();
    let theta: Vec<f64> = (0..coils)
        .map(|_| std::f64::consts::TAU * rng.uniform())
        .collect();
    let mut psi = try_vec(coils * coils, Complex64::new(0.0, 0.0), "covariance")?;
    for a in 0..coils {
        for b in 0..coils {
            let r = correlation.powi((a as i32 - b as i32).abs());
            psi[a + coils * b] = Complex64::from_polar(sd[a] * sd[b] * r, theta[a] - theta[b]);
        }
    }
    Ok(psi)
}

/// Adds noise n = C·g (Ψ = C Cᴴ, g circular complex Gaussian with unit
/// variance) to every row (point) of `values` (npoints×L).
pub fn add_correlated_noise(
    values: &mut [Complex32],
    coils: usize,
    covariance: &[Complex64],
    seed: u64,
) -> Result<()> {
    let factor = crate::calib::noise::whitening_factor(covariance, coils)?;
    if values.len() % coils != 0 {
        return Err(Error::size(format!(
            "values has {} elements, not npoints x ncoils with ncoils = {coils}",
            values.len()
        )));
    }
    let points = values.len() / coils;
    let mut rng = SimRng::new(seed);
    let scale = std::f64::consts::FRAC_1_SQRT_2;
    let mut g = vec![Complex64::new(0.0, 0.0); coils];
    for j in 0..points {
        for v in g.iter_mut() {
            *v = Complex64::new(rng.normal() * scale, rng.normal() * scale);
        }
        for a in 0..coils {
            let s: Complex64 = (0..=a).map(|b| factor[(a, b)] * g[b]).sum();
            let v = &mut values[j + points * a];
            v.re += s.re as f32;
            v.im += s.im as f32;
        }
    }
    Ok(())
}

/// The covariance `shape` scaled so that the mean noise power per coil is
/// (rms(|values|)/snr)²: the covariance that gives `values` the SNR `snr`.
pub fn covariance_for_snr(
    values: &[Complex32],
    shape: &[Complex64],
    coils: usize,
    snr: f64,
) -> Result<Vec<Complex64>> {
    if !(snr.is_finite() && snr > 0.0) {
        return Err(Error::invalid(format!(
            "snr must be finite and > 0, got {snr}"
        )));
    }
    let power =
        values.iter().map(|v| v.norm_sqr() as f64).sum::<f64>() / values.len().max(1) as f64;
    let trace: f64 = (0..coils).map(|a| shape[a + coils * a].re).sum::<f64>() / coils as f64;
    let scale = power / (snr * snr) / trace;
    Ok(shape.iter().map(|v| v * scale).collect())
}
