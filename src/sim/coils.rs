//! Smooth receive-coil sensitivities of L coils evenly spaced on a circle
//! around the field of view (a simple analytic model, not Biot–Savart):
//!
//! S_c(r) = w²/(w² + |r − p_c|²) · exp(i·(θ_c + 2·(r − p_c)·t_c / w)),
//!
//! with p_c = centre + w·(cos θ_c, sin θ_c, 0), θ_c = 2πc/L, t_c the unit
//! tangent of the circle at p_c and w the circle's radius.

use crate::error::{Error, Result};
use num_complex::Complex32;

/// N×L sensitivities (voxel index fastest) at N positions (N×3).
pub fn coil_sensitivities(
    positions: &[f64],
    coils: usize,
    radius: f64,
    center: [f64; 3],
) -> Result<Vec<Complex32>> {
    if positions.len() % 3 != 0 {
        return Err(Error::size(format!(
            "positions has {} elements, not N x 3",
            positions.len()
        )));
    }
    if !(1..=1024).contains(&coils) {
        return Err(Error::invalid(format!(
            "ncoils must be 1..1024, got {coils}"
        )));
    }
    if !(radius.is_finite() && radius > 0.0) {
        return Err(Error::invalid(format!(
            "radius must be > 0 metres, got {radius}"
        )));
    }
    crate::model::check_finite("positions", positions)?;
    crate::model::check_finite("center", &center)?;
    let n = positions.len() / 3;
    let mut out = crate::error::try_vec(n * coils, Complex32::default(), "sensitivities")?;
    let progress = crate::progress::Progress::current();
    for c in 0..coils {
        progress.check(c as f64 / coils as f64)?;
        let theta = std::f64::consts::TAU * c as f64 / coils as f64;
        let (s, co) = theta.sin_cos();
        let p = [center[0] + radius * co, center[1] + radius * s, center[2]];
        let tangent = [-s, co, 0.0];
        for i in 0..n {
            let d = [0, 1, 2].map(|a| positions[a * n + i] - p[a]);
            let dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            let magnitude = radius * radius / (radius * radius + dist2);
            let phase = theta + 2.0 * (d[0] * tangent[0] + d[1] * tangent[1]) / radius;
            out[c * n + i] = Complex32::from_polar(magnitude as f32, phase as f32);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coils_are_brightest_next_to_their_element() {
        let radius = 0.15;
        // Four points on the x and y axes at 0.1 m.
        let positions = [0.1, 0.0, -0.1, 0.0, 0.0, 0.1, 0.0, -0.1, 0.0, 0.0, 0.0, 0.0];
        let s = coil_sensitivities(&positions, 4, radius, [0.0; 3]).unwrap();
        for c in 0..4 {
            let brightest = (0..4)
                .max_by(|&a, &b| s[c * 4 + a].norm().total_cmp(&s[c * 4 + b].norm()))
                .unwrap();
            assert_eq!(brightest, c, "coil {c}");
            // Magnitude w²/(w² + 0.05²) next to the element.
            let expect = radius * radius / (radius * radius + 0.05 * 0.05);
            assert!((s[c * 4 + c].norm() as f64 - expect).abs() < 1e-6);
        }
        assert!(coil_sensitivities(&positions, 0, radius, [0.0; 3]).is_err());
        assert!(coil_sensitivities(&positions[..5], 2, radius, [0.0; 3]).is_err());
    }
}
