//! Benchmark of the Toeplitz normal operator (issue 5 §2): 50 CG iterations
//! on an n×n, 8-coil single-shot spiral without off-resonance, with density
//! compensation weights (so the kernel depends on them), Toeplitz (kernel
//! computation included: a fresh plan, timed from set_toeplitz to the end of
//! CG) against the exact normal operator. Prints seconds, the speed-up and
//! the relative difference of the two solutions.
//!
//! Run: cargo run --release --example bench_toeplitz [n] [coils] [iterations]
//! with HORECON_BENCH_BACKEND=cpu|cuda|auto (default auto) and
//! HORECON_BENCH_PRECISION=accurate|fast|double (default accurate);
//! HORECON_BENCH_EXACT=estimate times one exact Eᴴ W d and one exact normal
//! instead of the exact CG and reports Eᴴ W d + iterations × normal.
//! Defaults: n = 256, 8 coils, 50 iterations.
//! Off-resonance: HORECON_BENCH_OFFRES_HZ = peak |ω|/2π of
//! `sim::field::off_resonance_map` (default 0: none; Toeplitz then uses
//! automatic time segmentation), HORECON_BENCH_DWELL = the spiral's dwell
//! time in seconds (default 4e-6; the readout lasts M × dwell).
//! HORECON_BENCH_DEVICES=D runs on D CUDA devices (`num_devices`, split by coils).
//! HORECON_BENCH_UNDERSAMPLING=R sets the spiral's radial spacing (default 1;
//! 0.526 gives M = 6143 at 64²). HORECON_BENCH_SETUP=1 times only the
//! Toeplitz set-up: `set_toeplitz` + the first normal (time segmentation and
//! kernels included) on a fresh plan, the best and the median of
//! HORECON_BENCH_REPS (default 3), and one exact normal for comparison.

use horecon::sim::coils::coil_sensitivities;
use horecon::sim::field::off_resonance_map;
use horecon::sim::trajectory::{density_weights_2d, spiral};
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer};
use std::time::Instant;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// ‖a − b‖ / ‖b‖.
fn relative(a: &[Complex32], b: &[Complex32]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(a, b)| (a - b).norm_sqr() as f64)
        .sum();
    let den: f64 = b.iter().map(|b| b.norm_sqr() as f64).sum();
    (num / den).sqrt()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = arg(1, 256);
    let coils = arg(2, 8);
    let iterations = arg(3, 50);
    let backend = std::env::var("HORECON_BENCH_BACKEND")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(BackendKind::Auto);
    let precision = std::env::var("HORECON_BENCH_PRECISION")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(Precision::Accurate);
    let env = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let offres_hz = env("HORECON_BENCH_OFFRES_HZ", 0.0);
    let dwell = env("HORECON_BENCH_DWELL", 4e-6);
    let fov = 0.22;
    let undersampling = env("HORECON_BENCH_UNDERSAMPLING", 1.0);
    let trajectory = spiral(n as i64, fov, undersampling, dwell, 0.0)?;
    let m = trajectory.samples();
    let weights = density_weights_2d(&trajectory.k)?;
    let options = Options {
        backend,
        precision,
        num_devices: env("HORECON_BENCH_DEVICES", 1.0) as i32,
        ..Options::default()
    };
    let make_plan = || -> horecon::Result<Plan> {
        let mut plan = Plan::new(options, n as i64, n as i64, 1, coils as i64, m as i64)?;
        plan.set_grid_positions([fov, fov, 1.0], [0.0; 3])?;
        plan.set_trajectory(2, &trajectory.k)?;
        let positions = plan.model().positions.clone().unwrap_or_default();
        if offres_hz > 0.0 {
            let omega = off_resonance_map(&positions, [fov, fov, 1.0], [0.0; 3], offres_hz)?;
            plan.set_off_resonance(Some((&omega, &trajectory.times)))?;
        }
        plan.set_sensitivities(Some(&coil_sensitivities(
            &positions,
            coils,
            0.6 * fov,
            [0.0; 3],
        )?))?;
        Ok(plan)
    };
    let exact = make_plan()?;
    if offres_hz > 0.0 {
        let positions = exact.model().positions.clone().unwrap_or_default();
        let omega = off_resonance_map(&positions, [fov, fov, 1.0], [0.0; 3], offres_hz)?;
        let t = Instant::now();
        let segmentation =
            horecon::model::toeplitz::TimeSegmentation::new(&omega, &trajectory.times, 0)?;
        if let Some(s) = segmentation {
            eprintln!(
                "  time segmentation: L = {} segments, interpolation error {:.1e} ({:.3} s on the host)",
                s.segments,
                s.error,
                t.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!(
        "bench_toeplitz: {n}x{n}, {coils} coils, M = {m} spiral samples (dwell {dwell:e} s), \
         off-resonance up to {offres_hz} Hz, {iterations} CG iterations, {precision:?}, backend {}",
        exact.operator()?.backend_name()
    );
    if std::env::var("HORECON_BENCH_SETUP").as_deref() == Ok("1") {
        return setup_only(&exact, &make_plan, n, coils, m, offres_hz);
    }
    // Data of a smooth random image (exact forward; not timed).
    let mut state = 12345u64;
    let mut uniform = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let truth: Vec<Complex32> = (0..n * n)
        .map(|_| Complex32::new(uniform(), uniform()))
        .collect();
    let mut data = vec![Complex32::default(); m * coils];
    exact.forward(&truth, &mut data)?;
    let cg = CgOptions {
        max_iterations: iterations,
        tolerance: 0.0,
        regularizer: Regularizer::Tikhonov,
        lambda: 1e-3,
        sample_weights: Some(&weights),
        ..CgOptions::default()
    };

    // Toeplitz: a fresh plan whose exact operator (for Eᴴ W d) is built as
    // in the exact run; timed from set_toeplitz, so the kernels are included.
    let toeplitz = || -> horecon::Result<(f64, Vec<Complex32>, Plan)> {
        let mut plan = make_plan()?;
        plan.operator()?;
        let start = Instant::now();
        plan.set_toeplitz(true, 0)?;
        plan.normal_operator()?;
        let setup = start.elapsed().as_secs_f64();
        let mut x = vec![Complex32::default(); n * n];
        let info = plan.cg(&data, &cg, &mut x)?;
        let seconds = start.elapsed().as_secs_f64();
        eprintln!("  Toeplitz operator built (segmentation, exact operator) in {setup:.3} s");
        eprintln!(
            "  Toeplitz: {seconds:.3} s ({} iterations, relative residual {:.2e}; kernels included; \
             CG's own clock {:.3} s)",
            info.iterations, info.rel_residual, info.seconds
        );
        // One more normal on the same plan (kernels for W = 1 computed once first).
        let probe: Vec<Complex32> = x.iter().map(|v| v * 0.5).collect();
        let mut y = vec![Complex32::default(); n * n];
        let t = Instant::now();
        plan.normal(&probe, &mut y)?;
        let first = t.elapsed().as_secs_f64();
        let t = Instant::now();
        plan.normal(&probe, &mut y)?;
        eprintln!(
            "  Toeplitz normal: {:.1} ms with the kernels computed, {:.1} ms after",
            first * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
        Ok((seconds, x, plan))
    };
    // The first Toeplitz solve of a process also compiles its kernels (NVRTC)
    // and loads cuFFT; the second, on a fresh plan, is what every later plan costs.
    if exact.operator()?.backend_name().starts_with("cuda") {
        let first = toeplitz().map(|r| r.0);
        eprintln!(
            "  (first Toeplitz solve of the process: {first:.3?} s; timed below: a second, fresh plan)"
        );
    }
    let (toeplitz_s, fast, toeplitz_plan) = match toeplitz() {
        Ok((s, x, p)) => (s, x, Some(p)),
        Err(e) => {
            eprintln!("  Toeplitz failed: {e}");
            (f64::NAN, vec![Complex32::default(); n * n], None)
        }
    };

    exact.operator()?;
    let estimate = std::env::var("HORECON_BENCH_EXACT").as_deref() == Ok("estimate");
    let (exact_s, reference) = if estimate {
        // Too slow to run: CG ≈ one Eᴴ W d + one E^H W E per iteration, each timed once.
        let mut x = vec![Complex32::default(); n * n];
        let mut weighted = data.clone();
        for (j, d) in weighted.iter_mut().enumerate() {
            *d *= weights[j % m];
        }
        let t = Instant::now();
        exact.adjoint(&weighted, &mut x)?;
        let rhs = t.elapsed().as_secs_f64();
        let mut y = vec![Complex32::default(); n * n];
        let t = Instant::now();
        exact.operator()?.normal(&truth, &mut y, Some(&weights))?;
        let normal = t.elapsed().as_secs_f64();
        let seconds = rhs + iterations as f64 * normal;
        eprintln!(
            "  exact:    {seconds:.3} s estimated (Eᴴ W d {rhs:.3} s + {iterations} x normal {normal:.3} s)"
        );
        (seconds, None)
    } else {
        let start = Instant::now();
        let mut reference = vec![Complex32::default(); n * n];
        let info = exact.cg(&data, &cg, &mut reference)?;
        let seconds = start.elapsed().as_secs_f64();
        eprintln!(
            "  exact:    {seconds:.3} s ({} iterations, relative residual {:.2e})",
            info.iterations, info.rel_residual
        );
        (seconds, Some(reference))
    };
    let diff = reference.map_or(f64::NAN, |r| relative(&fast, &r));
    // The operators themselves, with CG's weights, on the truth image: CG's
    // 50 float32 iterations on this ill-conditioned system amplify their
    // rounding differences into the solution difference.
    let mut operator_difference = f64::NAN;
    if let Some(p) = &toeplitz_plan {
        let mut a = vec![Complex32::default(); n * n];
        let mut b = vec![Complex32::default(); n * n];
        p.normal_operator()?
            .normal(&truth, &mut a, Some(&weights))?;
        exact.operator()?.normal(&truth, &mut b, Some(&weights))?;
        operator_difference = relative(&a, &b);
    }
    println!(
        "n={n} coils={coils} M={m} iterations={iterations} toeplitz_s={toeplitz_s:.3} \
         exact_s={exact_s:.3} speedup={:.1} solution_difference={diff:.2e} \
         normal_difference={operator_difference:.2e}",
        exact_s / toeplitz_s
    );
    Ok(())
}

/// HORECON_BENCH_SETUP=1: `set_toeplitz` + the first normal on a fresh plan
/// (best of 3), one more normal, and one exact normal.
fn setup_only(
    exact: &Plan,
    make_plan: &dyn Fn() -> horecon::Result<Plan>,
    n: usize,
    coils: usize,
    m: usize,
    off_resonance_hz: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let x: Vec<Complex32> = (0..n * n)
        .map(|i| Complex32::new((i % 7) as f32 - 3.0, (i % 5) as f32 - 2.0))
        .collect();
    let reps: usize = std::env::var("HORECON_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut setups = Vec::with_capacity(reps);
    let mut after = f64::INFINITY;
    let mut y = vec![Complex32::default(); n * n];
    for _ in 0..reps {
        let mut plan = make_plan()?;
        plan.operator()?;
        let start = Instant::now();
        plan.set_toeplitz(true, 0)?;
        plan.normal(&x, &mut y)?;
        setups.push(start.elapsed().as_secs_f64());
        let t = Instant::now();
        plan.normal(&x, &mut y)?;
        after = after.min(t.elapsed().as_secs_f64());
    }
    let mut reference = vec![Complex32::default(); n * n];
    let t = Instant::now();
    exact.normal(&x, &mut reference)?;
    let exact_s = t.elapsed().as_secs_f64();
    setups.sort_by(f64::total_cmp);
    let (best, median) = (setups[0], setups[reps / 2]);
    println!(
        "n={n} coils={coils} M={m} off_resonance_hz={off_resonance_hz} toeplitz_setup_s={best:.4} \
         toeplitz_setup_median_s={median:.4} \
         toeplitz_normal_s={after:.4} exact_normal_s={exact_s:.4} normal_difference={:.2e}",
        relative(&y, &reference)
    );
    Ok(())
}
