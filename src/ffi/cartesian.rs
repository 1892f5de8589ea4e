//! The C API of Cartesian FFT mode (issue 5 §3).

use super::{guard, horecon_plan, horecon_status, plan_mut, read};

/// Cartesian FFT mode: the samples are the grid points where `mask`
/// (nx·ny·nz bytes, column-major: x fastest) is non-zero, in column-major
/// order, so nsamples must equal their count (else
/// HORECON_ERR_SIZE_MISMATCH naming both). Needs positions on an
/// axis-aligned grid: horecon_set_grid_positions, or horecon_set_positions
/// with such a grid (else HORECON_ERR_INVALID_ARGUMENT; no positions:
/// HORECON_ERR_INCOMPLETE_PLAN).
///
/// Sets the phase model to the trajectory of those points,
/// k_a = 2π(p_a − ⌊n_a/2⌋)/fov_a rad/m (0 on axes of one voxel), and computes
/// E, Eᴴ, EᴴE and CG with FFTs, exactly (the same E as the phase sum for that
/// trajectory, to the precision mode's class). Any later positions or
/// phase-model setter leaves Cartesian mode (the trajectory stays until
/// replaced, then computed by the phase sum). Off-resonance cannot be
/// combined with it (HORECON_ERR_INVALID_ARGUMENT, before or after).
/// Both backends: CUDA plans use cuFFT (libcufft.so, .so.13 or .so.12;
/// without it HORECON_ERR_BACKEND_UNAVAILABLE when an operator is first
/// applied). With Toeplitz also enabled, Cartesian mode's FFTs serve normal
/// and cg.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_cartesian(
    plan: *mut horecon_plan,
    mask: *const u8,
) -> horecon_status {
    guard("horecon_set_cartesian", || {
        let p = plan_mut(plan)?;
        let mask = read("mask", mask, p.sizes().voxels)?;
        p.set_cartesian(&mask)
    })
}
