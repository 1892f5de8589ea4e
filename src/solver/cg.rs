//! Conjugate gradient on the regularised normal equations
//!
//!   (Eᴴ W E + λ·R) ρ = Eᴴ W d,
//!
//! the minimiser of ‖W^{1/2}(Eρ − d)‖² + λ·ρᴴRρ. The system is Hermitian
//! positive (semi-)definite, so α and β are real. The relative residual
//! reported is ‖b − Aρ‖ / ‖b‖ with b = EᴴWd.
//!
//! R is I (Tikhonov) or Dᴴ diag(w) D (finite differences, [`super::reweight`]
//! for D and the weights); total variation and the Laplace prior solve a
//! sequence of such weighted problems ([`super::reweight::reweighted_cg`]).

use super::reweight::{reweighted_cg, Neighbourhood, Penalty};
use crate::error::{Error, Result, Status};
use crate::op::CgReport;
use crate::progress::Progress;
use num_complex::Complex32;

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

    /// Sets the per-voxel factors ν of the edge weights w_{a,n} = u_{a,n}·ν_n
    /// used by [`CgSpace::add_fd_normal`] from the image x:
    /// ν_n = ψ'(g_n)/g_n ([`Penalty::weight`]) with g_n the gradient
    /// magnitude of x weighted by `fd_weights` ([`super::reweight`]);
    /// `Penalty::Quadratic` resets ν ≡ 1 (the state of a fresh space).
    fn reweight(&self, penalty: Penalty, x: &Self::Vector) -> Result<()> {
        let _ = (penalty, x);
        Err(not_available(self.backend()))
    }

    /// y ← y + λ·Dᴴ diag(w) D x with w the edge weights described at
    /// [`CgSpace::reweight`].
    fn add_fd_normal(&self, lambda: f64, x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        let _ = (lambda, x, y);
        Err(not_available(self.backend()))
    }

    /// The backend's name in messages.
    fn backend(&self) -> &'static str {
        "this backend"
    }
}

fn not_available(backend: &str) -> Error {
    Error::invalid(format!(
        "the finite-difference, total-variation and Laplace regularizers are not yet available \
         on {backend}; use the CPU backend (HORECON_BACKEND_CPU) or HORECON_REG_TIKHONOV"
    ))
}

/// y = (EᴴWE + λR) x.
fn apply<S: CgSpace>(
    space: &S,
    problem: &CgProblem<'_>,
    x: &S::Vector,
    y: &mut S::Vector,
) -> Result<()> {
    space.normal(x, y)?;
    if problem.lambda != 0.0 {
        match problem.regularizer {
            Regularizer::None => {}
            Regularizer::Tikhonov => space.axpy(problem.lambda, x, y),
            Regularizer::FiniteDifference | Regularizer::TotalVariation | Regularizer::Laplace => {
                space.add_fd_normal(problem.lambda, x, y)?
            }
        }
    }
    Ok(())
}

/// Solves in place: `x` holds the start (used only with `warm_start`) and
/// receives the last iterate. On cancellation returns `Cancelled`.
///
/// Total variation and Laplace (with λ ≠ 0) run
/// [`reweighted_cg`](super::reweight::reweighted_cg): the report then counts
/// the iterations of all outer steps and gives the last step's residual and
/// convergence. λ = 0 makes every regularizer `None`.
pub fn cg<S: CgSpace>(space: &S, problem: &CgProblem<'_>, x: &mut S::Vector) -> Result<CgReport> {
    match problem.regularizer {
        Regularizer::TotalVariation | Regularizer::Laplace if problem.lambda != 0.0 => {
            reweighted_cg(space, problem, x)
        }
        _ => weighted_cg(space, problem, x),
    }
}

/// One CG on (EᴴWE + λR)ρ = EᴴWd with the space's current edge weights.
pub(crate) fn weighted_cg<S: CgSpace>(
    space: &S,
    problem: &CgProblem<'_>,
    x: &mut S::Vector,
) -> Result<CgReport> {
    // Progress: the right-hand side (and a warm start's residual) is the
    // first of max_iterations + 1 equal steps, iteration i the (i + 1)-th.
    let progress = Progress::current();
    let steps = problem.max_iterations + 1;
    let first = progress.step(0, steps);
    let mut b = space.zeros()?;
    first.enter(|| space.rhs(&mut b))?;
    let b_norm = space.dot_re(&b, &b).sqrt();
    let mut r = space.zeros()?;
    if problem.warm_start {
        first.enter(|| apply(space, problem, x, &mut r))?;
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
        let step = progress.step(report.iterations + 1, steps);
        step.enter(|| apply(space, problem, &p, &mut ap))?;
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
        step.check(1.0)?;
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
