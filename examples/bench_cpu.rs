//! CPU benchmark on the cases of shared/bench (same sizes and phase
//! magnitudes as cases.py): Gpairs/s = N·M / seconds per operator and
//! precision mode, and the relative error against a float64 direct sum on
//! a random subset of outputs.
//!
//!   cargo run --release --example bench_cpu -- [case ...] [--modes accurate,fast,double] [--reps 3]
//!
//! Cases: bieri-64, bieri-128 (default), bieri-256, fourier-256-1coil.

#![allow(clippy::needless_range_loop)]
use horecon::model::harmonics::solid_harmonic;
use horecon::{Complex32, Options, Plan, Precision};
use num_complex::Complex64;
use std::time::Instant;

const FOV: f64 = 0.22;
const READOUT: f64 = 0.030;

struct Case {
    name: String,
    n: [usize; 3],
    coils: usize,
    samples: usize,
    terms: usize,
    positions: Vec<f64>,
    coefficients: Vec<f64>,
    omega: Option<Vec<f64>>,
    times: Vec<f64>,
    sens: Option<Vec<Complex32>>,
}

fn lcg(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 11) as f64) / ((1u64 << 53) as f64)
}

/// The cases.py construction (spiral + eddy-current-like higher orders).
fn make_case(name: &str) -> Case {
    let (nx, ny, nz, coils, terms, offres) = match name {
        "bieri-64" => (64, 64, 1, 8, 16, true),
        "bieri-128" => (128, 128, 1, 8, 16, true),
        "bieri-256" => (256, 256, 1, 8, 16, true),
        "fourier-256-1coil" => (256, 256, 1, 1, 3, false),
        other => panic!("unknown case {other}"),
    };
    let n = nx * ny * nz;
    let m = if coils > 1 { n / 8 } else { n };
    let axis = |i: usize, len: usize| {
        if len > 1 {
            (i as f64 - (len / 2) as f64) * FOV / len as f64
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
    let mut state = 12345u64;
    let kmax = std::f64::consts::PI * nx as f64 / FOV;
    let turns = (nx as f64 / 8.0).max(1.0);
    let mut c = vec![0.0; terms * m];
    let tau: Vec<f64> = (0..m)
        .map(|j| {
            if m > 1 {
                j as f64 / (m - 1) as f64
            } else {
                0.0
            }
        })
        .collect();
    let tp = std::f64::consts::TAU;
    for j in 0..m {
        let t = tau[j];
        if terms == 3 {
            c[j] = kmax * t * (tp * turns * t).cos();
            c[m + j] = kmax * t * (tp * turns * t).sin();
        } else {
            c[j] = 1.5 * (tp * 3.0 * t).sin();
            c[m + j] = kmax * t * (tp * turns * t).cos();
            c[2 * m + j] = kmax * t * (tp * turns * t).sin();
        }
    }
    for b in 4..terms {
        let amp = if b < 9 { 300.0 } else { 3000.0 };
        let (a, tc) = (
            amp * (2.0 * lcg(&mut state) - 1.0),
            0.1 + 0.4 * lcg(&mut state),
        );
        for j in 0..m {
            c[b * m + j] = a * (1.0 - (-tau[j] / tc).exp());
        }
    }
    let omega = offres.then(|| {
        (0..n)
            .map(|v| {
                let (x, y) = (positions[v], positions[n + v]);
                tp * 60.0
                    * (-((x - 0.03).powi(2) + (y + 0.02).powi(2)) / (2.0 * (0.25 * FOV).powi(2)))
                        .exp()
                    - tp * 25.0
                        * (-((x + 0.05).powi(2) + (y - 0.04).powi(2)) / (2.0 * (0.1 * FOV).powi(2)))
                            .exp()
            })
            .collect()
    });
    let sens = (coils > 1).then(|| {
        let mut s = vec![Complex32::default(); n * coils];
        for l in 0..coils {
            let a = tp * l as f64 / coils as f64;
            let (px, py) = (0.6 * FOV * a.cos(), 0.6 * FOV * a.sin());
            for v in 0..n {
                let (x, y) = (positions[v], positions[n + v]);
                let mag =
                    (-((x - px).powi(2) + (y - py).powi(2)) / (2.0 * (0.5 * FOV).powi(2))).exp();
                let ph = a + 3.0 * (x * a.cos() + y * a.sin());
                s[l * n + v] = Complex32::new((mag * ph.cos()) as f32, (mag * ph.sin()) as f32);
            }
        }
        s
    });
    let times = (0..m).map(|j| READOUT * tau[j]).collect();
    Case {
        name: name.into(),
        n: [nx, ny, nz],
        coils,
        samples: m,
        terms,
        positions,
        coefficients: c,
        omega,
        times,
        sens,
    }
}

impl Case {
    fn voxels(&self) -> usize {
        self.n.iter().product()
    }
    fn phase(&self, j: usize, v: usize) -> f64 {
        let (n, m) = (self.voxels(), self.samples);
        let (x, y, z) = (
            self.positions[v],
            self.positions[n + v],
            self.positions[2 * n + v],
        );
        let mut p = 0.0;
        for b in 0..self.terms {
            let h = if self.terms == 3 {
                [x, y, z][b]
            } else {
                solid_harmonic(b, x, y, z)
            };
            p += self.coefficients[b * m + j] * h;
        }
        if let Some(w) = &self.omega {
            p += w[v] * self.times[j];
        }
        p
    }
    fn sens(&self, l: usize, v: usize) -> Complex64 {
        self.sens.as_ref().map_or(Complex64::new(1.0, 0.0), |s| {
            let c = s[l * self.voxels() + v];
            Complex64::new(c.re as f64, c.im as f64)
        })
    }
    fn plan(&self, precision: Precision) -> Plan {
        let opts = Options {
            precision,
            ..Options::default()
        };
        let mut p = Plan::new(
            opts,
            self.n[0] as i64,
            self.n[1] as i64,
            self.n[2] as i64,
            self.coils as i64,
            self.samples as i64,
        )
        .expect("plan");
        p.set_positions(&self.positions).expect("positions");
        if self.terms == 3 {
            p.set_trajectory(3, &self.coefficients).expect("trajectory");
        } else {
            p.set_solid_harmonics(self.terms as i32, &self.coefficients)
                .expect("harmonics");
        }
        if let Some(w) = &self.omega {
            p.set_off_resonance(Some((w, &self.times)))
                .expect("off-resonance");
        }
        p.set_sensitivities(self.sens.as_deref())
            .expect("sensitivities");
        p
    }
}

/// CPU seconds used by this process so far (user + system).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn rel_error_subset(got: &[Complex32], reference: &[(usize, Complex64)]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (i, r) in reference {
        let g = Complex64::new(got[*i].re as f64, got[*i].im as f64);
        num += (g - r).norm_sqr();
        den += r.norm_sqr();
    }
    (num / den).sqrt()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cases = vec![];
    let mut modes = vec![Precision::Accurate, Precision::Fast, Precision::Double];
    let mut reps = 3;
    let mut reference = true;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--modes" => {
                i += 1;
                modes = args[i]
                    .split(',')
                    .map(|m| match m {
                        "accurate" => Precision::Accurate,
                        "fast" => Precision::Fast,
                        "double" => Precision::Double,
                        o => panic!("unknown mode {o}"),
                    })
                    .collect();
            }
            "--reps" => {
                i += 1;
                reps = args[i].parse().expect("--reps takes a number");
            }
            "--no-reference" => reference = false,
            c => cases.push(c.to_string()),
        }
        i += 1;
    }
    if cases.is_empty() {
        cases.push("bieri-128".into());
    }
    println!("threads: {}", rayon::current_num_threads());
    println!(
        "{:<18} {:<9} {:<8} {:>10} {:>10} {:>14} {:>10}",
        "case", "mode", "op", "ms", "Gpairs/s", "Gpairs/cpu-s", "rel.err"
    );
    for name in &cases {
        let case = make_case(name);
        let (n, m, coils) = (case.voxels(), case.samples, case.coils);
        let pairs = (n * m) as f64;
        let mut state = 99u64;
        let mut rnd = || (2.0 * lcg(&mut state) - 1.0) as f32;
        let image: Vec<Complex32> = (0..n).map(|_| Complex32::new(rnd(), rnd())).collect();
        let data: Vec<Complex32> = (0..m * coils)
            .map(|_| Complex32::new(rnd(), rnd()))
            .collect();
        // float64 references on 64 random outputs of each operator.
        let mut pick = 7u64;
        let checked = if reference { 64 } else { 0 };
        let sample_rows: Vec<usize> = (0..checked)
            .map(|_| (lcg(&mut pick) * (m * coils) as f64) as usize)
            .collect();
        let voxel_rows: Vec<usize> = (0..checked)
            .map(|_| (lcg(&mut pick) * n as f64) as usize)
            .collect();
        let forward_ref: Vec<(usize, Complex64)> = sample_rows
            .iter()
            .map(|&row| {
                let (j, l) = (row % m, row / m);
                let s: Complex64 = (0..n)
                    .map(|v| {
                        case.sens(l, v)
                            * Complex64::from_polar(1.0, case.phase(j, v))
                            * Complex64::new(image[v].re as f64, image[v].im as f64)
                    })
                    .sum();
                (row, s)
            })
            .collect();
        let adjoint_ref: Vec<(usize, Complex64)> = voxel_rows
            .iter()
            .map(|&v| {
                let mut s = Complex64::default();
                for j in 0..m {
                    let e = Complex64::from_polar(1.0, -case.phase(j, v));
                    for l in 0..coils {
                        let d = data[l * m + j];
                        s += case.sens(l, v).conj() * e * Complex64::new(d.re as f64, d.im as f64);
                    }
                }
                (v, s)
            })
            .collect();
        for &mode in &modes {
            let plan = case.plan(mode);
            let mut d = vec![Complex32::default(); m * coils];
            let mut x = vec![Complex32::default(); n];
            plan.forward(&image, &mut d).expect("forward"); // warm-up builds the operator
            for (op, run) in [("forward", 0), ("adjoint", 1)] {
                let mut best = f64::INFINITY;
                let cpu0 = cpu_seconds();
                for _ in 0..reps {
                    let t = Instant::now();
                    if run == 0 {
                        plan.forward(&image, &mut d).expect("forward");
                    } else {
                        plan.adjoint(&data, &mut x).expect("adjoint");
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                let per_cpu = pairs * reps as f64 / (cpu_seconds() - cpu0);
                let err = if run == 0 {
                    rel_error_subset(&d, &forward_ref)
                } else {
                    rel_error_subset(&x, &adjoint_ref)
                };
                println!(
                    "{:<18} {:<9} {:<8} {:>10.1} {:>10.3} {:>14.3} {:>10.2e}",
                    case.name,
                    format!("{mode:?}").to_lowercase(),
                    op,
                    best * 1e3,
                    pairs / best / 1e9,
                    per_cpu / 1e9,
                    err
                );
            }
        }
    }
}
