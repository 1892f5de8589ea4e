//! # horecon: exact MRI reconstruction with higher-order field models
//!
//! The encoding model (design/MODEL.md), computed exactly, on the fly:
//!
//! $$\varphi(j,n) = \sum_b k_b(t_j)\,h_b(\mathbf r_n) + \omega_n t_j,\qquad
//!   E_{(j,c),n} = S_c(\mathbf r_n)\, e^{+i\varphi(j,n)}$$
//!
//! - forward $d = E\rho$, adjoint $\hat\rho = E^H d$, normal $E^H E\rho$;
//! - images are N = nx·ny·nz voxels (x fastest), data M×L (sample fastest);
//! - no normalisation and no implicit density compensation;
//! - the sign is $+i$ in $E$: a user with $e^{-i k\cdot r}$ passes $-k$.
//!
//! Reconstruction solves $(E^H W E + \lambda R)\rho = E^H W d$ by conjugate
//! gradient ([`solver`]), generic over the backend.
//!
//! Layers, one direction of dependency: [`ffi`] → [`plan`] → [`solver`] →
//! [`op`] → [`backend`] → [`model`].

pub mod backend;
pub(crate) mod call_pool;
// Rust-side algorithms; the C API reaches them through src/ffi/calib.rs.
/// cbindgen:ignore
pub mod calib;
pub mod error;
pub mod ffi;
pub mod finite;
pub mod model;
/// cbindgen:ignore
pub mod nufft;
pub mod op;
pub mod options;
pub mod plan;
pub mod progress;
pub(crate) mod reduce;
// The toolkit reaches C only through src/ffi/sim.rs: cbindgen skips the module.
/// cbindgen:ignore
pub mod sim;
pub mod solver;

pub use error::{Error, Result, Status};
pub use num_complex::Complex32;
pub use op::Precision;
pub use plan::{BackendKind, CgInfo, CgOptions, Options, Plan};
pub use solver::Regularizer;
