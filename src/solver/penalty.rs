//! The penalty ψ of one outer step of the reweighted regularizers and its
//! half-quadratic weight ν(g) = ψ'(g)/g (the table in [`super::reweight`]).

use super::problem::{CgProblem, Regularizer};
use crate::error::{Error, Result};

/// The penalty ψ of one outer step (with its ε already continued).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Penalty {
    /// ψ(g) = g²/2: ν ≡ 1.
    Quadratic,
    /// ψ(g) = sqrt(g² + ε²).
    TotalVariation { epsilon: f64 },
    /// ψ(g) = 1 − exp(−sqrt(g² + ε²)/σ).
    Laplace { epsilon: f64, sigma: f64 },
}

impl Penalty {
    /// ψ(g).
    pub fn value(&self, g: f64) -> f64 {
        match *self {
            Penalty::Quadratic => 0.5 * g * g,
            Penalty::TotalVariation { epsilon } => g.hypot(epsilon),
            Penalty::Laplace { epsilon, sigma } => -(-g.hypot(epsilon) / sigma).exp_m1(),
        }
    }

    /// ν(g) = ψ'(g)/g, the factor of the edge weights in the half-quadratic step.
    pub fn weight(&self, g: f64) -> f64 {
        match *self {
            Penalty::Quadratic => 1.0,
            Penalty::TotalVariation { epsilon } => 1.0 / g.hypot(epsilon),
            Penalty::Laplace { epsilon, sigma } => {
                let t = g.hypot(epsilon);
                (-t / sigma).exp() / (sigma * t)
            }
        }
    }

    /// The penalty of weight update `update` (0, 1, …) of a solve.
    pub fn for_update(problem: &CgProblem<'_>, update: usize) -> Result<Penalty> {
        match problem.regularizer {
            Regularizer::FiniteDifference => Ok(Penalty::Quadratic),
            Regularizer::TotalVariation => Ok(Penalty::TotalVariation {
                epsilon: problem.epsilon,
            }),
            Regularizer::Laplace => Ok(Penalty::Laplace {
                epsilon: problem.epsilon * 0.1f64.powi(update.min(300) as i32),
                sigma: problem.sigma,
            }),
            other => Err(Error::internal(format!(
                "no reweighting penalty for regularizer {other:?}"
            ))),
        }
    }
}
