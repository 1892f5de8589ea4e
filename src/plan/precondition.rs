//! The plan's side of preconditioned CG and the discrepancy rule: building
//! M⁻¹ from the model ([`crate::solver::precondition`]) and the exact data
//! residual that confirms the rule ([`crate::solver::Discrepancy`]).

use super::{CgOptions, Plan};
use crate::error::{try_vec, Error, Result};
use crate::op::EncodingOperator;
use crate::solver::precondition::{coil_energy, difference_symbol, Preconditioner};
use crate::solver::{Discrepancy, Neighbourhood, PreconditionerKind, Regularizer};
use num_complex::{Complex32, Complex64};

/// Σ_j w_j (M without weights).
fn weight_sum(options: &CgOptions<'_>, samples: usize) -> f64 {
    options
        .sample_weights
        .map_or(samples as f64, |w| w.iter().map(|&v| v as f64).sum())
}

impl Plan {
    /// M⁻¹ for `options.preconditioner`, or `None` for plain CG.
    pub(super) fn preconditioner(
        &self,
        op: &dyn EncodingOperator,
        options: &CgOptions<'_>,
    ) -> Result<Option<Preconditioner>> {
        let s = self.sizes();
        let lambda = if options.regularizer == Regularizer::None {
            0.0
        } else {
            options.lambda
        };
        let finite_difference = matches!(
            options.regularizer,
            Regularizer::FiniteDifference | Regularizer::TotalVariation | Regularizer::Laplace
        );
        let energy = || coil_energy(s.voxels, self.model.sensitivities.as_deref());
        match options.preconditioner {
            PreconditionerKind::None => Ok(None),
            PreconditionerKind::Diagonal => {
                let directions = match options.neighbourhood {
                    Neighbourhood::Axes => s.grid_axes() as f64,
                    // Σ_d 1/|d|² over the 13 (3D), 4 (2D) or 1 (1D) directions.
                    Neighbourhood::Full => [1.0, 1.0, 3.0, 22.0 / 3.0][s.grid_axes()],
                };
                let regularizer_diagonal = if finite_difference {
                    2.0 * lambda * directions
                } else {
                    lambda
                };
                Ok(Some(Preconditioner::diagonal(
                    energy()?,
                    weight_sum(options, s.samples),
                    regularizer_diagonal,
                )))
            }
            PreconditionerKind::Circulant => {
                let (spectrum, kernel_dims) =
                    op.toeplitz_kernel(options.sample_weights)?.ok_or_else(|| {
                        Error::invalid(
                            "the circulant preconditioner needs the Toeplitz normal operator: \
                             enable it with horecon_set_toeplitz (or use the diagonal one)",
                        )
                    })?;
                let dims = s.dims;
                Ok(Some(Preconditioner::circulant(
                    dims,
                    kernel_dims,
                    spectrum,
                    energy()?,
                    |m| {
                        if finite_difference {
                            lambda * difference_symbol(dims, m)
                        } else {
                            lambda
                        }
                    },
                )?))
            }
        }
    }

    /// ‖W^{1/2}(E x − d)‖ with the exact forward operator of `op`.
    pub(super) fn data_residual(
        &self,
        op: &dyn EncodingOperator,
        data: &[Complex32],
        options: &CgOptions<'_>,
        image: &[Complex64],
    ) -> Result<f64> {
        let s = self.sizes();
        let x: Vec<Complex32> = image
            .iter()
            .map(|c| Complex32::new(c.re as f32, c.im as f32))
            .collect();
        let mut predicted = try_vec(s.samples * s.coils, Complex32::default(), "E·image (M x L)")?;
        op.forward(&x, &mut predicted)?;
        let mut sum = 0.0f64;
        for (i, (p, d)) in predicted.iter().zip(data).enumerate() {
            let w = options
                .sample_weights
                .map_or(1.0, |w| w[i % s.samples] as f64);
            let e = Complex64::new(p.re as f64 - d.re as f64, p.im as f64 - d.im as f64);
            sum += w * e.norm_sqr();
        }
        Ok(sum.sqrt())
    }

    /// The discrepancy rule of `options` (`None` when τ = 0), checked.
    pub(super) fn discrepancy<'a>(
        &self,
        data: &[Complex32],
        options: &CgOptions<'_>,
        residual: &'a (dyn Fn(&[Complex64]) -> Result<f64> + Sync),
    ) -> Result<Option<Discrepancy<'a>>> {
        let tau = options.discrepancy_tau;
        if !(tau.is_finite() && tau >= 0.0) {
            return Err(Error::invalid(format!(
                "discrepancy_tau must be finite and >= 0 (0 = off), got {tau}"
            )));
        }
        if tau == 0.0 {
            return Ok(None);
        }
        let sigma = options.noise_sigma;
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(Error::invalid(format!(
                "noise_sigma must be finite and > 0 with the discrepancy rule (1 for whitened \
                 data, sqrt(trace(covariance)/L) otherwise), got {sigma}"
            )));
        }
        if options.lambda != 0.0
            && matches!(
                options.regularizer,
                Regularizer::TotalVariation | Regularizer::Laplace
            )
        {
            return Err(Error::invalid(
                "the discrepancy rule stops one CG: it cannot be combined with the reweighted \
                 total-variation or Laplace priors (use none, Tikhonov or finite difference)",
            ));
        }
        let s = self.sizes();
        let mut data_norm2 = 0.0f64;
        for (i, d) in data.iter().enumerate() {
            let w = options
                .sample_weights
                .map_or(1.0, |w| w[i % s.samples] as f64);
            data_norm2 += w * d.norm_sqr() as f64;
        }
        Ok(Some(Discrepancy {
            threshold: tau * sigma * (s.coils as f64 * weight_sum(options, s.samples)).sqrt(),
            data_norm2,
            residual,
        }))
    }
}
