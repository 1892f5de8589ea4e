//! The C API of the Toeplitz normal operator (issue 5 §2).

use super::{guard, horecon_plan, horecon_status, plan_mut};

/// Enables (enable ≠ 0) or disables (enable = 0) the Toeplitz normal
/// operator used by horecon_normal and horecon_cg: EᴴWE through FFTs of a
/// grid of 2n cells per axis of n > 1 voxels, or of the next fast FFT length
/// (50 → 108 cells, not 100), with precomputed kernels,
/// EᴴWE x = Σ_c conj(S_c)·crop(IFFT(FFT(T)·FFT(pad(S_c·x)))),
/// T(Δ) = Σ_j w_j·exp(−i k_j·Δr). Forward and adjoint stay exact.
///
/// Valid for a phase linear in position (horecon_set_trajectory, or
/// horecon_set_solid_harmonics with all terms above order 1 zero; the k0
/// term cancels) on voxels forming a lattice (as horecon_set_grid_positions
/// makes). The kernels T (of every segment pair) are one batched type-1
/// non-uniform FFT (as horecon_nufft_create, on the plan's backend) at
/// relative tolerance 1e-7 in float64 arithmetic for ACCURATE plans, 1e-4
/// in float32 for FAST, 1e-12 in float64 for DOUBLE: far inside each
/// precision's bound, so without off-resonance the result matches the exact
/// normal operator to the precision's accuracy (≤ 1e-5 relative for
/// ACCURATE, ≤ 1e-3 FAST, ≤ 1e-7 DOUBLE). With off-resonance, where the
/// time segmentation below sets the error (bound 1e-3), ACCURATE plans
/// compute the kernels to 1e-5 in float32 arithmetic.
///
/// With off-resonance, exp(iω_n t_j) is interpolated by time segmentation
/// (Fessler et al., IEEE TSP 2005): exp(iδ_n t) ≈ Σ_l a_l(t)·exp(iδ_n τ_l),
/// L = time_segments segment times τ_l uniform over [t_min, t_max], a_l the
/// least-squares interpolator over the histogram of δ = ω − centre of the
/// ω range. time_segments = 0 chooses the fewest segments (≤ 64) whose
/// measured interpolation error is ≤ 2e-4, which keeps the normal operator's
/// relative error ≤ 1e-3 (the stated bound); time_segments is ignored
/// without off-resonance. It costs L forward and L inverse FFTs per coil and
/// L(L+1)/2 kernels. On the CPU the kernels of the segment pairs come from
/// r < L(L+1)/2 transforms where the pairs' products conj(a_l)·a_l' span
/// fewer functions of time: the r right singular vectors that keep all but
/// a tenth of the tolerance above (checked on 512 samples; otherwise one
/// transform per pair).
///
/// The model is checked when horecon_normal or horecon_cg next runs (so this
/// may be called before the model is set, and a model changed later is
/// checked again): a higher-order phase, a user basis, voxels off a lattice,
/// or an off-resonance spread needing more than 64 segments then give
/// HORECON_ERR_INVALID_ARGUMENT naming the reason. CUDA plans use cuFFT
/// (libcufft.so, .so.13 or .so.12; without it HORECON_ERR_BACKEND_UNAVAILABLE).
/// time_segments < 0 gives HORECON_ERR_INVALID_ARGUMENT.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_toeplitz(
    plan: *mut horecon_plan,
    enable: i32,
    time_segments: i32,
) -> horecon_status {
    guard("horecon_set_toeplitz", || {
        plan_mut(plan)?.set_toeplitz(enable != 0, time_segments)
    })
}
