//! A progress line for the examples' long calls: the plan-level progress
//! callback (`horecon_set_progress`, [`horecon::Plan::set_progress`])
//! drawing an indicatif bar on stderr, `forward [=====>    ] 42 %`
//! (hidden when stderr is not a terminal).

use horecon::progress::Callback;
use indicatif::{ProgressBar, ProgressStyle};
use std::ffi::c_void;

/// A progress line: one bar, relabelled for each call.
pub struct ProgressLine {
    bar: ProgressBar,
}

/// `progress(user, fraction)` for a `&ProgressLine` user pointer.
unsafe extern "C" fn draw(user: *mut c_void, fraction: f64) -> i32 {
    // SAFETY: `user` is the line given to `ProgressLine::callback`, which
    // outlives the plan's calls (the caller's promise there).
    let line = unsafe { &*(user as *const ProgressLine) };
    line.bar
        .set_position((1000.0 * fraction.clamp(0.0, 1.0)).round() as u64);
    0
}

impl ProgressLine {
    pub fn new() -> ProgressLine {
        let bar = ProgressBar::new(1000);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>8} [{elapsed_precise}] {wide_bar} {percent:>3} %")
        {
            bar.set_style(style);
        }
        ProgressLine { bar }
    }

    /// The callback to give the plan (`plan.set_progress(Some(...))`): the
    /// line must outlive every call the plan makes with it.
    pub fn callback(&self) -> Callback {
        Callback {
            function: draw,
            user: self as *const ProgressLine as *mut c_void,
        }
    }

    /// Starts the line of the call `label`.
    pub fn start(&self, label: &'static str) {
        self.bar.reset();
        self.bar.set_message(label);
    }

    /// Clears the line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
