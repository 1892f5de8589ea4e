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

use super::problem::{CgProblem, Regularizer};
use super::space::CgSpace;
use crate::error::{Error, Result, Status};
use crate::op::CgReport;
use crate::progress::Progress;

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
