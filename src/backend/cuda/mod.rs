//! The CUDA backend: the exact operators and CG on one GPU.
//!
//! Kernels live in `kernels/*.cu`, are embedded in the library and compiled
//! by NVRTC at first use for the device's architecture (cached per process
//! and device), so the crate builds and runs on machines without CUDA; the
//! driver and NVRTC are loaded dynamically and looked for before use.

pub mod context;
pub mod memory;
pub mod operator;

use crate::error::Result;
use crate::model::{Features, Sizes};
use crate::op::{EncodingOperator, Precision};
pub use operator::CudaOperator;

/// Ok when device `ordinal` can be used, else the reason.
pub fn usable(ordinal: usize) -> std::result::Result<(), String> {
    context::device(ordinal).map(|_| ())
}

/// Number of CUDA devices (0 without driver, NVRTC or GPU).
pub fn device_count() -> usize {
    context::probe().unwrap_or(0)
}

/// Builds the CUDA operator on device `ordinal`.
pub fn build(
    features: &Features,
    sizes: Sizes,
    precision: Precision,
    ordinal: usize,
) -> Result<Box<dyn EncodingOperator>> {
    let device = context::device(ordinal).map_err(operator::unavailable)?;
    Ok(Box::new(CudaOperator::new(
        device, features, sizes, precision,
    )?))
}
