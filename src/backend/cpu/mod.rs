//! The CPU backend: rayon over outer points, vectorised kernels picked at
//! run time (AVX-512, AVX2+FMA, or portable).

pub mod fd;
pub mod fft;
pub mod kernel;
pub mod real;
pub mod trig;

use crate::error::{try_vec, Result};
use crate::model::{Features, Sizes};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::solver::{cg, CgProblem, CgSpace, Penalty};
use fd::Grid;
use kernel::{phase_sum, Accurate, Double, Fast, Mode, Points};
use num_complex::{Complex, Complex32};
use rayon::prelude::*;
use real::Real;
use std::sync::{Arc, Mutex};

/// Builds the CPU operator for a model's features in the given precision.
pub fn build(
    features: &Features,
    sizes: Sizes,
    precision: Precision,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    Ok(match precision {
        Precision::Accurate => Box::new(CpuOperator::<Accurate>::new(features, sizes, pool)?),
        Precision::Fast => Box::new(CpuOperator::<Fast>::new(features, sizes, pool)?),
        Precision::Double => Box::new(CpuOperator::<Double>::new(features, sizes, pool)?),
    })
}

type Acc<Mo> = Complex<<Mo as Mode>::Acc>;

/// E on the CPU for one precision mode: features converted once to the
/// mode's phase type, sensitivities to its accumulation type.
pub struct CpuOperator<Mo: Mode> {
    sizes: Sizes,
    terms: usize,
    voxel: Vec<Mo::Phase>,
    voxel_by_point: Vec<Mo::Phase>,
    sample: Vec<Mo::Phase>,
    sample_by_point: Vec<Mo::Phase>,
    sensitivities: Option<Vec<Acc<Mo>>>,
    pool: Arc<rayon::ThreadPool>,
}

fn convert<T: Real>(values: &[f64], what: &str) -> Result<Vec<T>> {
    let mut out = try_vec(values.len(), T::default(), what)?;
    out.iter_mut()
        .zip(values)
        .for_each(|(o, v)| *o = T::from_f64(*v));
    Ok(out)
}

/// F×count (point fastest) → count×F (feature fastest).
fn transpose<T: Real>(by_feature: &[T], terms: usize, what: &str) -> Result<Vec<T>> {
    let count = by_feature.len() / terms.max(1);
    let mut out = try_vec(by_feature.len(), T::default(), what)?;
    for (i, row) in out.chunks_exact_mut(terms).enumerate() {
        for (f, v) in row.iter_mut().enumerate() {
            *v = by_feature[f * count + i];
        }
    }
    Ok(out)
}

fn widen<T: Real>(c: Complex32) -> Complex<T> {
    Complex::new(T::from_f64(c.re as f64), T::from_f64(c.im as f64))
}

fn mul<T: Real>(a: Complex<T>, b: Complex<T>) -> Complex<T> {
    Complex::new(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re)
}

fn narrow<T: Real>(c: Complex<T>) -> Complex32 {
    Complex32::new(c.re.to_f64() as f32, c.im.to_f64() as f32)
}

impl<Mo: Mode> CpuOperator<Mo> {
    pub fn new(features: &Features, sizes: Sizes, pool: Arc<rayon::ThreadPool>) -> Result<Self> {
        let sensitivities = match &features.sensitivities {
            None => None,
            Some(s) => {
                let mut out = try_vec(
                    s.len(),
                    Complex::new(Mo::Acc::default(), Mo::Acc::default()),
                    "sensitivities",
                )?;
                out.iter_mut().zip(s).for_each(|(o, v)| *o = widen(*v));
                Some(out)
            }
        };
        let terms = features.terms;
        let voxel = convert(&features.voxel, "voxel features")?;
        let sample = convert(&features.sample, "sample features")?;
        Ok(CpuOperator {
            sizes,
            terms,
            voxel_by_point: transpose(&voxel, terms, "voxel features")?,
            sample_by_point: transpose(&sample, terms, "sample features")?,
            voxel,
            sample,
            sensitivities,
            pool,
        })
    }

    fn zeros(&self, len: usize, what: &str) -> Result<Vec<Acc<Mo>>> {
        try_vec(
            len,
            Complex::new(Mo::Acc::default(), Mo::Acc::default()),
            what,
        )
    }

    fn voxels(&self) -> Points<'_, Mo::Phase> {
        Points {
            by_feature: &self.voxel,
            by_point: &self.voxel_by_point,
            count: self.sizes.voxels,
        }
    }

    fn samples(&self) -> Points<'_, Mo::Phase> {
        Points {
            by_feature: &self.sample,
            by_point: &self.sample_by_point,
            count: self.sizes.samples,
        }
    }

    /// d = E ρ in the accumulation type (M×L).
    fn forward_acc(&self, image: &[Acc<Mo>], data: &mut [Acc<Mo>]) -> Result<()> {
        let Sizes {
            voxels: n, coils, ..
        } = self.sizes;
        let mut weighted = self.zeros(n * coils, "S·image (N x L)")?;
        match &self.sensitivities {
            None => weighted.copy_from_slice(image),
            Some(s) => weighted
                .par_chunks_mut(n)
                .zip(s.par_chunks(n))
                .for_each(|(w, s)| {
                    for ((w, s), x) in w.iter_mut().zip(s).zip(image) {
                        *w = mul(*s, *x);
                    }
                }),
        }
        phase_sum::<Mo>(
            self.terms,
            self.samples(),
            self.voxels(),
            &weighted,
            coils,
            false,
            data,
        )
    }

    /// ρ = Eᴴ d in the accumulation type.
    fn adjoint_acc(&self, data: &[Acc<Mo>], image: &mut [Acc<Mo>]) -> Result<()> {
        let Sizes {
            voxels: n, coils, ..
        } = self.sizes;
        match &self.sensitivities {
            None => phase_sum::<Mo>(
                self.terms,
                self.voxels(),
                self.samples(),
                data,
                coils,
                true,
                image,
            )?,
            Some(s) => {
                let mut per_coil = self.zeros(n * coils, "per-coil images (N x L)")?;
                phase_sum::<Mo>(
                    self.terms,
                    self.voxels(),
                    self.samples(),
                    data,
                    coils,
                    true,
                    &mut per_coil,
                )?;
                image.par_iter_mut().enumerate().for_each(|(v, out)| {
                    let mut sum = Complex::new(Mo::Acc::default(), Mo::Acc::default());
                    for l in 0..coils {
                        let (a, b) = (s[l * n + v], per_coil[l * n + v]);
                        // conj(a)·b
                        sum = Complex::new(
                            sum.re + a.re * b.re + a.im * b.im,
                            sum.im + a.re * b.im - a.im * b.re,
                        );
                    }
                    *out = sum;
                });
            }
        }
        Ok(())
    }

    /// out = Eᴴ W E x in the accumulation type.
    fn normal_acc(
        &self,
        image: &[Acc<Mo>],
        out: &mut [Acc<Mo>],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        let Sizes {
            samples: m, coils, ..
        } = self.sizes;
        let mut data = self.zeros(m * coils, "intermediate data (M x L)")?;
        self.forward_acc(image, &mut data)?;
        if let Some(w) = weights {
            data.par_chunks_mut(m).for_each(|d| {
                for (d, w) in d.iter_mut().zip(w) {
                    let w = Mo::Acc::from_f64(*w as f64);
                    *d = Complex::new(d.re * w, d.im * w);
                }
            });
        }
        self.adjoint_acc(&data, out)
    }

    fn widen_all(&self, values: &[Complex32], what: &str) -> Result<Vec<Acc<Mo>>> {
        let mut out = self.zeros(values.len(), what)?;
        out.par_iter_mut()
            .zip(values)
            .for_each(|(o, v)| *o = widen(*v));
        Ok(out)
    }
}

fn narrow_into<T: Real>(values: &[Complex<T>], out: &mut [Complex32]) {
    out.par_iter_mut()
        .zip(values)
        .for_each(|(o, v)| *o = narrow(*v));
}

impl<Mo: Mode> EncodingOperator for CpuOperator<Mo> {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        self.pool.install(|| {
            let x = self.widen_all(image, "image")?;
            let mut d = self.zeros(data.len(), "data")?;
            self.forward_acc(&x, &mut d)?;
            narrow_into(&d, data);
            Ok(())
        })
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        self.pool.install(|| {
            let d = self.widen_all(data, "data")?;
            let mut x = self.zeros(image.len(), "image")?;
            self.adjoint_acc(&d, &mut x)?;
            narrow_into(&x, image);
            Ok(())
        })
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        self.pool.install(|| {
            let x = self.widen_all(image, "image")?;
            let mut y = self.zeros(out.len(), "image")?;
            self.normal_acc(&x, &mut y, weights)?;
            narrow_into(&y, out);
            Ok(())
        })
    }

    /// CG's loop, and so the progress callback, runs on the caller's thread
    /// (a callback may use thread-bound APIs: MATLAB's MEX functions, Python,
    /// thread-locals); only the vector operations enter the plan's pool.
    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        let space = CpuSpace {
            op: self,
            problem,
            grid: Grid::with_neighbourhood(self.sizes.dims, problem.neighbourhood),
            voxel_factors: Mutex::new(None),
        };
        let mut x = self.pool.install(|| self.widen_all(image, "image"))?;
        let report = cg(&space, problem, &mut x)?;
        self.pool.install(|| narrow_into(&x, image));
        Ok(report)
    }

    fn backend_name(&self) -> String {
        "cpu".into()
    }
}

/// CG's vectors on the CPU: images in the mode's accumulation type.
struct CpuSpace<'a, Mo: Mode> {
    op: &'a CpuOperator<Mo>,
    problem: &'a CgProblem<'a>,
    grid: Grid,
    /// ν of the edge weights u·ν (TV and Laplace); `None` = 1.
    voxel_factors: Mutex<Option<Vec<Mo::Acc>>>,
}

impl<Mo: Mode> CgSpace for CpuSpace<'_, Mo> {
    type Vector = Vec<Acc<Mo>>;

    fn zeros(&self) -> Result<Self::Vector> {
        self.op.zeros(self.op.sizes.voxels, "CG vector (N)")
    }

    fn rhs(&self, b: &mut Self::Vector) -> Result<()> {
        self.op.pool.install(|| {
            let mut d = self.op.widen_all(self.problem.data, "data")?;
            if let Some(w) = self.problem.sample_weights {
                let m = self.op.sizes.samples;
                d.par_chunks_mut(m).for_each(|d| {
                    for (d, w) in d.iter_mut().zip(w) {
                        let w = Mo::Acc::from_f64(*w as f64);
                        *d = Complex::new(d.re * w, d.im * w);
                    }
                });
            }
            self.op.adjoint_acc(&d, b)
        })
    }

    fn normal(&self, x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        self.op
            .pool
            .install(|| self.op.normal_acc(x, y, self.problem.sample_weights))
    }

    fn set_from_host(&self, host: &[Complex32], v: &mut Self::Vector) -> Result<()> {
        self.op.pool.install(|| {
            v.par_iter_mut().zip(host).for_each(|(o, h)| *o = widen(*h));
        });
        Ok(())
    }

    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) {
        dst.copy_from_slice(src);
    }

    fn dot_re(&self, a: &Self::Vector, b: &Self::Vector) -> f64 {
        self.op.pool.install(|| {
            a.par_iter()
                .zip(b)
                .map(|(a, b)| a.re.to_f64() * b.re.to_f64() + a.im.to_f64() * b.im.to_f64())
                .sum()
        })
    }

    fn axpy(&self, alpha: f64, x: &Self::Vector, y: &mut Self::Vector) {
        let a = Mo::Acc::from_f64(alpha);
        self.op.pool.install(|| {
            y.par_iter_mut().zip(x).for_each(|(y, x)| {
                *y = Complex::new(a.madd::<false>(x.re, y.re), a.madd::<false>(x.im, y.im))
            })
        });
    }

    fn xpay(&self, x: &Self::Vector, beta: f64, y: &mut Self::Vector) {
        let b = Mo::Acc::from_f64(beta);
        self.op.pool.install(|| {
            y.par_iter_mut().zip(x).for_each(|(y, x)| {
                *y = Complex::new(b.madd::<false>(y.re, x.re), b.madd::<false>(y.im, x.im))
            })
        });
    }

    fn reweight(&self, penalty: Penalty, x: &Self::Vector) -> Result<()> {
        let mut slot = self.voxel_factors.lock().unwrap_or_else(|e| e.into_inner());
        if penalty == Penalty::Quadratic {
            *slot = None;
            return Ok(());
        }
        let n = self.op.sizes.voxels;
        let mut g = try_vec(n, 0.0f64, "gradient magnitudes (N)")?;
        let mut factors = match slot.take() {
            Some(f) => f,
            None => try_vec(n, Mo::Acc::default(), "reweighting factors (N)")?,
        };
        self.op.pool.install(|| {
            fd::gradient_magnitude(&self.grid, self.problem.fd_weights, x, &mut g);
            factors
                .par_iter_mut()
                .zip(&g)
                .for_each(|(f, &g)| *f = Mo::Acc::from_f64(penalty.weight(g)));
        });
        *slot = Some(factors);
        Ok(())
    }

    fn add_fd_normal(&self, lambda: f64, x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        let slot = self.voxel_factors.lock().unwrap_or_else(|e| e.into_inner());
        let factors = slot.as_deref();
        self.op.pool.install(|| {
            fd::add_fd_normal(&self.grid, lambda, self.problem.fd_weights, factors, x, y)
        });
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "the CPU"
    }
}
