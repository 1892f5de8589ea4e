//! Simulates a small higher-order dataset with the forward operator and
//! reconstructs it with CG:
//!
//!   cargo run --release --example reconstruct
//!
//! 48×48 slice at z = 20 mm, 4 coils, a spiral with eddy-current-like
//! 2nd/3rd-order terms (16 solid harmonics) and a B0 map. Prints the
//! relative error of the reconstruction against the truth. The forward
//! simulation and the CG show a progress line on stderr
//! (examples/common/progress_line.rs).

#[path = "common/progress_line.rs"]
mod progress_line;

use horecon::{CgOptions, Complex32, Options, Plan, Regularizer};
use progress_line::ProgressLine;
use std::f64::consts::{PI, TAU};

fn main() -> horecon::Result<()> {
    // Declared before the plan, which reports to it: it outlives the plan's calls.
    let line = ProgressLine::new();
    let (nx, ny, coils) = (48usize, 48usize, 4usize);
    let n = nx * ny;
    let m = 2 * n; // samples per coil: 2-fold oversampled spiral, no undersampling
    let fov = 0.22;
    let mut plan = Plan::new(
        Options::default(),
        nx as i64,
        ny as i64,
        1,
        coils as i64,
        m as i64,
    )?;
    plan.set_progress(Some(line.callback()));
    plan.set_grid_positions([fov, fov, 0.005], [0.0, 0.0, 0.02])?;
    let positions = plan.model().positions.clone().unwrap_or_default();

    // Spiral k(t) plus higher-order terms growing like eddy currents.
    let kmax = PI * nx as f64 / fov;
    let turns = nx as f64 / 4.0;
    let mut coef = vec![0.0; 16 * m];
    for j in 0..m {
        let tau = j as f64 / (m - 1) as f64;
        let eddy = 1.0 - (-tau / 0.3).exp();
        coef[j] = 0.8 * eddy; // k0, rad
        coef[m + j] = kmax * tau.sqrt() * (TAU * turns * tau.sqrt()).cos();
        coef[2 * m + j] = kmax * tau.sqrt() * (TAU * turns * tau.sqrt()).sin();
        coef[3 * m + j] = 20.0 * eddy; // z-gradient eddy, rad/m (matters at z = 20 mm)
        for (b, amp) in [
            (4, 120.0),
            (6, -200.0),
            (8, 90.0),
            (11, 900.0),
            (14, -700.0),
        ] {
            coef[b * m + j] = amp * eddy;
        }
    }
    plan.set_solid_harmonics(16, &coef)?;
    let omega: Vec<f64> = (0..n)
        .map(|v| {
            let (x, y) = (positions[v], positions[n + v]);
            TAU * 40.0 * (-(x * x + (y - 0.03) * (y - 0.03)) / (2.0 * 0.04 * 0.04)).exp()
        })
        .collect();
    let times: Vec<f64> = (0..m).map(|j| 0.025 * j as f64 / m as f64).collect();
    plan.set_off_resonance(Some((&omega, &times)))?;
    let mut sens = vec![Complex32::default(); n * coils];
    for c in 0..coils {
        let a = TAU * c as f64 / coils as f64;
        for v in 0..n {
            let (x, y) = (positions[v], positions[n + v]);
            let mag = (-((x - 0.15 * a.cos()).powi(2) + (y - 0.15 * a.sin()).powi(2))
                / (2.0 * 0.1 * 0.1))
                .exp();
            sens[c * n + v] = Complex32::new((mag * a.cos()) as f32, (mag * a.sin()) as f32);
        }
    }
    plan.set_sensitivities(Some(&sens))?;

    // A phantom of two ellipses, data by the forward operator plus 1 % noise.
    let truth: Vec<Complex32> = (0..n)
        .map(|v| {
            let (x, y) = (positions[v] / 0.09, positions[n + v] / 0.1);
            let inner = ((x - 0.2) / 0.3).powi(2) + (y / 0.5).powi(2) < 1.0;
            Complex32::new(
                if x * x + y * y < 1.0 {
                    if inner {
                        0.5
                    } else {
                        1.0
                    }
                } else {
                    0.0
                },
                0.0,
            )
        })
        .collect();
    let mut data = vec![Complex32::default(); m * coils];
    line.start("forward");
    plan.forward(&truth, &mut data)?;
    let rms = (data.iter().map(|d| d.norm_sqr()).sum::<f32>() / data.len() as f32).sqrt();
    let mut state = 1u64;
    let mut noise = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.01 * rms * 3.46
    };
    data.iter_mut()
        .for_each(|d| *d += Complex32::new(noise(), noise()));

    let mut image = vec![Complex32::default(); n];
    let options = CgOptions {
        max_iterations: 40,
        tolerance: 1e-4,
        regularizer: Regularizer::None,
        ..Default::default()
    };
    line.start("cg");
    let info = plan.cg(&data, &options, &mut image)?;
    line.finish();
    let err = (image
        .iter()
        .zip(&truth)
        .map(|(a, b)| (a - b).norm_sqr())
        .sum::<f32>()
        / truth.iter().map(|b| b.norm_sqr()).sum::<f32>())
    .sqrt();
    println!(
        "{}x{} image, {} coils, {} samples/coil, 16 solid harmonics + B0, backend {:?}",
        nx,
        ny,
        coils,
        m,
        plan.backend()
    );
    println!(
        "CG: {} iterations, relative residual {:.2e}, {:.2} s; relative error vs truth {:.3}",
        info.iterations, info.rel_residual, info.seconds, err
    );
    Ok(())
}
