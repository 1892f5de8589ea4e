//! Page-locked host memory through which the operators' host vectors travel
//! ([`PinnedHost`]).
//!
//! A copy from or to pageable memory goes through the driver's own small
//! pinned buffers, one thread, at 7–11 GB/s: on an H100 a 28 MB vector (the
//! data of `ho3d-96`, 221,184 samples × 16 coils in float2) took 3.7 ms up and
//! 2.6 ms down, about a tenth of a fast-path application. Copied on the
//! plan's threads (the pool of the plan call: [`crate::call_pool`]) into a
//! pinned buffer and moved by one DMA, the same vector
//! takes 0.26 + 0.54 ms (BENCHMARKS.md, session 13).

use super::context::{driver_error, Device};
use super::memory::{knob, setting, DeviceBuffer, Stream};
use crate::call_pool;
use crate::error::Result;
use cudarc::driver::result;
use std::sync::Arc;

/// The most page-locked memory one workspace holds; longer vectors pass
/// through it in pieces.
const MAX_PINNED_BYTES: usize = 64 << 20;

/// A page-locked host buffer of `bytes` bytes (cuMemHostAlloc), freed on drop.
pub struct PinnedHost {
    ptr: *mut u8,
    bytes: usize,
    device: Arc<Device>,
}

// SAFETY: the buffer is plain host memory owned by this value; the workspace
// that holds it is used by one thread at a time (under its operator's lock).
unsafe impl Send for PinnedHost {}
unsafe impl Sync for PinnedHost {}

impl PinnedHost {
    /// A buffer for vectors of up to `bytes` bytes (at most
    /// [`MAX_PINNED_BYTES`], or `HORECON_CUDA_PINNED_BYTES`: tests force small
    /// pieces with it), or `None` where the driver refuses page-locked memory
    /// or `HORECON_CUDA_PINNED=0` (transfers then stay pageable).
    pub fn new(device: &Arc<Device>, bytes: usize) -> Option<PinnedHost> {
        if setting("HORECON_CUDA_PINNED") == Some(0) || bytes == 0 {
            return None;
        }
        let bytes = bytes.min(knob("HORECON_CUDA_PINNED_BYTES").unwrap_or(MAX_PINNED_BYTES));
        device.bind().ok()?;
        // SAFETY: a plain host allocation; flags 0 = portable to this context only.
        let ptr = unsafe { result::malloc_host(bytes, 0) }.ok()? as *mut u8;
        Some(PinnedHost {
            ptr,
            bytes,
            device: device.clone(),
        })
    }

    /// The buffer as `len` elements of `T` (len·size_of::<T>() ≤ bytes).
    ///
    /// # Safety
    /// No DMA into or out of the buffer may be in flight.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice<T>(&self, len: usize) -> &mut [T] {
        debug_assert!(len * std::mem::size_of::<T>() <= self.bytes);
        // SAFETY: page-aligned (cuMemHostAlloc), in bounds; exclusive by the caller's lock.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, len) }
    }

    /// Elements of `T` per piece.
    fn piece<T>(&self) -> usize {
        (self.bytes / std::mem::size_of::<T>().max(1)).max(1)
    }

    /// Host → the start of `dst` on `stream`: each piece copied into the
    /// buffer on the calling thread pool once the stream has drained (no
    /// earlier DMA from the buffer in flight, also after a call that failed
    /// before its download), then one DMA. Returns with the last DMA queued.
    pub fn upload<T: Copy + Send + Sync>(
        &self,
        host: &[T],
        dst: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        dst.check::<T>(host.len())?;
        self.device.bind()?;
        let piece = self.piece::<T>();
        for (i, part) in host.chunks(piece).enumerate() {
            stream.synchronize("copying to the GPU")?;
            // SAFETY: the stream has drained every earlier DMA from the buffer.
            let pinned = unsafe { self.slice::<T>(part.len()) };
            copy(part, pinned);
            let at = (i * piece * std::mem::size_of::<T>()) as u64;
            // SAFETY: in bounds of dst (checked); the buffer lives as long as the workspace.
            unsafe { result::memcpy_htod_async(dst.ptr + at, pinned, stream.0) }
                .map_err(|e| driver_error("copying to the GPU", e))?;
        }
        Ok(())
    }

    /// The start of `src` → host, synchronous with respect to `stream`.
    pub fn download<T: Copy + Send + Sync>(
        &self,
        src: &DeviceBuffer,
        host: &mut [T],
        stream: Stream,
    ) -> Result<()> {
        src.check::<T>(host.len())?;
        self.device.bind()?;
        let piece = self.piece::<T>();
        for (i, part) in host.chunks_mut(piece).enumerate() {
            // SAFETY: the previous piece's DMA was drained before its copy out.
            let pinned = unsafe { self.slice::<T>(part.len()) };
            let at = (i * piece * std::mem::size_of::<T>()) as u64;
            // SAFETY: in bounds of src (checked); synchronised before the buffer is read.
            unsafe { result::memcpy_dtoh_async(pinned, src.ptr + at, stream.0) }
                .map_err(|e| driver_error("copying from the GPU", e))?;
            stream.synchronize("copying from the GPU")?;
            copy(pinned, part);
        }
        Ok(())
    }
}

/// dst ← src on the calling plan's threads; serially outside a plan call
/// (no global pool is started).
fn copy<T: Copy + Send + Sync>(src: &[T], dst: &mut [T]) {
    call_pool::install(|| call_pool::copy(src, dst))
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: allocated by malloc_host, freed once; errors cannot be reported from drop.
            let _ = unsafe { result::free_host(self.ptr as *mut _) };
        }
    }
}
