//! The CUDA backend: the exact operators, the FFT-based ones (Toeplitz,
//! Cartesian, NUFFT, fast path) and CG, on one GPU or several of one
//! process (`num_devices`: [`multi`] splits the exact operator by samples,
//! `coil_split` the FFT-based operators by coils, `nufft::split` a NUFFT
//! plan by transforms).
//!
//! Kernels live in `kernels/*.cu`, are embedded in the library and compiled
//! by NVRTC at first use for the device's architecture (cached per process
//! and device), so the crate builds and runs on machines without CUDA; the
//! driver and NVRTC are loaded dynamically and looked for before use.
//!
//! Memory: the model is uploaded once per operator; the per-call
//! intermediates (partial sums) are sized from the free device memory and the
//! work is chunked over outer blocks, inner splits and coil groups; a failed
//! allocation is `OutOfMemory` with the sizes, never an abort.
//!
//! Internal knobs (environment, read when an operator is built; for tests and
//! the benchmark sweep, not part of the API): `HORECON_CUDA_CHUNK_BLOCKS`
//! (outer blocks per launch), `HORECON_CUDA_SPLITS` (inner splits),
//! `HORECON_CUDA_COIL_GROUP` (coils per pass, ≤ 8), and the kernel shape
//! `HORECON_CUDA_R`, `_THREADS`, `_TILE`, `_UNROLL`, `_MINB`, `_TWO_LEVEL`,
//! `_REDUCE`, `_SPLIT`; the float32 modes' tensor-core path
//! `HORECON_CUDA_TENSOR` (0 off, 1 also for groups under 3 coils), `_MT`,
//! `_SEGMENT`;
//! `HORECON_CUDA_DUMP_PTX=dir` writes the compiled PTX;
//! `HORECON_CUDA_TEST_PARTS=P` splits every operator into P parts on
//! the plan's one device, as `num_devices = P` would over P devices
//! ([`placement`], for tests of the multi-GPU paths on one GPU).

pub mod cartesian;
mod coil_split;
mod collective;
pub mod context;
pub mod fast;
mod fd;
pub mod fft;
mod launch;
mod layout;
pub mod memory;
pub mod module_cache;
pub mod multi;
pub mod nufft;
pub mod operator;
mod phase_sum;
mod pinned;
mod probe;
mod space;
pub mod toeplitz;
mod vectors;
mod work;

use crate::error::{Error, Result, Status};
use crate::model::{Features, Sizes};
use crate::op::EncodingOperator;
use crate::options::Options;
use context::{unavailable, Device};
use memory::knob;
pub use multi::CudaMulti;
pub use operator::CudaOperator;
use std::sync::Arc;
pub use vectors::CudaCore;

/// Cancellation point between chunks of device work (issue 11): waits for
/// the work queued on `stream` (so that a cancel takes effect before the next
/// chunk is queued and the fraction reported is work done), then reports
/// `fraction` of the current step and fails with `Cancelled` once the call is
/// cancelled. Chunk loops call it only when they have more than one chunk.
pub(crate) fn checkpoint(stream: memory::Stream, fraction: f64) -> Result<()> {
    // SAFETY: synchronising a live stream of this call.
    unsafe { cudarc::driver::result::stream::synchronize(stream.0) }
        .map_err(|e| context::driver_error("waiting for a chunk", e))?;
    crate::progress::check(fraction)
}

/// Ok when device `ordinal` can be used, else the reason.
pub fn usable(ordinal: usize) -> std::result::Result<(), String> {
    context::device(ordinal).map(|_| ())
}

/// Number of CUDA devices (0 without driver, NVRTC or GPU).
pub fn device_count() -> usize {
    context::probe().unwrap_or(0)
}

/// The devices of the parts of an operator for `options` (first device
/// `device`, `num_devices` of them; `HORECON_CUDA_TEST_PARTS` parts on the
/// first device instead), or why they cannot be had.
pub fn placement(options: &Options) -> Result<Vec<Arc<Device>>> {
    let first = usize::try_from(options.device)
        .map_err(|_| Error::invalid(format!("device must be >= 0, got {}", options.device)))?;
    if let Some(parts) = knob("HORECON_CUDA_TEST_PARTS") {
        let device = context::device(first).map_err(unavailable)?;
        return Ok(vec![device; parts]);
    }
    let count = usize::try_from(options.num_devices)
        .ok()
        .filter(|&c| c >= 1)
        .ok_or_else(|| {
            Error::invalid(format!(
                "num_devices must be >= 1, got {}",
                options.num_devices
            ))
        })?;
    let present = device_count();
    if first + count > present {
        return Err(Error::new(
            Status::BackendUnavailable,
            format!(
                "num_devices = {count} asks for CUDA devices {first} to {}, but {present} CUDA \
                 device(s) are present",
                first + count - 1
            ),
        ));
    }
    (first..first + count)
        .map(|d| context::device(d).map_err(unavailable))
        .collect()
}

/// Builds the exact CUDA operator for `options`: on one device, or split by
/// samples over the devices of [`placement`] ([`CudaMulti`]).
pub fn build(
    features: &Features,
    sizes: Sizes,
    options: &Options,
) -> Result<Box<dyn EncodingOperator>> {
    let mut devices = placement(options)?;
    devices.truncate(sizes.samples);
    if devices.len() == 1 {
        let device = devices.remove(0);
        return Ok(Box::new(CudaOperator::new(
            device,
            features,
            sizes,
            options.precision,
        )?));
    }
    let multi = CudaMulti::new(&devices, features, sizes, options.precision)?;
    if options.verbosity >= 1 {
        eprintln!(
            "horecon: the exact operator runs on {} parts split by samples, devices {:?}; \
             images move between them by {}, the data's slices by device-to-device copies",
            devices.len(),
            multi.devices(),
            multi.links()
        );
    }
    Ok(Box::new(multi))
}

/// Builds the Cartesian FFT operator ([`cartesian`]) on the devices of
/// [`placement`], split by coils over several ([`coil_split`]).
pub fn build_cartesian(
    cartesian: &crate::model::cartesian::Cartesian,
    sensitivities: Option<&[num_complex::Complex32]>,
    sizes: Sizes,
    options: &Options,
) -> Result<Box<dyn EncodingOperator>> {
    coil_split::build(
        options,
        sizes,
        sensitivities,
        "Cartesian mode",
        |device, part, sens| {
            Ok(Box::new(cartesian::CudaCartesian::new(
                device,
                part,
                options.precision,
                cartesian,
                sens,
            )?))
        },
    )
}

/// Builds the Toeplitz normal operator ([`toeplitz`]) on the devices of
/// [`placement`] (split by coils over several, [`coil_split`]): exact
/// forward/adjoint from `features`, EᴴWE by FFTs from `spec`.
pub fn build_toeplitz(
    features: &Features,
    spec: impl FnOnce() -> Result<crate::model::toeplitz::ToeplitzSpec> + Send,
    sizes: Sizes,
    options: &Options,
) -> Result<Box<dyn EncodingOperator>> {
    let precision = options.precision;
    let mut devices = placement(options)?;
    if devices.len() == 1 || sizes.coils == 1 {
        let device = devices.remove(0);
        fft::available().map_err(unavailable)?;
        // The host's time segmentation and the exact operator's planning overlap.
        let (spec, exact) = rayon::join(spec, || {
            operator::CudaOperator::new(device, features, sizes, precision)
        });
        return Ok(Box::new(toeplitz::CudaToeplitz::new(
            exact?, spec?, sizes, precision,
        )?));
    }
    let spec = spec()?;
    let sensitivities = features.sensitivities.as_deref();
    let what = "the Toeplitz normal operator";
    coil_split::build(options, sizes, sensitivities, what, |device, part, sens| {
        let coils = Features {
            sensitivities: sens
                .map(|s| crate::error::try_copy(s, "a part's sensitivities").map(Into::into))
                .transpose()?,
            voxel: features.voxel.clone(),
            sample: features.sample.clone(),
            terms: features.terms,
        };
        let exact = operator::CudaOperator::new(device, &coils, part, precision)?;
        Ok(Box::new(toeplitz::CudaToeplitz::new(
            exact,
            spec.clone(),
            part,
            precision,
        )?))
    })
}

/// Builds the fast path's operator ([`fast`]) of `separation` on the
/// devices of [`placement`] (split by coils over several, [`coil_split`]),
/// NUFFTs of relative tolerance `tolerance` (float64 arithmetic when
/// `double`); on one device with the virtual coils of `compression` when
/// given.
pub fn build_fast(
    separation: &crate::model::separation::Separation,
    (sensitivities, compression): (
        Option<&[num_complex::Complex32]>,
        Option<&crate::backend::fast::coils::CoilCompression>,
    ),
    sizes: Sizes,
    nufft: (f64, bool),
    options: &Options,
) -> Result<Box<dyn EncodingOperator>> {
    coil_split::build(
        options,
        sizes,
        sensitivities,
        "the fast path",
        |device, part, sens| {
            // Virtual coils on one device; parts of a split keep their own coils.
            let compression = compression.filter(|_| part.coils == sizes.coils);
            Ok(Box::new(fast::CudaFast::new(
                separation,
                (sens, compression),
                part,
                nufft,
                options.precision,
                device.ordinal,
            )?))
        },
    )
}
