//! The NUFFT executors of the fast path, per backend.

use crate::error::{Result, Status};
use crate::nufft::{NufftExecutor, NufftSpec};
use crate::plan::BackendKind;
use std::sync::Arc;

/// An executor for `spec` with `points` (ndims×M radians, sample fastest),
/// on `backend`: CUDA plans run it on device `device` (the host interface:
/// inputs and outputs cross PCIe per call) and fall back to the CPU only
/// where the CUDA NUFFT is unavailable (no cuFFT); the CPU's runs on `pool`.
pub fn build(
    backend: BackendKind,
    device: usize,
    spec: &NufftSpec,
    points: &[f64],
    npoints: usize,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn NufftExecutor>> {
    if backend == BackendKind::Cuda {
        match crate::backend::cuda::nufft::build(spec, points, npoints, device) {
            Err(e) if e.status == Status::BackendUnavailable => {}
            built => return built,
        }
    }
    crate::nufft::cpu::build(spec, points, npoints, pool)
}
