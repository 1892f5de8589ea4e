//! The float64 direct sums of types 1 and 2 (the tests' and the
//! certificate's reference; O(M·N), for small problems).
//!
//! Points are `points[a * npoints + j]` (first index fastest, as the C API),
//! grids first axis fastest with mode −⌊n/2⌋ + i at index i.

use super::Modes;
use num_complex::Complex64;

/// e^{s i k·x_j} for every mode k of `modes` (grid order), one point x.
fn phases(modes: &Modes, x: [f64; 3], sign: f64, out: &mut Vec<Complex64>) {
    out.clear();
    let [n0, n1, n2] = modes.sizes;
    for i2 in 0..n2 {
        for i1 in 0..n1 {
            for i0 in 0..n0 {
                let k = [
                    (modes.first(0) + i0 as i64) as f64,
                    (modes.first(1) + i1 as i64) as f64,
                    (modes.first(2) + i2 as i64) as f64,
                ];
                let phase = sign * (k[0] * x[0] + k[1] * x[1] + k[2] * x[2]);
                out.push(Complex64::from_polar(1.0, phase));
            }
        }
    }
}

fn point(points: &[f64], ndims: usize, npoints: usize, j: usize) -> [f64; 3] {
    let mut x = [0.0; 3];
    for (a, value) in x.iter_mut().enumerate().take(ndims) {
        *value = points[a * npoints + j];
    }
    x
}

/// Type 1: f_k = Σ_j c_j e^{s i k·x_j}; `strengths` npoints, result Π n_a.
pub fn type1(modes: &Modes, points: &[f64], sign: i32, strengths: &[Complex64]) -> Vec<Complex64> {
    let npoints = strengths.len();
    let mut grid = vec![Complex64::new(0.0, 0.0); modes.total()];
    let mut e = Vec::with_capacity(modes.total());
    for (j, &c) in strengths.iter().enumerate() {
        phases(
            modes,
            point(points, modes.ndims, npoints, j),
            sign as f64,
            &mut e,
        );
        grid.iter_mut().zip(&e).for_each(|(g, &p)| *g += c * p);
    }
    grid
}

/// Type 2: c_j = Σ_k f_k e^{s i k·x_j}; `grid` Π n_a, result `npoints`.
pub fn type2(
    modes: &Modes,
    points: &[f64],
    npoints: usize,
    sign: i32,
    grid: &[Complex64],
) -> Vec<Complex64> {
    let mut e = Vec::with_capacity(modes.total());
    (0..npoints)
        .map(|j| {
            phases(
                modes,
                point(points, modes.ndims, npoints, j),
                sign as f64,
                &mut e,
            );
            grid.iter().zip(&e).map(|(&f, &p)| f * p).sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_point_one_mode_per_axis() {
        // x = (π/2, π): modes of a 2×2 grid are k ∈ {−1, 0}².
        let modes = Modes::new(2, &[2, 2]).unwrap();
        let points = [std::f64::consts::FRAC_PI_2, std::f64::consts::PI];
        let f = type1(&modes, &points, 1, &[Complex64::new(1.0, 0.0)]);
        // (k0, k1) = (−1, −1): e^{i(−π/2 − π)} = i
        assert!((f[0] - Complex64::new(0.0, 1.0)).norm() < 1e-15);
        // (0, 0): 1
        assert!((f[3] - Complex64::new(1.0, 0.0)).norm() < 1e-15);
        let c = type2(&modes, &points, 1, -1, &f);
        assert!((c[0] - Complex64::new(4.0, 0.0)).norm() < 1e-14);
    }
}
