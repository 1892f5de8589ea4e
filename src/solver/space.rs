//! The vector operations CG needs ([`CgSpace`], BART's vector-operations
//! table): each backend implements them where it keeps its vectors.

use super::penalty::Penalty;
use crate::error::{Error, Result};
use num_complex::Complex32;

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
