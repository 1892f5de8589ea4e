//! Backends: where and how the operators are computed.

pub mod cpu;
pub mod cuda;
// Rust-only constants: cbindgen skips the module.
/// cbindgen:ignore
pub mod fast;

use crate::error::{Error, Result, Status};
use crate::model::cartesian::Cartesian;
use crate::model::toeplitz::ToeplitzSpec;
use crate::model::{Features, Sizes};
use crate::op::EncodingOperator;
use crate::options::{BackendKind, Options};
use std::sync::Arc;

/// The backend a plan with these options runs on (never `Auto`).
/// `num_devices` > 1 asks for CUDA: refused on the CPU backend
/// (InvalidArgument), BackendUnavailable naming the count when fewer
/// devices are present (AUTO included).
pub fn resolve(options: &Options) -> Result<BackendKind> {
    let several = options.num_devices > 1;
    match options.backend {
        BackendKind::Cpu if several => Err(Error::invalid(format!(
            "num_devices = {} applies to CUDA devices; the CPU backend uses num_threads \
             (set num_devices = 1, or backend AUTO or CUDA)",
            options.num_devices
        ))),
        BackendKind::Cpu => Ok(BackendKind::Cpu),
        // AUTO: CUDA when a usable GPU, driver and NVRTC are present, else the CPU, silently.
        BackendKind::Auto if !several => Ok(match cuda::usable(options.device as usize) {
            Ok(()) => BackendKind::Cuda,
            Err(_) => BackendKind::Cpu,
        }),
        BackendKind::Auto | BackendKind::Cuda => {
            cuda::usable(options.device as usize).map_err(|reason| {
                let what = if several {
                    format!("num_devices = {} CUDA devices were", options.num_devices)
                } else {
                    "CUDA was".to_string()
                };
                Error::new(
                    Status::BackendUnavailable,
                    format!("{what} requested but CUDA is unavailable: {reason}"),
                )
            })?;
            cuda::placement(options)?;
            Ok(BackendKind::Cuda)
        }
    }
}

/// The error of a build on `Auto`: the backend must be resolved first.
fn unresolved(backend: BackendKind) -> Error {
    Error::invalid(format!(
        "backend must be Cpu or Cuda, got {backend:?}: resolve it first (backend::resolve)"
    ))
}

/// Builds the operator for `features` on a resolved backend.
pub fn build(
    backend: BackendKind,
    features: &Features,
    sizes: Sizes,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    match backend {
        BackendKind::Cpu => cpu::build(features, sizes, options.precision, pool),
        BackendKind::Cuda => cuda::build(features, sizes, options),
        other => Err(unresolved(other)),
    }
}

/// Builds the Toeplitz normal operator ([`crate::model::toeplitz`]) for
/// `features` (the exact model, used by forward, adjoint and CG's
/// right-hand side) and `spec` on a resolved backend.
pub fn build_toeplitz(
    backend: BackendKind,
    features: &Features,
    spec: impl FnOnce() -> Result<ToeplitzSpec> + Send,
    sizes: Sizes,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    match backend {
        BackendKind::Cpu => cpu::toeplitz::build(features, spec()?, sizes, options.precision, pool),
        BackendKind::Cuda => cuda::build_toeplitz(features, spec, sizes, options),
        other => Err(unresolved(other)),
    }
}

/// Builds the Cartesian FFT operator (issue 5 §3) on a resolved backend.
pub fn build_cartesian(
    backend: BackendKind,
    cartesian: Arc<Cartesian>,
    sensitivities: Option<&[num_complex::Complex32]>,
    sizes: Sizes,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    cartesian.check_sizes(sizes)?;
    match backend {
        BackendKind::Cpu => {
            cpu::cartesian::build(cartesian, sensitivities, sizes, options.precision, pool)
        }
        BackendKind::Cuda => cuda::build_cartesian(&cartesian, sensitivities, sizes, options),
        other => Err(unresolved(other)),
    }
}

/// Whether the FFT-based operators (Toeplitz, Cartesian) can run on CUDA,
/// i.e. whether cuFFT loads.
pub fn cuda_fft_available() -> bool {
    cuda::fft::available().is_ok()
}

/// Usable CUDA devices (0 when the CUDA backend is absent).
pub fn cuda_device_count() -> usize {
    cuda::device_count()
}
