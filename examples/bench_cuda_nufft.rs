//! Benchmark of the CUDA NUFFT (issue 14): single precision, execute only
//! (the device-level interface on data already on the GPU; median of
//! `reps` runs), points uniform in [−π, π) as cuFINUFFT's cuperftest draws
//! them, and the relative error against float64 direct sums on a random
//! subset (16 outputs of the first transform).
//!
//! Run: cargo run --release --example bench_cuda_nufft [case ...]
//! Cases: a3d (256³ modes, 10⁷ points, 1e-6), b96 (96³, 221 184 points, 16
//! transforms, 1e-3), b200 (200×200×144, 1.44 M points, 16, 1e-3), b512
//! (512², 262 144 points, 8, 1e-4); default all. Each runs types 1 and 2.
//! HORECON_BENCH_REPS (default 10). HORECON_CUDA_NUFFT_METHOD / _BINS /
//! _FIXED=0 override the executor's choices; HORECON_BENCH_TRANSFORMS,
//! HORECON_BENCH_TOLERANCE and HORECON_BENCH_UPSAMPLING=1.25 (default σ = 2)
//! the case's.

use horecon::backend::cuda::nufft::CudaNufft;
use horecon::nufft::{Modes, NufftSpec, NufftType, Upsampling};
use num_complex::{Complex32, Complex64};
use rayon::prelude::*;
use std::time::Instant;

struct Case {
    name: &'static str,
    modes: &'static [i64],
    points: usize,
    transforms: i32,
    tolerance: f64,
}

const CASES: [Case; 4] = [
    Case {
        name: "a3d",
        modes: &[256, 256, 256],
        points: 10_000_000,
        transforms: 1,
        tolerance: 1e-6,
    },
    Case {
        name: "b96",
        modes: &[96, 96, 96],
        points: 221_184,
        transforms: 16,
        tolerance: 1e-3,
    },
    Case {
        name: "b200",
        modes: &[200, 200, 144],
        points: 1_440_000,
        transforms: 16,
        tolerance: 1e-3,
    },
    Case {
        name: "b512",
        modes: &[512, 512],
        points: 262_144,
        transforms: 8,
        tolerance: 1e-4,
    },
];

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn mode_vector(modes: &Modes, index: usize) -> [f64; 3] {
    let mut k = [0.0; 3];
    let mut rest = index;
    for (a, value) in k.iter_mut().enumerate() {
        let n = modes.sizes[a];
        *value = (modes.first(a) + (rest % n) as i64) as f64;
        rest /= n;
    }
    k
}

/// A numeric environment override.
fn knob(name: &str) -> Option<f64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let reps = knob("HORECON_BENCH_REPS").map_or(10, |v| v as usize);
    let device = horecon::backend::cuda::context::device(0)?;
    println!("device: {} ({} SMs)", device.name, device.multiprocessors);
    println!("| case | type | modes | M | T | tol | ms (execute) | plan s | rel. error (16 outputs) | method |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for case in CASES
        .iter()
        .filter(|c| wanted.is_empty() || wanted.iter().any(|w| w == c.name))
    {
        let ndims = case.modes.len();
        let modes = Modes::new(ndims as i32, case.modes)?;
        let transforms = knob("HORECON_BENCH_TRANSFORMS").map_or(case.transforms, |v| v as i32);
        let tolerance = knob("HORECON_BENCH_TOLERANCE").unwrap_or(case.tolerance);
        let upsampling = if knob("HORECON_BENCH_UPSAMPLING") == Some(1.25) {
            Upsampling::OneQuarter
        } else {
            Upsampling::Two
        };
        let m = case.points;
        let mut rng = Lcg(0x5eed ^ m as u64);
        let pi = std::f64::consts::PI;
        let x: Vec<f64> = (0..ndims * m).map(|_| rng.next() * 2.0 * pi - pi).collect();
        for kind in [NufftType::One, NufftType::Two] {
            let spec = NufftSpec::new(
                kind,
                modes,
                -1,
                tolerance,
                transforms,
                false,
                Some(upsampling),
            )?;
            let start = Instant::now();
            let plan = CudaNufft::new(&spec, &x, m, 0)?;
            let plan_s = start.elapsed().as_secs_f64();
            let n = modes.total();
            let t = transforms as usize;
            // One host call on random data for the error (transform 0).
            let mut nonuniform = vec![Complex32::default(); t * m];
            let mut grid = vec![Complex32::default(); t * n];
            let input: &mut [Complex32] = if kind == NufftType::One {
                &mut nonuniform
            } else {
                &mut grid
            };
            for v in input.iter_mut() {
                *v = Complex32::new(
                    (rng.next() * 2.0 - 1.0) as f32,
                    (rng.next() * 2.0 - 1.0) as f32,
                );
            }
            horecon::nufft::NufftExecutor::execute(&plan, &mut nonuniform, &mut grid)?;
            let picks: Vec<usize> = (0..16)
                .map(|_| (rng.next() * if kind == NufftType::One { n } else { m } as f64) as usize)
                .collect();
            let point = |j: usize| -> [f64; 3] {
                let mut p = [0.0; 3];
                for (a, v) in p.iter_mut().enumerate().take(ndims) {
                    *v = x[a * m + j];
                }
                p
            };
            let (got, reference): (Vec<Complex64>, Vec<Complex64>) = picks
                .par_iter()
                .map(|&i| match kind {
                    NufftType::One => {
                        let k = mode_vector(&modes, i);
                        let sum: Complex64 = (0..m)
                            .map(|j| {
                                let p = point(j);
                                let c = nonuniform[j];
                                Complex64::new(c.re as f64, c.im as f64)
                                    * Complex64::from_polar(
                                        1.0,
                                        -(k[0] * p[0] + k[1] * p[1] + k[2] * p[2]),
                                    )
                            })
                            .sum();
                        (Complex64::new(grid[i].re as f64, grid[i].im as f64), sum)
                    }
                    NufftType::Two => {
                        let p = point(i);
                        let sum: Complex64 = (0..n)
                            .map(|q| {
                                let k = mode_vector(&modes, q);
                                let f = grid[q];
                                Complex64::new(f.re as f64, f.im as f64)
                                    * Complex64::from_polar(
                                        1.0,
                                        -(k[0] * p[0] + k[1] * p[1] + k[2] * p[2]),
                                    )
                            })
                            .sum();
                        (
                            Complex64::new(nonuniform[i].re as f64, nonuniform[i].im as f64),
                            sum,
                        )
                    }
                })
                .unzip();
            let num: f64 = got
                .iter()
                .zip(&reference)
                .map(|(a, b)| (a - b).norm_sqr())
                .sum();
            let den: f64 = reference.iter().map(|b| b.norm_sqr()).sum();
            let error = (num / den).sqrt();
            let seconds = plan.time_execute(reps)?;
            println!(
                "| {} | {} | {:?} | {} | {} | {:e} | {:.3} | {:.3} | {:.2e} | {} |",
                case.name,
                if kind == NufftType::One { 1 } else { 2 },
                case.modes,
                m,
                t,
                tolerance,
                seconds * 1e3,
                plan_s,
                error,
                plan.describe()
            );
        }
    }
    Ok(())
}
