//! Simulation toolkit for demos, tests and the bindings (`horecon_sim_*`).
//!
//! One implementation shared by the Rust demo, the MATLAB/Octave scripts and
//! the Python binding:
//!
//! - [`phantom`](crate::sim::phantom): Shepp–Logan phantoms in 2D and 3D with their analytic
//!   Fourier transform $F(\mathbf k) = \int \rho(\mathbf r)\,e^{+i\mathbf k\cdot\mathbf r}\,d\mathbf r$
//!   (the sign of MODEL.md), so pure Fourier data needs no discretisation;
//! - [`trajectory`](crate::sim::trajectory): 2D spiral, radial, EPI, Cartesian and 3D stack-of-spirals
//!   in rad/m with sample times in s;
//! - [`coils`](crate::sim::coils): smooth complex receive sensitivities of L coils around the FOV;
//! - [`field`](crate::sim::field): smooth off-resonance maps and higher-order field coefficients
//!   (the 16 solid harmonics of MODEL.md: nominal trajectory plus
//!   eddy-current-like deviations of orders 0–3);
//! - [`noise`](crate::sim::noise): a seeded generator and complex Gaussian noise at a given SNR;
//! - [`metrics`](crate::sim::metrics): NRMSE, PSNR (Kirk–Hwu fig. 14.18) and percent error (Stone et al.);
//! - [`workflow`](crate::sim::workflow): the higher-order reconstruction workflow of the demo;
//! - [`grid`](crate::sim::grid): a refined grid (for simulating data without the inverse crime)
//!   and the block average back to the reconstruction grid.
//!
//! Arrays follow MODEL.md: first index fastest (positions N×3, k M×d).

pub mod coils;
pub mod field;
pub mod grid;
pub mod mask;
pub mod metrics;
pub mod noise;
pub mod phantom;
pub mod reference;
pub mod trajectory;
pub mod workflow;

pub use coils::coil_sensitivities;
pub use field::{field_coefficients, off_resonance_map, GAMMA};
pub use grid::{block_average, refined_grid};
pub use metrics::{nrmse, percent_error, psnr};
pub use noise::{add_noise, SimRng};
pub use phantom::{shepp_logan, shepp_logan_band_limited, shepp_logan_kspace, Phantom};
pub use trajectory::{
    cartesian, density_weights_2d, epi, radial, spiral, stack_of_spirals, Trajectory,
};
