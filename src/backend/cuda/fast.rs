//! The fast path on one GPU, device-resident (issue 17; FAST-PATH.md §3):
//! the separated operator of [`crate::model::separation`]
//!
//! $$E\rho = \sum_l \tilde a_l \odot \mathrm{NUFFT}_2^{+}(b_l \odot S_c \odot \rho),\qquad
//!   E^H d = \sum_c \bar S_c \odot \sum_l \bar b_l \odot \mathrm{NUFFT}_1^{-}(\bar{\tilde a}_l \odot d_c)$$
//!
//! with ã_l, b_l, S_c, the lattice index and the NUFFT plans (points sorted
//! once) uploaded when the operator is built. Per chunk of B coils: one
//! kernel forms the K·B grids b_l·S_c·ρ in the NUFFT's mode layout
//! (kernels/fast.cu `fast_grids`), one batched type-2
//! [`CudaNufft::execute_device`], one kernel sums Σ_l ã_l·y_{l,c} (times the
//! sample weights, `fast_collect`); Eᴴ is its exact adjoint (`fast_spread_data`,
//! type 1, `fast_gather`). EᴴWE = Eᴴ(W·E x) on the device and CG runs on the
//! device ([`super::space`]), so only CG's data go up and its image comes down.
//!
//! With coil compression ([`CoilCompression`]) the NUFFTs run on the R
//! virtual coils: E's data are expanded to the plan's L coils
//! (`fast_mix`), Eᴴ's reduced to the virtual ones first (its adjoint), and
//! EᴴWE stays on the virtual coils (V_Rᴴ V_R = I).
//!
//! Coils are chunked so that the K·B grids and non-uniform vectors take at
//! most a third of the free device memory (`HORECON_CUDA_FAST_COILS` caps B:
//! a test hook); every allocation failure is `OutOfMemory`.
//! `HORECON_CUDA_FAST_VERBOSE=1` prints the NUFFT pair's layout when the
//! operator is built (a benchmark knob).

use super::context::{device, unavailable};
use super::launch::{launch_over, Args};
use super::memory::{knob, setting, DeviceBuffer, Stream};
use super::nufft::CudaNufft;
use super::operator::{check_index_range, DeviceOperator};
use super::space::DeviceNormal;
use super::vectors::{upload_sensitivities, CudaCore};
use super::work::{take, Work};
use crate::backend::fast::coils::CoilCompression;
use crate::backend::fast::{coil_chunks, compressed_name, pair_specs, SPATIAL, TEMPORAL};
use crate::error::{try_collect, Error, Result};
use crate::model::separation::{Factor, Separation};
use crate::model::Sizes;
use crate::nufft::plan::choose_upsampling;
use crate::nufft::{Modes, NufftSpec};
use crate::op::Precision;
use cudarc::driver::CudaFunction;
use num_complex::Complex32;
use std::sync::{Arc, Mutex};

const SOURCE: &str = concat!(
    include_str!("../../../kernels/complex.cu"),
    "\n",
    include_str!("../../../kernels/fast.cu")
);

/// The kernels of kernels/fast.cu in one arithmetic.
struct Kernels {
    grids: CudaFunction,
    collect: CudaFunction,
    spread_data: CudaFunction,
    gather: CudaFunction,
    factor: CudaFunction,
    mix: CudaFunction,
}

/// The NUFFT pair of a chunk of `coils` coils (K·coils transforms).
struct Transforms {
    coils: usize,
    forward: CudaNufft,
    adjoint: CudaNufft,
}

/// The K·B grids and K·B non-uniform vectors of one call, and the virtual
/// coils' data (M×R double2) when compressed.
struct Buffers {
    grids: DeviceBuffer,
    samples: DeviceBuffer,
    virtual_data: Option<DeviceBuffer>,
}

/// The coil compression on the device: conj(V_R) (L×R double2) and R.
struct Mixing {
    matrix: DeviceBuffer,
    virtual_coils: usize,
}

/// The separated E, Eᴴ and EᴴWE on one GPU, everything on the device.
pub struct CudaFast {
    core: CudaCore,
    kernels: Kernels,
    rank: usize,
    grid_points: usize,
    /// Bytes per complex value of the NUFFT's arithmetic (8 or 16).
    complex_bytes: usize,
    /// Grid index per voxel (N int), `None` = the voxel index.
    index: Option<DeviceBuffer>,
    /// ã_l(t_j), K×M REAL2.
    temporal: DeviceBuffer,
    /// b_l(r_n), K×N REAL2.
    spatial: DeviceBuffer,
    /// The transformed coils' maps: the plan's, or the virtual ones.
    sensitivities: Option<DeviceBuffer>,
    mixing: Option<Mixing>,
    /// Coils per full chunk.
    chunk: usize,
    /// The full chunks' pair, and the last, smaller chunk's when L is not a multiple.
    chunks: Vec<Arc<Transforms>>,
    buffers: Mutex<Option<Buffers>>,
    work: Mutex<Work>,
    name: String,
}

/// The K×count values of `factor` (REAL2: float64 pairs when `double`)
/// evaluated on the device from its skeleton (kernels/fast.cu `fast_factor`,
/// the host's arithmetic: [`Factor::values`]).
fn evaluate_factor(
    device: &Arc<super::context::Device>,
    kernel: &CudaFunction,
    factor: &Factor,
    double: bool,
    what: &str,
) -> Result<DeviceBuffer> {
    let skeleton = &factor.skeleton;
    let (k, count) = (skeleton.rank, factor.count);
    let bytes = k
        .checked_mul(count)
        .and_then(|v| v.checked_mul(if double { 16 } else { 8 }))
        .ok_or_else(|| Error::out_of_memory(format!("{what}: size overflows")))?;
    let out = DeviceBuffer::new::<u8>(device, bytes, what)?;
    let points =
        DeviceBuffer::from_host(device, &factor.features, "expansion features (P x points)")?;
    let features = DeviceBuffer::from_host(device, &skeleton.features, "skeleton features")?;
    let rows = try_collect(skeleton.rows.iter().map(|c| [c.re, c.im]), "skeleton rows")?;
    let rows = DeviceBuffer::from_host(device, &rows, "skeleton rows")?;
    let offset = match &factor.offset {
        Some(o) => Some(DeviceBuffer::from_host(device, o, "phase offsets")?),
        None => None,
    };
    let stream = Stream(std::ptr::null_mut());
    launch_over(
        kernel,
        count,
        stream,
        Args::default()
            .ptr(points.ptr)
            .i32(factor.terms() as i32)
            .int(count as i64)
            .ptr(features.ptr)
            .ptr(rows.ptr)
            .i32(skeleton.points() as i32)
            .i32(k as i32)
            .ptr(offset.as_ref().map_or(0, |o| o.ptr))
            .ptr(out.ptr),
    )?;
    stream.synchronize(what)?;
    Ok(out)
}

impl CudaFast {
    /// The operator of `separation` on device `ordinal` with NUFFTs of
    /// relative tolerance `tolerance` (float64 arithmetic when `double`);
    /// CG's vector kernels in `precision`; on the virtual coils of
    /// `compression` when given, else with `sensitivities`.
    /// `BackendUnavailable` without a GPU, NVRTC or cuFFT.
    pub fn new(
        separation: &Separation,
        (sensitivities, compression): (Option<&[Complex32]>, Option<&CoilCompression>),
        sizes: Sizes,
        (tolerance, double): (f64, bool),
        precision: Precision,
        ordinal: usize,
    ) -> Result<CudaFast> {
        check_index_range(sizes)?;
        let device = device(ordinal).map_err(unavailable)?;
        super::fft::available().map_err(unavailable)?;
        let lattice = &separation.lattice;
        let ndims = separation.ndims;
        let sizes_i64: Vec<i64> = lattice.modes[..ndims].iter().map(|&m| m as i64).collect();
        let modes = Modes::new(ndims as i32, &sizes_i64)?;
        let k = separation.rank;
        // The coils the NUFFTs run on.
        let (m, coils) = (sizes.samples, compression.map_or(sizes.coils, |c| c.rank));
        let g = lattice.grid_points();
        if g > i32::MAX as usize {
            return Err(Error::invalid(format!(
                "the CUDA fast path handles at most 2^31 - 1 lattice points ({g})"
            )));
        }
        let complex_bytes = if double { 16 } else { 8 };
        let per_coil = k
            .checked_mul(g + m)
            .and_then(|v| v.checked_mul(complex_bytes))
            .ok_or_else(|| Error::out_of_memory("fast-path buffers: size overflows"))?;
        // A third of the free memory, less the virtual coils' data (M×R
        // double2, when compressed), for the chunk's grids and samples.
        let virtual_bytes = compression.map_or(0, |c| c.rank.saturating_mul(m).saturating_mul(16));
        let (free, _) = device.memory()?;
        let mut chunk = (free.saturating_sub(virtual_bytes) / 3 / per_coil.max(1)).clamp(1, coils);
        if let Some(cap) = knob("HORECON_CUDA_FAST_COILS") {
            chunk = chunk.min(cap);
        }
        // Balanced chunks: as many as needed, as equal as possible.
        chunk = coils.div_ceil(coils.div_ceil(chunk));

        let source =
            |name: &str| device.function("fast", SOURCE, &[("MODE", 2 * i64::from(double))], name);
        let kernels = Kernels {
            grids: source("fast_grids")?,
            collect: source("fast_collect")?,
            spread_data: source("fast_spread_data")?,
            gather: source("fast_gather")?,
            factor: source("fast_factor")?,
            mix: source("fast_mix")?,
        };
        let index = match &lattice.index {
            Some(idx) => {
                let raw = try_collect(idx.iter().map(|&i| i as i32), "lattice index (N)")?;
                Some(DeviceBuffer::from_host(&device, &raw, "lattice index (N)")?)
            }
            None => None,
        };
        let started = std::time::Instant::now();
        let temporal = evaluate_factor(
            &device,
            &kernels.factor,
            &separation.temporal,
            double,
            TEMPORAL,
        )?;
        let spatial = evaluate_factor(
            &device,
            &kernels.factor,
            &separation.spatial,
            double,
            SPATIAL,
        )?;
        let factored = started.elapsed().as_secs_f64();
        let sensitivities = upload_sensitivities(
            &device,
            compression.map_or(sensitivities, |c| Some(&c.maps[..])),
        )?;
        let mixing = match compression {
            Some(c) => {
                let matrix =
                    try_collect(c.mix.iter().map(|z| [z.re, z.im]), "coil mixing (L x R)")?;
                Some(Mixing {
                    matrix: DeviceBuffer::from_host(&device, &matrix, "coil mixing (L x R)")?,
                    virtual_coils: c.rank,
                })
            }
            None => None,
        };
        let virtual_coils = mixing.as_ref().map(|x| x.virtual_coils);
        let buffers = Self::make_buffers(&device, (k, g, m), chunk, complex_bytes, virtual_coils)?;
        let uploaded = started.elapsed().as_secs_f64();

        let upsampling = choose_upsampling(&modes, m, tolerance, double);
        let make = |count: usize| -> Result<Arc<Transforms>> {
            let [forward, adjoint] = pair_specs(modes, (tolerance, double), upsampling, k * count)?;
            let build = |spec: &NufftSpec| CudaNufft::new(spec, &separation.points, m, ordinal);
            Ok(Arc::new(Transforms {
                coils: count,
                forward: build(&forward)?,
                adjoint: build(&adjoint)?,
            }))
        };
        let (full, chunks) = coil_chunks(coils, chunk, make)?;
        let name = format!(
            "cuda:{ordinal} (fast path on the device, K = {k}, NUFFT tolerance {tolerance:.1e} \
             sigma {} {}, {} chunk(s) of {chunk} coil(s){})",
            full.forward.spec().kernel.upsampling.factor(),
            if double { "float64" } else { "float32" },
            chunks.len(),
            compressed_name(compression)
        );
        if setting("HORECON_CUDA_FAST_VERBOSE") == Some(1) {
            eprintln!(
                "horecon: {name}: factors {factored:.3} s, sensitivities and buffers {:.3} s, \
                 NUFFT plans {:.3} s; E by {}; EH by {}",
                uploaded - factored,
                started.elapsed().as_secs_f64() - uploaded,
                full.forward.describe(),
                full.adjoint.describe()
            );
        }
        let work = Work::new(&device, sizes)?;
        Ok(CudaFast {
            core: CudaCore::new(device, sizes, precision)?,
            kernels,
            rank: k,
            grid_points: g,
            complex_bytes,
            index,
            temporal,
            spatial,
            sensitivities,
            mixing,
            chunk,
            chunks,
            buffers: Mutex::new(Some(buffers)),
            work: Mutex::new(work),
            name,
        })
    }

    /// The buffers of one call for K terms, G lattice points and M samples
    /// (`(k, g, m)`), chunks of `chunk` coils and, when compressed, R
    /// `virtual_coils`.
    fn make_buffers(
        device: &Arc<super::context::Device>,
        (k, g, m): (usize, usize, usize),
        chunk: usize,
        complex_bytes: usize,
        virtual_coils: Option<usize>,
    ) -> Result<Buffers> {
        let bytes = |count: usize, what: &str| {
            k.checked_mul(chunk)
                .and_then(|t| t.checked_mul(count))
                .and_then(|v| v.checked_mul(complex_bytes))
                .ok_or_else(|| Error::out_of_memory(format!("{what}: size overflows")))
        };
        Ok(Buffers {
            grids: DeviceBuffer::new::<u8>(
                device,
                bytes(g, "fast-path grids")?,
                &format!("fast-path grids (K x {chunk} coils x {g} modes)"),
            )?,
            samples: DeviceBuffer::new::<u8>(
                device,
                bytes(m, "fast-path samples")?,
                &format!("fast-path samples (K x {chunk} coils x {m})"),
            )?,
            virtual_data: match virtual_coils {
                Some(r) => Some(DeviceBuffer::new::<u8>(
                    device,
                    r.checked_mul(m)
                        .and_then(|v| v.checked_mul(16))
                        .ok_or_else(|| Error::out_of_memory("virtual coil data: size overflows"))?,
                    &format!("virtual coil data ({m} x {r} double2)"),
                )?),
                None => None,
            },
        })
    }

    /// K.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The NUFFTs' layout (for benchmarks and logs).
    pub fn describe(&self) -> String {
        self.chunks
            .first()
            .map_or_else(String::new, |t| t.forward.describe())
    }

    fn ptr(buffer: &Option<DeviceBuffer>) -> u64 {
        buffer.as_ref().map_or(0, |b| b.ptr)
    }

    fn buffers(&self) -> Result<impl std::ops::Deref<Target = Buffers> + '_> {
        take(&self.buffers, || {
            Self::make_buffers(
                &self.core.device,
                (self.rank, self.grid_points, self.core.sizes.samples),
                self.chunk,
                self.complex_bytes,
                self.mixing.as_ref().map(|x| x.virtual_coils),
            )
        })
    }

    /// Cancellation point after chunk `done` of several.
    fn checkpoint(&self, done: usize, s: Stream) -> Result<()> {
        let total = self.chunks.len();
        if total > 1 {
            super::checkpoint(s, done as f64 / total as f64)?;
        }
        Ok(())
    }

    /// out (M×L double2) = W·E x for device x (N double2); `weights` M
    /// float64. With virtual coils, their data expanded to the plan's.
    fn forward_with(
        &self,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<()> {
        let buf = self.buffers()?;
        let (Some(mixing), Some(virtual_data)) = (&self.mixing, &buf.virtual_data) else {
            return self.forward_transformed(&buf, x, out, weights, s);
        };
        self.forward_transformed(&buf, x, virtual_data, weights, s)?;
        self.mix(true, mixing, (virtual_data, out), s)
    }

    /// out (N double2) = Eᴴ d for device d (M×L double2): with virtual
    /// coils, d reduced to theirs first.
    fn adjoint_with(&self, d: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        let buf = self.buffers()?;
        let (Some(mixing), Some(virtual_data)) = (&self.mixing, &buf.virtual_data) else {
            return self.adjoint_transformed(&buf, d, out, s);
        };
        self.mix(false, mixing, (d, virtual_data), s)?;
        self.adjoint_transformed(&buf, virtual_data, out, s)
    }

    /// `fast_mix` from `from` into `to`: the virtual coils' data to the
    /// plan's coils (`expand`) or back.
    fn mix(
        &self,
        expand: bool,
        mixing: &Mixing,
        (from, to): (&DeviceBuffer, &DeviceBuffer),
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            samples: m, coils, ..
        } = self.core.sizes;
        let r = mixing.virtual_coils;
        let (outputs, inputs) = if expand { (coils, r) } else { (r, coils) };
        launch_over(
            &self.kernels.mix,
            m * outputs,
            s,
            Args::default()
                .ptr(from.ptr)
                .ptr(mixing.matrix.ptr)
                .int(m as i64)
                .i32(outputs as i32)
                .i32(inputs as i32)
                .i32(i32::from(!expand))
                .ptr(to.ptr),
        )
    }

    /// out (M × the transformed coils, double2) = W·E x for device x (N
    /// double2) on the transformed coils; `weights` M float64.
    fn forward_transformed(
        &self,
        buf: &Buffers,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = self.core.sizes;
        let mut c0 = 0;
        for (i, t) in self.chunks.iter().enumerate() {
            if self.index.is_some() {
                buf.grids.zero(s)?;
            }
            launch_over(
                &self.kernels.grids,
                n * t.coils,
                s,
                Args::default()
                    .ptr(x.ptr)
                    .ptr(Self::ptr(&self.sensitivities))
                    .ptr(self.spatial.ptr)
                    .ptr(Self::ptr(&self.index))
                    .int(n as i64)
                    .int(self.grid_points as i64)
                    .i32(self.rank as i32)
                    .i32(c0 as i32)
                    .i32(t.coils as i32)
                    .ptr(buf.grids.ptr),
            )?;
            t.forward
                .execute_device(buf.samples.ptr, buf.grids.ptr, s)?;
            launch_over(
                &self.kernels.collect,
                m * t.coils,
                s,
                Args::default()
                    .ptr(buf.samples.ptr)
                    .ptr(self.temporal.ptr)
                    .ptr(weights.map_or(0, |w| w.ptr))
                    .int(m as i64)
                    .i32(self.rank as i32)
                    .i32(c0 as i32)
                    .i32(t.coils as i32)
                    .ptr(out.ptr),
            )?;
            c0 += t.coils;
            self.checkpoint(i + 1, s)?;
        }
        Ok(())
    }

    /// out (N double2) = Eᴴ d for device d (M × the transformed coils,
    /// double2).
    fn adjoint_transformed(
        &self,
        buf: &Buffers,
        d: &DeviceBuffer,
        out: &DeviceBuffer,
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = self.core.sizes;
        let mut c0 = 0;
        for (i, t) in self.chunks.iter().enumerate() {
            launch_over(
                &self.kernels.spread_data,
                m * t.coils,
                s,
                Args::default()
                    .ptr(d.ptr)
                    .ptr(self.temporal.ptr)
                    .int(m as i64)
                    .i32(self.rank as i32)
                    .i32(c0 as i32)
                    .i32(t.coils as i32)
                    .ptr(buf.samples.ptr),
            )?;
            t.adjoint
                .execute_device(buf.samples.ptr, buf.grids.ptr, s)?;
            launch_over(
                &self.kernels.gather,
                n,
                s,
                Args::default()
                    .ptr(buf.grids.ptr)
                    .ptr(Self::ptr(&self.sensitivities))
                    .ptr(self.spatial.ptr)
                    .ptr(Self::ptr(&self.index))
                    .int(n as i64)
                    .int(self.grid_points as i64)
                    .i32(self.rank as i32)
                    .i32(c0 as i32)
                    .i32(t.coils as i32)
                    .i32(i32::from(c0 > 0))
                    .ptr(out.ptr),
            )?;
            c0 += t.coils;
            self.checkpoint(i + 1, s)?;
        }
        Ok(())
    }
}

impl DeviceNormal for CudaFast {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()> {
        self.adjoint_with(d, out, stream)
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        // On the transformed coils (V_Rᴴ V_R = I; W is the same for every coil).
        let buf = self.buffers()?;
        self.forward_transformed(&buf, x, scratch, weights, stream)?;
        self.adjoint_transformed(&buf, scratch, y, stream)
    }
}

/// Host calls: one upload, the device work, one download; CG on the device
/// (the blanket [`crate::op::EncodingOperator`] of a [`DeviceOperator`]).
impl DeviceOperator for CudaFast {
    fn core(&self) -> &CudaCore {
        &self.core
    }

    fn work(&self) -> &Mutex<Work> {
        &self.work
    }

    fn forward_dev(
        &self,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        stream: Stream,
    ) -> Result<()> {
        self.forward_with(x, out, weights, stream)
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}
