//! GPU benchmark of the CUDA backend on the cases of shared/bench/README.md
//! (sizes and formulas of cases.py; the random parts drawn from our own
//! generator). Prints, per case and precision mode, E and Eᴴ in ms and
//! Gpairs/s (device-resident kernel time and the C-API call with its
//! transfers), the relative RMS error against a float64 direct sum on a
//! random subset of outputs, and 50 CG iterations end to end on bieri-512.
//!
//! Run: cargo run --release --example bench_cuda [case ...]

use horecon::backend::cuda::{context, CudaOperator};
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer};
use num_complex::Complex64;
use rayon::prelude::*;
use std::f64::consts::{PI, TAU};
use std::time::Instant;

const FOV: f64 = 0.22;
const READOUT: f64 = 0.030;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(1e-300, 1.0), self.uniform(0.0, 1.0));
        (-2.0 * u.ln()).sqrt() * (TAU * v).cos()
    }
    fn complex(&mut self, n: usize) -> Vec<Complex32> {
        (0..n)
            .map(|_| Complex32::new(self.normal() as f32, self.normal() as f32))
            .collect()
    }
}

struct Case {
    dims: [usize; 3],
    coils: usize,
    samples: usize,
    terms: usize,
    trajectory: bool,
    positions: Vec<f64>,
    coefficients: Vec<f64>,
    off_resonance: Option<(Vec<f64>, Vec<f64>)>,
    sensitivities: Option<Vec<Complex32>>,
}

fn make_case(name: &str) -> Case {
    let (nx, ny, nz, coils, samples, terms, offres) = match name {
        "bieri-256" => (256, 256, 1, 8, 256 * 256 / 8, 16, true),
        "bieri-512" => (512, 512, 1, 8, 512 * 512 / 8, 16, true),
        "fourier-256-1coil" => (256, 256, 1, 1, 256 * 256, 3, false),
        "stone-fhd" | "stone-fhd-3k" => (128, 128, 128, 1, 284592, 3, false),
        other => panic!("unknown case {other}"),
    };
    let n = nx * ny * nz;
    let axis = |k: usize, count: usize| {
        if count > 1 {
            (k as f64 - (count / 2) as f64) * FOV / count as f64
        } else {
            0.0
        }
    };
    let mut positions = vec![0.0; 3 * n];
    for iz in 0..nz {
        for iy in 0..ny {
            for ix in 0..nx {
                let v = ix + nx * (iy + ny * iz);
                positions[v] = axis(ix, nx);
                positions[n + v] = axis(iy, ny);
                positions[2 * n + v] = axis(iz, nz);
            }
        }
    }
    let mut rng = Rng(7);
    let m = samples;
    let kmax = PI * nx as f64 / FOV;
    let turns = (nx as f64 / 8.0).max(1.0);
    let mut c = vec![0.0; terms * m];
    for j in 0..m {
        let tau = if m > 1 {
            j as f64 / (m - 1) as f64
        } else {
            0.0
        };
        if terms >= 3 {
            c[m + j] = kmax * tau * (TAU * turns * tau).cos();
            c[2 * m + j] = kmax * tau * (TAU * turns * tau).sin();
        }
        if terms >= 4 && nz > 1 {
            c[3 * m + j] = (PI * nz as f64 / FOV) * (2.0 * ((tau * nz as f64 * 4.0) % 1.0) - 1.0);
        }
        if terms != 3 {
            c[j] = 1.5 * (TAU * 3.0 * tau).sin();
        }
        if name == "stone-fhd-3k" {
            // cases.py leaves the x coefficient of a plain trajectory at 0; this
            // variant gives it a stack-like sweep so that all three terms are live.
            c[j] = (PI * nz as f64 / FOV) * (2.0 * ((tau * nz as f64 * 4.0) % 1.0) - 1.0);
        }
    }
    for b in 4..terms {
        let amp = if b < 9 { 300.0 } else { 3000.0 } * rng.uniform(-1.0, 1.0);
        let rate = rng.uniform(0.1, 0.5);
        for j in 0..m {
            let tau = if m > 1 {
                j as f64 / (m - 1) as f64
            } else {
                0.0
            };
            c[b * m + j] = amp * (1.0 - (-tau / rate).exp());
        }
    }
    if terms >= 4 {
        for b in 1..4 {
            let e = 5.0 * rng.uniform(-1.0, 1.0);
            for j in 0..m {
                let tau = if m > 1 {
                    j as f64 / (m - 1) as f64
                } else {
                    0.0
                };
                c[b * m + j] += e * (TAU * tau).sin();
            }
        }
    }
    let off_resonance = offres.then(|| {
        let omega = (0..n)
            .map(|v| {
                let (x, y, z) = (positions[v], positions[n + v], positions[2 * n + v]);
                let s1 = 2.0 * (0.25 * FOV).powi(2);
                let s2 = 2.0 * (0.1 * FOV).powi(2);
                TAU * 60.0 * (-((x - 0.03).powi(2) + (y + 0.02).powi(2) + z * z) / s1).exp()
                    - TAU * 25.0 * (-((x + 0.05).powi(2) + (y - 0.04).powi(2)) / s2).exp()
            })
            .collect();
        let times = (0..m)
            .map(|j| READOUT * j as f64 / (m.max(2) - 1) as f64)
            .collect();
        (omega, times)
    });
    let sensitivities = (coils > 1).then(|| {
        let mut s = vec![Complex32::default(); n * coils];
        for l in 0..coils {
            let a = TAU * l as f64 / coils as f64;
            let (px, py) = (0.6 * FOV * a.cos(), 0.6 * FOV * a.sin());
            for v in 0..n {
                let (x, y, z) = (positions[v], positions[n + v], positions[2 * n + v]);
                let mag = (-((x - px).powi(2) + (y - py).powi(2) + z * z)
                    / (2.0 * (0.5 * FOV).powi(2)))
                .exp();
                let ph = a + 3.0 * (x * a.cos() + y * a.sin());
                s[l * n + v] = Complex32::new((mag * ph.cos()) as f32, (mag * ph.sin()) as f32);
            }
        }
        s
    });
    Case {
        dims: [nx, ny, nz],
        coils,
        samples,
        terms,
        trajectory: terms == 3,
        positions,
        coefficients: c,
        off_resonance,
        sensitivities,
    }
}

fn plan(case: &Case, precision: Precision) -> Plan {
    let options = Options {
        backend: BackendKind::Cuda,
        precision,
        ..Options::default()
    };
    let [nx, ny, nz] = case.dims;
    let mut p = Plan::new(
        options,
        nx as i64,
        ny as i64,
        nz as i64,
        case.coils as i64,
        case.samples as i64,
    )
    .expect("CUDA plan");
    p.set_positions(&case.positions).expect("positions");
    if case.trajectory {
        p.set_trajectory(3, &case.coefficients).expect("trajectory");
    } else {
        p.set_solid_harmonics(case.terms as i32, &case.coefficients)
            .expect("harmonics");
    }
    if let Some((w, t)) = &case.off_resonance {
        p.set_off_resonance(Some((w, t))).expect("off-resonance");
    }
    p.set_sensitivities(case.sensitivities.as_deref())
        .expect("sensitivities");
    p
}

/// float64 direct sums at a subset of outputs, from the plan's features.
struct Reference<'a> {
    plan: &'a Plan,
    voxel: Vec<f64>,
    sample: Vec<f64>,
    terms: usize,
}

impl Reference<'_> {
    fn phase(&self, j: usize, v: usize) -> f64 {
        let (n, m) = (self.plan.sizes().voxels, self.plan.sizes().samples);
        TAU * (0..self.terms)
            .map(|f| self.sample[f * m + j] * self.voxel[f * n + v])
            .sum::<f64>()
    }
    fn sens(&self, l: usize, v: usize) -> Complex64 {
        match &self.plan.model().sensitivities {
            Some(s) => {
                let c = s[l * self.plan.sizes().voxels + v];
                Complex64::new(c.re as f64, c.im as f64)
            }
            None => Complex64::new(1.0, 0.0),
        }
    }
    fn adjoint_at(&self, data: &[Complex32], v: usize) -> Complex64 {
        let s = self.plan.sizes();
        let per_coil: Vec<Complex64> = (0..s.coils)
            .map(|l| {
                (0..s.samples)
                    .map(|j| {
                        let d = data[l * s.samples + j];
                        Complex64::from_polar(1.0, -self.phase(j, v))
                            * Complex64::new(d.re as f64, d.im as f64)
                    })
                    .sum()
            })
            .collect();
        per_coil
            .iter()
            .enumerate()
            .map(|(l, y)| self.sens(l, v).conj() * y)
            .sum()
    }
    fn forward_at(&self, image: &[Complex32], j: usize) -> Vec<Complex64> {
        let s = self.plan.sizes();
        (0..s.voxels)
            .into_par_iter()
            .fold(
                || vec![Complex64::default(); s.coils],
                |mut acc, v| {
                    let e = Complex64::from_polar(1.0, self.phase(j, v))
                        * Complex64::new(image[v].re as f64, image[v].im as f64);
                    for (l, a) in acc.iter_mut().enumerate() {
                        *a += self.sens(l, v) * e;
                    }
                    acc
                },
            )
            .reduce(
                || vec![Complex64::default(); s.coils],
                |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect(),
            )
    }
}

fn rel(got: &[Complex32], want: &[Complex64]) -> f64 {
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (Complex64::new(g.re as f64, g.im as f64) - w).norm_sqr())
        .sum();
    let den: f64 = want.iter().map(|w| w.norm_sqr()).sum();
    (num / den).sqrt()
}

fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn bench_case(name: &str, modes: &[Precision]) {
    let case = make_case(name);
    let s = (
        case.dims.iter().product::<usize>(),
        case.samples,
        case.coils,
    );
    let pairs = (s.0 * s.1) as f64;
    let mut rng = Rng(11);
    let image = rng.complex(s.0);
    let data = rng.complex(s.1 * s.2);
    let subset = 32;
    let voxels: Vec<usize> = (0..subset)
        .map(|_| (rng.next() % s.0 as u64) as usize)
        .collect();
    let samples: Vec<usize> = (0..subset)
        .map(|_| (rng.next() % s.1 as u64) as usize)
        .collect();
    let mut references: Option<(Vec<Complex64>, Vec<Complex64>)> = None;
    for &precision in modes {
        let p = plan(&case, precision);
        let t = Instant::now();
        let features = p.model().features().expect("features");
        let device = context::device(0).expect("device 0");
        let op = CudaOperator::new(device, &features, p.sizes(), precision).expect("operator");
        let build = t.elapsed().as_secs_f64();
        let reps = if pairs > 2e11 { 2 } else { 5 };
        let kf = op.time_resident(true, reps).expect("forward");
        let ka = op.time_resident(false, reps).expect("adjoint");
        // The C-API path (plan's own operator; first call builds it).
        let mut d = vec![Complex32::default(); data.len()];
        let mut x = vec![Complex32::default(); image.len()];
        p.forward(&image, &mut d).expect("forward");
        let af = best_of(reps.min(3), || p.forward(&image, &mut d).expect("forward"));
        p.adjoint(&data, &mut x).expect("adjoint");
        let aa = best_of(reps.min(3), || p.adjoint(&data, &mut x).expect("adjoint"));
        if references.is_none() {
            let r = Reference {
                plan: &p,
                voxel: features.voxel.clone(),
                sample: features.sample.clone(),
                terms: features.terms,
            };
            let adj: Vec<Complex64> = voxels.par_iter().map(|&v| r.adjoint_at(&data, v)).collect();
            let fwd: Vec<Vec<Complex64>> =
                samples.iter().map(|&j| r.forward_at(&image, j)).collect();
            // forward subset in (sample, coil) order
            let fwd: Vec<Complex64> = fwd.into_iter().flatten().collect();
            references = Some((fwd, adj));
        }
        let (fref, aref) = references.as_ref().expect("references");
        let got_f: Vec<Complex32> = samples
            .iter()
            .flat_map(|&j| (0..s.2).map(move |l| (j, l)))
            .map(|(j, l)| d[l * s.1 + j])
            .collect();
        let got_a: Vec<Complex32> = voxels.iter().map(|&v| x[v]).collect();
        let (ef, ea) = (rel(&got_f, fref), rel(&got_a, aref));
        println!(
            "RESULT case={name} mode={precision:?} N={} M={} L={} build_s={build:.3}",
            s.0, s.1, s.2
        );
        println!(
            "RESULT   E : kernel {:9.3} ms {:7.1} Gpairs/s | api {:9.3} ms {:7.1} Gpairs/s | rel err {ef:.2e}",
            kf * 1e3,
            pairs / kf / 1e9,
            af * 1e3,
            pairs / af / 1e9
        );
        println!(
            "RESULT   EH: kernel {:9.3} ms {:7.1} Gpairs/s | api {:9.3} ms {:7.1} Gpairs/s | rel err {ea:.2e}",
            ka * 1e3,
            pairs / ka / 1e9,
            aa * 1e3,
            pairs / aa / 1e9
        );
        println!("RESULT   kernels: {}", op.describe());
    }
}

fn bench_cg() {
    let case = make_case("bieri-512");
    let p = plan(&case, Precision::Accurate);
    let n: usize = case.dims.iter().product();
    let mut rng = Rng(5);
    let data = rng.complex(case.samples * case.coils);
    let t = Instant::now();
    p.operator().expect("operator");
    let build = t.elapsed().as_secs_f64();
    let options = CgOptions {
        max_iterations: 50,
        tolerance: 0.0,
        regularizer: Regularizer::Tikhonov,
        lambda: 1e-3,
        ..CgOptions::default()
    };
    let mut x = vec![Complex32::default(); n];
    let t = Instant::now();
    let info = p.cg(&data, &options, &mut x).expect("cg");
    let wall = t.elapsed().as_secs_f64();
    println!(
        "RESULT case=bieri-512 cg50 accurate: {} iterations, {:.3} s end to end (plan.cg reports {:.3} s; operator build before it {:.3} s), residual {:.3e}",
        info.iterations, wall, info.seconds, build, info.rel_residual
    );
}

/// Kernel shapes on bieri-512 accurate (kernel time and error per shape).
fn sweep() {
    let shapes: &[&[(&str, &str)]] = &[
        &[],
        &[("HORECON_CUDA_UNROLL", "2")],
        &[("HORECON_CUDA_MINB", "5")],
        &[("HORECON_CUDA_SPLIT", "0")],
        &[
            ("HORECON_CUDA_R", "2"),
            ("HORECON_CUDA_UNROLL", "2"),
            ("HORECON_CUDA_MINB", "10"),
        ],
    ];
    for shape in shapes {
        for (k, v) in *shape {
            std::env::set_var(k, v);
        }
        println!("SWEEP shape {shape:?}");
        bench_case("bieri-512", &[Precision::Accurate]);
        for (k, _) in *shape {
            std::env::remove_var(k);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = [
        "bieri-256",
        "bieri-512",
        "fourier-256-1coil",
        "stone-fhd",
        "stone-fhd-3k",
        "cg",
    ];
    let chosen: Vec<&str> = if args.is_empty() {
        all.to_vec()
    } else {
        args.iter().map(|s| s.as_str()).collect()
    };
    match context::device(0) {
        Ok(d) => println!(
            "device: {} (sm_{}{}, {} SMs)",
            d.name, d.capability.0, d.capability.1, d.multiprocessors
        ),
        Err(reason) => {
            println!("skipped: no CUDA device ({reason})");
            return;
        }
    }
    use Precision::*;
    for c in chosen {
        match c {
            "cg" => bench_cg(),
            "sweep" => sweep(),
            "bieri-512:A" => bench_case("bieri-512", &[Accurate]),
            "bieri-256" | "bieri-512" => bench_case(c, &[Accurate, Fast, Double]),
            other => bench_case(other, &[Accurate, Fast]),
        }
    }
}
