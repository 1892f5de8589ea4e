//! Cancellation and progress of long calls (issue 11): the plan-level
//! progress callback (caller's thread, fractions in [0, 1] and growing,
//! non-zero cancels), `horecon_cancel` from another thread, a cancelled call
//! leaving its output untouched and the plan usable (caches half built are
//! not kept), and the argument errors that replaced internal ones.

mod common;

use common::Rng;
use horecon::progress::Callback;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Status};
use std::ffi::c_void;
use std::sync::Mutex;
use std::thread::ThreadId;

/// What a callback saw: (thread, fraction) per call; it stops at call `stop_at`.
struct Seen {
    calls: Mutex<Vec<(ThreadId, f64)>>,
    stop_at: usize,
}

unsafe extern "C" fn record(user: *mut c_void, fraction: f64) -> i32 {
    let seen = &*(user as *const Seen);
    let mut calls = seen.calls.lock().unwrap();
    calls.push((std::thread::current().id(), fraction));
    i32::from(calls.len() >= seen.stop_at)
}

fn callback(seen: &Seen) -> Callback {
    Callback {
        function: record,
        user: seen as *const Seen as *mut c_void,
    }
}

fn options() -> Options {
    Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    }
}

/// A 2D trajectory plan with `coils` coils and M samples of a random spiral-ish k.
fn trajectory_plan(rng: &mut Rng, n: usize, m: usize, coils: usize, omega: bool) -> Plan {
    let mut plan = Plan::new(options(), n as i64, n as i64, 1, coils as i64, m as i64).unwrap();
    plan.set_grid_positions([0.2, 0.2, 0.005], [0.0; 3])
        .unwrap();
    let kmax = std::f64::consts::PI * n as f64 / 0.2;
    let k: Vec<f64> = (0..2 * m).map(|_| rng.range(-kmax, kmax)).collect();
    plan.set_trajectory(2, &k).unwrap();
    if coils > 1 {
        plan.set_sensitivities(Some(&rng.complex(n * n * coils)))
            .unwrap();
    }
    if omega {
        let w: Vec<f64> = (0..n * n).map(|_| rng.range(-300.0, 300.0)).collect();
        let t: Vec<f64> = (0..m).map(|j| 0.02 * j as f64 / m as f64).collect();
        plan.set_off_resonance(Some((&w, &t))).unwrap();
    }
    plan
}

fn check_fractions(seen: &Seen) {
    let calls = seen.calls.lock().unwrap();
    let me = std::thread::current().id();
    assert!(calls.len() >= 2, "the callback ran {} times", calls.len());
    assert_eq!(calls[0].1, 0.0, "first call at the start");
    for w in calls.windows(2) {
        assert!(w[1].1 >= w[0].1, "fractions go down: {calls:?}");
    }
    assert!(calls
        .iter()
        .all(|&(t, f)| t == me && (0.0..=1.0).contains(&f)));
}

/// Runs `call` with a callback that stops at its second invocation, making
/// the problem larger until the call lasts long enough to be stopped (the
/// callback runs at most every 50 ms, so fast calls need the larger scales).
fn cancel_by_callback(
    name: &str,
    mut make: impl FnMut(usize) -> Plan,
    call: impl Fn(&Plan) -> horecon::Result<()>,
) -> Plan {
    for scale in [1, 4, 16, 64] {
        let mut plan = make(scale);
        let seen = Seen {
            calls: Mutex::new(Vec::new()),
            stop_at: 2,
        };
        plan.set_progress(Some(callback(&seen)));
        match call(&plan) {
            Err(e) => {
                assert_eq!(e.status, Status::Cancelled, "{name}: {e}");
                assert!(e.message.contains("progress callback"), "{}", e.message);
                check_fractions(&seen);
                plan.set_progress(None);
                return plan;
            }
            Ok(()) => eprintln!("{name}: finished before the second callback at scale {scale}"),
        }
    }
    panic!("{name} was never cancelled");
}

#[test]
fn forward_cancelled_by_its_callback_leaves_output_and_plan_intact() {
    let mut rng = Rng::fresh("forward_cancelled_by_its_callback");
    let n = 40;
    let image = rng.complex(n * n);
    let sentinel = Complex32::new(7.0, -7.0);
    let mut kept_m = 0;
    let plan = cancel_by_callback(
        "forward",
        |scale| {
            kept_m = 20000 * scale;
            trajectory_plan(&mut rng, n, kept_m, 2, false)
        },
        |plan| {
            let mut data = vec![sentinel; plan.sizes().samples * 2];
            let r = plan.forward(&image, &mut data);
            if r.is_err() {
                assert!(data.iter().all(|&d| d == sentinel), "output written");
            }
            r
        },
    );
    // Usable afterwards, and the same as the adjoint test of a fresh computation.
    let mut a = vec![Complex32::default(); kept_m * 2];
    plan.forward(&image, &mut a).unwrap();
    let y = rng.complex(kept_m * 2);
    let mut aty = vec![Complex32::default(); n * n];
    plan.adjoint(&y, &mut aty).unwrap();
    let lhs = common::inner(&a, &y);
    let rhs = common::inner(&image, &aty);
    assert!((lhs - rhs).norm() <= 1e-4 * lhs.norm(), "{lhs} vs {rhs}");
}

#[test]
fn toeplitz_set_up_cancelled_then_built_again() {
    let mut rng = Rng::fresh("toeplitz_set_up_cancelled_then_built_again");
    let n = 32;
    let x = rng.complex(n * n);
    let mut plan = cancel_by_callback(
        "Toeplitz normal",
        |scale| {
            let mut p = trajectory_plan(&mut rng, n, 6000 * scale, 1, true);
            p.set_toeplitz(true, 0).unwrap();
            p
        },
        |plan| {
            let mut y = vec![Complex32::default(); n * n];
            plan.normal(&x, &mut y)
        },
    );
    // The half-built kernels were dropped: the next normal builds them in full
    // and agrees with the exact normal operator to the segmentation's accuracy.
    let mut fast = vec![Complex32::default(); n * n];
    plan.normal(&x, &mut fast).unwrap();
    plan.set_toeplitz(false, 0).unwrap();
    let mut exact = vec![Complex32::default(); n * n];
    plan.normal(&x, &mut exact).unwrap();
    let err = common::rel_error(&fast, &common::to_c64(&exact));
    assert!(err < 5e-3, "Toeplitz after a cancelled set-up: {err:e}");
}

#[test]
fn cg_gridding_and_sim_report_and_cancel() {
    let mut rng = Rng::fresh("cg_gridding_and_sim_report_and_cancel");
    let n = 32;
    let sentinel = Complex32::new(3.0, 4.0);
    cancel_by_callback(
        "cg",
        |scale| trajectory_plan(&mut rng, n, 4000 * scale, 2, false),
        |plan| {
            let data = vec![Complex32::new(1.0, 0.0); plan.sizes().samples * 2];
            let mut image = vec![sentinel; n * n];
            let options = CgOptions {
                max_iterations: 200,
                tolerance: 0.0,
                ..CgOptions::default()
            };
            let r = plan.cg(&data, &options, &mut image).map(|_| ());
            if r.is_err() {
                assert!(image.iter().all(|&v| v == sentinel));
            }
            r
        },
    );
    cancel_by_callback(
        "gridding",
        |scale| trajectory_plan(&mut rng, 64 * scale.min(4), 20000 * scale, 1, false),
        |plan| {
            let data = vec![Complex32::new(1.0, 0.0); plan.sizes().samples];
            let mut image = vec![Complex32::default(); plan.sizes().voxels];
            plan.gridding(&data, None, &mut image)
        },
    );
}

#[test]
fn horecon_cancel_from_another_thread() {
    let mut rng = Rng::fresh("horecon_cancel_from_another_thread");
    let n = 48;
    let plan = trajectory_plan(&mut rng, n, 200_000, 4, false);
    let x = rng.complex(n * n);
    let started = std::time::Instant::now();
    let result = std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let mut y = vec![Complex32::default(); n * n];
            plan.normal(&x, &mut y)
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        plan.control().cancel();
        worker.join().unwrap()
    });
    let e = result.expect_err("a normal of ~4e9 pair-coils outlasts 0.3 s");
    assert_eq!(e.status, Status::Cancelled);
    assert!(e.message.contains("horecon_cancel"), "{}", e.message);
    assert!(
        started.elapsed().as_secs_f64() < 10.0,
        "cancel took {:?}",
        started.elapsed()
    );
    // A cancel before a call does not reach it.
    plan.control().cancel();
    let small = trajectory_plan(&mut rng, 8, 50, 1, false);
    small.control().cancel();
    let mut d = vec![Complex32::default(); 50];
    small.forward(&rng.complex(64), &mut d).unwrap();
}

#[test]
fn argument_errors_instead_of_internal_ones() {
    let mut rng = Rng::fresh("argument_errors_instead_of_internal_ones");
    // Several GPUs: refused, naming the argument.
    let e = Plan::new(
        Options {
            num_devices: 2,
            ..options()
        },
        4,
        4,
        1,
        1,
        4,
    )
    .err()
    .unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("num_devices"), "{}", e.message);
    // Too many time segments: refused at set_toeplitz.
    let mut plan = trajectory_plan(&mut rng, 8, 64, 1, false);
    let e = plan.set_toeplitz(true, 1000).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("time_segments"), "{}", e.message);
    // More segments than the off-resonance map has distinct values: the
    // singular Gram matrix is an argument error naming time_segments.
    let w: Vec<f64> = (0..64)
        .map(|i| if i % 2 == 0 { -200.0 } else { 200.0 })
        .collect();
    let t: Vec<f64> = (0..64).map(|j| 0.01 * j as f64 / 63.0).collect();
    plan.set_off_resonance(Some((&w, &t))).unwrap();
    plan.set_toeplitz(true, 40).unwrap();
    let mut y = vec![Complex32::default(); 64];
    let e = plan.normal(&rng.complex(64), &mut y).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    assert!(e.message.contains("time_segments"), "{}", e.message);
    // Automatic segments on the same map: done, or an argument error that says why.
    plan.set_toeplitz(true, 0).unwrap();
    if let Err(e) = plan.normal(&rng.complex(64), &mut y) {
        assert_eq!(e.status, Status::InvalidArgument, "{e}");
        assert!(e.message.contains("distinct values"), "{}", e.message);
    }
}

#[test]
fn sim_calls_cancelled_by_the_thread_callback_and_memory_asked_first() {
    use horecon::ffi::*;
    let seen = Seen {
        calls: Mutex::new(Vec::new()),
        stop_at: 2,
    };
    let (fov, center, grid_fov) = ([0.2, 0.2, 0.0], [0.0; 3], [0.2, 0.2]);
    let n = 200_000;
    let positions = vec![0.01; 3 * n];
    let mut values = vec![horecon_c32 { re: 9.0, im: 9.0 }; n];
    unsafe {
        assert_eq!(
            horecon_sim_set_progress(Some(record), &seen as *const Seen as *mut c_void),
            HORECON_OK
        );
        // ~2^20 k-space points x 2e5 positions: minutes of work, stopped at the second callback.
        let status = horecon_sim_shepp_logan_band_limited(
            fov.as_ptr(),
            center.as_ptr(),
            n as i64,
            positions.as_ptr(),
            grid_fov.as_ptr(),
            std::f64::consts::PI * 1024.0 / 0.2,
            values.as_mut_ptr(),
        );
        assert_eq!(status, HORECON_ERR_CANCELLED);
        assert!(values.iter().all(|v| v.re == 9.0), "output written");
        assert_eq!(
            horecon_sim_set_progress(None, std::ptr::null_mut()),
            HORECON_OK
        );
    }
    check_fractions(&seen);
    // horecon_plan_memory: the estimate of a call, and the argument checks.
    let mut rng = Rng::fresh("sim_calls_cancelled_and_memory_asked_first");
    let plan = trajectory_plan(&mut rng, 32, 1000, 2, false);
    let handle = Box::new(plan);
    let m = handle.memory(horecon::plan::Call::Forward).unwrap();
    // At least the operator's features and the data it returns.
    assert!(m.host >= (2 * 1000 * 8 + 1000 * 2 * 8) as u64, "{m:?}");
    assert_eq!(m.device, 0);
    let cg = handle.memory(horecon::plan::Call::Cg).unwrap();
    assert!(cg.host > m.host, "cg {cg:?} vs forward {m:?}");
    assert!(horecon::plan::Call::from_code(7).is_none());
}

/// The Rust API's own entry points that used to report a user's mistake as
/// an internal error: each is now an argument error naming the argument.
#[test]
fn rust_api_mistakes_are_argument_errors() {
    use horecon::model::cartesian::{Cartesian, GridGeometry};
    use horecon::model::{Model, Sizes};
    use horecon::solver::{CgProblem, Neighbourhood, Penalty, Regularizer};
    let mut rng = Rng::fresh("rust_api_mistakes_are_argument_errors");
    let sizes = Sizes::new(6, 4, 1, 1, 5).unwrap();
    // An unresolved backend.
    let plan = trajectory_plan(&mut rng, 6, 24, 1, false);
    let features = plan.model().features().unwrap();
    let pool = std::sync::Arc::new(rayon::ThreadPoolBuilder::new().build().unwrap());
    let e = horecon::backend::build(
        BackendKind::Auto,
        &features,
        plan.sizes(),
        &options(),
        pool.clone(),
    )
    .err()
    .unwrap();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    assert!(e.message.contains("backend"), "{}", e.message);
    // Positions that are not N x 3.
    let e = GridGeometry::from_positions([6, 4, 1], &[0.0; 10]).unwrap_err();
    assert_eq!(e.status, Status::SizeMismatch, "{e}");
    assert!(e.message.contains("positions"), "{}", e.message);
    // A Cartesian sampling made for other sizes, on either backend.
    let positions =
        horecon::model::grid::grid_positions([6, 4, 1], [0.2, 0.2, 0.01], [0.0; 3]).unwrap();
    let mask: Vec<u8> = (0..24).map(|v| u8::from(v % 5 == 0)).collect();
    let sampled = mask.iter().filter(|&&b| b != 0).count() as i64;
    let cartesian =
        Cartesian::new(Sizes::new(6, 4, 1, 1, sampled).unwrap(), &positions, &mask).unwrap();
    for backend in [BackendKind::Cpu, BackendKind::Cuda] {
        let e = horecon::backend::build_cartesian(
            backend,
            std::sync::Arc::new(cartesian.clone()),
            None,
            Sizes::new(6, 4, 1, 1, sampled + 1).unwrap(),
            &options(),
            pool.clone(),
        )
        .err()
        .unwrap();
        assert_eq!(e.status, Status::SizeMismatch, "{backend:?}: {e}");
        assert!(e.message.contains("cartesian"), "{}", e.message);
    }
    // A model without positions or phase: an incomplete plan, naming the setters.
    let model = Model::new(sizes);
    let e = model.features().unwrap_err();
    assert_eq!(e.status, Status::IncompletePlan, "{e}");
    assert!(e.message.contains("horecon_set_positions"), "{}", e.message);
    // Reweighting a regularizer that has no reweighting.
    let data = rng.complex(5);
    let problem = CgProblem {
        data: &data,
        sample_weights: None,
        regularizer: Regularizer::Tikhonov,
        lambda: 1.0,
        fd_weights: None,
        neighbourhood: Neighbourhood::Axes,
        reweightings: 2,
        epsilon: 1e-3,
        sigma: 1.0,
        max_iterations: 3,
        tolerance: 0.0,
        residual_floor: 0.0,
        warm_start: false,
        progress: None,
        preconditioner: None,
        discrepancy: None,
    };
    let e = Penalty::for_update(&problem, 0).err().unwrap();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    assert!(e.message.contains("regularizer"), "{}", e.message);
}

/// Total variation with a vast number of outer steps of zero CG iterations
/// each on a Cartesian plan (nothing inside a step checks for a cancel):
/// `horecon_cancel` still stops it, between steps (the adversarial C
/// harness, seed 64903046536392, hung here).
#[test]
fn reweighting_steps_of_no_iterations_are_cancellable() {
    let mut rng = Rng::fresh("reweighting_steps_of_no_iterations_are_cancellable");
    // Cartesian (its FFTs check nothing either), every other k-space line.
    let n = 8;
    let mask: Vec<u8> = (0..n * n).map(|i| u8::from((i / n) % 2 == 0)).collect();
    let m = mask.iter().filter(|&&v| v != 0).count();
    let mut plan = Plan::new(options(), n as i64, n as i64, 1, 1, m as i64).unwrap();
    plan.set_grid_positions([0.2, 0.2, 0.005], [0.0; 3])
        .unwrap();
    plan.set_cartesian(&mask).unwrap();
    let data = rng.complex(m);
    let options = CgOptions {
        max_iterations: 0,
        regularizer: horecon::Regularizer::TotalVariation,
        lambda: 1e-3,
        reweightings: 1 << 30,
        ..CgOptions::default()
    };
    let started = std::time::Instant::now();
    let mut image = vec![Complex32::new(7.0, 0.0); n * n];
    let result = std::thread::scope(|s| {
        let worker = s.spawn(|| plan.cg(&data, &options, &mut image));
        std::thread::sleep(std::time::Duration::from_millis(200));
        plan.control().cancel();
        worker.join().unwrap()
    });
    let e = result.expect_err("2^30 outer steps outlast 0.2 s");
    assert_eq!(e.status, Status::Cancelled, "{e}");
    assert!(
        started.elapsed().as_secs_f64() < 10.0,
        "cancel took {:?}",
        started.elapsed()
    );
    assert!(image.iter().all(|&x| x == Complex32::new(7.0, 0.0)));
}

/// The delay search runs its CGs on a private plan: `horecon_cancel` of the
/// user's plan reaches it (between evaluations and inside them), and its
/// progress callback reports the search (the adversarial C harness, seed
/// 139704196974377, found a search that never stopped).
#[test]
fn delay_search_is_cancellable_and_reports_progress() {
    use horecon::calib::delay::{estimate_delay, DelayOptions};
    let mut rng = Rng::fresh("delay_search_is_cancellable_and_reports_progress");
    let (n, m) = (12, 300);
    let plan = trajectory_plan(&mut rng, n, m, 2, false);
    let data = rng.complex(m * 2);
    let times: Vec<f64> = (0..m).map(|j| 1e-5 * j as f64).collect();
    // 20,001 coarse evaluations of 50 iterations each: minutes if not stopped.
    let long = DelayOptions {
        range: 1e-2,
        step: 1e-6,
        iterations: 50,
        ..DelayOptions::default()
    };
    let started = std::time::Instant::now();
    let result = std::thread::scope(|s| {
        let worker = s.spawn(|| estimate_delay(&plan, &data, None, &times, &long));
        std::thread::sleep(std::time::Duration::from_millis(300));
        plan.control().cancel();
        worker.join().unwrap()
    });
    let e = result.err().expect("20,001 CGs outlast 0.3 s");
    assert_eq!(e.status, Status::Cancelled, "{e}");
    assert!(
        e.message.contains("horecon_estimate_delay"),
        "{}",
        e.message
    );
    assert!(
        started.elapsed().as_secs_f64() < 10.0,
        "cancel took {:?}",
        started.elapsed()
    );
    // The progress callback sees the search and can stop it.
    let mut plan = plan;
    let seen = Seen {
        calls: Mutex::new(Vec::new()),
        stop_at: 2,
    };
    plan.set_progress(Some(callback(&seen)));
    let e = estimate_delay(&plan, &data, None, &times, &long)
        .err()
        .expect("stopped by the callback");
    assert_eq!(e.status, Status::Cancelled, "{e}");
    check_fractions(&seen);
    plan.set_progress(None);
    // The plan still works: a short search ends, even asked for a tolerance
    // far below what float64 resolves at these delays.
    let tiny = DelayOptions {
        tolerance: 1e-300,
        ..DelayOptions::default()
    };
    let r = estimate_delay(&plan, &data, None, &times, &tiny).unwrap();
    assert!(
        r.delay.abs() <= tiny.range && r.curve.len() < 200,
        "{}",
        r.curve.len()
    );
}
