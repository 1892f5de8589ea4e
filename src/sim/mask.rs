//! Variable-density Cartesian sampling masks for Cartesian FFT mode
//! (`Plan::set_cartesian`): the readout axis x fully sampled, the phase
//! encodes (y, z) undersampled.
//!
//! A phase-encode point at normalised radius ρ = ‖((y − h_y)/(n_y/2),
//! (z − h_z)/(n_z/2))‖ (h = ⌊n/2⌋, the k = 0 line) is kept with probability
//!
//! P(ρ) = 1 for ρ ≤ ρ_c (a fully sampled calibration centre),
//! P(ρ) = min(1, α·(1 − min(ρ, 1))^p) otherwise,
//!
//! with α found by bisection so that Σ P = n_y·n_z / R for acceleration R
//! (the expected count; the realised one varies by its binomial spread).

use crate::error::{try_vec, Error, Result};
use crate::sim::noise::SimRng;

/// Radius of the fully sampled centre (normalised; 0.08 of the half-width).
const CALIBRATION_RADIUS: f64 = 0.08;
/// Decay power p of the density.
const DENSITY_POWER: f64 = 2.0;

/// An nx·ny·nz mask (bytes, 1 = sampled, column-major): every x of a kept
/// (y, z) line, about n_y·n_z/`acceleration` lines kept, drawn with `seed`.
pub fn variable_density_mask(dims: [usize; 3], acceleration: f64, seed: u64) -> Result<Vec<u8>> {
    if !(acceleration.is_finite() && acceleration >= 1.0) {
        return Err(Error::invalid(format!(
            "acceleration must be finite and >= 1, got {acceleration}"
        )));
    }
    if dims.contains(&0) {
        return Err(Error::invalid(format!(
            "every dimension must be >= 1, got {dims:?}"
        )));
    }
    let [nx, ny, nz] = dims;
    let lines = ny * nz;
    let radius = |iy: usize, iz: usize| {
        let r = |i: usize, n: usize| {
            if n == 1 {
                0.0
            } else {
                (i as f64 - (n / 2) as f64) / (n as f64 / 2.0)
            }
        };
        (r(iy, ny).powi(2) + r(iz, nz).powi(2)).sqrt()
    };
    let probability = |alpha: f64, rho: f64| {
        if rho <= CALIBRATION_RADIUS {
            1.0
        } else {
            (alpha * (1.0 - rho.min(1.0)).powf(DENSITY_POWER)).min(1.0)
        }
    };
    let target = lines as f64 / acceleration;
    let expected = |alpha: f64| {
        let mut sum = 0.0;
        for iz in 0..nz {
            for iy in 0..ny {
                sum += probability(alpha, radius(iy, iz));
            }
        }
        sum
    };
    let (mut lo, mut hi) = (0.0, 1.0);
    while expected(hi) < target && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if expected(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let alpha = 0.5 * (lo + hi);
    let mut rng = SimRng::new(seed);
    let mut mask = try_vec(nx * lines, 0u8, "mask (nx*ny*nz)")?;
    for iz in 0..nz {
        for iy in 0..ny {
            if rng.uniform() < probability(alpha, radius(iy, iz)) {
                let start = nx * (iy + ny * iz);
                mask[start..start + nx].fill(1);
            }
        }
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_about_one_line_in_r_and_the_centre() {
        let dims = [8, 160, 80];
        let mask = variable_density_mask(dims, 10.0, 7).unwrap();
        let kept = mask.iter().filter(|&&b| b != 0).count() / dims[0];
        let expect = 160.0 * 80.0 / 10.0;
        assert!((kept as f64 - expect).abs() < 0.05 * expect, "{kept}");
        // Centre line and whole readout lines.
        let centre = 8 * (80 + 160 * 40);
        assert!(mask[centre..centre + 8].iter().all(|&b| b == 1));
        for line in mask.chunks(8) {
            assert!(line.iter().all(|&b| b == line[0]));
        }
    }
}
