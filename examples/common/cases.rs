//! The benchmark cases of shared/bench/cases.py (sizes, formulas and its
//! seeded higher-order draws; images and data from our own generator) and
//! float64 direct sums at a subset of outputs: shared by the benchmarks.
#![allow(dead_code)]

use horecon::{CgOptions, Complex32, Options, Plan, Regularizer};
use num_complex::Complex64;
use rayon::prelude::*;
use std::f64::consts::{PI, TAU};

pub const FOV: f64 = 0.22;
pub const READOUT: f64 = 0.030;

/// The first values of `numpy.random.default_rng(0).random()` (numpy's
/// PCG64): cases.py draws its higher-order amplitudes, rates and eddy terms
/// from that generator as `low + (high − low)·u`, so these reproduce its
/// coefficients exactly (at most 2·(16 − 4) + 3 draws).
const NUMPY_SEED_0: [f64; 27] = [
    0.6369616873214543,
    0.2697867137638703,
    0.04097352393619469,
    0.016527635528529094,
    0.8132702392002724,
    0.9127555772777217,
    0.6066357757671799,
    0.7294965609839984,
    0.5436249914654229,
    0.9350724237877682,
    0.8158535541215322,
    0.002738500170148095,
    0.8574042765875693,
    0.033585575305464355,
    0.7296554464299441,
    0.17565562060255901,
    0.8631789223498866,
    0.5414612202490917,
    0.2997118905373848,
    0.42268722119765845,
    0.028319671145462966,
    0.12428327649956394,
    0.6706244146936303,
    0.6471895115742501,
    0.6153851114812539,
    0.38367755426188344,
    0.997209935789211,
];

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(1e-300, 1.0), self.uniform(0.0, 1.0));
        (-2.0 * u.ln()).sqrt() * (TAU * v).cos()
    }
    pub fn complex(&mut self, n: usize) -> Vec<Complex32> {
        (0..n)
            .map(|_| Complex32::new(self.normal() as f32, self.normal() as f32))
            .collect()
    }
}

pub struct Case {
    pub dims: [usize; 3],
    pub coils: usize,
    pub samples: usize,
    pub terms: usize,
    pub trajectory: bool,
    pub positions: Vec<f64>,
    pub coefficients: Vec<f64>,
    pub off_resonance: Option<(Vec<f64>, Vec<f64>)>,
    pub sensitivities: Option<Vec<Complex32>>,
}

pub fn make_case(name: &str) -> Case {
    let (nx, ny, nz, coils, samples, terms, offres) = match name {
        "bieri-64" => (64, 64, 1, 8, 64 * 64 / 8, 16, true),
        "bieri-128" => (128, 128, 1, 8, 128 * 128 / 8, 16, true),
        "bieri-256" => (256, 256, 1, 8, 256 * 256 / 8, 16, true),
        "bieri-512" => (512, 512, 1, 8, 512 * 512 / 8, 16, true),
        "fourier-256-1coil" => (256, 256, 1, 1, 256 * 256, 3, false),
        "stone-fhd" | "stone-fhd-3k" => (128, 128, 128, 1, 284592, 3, false),
        // 3D higher-order cases (cases.py; ho3d-40 is a 64k-voxel CPU size of the same kind).
        "ho3d-40" => (40, 40, 40, 16, 40 * 40 * 40 / 4, 16, true),
        // issue 17's small CPU case: 77,440 voxels, 6 coils, M = N/3
        "ho3d-77k" => (44, 44, 40, 6, 44 * 44 * 40 / 3, 16, true),
        "ho3d-64" => (64, 64, 64, 16, 64 * 64 * 64 / 4, 16, true),
        "ho3d-96" => (96, 96, 96, 16, 96 * 96 * 96 / 4, 16, true),
        "ho3d-1mm" => (200, 200, 144, 16, 200 * 200 * 144 / 4, 16, true),
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
    // cases.py's draws, in its order: numpy.random.default_rng(seed = 0).
    let mut draws = NUMPY_SEED_0.iter();
    let mut uniform = |lo: f64, hi: f64| lo + (hi - lo) * draws.next().expect("at most 27 draws");
    for b in 4..terms {
        let amp = if b < 9 { 300.0 } else { 3000.0 } * uniform(-1.0, 1.0);
        let rate = uniform(0.1, 0.5);
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
            let e = 5.0 * uniform(-1.0, 1.0);
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

impl Case {
    pub fn voxels(&self) -> usize {
        self.dims.iter().product()
    }

    /// A plan for this case with the given options.
    pub fn plan(&self, options: Options) -> Plan {
        let [nx, ny, nz] = self.dims;
        let mut p = Plan::new(
            options,
            nx as i64,
            ny as i64,
            nz as i64,
            self.coils as i64,
            self.samples as i64,
        )
        .expect("plan");
        p.set_positions(&self.positions).expect("positions");
        if self.trajectory {
            p.set_trajectory(3, &self.coefficients).expect("trajectory");
        } else {
            p.set_solid_harmonics(self.terms as i32, &self.coefficients)
                .expect("harmonics");
        }
        if let Some((w, t)) = &self.off_resonance {
            p.set_off_resonance(Some((w, t))).expect("off-resonance");
        }
        p.set_sensitivities(self.sensitivities.as_deref())
            .expect("sensitivities");
        p
    }
}

/// float64 direct sums at a subset of outputs, from the plan's features.
pub struct Reference<'a> {
    pub plan: &'a Plan,
    pub voxel: horecon::model::Shared<f64>,
    pub sample: horecon::model::Shared<f64>,
    pub terms: usize,
}

impl Reference<'_> {
    pub fn phase(&self, j: usize, v: usize) -> f64 {
        let (n, m) = (self.plan.sizes().voxels, self.plan.sizes().samples);
        TAU * (0..self.terms)
            .map(|f| self.sample[f * m + j] * self.voxel[f * n + v])
            .sum::<f64>()
    }
    pub fn sens(&self, l: usize, v: usize) -> Complex64 {
        match &self.plan.model().sensitivities {
            Some(s) => {
                let c = s[l * self.plan.sizes().voxels + v];
                Complex64::new(c.re as f64, c.im as f64)
            }
            None => Complex64::new(1.0, 0.0),
        }
    }
    pub fn adjoint_at(&self, data: &[Complex32], v: usize) -> Complex64 {
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
    pub fn forward_at(&self, image: &[Complex32], j: usize) -> Vec<Complex64> {
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

pub fn rel(got: &[Complex32], want: &[Complex64]) -> f64 {
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (Complex64::new(g.re as f64, g.im as f64) - w).norm_sqr())
        .sum();
    let den: f64 = want.iter().map(|w| w.norm_sqr()).sum();
    (num / den).sqrt()
}

/// The benchmarks' CG (bench_cuda, bench_multi_gpu): 50 iterations, no early
/// stop, Tikhonov λ = 1e-3.
pub fn cg50() -> CgOptions<'static> {
    CgOptions {
        max_iterations: 50,
        tolerance: 0.0,
        regularizer: Regularizer::Tikhonov,
        lambda: 1e-3,
        ..CgOptions::default()
    }
}
