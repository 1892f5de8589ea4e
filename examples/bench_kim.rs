//! Kim et al.'s compressed-sensing workload in Cartesian FFT mode (issue 5 §3):
//! a 256×160×80 grid, 8 coils, a 10× undersampled variable-density Cartesian
//! mask (readout x fully sampled, y–z undersampled), Shepp–Logan data with
//! noise, and 5 outer × 15 inner CG iterations with the Laplace prior.
//!
//!   cargo run --release --example bench_kim [-- --backend cpu|cuda|auto]
//!       [--precision accurate|fast|double] [--dims 256x160x80] [--threads N]
//!       [--lambda 0.02 (λ / M)]
//!
//! The backend may also come from HORECON_BACKEND. Prints the seconds of the
//! reconstruction (CG with its reweightings) and of the setup, and the NRMSE
//! against the phantom. The CPU seconds of the solve (all threads) are
//! printed too: on a shared machine, wall time ≥ CPU seconds / threads.

use horecon::sim::{coils, mask, metrics, noise, phantom};
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer};
use std::time::Instant;

/// CPU seconds (user + system) of this process and all its threads so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn parse_dims(s: &str) -> Option<[usize; 3]> {
    let v: Vec<usize> = s.split('x').filter_map(|p| p.parse().ok()).collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut backend = std::env::var("HORECON_BACKEND").unwrap_or_else(|_| "auto".into());
    let mut precision = "accurate".to_string();
    let mut dims = [256usize, 160, 80];
    let mut threads = 0usize;
    let mut lambda_scale = 0.02;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--backend" => backend = value,
            "--precision" => precision = value,
            "--dims" => dims = parse_dims(&value).ok_or("--dims wants NXxNYxNZ")?,
            "--threads" => threads = value.parse()?,
            "--lambda" => lambda_scale = value.parse()?,
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let backend: BackendKind = backend.parse()?;
    let precision: Precision = precision.parse()?;
    let coil_count = 8;
    let fov = [0.256, 0.16, 0.08];
    let center = [0.0, 0.0, 0.0];
    let n: usize = dims.iter().product();

    let setup = Instant::now();
    let sampling = mask::variable_density_mask(dims, 10.0, 1)?;
    let m = sampling.iter().filter(|&&b| b != 0).count();
    let mut plan = Plan::new(
        Options {
            backend,
            precision,
            num_threads: threads,
            ..Options::default()
        },
        dims[0] as i64,
        dims[1] as i64,
        dims[2] as i64,
        coil_count as i64,
        m as i64,
    )?;
    plan.set_grid_positions(fov, center)?;
    plan.set_cartesian(&sampling)?;
    let positions = plan.model().positions.clone().ok_or("no positions")?;
    let sensitivities = coils::coil_sensitivities(&positions, coil_count, 0.16, center)?;
    plan.set_sensitivities(Some(&sensitivities))?;
    let truth: Vec<Complex32> = phantom::shepp_logan(3, fov, center, &positions)?
        .into_iter()
        .map(|v| Complex32::new(v as f32, 0.0))
        .collect();
    let mut data = vec![Complex32::default(); m * coil_count];
    plan.forward(&truth, &mut data)?;
    noise::add_noise(&mut data, 50.0, 2)?;
    let setup_seconds = setup.elapsed().as_secs_f64();

    let options = CgOptions {
        max_iterations: 15,
        tolerance: 0.0,
        regularizer: Regularizer::Laplace,
        reweightings: 5,
        // EᴴE ≈ N·(M/N)·Σ|S|² = M·Σ|S|² on smooth images (unnormalised FFTs): λ a few % of that.
        lambda: lambda_scale * m as f64,
        sigma: 0.05,
        epsilon: 1e-3,
        ..CgOptions::default()
    };
    let mut image = vec![Complex32::default(); n];
    let cpu_before = cpu_seconds();
    let info = plan.cg(&data, &options, &mut image)?;
    let cg_cpu = cpu_seconds() - cpu_before;
    let error = metrics::nrmse(&image, &truth)?;
    let backend_name = plan.operator()?.backend_name();
    println!(
        "kim {}x{}x{} coils {coil_count} samples/coil {m} ({:.1}x) {precision:?} on {backend_name}: \
         cg {:.3} s ({} iterations, 5 x 15 Laplace; {cg_cpu:.1} CPU s on {} threads), \
         setup {setup_seconds:.3} s, nrmse {error:.4}",
        dims[0],
        dims[1],
        dims[2],
        n as f64 / m as f64,
        info.seconds,
        info.iterations,
        if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        }
    );
    Ok(())
}
