//! The achieved accuracy of the NUFFT per requested tolerance: relative l2
//! error of types 1 and 2 against the float64 direct sums on random points
//! (uniform in [−π, π)), for both σ and both arithmetics; the worst of
//! `repeats` draws per line. The table behind the width rule of
//! src/nufft/params.rs.
//!
//! Run: cargo run --release --example nufft_accuracy [ndims] [n] [npoints] [repeats]
//! (defaults 2 24 400 3). HORECON_NUFFT_WIDTH_DELTA=k widens every kernel
//! by k cells (β scaled with w) to see what a wider kernel buys.

#![allow(clippy::needless_range_loop)]

#[path = "common/random.rs"]
mod random;
use horecon::nufft::{direct, KernelParams, Modes, Nufft, NufftSpec, NufftType, Upsampling};
use horecon::{BackendKind, Options, Precision};
use num_complex::{Complex32, Complex64};
use random::Xorshift;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Relative l2 error of one float64 type-1 transform with kernel (w, β) at σ.
fn type1_error(
    modes: &Modes,
    points: &[f64],
    input: &[Complex64],
    reference: &[Complex64],
    width: usize,
    beta: f64,
    upsampling: Upsampling,
) -> horecon::Result<f64> {
    let npoints = input.len();
    let mut spec = NufftSpec::new(NufftType::One, *modes, 1, 1e-6, 1, true, Some(upsampling))?;
    spec.kernel = KernelParams {
        width,
        beta,
        upsampling,
    };
    for a in 0..3 {
        spec.fine[a] = spec.kernel.fine_size(modes.sizes[a])?;
    }
    let options = Options {
        backend: BackendKind::Cpu,
        precision: Precision::Double,
        ..Options::default()
    };
    let plan = Nufft::with_spec(spec, points, npoints, &options, None)?;
    let mut c = input.to_vec();
    let mut f = vec![Complex64::default(); modes.total()];
    plan.execute_c64(&mut c, &mut f)?;
    let num: f64 = f
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b).norm_sqr())
        .sum();
    let den: f64 = reference.iter().map(|b| b.norm_sqr()).sum();
    Ok((num / den).sqrt())
}

/// `sweep`: per σ and w, the β (as γ = β/w) with the smallest worst-case error.
fn sweep(ndims: usize, n: i64, npoints: usize, repeats: usize) -> horecon::Result<()> {
    let modes = Modes::new(ndims as i32, &vec![n; ndims])?;
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15u64);
    let draws: Vec<(Vec<f64>, Vec<Complex64>, Vec<Complex64>)> = (0..repeats)
        .map(|_| {
            let points: Vec<f64> = rng.points(ndims * npoints);
            let input: Vec<Complex64> = rng.complex(npoints);
            let reference = direct::type1(&modes, &points, 1, &input);
            (points, input, reference)
        })
        .collect();
    println!("sweep ndims={ndims} n={n} M={npoints}: sigma w best_gamma error (gamma = beta/w)");
    for upsampling in [Upsampling::Two, Upsampling::OneQuarter] {
        for width in 2..=16 {
            let mut best = (f64::INFINITY, 0.0);
            for step in 0..=36 {
                let gamma = 1.2 + 0.04 * step as f64;
                let mut worst: f64 = 0.0;
                for (points, input, reference) in &draws {
                    let e = type1_error(
                        &modes,
                        points,
                        input,
                        reference,
                        width,
                        gamma * width as f64,
                        upsampling,
                    )?;
                    worst = worst.max(e);
                }
                if worst < best.0 {
                    best = (worst, gamma);
                }
            }
            println!(
                "{:5} {width:2} {:.2} {:.2e}",
                upsampling.factor(),
                best.1,
                best.0
            );
        }
    }
    Ok(())
}

/// `pointwise`: for type 2 (float64) per tolerance, the largest single-point
/// error against the rms error over the points (how much a cluster of points
/// at one place can exceed the average error).
fn pointwise(ndims: usize, n: i64, npoints: usize) -> horecon::Result<()> {
    let modes = Modes::new(ndims as i32, &vec![n; ndims])?;
    let mut rng = Xorshift(0x1234_5678_9abc_def1u64);
    let points: Vec<f64> = rng.points(ndims * npoints);
    let f: Vec<Complex64> = rng.complex(modes.total());
    let reference = direct::type2(&modes, &points, npoints, 1, &f);
    let rms_c = (reference.iter().map(|c| c.norm_sqr()).sum::<f64>() / npoints as f64).sqrt();
    println!("pointwise ndims={ndims} n={n} M={npoints}: sigma eps w rms_error max_error ratio");
    for upsampling in [Upsampling::Two, Upsampling::OneQuarter] {
        for exponent in 1..=12 {
            let tolerance = 10f64.powi(-exponent);
            let spec = NufftSpec::new(
                NufftType::Two,
                modes,
                1,
                tolerance,
                1,
                true,
                Some(upsampling),
            )?;
            let w = spec.kernel.width;
            let options = Options {
                backend: BackendKind::Cpu,
                precision: Precision::Double,
                ..Options::default()
            };
            let plan = Nufft::with_spec(spec, &points, npoints, &options, None)?;
            let mut c = vec![Complex64::default(); npoints];
            let mut grid = f.clone();
            plan.execute_c64(&mut c, &mut grid)?;
            let errors: Vec<f64> = c
                .iter()
                .zip(&reference)
                .map(|(a, b)| (a - b).norm() / rms_c)
                .collect();
            let rms = (errors.iter().map(|e| e * e).sum::<f64>() / npoints as f64).sqrt();
            let max = errors.iter().cloned().fold(0.0, f64::max);
            println!(
                "{:5} {tolerance:7.0e} {w:2} {rms:.2e} {max:.2e} {:.1}",
                upsampling.factor(),
                max / rms
            );
        }
    }
    Ok(())
}

/// `table`: per σ and w (β of params.rs), the largest error of a single
/// type-2 output relative to the rms output, worst over 1D n = 64, 2D n = 40,
/// 3D n = 32 with `npoints` uniform points and `repeats` draws: the measured
/// errors of params.rs.
fn table(npoints: usize, repeats: usize) -> horecon::Result<()> {
    let mut rng = Xorshift(0x0bad_cafe_dead_beefu64);
    let options = Options {
        backend: BackendKind::Cpu,
        precision: Precision::Double,
        ..Options::default()
    };
    let mut worst = [[0.0f64; 17]; 2];
    for (ndims, n) in [(1usize, 64i64), (2, 40), (3, 32)] {
        let modes = Modes::new(ndims as i32, &vec![n; ndims])?;
        for _ in 0..repeats {
            let points: Vec<f64> = rng.points(ndims * npoints);
            let f: Vec<Complex64> = rng.complex(modes.total());
            let reference = direct::type2(&modes, &points, npoints, 1, &f);
            let rms = (reference.iter().map(|c| c.norm_sqr()).sum::<f64>() / npoints as f64).sqrt();
            for (u, upsampling) in [Upsampling::Two, Upsampling::OneQuarter]
                .into_iter()
                .enumerate()
            {
                for width in 2..=16 {
                    let mut spec =
                        NufftSpec::new(NufftType::Two, modes, 1, 1e-6, 1, true, Some(upsampling))?;
                    spec.kernel = KernelParams::with_width(width, upsampling);
                    for a in 0..3 {
                        spec.fine[a] = spec.kernel.fine_size(modes.sizes[a])?;
                    }
                    let plan = Nufft::with_spec(spec, &points, npoints, &options, None)?;
                    let mut c = vec![Complex64::default(); npoints];
                    let mut grid = f.clone();
                    plan.execute_c64(&mut c, &mut grid)?;
                    let max = c
                        .iter()
                        .zip(&reference)
                        .map(|(a, b)| (a - b).norm() / rms)
                        .fold(0.0, f64::max);
                    worst[u][width] = worst[u][width].max(max);
                }
            }
        }
    }
    for (u, sigma) in [2.0, 1.25].into_iter().enumerate() {
        let line: Vec<String> = (2..=16).map(|w| format!("{:.2e}", worst[u][w])).collect();
        println!(
            "sigma {sigma}: w = 2..16 max pointwise errors: {}",
            line.join(", ")
        );
    }
    Ok(())
}

fn main() -> horecon::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("table") {
        return table(arg(2, 1000), arg(3, 2));
    }
    if std::env::args().nth(1).as_deref() == Some("pointwise") {
        return pointwise(arg(2, 1), arg(3, 64) as i64, arg(4, 3000));
    }
    if std::env::args().nth(1).as_deref() == Some("sweep") {
        return sweep(arg(2, 1), arg(3, 64) as i64, arg(4, 300), arg(5, 2));
    }
    let ndims = arg(1, 2);
    let n = arg(2, 24) as i64;
    let npoints = arg(3, 400);
    let repeats = arg(4, 3);
    let delta: usize = std::env::var("HORECON_NUFFT_WIDTH_DELTA")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let sizes = vec![n; ndims];
    let modes = Modes::new(ndims as i32, &sizes)?;
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1du64);
    println!("ndims={ndims} n={n} M={npoints} width+{delta}");
    println!("tolerance  sigma  arith  w   beta    type1     type2");
    for double in [false, true] {
        let decades = if double { 12 } else { 6 };
        for exponent in 1..=decades {
            let tolerance = 10f64.powi(-exponent);
            for upsampling in [Upsampling::Two, Upsampling::OneQuarter] {
                let mut spec = NufftSpec::new(
                    NufftType::One,
                    modes,
                    1,
                    tolerance,
                    1,
                    double,
                    Some(upsampling),
                )?;
                if delta > 0 {
                    let k = spec.kernel;
                    let width = k.width + delta;
                    spec.kernel = KernelParams {
                        width,
                        beta: k.beta * width as f64 / k.width as f64,
                        upsampling,
                    };
                    for a in 0..3 {
                        spec.fine[a] = spec.kernel.fine_size(modes.sizes[a])?;
                    }
                }
                let options = Options {
                    backend: BackendKind::Cpu,
                    precision: if double {
                        Precision::Double
                    } else {
                        Precision::Accurate
                    },
                    ..Options::default()
                };
                let mut worst = [0.0f64; 2];
                for _ in 0..repeats {
                    let points: Vec<f64> = rng.points(ndims * npoints);
                    for (k, kind) in [NufftType::One, NufftType::Two].into_iter().enumerate() {
                        let mut s = spec.clone();
                        s.kind = kind;
                        let plan = Nufft::with_spec(s, &points, npoints, &options, None)?;
                        let len = if kind == NufftType::One {
                            npoints
                        } else {
                            modes.total()
                        };
                        let input: Vec<Complex64> = rng.complex(len);
                        let reference = match kind {
                            NufftType::One => direct::type1(&modes, &points, 1, &input),
                            NufftType::Two => direct::type2(&modes, &points, npoints, 1, &input),
                        };
                        let got: Vec<Complex64> = if double {
                            let mut c = vec![Complex64::default(); npoints];
                            let mut f = vec![Complex64::default(); modes.total()];
                            if kind == NufftType::One {
                                c.copy_from_slice(&input);
                            } else {
                                f.copy_from_slice(&input);
                            }
                            plan.execute_c64(&mut c, &mut f)?;
                            if kind == NufftType::One {
                                f
                            } else {
                                c
                            }
                        } else {
                            let to32 = |v: &Complex64| Complex32::new(v.re as f32, v.im as f32);
                            let mut c = vec![Complex32::default(); npoints];
                            let mut f = vec![Complex32::default(); modes.total()];
                            if kind == NufftType::One {
                                c.iter_mut().zip(&input).for_each(|(o, v)| *o = to32(v));
                            } else {
                                f.iter_mut().zip(&input).for_each(|(o, v)| *o = to32(v));
                            }
                            plan.execute(&mut c, &mut f)?;
                            let out = if kind == NufftType::One { f } else { c };
                            out.iter()
                                .map(|v| Complex64::new(v.re as f64, v.im as f64))
                                .collect()
                        };
                        // The reference of float32 runs is the direct sum of the
                        // float32-rounded input (what the transform was given).
                        let reference = if double {
                            reference
                        } else {
                            let rounded: Vec<Complex64> = input
                                .iter()
                                .map(|v| Complex64::new(v.re as f32 as f64, v.im as f32 as f64))
                                .collect();
                            match kind {
                                NufftType::One => direct::type1(&modes, &points, 1, &rounded),
                                NufftType::Two => {
                                    direct::type2(&modes, &points, npoints, 1, &rounded)
                                }
                            }
                        };
                        let num: f64 = got
                            .iter()
                            .zip(&reference)
                            .map(|(a, b)| (a - b).norm_sqr())
                            .sum();
                        let den: f64 = reference.iter().map(|b| b.norm_sqr()).sum();
                        worst[k] = worst[k].max((num / den).sqrt());
                    }
                }
                println!(
                    "{tolerance:8.0e}  {:5}  {}  {:2}  {:6.2}  {:.2e}  {:.2e}{}",
                    upsampling.factor(),
                    if double { "f64" } else { "f32" },
                    spec.kernel.width,
                    spec.kernel.beta,
                    worst[0],
                    worst[1],
                    if worst[0].max(worst[1]) > tolerance {
                        "  > tolerance"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    Ok(())
}
