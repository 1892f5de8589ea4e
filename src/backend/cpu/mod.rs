//! The CPU backend: rayon over outer points, vectorised kernels picked at
//! run time (AVX-512, AVX2+FMA, or portable).

pub mod cartesian;
pub mod fd;
pub mod fft;
pub mod kernel;
pub mod real;
pub(crate) mod space;
pub mod toeplitz;
pub mod trig;

use crate::error::{try_vec, Result};
use crate::model::{Features, Sizes};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::progress::Progress;
use crate::solver::CgProblem;
use kernel::{phase_sum, Accurate, Double, Fast, Mode, Points};
use num_complex::{Complex, Complex32};
use rayon::prelude::*;
use real::Real;
pub(crate) use space::CpuNormal;
use std::sync::Arc;

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

pub(crate) fn widen<T: Real>(c: Complex32) -> Complex<T> {
    Complex::new(T::from_f64(c.re as f64), T::from_f64(c.im as f64))
}

pub(crate) fn mul<T: Real>(a: Complex<T>, b: Complex<T>) -> Complex<T> {
    Complex::new(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re)
}

pub(crate) fn narrow<T: Real>(c: Complex<T>) -> Complex32 {
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
                out.iter_mut()
                    .zip(s.iter())
                    .for_each(|(o, v)| *o = widen(*v));
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
        complex_zeros(len, what)
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
        let progress = Progress::current();
        progress
            .part(0.0, 0.5)
            .enter(|| self.forward_acc(image, &mut data))?;
        if let Some(w) = weights {
            apply_sample_weights(&mut data, m, w);
        }
        progress
            .part(0.5, 1.0)
            .enter(|| self.adjoint_acc(&data, out))
    }

    fn widen_all(&self, values: &[Complex32], what: &str) -> Result<Vec<Acc<Mo>>> {
        widen_all(values, what)
    }
}

/// Applies `f` in the accumulation type T inside `pool`: the float32 input
/// widened, the output zeroed, and the result narrowed into `output`. The
/// caller's thread meanwhile serves the progress callback ([`Progress::install`]).
pub(crate) fn apply_widened<T: Real>(
    pool: &rayon::ThreadPool,
    input: &[Complex32],
    input_name: &str,
    output: &mut [Complex32],
    output_name: &str,
    f: impl FnOnce(&[Complex<T>], &mut [Complex<T>]) -> Result<()> + Send,
) -> Result<()> {
    Progress::current().install(pool, || {
        let x = widen_all::<T>(input, input_name)?;
        let mut y = complex_zeros(output.len(), output_name)?;
        f(&x, &mut y)?;
        narrow_into(&y, output);
        Ok(())
    })
}

/// The columns of the column-major `out` (columns of `len` elements) cut into
/// blocks of `block` rows and grouped by block: blocks[b][c] is rows
/// b·block.. of column c, so that a task per block touches every column.
pub(crate) fn column_blocks<T>(out: &mut [T], len: usize, block: usize) -> Vec<Vec<&mut [T]>> {
    let mut blocks: Vec<Vec<&mut [T]>> = (0..len.div_ceil(block)).map(|_| Vec::new()).collect();
    for column in out.chunks_exact_mut(len.max(1)) {
        for (b, piece) in column.chunks_mut(block).enumerate() {
            blocks[b].push(piece);
        }
    }
    blocks
}

/// A complex vector of zeros, or `OutOfMemory` naming `what`.
pub(crate) fn complex_zeros<T: Real>(len: usize, what: &str) -> Result<Vec<Complex<T>>> {
    try_vec(len, Complex::new(T::default(), T::default()), what)
}

/// float32 values widened to the accumulation type T.
pub(crate) fn widen_all<T: Real>(values: &[Complex32], what: &str) -> Result<Vec<Complex<T>>> {
    let mut out = complex_zeros(values.len(), what)?;
    out.par_iter_mut()
        .zip(values)
        .for_each(|(o, v)| *o = widen(*v));
    Ok(out)
}

/// d_{j,c} ← w_j·d_{j,c} for M×L data (sample index fastest).
pub(crate) fn apply_sample_weights<T: Real>(data: &mut [Complex<T>], m: usize, w: &[f32]) {
    data.par_chunks_mut(m).for_each(|d| {
        for (d, w) in d.iter_mut().zip(w) {
            let w = T::from_f64(*w as f64);
            *d = Complex::new(d.re * w, d.im * w);
        }
    });
}

pub(crate) fn narrow_into<T: Real>(values: &[Complex<T>], out: &mut [Complex32]) {
    out.par_iter_mut()
        .zip(values)
        .for_each(|(o, v)| *o = narrow(*v));
}

impl<Mo: Mode> CpuNormal<Mo::Acc> for CpuOperator<Mo> {
    fn sizes(&self) -> Sizes {
        self.sizes
    }

    fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    fn rhs(&self, data: &[Complex32], weights: Option<&[f32]>, b: &mut [Acc<Mo>]) -> Result<()> {
        let mut d = self.widen_all(data, "data")?;
        if let Some(w) = weights {
            apply_sample_weights(&mut d, self.sizes.samples, w);
        }
        self.adjoint_acc(&d, b)
    }

    fn normal(&self, x: &[Acc<Mo>], y: &mut [Acc<Mo>], weights: Option<&[f32]>) -> Result<()> {
        self.normal_acc(x, y, weights)
    }
}

impl<Mo: Mode> EncodingOperator for CpuOperator<Mo> {
    /// Converts the new sample features as [`CpuOperator::new`] does (the
    /// voxel side keeps its conversion).
    fn update_samples(&mut self, voxel: &[f64], sample: &[f64]) -> Result<bool> {
        let _ = voxel;
        if sample.len() != self.sample.len() {
            return Ok(false);
        }
        let converted = convert(sample, "sample features")?;
        self.sample_by_point = transpose(&converted, self.terms, "sample features")?;
        self.sample = converted;
        Ok(true)
    }

    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        apply_widened(&self.pool, image, "image", data, "data", |x, y| {
            self.forward_acc(x, y)
        })
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        apply_widened(&self.pool, data, "data", image, "image", |x, y| {
            self.adjoint_acc(x, y)
        })
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        apply_widened(&self.pool, image, "image", out, "image", |x, y| {
            self.normal_acc(x, y, weights)
        })
    }

    /// CG's loop, and so the progress callback, runs on the caller's thread
    /// (a callback may use thread-bound APIs: MATLAB's MEX functions, Python,
    /// thread-locals); only the vector operations enter the plan's pool.
    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        space::solve(self, problem, image)
    }

    fn backend_name(&self) -> String {
        "cpu".into()
    }
}
