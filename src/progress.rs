//! Progress and cancellation of long calls (issue 11).
//!
//! Every long call (operators, CG, Toeplitz and Cartesian set-up, Fᴴd and Q,
//! gridding, the simulation toolkit) is a [`Work`]: it checks between chunks
//! whether it was cancelled — by [`Control::cancel`] (`horecon_cancel`, from
//! any thread) or by the progress callback returning non-zero — and reports
//! the fraction done. A cancelled call returns `Cancelled` and leaves the
//! plan as it was (caches half built are dropped, never kept).
//!
//! The callback `progress(user, fraction)` runs only on the thread that made
//! the call (MATLAB's MEX API, Python and thread-locals need that): the
//! chunks that run in the plan's thread pool only record the fraction, and
//! the calling thread, while it waits for the pool ([`Progress::install`]),
//! calls the callback every [`INTERVAL`] with the latest fraction.
//!
//! Fractions nest: [`Progress::part`] maps [0, 1] of a step onto its share of
//! the whole call (CG: iteration i of n is [i/n, (i+1)/n]; a normal
//! operator: forward, then adjoint). Code reads the current span with
//! [`Progress::current`] on the thread that runs the step and hands it to its
//! parallel chunks explicitly (thread-locals do not follow rayon's tasks).

use crate::error::{Error, Result, Status};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The shortest time between two calls of the progress callback.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// The C callback `int (*)(void *user, double fraction)`: non-zero cancels.
pub type CallbackFn = unsafe extern "C" fn(user: *mut c_void, fraction: f64) -> i32;

/// A progress callback with its user pointer.
#[derive(Clone, Copy, Debug)]
pub struct Callback {
    pub function: CallbackFn,
    pub user: *mut c_void,
}

// SAFETY: the callback is only ever called on the thread that made the call
// (`Work::caller`); the pointer is only carried across threads, never used there.
unsafe impl Send for Callback {}
unsafe impl Sync for Callback {}

/// What a plan shares with `horecon_cancel`: a cancel generation. A call
/// remembers the generation it started in and is cancelled once it moves,
/// so a cancel reaches every call running at that moment and no later one.
#[derive(Debug, Default)]
pub struct Control {
    generation: AtomicU64,
}

impl Control {
    /// Cancels every call running on this plan now (callable from any thread).
    pub fn cancel(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// One long call: its cancel state, its callback and the fraction done.
pub struct Work {
    what: &'static str,
    control: Arc<Control>,
    generation: u64,
    callback: Option<Callback>,
    caller: ThreadId,
    started: Instant,
    /// Set once the call is cancelled (by either route): chunks stop.
    stopped: AtomicBool,
    /// By the callback (else by `horecon_cancel`): for the message.
    by_callback: AtomicBool,
    /// The latest fraction reported (f64 bits).
    fraction: AtomicU64,
    /// Nanoseconds after `started` of the last callback (u64::MAX: none yet).
    last_callback: AtomicU64,
    /// Whether the caller is waiting in [`Progress::install`] (it calls the callback then).
    monitored: AtomicBool,
}

thread_local! {
    /// The span of the step this thread runs, if it runs one.
    static CURRENT: RefCell<Option<Progress>> = const { RefCell::new(None) };
    /// Set while this thread is inside a progress callback (no nested callbacks).
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

impl Work {
    /// A call named `what` (for messages) on a plan with `control`; `callback` may be `None`.
    pub fn new(what: &'static str, control: Arc<Control>, callback: Option<Callback>) -> Arc<Work> {
        Arc::new(Work {
            what,
            generation: control.generation(),
            control,
            callback,
            caller: std::thread::current().id(),
            started: Instant::now(),
            stopped: AtomicBool::new(false),
            by_callback: AtomicBool::new(false),
            fraction: AtomicU64::new(0f64.to_bits()),
            last_callback: AtomicU64::new(u64::MAX),
            monitored: AtomicBool::new(false),
        })
    }

    fn cancelled_error(&self) -> Error {
        let fraction = f64::from_bits(self.fraction.load(Ordering::Relaxed));
        let by = if self.by_callback.load(Ordering::Relaxed) {
            "the progress callback"
        } else {
            "horecon_cancel"
        };
        Error::new(
            Status::Cancelled,
            format!(
                "{} was cancelled by {by} at {:.0} % done; the plan is unchanged and usable",
                self.what,
                100.0 * fraction.clamp(0.0, 1.0)
            ),
        )
    }

    /// Whether the call must stop (checks `horecon_cancel` too).
    fn is_stopped(&self) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return true;
        }
        if self.control.generation() != self.generation {
            self.stopped.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Calls the callback with the latest fraction (on the caller's thread
    /// only, not from inside another callback); marks the call stopped if it
    /// returns non-zero.
    fn call_back(&self) {
        let Some(cb) = self.callback else { return };
        if std::thread::current().id() != self.caller || IN_CALLBACK.with(Cell::get) {
            return;
        }
        let now = self.started.elapsed().as_nanos().min(u64::MAX as u128 - 1) as u64;
        self.last_callback.store(now, Ordering::Relaxed);
        let fraction = f64::from_bits(self.fraction.load(Ordering::Relaxed)).clamp(0.0, 1.0);
        IN_CALLBACK.with(|c| c.set(true));
        // SAFETY: the caller promised the function may be called with its user pointer.
        let stop = unsafe { (cb.function)(cb.user, fraction) } != 0;
        IN_CALLBACK.with(|c| c.set(false));
        if stop {
            self.by_callback.store(true, Ordering::Relaxed);
            self.stopped.store(true, Ordering::Relaxed);
        }
    }

    fn callback_due(&self) -> bool {
        let last = self.last_callback.load(Ordering::Relaxed);
        last == u64::MAX
            || self.started.elapsed().as_nanos() as u64 >= last + INTERVAL.as_nanos() as u64
    }

    /// Records `fraction` (of the whole call), calls the callback when due
    /// (caller's thread only) and fails with `Cancelled` once cancelled.
    fn check(&self, fraction: f64) -> Result<()> {
        if fraction.is_finite() {
            // Concurrent chunks finish out of order: keep the largest.
            self.fraction
                .fetch_max(fraction.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        }
        if !self.monitored.load(Ordering::Relaxed) && self.callback_due() {
            self.call_back();
        }
        if self.is_stopped() {
            return Err(self.cancelled_error());
        }
        Ok(())
    }
}

/// A span [lo, hi] of a call's progress (or no call: checks then do nothing).
#[derive(Clone)]
pub struct Progress {
    work: Option<Arc<Work>>,
    lo: f64,
    hi: f64,
}

impl Progress {
    /// No call to report to: checks always succeed.
    pub fn none() -> Progress {
        Progress {
            work: None,
            lo: 0.0,
            hi: 1.0,
        }
    }

    /// The whole of `work`.
    pub fn of(work: &Arc<Work>) -> Progress {
        Progress {
            work: Some(work.clone()),
            lo: 0.0,
            hi: 1.0,
        }
    }

    /// The span of the step this thread runs ([`Progress::none`] outside any call).
    pub fn current() -> Progress {
        CURRENT
            .with(|c| c.borrow().clone())
            .unwrap_or_else(Progress::none)
    }

    /// The share [a, b] (fractions of this span) of this span.
    pub fn part(&self, a: f64, b: f64) -> Progress {
        let width = self.hi - self.lo;
        Progress {
            work: self.work.clone(),
            lo: self.lo + width * a.clamp(0.0, 1.0),
            hi: self.lo + width * b.clamp(0.0, 1.0),
        }
    }

    /// Step `i` of `n` equal steps of this span.
    pub fn step(&self, i: usize, n: usize) -> Progress {
        let n = n.max(1) as f64;
        self.part(i as f64 / n, (i as f64 + 1.0) / n)
    }

    /// Reports `fraction` of this span done; `Cancelled` once the call is cancelled.
    pub fn check(&self, fraction: f64) -> Result<()> {
        match &self.work {
            None => Ok(()),
            Some(w) => w.check(self.lo + (self.hi - self.lo) * fraction),
        }
    }

    /// Whether the call was cancelled (for loops that cannot return an error at once).
    pub fn is_cancelled(&self) -> bool {
        self.work.as_ref().is_some_and(|w| w.is_stopped())
    }

    /// Runs `f` with this span as the thread's current one (restored after).
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Progress>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }

    /// `pool.install(f)` with this span current inside `f`. When called on
    /// the caller's thread of a call with a callback, that thread waits for
    /// `f` (run in the pool) and meanwhile calls the callback every
    /// [`INTERVAL`] with the latest fraction; if the callback asks to stop,
    /// the chunks in `f` see it at their next check.
    pub fn install<R: Send>(&self, pool: &rayon::ThreadPool, f: impl FnOnce() -> R + Send) -> R {
        let monitor = self.work.as_ref().filter(|w| {
            w.callback.is_some()
                && std::thread::current().id() == w.caller
                && !IN_CALLBACK.with(Cell::get)
                && !w.monitored.load(Ordering::Relaxed)
        });
        let Some(work) = monitor else {
            return pool.install(|| self.enter(f));
        };
        let done = (Mutex::new(false), Condvar::new());
        let mut result = None;
        work.monitored.store(true, Ordering::Relaxed);
        pool.in_place_scope(|scope| {
            let (slot, done) = (&mut result, &done);
            scope.spawn(move |_| {
                // Signals completion also when `f` panics (the scope re-raises it).
                struct Signal<'a>(&'a (Mutex<bool>, Condvar));
                impl Drop for Signal<'_> {
                    fn drop(&mut self) {
                        *self.0 .0.lock().unwrap_or_else(|e| e.into_inner()) = true;
                        self.0 .1.notify_all();
                    }
                }
                let _signal = Signal(done);
                *slot = Some(self.enter(f));
            });
            let mut finished = done.0.lock().unwrap_or_else(|e| e.into_inner());
            while !*finished {
                finished = done
                    .1
                    .wait_timeout(finished, INTERVAL)
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|e| e.into_inner().0);
                if !*finished {
                    drop(finished);
                    if !work.is_stopped() {
                        work.call_back();
                    }
                    finished = done.0.lock().unwrap_or_else(|e| e.into_inner());
                }
            }
        });
        work.monitored.store(false, Ordering::Relaxed);
        // The scope has joined the job: it ran to the end (a panic was re-raised above).
        result.expect("the scope ran the job")
    }
}

/// Runs `f` as the call `what`: cancellable through `control`, reporting to
/// `callback` (on this thread). The callback is called once at the start
/// (fraction 0: a way to cancel before any work) and then as described in
/// the module docs.
pub fn run<R>(
    what: &'static str,
    control: &Arc<Control>,
    callback: Option<Callback>,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let work = Work::new(what, control.clone(), callback);
    let progress = Progress::of(&work);
    progress.check(0.0)?;
    progress.enter(f)
}

/// [`Progress::current`]`.check(fraction)`: for sequential loops.
pub fn check(fraction: f64) -> Result<()> {
    Progress::current().check(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    unsafe extern "C" fn count_and_stop_at(user: *mut c_void, fraction: f64) -> i32 {
        let calls = &*(user as *const (AtomicUsize, f64, Mutex<Vec<f64>>));
        calls.0.fetch_add(1, Ordering::SeqCst);
        calls.2.lock().unwrap().push(fraction);
        i32::from(fraction >= calls.1)
    }

    #[test]
    fn cancel_reaches_running_calls_only() {
        let control = Arc::new(Control::default());
        let before = Work::new("test", control.clone(), None);
        control.cancel();
        let after = Work::new("test", control.clone(), None);
        assert_eq!(
            Progress::of(&before).check(0.5).unwrap_err().status,
            Status::Cancelled
        );
        assert!(Progress::of(&after).check(0.5).is_ok());
    }

    #[test]
    fn callback_stops_a_pool_job_and_sees_fractions() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let state = (AtomicUsize::new(0), 0.3, Mutex::new(Vec::new()));
        let callback = Callback {
            function: count_and_stop_at,
            user: &state as *const _ as *mut c_void,
        };
        let control = Arc::new(Control::default());
        let result = run("test", &control, Some(callback), || {
            let progress = Progress::current().part(0.0, 0.5);
            progress.install(&pool, || -> Result<()> {
                let inner = Progress::current();
                for i in 0..1000 {
                    inner.check(i as f64 / 1000.0)?;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(())
            })
        });
        let error = result.unwrap_err();
        assert_eq!(error.status, Status::Cancelled);
        assert!(
            error.message.contains("progress callback"),
            "{}",
            error.message
        );
        let seen = state.2.lock().unwrap();
        assert_eq!(seen[0], 0.0, "called once at the start");
        assert!(seen.len() >= 2);
        // The job reports within [0, 0.5]: the callback stops it at 0.3.
        assert!(seen.iter().all(|&f| (0.0..=0.5).contains(&f)), "{seen:?}");
        assert!(*seen.last().unwrap() >= 0.3);
    }
}
