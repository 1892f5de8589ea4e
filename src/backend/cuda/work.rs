//! The device workspace of a call ([`Work`]): the operator's stream, its
//! image and data vectors and their staging, held under the operator's lock
//! for one call or one CG solve ([`WorkGuard`]), and the cache of per-call
//! items that a busy operator makes afresh ([`take`]).

use super::context::{driver_error, Device};
use super::memory::{DeviceBuffer, Stream};
use super::pinned::PinnedHost;
use crate::error::{try_collect, Result};
use crate::model::Sizes;
use cudarc::driver::CudaStream;
use num_complex::Complex32;
use std::sync::{Arc, Mutex, OnceLock, TryLockError};

/// Blocks (and float64 partial sums) of CG's dot products.
pub(super) const DOT_BLOCKS: usize = 256;

/// Device vectors and scratch of one operator, used under its lock.
pub(super) struct Work {
    pub(super) stream: Arc<CudaStream>,
    /// N double2 image in/out, M×L double2 data.
    pub(super) image: DeviceBuffer,
    pub(super) image_out: DeviceBuffer,
    pub(super) data: DeviceBuffer,
    pub(super) sample_weights: DeviceBuffer,
    /// DOT_BLOCKS float64 partial sums of CG's dot products.
    pub(super) dot: DeviceBuffer,
    /// float2 staging of host vectors (max(N, M·L) elements).
    pub(super) staging: DeviceBuffer,
    /// Page-locked host memory for those vectors, made at the first transfer
    /// (`None` inside: refused, pageable transfers).
    pinned: OnceLock<Option<PinnedHost>>,
}

impl Work {
    pub(super) fn new(device: &Arc<Device>, sizes: Sizes) -> Result<Work> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = sizes;
        device.bind()?;
        let stream = device
            .ctx
            .new_stream()
            .map_err(|e| driver_error("creating a stream", e))?;
        Ok(Work {
            stream,
            image: DeviceBuffer::new::<[f64; 2]>(device, n, "image (N)")?,
            image_out: DeviceBuffer::new::<[f64; 2]>(device, n, "image (N)")?,
            data: DeviceBuffer::new::<[f64; 2]>(device, m * coils, "data (M x L)")?,
            sample_weights: DeviceBuffer::new::<f64>(device, m, "sample weights (M)")?,
            dot: DeviceBuffer::new::<f64>(device, DOT_BLOCKS, "dot-product partial sums")?,
            staging: DeviceBuffer::new::<Complex32>(device, n.max(m * coils), "transfer staging")?,
            pinned: OnceLock::new(),
        })
    }

    /// The page-locked host buffer of the staging's size (at most
    /// 64 MiB), or `None` where the driver refuses it.
    pub(super) fn pinned(&self) -> Option<&PinnedHost> {
        self.pinned
            .get_or_init(|| PinnedHost::new(self.staging.device(), self.staging.bytes))
            .as_ref()
    }
}

thread_local! {
    /// Operators whose shared workspace this thread holds (a CG solve in progress).
    static HELD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The workspace of one call: the operator's own (under its lock), or, for a
/// call made while this thread already holds it (an operator applied from
/// CG's progress callback), temporary buffers of its own instead of a deadlock.
pub(super) enum WorkGuard<'a> {
    Held {
        guard: std::sync::MutexGuard<'a, Work>,
        key: usize,
    },
    Temporary(Work),
}

impl std::ops::Deref for WorkGuard<'_> {
    type Target = Work;
    fn deref(&self) -> &Work {
        match self {
            WorkGuard::Held { guard, .. } => guard,
            WorkGuard::Temporary(work) => work,
        }
    }
}

impl Drop for WorkGuard<'_> {
    fn drop(&mut self) {
        if let WorkGuard::Held { key, .. } = self {
            let key = *key;
            HELD.with(|held| {
                let mut held = held.borrow_mut();
                if let Some(i) = held.iter().rposition(|k| *k == key) {
                    held.remove(i);
                }
            });
        }
    }
}

impl<'a> WorkGuard<'a> {
    /// The workspace `work` (known by its address): under its lock, or
    /// temporary buffers for `sizes` on `device` when this thread already
    /// holds it.
    pub(super) fn lock(
        work: &'a Mutex<Work>,
        device: &Arc<Device>,
        sizes: Sizes,
    ) -> Result<WorkGuard<'a>> {
        let key = work as *const Mutex<Work> as usize;
        device.bind()?;
        if HELD.with(|held| held.borrow().contains(&key)) {
            return Ok(WorkGuard::Temporary(Work::new(device, sizes)?));
        }
        let guard = work.lock().unwrap_or_else(|e| e.into_inner());
        HELD.with(|held| held.borrow_mut().push(key));
        Ok(WorkGuard::Held { guard, key })
    }
}

/// Sample weights W uploaded to a workspace's `sample_weights`; keeps the
/// host copy until dropped (the caller synchronises the stream first).
pub(super) struct StagedWeights<'a> {
    _host: Option<Vec<f64>>,
    device: Option<&'a DeviceBuffer>,
}

impl StagedWeights<'_> {
    /// The device weights (M float64), `None` when W = 1.
    pub(super) fn device(&self) -> Option<&DeviceBuffer> {
        self.device
    }
}

impl Work {
    /// Uploads `weights` (M, `None` = 1) as float64 on stream `s`.
    pub(super) fn stage_weights(
        &self,
        weights: Option<&[f32]>,
        s: Stream,
    ) -> Result<StagedWeights<'_>> {
        let host = weights
            .map(|v| try_collect(v.iter().map(|&x| x as f64), "sample weights (M)"))
            .transpose()?;
        if let Some(hw) = &host {
            self.sample_weights.upload(hw, s)?;
        }
        Ok(StagedWeights {
            device: host.as_ref().map(|_| &self.sample_weights),
            _host: host,
        })
    }
}

/// A cached item taken for one call, or a fresh one when the cache is busy
/// (another thread, or this one re-entering from CG's progress callback).
enum Taken<'a, T> {
    Cached(std::sync::MutexGuard<'a, Option<T>>),
    Fresh(T),
}

impl<T> std::ops::Deref for Taken<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            // The cached slot is filled before a `Cached` is handed out.
            Taken::Cached(g) => g.as_ref().unwrap_or_else(|| unreachable!()),
            Taken::Fresh(t) => t,
        }
    }
}

/// Takes the cached item of `slot` (made by `make` on first use), or makes a
/// fresh one when the slot is in use.
pub(super) fn take<T>(
    slot: &Mutex<Option<T>>,
    make: impl FnOnce() -> Result<T>,
) -> Result<impl std::ops::Deref<Target = T> + '_> {
    match slot.try_lock() {
        Ok(mut guard) => {
            if guard.is_none() {
                *guard = Some(make()?);
            }
            Ok(Taken::Cached(guard))
        }
        Err(TryLockError::Poisoned(p)) => {
            let mut guard = p.into_inner();
            if guard.is_none() {
                *guard = Some(make()?);
            }
            Ok(Taken::Cached(guard))
        }
        Err(TryLockError::WouldBlock) => Ok(Taken::Fresh(make()?)),
    }
}
