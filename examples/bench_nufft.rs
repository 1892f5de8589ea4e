//! Benchmark of the NUFFT (issue 14): execute times of types 1 and 2 at the
//! issue's sizes, float32 data, points uniform in [−π, π), the plan made once
//! (its time printed separately), best and median of `repeats` runs after one
//! warm-up. One line per case:
//!
//! `case=2d type=1 transforms=8 modes=256x256 M=65536 tol=1e-6 sigma=2 w=8 plan_ms=… best_ms=… median_ms=…`
//!
//! Run: cargo run --release --example bench_nufft [repeats] [case…]
//! with cases 2d (256², 65,536 points) and 3d (64³, 262,144 points), default
//! both; HORECON_BENCH_TOLERANCE (1e-6), HORECON_BENCH_PRECISION
//! (accurate = float32 arithmetic, double), HORECON_BENCH_BACKEND (cpu),
//! HORECON_BENCH_SIGMA=2|1.25 to force σ (default: the library's choice),
//! HORECON_BENCH_TRANSFORMS (default "1,8"), HORECON_BENCH_TYPES ("1,2"),
//! HORECON_BENCH_POINTS to change M, HORECON_BENCH_MODES (e.g. 128x128) the modes.
//! scripts/bench_nufft.py runs it beside pip finufft.

#[path = "common/random.rs"]
mod random;
use horecon::nufft::plan::choose_upsampling;
use horecon::nufft::{Modes, Nufft, NufftSpec, NufftType, Upsampling};
use horecon::{BackendKind, Complex32, Options, Precision};
use random::Xorshift;
use std::time::Instant;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) of this process so far: with other jobs on
/// the machine, CPU time per call is steadier than wall time.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repeats: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let mut cases: Vec<String> = std::env::args().skip(2).collect();
    if cases.is_empty() {
        cases = vec!["2d".into(), "3d".into()];
    }
    let tolerance: f64 = env("HORECON_BENCH_TOLERANCE", 1e-6);
    let precision: Precision = env("HORECON_BENCH_PRECISION", Precision::Accurate);
    let backend: BackendKind = env("HORECON_BENCH_BACKEND", BackendKind::Cpu);
    let sigma: f64 = env("HORECON_BENCH_SIGMA", 0.0);
    let options = Options {
        backend,
        precision,
        ..Options::default()
    };
    let mut rng = Xorshift(0x5851_f42d_4c95_7f2du64);
    for case in &cases {
        let (sizes, npoints): (Vec<i64>, usize) = match case.as_str() {
            "2d" => (vec![256, 256], 65_536),
            "3d" => (vec![64, 64, 64], 262_144),
            other => return Err(format!("unknown case {other} (2d or 3d)").into()),
        };
        let npoints = env("HORECON_BENCH_POINTS", npoints);
        let sizes: Vec<i64> = match std::env::var("HORECON_BENCH_MODES") {
            Ok(v) => v.split('x').filter_map(|s| s.parse().ok()).collect(),
            Err(_) => sizes,
        };
        let modes = Modes::new(sizes.len() as i32, &sizes)?;
        let points: Vec<f64> = rng.points(sizes.len() * npoints);
        let upsampling = match sigma {
            2.0 => Upsampling::Two,
            1.25 => Upsampling::OneQuarter,
            _ => choose_upsampling(&modes, npoints, tolerance, precision == Precision::Double),
        };
        for kind in list("HORECON_BENCH_TYPES", "1,2") {
            let kind = NufftType::from_code(kind as i32)?;
            for transforms in list("HORECON_BENCH_TRANSFORMS", "1,8") {
                let spec = NufftSpec::new(
                    kind,
                    modes,
                    1,
                    tolerance,
                    transforms as i32,
                    precision == Precision::Double,
                    Some(upsampling),
                )?;
                let (w, s) = (spec.kernel.width, spec.kernel.upsampling.factor());
                let start = Instant::now();
                let plan = Nufft::with_spec(spec, &points, npoints, &options, None)?;
                let plan_ms = start.elapsed().as_secs_f64() * 1e3;
                let (m, n) = plan.lengths();
                let mut c: Vec<Complex32> = (0..m)
                    .map(|_| Complex32::new(rng.uniform() as f32 - 0.5, rng.uniform() as f32 - 0.5))
                    .collect();
                let mut f: Vec<Complex32> = (0..n)
                    .map(|_| Complex32::new(rng.uniform() as f32 - 0.5, rng.uniform() as f32 - 0.5))
                    .collect();
                plan.execute(&mut c, &mut f)?;
                let cpu_start = cpu_seconds();
                let mut times: Vec<f64> = (0..repeats)
                    .map(|_| {
                        let t = Instant::now();
                        plan.execute(&mut c, &mut f)
                            .map(|_| t.elapsed().as_secs_f64() * 1e3)
                    })
                    .collect::<horecon::Result<_>>()?;
                let cpu_ms = (cpu_seconds() - cpu_start) * 1e3 / repeats.max(1) as f64;
                times.sort_by(f64::total_cmp);
                println!(
                    "case={case} type={} transforms={transforms} modes={} M={npoints} tol={tolerance:e} \
                     sigma={s} w={w} backend={} plan_ms={plan_ms:.1} best_ms={:.2} median_ms={:.2} cpu_ms={cpu_ms:.2}",
                    kind as i32,
                    sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("x"),
                    plan.backend_name(),
                    times[0],
                    times[times.len() / 2],
                );
            }
        }
    }
    Ok(())
}
