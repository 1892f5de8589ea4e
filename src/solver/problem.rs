//! What a solve is asked: the regularised least-squares problem of
//! MODEL.md ([`CgProblem`]), its regularizer and the neighbourhood of the
//! finite differences.

use super::precondition::Preconditioner;
use crate::error::{Error, Result};
use num_complex::{Complex32, Complex64};

/// Regularizer codes of the C API.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regularizer {
    /// No regularisation (R = 0).
    None = 0,
    /// R = I: λ‖ρ‖².
    Tikhonov = 1,
    /// λ‖Dρ‖²_u: forward differences over the grid axes with optional
    /// per-edge weights u (`fd_weights`).
    FiniteDifference = 2,
    /// Total variation 2λ·Σ_n sqrt(|Dρ|²_n + ε²) by half-quadratic reweighting.
    TotalVariation = 3,
    /// The non-convex 2λ·Σ_n (1 − exp(−sqrt(|Dρ|²_n + ε²)/σ)) by reweighting
    /// with ε-continuation.
    Laplace = 4,
}

impl Regularizer {
    pub fn from_code(code: i32) -> Result<Regularizer> {
        use Regularizer::*;
        match code {
            0 => Ok(None),
            1 => Ok(Tikhonov),
            2 => Ok(FiniteDifference),
            3 => Ok(TotalVariation),
            4 => Ok(Laplace),
            _ => Err(Error::invalid(format!(
                "regularizer must be 0..4, got {code}"
            ))),
        }
    }
}

/// The [`CgProblem::residual_floor`] of a plan's precision: 16 units of
/// roundoff of its arithmetic (float64 for DOUBLE: 3.6e-15; float32
/// otherwise: 1.9e-6).
pub fn residual_floor(precision: crate::op::Precision) -> f64 {
    let unit = match precision {
        crate::op::Precision::Double => f64::EPSILON / 2.0,
        _ => f64::from(f32::EPSILON) / 2.0,
    };
    16.0 * unit
}

/// What to solve and how long.
#[derive(Clone, Copy)]
pub struct CgProblem<'a> {
    /// M×L measured data.
    pub data: &'a [Complex32],
    /// Optional per-sample weights W (M), shared by all coils.
    pub sample_weights: Option<&'a [f32]>,
    pub regularizer: Regularizer,
    pub lambda: f64,
    /// Static per-edge weights u (N×ndims with ndims the number of
    /// directions of `neighbourhood`, voxel fastest) of the
    /// finite-difference regularizers; `None` = 1.
    pub fd_weights: Option<&'a [f32]>,
    /// The directions of D (axes, or all neighbours weighted 1/|d|²).
    pub neighbourhood: Neighbourhood,
    /// Outer (weighted CG) steps of TV and Laplace, ≥ 1.
    pub reweightings: usize,
    /// Smoothing ε of TV and Laplace (image units), the start of Laplace's continuation.
    pub epsilon: f64,
    /// σ of the Laplace prior (image units).
    pub sigma: f64,
    /// Iterations of each CG (each outer step of TV and Laplace).
    pub max_iterations: usize,
    pub tolerance: f64,
    /// CG also stops (converged) once ‖r‖/‖b‖ ≤ this: the residual is then
    /// the rounding noise of the operator's arithmetic, and further steps
    /// would amplify that noise along the null space of a singular system
    /// (the residual of a rank-2 problem went 9e-16 → 5 in three steps).
    /// [`residual_floor`] for a precision; 0 = none.
    pub residual_floor: f64,
    /// Start from the given image instead of zero.
    pub warm_start: bool,
    /// Called after every iteration with (iteration, relative residual); returning true stops the solve.
    pub progress: Option<&'a (dyn Fn(usize, f64) -> bool + Sync)>,
    /// z = M⁻¹r of preconditioned CG; `None` = plain CG.
    pub preconditioner: Option<&'a Preconditioner>,
    /// The discrepancy-principle stopping rule; `None` = off.
    pub discrepancy: Option<Discrepancy<'a>>,
}

/// The discrepancy principle (Morozov): stop at the first iterate whose data
/// residual ‖W^{1/2}(Eρ − d)‖ is at most `threshold` (τ·σ·sqrt(L·Σ_j w_j),
/// the expected norm of the noise times τ).
///
/// The residual is followed through CG's recurrences at no cost,
///
/// $$\|W^{1/2}(E\rho - d)\|^2 = d^H W d - \mathrm{Re}\langle\rho, b\rangle
///   - \mathrm{Re}\langle\rho, r\rangle - \lambda\langle\rho, R\rho\rangle$$
///
/// (b = EᴴWd, r = b − (EᴴWE + λR)ρ), exact up to the normal operator's
/// accuracy; when it reaches the threshold it is confirmed by `residual`
/// (one application of the exact E), and later estimates are scaled by the
/// last confirmed/estimated ratio.
#[derive(Clone, Copy)]
pub struct Discrepancy<'a> {
    pub threshold: f64,
    /// dᴴWd.
    pub data_norm2: f64,
    /// ‖W^{1/2}(Eρ − d)‖ of an image ρ (N, host).
    pub residual: &'a (dyn Fn(&[Complex64]) -> Result<f64> + Sync),
}

/// The neighbour directions of D (`backend::cpu::fd` lists them and their
/// order): the C API's `neighbours` option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Neighbourhood {
    /// Differences along the grid axes (6 neighbours in 3D): code 6 or 0.
    #[default]
    Axes,
    /// Differences to every neighbour, each edge once, weighted 1/|d|² (26
    /// neighbours, 13 directions in 3D; 8 neighbours, 4 directions in 2D): code 26.
    Full,
}

impl Neighbourhood {
    /// 0 or 6 → axes, 26 → all neighbours.
    pub fn from_code(code: i32) -> Result<Neighbourhood> {
        match code {
            0 | 6 => Ok(Neighbourhood::Axes),
            26 => Ok(Neighbourhood::Full),
            _ => Err(Error::invalid(format!(
                "neighbours must be 6 (axis differences; 0 means 6) or 26 (all neighbours), got {code}"
            ))),
        }
    }

    /// The C API code (6 or 26).
    pub fn code(self) -> i32 {
        match self {
            Neighbourhood::Axes => 6,
            Neighbourhood::Full => 26,
        }
    }
}
