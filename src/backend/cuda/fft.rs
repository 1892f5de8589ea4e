//! Batched grid FFTs on the GPU with cuFFT (loaded dynamically, like the
//! driver and NVRTC).
//!
//! For a batch of B column-major n0×n1×n2 grids (first index fastest, grid
//! b at offset b·n0·n1·n2), [`Direction::Forward`] computes
//!
//! $$X_{k} = \sum_{j} x_{j}\, \exp\!\Big(-2\pi i \sum_a \frac{k_a j_a}{n_a}\Big)$$
//!
//! and [`Direction::Inverse`] the same sum with +2πi, unnormalised, index 0
//! first (the conventions of `backend::cpu::fft::GridFft`). cuFFT is
//! row-major (last index fastest), so the plan lists the axes in reverse;
//! axes of length 1 are dropped. Single-precision plans are C2C on float2,
//! double-precision plans Z2Z on double2, in place.

use super::context::Device;
use super::memory::Stream;
use crate::error::{Error, Result, Status};
use crate::op::Precision;
use cudarc::cufft::{result as cufft, sys};
use cudarc::driver::CudaFunction;
use once_cell::sync::Lazy;
use std::sync::Arc;

pub use crate::backend::cpu::fft::Direction;

/// cuFFT's exponent signs.
const CUFFT_FORWARD: i32 = -1;
const CUFFT_INVERSE: i32 = 1;

/// Ok when the cuFFT library can be loaded, else why not (looked for once:
/// cudarc panics instead of failing when a library is missing).
/// HORECON_CUDA_NO_CUFFT=1 acts as if it were missing (tests).
pub fn available() -> std::result::Result<(), String> {
    if super::memory::setting("HORECON_CUDA_NO_CUFFT").is_some_and(|v| v != 0) {
        return Err("cuFFT is switched off by HORECON_CUDA_NO_CUFFT".into());
    }
    static PRESENT: Lazy<bool> = Lazy::new(|| {
        // SAFETY: only tries to dlopen the library (libcufft.so, .so.13, .so.12, ...).
        unsafe { sys::is_culib_present() }
    });
    if *PRESENT {
        Ok(())
    } else {
        Err(
            "the cuFFT library (libcufft.so, .so.13 or .so.12) was not found; \
             the FFT-based operators (Toeplitz, Cartesian) need it on CUDA"
                .into(),
        )
    }
}

fn cufft_error(what: &str, e: cufft::CufftError) -> Error {
    if e.0 == sys::cufftResult::CUFFT_ALLOC_FAILED {
        return Error::out_of_memory(format!(
            "{what}: cuFFT could not allocate its work area ({e})"
        ));
    }
    Error::new(Status::Backend, format!("{what}: cuFFT error {e}"))
}

/// The most grids of `points` points that one cuFFT plan transforms (its
/// 32-bit interface: 2^31 − 1 points per batch), at least 1. Batches sized
/// from free memory alone broke it on a 141 GB H200: the fast path's 240
/// fine grids of 252×252×180 (ho3d-1mm) fit the memory, not the plan.
pub fn max_batch(points: usize) -> usize {
    (i32::MAX as usize / points.max(1)).max(1)
}

/// A cuFFT plan for `batch` grids of `dims` (in place).
pub struct FftPlan {
    handle: sys::cufftHandle,
    dims: [usize; 3],
    batch: usize,
    double: bool,
    device: Arc<Device>,
}

// SAFETY: a cuFFT handle is a plain integer; the plan is used by one thread at
// a time (its owners keep it behind a lock or use it from one call).
unsafe impl Send for FftPlan {}
unsafe impl Sync for FftPlan {}

impl FftPlan {
    /// Plans `batch` in-place transforms of n0×n1×n2 grids, float32 (C2C) or
    /// float64 (Z2Z) complex.
    pub fn new(
        device: &Arc<Device>,
        dims: [usize; 3],
        batch: usize,
        double: bool,
    ) -> Result<FftPlan> {
        available().map_err(|reason| Error::new(Status::BackendUnavailable, reason))?;
        let points: usize = dims.iter().product();
        // cuFFT's 32-bit plan interface: every length and the whole batch in i32.
        if points
            .checked_mul(batch.max(1))
            .is_none_or(|t| t > i32::MAX as usize)
        {
            return Err(Error::invalid(format!(
                "the cuFFT plan for {batch} grids of {}x{}x{} is too large (at most 2^31 - 1 points per batch)",
                dims[0], dims[1], dims[2]
            )));
        }
        // Row-major for cuFFT: slowest axis first, singleton axes dropped.
        let mut n: Vec<i32> = dims
            .iter()
            .rev()
            .filter(|&&d| d > 1)
            .map(|&d| d as i32)
            .collect();
        if n.is_empty() {
            n.push(1);
        }
        device.bind()?;
        let handle = cufft::create().map_err(|e| cufft_error("creating an FFT plan", e))?;
        let plan = FftPlan {
            handle,
            dims,
            batch: batch.max(1),
            double,
            device: device.clone(),
        };
        let kind = if double {
            sys::cufftType::CUFFT_Z2Z
        } else {
            sys::cufftType::CUFFT_C2C
        };
        // SAFETY: `n` holds `rank` lengths; NULL embeds mean the contiguous layout
        // (strides and distances then ignored).
        unsafe {
            cufft::make_plan_many(
                plan.handle,
                n.len() as i32,
                n.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                points as i32,
                std::ptr::null_mut(),
                1,
                points as i32,
                kind,
                plan.batch as i32,
            )
        }
        .map_err(|e| {
            cufft_error(
                &format!(
                    "planning {} FFTs of {}x{}x{}",
                    plan.batch, dims[0], dims[1], dims[2]
                ),
                e,
            )
        })?;
        Ok(plan)
    }

    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Transforms the `batch` grids at `data` in place on `stream`.
    ///
    /// `data` must hold batch·n0·n1·n2 float2 (or double2 for a double plan).
    pub fn exec(
        &self,
        data: cudarc::driver::sys::CUdeviceptr,
        direction: Direction,
        stream: Stream,
    ) -> Result<()> {
        self.device.bind()?;
        let sign = match direction {
            Direction::Forward => CUFFT_FORWARD,
            Direction::Inverse => CUFFT_INVERSE,
        };
        // SAFETY: the plan is valid; the stream belongs to the bound context;
        // the caller guarantees the buffer size (see above).
        unsafe {
            cufft::set_stream(self.handle, stream.0 as sys::cudaStream_t)
                .map_err(|e| cufft_error("setting the FFT stream", e))?;
            if self.double {
                cufft::exec_z2z(
                    self.handle,
                    data as usize as *mut sys::cufftDoubleComplex,
                    data as usize as *mut sys::cufftDoubleComplex,
                    sign,
                )
            } else {
                cufft::exec_c2c(
                    self.handle,
                    data as usize as *mut sys::cufftComplex,
                    data as usize as *mut sys::cufftComplex,
                    sign,
                )
            }
        }
        .map_err(|e| cufft_error("executing an FFT", e))
    }
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: created by `create`, destroyed once; errors cannot be reported from drop.
            let _ = unsafe { cufft::destroy(self.handle) };
        }
    }
}

/// The kernels of kernels/fft_ops.cu for one precision mode.
pub struct FftOps {
    pub pad_coils: CudaFunction,
    pub crop_accumulate: CudaFunction,
    pub kernel_multiply: CudaFunction,
    pub cart_spread: CudaFunction,
    pub cart_collect: CudaFunction,
    pub cart_gather: CudaFunction,
    pub cart_scatter: CudaFunction,
    pub cart_weights: CudaFunction,
    pub grid_weight: CudaFunction,
}

impl FftOps {
    pub fn new(device: &Arc<Device>, precision: Precision) -> Result<FftOps> {
        // Compiled with util.cu as one module (`vectors::UTIL`), usually
        // already loaded by the plan's exact operator.
        let f = |name: &str| {
            device.function(
                "util",
                super::vectors::UTIL,
                &[("MODE", super::launch::mode_code(precision))],
                name,
            )
        };
        Ok(FftOps {
            pad_coils: f("pad_coils")?,
            crop_accumulate: f("crop_accumulate")?,
            kernel_multiply: f("kernel_multiply")?,
            cart_spread: f("cart_spread")?,
            cart_collect: f("cart_collect")?,
            cart_gather: f("cart_gather")?,
            cart_scatter: f("cart_scatter")?,
            cart_weights: f("cart_weights")?,
            grid_weight: f("grid_weight")?,
        })
    }
}

/// Bytes of one complex grid value: float2, or double2 in double mode.
pub fn complex_bytes(precision: Precision) -> usize {
    if precision == Precision::Double {
        16
    } else {
        8
    }
}

/// Coils per FFT batch: all of them when `per_coil` bytes each (grids plus
/// cuFFT's work area, about as large again) fit in a third of the free
/// memory, else as many as do (at least 1), within [`fft_batch`] of grids
/// of `points` points.
pub fn coil_batch(
    device: &Device,
    coils: usize,
    (per_coil, points): (usize, usize),
) -> Result<usize> {
    let (free, _) = device.memory()?;
    let fit = (free / 3) / (2 * per_coil).max(1);
    Ok(fft_batch(fit.clamp(1, coils.max(1)), points))
}

/// Grids of `points` points per cuFFT batch of `wanted` grids: at most
/// [`max_batch`], capped by `HORECON_CUDA_FFT_BATCH` (tests force chunked
/// paths with it), at least 1.
pub fn fft_batch(wanted: usize, points: usize) -> usize {
    let batch = wanted.min(max_batch(points)).max(1);
    super::memory::knob("HORECON_CUDA_FFT_BATCH").map_or(batch, |cap| batch.min(cap))
}

/// `len` host complex values as device double2 pairs (fallible: issue 11).
pub fn to_pairs(
    len: usize,
    values: impl Iterator<Item = num_complex::Complex64>,
) -> crate::error::Result<Vec<[f64; 2]>> {
    let mut out = crate::error::try_vec(len, [0.0; 2], "device staging (double2)")?;
    out.iter_mut()
        .zip(values)
        .for_each(|(o, c)| *o = [c.re, c.im]);
    Ok(out)
}
