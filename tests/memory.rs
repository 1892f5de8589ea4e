//! `horecon_plan_memory` (`Plan::memory`) against what the calls really
//! allocate: a counting global allocator (this test binary's) records the
//! peak of live heap bytes during forward, adjoint, normal, cg and the
//! Toeplitz set-up on random problems (fresh plans, so the one-time set-up
//! is included, and again with the operator built). The host estimate must
//! bound that peak from above and be at most 4× it (within [`POOL_SLACK`]
//! and [`RATIO_FLOOR`]).

mod common;

use common::{lattice_problem, Problem, Rng};
use horecon::ffi::*;
use horecon::plan::Call;
use horecon::Complex32;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// Counts the live bytes of every allocation and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grown(bytes: usize) {
    let live = LIVE.fetch_add(bytes, SeqCst) + bytes;
    PEAK.fetch_max(live, SeqCst);
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grown(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grown(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        System.dealloc(p, layout);
        LIVE.fetch_sub(layout.size(), SeqCst);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = System.realloc(p, layout, new_size);
        if !q.is_null() {
            if new_size >= layout.size() {
                grown(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, SeqCst);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak of live heap bytes during `f` above those live before it.
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.load(SeqCst);
    PEAK.store(base, SeqCst);
    let r = f();
    (r, PEAK.load(SeqCst).saturating_sub(base))
}

extern "C" {
    // src/ffi/toeplitz.rs is not re-exported by horecon::ffi: the symbol is.
    fn horecon_set_toeplitz(plan: *mut std::ffi::c_void, enable: i32, time_segments: i32) -> i32;
}

/// How far above the measured peak the estimate may be.
const MAX_RATIO: f64 = 4.0;

/// What the thread pool's own bookkeeping may add to a measured peak: the
/// counting allocator sees every thread, and rayon's workers grow their job
/// queues during a call (2–8 KB over the estimate, 1 run in 10, before this
/// allowance); those are not the library's buffers, which the estimate counts.
const POOL_SLACK: usize = 16 << 10;

/// The 4× bound applies where the estimate exceeds the peak by more than
/// this: fixed costs (tables, per-thread buffers) dominate problems whose
/// calls need a few kilobytes (e.g. an estimate of 29 KB for a 4.7 KB peak).
const RATIO_FLOOR: usize = 64 << 10;

struct Tally {
    checked: usize,
    lowest: f64,
    highest: f64,
}

/// A plan of `problem` made through the C API (the estimate is the C API's).
fn c_plan(problem: &Problem, options: &horecon_options) -> *mut horecon_plan {
    let [nx, ny, nz] = problem.dims.map(|d| d as i64);
    let mut plan = std::ptr::null_mut();
    let c = |s: i32| assert_eq!(s, 0, "{}", last_error());
    // SAFETY: every array has the length the plan's sizes give.
    unsafe {
        c(horecon_plan_create(
            options,
            nx,
            ny,
            nz,
            problem.coils as i64,
            problem.samples as i64,
            &mut plan,
        ));
        c(horecon_set_positions(plan, problem.positions.as_ptr()));
        let terms = problem.terms as i32;
        c(match &problem.user_basis {
            Some(h) => horecon_set_basis(plan, terms, h.as_ptr(), problem.coefficients.as_ptr()),
            None => horecon_set_solid_harmonics(plan, terms, problem.coefficients.as_ptr()),
        });
        if let Some((w, t)) = &problem.off_resonance {
            c(horecon_set_off_resonance(plan, w.as_ptr(), t.as_ptr()));
        }
        if let Some(s) = &problem.sensitivities {
            c(horecon_set_sensitivities(
                plan,
                s.as_ptr() as *const horecon_c32,
            ));
        }
    }
    plan
}

fn last_error() -> String {
    // SAFETY: a NUL-terminated thread-local string.
    unsafe { std::ffi::CStr::from_ptr(horecon_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Runs `call` on `plan` through the C API and checks its estimate (asked
/// just before) against the peak of live heap bytes during the call.
fn check(
    tally: &mut Tally,
    what: &str,
    plan: *mut horecon_plan,
    call: Call,
    problem: &Problem,
    rng: &mut Rng,
    strict: bool,
) {
    let (mut host, mut device) = (0i64, 0i64);
    // SAFETY: a live plan, valid outputs.
    let status = unsafe { horecon_plan_memory(plan, call as i32, &mut host, &mut device) };
    assert_eq!(status, 0, "{what}: {}", last_error());
    let estimate = host as usize;
    let (n, ml) = (problem.voxels(), problem.samples * problem.coils);
    let image = rng.complex(n);
    let data = rng.complex(ml);
    let mut out_image = vec![Complex32::default(); n];
    let mut out_data = vec![Complex32::default(); ml];
    let mut cg = std::mem::MaybeUninit::<horecon_cg_options>::uninit();
    // SAFETY: fills the struct.
    let mut cg = unsafe {
        horecon_default_cg_options(cg.as_mut_ptr());
        cg.assume_init()
    };
    cg.max_iterations = 3;
    cg.tolerance = 0.0;
    let c32 = |v: &[Complex32]| v.as_ptr() as *const horecon_c32;
    // SAFETY: arrays of the plan's sizes (horecon_c32 is Complex32's layout).
    let mut run = || unsafe {
        match call {
            Call::Forward => horecon_forward(plan, c32(&image), out_data.as_mut_ptr() as *mut _),
            Call::Adjoint => horecon_adjoint(plan, c32(&data), out_image.as_mut_ptr() as *mut _),
            Call::Normal => horecon_normal(plan, c32(&image), out_image.as_mut_ptr() as *mut _),
            Call::Cg => horecon_cg(
                plan,
                c32(&data),
                &cg,
                out_image.as_mut_ptr() as *mut _,
                std::ptr::null_mut(),
            ),
            other => panic!("not measured here: {other:?}"),
        }
    };
    // Frees by other threads during a call (memory the allocator's users
    // defer, like rayon's queues) can only lower a measured peak: a call
    // whose operator is built is measured thrice and its largest peak kept.
    let repeats = if what.ends_with("built") { 3 } else { 1 };
    let mut peak = 0;
    for _ in 0..repeats {
        let (status, p) = peak_of(&mut run);
        assert_eq!(status, 0, "{what}: {call:?}: {}", last_error());
        peak = peak.max(p);
    }
    let ratio = estimate as f64 / peak.max(1) as f64;
    eprintln!(
        "{what}: {call:?} N {n} M {} L {} terms {} B0 {}: estimate {estimate} B, peak {peak} B, \
         ratio {ratio:.2}",
        problem.samples,
        problem.coils,
        problem.terms,
        problem.off_resonance.is_some()
    );
    if !strict {
        return;
    }
    assert!(
        estimate + POOL_SLACK >= peak,
        "{what}: {call:?} needs {peak} bytes but the estimate is {estimate}"
    );
    assert!(
        ratio <= MAX_RATIO || estimate - peak <= RATIO_FLOOR,
        "{what}: {call:?} estimate {estimate} is {ratio:.2}x the peak {peak} (at most {MAX_RATIO})"
    );
    tally.checked += 1;
    tally.lowest = tally.lowest.min(ratio);
    tally.highest = tally.highest.max(ratio);
}

fn options(rng: &mut Rng) -> horecon_options {
    let mut o = std::mem::MaybeUninit::<horecon_options>::uninit();
    // SAFETY: fills the struct.
    let mut o = unsafe {
        horecon_default_options(o.as_mut_ptr());
        o.assume_init()
    };
    o.backend = HORECON_BACKEND_CPU;
    o.num_threads = rng.int(1, 3) as i32;
    o.precision = rng.int(0, 2) as i32;
    o
}

/// Checks `call` on a fresh `plan` (the call builds the operator), then again
/// (built), and destroys the plan.
fn set_up_then_built(
    tally: &mut Tally,
    what: &str,
    plan: *mut horecon_plan,
    call: Call,
    problem: &Problem,
    rng: &mut Rng,
) {
    check(
        tally,
        &format!("{what}, set-up"),
        plan,
        call,
        problem,
        rng,
        true,
    );
    check(
        tally,
        &format!("{what}, built"),
        plan,
        call,
        problem,
        rng,
        true,
    );
    destroy(plan);
}

fn destroy(plan: *mut horecon_plan) {
    // SAFETY: a plan made by c_plan, destroyed once.
    assert_eq!(unsafe { horecon_plan_destroy(plan) }, 0);
}

/// One test (the counters are process-wide: no other test may run beside it).
#[test]
fn estimates_bound_the_peak_within_4x() {
    let mut rng = Rng::fresh("estimates_bound_the_peak_within_4x");
    let mut tally = Tally {
        checked: 0,
        lowest: f64::INFINITY,
        highest: 0.0,
    };
    // The process's one-time set-up (thread-locals, lazy tables) is no call's.
    let warm_up = Problem::random(&mut rng, 64, 64, 1.0);
    let plan = c_plan(&warm_up, &options(&mut rng));
    for call in [Call::Forward, Call::Adjoint, Call::Normal, Call::Cg] {
        check(&mut tally, "warm-up", plan, call, &warm_up, &mut rng, false);
    }
    destroy(plan);
    for case in 0..10 {
        // Not tiny: a call of a few kilobytes is all fixed overhead.
        let problem = loop {
            let p = Problem::random(&mut rng, 1500, 1500, 4.0);
            if p.voxels() >= 64 && p.samples >= 64 {
                break p;
            }
        };
        let opts = options(&mut rng);
        for call in [Call::Forward, Call::Adjoint, Call::Normal, Call::Cg] {
            let what = format!(
                "case {case} (precision {}, {} threads)",
                opts.precision, opts.num_threads
            );
            let plan = c_plan(&problem, &opts);
            set_up_then_built(&mut tally, &what, plan, call, &problem, &mut rng);
        }
    }
    for case in 0..8 {
        let nz = if rng.uniform() < 0.3 {
            rng.int(2, 4)
        } else {
            1
        };
        let dims = [rng.int(12, 48), rng.int(12, 48), nz];
        let samples = rng.int(100, 3000);
        let coils = rng.int(1, 4);
        let omega = (rng.uniform() < 0.6).then_some((150.0, 0.01));
        let problem = lattice_problem(&mut rng, dims, coils, samples, 4, omega);
        let opts = options(&mut rng);
        let segments = if rng.uniform() < 0.5 {
            0
        } else {
            rng.int(1, 6)
        };
        for call in [Call::Normal, Call::Cg] {
            let what = format!(
                "Toeplitz case {case} (precision {}, {} threads, {segments} segments)",
                opts.precision, opts.num_threads
            );
            let plan = c_plan(&problem, &opts);
            // SAFETY: a live plan.
            assert_eq!(
                unsafe { horecon_set_toeplitz(plan.cast(), 1, segments as i32) },
                0
            );
            set_up_then_built(&mut tally, &what, plan, call, &problem, &mut rng);
        }
    }
    eprintln!(
        "{} estimates checked: estimate / peak from {:.2} to {:.2}",
        tally.checked, tally.lowest, tally.highest
    );
}
