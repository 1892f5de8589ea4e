//! Backends: where and how the operators are computed.

pub mod cpu;

use crate::error::{Error, Result, Status};
use crate::model::{Features, Sizes};
use crate::op::EncodingOperator;
use crate::plan::{BackendKind, Options};
use std::sync::Arc;

/// The backend a plan with these options runs on (never `Auto`).
pub fn resolve(options: &Options) -> Result<BackendKind> {
    match options.backend {
        BackendKind::Auto | BackendKind::Cpu => Ok(BackendKind::Cpu),
        BackendKind::Cuda => Err(Error::new(
            Status::BackendUnavailable,
            "the CUDA backend is not available in this build of horecon",
        )),
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
        other => Err(Error::internal(format!(
            "backend {other:?} is not resolved"
        ))),
    }
}

/// Usable CUDA devices (0 when the CUDA backend is absent).
pub fn cuda_device_count() -> usize {
    0
}
