//! A seeded generator (SplitMix64 with Box–Muller) and complex Gaussian noise.

use crate::error::{Error, Result};
use num_complex::Complex32;

/// SplitMix64: small, seedable, identical in every binding that calls it.
#[derive(Clone, Debug)]
pub struct SimRng(u64);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.uniform().max(f64::MIN_POSITIVE);
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Adds circular complex Gaussian noise n with E|n|² = σ², where
/// σ = rms(|d|) / snr, so that rms(|d|)/rms(|n|) ≈ snr. Returns σ.
pub fn add_noise(data: &mut [Complex32], snr: f64, seed: u64) -> Result<f64> {
    if !(snr.is_finite() && snr > 0.0) {
        return Err(Error::invalid(format!(
            "snr must be finite and > 0, got {snr}"
        )));
    }
    crate::model::check_finite("data", data)?;
    if data.is_empty() {
        return Ok(0.0);
    }
    let power: f64 = data.iter().map(|d| d.norm_sqr() as f64).sum::<f64>() / data.len() as f64;
    let sigma = power.sqrt() / snr;
    let per_component = sigma / std::f64::consts::SQRT_2;
    let mut rng = SimRng::new(seed);
    for d in data.iter_mut() {
        d.re += (per_component * rng.normal()) as f32;
        d.im += (per_component * rng.normal()) as f32;
    }
    Ok(sigma)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_has_the_requested_snr() {
        let seed = crate::sim::metrics::test_seed("noise_has_the_requested_snr");
        let mut rng = SimRng::new(seed);
        let clean: Vec<Complex32> = (0..20000)
            .map(|_| Complex32::new(rng.normal() as f32 * 3.0, rng.normal() as f32))
            .collect();
        let mut noisy = clean.clone();
        let sigma = add_noise(&mut noisy, 20.0, seed ^ 1).unwrap();
        let noise_power: f64 = noisy
            .iter()
            .zip(&clean)
            .map(|(a, b)| (a - b).norm_sqr() as f64)
            .sum::<f64>()
            / clean.len() as f64;
        let signal_power: f64 =
            clean.iter().map(|d| d.norm_sqr() as f64).sum::<f64>() / clean.len() as f64;
        let snr = (signal_power / noise_power).sqrt();
        assert!((snr - 20.0).abs() < 0.5, "measured snr {snr}");
        assert!((sigma - signal_power.sqrt() / 20.0).abs() < 1e-12);
        assert!(add_noise(&mut noisy, 0.0, 1).is_err());
    }
}
