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

/// Most samples or points a toolkit call makes (k and times take 32 bytes each).
pub const MAX_SIM_POINTS: usize = 1 << 30;

/// `count` values f(0), …, f(count − 1) in a fallibly allocated vector,
/// reporting progress to the current call and stopping when it is cancelled.
pub(crate) fn tabulate<T: Clone + Default + Send + Sync>(
    count: usize,
    what: &str,
    mut f: impl FnMut(usize) -> T,
) -> crate::error::Result<Vec<T>> {
    let mut out = crate::error::try_vec(count, T::default(), what)?;
    let progress = crate::progress::Progress::current();
    for (i, o) in out.iter_mut().enumerate() {
        if i % (1 << 14) == 0 {
            progress.check(i as f64 / count as f64)?;
        }
        *o = f(i);
    }
    Ok(out)
}

/// The product of toolkit sizes, or `InvalidArgument` naming it when it
/// overflows or exceeds [`MAX_SIM_POINTS`].
pub(crate) fn sim_count(what: &str, factors: &[usize]) -> crate::error::Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .filter(|&c| c <= MAX_SIM_POINTS)
        .ok_or_else(|| {
            crate::error::Error::invalid(format!(
                "{what} = {} would exceed 2^30 (at most 2^30 samples or points per call): use \
                 smaller sizes",
                factors
                    .iter()
                    .map(|f| f.to_string())
                    .collect::<Vec<_>>()
                    .join(" x ")
            ))
        })
}
