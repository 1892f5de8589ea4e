//! Noise covariance and whitening (Pruessmann et al. 2001).
//!
//! From noise-only samples n_j (rows of an Mn×L matrix) the coil noise
//! covariance is
//!
//! $$\Psi_{ab} = \frac{1}{M_n}\sum_j n_{j,a}\,\overline{n_{j,b}}$$
//!
//! (the noise has zero mean). With the Cholesky factor Ψ = C Cᴴ, every coil
//! vector x (a data sample across coils, or the sensitivities at a voxel)
//! becomes C⁻¹x: whitened data and sensitivities give E' = C⁻¹E, whose
//! noise is white with unit variance per complex sample, so CG on them is
//! the noise-optimal (SENSE) reconstruction and σ = 1 in the discrepancy rule.

use crate::error::{try_vec, Error, Result};
use faer::{Mat, MatMut, Par, Side};
use num_complex::{Complex32, Complex64};

/// Ψ (L×L, column-major) of `noise` (Mn×L, sample fastest).
pub fn noise_covariance(noise: &[Complex32], coils: usize) -> Result<Vec<Complex64>> {
    if coils == 0 || noise.len() % coils != 0 {
        return Err(Error::size(format!(
            "noise has {} elements, not nsamples x ncoils with ncoils = {coils}",
            noise.len()
        )));
    }
    let samples = noise.len() / coils;
    if samples < coils {
        return Err(Error::invalid(format!(
            "need at least ncoils = {coils} noise samples per coil for a positive definite \
             covariance, got {samples}"
        )));
    }
    crate::model::check_finite("noise", noise)?;
    let mut psi = try_vec(coils * coils, Complex64::new(0.0, 0.0), "noise covariance")?;
    for a in 0..coils {
        let na = &noise[a * samples..(a + 1) * samples];
        for b in 0..=a {
            let nb = &noise[b * samples..(b + 1) * samples];
            let s: Complex64 = na
                .iter()
                .zip(nb)
                .map(|(x, y)| {
                    Complex64::new(x.re as f64, x.im as f64)
                        * Complex64::new(y.re as f64, -y.im as f64)
                })
                .sum();
            psi[a + coils * b] = s / samples as f64;
            psi[b + coils * a] = (s / samples as f64).conj();
        }
    }
    Ok(psi)
}

/// The lower Cholesky factor C of Ψ (Ψ = C Cᴴ) after checking that Ψ is
/// Hermitian and positive definite.
pub fn whitening_factor(covariance: &[Complex64], coils: usize) -> Result<Mat<Complex64>> {
    if covariance.len() != coils * coils {
        return Err(Error::size(format!(
            "covariance has {} elements, expected ncoils x ncoils = {}",
            covariance.len(),
            coils * coils
        )));
    }
    let scale = covariance.iter().map(|c| c.norm()).fold(0.0, f64::max);
    for a in 0..coils {
        let diagonal = covariance[a + coils * a];
        if diagonal.im.abs() > 0.5e-5 * scale {
            return Err(Error::invalid(format!(
                "covariance is not Hermitian: diagonal entry ({a}, {a}) = {diagonal} is not real"
            )));
        }
        for b in 0..a {
            let d = (covariance[a + coils * b] - covariance[b + coils * a].conj()).norm();
            if d > 1e-5 * scale {
                return Err(Error::invalid(format!(
                    "covariance is not Hermitian: entry ({a}, {b}) differs from the conjugate of \
                     ({b}, {a}) by {d:.3e}"
                )));
            }
        }
    }
    let psi = Mat::from_fn(coils, coils, |i, j| covariance[i + coils * j]);
    let llt = psi.llt(Side::Lower).map_err(|_| {
        Error::invalid(
            "covariance is not positive definite (a coil without noise, identical coils, or too \
             few noise samples)",
        )
    })?;
    Ok(llt.L().to_owned())
}

/// x ← C⁻¹x for every row of `values` (npoints×L, point fastest): data
/// samples or the sensitivities of voxels. A result beyond float32's range
/// is `NotFinite` (`values` then hold it).
pub fn whiten(covariance: &[Complex64], coils: usize, values: &mut [Complex32]) -> Result<()> {
    let factor = whitening_factor(covariance, coils)?;
    if values.len() % coils != 0 {
        return Err(Error::size(format!(
            "values has {} elements, not npoints x ncoils with ncoils = {coils}",
            values.len()
        )));
    }
    crate::model::check_finite("values", values)?;
    let points = values.len() / coils;
    let factor32 = Mat::from_fn(coils, coils, |i, j| {
        let c = factor[(i, j)];
        Complex32::new(c.re as f32, c.im as f32)
    });
    // Rows are points: C⁻¹Xᵀ solves Xᵀ in place (a transposed view, no copy).
    let x = MatMut::from_column_major_slice_mut(values, points, coils);
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        factor32.as_ref(),
        x.transpose_mut(),
        Par::rayon(0),
    );
    crate::finite::check_result("values (whitened)", values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_covariance_with_a_complex_diagonal_or_an_overflowing_result_is_refused() {
        let (one, zero) = (Complex64::new(1.0, 0.0), Complex64::new(0.0, 0.0));
        let complex_diagonal = vec![Complex64::new(1.0, 1.0), zero, zero, one];
        let mut values = vec![Complex32::new(1.0, 0.0); 2];
        let e = whiten(&complex_diagonal, 2, &mut values).unwrap_err();
        assert_eq!(
            e.status,
            crate::error::Status::InvalidArgument,
            "{}",
            e.message
        );
        assert!(e.message.contains("(0, 0)"), "{}", e.message);
        let tiny = vec![
            Complex64::new(1e-30, 0.0),
            zero,
            zero,
            Complex64::new(1e-30, 0.0),
        ];
        let mut values = vec![Complex32::new(1e30, 0.0); 4];
        let e = whiten(&tiny, 2, &mut values).unwrap_err();
        assert_eq!(e.status, crate::error::Status::NotFinite, "{}", e.message);
    }

    #[test]
    fn whitening_inverts_the_factor() {
        // Ψ = [[4, 2i], [−2i, 5]] = C Cᴴ with C = [[2, 0], [−i, 2]].
        let psi = vec![
            Complex64::new(4.0, 0.0),
            Complex64::new(0.0, -2.0),
            Complex64::new(0.0, 2.0),
            Complex64::new(5.0, 0.0),
        ];
        // x = C·(1, 1) = (2, 2 − i) per point; whitened back to (1, 1).
        let mut values = vec![
            Complex32::new(2.0, 0.0),
            Complex32::new(2.0, 0.0),
            Complex32::new(2.0, -1.0),
            Complex32::new(2.0, -1.0),
        ];
        whiten(&psi, 2, &mut values).unwrap();
        for v in &values {
            assert!((v - Complex32::new(1.0, 0.0)).norm() < 1e-6, "{v}");
        }
    }
}
