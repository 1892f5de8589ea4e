//! The guard around every exported body: catches panics (they must never
//! unwind into C, MATLAB or Python), maps errors to status codes and keeps
//! the thread-local message for `horecon_last_error`.

use crate::error::{Error, Result, Status};
use std::cell::RefCell;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Guarded calls in flight in this process: while any runs, panics stay quiet
/// (their message is reported through `horecon_last_error` instead).
static IN_GUARD: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

fn install_quiet_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_GUARD.load(Ordering::SeqCst) == 0 {
                previous(info);
            }
        }));
    });
}

pub fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

pub fn last_error_ptr() -> *const libc::c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs `body`, returning its status; on failure records the message.
pub fn guard(function: &str, body: impl FnOnce() -> Result<()>) -> i32 {
    install_quiet_panic_hook();
    IN_GUARD.fetch_add(1, Ordering::SeqCst);
    let outcome = catch_unwind(AssertUnwindSafe(body));
    IN_GUARD.fetch_sub(1, Ordering::SeqCst);
    let error = match outcome {
        Ok(Ok(())) => {
            set_last_error("");
            return Status::Ok as i32;
        }
        Ok(Err(e)) => e,
        Err(payload) => Error::internal(format!(
            "internal error (please report): {}",
            panic_message(&*payload)
        )),
    };
    set_last_error(&format!("{function}: {}", error.message));
    error.status as i32
}

/// For exported functions that return no status: a panic yields `fallback`.
pub fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    install_quiet_panic_hook();
    IN_GUARD.fetch_add(1, Ordering::SeqCst);
    let outcome = catch_unwind(AssertUnwindSafe(body));
    IN_GUARD.fetch_sub(1, Ordering::SeqCst);
    outcome.unwrap_or(fallback)
}
