//! Field models: smooth off-resonance maps and higher-order phase
//! coefficients for the 16 solid harmonics of MODEL.md.
//!
//! Higher-order coefficients are the nominal trajectory (terms 1–3 = k)
//! plus eddy-current-like deviations: every term b responds to the change of
//! each nominal gradient g_a = dk_a/dt (rad/m/s) through one exponential,
//!
//! $$\Delta k_b(t) = -\sum_a \alpha_{b,a}\int_0^t\!\!\int_0^{t'} \dot g_a(s)\,
//!   e^{-(t'-s)/\tau_b}\,ds\,dt',$$
//!
//! so a long τ_b gives Δk_b ≈ −α_{b,a}·k_a (a scaled copy of the
//! trajectory) and a short one a small, delayed response. The cross-term
//! amplitudes α are drawn from `seed` with magnitudes typical of field-camera
//! measurements (Bieri, Wilm et al.): order 0: 1e-3 m, order 1: 5e-3,
//! order 2: 2e-2 m⁻¹, order 3: 0.15 m⁻², times `strength`; τ_b log-uniform in
//! 50 µs … 2 ms. The samples are treated as one continuous readout.

use crate::error::{Error, Result};
use crate::model::harmonics::ORDER;
use crate::sim::SimRng;
use std::f64::consts::PI;

/// Gyromagnetic ratio of ¹H, rad/s/T.
pub const GAMMA: f64 = 2.675_221_874_4e8;

/// Cross-term amplitude per order (m^(1−order)).
const ALPHA: [f64; 4] = [1e-3, 5e-3, 2e-2, 0.15];

/// M×16 coefficients (rad/m^order) from a nominal trajectory k (M×ndims, rad/m).
pub fn field_coefficients(
    k: &[f64],
    ndims: usize,
    dwell: f64,
    strength: f64,
    seed: u64,
) -> Result<Vec<f64>> {
    if !(1..=3).contains(&ndims) || k.len() % ndims != 0 || k.is_empty() {
        return Err(Error::size(format!(
            "k has {} elements, not M x ndims (ndims 1..3)",
            k.len()
        )));
    }
    if !(dwell.is_finite() && dwell > 0.0) {
        return Err(Error::invalid(format!(
            "dwell must be > 0 seconds, got {dwell}"
        )));
    }
    if !strength.is_finite() {
        return Err(Error::invalid(format!(
            "strength must be finite, got {strength}"
        )));
    }
    crate::model::check_finite("k", k)?;
    let m = k.len() / ndims;
    let mut coefficients = crate::error::try_vec(16 * m, 0.0, "coefficients (M x 16)")?;
    coefficients[m..(1 + ndims) * m].copy_from_slice(k);

    // dg_a/dt at each sample (k before the first sample is 0).
    let mut slew = crate::error::try_vec(ndims * m, 0.0f64, "slew rates (M x ndims)")?;
    for (a, column) in slew.chunks_exact_mut(m).enumerate() {
        let mut previous_k = 0.0;
        let mut previous_g = 0.0;
        for (s, &v) in column.iter_mut().zip(&k[a * m..(a + 1) * m]) {
            let g = (v - previous_k) / dwell;
            *s = (g - previous_g) / dwell;
            previous_k = v;
            previous_g = g;
        }
    }
    let progress = crate::progress::Progress::current();

    let mut rng = SimRng::new(seed);
    for b in 0..16 {
        progress.check(b as f64 / 16.0)?;
        let tau = 5e-5 * (40.0f64).powf(rng.uniform());
        let decay = (-dwell / tau).exp();
        let alpha: Vec<f64> = (0..ndims)
            .map(|_| {
                let sign = if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
                sign * (0.5 + 0.5 * rng.uniform()) * ALPHA[ORDER[b] as usize] * strength
            })
            .collect();
        // y_a(t) = ∫ ġ_a(s) e^{−(t−s)/τ} ds, recursively; Δk_b = −Σ_a α_a ∫ y_a.
        let mut y = vec![0.0; ndims];
        let mut deviation = 0.0;
        for j in 0..m {
            let mut field = 0.0;
            for a in 0..ndims {
                y[a] = y[a] * decay + slew[a * m + j] * dwell;
                field += alpha[a] * y[a];
            }
            deviation -= field * dwell;
            coefficients[b * m + j] += deviation;
        }
    }
    if let Some(i) = coefficients.iter().position(|c| !c.is_finite()) {
        return Err(Error::invalid(format!(
            "k, dwell or strength are too large: coefficient {i} overflows (k in rad/m, dwell in s)"
        )));
    }
    Ok(coefficients)
}

/// A smooth off-resonance map ω (rad/s) at N positions (N×3): two Gaussian
/// susceptibility lobes plus linear and quadratic background in the
/// normalised coordinates u = 2(r − centre)/fov, peaking at about `max_hz`.
pub fn off_resonance_map(
    positions: &[f64],
    fov: [f64; 3],
    center: [f64; 3],
    max_hz: f64,
) -> Result<Vec<f64>> {
    if positions.len() % 3 != 0 {
        return Err(Error::size(format!(
            "positions has {} elements, not N x 3",
            positions.len()
        )));
    }
    if !max_hz.is_finite() {
        return Err(Error::invalid(format!(
            "max_hz must be finite, got {max_hz}"
        )));
    }
    crate::model::check_finite("positions", positions)?;
    crate::model::check_finite("fov", &fov)?;
    crate::model::check_finite("center", &center)?;
    if fov.iter().any(|&f| f < 0.0) {
        return Err(Error::invalid(format!(
            "fov must be >= 0 per axis (0 = the map does not vary along it), got {fov:?}"
        )));
    }
    let n = positions.len() / 3;
    let omega = super::tabulate(n, "off-resonance map (N)", |i| {
        let u = [0, 1, 2].map(|a| {
            if fov[a] > 0.0 {
                2.0 * (positions[a * n + i] - center[a]) / fov[a]
            } else {
                0.0
            }
        });
        let lobe = |x0: f64, y0: f64, z0: f64, w: f64| {
            (-((u[0] - x0).powi(2) + (u[1] - y0).powi(2) + (u[2] - z0).powi(2)) / (2.0 * w * w))
                .exp()
        };
        let f = 0.7 * lobe(0.1, 0.55, 0.2, 0.18) - 0.35 * lobe(-0.45, -0.3, 0.0, 0.25)
            + 0.2 * u[0]
            + 0.1 * (u[0] * u[0] - u[1] * u[1])
            + 0.1 * u[2];
        2.0 * PI * max_hz * f
    })?;
    if omega.iter().any(|w| !w.is_finite()) {
        return Err(Error::invalid(format!(
            "the off-resonance map overflows: fov {fov:?} is too small for these positions"
        )));
    }
    Ok(omega)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{metrics::test_seed, spiral};

    #[test]
    fn coefficients_are_nominal_plus_small_deviations() {
        let seed = test_seed("coefficients_are_nominal_plus_small_deviations");
        let dwell = 4e-6;
        let t = spiral(96, 0.22, 3.0, dwell, 0.0).unwrap();
        let m = t.samples();
        let c = field_coefficients(&t.k, 2, dwell, 1.0, seed).unwrap();
        let kmax = PI * 96.0 / 0.22;
        // Terms 1, 2 stay close to the nominal k; term 3 (no nominal kz) is a small cross-term.
        for a in 0..2 {
            let dev = (0..m)
                .map(|j| (c[(1 + a) * m + j] - t.k[a * m + j]).abs())
                .fold(0.0, f64::max);
            assert!(dev > 0.0 && dev < 0.02 * kmax, "axis {a}: deviation {dev}");
        }
        // Each order's deviation stays within its amplitude bound α·2·k_max.
        for b in 0..16 {
            let nominal = |j: usize| {
                if (1..=2).contains(&b) {
                    t.k[(b - 1) * m + j]
                } else {
                    0.0
                }
            };
            let dev = (0..m)
                .map(|j| (c[b * m + j] - nominal(j)).abs())
                .fold(0.0, f64::max);
            let bound = 2.0 * ALPHA[ORDER[b] as usize] * 2.0 * kmax;
            assert!(dev > 0.0 && dev < bound, "term {b}: {dev} vs {bound}");
        }
        // Without strength only the nominal trajectory remains.
        let c0 = field_coefficients(&t.k, 2, dwell, 0.0, seed).unwrap();
        assert!(c0[..m].iter().all(|&v| v == 0.0));
        assert_eq!(&c0[m..3 * m], &t.k[..]);
        // k must be M x ndims.
        assert!(field_coefficients(&t.k[..5], 2, dwell, 1.0, seed).is_err());
    }

    #[test]
    fn off_resonance_is_smooth_and_bounded() {
        let dims = [32, 32, 1];
        let p =
            crate::model::grid::grid_positions(dims, [0.2, 0.2, 0.005], [0.0, 0.0, 0.02]).unwrap();
        let w = off_resonance_map(&p, [0.2, 0.2, 0.0], [0.0, 0.0, 0.02], 60.0).unwrap();
        let peak = w.iter().fold(0.0f64, |a, v| a.max(v.abs())) / (2.0 * PI);
        assert!(peak > 20.0 && peak < 80.0, "peak {peak} Hz");
        // x-neighbours (within a row) differ by a small fraction of the peak
        let step = (0..32 * 32)
            .filter(|i| i % 32 != 31)
            .map(|i| (w[i + 1] - w[i]).abs())
            .fold(0.0, f64::max)
            / (2.0 * PI);
        eprintln!("peak {peak:.1} Hz, largest neighbour step {step:.2} Hz");
        assert!(step < 0.25 * peak, "step {step} Hz");
    }
}
