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
use crate::plan::{BackendKind, Options};
use std::sync::Arc;

/// The backend a plan with these options runs on (never `Auto`).
pub fn resolve(options: &Options) -> Result<BackendKind> {
    match options.backend {
        BackendKind::Cpu => Ok(BackendKind::Cpu),
        // AUTO: CUDA when a usable GPU, driver and NVRTC are present, else the CPU, silently.
        BackendKind::Auto => Ok(match cuda::usable(options.device as usize) {
            Ok(()) => BackendKind::Cuda,
            Err(_) => BackendKind::Cpu,
        }),
        BackendKind::Cuda => cuda::usable(options.device as usize)
            .map(|()| BackendKind::Cuda)
            .map_err(|reason| {
                Error::new(
                    Status::BackendUnavailable,
                    format!("CUDA was requested but is unavailable: {reason}"),
                )
            }),
    }
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
        BackendKind::Cuda => {
            cuda::build(features, sizes, options.precision, options.device as usize)
        }
        other => Err(Error::internal(format!(
            "backend {other:?} is not resolved"
        ))),
    }
}

/// Builds the Toeplitz normal operator ([`crate::model::toeplitz`]) for
/// `features` (the exact model, used by forward, adjoint and CG's
/// right-hand side) and `spec` on a resolved backend.
pub fn build_toeplitz(
    backend: BackendKind,
    features: &Features,
    spec: ToeplitzSpec,
    sizes: Sizes,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    match backend {
        BackendKind::Cpu => cpu::toeplitz::build(features, spec, sizes, options.precision, pool),
        BackendKind::Cuda => cuda::build_toeplitz(
            features,
            spec,
            sizes,
            options.precision,
            options.device as usize,
        ),
        other => Err(Error::internal(format!(
            "backend {other:?} is not resolved"
        ))),
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
    match backend {
        BackendKind::Cpu => {
            cpu::cartesian::build(cartesian, sensitivities, sizes, options.precision, pool)
        }
        BackendKind::Cuda => cuda::build_cartesian(
            &cartesian,
            sensitivities,
            sizes,
            options.precision,
            options.device as usize,
        ),
        other => Err(Error::internal(format!(
            "backend {other:?} is not resolved"
        ))),
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
