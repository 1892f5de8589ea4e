//! What every operator on one GPU shares ([`CudaCore`]): the device, the
//! sizes and the O(N) kernels of kernels/util.cu: the transfers of host
//! complex64 vectors to and from the device's double2 vectors (widen,
//! narrow), the sample weights, CG's vector operations, and the two
//! directions' prologue and epilogue of the phase sums.

use super::context::Device;
use super::launch::{launch_over, mode_code, Args};
use super::memory::{DeviceBuffer, Stream};
use super::work::Work;
use crate::error::Result;
use crate::model::Sizes;
use crate::op::Precision;
use cudarc::driver::CudaFunction;
use num_complex::Complex32;
use std::sync::Arc;

/// complex.cu (shared helpers), util.cu and the FFT operators' kernels
/// (fft_ops.cu) form one NVRTC module per precision mode: compiled once, when
/// the first CUDA operator is built.
pub(super) const UTIL: &str = concat!(
    include_str!("../../../kernels/complex.cu"),
    "\n",
    include_str!("../../../kernels/util.cu"),
    "\n",
    include_str!("../../../kernels/fft_ops.cu")
);

pub(super) struct Kernels {
    pub(super) prep_forward: CudaFunction,
    pub(super) prep_adjoint: CudaFunction,
    pub(super) finish_forward: CudaFunction,
    pub(super) finish_adjoint: CudaFunction,
    scale_samples: CudaFunction,
    pub(super) dot_re: CudaFunction,
    pub(super) axpy: CudaFunction,
    pub(super) xpay: CudaFunction,
    widen: CudaFunction,
    narrow: CudaFunction,
}

/// What every operator on one GPU shares: the device, the sizes and the
/// O(N) kernels (CG's vector operations, transfers, sample weights).
pub struct CudaCore {
    pub(super) device: Arc<Device>,
    pub(super) sizes: Sizes,
    pub(super) k: Kernels,
}

impl CudaCore {
    /// The O(N) kernels of `precision` on `device`.
    pub(super) fn new(device: Arc<Device>, sizes: Sizes, precision: Precision) -> Result<CudaCore> {
        let util =
            |name: &str| device.function("util", UTIL, &[("MODE", mode_code(precision))], name);
        let k = Kernels {
            prep_forward: util("prep_forward")?,
            prep_adjoint: util("prep_adjoint")?,
            finish_forward: util("finish_forward")?,
            finish_adjoint: util("finish_adjoint")?,
            scale_samples: util("scale_samples")?,
            dot_re: util("dot_re")?,
            axpy: util("axpy")?,
            xpay: util("xpay")?,
            widen: util("widen")?,
            narrow: util("narrow")?,
        };
        Ok(CudaCore { device, sizes, k })
    }

    /// d_{j,c} ← w_j·d_{j,c} for device data d (M×L double2) and weights w (M float64).
    pub(super) fn scale_samples(
        &self,
        d: &DeviceBuffer,
        w: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        let Sizes {
            samples: m, coils, ..
        } = self.sizes;
        launch_over(
            &self.k.scale_samples,
            m * coils,
            stream,
            Args::default()
                .ptr(d.ptr)
                .ptr(w.ptr)
                .int(m as i64)
                .i32(coils as i32),
        )
    }

    /// Host complex64 vector → device double2 `dst` (through the workspace's
    /// page-locked host buffer and the float2 staging).
    pub(super) fn upload(
        &self,
        w: &Work,
        host: &[Complex32],
        dst: &DeviceBuffer,
        s: Stream,
    ) -> Result<()> {
        match w.pinned() {
            Some(pinned) => pinned.upload(host, &w.staging, s)?,
            None => w.staging.upload(host, s)?,
        }
        launch_over(
            &self.k.widen,
            host.len(),
            s,
            Args::default()
                .ptr(w.staging.ptr)
                .ptr(dst.ptr)
                .int(host.len() as i64),
        )
    }

    /// Device double2 `src` → host complex64 vector (synchronous; through the
    /// float2 staging and the page-locked host buffer).
    pub(super) fn download(
        &self,
        w: &Work,
        src: &DeviceBuffer,
        host: &mut [Complex32],
        s: Stream,
    ) -> Result<()> {
        launch_over(
            &self.k.narrow,
            host.len(),
            s,
            Args::default()
                .ptr(src.ptr)
                .ptr(w.staging.ptr)
                .int(host.len() as i64),
        )?;
        match w.pinned() {
            Some(pinned) => pinned.download(&w.staging, host, s),
            None => w.staging.download(host, s),
        }
    }
}

impl CudaCore {
    /// One host call on the workspace `w`: `input` uploaded into `into`,
    /// `apply` queued on the stream, `from` downloaded into `output`. What
    /// `apply` returns (host data of its own uploads) lives until the
    /// download has synchronised the stream.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call<R>(
        &self,
        w: &Work,
        input: &[Complex32],
        into: &DeviceBuffer,
        apply: impl FnOnce(Stream) -> Result<R>,
        from: &DeviceBuffer,
        output: &mut [Complex32],
    ) -> Result<()> {
        let s = Stream(w.stream.cu_stream());
        self.upload(w, input, into, s)?;
        let keep = apply(s)?;
        self.download(w, from, output, s)?;
        drop(keep);
        Ok(())
    }
}

impl CudaCore {
    /// One host call of EᴴWE on the workspace `w`: `image` uploaded into
    /// `w.image`, the sample weights staged (`None` = 1), `apply(weights,
    /// stream)` queued to write `w.image_out`, which is downloaded into `out`.
    pub(super) fn call_normal(
        &self,
        w: &Work,
        image: &[Complex32],
        weights: Option<&[f32]>,
        out: &mut [Complex32],
        apply: impl FnOnce(Option<&DeviceBuffer>, Stream) -> Result<()>,
    ) -> Result<()> {
        let run = |s| {
            let staged = w.stage_weights(weights, s)?;
            apply(staged.device(), s)?;
            Ok(staged)
        };
        self.call(w, image, &w.image, run, &w.image_out, out)
    }
}

/// The coil sensitivities (N×L complex64) on `device`, or `None` (S ≡ 1).
pub(super) fn upload_sensitivities(
    device: &Arc<Device>,
    sensitivities: Option<&[Complex32]>,
) -> Result<Option<DeviceBuffer>> {
    // Complex32 is #[repr(C)] { re, im }: the device's float2 as it is.
    sensitivities
        .map(|s| DeviceBuffer::from_host(device, s, "coil sensitivities (N x L)"))
        .transpose()
}
