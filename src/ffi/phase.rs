//! The C API's query of the plan's phase model, for arrays shaped like it.

use super::{guard, horecon_plan, horecon_status, non_null, plan_ref};

/// B, the columns of the plan's phase-model coefficients (M×B): the terms of
/// horecon_set_solid_harmonics or horecon_set_basis, the dimensions of
/// horecon_set_trajectory, 3 in Cartesian mode; 0 when none is set. The
/// shape `coefficients` of horecon_estimate_delay takes (bindings check their
/// arrays with it: the C functions read M×B values).
#[no_mangle]
pub unsafe extern "C" fn horecon_plan_phase_terms(
    plan: *const horecon_plan,
    terms: *mut i32,
) -> horecon_status {
    guard("horecon_plan_phase_terms", || {
        let p = plan_ref(plan)?;
        non_null("terms", terms)?;
        *terms = p.model().phase.as_ref().map_or(0, |phase| phase.terms) as i32;
        Ok(())
    })
}
