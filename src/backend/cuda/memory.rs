//! Device memory: plain allocations (never managed memory) that report
//! failure as `OutOfMemory` with the sizes, and the chunking knobs.

use super::context::{driver_error, Device};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::sync::Arc;

/// A device allocation of `bytes` bytes, freed on drop.
pub struct DeviceBuffer {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
    device: Arc<Device>,
}

impl DeviceBuffer {
    /// Allocates room for `count` elements of `T`; `what` names it in errors.
    pub fn new<T>(device: &Arc<Device>, count: usize, what: &str) -> Result<DeviceBuffer> {
        let bytes = count
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::out_of_memory(format!("{what}: {count} elements overflow")))?
            .max(16);
        device.bind()?;
        // SAFETY: a plain allocation on the bound context.
        match unsafe { result::malloc_sync(bytes) } {
            Ok(ptr) => Ok(DeviceBuffer {
                ptr,
                bytes,
                device: device.clone(),
            }),
            Err(e) => {
                let (free, total) = device.memory().unwrap_or((0, 0));
                Err(if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                    Error::out_of_memory(format!(
                        "could not allocate {what} on {} (device {}): {bytes} bytes needed, {free} of {total} bytes free",
                        device.name, device.ordinal
                    ))
                } else {
                    driver_error(&format!("allocating {what} ({bytes} bytes)"), e)
                })
            }
        }
    }

    /// A buffer holding a copy of `host` (synchronous).
    pub fn from_host<T: Copy>(
        device: &Arc<Device>,
        host: &[T],
        what: &str,
    ) -> Result<DeviceBuffer> {
        let b = DeviceBuffer::new::<T>(device, host.len(), what)?;
        b.fill(host)?;
        Ok(b)
    }

    /// Copies `host` into the start of the buffer (synchronous).
    fn fill<T: Copy>(&self, host: &[T]) -> Result<()> {
        self.upload(host, Stream(std::ptr::null_mut()))?;
        if !host.is_empty() {
            // SAFETY: null stream = legacy default stream; waits for the copy.
            unsafe { result::stream::synchronize(std::ptr::null_mut()) }
                .map_err(|e| driver_error("uploading", e))?;
        }
        Ok(())
    }

    /// Makes the buffer a copy of `host` (synchronous): in place when it has
    /// exactly the bytes that [`DeviceBuffer::from_host`] would allocate, else
    /// in a new allocation (the old one is freed). No work queued on any
    /// stream may use the buffer meanwhile (the caller holds it exclusively).
    pub fn refill<T: Copy>(&mut self, host: &[T], what: &str) -> Result<()> {
        let bytes = std::mem::size_of_val(host).max(16);
        if bytes == self.bytes {
            self.fill(host)
        } else {
            *self = DeviceBuffer::from_host(&self.device.clone(), host, what)?;
            Ok(())
        }
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Room for `len` elements of `T`, else an internal error.
    pub(super) fn check<T>(&self, len: usize) -> Result<()> {
        if len.saturating_mul(std::mem::size_of::<T>()) > self.bytes {
            return Err(Error::internal(format!(
                "device buffer of {} bytes is too small for {len} elements",
                self.bytes
            )));
        }
        Ok(())
    }

    /// Host → device on `stream` (the host slice must outlive the copy: callers synchronise).
    pub fn upload<T: Copy>(&self, host: &[T], stream: Stream) -> Result<()> {
        self.check::<T>(host.len())?;
        if host.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: size checked; the caller synchronises before `host` goes away.
        unsafe { result::memcpy_htod_async(self.ptr, host, stream.0) }
            .map_err(|e| driver_error("copying to the GPU", e))
    }

    /// Device → host, synchronous with respect to `stream`.
    pub fn download<T: Copy>(&self, host: &mut [T], stream: Stream) -> Result<()> {
        self.check::<T>(host.len())?;
        if host.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: size checked; synchronised below before returning.
        unsafe {
            result::memcpy_dtoh_async(host, self.ptr, stream.0)
                .map_err(|e| driver_error("copying from the GPU", e))?;
            result::stream::synchronize(stream.0)
                .map_err(|e| driver_error("copying from the GPU", e))
        }
    }

    /// Sets all bytes to zero on `stream`.
    pub fn zero(&self, stream: Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the whole allocation.
        unsafe { result::memset_d8_async(self.ptr, 0, self.bytes, stream.0) }
            .map_err(|e| driver_error("clearing GPU memory", e))
    }

    /// Copies all of `src` (same size) into `self` on `stream`.
    pub fn copy_from(&self, src: &DeviceBuffer, stream: Stream) -> Result<()> {
        if src.bytes != self.bytes {
            return Err(Error::internal(
                "device copy between buffers of different sizes",
            ));
        }
        self.device.bind()?;
        // SAFETY: equal sizes, both live.
        unsafe { result::memcpy_dtod_async(self.ptr, src.ptr, self.bytes, stream.0) }
            .map_err(|e| driver_error("copying on the GPU", e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: allocated by malloc_sync, freed once; errors cannot be reported from drop.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// An internal knob from the environment (tests force small chunks with it;
/// the benchmark sweeps kernel shapes with it): a positive count.
pub fn knob(name: &str) -> Option<usize> {
    setting(name).filter(|&v| v > 0)
}

/// As [`knob`], zero allowed (switches).
pub fn setting(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok()
}

/// A CUDA stream handle (the operator's own stream).
#[derive(Clone, Copy)]
pub struct Stream(pub sys::CUstream);

impl Stream {
    /// Waits until everything queued on the stream has finished (its
    /// device's context must be current).
    pub fn synchronize(self, what: &str) -> Result<()> {
        // SAFETY: a live stream of the current context.
        unsafe { result::stream::synchronize(self.0) }.map_err(|e| driver_error(what, e))
    }
}

impl DeviceBuffer {
    /// Copies `bytes` bytes from `src` (from byte `from`) into `self` (at byte
    /// `at`) on `stream`, between two devices or within one
    /// (cuMemcpyPeerAsync: staged through the host where the GPUs have no
    /// peer access). The stream's context must be current.
    pub fn copy_range_from(
        &self,
        at: usize,
        src: &DeviceBuffer,
        from: usize,
        bytes: usize,
        stream: Stream,
    ) -> Result<()> {
        let fits =
            |offset: usize, size: usize| offset.checked_add(bytes).is_some_and(|e| e <= size);
        if !fits(at, self.bytes) || !fits(from, src.bytes) {
            return Err(Error::internal(format!(
                "device copy of {bytes} bytes from byte {from} of {} into byte {at} of {}",
                src.bytes, self.bytes
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: both ranges checked above; both buffers live until the caller synchronises.
        unsafe {
            sys::cuMemcpyPeerAsync(
                self.ptr + at as u64,
                self.device.ctx.cu_ctx(),
                src.ptr + from as u64,
                src.device.ctx.cu_ctx(),
                bytes,
                stream.0,
            )
        }
        .result()
        .map_err(|e| driver_error("copying between GPUs", e))
    }

    /// Copies `rows` rows of `row_bytes` bytes from `src` (the first at byte
    /// `from`, one every `src_pitch` bytes) into `self` (at byte `at`, one every
    /// `pitch` bytes) on `stream`, between two devices or within one, in one
    /// call (cuMemcpy3DPeerAsync of depth 1): a part's samples of every coil.
    /// One [`DeviceBuffer::copy_range_from`] per row where a pitch is beyond
    /// what the driver takes. The stream's context must be current.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_rows_from(
        &self,
        (at, pitch): (usize, usize),
        src: &DeviceBuffer,
        (from, src_pitch): (usize, usize),
        row_bytes: usize,
        rows: usize,
        stream: Stream,
    ) -> Result<()> {
        if rows == 0 || row_bytes == 0 {
            return Ok(());
        }
        let end = |offset: usize, pitch: usize| {
            (rows - 1)
                .checked_mul(pitch)
                .and_then(|r| r.checked_add(offset))
                .and_then(|r| r.checked_add(row_bytes))
        };
        let fits = |offset: usize, pitch: usize, size: usize| {
            pitch >= row_bytes && end(offset, pitch).is_some_and(|e| e <= size)
        };
        if !fits(at, pitch, self.bytes) || !fits(from, src_pitch, src.bytes) {
            return Err(Error::internal(format!(
                "device copy of {rows} rows of {row_bytes} bytes from byte {from} (pitch {src_pitch}) of {} into byte {at} (pitch {pitch}) of {}",
                src.bytes, self.bytes
            )));
        }
        if rows == 1 || pitch.max(src_pitch) > i32::MAX as usize {
            for r in 0..rows {
                self.copy_range_from(at + r * pitch, src, from + r * src_pitch, row_bytes, stream)?;
            }
            return Ok(());
        }
        let copy = sys::CUDA_MEMCPY3D_PEER {
            srcXInBytes: 0,
            srcY: 0,
            srcZ: 0,
            srcLOD: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src.ptr + from as u64,
            srcArray: std::ptr::null_mut(),
            srcContext: src.device.ctx.cu_ctx(),
            srcPitch: src_pitch,
            srcHeight: rows,
            dstXInBytes: 0,
            dstY: 0,
            dstZ: 0,
            dstLOD: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: self.ptr + at as u64,
            dstArray: std::ptr::null_mut(),
            dstContext: self.device.ctx.cu_ctx(),
            dstPitch: pitch,
            dstHeight: rows,
            WidthInBytes: row_bytes,
            Height: rows,
            Depth: 1,
        };
        // SAFETY: every row of both ranges checked above; both buffers live
        // until the caller synchronises; `copy` outlives the call.
        unsafe { sys::cuMemcpy3DPeerAsync(&copy, stream.0) }
            .result()
            .map_err(|e| driver_error("copying rows between GPUs", e))
    }
}
