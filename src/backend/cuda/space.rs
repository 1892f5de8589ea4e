//! Conjugate gradient on the GPU for any operator that provides Eᴴ d and
//! EᴴWE x on device vectors ([`DeviceNormal`]): the exact phase-sum
//! operator, the Toeplitz and the Cartesian FFT operators share this vector
//! space (N double2 per vector) and so every regularizer of
//! [`crate::solver`]. CG moves the data up once and the image down once.

use super::context::driver_error;
use super::fd::FdState;
use super::launch::{launch, launch_over, Args};
use super::memory::{DeviceBuffer, Stream};
use super::vectors::CudaCore;
use super::work::{Work, DOT_BLOCKS};
use crate::error::{Error, Result};
use crate::op::CgReport;
use crate::solver::{cg, CgProblem, CgSpace, Penalty};
use cudarc::driver::result;
use num_complex::{Complex32, Complex64};
use std::cell::{RefCell, RefMut};

/// How CG applies the operator on the device: the exact phase sums
/// ([`super::CudaOperator`]) or an FFT-based normal operator (Toeplitz, Cartesian).
pub(super) trait DeviceNormal: Sync {
    /// out (N) = Eᴴ d for device data d (M×L double2, already multiplied by W).
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()>;
    /// y (N) = Eᴴ W E x; `weights` the device sample weights W (M float64,
    /// `None` = 1) and `scratch` an M×L double2 buffer the operator may use.
    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()>;
}

/// A borrowed operator applies as the operator does (a coil split's parts
/// hand themselves out so).
impl<T: DeviceNormal + ?Sized> DeviceNormal for &T {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()> {
        (**self).adjoint_dev(d, out, stream)
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        (**self).normal_dev(x, y, weights, scratch, stream)
    }
}

/// CG on the device with `normal` applying EᴴWE and Eᴴ, the vectors and
/// transfers of `core`, and the workspace `w` (held by the caller).
pub(super) fn solve_on(
    core: &CudaCore,
    normal: &dyn DeviceNormal,
    w: &Work,
    problem: &CgProblem<'_>,
    image: &mut [Complex32],
) -> Result<CgReport> {
    {
        let s = Stream(w.stream.cu_stream());
        // (kept until the solve returns: the host copy of the weights outlives their upload)
        let weights = w.stage_weights(problem.sample_weights, s)?;
        let space = CudaSpace {
            op: core,
            normal,
            work: w,
            stream: s,
            problem,
            weighted: weights.device().is_some(),
            error: RefCell::new(None),
            fd: RefCell::new(None),
        };
        let mut x = space.zeros()?;
        if problem.warm_start {
            space.set_from_host(image, &mut x)?;
        }
        let report = cg(&space, problem, &mut x);
        if let Some(e) = space.error.borrow_mut().take() {
            return Err(e);
        }
        let report = report?;
        core.download(w, &x, image, s)?;
        Ok(report)
    }
}

/// CG's vectors on the GPU (N double2 each); errors of the infallible vector
/// operations are kept and reported when the solve returns.
struct CudaSpace<'a> {
    op: &'a CudaCore,
    normal: &'a dyn DeviceNormal,
    work: &'a Work,
    stream: Stream,
    problem: &'a CgProblem<'a>,
    weighted: bool,
    error: RefCell<Option<Error>>,
    /// The finite-difference state, made on first use by a regularizer.
    fd: RefCell<Option<FdState>>,
}

impl CudaSpace<'_> {
    fn keep(&self, r: Result<()>) {
        if let Err(e) = r {
            let mut slot = self.error.borrow_mut();
            if slot.is_none() {
                *slot = Some(e);
            }
        }
    }
    fn failed(&self) -> Result<()> {
        match self.error.borrow().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The finite-difference state, made (and `fd_weights` uploaded) on first use.
    fn fd_state(&self) -> Result<RefMut<'_, FdState>> {
        let mut slot = self.fd.borrow_mut();
        if slot.is_none() {
            *slot = Some(FdState::new(self.op, self.problem)?);
        }
        RefMut::filter_map(slot, |s| s.as_mut())
            .map_err(|_| Error::internal("finite-difference state missing"))
    }
}

impl CgSpace for CudaSpace<'_> {
    type Vector = DeviceBuffer;

    fn zeros(&self) -> Result<DeviceBuffer> {
        let v =
            DeviceBuffer::new::<[f64; 2]>(&self.op.device, self.op.sizes.voxels, "CG vector (N)")?;
        v.zero(self.stream)?;
        Ok(v)
    }

    fn rhs(&self, b: &mut DeviceBuffer) -> Result<()> {
        self.failed()?;
        self.op
            .upload(self.work, self.problem.data, &self.work.data, self.stream)?;
        if self.weighted {
            self.op
                .scale_samples(&self.work.data, &self.work.sample_weights, self.stream)?;
        }
        self.normal.adjoint_dev(&self.work.data, b, self.stream)
    }

    fn normal(&self, x: &DeviceBuffer, y: &mut DeviceBuffer) -> Result<()> {
        self.failed()?;
        let w = self.weighted.then_some(&self.work.sample_weights);
        self.normal
            .normal_dev(x, y, w, &self.work.data, self.stream)
    }

    fn set_from_host(&self, host: &[Complex32], v: &mut DeviceBuffer) -> Result<()> {
        self.op.upload(self.work, host, v, self.stream)
    }

    fn copy(&self, src: &DeviceBuffer, dst: &mut DeviceBuffer) {
        self.keep(dst.copy_from(src, self.stream));
    }

    fn dot_re(&self, a: &DeviceBuffer, b: &DeviceBuffer) -> f64 {
        let n = self.op.sizes.voxels;
        let r = launch(
            &self.op.k.dot_re,
            (DOT_BLOCKS as u32, 1, 1),
            256,
            self.stream,
            Args::default()
                .ptr(a.ptr)
                .ptr(b.ptr)
                .int(n as i64)
                .ptr(self.work.dot.ptr),
        );
        let mut partial = vec![0.0f64; DOT_BLOCKS];
        let r = r.and_then(|_| self.work.dot.download(&mut partial, self.stream));
        match r {
            Ok(()) => partial.iter().sum(),
            Err(e) => {
                self.keep(Err(e));
                f64::NAN
            }
        }
    }

    fn axpy(&self, alpha: f64, x: &DeviceBuffer, y: &mut DeviceBuffer) {
        let n = self.op.sizes.voxels;
        self.keep(launch_over(
            &self.op.k.axpy,
            n,
            self.stream,
            Args::default()
                .f64(alpha)
                .ptr(x.ptr)
                .ptr(y.ptr)
                .int(n as i64),
        ));
    }

    fn xpay(&self, x: &DeviceBuffer, beta: f64, y: &mut DeviceBuffer) {
        let n = self.op.sizes.voxels;
        self.keep(launch_over(
            &self.op.k.xpay,
            n,
            self.stream,
            Args::default()
                .ptr(x.ptr)
                .f64(beta)
                .ptr(y.ptr)
                .int(n as i64),
        ));
    }

    /// ν_n = ψ'(g_n)/g_n on the device from the weighted gradient magnitude
    /// g of x (kernels/fd.cu, float64); `Quadratic` resets ν ≡ 1.
    fn reweight(&self, penalty: Penalty, x: &DeviceBuffer) -> Result<()> {
        self.failed()?;
        self.fd_state()?.reweight(penalty, x, self.stream)
    }

    /// y ← y + λ·Dᴴ diag(c·u·ν) D x on the device (kernels/fd.cu, float64).
    fn add_fd_normal(&self, lambda: f64, x: &DeviceBuffer, y: &mut DeviceBuffer) -> Result<()> {
        self.failed()?;
        self.fd_state()?.add_normal(lambda, x, y, self.stream)
    }

    fn backend(&self) -> &'static str {
        "the GPU"
    }

    fn voxels(&self) -> usize {
        self.op.sizes.voxels
    }

    fn to_host(&self, v: &DeviceBuffer, out: &mut [Complex64]) -> Result<()> {
        self.failed()?;
        let mut pairs = crate::error::try_vec(out.len(), [0.0f64; 2], "CG vector on the host")?;
        v.download(&mut pairs, self.stream)?;
        for (o, p) in out.iter_mut().zip(&pairs) {
            *o = Complex64::new(p[0], p[1]);
        }
        Ok(())
    }

    fn set_from_host64(&self, host: &[Complex64], v: &mut DeviceBuffer) -> Result<()> {
        let pairs: Vec<[f64; 2]> = host.iter().map(|c| [c.re, c.im]).collect();
        v.upload(&pairs, self.stream)?;
        // SAFETY: synchronising our own stream before `pairs` is dropped.
        unsafe { result::stream::synchronize(self.stream.0) }
            .map_err(|e| driver_error("uploading a CG vector", e))
    }
}
