//! Dense Hermitian linear algebra of the calibration chain, by faer, and
//! the dominant eigenpair of the many small per-voxel matrices.

use crate::error::{try_vec, Error, Result};
use faer::linalg::matmul::triangular::{matmul, BlockStructure};
use faer::{Accum, Mat, MatRef, Par, Side};
use num_complex::Complex32;

/// Aᴴ A (lower triangle filled) of a rows×cols column-major matrix, in
/// float32 complex, with the current rayon pool.
pub fn gram_lower(a: MatRef<'_, Complex32>) -> Result<Mat<Complex32>> {
    let n = a.ncols();
    let mut storage = try_vec(n * n, Complex32::default(), "calibration Gram matrix")?;
    let mut g = faer::MatMut::from_column_major_slice_mut(&mut storage, n, n);
    matmul(
        g.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        a.adjoint(),
        BlockStructure::Rectangular,
        a,
        BlockStructure::Rectangular,
        Complex32::new(1.0, 0.0),
        Par::rayon(0),
    );
    Ok(g.to_owned())
}

/// Eigenvalues (descending) and eigenvectors (columns, same order) of a
/// Hermitian matrix given by its lower triangle.
pub fn hermitian_eigen_descending(a: MatRef<'_, Complex32>) -> Result<(Vec<f32>, Mat<Complex32>)> {
    let e = a
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::internal(format!("Hermitian eigen-decomposition failed: {e:?}")))?;
    let n = a.nrows();
    let values: Vec<f32> = (0..n).rev().map(|i| e.S()[i].re).collect();
    let u = e.U();
    let vectors = Mat::from_fn(n, n, |i, j| u[(i, n - 1 - j)]);
    Ok((values, vectors))
}

/// Power iterations before falling back to the full decomposition.
const POWER_ITERATIONS: usize = 60;
/// Converged when ‖Gv − λv‖ ≤ this·λ.
const POWER_TOLERANCE: f32 = 2e-4;

/// The largest eigenvalue of a small Hermitian positive semi-definite L×L
/// matrix `g` (column-major, full) and its unit eigenvector in `v`.
///
/// Power iteration from the incoming `v` (a neighbouring voxel's vector is a
/// good start: G varies smoothly), with faer's full decomposition when it
/// does not converge (near-degenerate top eigenvalues) or `v` is zero.
/// `w` is scratch of length L.
pub fn dominant_eigenpair(g: &[Complex32], v: &mut [Complex32], w: &mut [Complex32]) -> f32 {
    let l = v.len();
    let norm = |x: &[Complex32]| x.iter().map(|c| c.norm_sqr()).sum::<f32>().sqrt();
    let v_norm = norm(v);
    if v_norm > 0.0 && v_norm.is_finite() {
        v.iter_mut().for_each(|c| *c /= v_norm);
        for _ in 0..POWER_ITERATIONS {
            for (i, wi) in w.iter_mut().enumerate() {
                let mut s = Complex32::default();
                for (j, vj) in v.iter().enumerate() {
                    s += g[i + l * j] * vj;
                }
                *wi = s;
            }
            let lambda: f32 = v.iter().zip(w.iter()).map(|(a, b)| (a.conj() * b).re).sum();
            let residual = v
                .iter()
                .zip(w.iter())
                .map(|(a, b)| (b - a * lambda).norm_sqr())
                .sum::<f32>()
                .sqrt();
            let w_norm = norm(w);
            if w_norm == 0.0 {
                return 0.0;
            }
            v.iter_mut()
                .zip(w.iter())
                .for_each(|(a, b)| *a = b / w_norm);
            if residual <= POWER_TOLERANCE * lambda.abs() {
                return lambda;
            }
        }
    }
    let m = MatRef::from_column_major_slice(g, l, l);
    match hermitian_eigen_descending(m) {
        Ok((values, vectors)) => {
            for (i, c) in v.iter_mut().enumerate() {
                *c = vectors[(i, 0)];
            }
            values[0]
        }
        Err(_) => {
            v.fill(Complex32::default());
            0.0
        }
    }
}

/// The unit vector u (one per column) that best represents the columns of
/// the Hermitian L×L `covariance`: its dominant eigenvector (the "virtual
/// body coil" used to fix the phase of coil maps).
pub fn principal_direction(covariance: &[Complex32], l: usize) -> Vec<Complex32> {
    let mut v = vec![Complex32::new(1.0, 0.0); l];
    let mut w = vec![Complex32::default(); l];
    dominant_eigenpair(covariance, &mut v, &mut w);
    v
}

/// The coil pair (a, b), a ≤ b, stored at index e = b(b+1)/2 + a (the
/// upper triangle of a Hermitian L×L matrix, column by column).
pub fn coil_pair(e: usize) -> (usize, usize) {
    let mut b = 0;
    while (b + 1) * (b + 2) / 2 <= e {
        b += 1;
    }
    (e - b * (b + 1) / 2, b)
}

/// The index of the coil pair (a, b), a ≤ b ([`coil_pair`]'s inverse).
pub fn pair_index(a: usize, b: usize) -> usize {
    b * (b + 1) / 2 + a
}

/// Multiplies the coil vector `s` by the phase that makes wᴴs real and
/// non-negative (maps' phase fixed relative to the virtual coil w).
pub fn fix_phase(s: &mut [Complex32], w: &[Complex32]) {
    let u: Complex32 = w.iter().zip(s.iter()).map(|(w, s)| w.conj() * s).sum();
    let m = u.norm();
    if m > 0.0 {
        let rot = u.conj() / m;
        s.iter_mut().for_each(|c| *c *= rot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominant_eigenpair_matches_faer() {
        let seed = crate::sim::metrics::test_seed("dominant_eigenpair_matches_faer");
        let mut rng = crate::sim::SimRng::new(seed);
        for l in [1usize, 2, 5, 8] {
            // G = B Bᴴ with random B: PSD.
            let b: Vec<Complex32> = (0..l * l)
                .map(|_| Complex32::new(rng.normal() as f32, rng.normal() as f32))
                .collect();
            let mut g = vec![Complex32::default(); l * l];
            for i in 0..l {
                for j in 0..l {
                    g[i + l * j] = (0..l).map(|k| b[i + l * k] * b[j + l * k].conj()).sum();
                }
            }
            let (values, vectors) =
                hermitian_eigen_descending(MatRef::from_column_major_slice(&g, l, l)).unwrap();
            let mut v = vec![Complex32::new(1.0, 0.0); l];
            let mut w = vec![Complex32::default(); l];
            let lambda = dominant_eigenpair(&g, &mut v, &mut w);
            assert!(
                (lambda - values[0]).abs() <= 1e-3 * values[0],
                "{lambda} vs {}",
                values[0]
            );
            // Same vector up to a phase: |⟨v, u⟩| = 1.
            let overlap: Complex32 = (0..l).map(|i| v[i].conj() * vectors[(i, 0)]).sum();
            assert!(
                (overlap.norm() - 1.0).abs() < 1e-3,
                "l {l}: overlap {overlap}"
            );
        }
    }
}
