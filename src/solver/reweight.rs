//! Edge-preserving priors by half-quadratic reweighting (Gai et al.;
//! Kim/Trzasko et al. for the Laplace prior).
//!
//! With D the forward differences over the grid axes (see
//! `backend::cpu::fd`: the last voxel of each axis has no edge), u the
//! static edge weights (`fd_weights`, 1 when absent) and the weighted
//! gradient magnitude
//!
//! $$g_n(\rho) = \Big(\sum_a u_{a,n}\,|(D\rho)_{a,n}|^2\Big)^{1/2},$$
//!
//! every regularizer of this module minimises
//!
//! $$J(\rho) = \|W^{1/2}(E\rho - d)\|^2 + 2\lambda \sum_n \psi(g_n(\rho))$$
//!
//! | regularizer | ψ(g) | ν(g) = ψ'(g)/g |
//! |---|---|---|
//! | finite difference | g²/2 (so 2λΣψ = λ‖Dρ‖²_u) | 1 |
//! | total variation | sqrt(g² + ε²) | 1/sqrt(g² + ε²) |
//! | Laplace | 1 − exp(−t/σ), t = sqrt(g² + ε²) | exp(−t/σ)/(σ·t) |
//!
//! The gradient of J is 2·[EᴴW(Eρ − d) + λ·Dᴴ diag(u·ν(g(ρ))) D ρ]. The
//! half-quadratic step freezes ν at the current image and solves the
//! quadratic problem (EᴴWE + λ·Dᴴ diag(u·ν) D)ρ = EᴴWd by CG, so every fixed
//! point of the reweighting is a stationary point of J. For the convex TV each
//! step does not increase J; the non-convex Laplace prior is approached by
//! ε-continuation: the j-th weight update (j = 0, 1, …) uses ε_j = ε·0.1^j.
//!
//! Outer steps: `reweightings` weighted CG solves of up to `max_iterations`
//! iterations each, every one warm-started from the previous. The first step
//! uses ν ≡ 1 (the quadratic finite-difference problem) unless the solve is
//! warm-started, in which case its weights come from the start image. The
//! progress callback sees the iterations counted over all steps.

use super::cg::weighted_cg;
pub use super::penalty::Penalty;
use super::problem::CgProblem;
pub use super::problem::Neighbourhood;
use super::space::CgSpace;
use crate::error::Result;
use crate::op::CgReport;
use crate::progress::Progress;

/// Total variation or Laplace by `reweightings` outer steps of weighted CG
/// (module docs). `x` holds the start (with `warm_start`) and receives the
/// last iterate.
pub fn reweighted_cg<S: CgSpace>(
    space: &S,
    problem: &CgProblem<'_>,
    x: &mut S::Vector,
) -> Result<CgReport> {
    let steps = problem.reweightings.max(1);
    let mut total = CgReport::default();
    let mut updates = 0;
    for step in 0..steps {
        // Cancellable between steps too: inner CGs of 0 iterations check nothing.
        let span = Progress::current().step(step, steps);
        span.check(0.0)?;
        let warm = step > 0 || problem.warm_start;
        if warm {
            space.reweight(Penalty::for_update(problem, updates)?, x)?;
            updates += 1;
        } else {
            space.reweight(Penalty::Quadratic, x)?;
        }
        let offset = total.iterations;
        let user = problem.progress;
        let progress = move |iteration: usize, rel: f64| -> bool {
            user.is_some_and(|f| f(offset + iteration, rel))
        };
        let inner = CgProblem {
            warm_start: warm,
            progress: Some(&progress),
            ..*problem
        };
        let report = span.enter(|| weighted_cg(space, &inner, x))?;
        total.iterations += report.iterations;
        total.converged = report.converged;
        total.rel_residual = report.rel_residual;
        total.stop = report.stop;
        total.data_residual = report.data_residual;
    }
    Ok(total)
}
