//! Conjugate gradient on the regularised normal equations
//!
//!   (Eᴴ W E + λ·R) ρ = Eᴴ W d,
//!
//! the minimiser of ‖W^{1/2}(Eρ − d)‖² + λ·ρᴴRρ. The system is Hermitian
//! positive (semi-)definite, so α and β are real. The relative residual
//! reported is ‖b − Aρ‖ / ‖b‖ with b = EᴴWd.

use crate::error::{Error, Result, Status};
use crate::op::CgReport;
use num_complex::Complex32;

/// Regularizer codes of the C API.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regularizer {
    /// No regularisation (R = 0).
    None = 0,
    /// R = I: λ‖ρ‖².
    Tikhonov = 1,
    /// λ‖Dρ‖²_w over the grid axes (not yet available).
    FiniteDifference = 2,
    /// Total variation by half-quadratic reweighting (not yet available).
    TotalVariation = 3,
    /// Non-convex Σ(1 − exp(−|Dρ|/σ)) (not yet available).
    Laplace = 4,
}

impl Regularizer {
    pub fn from_code(code: i32) -> Result<Regularizer> {
        use Regularizer::*;
        match code {
            0 => Ok(None),
            1 => Ok(Tikhonov),
            2..=4 => Err(Error::invalid(format!(
                "regularizer {code} (finite difference, total variation, Laplace) is not implemented yet; \
                 use HORECON_REG_NONE (0) or HORECON_REG_TIKHONOV (1)"
            ))),
            _ => Err(Error::invalid(format!("regularizer must be 0..4, got {code}"))),
        }
    }
}

/// What to solve and how long.
pub struct CgProblem<'a> {
    /// M×L measured data.
    pub data: &'a [Complex32],
    /// Optional per-sample weights W (M), shared by all coils.
    pub sample_weights: Option<&'a [f32]>,
    pub regularizer: Regularizer,
    pub lambda: f64,
    pub max_iterations: usize,
    pub tolerance: f64,
    /// Start from the given image instead of zero.
    pub warm_start: bool,
    /// Called after every iteration with (iteration, relative residual); returning true stops the solve.
    pub progress: Option<&'a (dyn Fn(usize, f64) -> bool + Sync)>,
}

/// The vector operations CG needs, over images (N complex) wherever the
/// backend keeps them.
pub trait CgSpace {
    type Vector;
    fn zeros(&self) -> Result<Self::Vector>;
    /// b = Eᴴ W d.
    fn rhs(&self, b: &mut Self::Vector) -> Result<()>;
    /// y = Eᴴ W E x.
    fn normal(&self, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    fn set_from_host(&self, host: &[Complex32], v: &mut Self::Vector) -> Result<()>;
    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector);
    /// Re⟨a, b⟩, accumulated in float64.
    fn dot_re(&self, a: &Self::Vector, b: &Self::Vector) -> f64;
    /// y ← y + α·x.
    fn axpy(&self, alpha: f64, x: &Self::Vector, y: &mut Self::Vector);
    /// y ← x + β·y.
    fn xpay(&self, x: &Self::Vector, beta: f64, y: &mut Self::Vector);
}

/// y = (EᴴWE + λR) x.
fn apply<S: CgSpace>(
    space: &S,
    problem: &CgProblem<'_>,
    x: &S::Vector,
    y: &mut S::Vector,
) -> Result<()> {
    space.normal(x, y)?;
    if problem.regularizer == Regularizer::Tikhonov && problem.lambda != 0.0 {
        space.axpy(problem.lambda, x, y);
    }
    Ok(())
}

/// Solves in place: `x` holds the start (used only with `warm_start`) and
/// receives the last iterate. On cancellation returns `Cancelled`.
pub fn cg<S: CgSpace>(space: &S, problem: &CgProblem<'_>, x: &mut S::Vector) -> Result<CgReport> {
    let mut b = space.zeros()?;
    space.rhs(&mut b)?;
    let b_norm = space.dot_re(&b, &b).sqrt();
    let mut r = space.zeros()?;
    if problem.warm_start {
        apply(space, problem, x, &mut r)?;
        space.xpay(&b, -1.0, &mut r); // r = b − A x
    } else {
        let zero = space.zeros()?;
        space.copy(&zero, x);
        space.copy(&b, &mut r);
    }
    drop(b);
    let mut rr = space.dot_re(&r, &r);
    let relative = |rr: f64| {
        if b_norm > 0.0 {
            rr.sqrt() / b_norm
        } else {
            rr.sqrt()
        }
    };
    let mut report = CgReport {
        iterations: 0,
        converged: false,
        rel_residual: relative(rr),
    };
    if rr == 0.0 || report.rel_residual <= problem.tolerance {
        report.converged = true;
        return Ok(report);
    }
    let mut p = space.zeros()?;
    space.copy(&r, &mut p);
    let mut ap = space.zeros()?;
    while report.iterations < problem.max_iterations {
        apply(space, problem, &p, &mut ap)?;
        let p_ap = space.dot_re(&p, &ap);
        if p_ap.is_nan() || p_ap <= 0.0 {
            break; // A is singular along p (or the residual vanished): no further progress possible
        }
        let alpha = rr / p_ap;
        space.axpy(alpha, &p, x);
        space.axpy(-alpha, &ap, &mut r);
        let rr_next = space.dot_re(&r, &r);
        report.iterations += 1;
        report.rel_residual = relative(rr_next);
        if let Some(progress) = problem.progress {
            if progress(report.iterations, report.rel_residual) {
                return Err(Error::new(
                    Status::Cancelled,
                    format!(
                        "cancelled by the progress callback after {} iterations",
                        report.iterations
                    ),
                ));
            }
        }
        if report.rel_residual <= problem.tolerance {
            report.converged = true;
            break;
        }
        space.xpay(&r, rr_next / rr, &mut p);
        rr = rr_next;
    }
    Ok(report)
}
