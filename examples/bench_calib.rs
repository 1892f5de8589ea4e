//! Benchmarks of the calibration chain (issue 12):
//!
//! - `espirit`: 3D ESPIRiT from a 24³ calibration region (a 24³ reference),
//!   16 coils, onto a 128³ reconstruction grid (target ≤ 60 s on the 2-core
//!   CPU, ≤ 5 s on one GPU machine);
//! - `delay`: delay estimation on `bieri-256` (shared/bench cases: 256², 8
//!   coils, 16 terms + off-resonance; target ≤ 2 s on one GPU), a 7.3 µs
//!   delay with the default search (±20 µs, 4 µs, golden section to 0.05 µs,
//!   10 CG iterations per candidate).
//!
//! Run: cargo run --release --example bench_calib [espirit|delay] [--size N]
//! [--case NAME (delay's case, default bieri-256)] [--backend auto|cpu|cuda]

use horecon::calib::delay::{estimate_delay, resample, DelayOptions};
use horecon::calib::espirit::EspiritOptions;
use horecon::calib::reference::ReferenceGrid;
use horecon::sim;
use horecon::sim::reference::cartesian_reference;
use horecon::{BackendKind, Complex32, Options, Plan};
use std::time::Instant;

#[path = "common/cases.rs"]
mod cases;

fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn espirit(size: usize, backend: BackendKind) {
    let coils = 16;
    let center = [0.0; 3];
    let grid = ReferenceGrid::new([24, 24, 24], [0.24, 0.24, 0.24], center).expect("grid");
    let p = horecon::model::grid::grid_positions(grid.dims, grid.fov, center).expect("positions");
    let object: Vec<Complex32> = sim::shepp_logan(3, [0.2, 0.2, 0.2], center, &p)
        .expect("phantom")
        .into_iter()
        .map(|v| Complex32::new(v as f32, 0.0))
        .collect();
    let s = sim::coil_sensitivities(&p, coils, 0.15, center).expect("coils");
    let mut kspace =
        cartesian_reference(&grid, &p, &object, &s, coils, None, &[0.0], 1.0).expect("reference");
    sim::add_noise(&mut kspace, 50.0, 1).expect("noise");
    let options = Options {
        backend,
        ..Options::default()
    };
    let n = size as i64;
    let mut plan = Plan::new(options, n, n, n, coils as i64, 1).expect("plan");
    plan.set_grid_positions([0.22; 3], center).expect("grid");
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let result = plan
        .espirit(&grid, &kspace, &EspiritOptions::default())
        .expect("espirit");
    let (seconds, cpu) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let inside = result.eigenvalues.iter().filter(|&&e| e >= 0.8).count();
    println!(
        "ESPIRiT 3D: 24^3 calibration, kernel 6, 16 coils -> {size}^3: {seconds:.2} s wall, {cpu:.2} s CPU \
         ({} threads), signal subspace {} of {}, {inside} voxels above the crop",
        rayon::current_num_threads(),
        result.rank,
        216 * coils
    );
}

fn delay(name: &str, backend: BackendKind) {
    let case = cases::make_case(name);
    let options = Options {
        backend,
        ..Options::default()
    };
    let plan = case.plan(options);
    let times = case.off_resonance.as_ref().expect("times").1.clone();
    let mut rng = cases::Rng(256);
    let image = rng.complex(case.voxels());
    let m = case.samples;
    let mut data = vec![Complex32::default(); m * case.coils];
    plan.forward(&image, &mut data).expect("forward");
    sim::add_noise(&mut data, 50.0, 2).expect("noise");
    let truth = 7.3e-6;
    let monitored: Vec<f64> = case
        .coefficients
        .chunks_exact(m)
        .flat_map(|c| resample(c, &times, -truth))
        .collect();
    let started = Instant::now();
    let result = estimate_delay(
        &plan,
        &data,
        Some(&monitored),
        &times,
        &DelayOptions::default(),
    )
    .expect("delay");
    println!(
        "delay on {name} ({}): true {:.3} us, estimated {:.3} us, {} evaluations, {:.2} s",
        plan.operator().expect("operator").backend_name(),
        truth * 1e6,
        result.delay * 1e6,
        result.curve.len(),
        started.elapsed().as_secs_f64()
    );
    // One evaluation's parts (the search's cost model): new coefficients
    // taken in place by the operator (as estimate_delay does) or set anew
    // (the operator rebuilt), 10 CG iterations, one forward; best of 3.
    let mut work = case.plan(options);
    let mut image = vec![Complex32::default(); case.voxels()];
    let (mut update, mut build) = (f64::INFINITY, f64::INFINITY);
    let (mut cg, mut forward) = (f64::INFINITY, f64::INFINITY);
    for shift in [1e-6, 2e-6, 3e-6] {
        let shifted: Vec<f64> = monitored
            .chunks_exact(m)
            .flat_map(|c| resample(c, &times, shift))
            .collect();
        let t = Instant::now();
        if case.trajectory {
            work.set_trajectory(3, &shifted).expect("trajectory");
        } else {
            work.set_solid_harmonics(case.terms as i32, &shifted)
                .expect("coefficients");
        }
        work.operator().expect("operator");
        build = build.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        work.set_coefficients(&monitored).expect("coefficients");
        work.operator().expect("operator");
        update = update.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        image.fill(Complex32::default());
        let cg_options = horecon::plan::CgOptions {
            max_iterations: 10,
            tolerance: 0.0,
            ..Default::default()
        };
        work.cg(&data, &cg_options, &mut image).expect("cg");
        cg = cg.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        work.forward(&image, &mut data.clone()).expect("forward");
        forward = forward.min(t.elapsed().as_secs_f64());
    }
    println!(
        "one evaluation: coefficients in place {:.1} ms (set anew + operator rebuilt {:.1} ms), \
         10 CG iterations {:.1} ms, forward {:.1} ms",
        1e3 * update,
        1e3 * build,
        1e3 * cg,
        1e3 * forward
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let size = value("--size").map_or(128, |s| s.parse().expect("--size N"));
    let backend: BackendKind =
        value("--backend").map_or(BackendKind::Auto, |s| s.parse().expect("--backend"));
    let which: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a == "espirit" || *a == "delay")
        .collect();
    if which.is_empty() || which.contains(&"espirit") {
        espirit(size, backend);
    }
    if which.is_empty() || which.contains(&"delay") {
        delay(
            &value("--case").unwrap_or_else(|| "bieri-256".into()),
            backend,
        );
    }
}
