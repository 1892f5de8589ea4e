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

use super::precondition::Preconditioner;
use super::reweight::{reweighted_cg, Neighbourhood, Penalty};
use crate::error::{try_vec, Error, Result, Status};
use crate::op::{CgReport, StopReason};
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

    /// N, the length of every vector.
    fn voxels(&self) -> usize;

    /// Copies a vector to the host in float64 (N).
    fn to_host(&self, v: &Self::Vector, out: &mut [Complex64]) -> Result<()> {
        let _ = (v, out);
        Err(Error::internal(format!(
            "{} cannot copy CG vectors to the host",
            self.backend()
        )))
    }

    /// Sets a vector from float64 host values (N).
    fn set_from_host64(&self, host: &[Complex64], v: &mut Self::Vector) -> Result<()> {
        let narrowed: Vec<Complex32> = host
            .iter()
            .map(|c| Complex32::new(c.re as f32, c.im as f32))
            .collect();
        self.set_from_host(&narrowed, v)
    }

    /// z = M⁻¹ r, by default on the host in float64 ([`Preconditioner::apply`]).
    fn precondition(
        &self,
        m: &Preconditioner,
        r: &Self::Vector,
        z: &mut Self::Vector,
    ) -> Result<()> {
        let n = self.voxels();
        let mut host = try_vec(n, Complex64::new(0.0, 0.0), "preconditioner input (N)")?;
        self.to_host(r, &mut host)?;
        let mut out = try_vec(n, Complex64::new(0.0, 0.0), "preconditioner output (N)")?;
        m.apply(&host, &mut out)?;
        self.set_from_host64(&out, z)
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

/// λ⟨x, Rx⟩, the regulariser's energy (for the discrepancy estimate).
fn regularizer_energy<S: CgSpace>(
    space: &S,
    problem: &CgProblem<'_>,
    x: &S::Vector,
    scratch: &mut S::Vector,
) -> Result<f64> {
    if problem.lambda == 0.0 {
        return Ok(0.0);
    }
    match problem.regularizer {
        Regularizer::None => Ok(0.0),
        Regularizer::Tikhonov => Ok(problem.lambda * space.dot_re(x, x)),
        Regularizer::FiniteDifference | Regularizer::TotalVariation | Regularizer::Laplace => {
            let zero = space.zeros()?;
            space.copy(&zero, scratch);
            space.add_fd_normal(problem.lambda, x, scratch)?;
            Ok(space.dot_re(x, scratch))
        }
    }
}

/// The discrepancy rule's state within one CG (see [`Discrepancy`]).
struct DiscrepancyCheck<'a, S: CgSpace> {
    rule: Discrepancy<'a>,
    /// b = EᴴWd, kept for the estimate.
    b: S::Vector,
    scratch: S::Vector,
    /// Confirmed / estimated residual at the last confirmation (1 before).
    ratio: f64,
    /// The residual confirmed for the current iterate.
    confirmed: Option<f64>,
}

impl<S: CgSpace> DiscrepancyCheck<'_, S> {
    /// ‖W^{1/2}(Ex − d)‖ by the exact operator.
    fn explicit(&mut self, space: &S, x: &S::Vector) -> Result<f64> {
        let mut host = try_vec(space.voxels(), Complex64::new(0.0, 0.0), "image (N)")?;
        space.to_host(x, &mut host)?;
        let value = (self.rule.residual)(&host)?;
        self.confirmed = Some(value);
        Ok(value)
    }
}

/// Completes the report: with the discrepancy rule, the data residual of the
/// final iterate (confirmed at the stop, else computed now).
fn finish<S: CgSpace>(
    space: &S,
    x: &S::Vector,
    check: Option<&mut DiscrepancyCheck<'_, S>>,
    mut report: CgReport,
) -> Result<CgReport> {
    if let Some(c) = check {
        report.data_residual = Some(match c.confirmed {
            Some(v) if report.stop == StopReason::Discrepancy => v,
            _ => c.explicit(space, x)?,
        });
    }
    Ok(report)
}

/// One CG on (EᴴWE + λR)ρ = EᴴWd with the space's current edge weights,
/// preconditioned by `problem.preconditioner` (z = M⁻¹r, β = ⟨r₊,z₊⟩/⟨r,z⟩)
/// when given; stops at the tolerance of ‖r‖/‖b‖, at the discrepancy rule,
/// or after `max_iterations`.
pub(crate) fn weighted_cg<S: CgSpace>(
    space: &S,
    problem: &CgProblem<'_>,
    x: &mut S::Vector,
) -> Result<CgReport> {
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
    let mut check = match problem.discrepancy {
        Some(rule) => Some(DiscrepancyCheck::<S> {
            rule,
            b,
            scratch: space.zeros()?,
            ratio: 1.0,
            confirmed: None,
        }),
        None => {
            drop(b);
            None
        }
    };
    let rr = space.dot_re(&r, &r);
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
        stop: StopReason::MaxIterations,
        data_residual: None,
    };
    if rr == 0.0 || report.rel_residual <= problem.tolerance {
        report.converged = true;
        report.stop = StopReason::Tolerance;
        return finish(space, x, check.as_mut(), report);
    }
    let mut z = match problem.preconditioner {
        Some(m) => {
            let mut z = space.zeros()?;
            space.precondition(m, &r, &mut z)?;
            Some(z)
        }
        None => None,
    };
    let mut rz = match &z {
        Some(z) => space.dot_re(&r, z),
        None => rr,
    };
    let mut p = space.zeros()?;
    space.copy(z.as_ref().unwrap_or(&r), &mut p);
    let mut ap = space.zeros()?;
    while report.iterations < problem.max_iterations {
        apply(space, problem, &p, &mut ap)?;
        let p_ap = space.dot_re(&p, &ap);
        if p_ap.is_nan() || p_ap <= 0.0 {
            // A is singular along p (or the residual vanished): no further progress possible.
            report.stop = StopReason::Breakdown;
            break;
        }
        let alpha = rz / p_ap;
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
            report.stop = StopReason::Tolerance;
            break;
        }
        if let Some(c) = check.as_mut() {
            let energy = regularizer_energy(space, problem, x, &mut c.scratch)?;
            let estimate2 =
                c.rule.data_norm2 - space.dot_re(x, &c.b) - space.dot_re(x, &r) - energy;
            let estimate = estimate2.max(0.0).sqrt();
            if estimate * c.ratio <= c.rule.threshold {
                let confirmed = c.explicit(space, x)?;
                c.ratio = if estimate > 0.0 {
                    confirmed / estimate
                } else {
                    1.0
                };
                if confirmed <= c.rule.threshold {
                    report.converged = true;
                    report.stop = StopReason::Discrepancy;
                    break;
                }
            }
        }
        let rz_next = match (problem.preconditioner, z.as_mut()) {
            (Some(m), Some(z)) => {
                space.precondition(m, &r, z)?;
                space.dot_re(&r, z)
            }
            _ => rr_next,
        };
        space.xpay(z.as_ref().unwrap_or(&r), rz_next / rz, &mut p);
        rz = rz_next;
    }
    finish(space, x, check.as_mut(), report)
}
