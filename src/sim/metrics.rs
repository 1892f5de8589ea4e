//! Image-quality metrics against a reference ρ_ref:
//!
//! - NRMSE = ‖x − ρ_ref‖₂ / ‖ρ_ref‖₂
//! - PSNR  = 20·log10( max|ρ_ref| / √MSE ),  MSE = (1/N)·Σ|x − ρ_ref|² (Kirk–Hwu fig. 14.18)
//! - percent error = 100·‖x − ρ_ref‖₂ / ‖ρ_ref‖₂ (Stone et al. 2008)

use crate::error::{Error, Result};
use num_complex::Complex32;

fn check(x: &[Complex32], reference: &[Complex32]) -> Result<()> {
    if x.len() != reference.len() {
        return Err(Error::size(format!(
            "image has {} elements, reference {}",
            x.len(),
            reference.len()
        )));
    }
    if x.is_empty() {
        return Err(Error::invalid("images are empty"));
    }
    crate::model::check_finite("image", x)?;
    crate::model::check_finite("reference", reference)
}

fn error_and_reference_energy(x: &[Complex32], reference: &[Complex32]) -> (f64, f64) {
    x.iter().zip(reference).fold((0.0, 0.0), |(e, r), (a, b)| {
        let d = num_complex::Complex64::new(a.re as f64 - b.re as f64, a.im as f64 - b.im as f64);
        (e + d.norm_sqr(), r + (b.norm_sqr() as f64))
    })
}

/// ‖x − ρ_ref‖₂ / ‖ρ_ref‖₂ (an all-zero reference is an error).
pub fn nrmse(x: &[Complex32], reference: &[Complex32]) -> Result<f64> {
    check(x, reference)?;
    let (e, r) = error_and_reference_energy(x, reference);
    if r == 0.0 {
        return Err(Error::invalid("the reference image is all zero"));
    }
    Ok((e / r).sqrt())
}

/// 100·NRMSE, the "percent error" of Stone et al. 2008.
pub fn percent_error(x: &[Complex32], reference: &[Complex32]) -> Result<f64> {
    Ok(100.0 * nrmse(x, reference)?)
}

/// 20·log10(max|ρ_ref| / √MSE) in dB; +∞ when x equals the reference.
pub fn psnr(x: &[Complex32], reference: &[Complex32]) -> Result<f64> {
    check(x, reference)?;
    let (e, _) = error_and_reference_energy(x, reference);
    let peak = reference
        .iter()
        .map(|v| v.norm() as f64)
        .fold(0.0f64, f64::max);
    if peak == 0.0 {
        return Err(Error::invalid("the reference image is all zero"));
    }
    let mse = e / x.len() as f64;
    Ok(20.0 * (peak / mse.sqrt()).log10())
}

/// A test seed from HORECON_TEST_SEED or the clock, printed.
#[cfg(test)]
pub(crate) fn test_seed(test: &str) -> u64 {
    let seed = std::env::var("HORECON_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{test}: seed {seed} (rerun with HORECON_TEST_SEED={seed})");
    seed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimRng;

    #[test]
    fn metrics_match_their_definitions() {
        let mut rng = SimRng::new(test_seed("metrics_match_their_definitions"));
        let reference: Vec<Complex32> = (0..64)
            .map(|_| Complex32::new(rng.normal() as f32, rng.normal() as f32))
            .collect();
        // x = ref + e with ‖e‖ = 0.1‖ref‖ exactly (e = 0.1·ref rotated by 90°).
        let x: Vec<Complex32> = reference
            .iter()
            .map(|r| r + Complex32::new(0.0, 0.1) * r)
            .collect();
        let n = nrmse(&x, &reference).unwrap();
        assert!((n - 0.1).abs() < 1e-6, "nrmse {n}");
        assert!((percent_error(&x, &reference).unwrap() - 10.0).abs() < 1e-4);
        let peak = reference
            .iter()
            .map(|v| v.norm() as f64)
            .fold(0.0, f64::max);
        let mse = reference
            .iter()
            .map(|r| 0.01 * r.norm_sqr() as f64)
            .sum::<f64>()
            / 64.0;
        let expect = 20.0 * (peak / mse.sqrt()).log10();
        let p = psnr(&x, &reference).unwrap();
        assert!((p - expect).abs() < 1e-4, "psnr {p} vs {expect}");
        assert!(nrmse(&x[..3], &reference).is_err());
        assert!(nrmse(&x, &vec![Complex32::default(); 64]).is_err());
    }
}
