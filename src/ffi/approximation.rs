//! The C API of the fast path (issue 17): the approximation tolerance and
//! what the plan made of it.

use super::{check_struct_size, guard, horecon_plan, horecon_status, non_null, plan_mut, plan_ref};

/// Length of `horecon_approximation_info.reason`, terminating NUL included.
pub const HORECON_APPROXIMATION_REASON_LENGTH: usize = 160;

/// What the plan does with its approximation tolerance; set `struct_size`
/// to sizeof(horecon_approximation_info) before horecon_get_approximation_info.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct horecon_approximation_info {
    /// = sizeof(horecon_approximation_info).
    pub struct_size: u32,
    /// 1 when E, Eᴴ, EᴴWE and CG use the fast path, 0 when they are exact.
    pub active: i32,
    /// K, the terms a_l(t)·b_l(r) of the separable expansion (0 when inactive).
    pub rank: i32,
    /// The larger of the relative RMS errors of E x and Eᴴ d against the exact
    /// operator, measured on random probes (256 samples, all coils, and 256
    /// voxels; up to 8 probes each way on small plans) when the plan was
    /// prepared; 0 when inactive.
    pub estimated_error: f64,
    /// Why active = 0 (e.g. "voxels are not on a lattice: ..."), else "";
    /// NUL-terminated, cut to fit.
    pub reason: [std::os::raw::c_char; HORECON_APPROXIMATION_REASON_LENGTH],
}

/// Sets the approximation tolerance of E, Eᴴ, Fᴴd, EᴴWE and CG:
/// 0 (the default) = exact direct sums; a tolerance in [1e-5, 0.1] = the
/// fast path (FAST-PATH.md): the phase is split into its part linear in the
/// voxels' lattice coordinates and a residual ψ (higher orders, a user
/// basis's non-linear part, ω·t), exp(iψ) is expanded in K separable terms,
/// E ρ = Σ_l a_l(t)·NUFFT(b_l·S_c·ρ), and Eᴴ is its exact adjoint, so CG
/// solves a consistent system. K is the smallest rank whose expansion error
/// is within 0.45·tolerance on the operator (not on the factors); the NUFFTs
/// get 0.9·tolerance (their RMS error stays 3–5× below what they are asked);
/// plans with min(N, M·L) < 4096 outputs aim at a third of both, where 64
/// terms reach that. The relative RMS error of E x and Eᴴ d against the exact
/// operator is then ≤ tolerance for typical images and data, and is measured
/// when the plan is next prepared (horecon_get_approximation_info). A phase
/// linear in position (a trajectory, k0 allowed) gives K = 1: a plain NUFFT.
///
/// Needs voxels on a lattice (any orientation, any order, a masked subset of
/// one; positions within 1e-3 of a voxel size of the least-squares lattice
/// through them, e.g. rounded through float32); otherwise, and in Cartesian mode, the operators stay exact and the
/// info says why. Every change of the model rebuilds the expansion when an
/// operator next runs. Both backends (CUDA plans compute the NUFFTs where the
/// CUDA NUFFT executor is available, else on the CPU).
/// Negative, NaN or infinite tolerances, and tolerances outside
/// {0} ∪ [1e-5, 0.1], give HORECON_ERR_INVALID_ARGUMENT.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_approximation(
    plan: *mut horecon_plan,
    tolerance: f64,
) -> horecon_status {
    guard("horecon_set_approximation", || {
        plan_mut(plan)?.set_approximation(tolerance)
    })
}

/// Reports whether the fast path is in use, its rank K, its measured error
/// and, when inactive, why. Prepares the plan if needed (builds the
/// expansion and measures its error: the cost of one fast E and Eᴴ, up to 8
/// each on small plans, plus 256 exact rows and voxels), so the model must be complete
/// (HORECON_ERR_INCOMPLETE_PLAN otherwise); at tolerance 0 (exact) nothing
/// is prepared, and any plan reports active = 0 with that reason. `info->struct_size` must be
/// sizeof(horecon_approximation_info) (else HORECON_ERR_INVALID_ARGUMENT).
/// `info` is written only on success.
#[no_mangle]
pub unsafe extern "C" fn horecon_get_approximation_info(
    plan: *const horecon_plan,
    info: *mut horecon_approximation_info,
) -> horecon_status {
    guard("horecon_get_approximation_info", || {
        let p = plan_ref(plan)?;
        non_null("info", info)?;
        let size = std::ptr::addr_of!((*info).struct_size).read();
        check_struct_size(
            "info",
            size,
            std::mem::size_of::<horecon_approximation_info>(),
        )?;
        let a = p.approximation_info()?;
        let mut reason = [0 as std::os::raw::c_char; HORECON_APPROXIMATION_REASON_LENGTH];
        let bytes = a.reason.as_bytes();
        let mut len = bytes.len().min(HORECON_APPROXIMATION_REASON_LENGTH - 1);
        while len > 0 && !a.reason.is_char_boundary(len) {
            len -= 1;
        }
        for (r, &b) in reason.iter_mut().zip(&bytes[..len]) {
            *r = b as std::os::raw::c_char;
        }
        *info = horecon_approximation_info {
            struct_size: size,
            active: i32::from(a.active),
            rank: i32::try_from(a.rank).unwrap_or(i32::MAX),
            estimated_error: a.estimated_error,
            reason,
        };
        Ok(())
    })
}
