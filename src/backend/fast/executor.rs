//! The NUFFT executors of the fast path, per backend.

use crate::error::Result;
use crate::nufft::{NufftExecutor, NufftSpec};
use crate::plan::BackendKind;
use std::sync::Arc;

/// An executor for `spec` with `points` (ndims×M radians, sample fastest),
/// on `backend`: the CPU's runs on `pool`; CUDA plans run it on device
/// `device` once the CUDA executor is merged (until then on the CPU):
/// `BackendKind::Cuda => crate::backend::cuda::nufft::build(spec, points, npoints, device)`.
pub fn build(
    _backend: BackendKind,
    _device: usize,
    spec: &NufftSpec,
    points: &[f64],
    npoints: usize,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn NufftExecutor>> {
    crate::nufft::cpu::build(spec, points, npoints, pool)
}
