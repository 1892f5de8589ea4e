//! Solvers, generic over where the vectors live (BART's vector-operations
//! table): one conjugate gradient serves the CPU and the GPU.

mod cg;
pub mod precondition;
pub mod reweight;

pub use cg::{cg, CgProblem, CgSpace, Discrepancy, Regularizer};
pub use precondition::{Preconditioner, PreconditionerKind};
pub use reweight::{reweighted_cg, Neighbourhood, Penalty};
