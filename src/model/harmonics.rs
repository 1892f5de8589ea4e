//! Built-in real solid harmonics up to 3rd order, in field-camera order
//! (MODEL.md; Barmet et al. 2008). Unnormalised; positions in metres, so
//! term b has unit m^order(b).

use rayon::prelude::*;

/// The numbers of terms the built-in basis supports (orders 0, ≤1, ≤2, ≤3).
pub const SOLID_HARMONIC_TERMS: [usize; 4] = [1, 4, 9, 16];

/// The order of each term.
pub const ORDER: [u32; 16] = [0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3];

/// Value of term `b` (0..16) at (x, y, z):
///
/// | b | h_b | b | h_b |
/// |---|---|---|---|
/// | 0 | 1 | 8 | x² − y² |
/// | 1 | x | 9 | 3yx² − y³ |
/// | 2 | y | 10 | xyz |
/// | 3 | z | 11 | (5z² − r²)·y |
/// | 4 | xy | 12 | 5z³ − 3z·r² |
/// | 5 | zy | 13 | (5z² − r²)·x |
/// | 6 | 3z² − r² | 14 | z(x² − y²) |
/// | 7 | xz | 15 | x³ − 3xy² |
///
/// with r² = x² + y² + z².
pub fn solid_harmonic(b: usize, x: f64, y: f64, z: f64) -> f64 {
    let r2 = x * x + y * y + z * z;
    match b {
        0 => 1.0,
        1 => x,
        2 => y,
        3 => z,
        4 => x * y,
        5 => z * y,
        6 => 3.0 * z * z - r2,
        7 => x * z,
        8 => x * x - y * y,
        9 => 3.0 * y * x * x - y * y * y,
        10 => x * y * z,
        11 => (5.0 * z * z - r2) * y,
        12 => 5.0 * z * z * z - 3.0 * z * r2,
        13 => (5.0 * z * z - r2) * x,
        14 => z * (x * x - y * y),
        15 => x * x * x - 3.0 * x * y * y,
        _ => panic!("solid harmonic index {b} out of range 0..16"),
    }
}

/// Evaluates the first `nterms` harmonics at N positions (`positions` is
/// N×3, first index fastest) into an N×nterms array (first index fastest).
pub fn evaluate(nterms: usize, positions: &[f64], n: usize, out: &mut [f64]) {
    debug_assert_eq!(positions.len(), 3 * n);
    debug_assert_eq!(out.len(), nterms * n);
    out[..nterms * n]
        .par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(b, column)| {
            for (i, o) in column.iter_mut().enumerate() {
                *o = solid_harmonic(b, positions[i], positions[n + i], positions[2 * n + i]);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_at_a_point() {
        let (x, y, z) = (0.3, -0.2, 0.5);
        let r2: f64 = 0.09 + 0.04 + 0.25;
        let expect = [
            1.0,
            x,
            y,
            z,
            x * y,
            z * y,
            3.0 * z * z - r2,
            x * z,
            x * x - y * y,
            3.0 * y * x * x - y.powi(3),
            x * y * z,
            (5.0 * z * z - r2) * y,
            5.0 * z.powi(3) - 3.0 * z * r2,
            (5.0 * z * z - r2) * x,
            z * (x * x - y * y),
            x.powi(3) - 3.0 * x * y * y,
        ];
        for (b, e) in expect.iter().enumerate() {
            assert!((solid_harmonic(b, x, y, z) - e).abs() < 1e-15, "term {b}");
        }
    }

    #[test]
    fn terms_are_harmonic() {
        // Solid harmonics satisfy Laplace's equation: check by finite differences.
        let (x, y, z, h) = (0.11, -0.07, 0.05, 1e-3);
        for b in 0..16 {
            let f = |x, y, z| solid_harmonic(b, x, y, z);
            let lap = (f(x + h, y, z)
                + f(x - h, y, z)
                + f(x, y + h, z)
                + f(x, y - h, z)
                + f(x, y, z + h)
                + f(x, y, z - h)
                - 6.0 * f(x, y, z))
                / (h * h);
            assert!(lap.abs() < 1e-6, "term {b}: laplacian {lap}");
        }
    }

    #[test]
    fn homogeneous_of_their_order() {
        let (x, y, z, s) = (0.2, 0.3, -0.1, 1.7);
        for (b, order) in ORDER.iter().enumerate() {
            let scaled = solid_harmonic(b, s * x, s * y, s * z);
            let expect = s.powi(*order as i32) * solid_harmonic(b, x, y, z);
            assert!((scaled - expect).abs() < 1e-12, "term {b}");
        }
    }
}
