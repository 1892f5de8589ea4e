//! Shared test helpers: random problems with a printed seed and the float64
//! direct sums of MODEL.md, written independently of the library's kernels.
#![allow(dead_code, clippy::needless_range_loop)]

use horecon::model::harmonics::solid_harmonic;
use horecon::{Complex32, Options, Plan, Precision};
use num_complex::Complex64;

mod grid_problems;
mod higher_order;
#[allow(unused_imports)] // not every test crate uses them
pub use grid_problems::*;
#[allow(unused_imports)]
pub use higher_order::*;

/// A small deterministic generator (SplitMix64), so the tests need no crate.
pub struct Rng(u64);

impl Rng {
    /// Seeded from HORECON_TEST_SEED or the clock; prints the seed.
    pub fn fresh(test: &str) -> Rng {
        let seed = std::env::var("HORECON_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("{test}: seed {seed} (rerun with HORECON_TEST_SEED={seed})");
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
    pub fn int(&mut self, lo: usize, hi_inclusive: usize) -> usize {
        lo + (self.next_u64() % (hi_inclusive - lo + 1) as u64) as usize
    }
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
    pub fn complex(&mut self, n: usize) -> Vec<Complex32> {
        (0..n)
            .map(|_| Complex32::new(self.normal() as f32, self.normal() as f32))
            .collect()
    }
}

/// Positions (3×N, m, column-major) of the lattice `dims` centred as
/// MODEL.md's grid: (i − ⌊n_a/2⌋)·fov/n_a along each axis a.
pub fn centred_grid(dims: [usize; 3], fov: f64) -> Vec<f64> {
    let n: usize = dims.iter().product();
    let mut positions = vec![0.0; 3 * n];
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let v = ix + dims[0] * (iy + dims[1] * iz);
                for (a, i) in [ix, iy, iz].into_iter().enumerate() {
                    positions[a * n + v] = (i as f64 - (dims[a] / 2) as f64) * fov / dims[a] as f64;
                }
            }
        }
    }
    positions
}

/// A random higher-order problem in MODEL.md layouts.
#[derive(Clone, Debug)]
pub struct Problem {
    pub dims: [usize; 3],
    pub coils: usize,
    pub samples: usize,
    pub positions: Vec<f64>,
    /// (nterms, M×B) for the built-in solid harmonics, or a user basis (N×B, M×B).
    pub terms: usize,
    pub user_basis: Option<Vec<f64>>,
    pub coefficients: Vec<f64>,
    pub off_resonance: Option<(Vec<f64>, Vec<f64>)>,
    pub sensitivities: Option<Vec<Complex32>>,
}

impl Problem {
    pub fn voxels(&self) -> usize {
        self.dims.iter().product()
    }

    /// Random sizes up to `max_voxels`, phases up to `max_cycles` cycles from the linear terms.
    pub fn random(
        rng: &mut Rng,
        max_voxels: usize,
        max_samples: usize,
        max_cycles: f64,
    ) -> Problem {
        let nx = rng.int(1, 24);
        let ny = rng.int(1, (max_voxels / nx).clamp(1, 24));
        let nz = rng.int(1, (max_voxels / (nx * ny)).clamp(1, 6));
        let dims = [nx, ny, nz];
        let n = nx * ny * nz;
        let m = rng.int(1, max_samples);
        let coils = rng.int(1, 5);
        let fov = 0.22;
        let positions: Vec<f64> = (0..3 * n)
            .map(|_| rng.range(-fov / 2.0, fov / 2.0))
            .collect();
        let with_user_basis = rng.uniform() < 0.25;
        let terms = if with_user_basis {
            rng.int(1, 7)
        } else {
            [1, 4, 9, 16][rng.int(0, 3)]
        };
        let kmax = max_cycles * std::f64::consts::TAU / (fov / 2.0); // rad/m giving max_cycles at the edge
        let mut coefficients = vec![0.0; m * terms];
        for b in 0..terms {
            let scale = match if with_user_basis {
                1
            } else {
                horecon::model::harmonics::ORDER[b]
            } {
                0 => 3.0,
                1 => kmax,
                2 => 300.0,
                _ => 3000.0,
            };
            for j in 0..m {
                coefficients[b * m + j] = scale * rng.range(-1.0, 1.0);
            }
        }
        let user_basis = with_user_basis.then(|| {
            (0..n * terms)
                .map(|_| rng.range(-fov / 2.0, fov / 2.0))
                .collect()
        });
        let off_resonance = (rng.uniform() < 0.6).then(|| {
            let omega = (0..n)
                .map(|_| rng.range(-1.0, 1.0) * 2.0 * std::f64::consts::PI * 200.0)
                .collect();
            let times = (0..m).map(|j| 0.03 * j as f64 / m as f64).collect();
            (omega, times)
        });
        let sensitivities = (coils > 1 || rng.uniform() < 0.5).then(|| rng.complex(n * coils));
        Problem {
            dims,
            coils,
            samples: m,
            positions,
            terms,
            user_basis,
            coefficients,
            off_resonance,
            sensitivities,
        }
    }

    /// Pure Fourier encoding on the lattice `dims` ([`centred_grid`], field of
    /// view 0.2 m per axis): `samples` random k uniform in the Nyquist box
    /// |k_a| ≤ π·dims[a]/fov along each axis the lattice spans, `coils`
    /// coils with random sensitivities (none for one coil).
    pub fn fourier_grid(rng: &mut Rng, dims: [usize; 3], samples: usize, coils: usize) -> Problem {
        let fov = 0.2;
        let m = samples;
        let mut coefficients = vec![0.0; 4 * m];
        for a in (0..3).filter(|&a| dims[a] > 1) {
            let kmax = std::f64::consts::PI * dims[a] as f64 / fov;
            for k in &mut coefficients[(a + 1) * m..(a + 2) * m] {
                *k = rng.range(-kmax, kmax);
            }
        }
        let n: usize = dims.iter().product();
        Problem {
            dims,
            coils,
            samples: m,
            positions: centred_grid(dims, fov),
            terms: 4,
            user_basis: None,
            coefficients,
            off_resonance: None,
            sensitivities: (coils > 1).then(|| rng.complex(n * coils)),
        }
    }

    pub fn basis_value(&self, b: usize, n: usize) -> f64 {
        let nv = self.voxels();
        match &self.user_basis {
            Some(h) => h[b * nv + n],
            None => solid_harmonic(
                b,
                self.positions[n],
                self.positions[nv + n],
                self.positions[2 * nv + n],
            ),
        }
    }

    pub fn phase(&self, j: usize, n: usize) -> f64 {
        let m = self.samples;
        let mut phi: f64 = (0..self.terms)
            .map(|b| self.coefficients[b * m + j] * self.basis_value(b, n))
            .sum();
        if let Some((omega, times)) = &self.off_resonance {
            phi += omega[n] * times[j];
        }
        phi
    }

    pub fn sensitivity(&self, c: usize, n: usize) -> Complex64 {
        match &self.sensitivities {
            Some(s) => {
                let v = s[c * self.voxels() + n];
                Complex64::new(v.re as f64, v.im as f64)
            }
            None => Complex64::new(1.0, 0.0),
        }
    }

    /// float64 direct sum d = E ρ.
    pub fn forward_f64(&self, image: &[Complex32]) -> Vec<Complex64> {
        let (n, m) = (self.voxels(), self.samples);
        let mut d = vec![Complex64::default(); m * self.coils];
        for j in 0..m {
            for v in 0..n {
                let e = Complex64::from_polar(1.0, self.phase(j, v));
                let x = Complex64::new(image[v].re as f64, image[v].im as f64);
                for c in 0..self.coils {
                    d[c * m + j] += self.sensitivity(c, v) * e * x;
                }
            }
        }
        d
    }

    /// float64 direct sum ρ = Eᴴ d.
    pub fn adjoint_f64(&self, data: &[Complex32]) -> Vec<Complex64> {
        let (n, m) = (self.voxels(), self.samples);
        let mut x = vec![Complex64::default(); n];
        for v in 0..n {
            for j in 0..m {
                let e = Complex64::from_polar(1.0, -self.phase(j, v));
                for c in 0..self.coils {
                    let d = data[c * m + j];
                    x[v] += self.sensitivity(c, v).conj()
                        * e
                        * Complex64::new(d.re as f64, d.im as f64);
                }
            }
        }
        x
    }

    pub fn plan(&self, precision: Precision) -> Plan {
        self.plan_with(Options {
            precision,
            ..Options::default()
        })
    }

    /// A plan of this problem with the given options.
    pub fn plan_with(&self, options: Options) -> Plan {
        let [nx, ny, nz] = self.dims;
        let mut plan = Plan::new(
            options,
            nx as i64,
            ny as i64,
            nz as i64,
            self.coils as i64,
            self.samples as i64,
        )
        .expect("plan");
        plan.set_positions(&self.positions).expect("positions");
        match &self.user_basis {
            Some(h) => plan
                .set_basis(self.terms as i32, h, &self.coefficients)
                .expect("basis"),
            None => plan
                .set_solid_harmonics(self.terms as i32, &self.coefficients)
                .expect("harmonics"),
        }
        if let Some((w, t)) = &self.off_resonance {
            plan.set_off_resonance(Some((w, t))).expect("off-resonance");
        }
        plan.set_sensitivities(self.sensitivities.as_deref())
            .expect("sensitivities");
        plan
    }

    /// Dense E ((M·L) × N), float64, row c·M + j.
    pub fn dense(&self) -> Vec<Vec<Complex64>> {
        let (n, m) = (self.voxels(), self.samples);
        let mut rows = vec![vec![Complex64::default(); n]; m * self.coils];
        for c in 0..self.coils {
            for j in 0..m {
                for v in 0..n {
                    rows[c * m + j][v] =
                        self.sensitivity(c, v) * Complex64::from_polar(1.0, self.phase(j, v));
                }
            }
        }
        rows
    }
}

/// ‖a − b‖ / ‖b‖.
pub fn rel_error(a: &[Complex32], b: &[Complex64]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(a, b)| (Complex64::new(a.re as f64, a.im as f64) - b).norm_sqr())
        .sum();
    let den: f64 = b.iter().map(|b| b.norm_sqr()).sum();
    (num / den.max(1e-300)).sqrt()
}

/// A relative RMS error pooled over several results: sqrt(Σ‖a − b‖² / Σ‖b‖²).
#[derive(Clone, Copy, Debug, Default)]
pub struct PooledError {
    difference: f64,
    energy: f64,
}

impl PooledError {
    /// Adds one result `a` against its reference `b`.
    pub fn add(&mut self, a: &[Complex32], b: &[Complex64]) {
        self.difference += a
            .iter()
            .zip(b)
            .map(|(a, b)| (Complex64::new(a.re as f64, a.im as f64) - b).norm_sqr())
            .sum::<f64>();
        self.energy += b.iter().map(|b| b.norm_sqr()).sum::<f64>();
    }

    pub fn relative(&self) -> f64 {
        (self.difference / self.energy.max(1e-300)).sqrt()
    }
}

/// Errors below this are float32 rounding (a plan whose expansion is exact,
/// such as a single voxel's, measures 1e-8 to 3e-7 in its float32 results).
pub const ROUNDING: f64 = 1e-6;

/// The certificate `estimated` is within 3× of the true error `truth`, or
/// both are at rounding level ([`ROUNDING`]); `case` names the case.
pub fn assert_honest(estimated: f64, truth: f64, case: &str) {
    let (e, t) = (estimated.max(ROUNDING), truth.max(ROUNDING));
    assert!(
        e <= 3.0 * t && t <= 3.0 * e,
        "{case}: estimated {estimated:.3e} vs true {truth:.3e}"
    );
}

pub fn to_c64(a: &[Complex32]) -> Vec<Complex64> {
    a.iter()
        .map(|a| Complex64::new(a.re as f64, a.im as f64))
        .collect()
}

/// ⟨a, b⟩ = Σ conj(a)·b in float64.
pub fn inner(a: &[Complex32], b: &[Complex32]) -> Complex64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| {
            Complex64::new(a.re as f64, -a.im as f64) * Complex64::new(b.re as f64, b.im as f64)
        })
        .sum()
}

/// E x and Eᴴ d of `plan` (image and data as given).
pub fn apply(
    plan: &Plan,
    image: &[Complex32],
    data: &[Complex32],
) -> (Vec<Complex32>, Vec<Complex32>) {
    let mut d = vec![Complex32::default(); data.len()];
    plan.forward(image, &mut d).expect("forward");
    let mut x = vec![Complex32::default(); image.len()];
    plan.adjoint(data, &mut x).expect("adjoint");
    (d, x)
}

/// A random image and data of `problem`'s sizes (drawn in that order).
pub fn random_inputs(rng: &mut Rng, problem: &Problem) -> (Vec<Complex32>, Vec<Complex32>) {
    let image = rng.complex(problem.voxels());
    let data = rng.complex(problem.samples * problem.coils);
    (image, data)
}
