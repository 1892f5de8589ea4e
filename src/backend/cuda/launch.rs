//! Kernel launches: the arguments as the driver takes them, the launch
//! itself, and the grid of the O(N) kernels (grid-stride loops over N
//! points).

use super::context::driver_error;
use super::memory::Stream;
use crate::error::Result;
use crate::op::Precision;
use cudarc::driver::{result, sys, CudaFunction};
use std::ffi::c_void;

/// Threads per block and blocks of the O(N) kernels.
pub(super) const UTIL_THREADS: u32 = 256;
const UTIL_BLOCKS: u32 = 1024;

/// The kernels' `MODE` define of a precision mode.
pub(super) fn mode_code(p: Precision) -> i64 {
    match p {
        Precision::Accurate => 0,
        Precision::Fast => 1,
        Precision::Double => 2,
    }
}

/// Kernel arguments, each stored in 8 bytes (a 32-bit `int` reads the low half).
#[derive(Default)]
pub(super) struct Args(Vec<u64>);

impl Args {
    pub(super) fn ptr(mut self, p: sys::CUdeviceptr) -> Self {
        self.0.push(p);
        self
    }
    pub(super) fn int(mut self, v: i64) -> Self {
        self.0.push(v as u64);
        self
    }
    pub(super) fn i32(mut self, v: i32) -> Self {
        self.0.push(v as u32 as u64);
        self
    }
    pub(super) fn f64(mut self, v: f64) -> Self {
        self.0.push(v.to_bits());
        self
    }
}

pub(super) fn launch(
    f: &CudaFunction,
    grid: (u32, u32, u32),
    block: u32,
    stream: Stream,
    args: Args,
) -> Result<()> {
    let mut values = args.0;
    let mut params: Vec<*mut c_void> = values
        .iter_mut()
        .map(|v| v as *mut u64 as *mut c_void)
        .collect();
    // SAFETY: the parameters match the kernel's signature (8-byte slots, little endian);
    // `values` outlives the call (the driver copies parameters at launch).
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            grid,
            (block, 1, 1),
            0,
            stream.0,
            &mut params,
        )
    }
    .map_err(|e| driver_error("launching a kernel", e))
}

pub(super) fn util_grid(n: usize) -> (u32, u32, u32) {
    let blocks = n
        .div_ceil(UTIL_THREADS as usize)
        .clamp(1, UTIL_BLOCKS as usize);
    (blocks as u32, 1, 1)
}

/// Launches an O(N) kernel over `n` points: [`util_grid`]`(n)` blocks of
/// [`UTIL_THREADS`].
pub(super) fn launch_over(f: &CudaFunction, n: usize, stream: Stream, args: Args) -> Result<()> {
    launch(f, util_grid(n), UTIL_THREADS, stream, args)
}
