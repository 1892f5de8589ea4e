//! Conjugate gradient on the CPU for any operator that provides Eᴴ W d and
//! Eᴴ W E x ([`CpuNormal`]): the exact phase-sum operator, the Toeplitz and
//! the Cartesian FFT operators share this vector space and so every
//! regularizer of [`crate::solver`].

use super::fd::{self, Grid};
use super::real::Real;
use super::{complex_zeros, narrow_into, widen, widen_all};
use crate::error::{try_vec, Result};
use crate::model::Sizes;
use crate::op::CgReport;
use crate::progress::Progress;
use crate::solver::{cg, CgProblem, CgSpace, Penalty};
use num_complex::{Complex, Complex32, Complex64};
use rayon::prelude::*;
use std::sync::Mutex;

/// A CPU operator as CG sees it, in the accumulation type T.
pub trait CpuNormal<T: Real>: Sync {
    fn sizes(&self) -> Sizes;
    /// The plan's thread pool (the vector operations run in it).
    fn pool(&self) -> &rayon::ThreadPool;
    /// b = Eᴴ W d for M×L data d and optional per-sample weights W.
    fn rhs(&self, data: &[Complex32], weights: Option<&[f32]>, b: &mut [Complex<T>]) -> Result<()>;
    /// y = Eᴴ W E x.
    fn normal(&self, x: &[Complex<T>], y: &mut [Complex<T>], weights: Option<&[f32]>)
        -> Result<()>;
}

/// Solves `problem` with `op` (CG, with reweighting for TV and Laplace).
///
/// CG's loop, and so the progress callback, runs on the caller's thread
/// (a callback may use thread-bound APIs: MATLAB's MEX functions, Python,
/// thread-locals); only the vector operations enter the plan's pool.
pub fn solve<T: Real, Op: CpuNormal<T>>(
    op: &Op,
    problem: &CgProblem<'_>,
    image: &mut [Complex32],
) -> Result<CgReport> {
    let space = CpuSpace {
        op,
        problem,
        grid: Grid::with_neighbourhood(op.sizes().dims, problem.neighbourhood),
        voxel_factors: Mutex::new(None),
    };
    let mut x = op.pool().install(|| widen_all::<T>(image, "image"))?;
    let report = cg(&space, problem, &mut x)?;
    op.pool().install(|| narrow_into(&x, image));
    Ok(report)
}

/// CG's vectors on the CPU: images in the accumulation type T.
struct CpuSpace<'a, T: Real, Op: CpuNormal<T>> {
    op: &'a Op,
    problem: &'a CgProblem<'a>,
    grid: Grid,
    /// ν of the edge weights u·ν (TV and Laplace); `None` = 1.
    voxel_factors: Mutex<Option<Vec<T>>>,
}

impl<T: Real, Op: CpuNormal<T>> CgSpace for CpuSpace<'_, T, Op> {
    type Vector = Vec<Complex<T>>;

    fn zeros(&self) -> Result<Self::Vector> {
        complex_zeros(self.op.sizes().voxels, "CG vector (N)")
    }

    fn rhs(&self, b: &mut Self::Vector) -> Result<()> {
        Progress::current().install(self.op.pool(), || {
            self.op
                .rhs(self.problem.data, self.problem.sample_weights, b)
        })
    }

    fn normal(&self, x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        Progress::current().install(self.op.pool(), || {
            self.op.normal(x, y, self.problem.sample_weights)
        })
    }

    fn set_from_host(&self, host: &[Complex32], v: &mut Self::Vector) -> Result<()> {
        self.op.pool().install(|| {
            v.par_iter_mut().zip(host).for_each(|(o, h)| *o = widen(*h));
        });
        Ok(())
    }

    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) {
        dst.copy_from_slice(src);
    }

    fn dot_re(&self, a: &Self::Vector, b: &Self::Vector) -> f64 {
        // In a fixed order: the same bits on every run (crate::reduce).
        self.op.pool().install(|| {
            crate::reduce::sum(a.len(), |i| {
                a[i].re.to_f64() * b[i].re.to_f64() + a[i].im.to_f64() * b[i].im.to_f64()
            })
        })
    }

    fn axpy(&self, alpha: f64, x: &Self::Vector, y: &mut Self::Vector) {
        let a = T::from_f64(alpha);
        self.op.pool().install(|| {
            y.par_iter_mut().zip(x).for_each(|(y, x)| {
                *y = Complex::new(a.madd::<false>(x.re, y.re), a.madd::<false>(x.im, y.im))
            })
        });
    }

    fn xpay(&self, x: &Self::Vector, beta: f64, y: &mut Self::Vector) {
        let b = T::from_f64(beta);
        self.op.pool().install(|| {
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
        let n = self.op.sizes().voxels;
        let mut g = try_vec(n, 0.0f64, "gradient magnitudes (N)")?;
        let mut factors = match slot.take() {
            Some(f) => f,
            None => try_vec(n, T::default(), "reweighting factors (N)")?,
        };
        self.op.pool().install(|| {
            fd::gradient_magnitude(&self.grid, self.problem.fd_weights, x, &mut g);
            factors
                .par_iter_mut()
                .zip(&g)
                .for_each(|(f, &g)| *f = T::from_f64(penalty.weight(g)));
        });
        *slot = Some(factors);
        Ok(())
    }

    fn add_fd_normal(&self, lambda: f64, x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        let slot = self.voxel_factors.lock().unwrap_or_else(|e| e.into_inner());
        let factors = slot.as_deref();
        self.op.pool().install(|| {
            fd::add_fd_normal(&self.grid, lambda, self.problem.fd_weights, factors, x, y)
        });
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "the CPU"
    }

    fn voxels(&self) -> usize {
        self.op.sizes().voxels
    }

    fn to_host(&self, v: &Self::Vector, out: &mut [Complex64]) -> Result<()> {
        self.op.pool().install(|| {
            out.par_iter_mut()
                .zip(v)
                .for_each(|(o, v)| *o = Complex64::new(v.re.to_f64(), v.im.to_f64()))
        });
        Ok(())
    }

    fn set_from_host64(&self, host: &[Complex64], v: &mut Self::Vector) -> Result<()> {
        self.op.pool().install(|| {
            v.par_iter_mut()
                .zip(host)
                .for_each(|(o, h)| *o = Complex::new(T::from_f64(h.re), T::from_f64(h.im)))
        });
        Ok(())
    }
}
