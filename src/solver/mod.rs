//! Solvers, generic over where the vectors live (BART's vector-operations
//! table): one conjugate gradient serves the CPU and the GPU.

mod cg;
mod penalty;
pub mod precondition;
mod problem;
pub mod reweight;
mod space;

use crate::error::Result;
use crate::op::CgReport;
pub use penalty::Penalty;
pub use precondition::{Preconditioner, PreconditionerKind};
pub use problem::{residual_floor, CgProblem, Discrepancy, Neighbourhood, Regularizer};
pub use reweight::reweighted_cg;
pub use space::CgSpace;

/// Solves in place: `x` holds the start (used only with `warm_start`) and
/// receives the last iterate. On cancellation returns `Cancelled`.
///
/// Total variation and Laplace (with λ ≠ 0) run
/// [`reweighted_cg`]: the report then counts
/// the iterations of all outer steps and gives the last step's residual and
/// convergence. λ = 0 makes every regularizer `None`.
pub fn cg<S: CgSpace>(space: &S, problem: &CgProblem<'_>, x: &mut S::Vector) -> Result<CgReport> {
    match problem.regularizer {
        Regularizer::TotalVariation | Regularizer::Laplace if problem.lambda != 0.0 => {
            reweighted_cg(space, problem, x)
        }
        _ => cg::weighted_cg(space, problem, x),
    }
}
