//! Progress, cancellation and memory of long calls in the C API (issue 11):
//! `horecon_set_progress`, `horecon_cancel`, `horecon_sim_set_progress`,
//! `horecon_plan_memory`. The machinery is [`crate::progress`]; the
//! estimates [`crate::plan::Call`].

use super::{guard, horecon_plan, horecon_status, non_null, plan_mut, plan_ref};
use crate::error::{Error, Result};
use crate::plan::Call;
use crate::progress::{self, Callback, Control};
use once_cell::sync::Lazy;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

/// Progress callback of long calls: `fraction` of the call done, in [0, 1];
/// return non-zero to cancel the call (it then returns HORECON_ERR_CANCELLED).
pub type horecon_fraction_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, fraction: f64) -> i32>;

pub const HORECON_CALL_FORWARD: i32 = 0;
pub const HORECON_CALL_ADJOINT: i32 = 1;
pub const HORECON_CALL_NORMAL: i32 = 2;
pub const HORECON_CALL_CG: i32 = 3;
pub const HORECON_CALL_FHD: i32 = 4;
pub const HORECON_CALL_Q: i32 = 5;
pub const HORECON_CALL_GRIDDING: i32 = 6;

fn callback(function: horecon_fraction_fn, user: *mut c_void) -> Option<Callback> {
    function.map(|function| Callback { function, user })
}

/// Sets the progress callback of the plan's long calls (forward, adjoint,
/// normal, cg, fhd, q, gridding, and the Toeplitz / Cartesian set-up they
/// trigger): `progress(user, fraction)` runs on the thread that made the call
/// (never on a library thread), once at its start (fraction 0) and then at
/// most every 50 ms; returning non-zero cancels the call, which returns
/// HORECON_ERR_CANCELLED with its outputs untouched and the plan unchanged
/// and usable. Calls made from inside the callback do not call it again.
/// `progress` NULL removes it. A setter: not concurrently with other calls
/// on the plan.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_progress(
    plan: *mut horecon_plan,
    progress: horecon_fraction_fn,
    user: *mut c_void,
) -> horecon_status {
    guard("horecon_set_progress", || {
        plan_mut(plan)?.set_progress(callback(progress, user));
        Ok(())
    })
}

/// Cancels the calls running on `plan` now, from any thread (the thread
/// that runs them included, e.g. from a progress callback): each returns
/// HORECON_ERR_CANCELLED at its next check (between chunks of work, at
/// least every few tenths of a second), with its outputs untouched and the
/// plan unchanged and usable. Calls started after it are not affected. It
/// must not race horecon_plan_destroy of the same plan.
#[no_mangle]
pub unsafe extern "C" fn horecon_cancel(plan: *const horecon_plan) -> horecon_status {
    guard("horecon_cancel", || {
        let p = non_null("plan", plan)?;
        // Only the control: a setter on another thread may hold the plan itself.
        (*std::ptr::addr_of!((*p).control)).cancel();
        Ok(())
    })
}

thread_local! {
    /// The progress callback of the horecon_sim_* calls made on this thread.
    static SIM_PROGRESS: Cell<Option<Callback>> = const { Cell::new(None) };
}

/// The simulation toolkit's calls have no plan: they share one control
/// (nothing cancels it but their callback).
static SIM_CONTROL: Lazy<Arc<Control>> = Lazy::new(Arc::default);

/// Sets the progress callback of the horecon_sim_* calls made on the calling
/// thread (each thread has its own; NULL removes it): as for
/// horecon_set_progress, `progress(user, fraction)` runs on that thread at
/// the start and at most every 50 ms, and non-zero cancels the call
/// (HORECON_ERR_CANCELLED). To cancel from another thread, let the callback
/// return non-zero when a flag that thread sets is up.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_set_progress(
    progress: horecon_fraction_fn,
    user: *mut c_void,
) -> horecon_status {
    guard("horecon_sim_set_progress", || {
        SIM_PROGRESS.with(|p| p.set(callback(progress, user)));
        Ok(())
    })
}

/// Runs the toolkit call `what` as cancellable, reporting work.
pub(super) fn sim_call<R>(what: &'static str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    progress::run(what, &SIM_CONTROL, SIM_PROGRESS.with(Cell::get), f)
}

/// The memory the call `call` (HORECON_CALL_FORWARD, _ADJOINT, _NORMAL,
/// _CG, _FHD, _Q or _GRIDDING) on this plan needs at most, in bytes, asked
/// before running it: `*host_bytes` of host memory beyond the caller's
/// arrays, including the one-time set-up the call would trigger now (the
/// operator, Toeplitz kernels and time segmentation, the Cartesian and
/// gridding grids), and `*device_bytes` of GPU memory (0 on the CPU
/// backend; the resident model and vectors: the CUDA backend splits the rest
/// into chunks that fit). Needs the model the call needs (else
/// HORECON_ERR_INCOMPLETE_PLAN, or the argument error the call would give).
/// A call whose host estimate exceeds the memory the system can give
/// (MemAvailable + SwapFree) fails at once with HORECON_ERR_OUT_OF_MEMORY.
/// Either output may be NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_plan_memory(
    plan: *const horecon_plan,
    call: i32,
    host_bytes: *mut i64,
    device_bytes: *mut i64,
) -> horecon_status {
    guard("horecon_plan_memory", || {
        let p = plan_ref(plan)?;
        let call = Call::from_code(call).ok_or_else(|| {
            Error::invalid(format!(
                "call must be HORECON_CALL_FORWARD (0), _ADJOINT (1), _NORMAL (2), _CG (3), \
                 _FHD (4), _Q (5) or _GRIDDING (6), got {call}"
            ))
        })?;
        let estimate = p.memory(call)?;
        let clamp = |b: u64| b.min(i64::MAX as u64) as i64;
        if !host_bytes.is_null() {
            *host_bytes = clamp(estimate.host);
        }
        if !device_bytes.is_null() {
            *device_bytes = clamp(estimate.device);
        }
        Ok(())
    })
}
