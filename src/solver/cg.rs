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
//! sequence of such weighted problems ([`super::reweight::reweighted_cg`]);
//! [`crate::solver::cg()`] picks the one a problem needs.

use super::problem::{CgProblem, Discrepancy, Regularizer};
use super::space::CgSpace;
use crate::error::{try_vec, Error, Result, Status};
use crate::op::{CgReport, StopReason};
use crate::progress::Progress;
use num_complex::Complex64;

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

/// Finite data or images whose products leave float32's range.
fn overflow(what: &str) -> Error {
    Error::new(
        Status::NotFinite,
        format!(
            "{what} overflowed float32 (the inputs are finite, but their sums exceed 3.4e38): \
             scale the data down"
        ),
    )
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
    // Progress: the right-hand side (and a warm start's residual) is the
    // first of max_iterations + 1 equal steps, iteration i the (i + 1)-th.
    let progress = Progress::current();
    let steps = problem.max_iterations + 1;
    let first = progress.step(0, steps);
    let mut b = space.zeros()?;
    first.enter(|| space.rhs(&mut b))?;
    let b_norm = space.dot_re(&b, &b).sqrt();
    if !b_norm.is_finite() {
        return Err(overflow("the right-hand side EᴴWd"));
    }
    let mut r = space.zeros()?;
    if problem.warm_start {
        first.enter(|| apply(space, problem, x, &mut r))?;
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
    let stop_at = problem.tolerance.max(problem.residual_floor);
    if rr == 0.0 || report.rel_residual <= stop_at {
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
        let step = progress.step(report.iterations + 1, steps);
        step.enter(|| apply(space, problem, &p, &mut ap))?;
        let p_ap = space.dot_re(&p, &ap);
        if !p_ap.is_finite() {
            return Err(overflow("the normal operator's product (EᴴWE + λR)p"));
        }
        if p_ap <= 0.0 {
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
        if report.rel_residual <= stop_at {
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
