//! How the parts of a split operator ([`super::multi`], [`super::coil_split`])
//! exchange images ([`Links`]): by NCCL where every part sits on a GPU of its
//! own and libnccl loads, else by device-to-device copies.
//!
//!   broadcast   x (first device) → image_p on every part p      (ncclBroadcast, root 0)
//!   sum         out (first device) = Σ_p image_p                (ncclReduce, ncclSum, root 0)
//!
//! The copies (`cuMemcpyPeerAsync`, direct where the GPUs have peer access,
//! staged through the host otherwise) are the fallback: for parts that share
//! a GPU (NCCL refuses two ranks on one device; the tests'
//! `HORECON_CUDA_TEST_PARTS`), where libnccl is missing (cudarc looks for
//! `libnccl.so`), where its communicators do not initialise, or with
//! `HORECON_NCCL=0`. One thread issues the collectives of all parts in one
//! NCCL group (NCCL's single-thread, several-devices use) and waits for them;
//! one process-wide lock keeps the collectives of different operators on the
//! same GPUs from interleaving (NCCL kernels of two communicators launched in
//! different orders on two devices can wait on each other for ever).

use super::context::{enable_peer_access, Device};
use super::memory::{setting, DeviceBuffer, Stream};
use crate::error::{Error, Result, Status};
use cudarc::nccl::{result as nccl, sys as nccl_sys};
use std::sync::{Arc, Mutex};

/// Held while one operator's collectives are issued and run (module documentation).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// NCCL communicators, rank p on the device of part p.
struct Nccl {
    comms: Vec<nccl_sys::ncclComm_t>,
    /// ncclGetVersion's code (e.g. 22803 for 2.28.3).
    version: i32,
}

// SAFETY: the communicators are plain handles, used by one thread at a time
// (under the split operator's part locks) and destroyed once, in drop.
unsafe impl Send for Nccl {}
unsafe impl Sync for Nccl {}

impl Drop for Nccl {
    fn drop(&mut self) {
        for &comm in &self.comms {
            // SAFETY: made by ncclCommInitAll, destroyed once; errors cannot be reported from drop.
            let _ = unsafe { nccl::comm_destroy(comm) };
        }
    }
}

/// An NCCL failure as a `Backend` error.
fn nccl_error(what: &str, e: nccl::NcclError) -> Error {
    Error::new(Status::Backend, format!("{what}: NCCL error {:?}", e.0))
}

impl Nccl {
    /// Communicators over `devices` (distinct), or why there are none.
    fn new(devices: &[&Arc<Device>]) -> std::result::Result<Nccl, String> {
        if setting("HORECON_NCCL") == Some(0) {
            return Err("HORECON_NCCL=0".into());
        }
        let mut ordinals: Vec<i32> = devices.iter().map(|d| d.ordinal as i32).collect();
        let mut distinct = ordinals.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != ordinals.len() {
            return Err("parts share a GPU".into());
        }
        // SAFETY: only tries to dlopen the library.
        if !unsafe { nccl_sys::is_culib_present() } {
            return Err("libnccl.so was not found".into());
        }
        // cudarc panics on a missing symbol: an old or odd libnccl is a reason, not a crash.
        let made = std::panic::catch_unwind(move || {
            let version = nccl::get_nccl_version()
                .map_err(|e| format!("ncclGetVersion failed ({:?})", e.0))?;
            let mut comms = vec![std::ptr::null_mut(); ordinals.len()];
            // SAFETY: one out-handle per listed device.
            unsafe {
                nccl::comm_init_all(
                    comms.as_mut_ptr(),
                    comms.len() as i32,
                    ordinals.as_mut_ptr(),
                )
            }
            .map_err(|e| format!("ncclCommInitAll failed ({:?})", e.0))?;
            Ok(Nccl { comms, version })
        });
        made.unwrap_or_else(|_| Err("libnccl lacks a function cudarc calls".into()))
    }

    /// Runs `each(rank, its communicator)` for every part in one NCCL group
    /// and waits for the parts' `streams` (each on `devices`' device of its
    /// rank), under the process-wide lock; leaves the first device bound.
    fn group(
        &self,
        what: &str,
        devices: &[Arc<Device>],
        streams: &[Stream],
        each: impl Fn(
            usize,
            nccl_sys::ncclComm_t,
        ) -> std::result::Result<nccl::NcclStatus, nccl::NcclError>,
    ) -> Result<()> {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        nccl::group_start().map_err(|e| nccl_error(what, e))?;
        let issued = self
            .comms
            .iter()
            .enumerate()
            .try_for_each(|(rank, &comm)| each(rank, comm).map(|_| ()));
        // the group is closed even when a call failed, so that NCCL is left usable
        let closed = nccl::group_end();
        issued.map_err(|e| nccl_error(what, e))?;
        closed.map_err(|e| nccl_error(what, e))?;
        for (device, s) in devices.iter().zip(streams) {
            device.bind()?;
            s.synchronize(what)?;
        }
        devices[0].bind()
    }
}

/// The NCCL stream handle of a driver stream (the same object).
fn nccl_stream(s: Stream) -> nccl_sys::cudaStream_t {
    s.0 as nccl_sys::cudaStream_t
}

/// How the parts of one split operator exchange images (module documentation).
pub(super) struct Links {
    /// The parts' devices, in order.
    devices: Vec<Arc<Device>>,
    nccl: Option<Nccl>,
    /// Peer access between the first device and every other one (the copies' path).
    peer: bool,
    /// Why the copies are used, when they are.
    reason: String,
}

impl Links {
    /// The links between `devices[0]` and the other parts' devices: peer
    /// access enabled where possible, NCCL communicators where they can be
    /// made. Leaves the first device bound.
    pub fn new(devices: &[&Arc<Device>]) -> Result<Links> {
        let first = devices[0];
        let mut peer = true;
        for device in &devices[1..] {
            peer &= enable_peer_access(first, device)?;
        }
        let (nccl, reason) = match Nccl::new(devices) {
            Ok(n) => (Some(n), String::new()),
            Err(reason) => (None, reason),
        };
        first.bind()?;
        Ok(Links {
            devices: devices.iter().map(|&d| d.clone()).collect(),
            nccl,
            peer,
            reason,
        })
    }

    /// Whether the images move by NCCL.
    pub fn nccl(&self) -> bool {
        self.nccl.is_some()
    }

    /// The path in words, for names and the verbose note.
    pub fn describe(&self) -> String {
        let copies = if self.peer {
            "peer access"
        } else {
            "staged through the host: no peer access"
        };
        match &self.nccl {
            Some(n) => format!(
                "NCCL {}.{}.{}",
                n.version / 10000,
                n.version / 100 % 100,
                n.version % 100
            ),
            None => format!(
                "device-to-device copies ({copies}; no NCCL: {})",
                self.reason
            ),
        }
    }

    /// Every `targets[p]` (buffer on part p's device, its stream) = the
    /// first `bytes` bytes of `x` (first device) by one NCCL broadcast,
    /// waited for (the first device left bound); `Ok(false)` without NCCL
    /// (the parts then copy `x` themselves).
    pub fn broadcast(
        &self,
        x: &DeviceBuffer,
        targets: &[(&DeviceBuffer, Stream)],
        bytes: usize,
    ) -> Result<bool> {
        let what = "broadcasting an image to the GPU parts";
        self.exchange(what, x, targets, bytes, |target, comm, s| {
            // SAFETY: `bytes` fits both buffers (checked), which live until the caller synchronises.
            unsafe {
                nccl::broadcast(
                    x.ptr as *const _,
                    target.ptr as *mut _,
                    bytes,
                    nccl_sys::ncclDataType_t::ncclUint8,
                    0,
                    comm,
                    s,
                )
            }
        })
    }

    /// out (first device) = Σ_p sources[p] (float64 values, `bytes` bytes,
    /// each on part p's device with its stream) by one NCCL reduction,
    /// waited for (the first device left bound); `Ok(false)` without NCCL.
    pub fn sum(
        &self,
        sources: &[(&DeviceBuffer, Stream)],
        out: &DeviceBuffer,
        bytes: usize,
    ) -> Result<bool> {
        let what = "summing the GPU parts' images";
        self.exchange(what, out, sources, bytes, |source, comm, s| {
            // SAFETY: `bytes` fits both buffers (checked), which live until the caller synchronises.
            unsafe {
                nccl::reduce(
                    source.ptr as *const _,
                    out.ptr as *mut _,
                    bytes / 8,
                    nccl_sys::ncclDataType_t::ncclFloat64,
                    nccl_sys::ncclRedOp_t::ncclSum,
                    0,
                    comm,
                    s,
                )
            }
        })
    }

    /// One collective between `root` (first device) and `parts[p]` (a buffer
    /// on part p's device, its stream): `call(part's buffer, its
    /// communicator, its stream)` for every rank in one group, after the
    /// sizes are checked, waited for; `Ok(false)` without NCCL.
    fn exchange(
        &self,
        what: &str,
        root: &DeviceBuffer,
        parts: &[(&DeviceBuffer, Stream)],
        bytes: usize,
        call: impl Fn(
            &DeviceBuffer,
            nccl_sys::ncclComm_t,
            nccl_sys::cudaStream_t,
        ) -> std::result::Result<nccl::NcclStatus, nccl::NcclError>,
    ) -> Result<bool> {
        let Some(n) = &self.nccl else {
            return Ok(false);
        };
        check(bytes, root, parts.iter().map(|t| t.0), n)?;
        let streams: Vec<Stream> = parts.iter().map(|t| t.1).collect();
        n.group(what, &self.devices, &streams, |rank, comm| {
            let (buffer, s) = parts[rank];
            call(buffer, comm, nccl_stream(s))
        })?;
        Ok(true)
    }
}

/// `bytes` (whole float64 values) fits `root` and one buffer of each rank of `n`.
fn check<'a>(
    bytes: usize,
    root: &DeviceBuffer,
    parts: impl ExactSizeIterator<Item = &'a DeviceBuffer>,
    n: &Nccl,
) -> Result<()> {
    let ranks = parts.len() == n.comms.len();
    let mut sizes = std::iter::once(root.bytes).chain(parts.map(|b| b.bytes));
    if !ranks || bytes % 8 != 0 || sizes.any(|size| size < bytes) {
        return Err(Error::internal(format!(
            "an NCCL exchange of {bytes} bytes over {} ranks with buffers of the wrong count or size",
            n.comms.len()
        )));
    }
    Ok(())
}
