//! The NUFFT of `crate::nufft` on one GPU (FAST-PATH.md §2; the method of
//! cuFINUFFT: Shih et al., IPDPSW 2021).
//!
//! Per plan, once: the points are folded onto the fine grid in float64,
//! sorted into bins (a counting sort on the device: each point's bin and
//! rank, the bins' starts by the host, then every point's sorted place),
//! and each sorted point's footprint start and offset are stored; bins are
//! cut into subproblems of at most [`layout::MAX_SUBPROBLEM`] points; the
//! deconvolution factors 1/ψ̂ are uploaded; the fine grid and the cuFFT plan
//! are allocated for as many transforms at a time as fit a third of the free
//! memory (`HORECON_CUDA_NUFFT_CHUNK` caps it).
//!
//! Per call, for each chunk of transforms (the chunk's FFTs batched):
//! type 1 = zero the fine grid, spread, FFT with the transform's sign, pick
//! the modes and divide by ψ̂; type 2 = the modes divided by ψ̂ into the
//! zeroed fine grid, FFT, interpolate. Spreading and interpolation run by
//! tiles (one block per subproblem, the bin's padded tile in shared memory)
//! or by points (one thread per sorted point on the fine grid); spreading
//! also by output-driven tiles (the block shares out each staged point's
//! footprint by cells), as [`layout::Layout::method`] chooses.
//!
//! [`CudaNufft::execute_device`] is the device-level interface (device
//! buffers in and out, any stream, no host round trip); the host
//! [`NufftExecutor`] methods move the data and call it on the plan's stream.
//! Every allocation failure is `OutOfMemory`.

pub mod kernels;
pub mod layout;
pub mod split;

use super::context::{driver_error, Device};
use super::fft::{Direction, FftPlan};
use super::memory::{knob, DeviceBuffer, Stream};
use crate::error::{try_vec, Error, Result, Status};
use crate::nufft::deconvolution::kernel_transform;
use crate::nufft::{NufftExecutor, NufftSpec, NufftType};
use cudarc::driver::{result, CudaStream};
use kernels::{blocks, launch, Arg, Geometry, Kernels, THREADS};
use layout::{Layout, Method, MAX_SUBPROBLEM, SM_THREADS};
use num_complex::{Complex32, Complex64};
use std::sync::{Arc, Mutex};

/// Builds the CUDA executor of `spec` for `npoints` points (`points`:
/// npoints × ndims, first index fastest, radians, any finite value) on
/// device `device`.
pub fn build(
    spec: &NufftSpec,
    points: &[f64],
    npoints: usize,
    device: usize,
) -> Result<Box<dyn NufftExecutor>> {
    let spec = host_arithmetic(spec, npoints);
    Ok(Box::new(CudaNufft::new(&spec, points, npoints, device)?))
}

/// Points per mode above which a float32 type-1 plan asked for less than
/// [`crate::nufft::cpu::FLOAT32_ARITHMETIC_TOLERANCE`] runs in float64.
const DENSE_POINTS_PER_MODE: f64 = 4.0;

/// The arithmetic a host-interface plan of `spec` runs in: float32 type-1
/// plans asked for less than 1e-5 with more than [`DENSE_POINTS_PER_MODE`]
/// points per mode compute in float64 (the caller's float32 data converted
/// on the way). Each mode sums about M/N points' contributions in the
/// float32 fine grid, whose rounding grows as u·sqrt(M/N) relative where the
/// sum cancels: 2.5e-6 against 1e-6 measured on one mode of 327 clustered
/// points (H100, 2026-11-25). The CPU executor computes every such plan in
/// float64; the sparse ones stay in float32 here (256³ modes, 10⁷ points at
/// 1e-6: 2.3–2.9e-7).
pub fn host_arithmetic(spec: &NufftSpec, npoints: usize) -> NufftSpec {
    let dense = npoints as f64 > DENSE_POINTS_PER_MODE * spec.modes.total() as f64;
    let double = spec.double
        || (spec.kind == NufftType::One
            && spec.tolerance < crate::nufft::cpu::FLOAT32_ARITHMETIC_TOLERANCE
            && dense);
    NufftSpec {
        double,
        ..spec.clone()
    }
}

/// The points in bin order and the subproblems.
struct Sorted {
    /// perm[p]: the caller's index of sorted point p (M).
    perm: DeviceBuffer,
    /// Footprint start (int) and offset (real) per spread axis, dim × M.
    start: DeviceBuffer,
    offset: DeviceBuffer,
    /// Subproblems: bin, first sorted point, count.
    sub_bin: DeviceBuffer,
    sub_first: DeviceBuffer,
    sub_count: DeviceBuffer,
    subproblems: usize,
    /// Bins holding at least one point.
    busy_bins: usize,
}

/// The per-call state: fine grids for a chunk of transforms and the cuFFT
/// plans (one per batch size used).
struct Workspace {
    fine: DeviceBuffer,
    plans: Vec<FftPlan>,
}

/// Device copies of the host calls' vectors (transforms × M, transforms × N).
struct HostIo {
    nonuniform: DeviceBuffer,
    grid: DeviceBuffer,
}

/// A NUFFT plan with its points on one GPU.
pub struct CudaNufft {
    device: Arc<Device>,
    spec: NufftSpec,
    layout: Layout,
    kernels: Kernels,
    /// The output-driven spreading kernel, for [`Method::Output`] only.
    spread_output: Option<cudarc::driver::CudaFunction>,
    points: usize,
    method: Method,
    geometry: Geometry,
    sorted: Sorted,
    deconvolution: DeviceBuffer,
    stream: Arc<CudaStream>,
    /// Transforms per chunk.
    chunk: usize,
    /// Threads per block of the tile kernels (`HORECON_CUDA_NUFFT_THREADS`, 32..=256).
    tile_threads: u32,
    work: Mutex<Workspace>,
    io: Mutex<Option<HostIo>>,
}

/// A complex type the host interface accepts.
trait HostComplex: Copy + Default {
    fn to_c64(self) -> Complex64;
    fn from_c64(c: Complex64) -> Self;
}

impl HostComplex for Complex32 {
    fn to_c64(self) -> Complex64 {
        Complex64::new(self.re as f64, self.im as f64)
    }
    fn from_c64(c: Complex64) -> Self {
        Complex32::new(c.re as f32, c.im as f32)
    }
}

impl HostComplex for Complex64 {
    fn to_c64(self) -> Complex64 {
        self
    }
    fn from_c64(c: Complex64) -> Self {
        c
    }
}

fn sync(stream: Stream, what: &str) -> Result<()> {
    // SAFETY: a live stream of the bound context.
    unsafe { result::stream::synchronize(stream.0) }.map_err(|e| driver_error(what, e))
}

/// Uploads `values` as the arithmetic's real type (f32 or f64).
fn upload_reals(
    device: &Arc<Device>,
    values: &[f64],
    double: bool,
    what: &str,
) -> Result<DeviceBuffer> {
    if double {
        DeviceBuffer::from_host(device, values, what)
    } else {
        let narrow: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        DeviceBuffer::from_host(device, &narrow, what)
    }
}

impl CudaNufft {
    /// The executor of `spec` for `npoints` points on device `ordinal`
    /// ([`build`]).
    pub fn new(
        spec: &NufftSpec,
        points: &[f64],
        npoints: usize,
        ordinal: usize,
    ) -> Result<CudaNufft> {
        let device = super::context::device(ordinal).map_err(super::context::unavailable)?;
        super::fft::available().map_err(super::context::unavailable)?;
        let ndims = spec.modes.ndims;
        if npoints > i32::MAX as usize {
            return Err(Error::invalid(format!(
                "npoints = {npoints}: the CUDA NUFFT takes at most 2^31 - 1 points"
            )));
        }
        let needed = ndims
            .checked_mul(npoints)
            .ok_or_else(|| Error::invalid(format!("npoints = {npoints} is too large")))?;
        if points.len() < needed {
            return Err(Error::size(format!(
                "points has {} values, expected npoints x ndims = {npoints} x {ndims} = {needed}",
                points.len()
            )));
        }
        if let Some(i) = points[..needed].iter().position(|v| !v.is_finite()) {
            return Err(Error::new(
                Status::NotFinite,
                format!(
                    "points[{i}] (point {}, axis {}) is {}",
                    i % npoints.max(1),
                    i / npoints.max(1),
                    points[i]
                ),
            ));
        }
        let mut layout = Layout::new(spec)?;
        layout.tiles_fit &= layout.shared_bytes() <= kernels::shared_limit(&device)?;
        let double = spec.double;
        let kernels = Kernels::new(&device, &layout, double)?;
        device.bind()?;
        let stream = device
            .ctx
            .new_stream()
            .map_err(|e| driver_error("creating a stream", e))?;
        let s = Stream(stream.cu_stream());

        // 1/ψ̂ per spread axis, then a 1 for each axis beyond.
        let mut factors = Vec::new();
        let mut modes_offset = [0i32; 3];
        for (a, offset) in modes_offset.iter_mut().enumerate() {
            *offset = factors.len() as i32;
            if a < layout.dim {
                let psi = kernel_transform(&spec.kernel, layout.modes[a], layout.fine[a]);
                if let Some(bad) = psi
                    .iter()
                    .find(|v| v.is_nan() || **v <= 0.0 || v.is_infinite())
                {
                    return Err(Error::internal(format!(
                        "the kernel's Fourier transform is {bad} at a mode"
                    )));
                }
                factors.extend(psi.iter().map(|&v| 1.0 / v));
            } else {
                factors.push(1.0);
            }
        }
        let deconvolution = upload_reals(&device, &factors, double, "NUFFT deconvolution factors")?;

        let mut geometry = Geometry {
            points: npoints as i64,
            modes_total: layout.modes_total() as i64,
            fine_total: layout.fine_total() as i64,
            beta: spec.kernel.beta,
            transforms: 1,
            modes_offset,
            ..Geometry::default()
        };
        for a in 0..3 {
            geometry.fine[a] = layout.fine[a] as i32;
            geometry.modes[a] = layout.modes[a] as i32;
            geometry.nbins[a] = layout.nbins[a] as i32;
            geometry.bins[a] = layout.bins[a] as i32;
        }
        let sorted = sort(&device, &layout, &kernels, geometry, points, npoints, s)?;
        geometry.subproblems = sorted.subproblems as i32;
        let method = layout.method(npoints, sorted.busy_bins, spec.kind == NufftType::One);
        let spread_output = if method == Method::Output {
            Some(kernels::spread_output(&device, &layout, double)?)
        } else {
            None
        };

        let per_transform = layout.fine_total() * layout.complex_bytes;
        let (free, _) = device.memory()?;
        let mut chunk = ((free / 3) / (2 * per_transform).max(1))
            .clamp(1, spec.transforms.min(65535))
            .min(super::fft::max_batch(layout.fine_total()));
        if let Some(cap) = knob("HORECON_CUDA_NUFFT_CHUNK") {
            chunk = chunk.min(cap);
        }
        let fine = DeviceBuffer::new::<u8>(
            &device,
            chunk
                .checked_mul(per_transform)
                .ok_or_else(|| Error::out_of_memory("NUFFT fine grids: size overflows"))?,
            &format!(
                "NUFFT fine grids ({chunk} x {}x{}x{} complex)",
                layout.fine[0], layout.fine[1], layout.fine[2]
            ),
        )?;
        let plan = FftPlan::new(&device, layout.fine, chunk, double)?;
        Ok(CudaNufft {
            device,
            spec: spec.clone(),
            layout,
            kernels,
            spread_output,
            points: npoints,
            method,
            geometry,
            sorted,
            deconvolution,
            stream,
            chunk,
            tile_threads: knob("HORECON_CUDA_NUFFT_THREADS")
                .map_or(SM_THREADS, |t| (t / 32 * 32).clamp(32, SM_THREADS))
                as u32,
            work: Mutex::new(Workspace {
                fine,
                plans: vec![plan],
            }),
            io: Mutex::new(None),
        })
    }

    pub fn spec(&self) -> &NufftSpec {
        &self.spec
    }

    /// The device it runs on.
    pub fn device_ordinal(&self) -> usize {
        self.device.ordinal
    }

    /// The plan's own stream (the host interface runs on it).
    pub fn stream(&self) -> Stream {
        Stream(self.stream.cu_stream())
    }

    /// How it spreads/interpolates, its bins and chunk (for benchmarks and logs).
    pub fn describe(&self) -> String {
        format!(
            "{:?}, dim {}, w {}, fine {:?}, bins {:?} ({} busy, {} subproblems), {} transforms per chunk, {}",
            self.method,
            self.layout.dim,
            self.layout.width,
            &self.layout.fine[..self.layout.dim],
            &self.layout.bins[..self.layout.dim],
            self.sorted.busy_bins,
            self.sorted.subproblems,
            self.chunk,
            if self.spec.double { "float64" } else { "float32" }
        )
    }

    /// The transform on device buffers: `nonuniform` holds transforms × M
    /// and `grid` transforms × Π n_a complex values in the arithmetic's
    /// precision (float2, or double2 for a float64 spec); type 1 reads
    /// `nonuniform` and writes `grid`, type 2 the reverse. Runs on `stream`
    /// and returns without waiting (the plan's workspace is held meanwhile;
    /// calls on different streams are ordered by the caller).
    pub fn execute_device(
        &self,
        nonuniform: cudarc::driver::sys::CUdeviceptr,
        grid: cudarc::driver::sys::CUdeviceptr,
        stream: Stream,
    ) -> Result<()> {
        let mut work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        self.device.bind()?;
        let cb = self.layout.complex_bytes;
        let (m, n, f) = (
            self.points,
            self.layout.modes_total(),
            self.layout.fine_total(),
        );
        let direction = if self.spec.sign < 0 {
            Direction::Forward
        } else {
            Direction::Inverse
        };
        let total = self.spec.transforms;
        for t0 in (0..total).step_by(self.chunk) {
            let b = self.chunk.min(total - t0);
            if !work.plans.iter().any(|p| p.batch() == b) {
                let plan = FftPlan::new(&self.device, self.layout.fine, b, self.spec.double)?;
                work.plans.push(plan);
            }
            let plan = work
                .plans
                .iter()
                .find(|p| p.batch() == b)
                .ok_or_else(|| Error::internal("NUFFT FFT plan missing"))?;
            let mut g = self.geometry;
            g.transforms = b as i32;
            let c = nonuniform + (t0 * m * cb) as u64;
            let modes = grid + (t0 * n * cb) as u64;
            let fine = work.fine.ptr;
            // SAFETY: b·F complex values lie within the workspace (b ≤ chunk).
            unsafe { result::memset_d8_async(fine, 0, b * f * cb, stream.0) }
                .map_err(|e| driver_error("clearing the NUFFT fine grid", e))?;
            let deconv = Arg::Ptr(self.deconvolution.ptr);
            let mode_blocks = (blocks(b * n), 1);
            match self.spec.kind {
                NufftType::One => {
                    self.spread_or_interp(true, g, b, c, fine, stream)?;
                    plan.exec(fine, direction, stream)?;
                    launch(
                        &self.kernels.modes_from_fine,
                        mode_blocks,
                        THREADS,
                        0,
                        stream,
                        &[Arg::Geometry(g), deconv, Arg::Ptr(fine), Arg::Ptr(modes)],
                    )?;
                }
                NufftType::Two => {
                    launch(
                        &self.kernels.fine_from_modes,
                        mode_blocks,
                        THREADS,
                        0,
                        stream,
                        &[Arg::Geometry(g), deconv, Arg::Ptr(modes), Arg::Ptr(fine)],
                    )?;
                    plan.exec(fine, direction, stream)?;
                    self.spread_or_interp(false, g, b, c, fine, stream)?;
                }
            }
        }
        Ok(())
    }

    /// Spreads `c` onto `fine` (`spread`) or interpolates `fine` into `c`,
    /// `b` transforms.
    fn spread_or_interp(
        &self,
        spread: bool,
        g: Geometry,
        b: usize,
        c: u64,
        fine: u64,
        stream: Stream,
    ) -> Result<()> {
        let s = &self.sorted;
        let (source, target) = if spread { (c, fine) } else { (fine, c) };
        let subproblem_kernel = match self.method {
            Method::Points => None,
            Method::Tiles if spread => Some(&self.kernels.spread_tiles),
            Method::Tiles => Some(&self.kernels.interp_tiles),
            Method::Output => Some(
                self.spread_output
                    .as_ref()
                    .filter(|_| spread)
                    .ok_or_else(|| Error::internal("NUFFT output-driven kernel missing"))?,
            ),
        };
        match subproblem_kernel {
            // One block per subproblem (tiles in shared memory), either method.
            Some(kernel) => launch(
                kernel,
                (s.subproblems as u32, b as u32),
                self.tile_threads,
                self.layout.shared_bytes(),
                stream,
                &[
                    Arg::Geometry(g),
                    Arg::Ptr(s.sub_bin.ptr),
                    Arg::Ptr(s.sub_first.ptr),
                    Arg::Ptr(s.sub_count.ptr),
                    Arg::Ptr(s.perm.ptr),
                    Arg::Ptr(s.start.ptr),
                    Arg::Ptr(s.offset.ptr),
                    Arg::Ptr(source),
                    Arg::Ptr(target),
                ],
            ),
            None => launch(
                if spread {
                    &self.kernels.spread_points
                } else {
                    &self.kernels.interp_points
                },
                (
                    if self.points == 0 {
                        0
                    } else {
                        blocks(self.points)
                    },
                    b as u32,
                ),
                THREADS,
                0,
                stream,
                &[
                    Arg::Geometry(g),
                    Arg::Ptr(s.perm.ptr),
                    Arg::Ptr(s.start.ptr),
                    Arg::Ptr(s.offset.ptr),
                    Arg::Ptr(source),
                    Arg::Ptr(target),
                ],
            ),
        }
    }

    /// Median seconds of `reps` device-level executions on data already on
    /// the device (the host buffers' device copies, filled with a pattern):
    /// execute only, as the benchmarks compare.
    pub fn time_execute(&self, reps: usize) -> Result<f64> {
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        let io = self.host_io(&mut io)?;
        let s = self.stream();
        let cb = self.layout.complex_bytes;
        let fill = |buf: &DeviceBuffer, len: usize| -> Result<()> {
            let values: Vec<f64> = (0..2 * len)
                .map(|i| ((i * 7919) % 1000) as f64 * 1e-3 - 0.5)
                .collect();
            if cb == 16 {
                buf.upload(&values, s)
            } else {
                let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
                buf.upload(&v, s)
            }
        };
        let t = self.spec.transforms;
        fill(&io.nonuniform, t * self.points)?;
        fill(&io.grid, t * self.layout.modes_total())?;
        sync(s, "preparing the NUFFT timing")?;
        self.execute_device(io.nonuniform.ptr, io.grid.ptr, s)?;
        sync(s, "warming up the NUFFT")?;
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            let start = std::time::Instant::now();
            self.execute_device(io.nonuniform.ptr, io.grid.ptr, s)?;
            sync(s, "timing the NUFFT")?;
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(|a, b| a.total_cmp(b));
        Ok(times[times.len() / 2])
    }

    fn host_io<'a>(&self, slot: &'a mut Option<HostIo>) -> Result<&'a HostIo> {
        if slot.is_none() {
            let t = self.spec.transforms;
            let cb = self.layout.complex_bytes;
            let bytes = |count: usize, what: &str| {
                t.checked_mul(count)
                    .and_then(|v| v.checked_mul(cb))
                    .ok_or_else(|| Error::out_of_memory(format!("{what}: size overflows")))
            };
            *slot = Some(HostIo {
                nonuniform: DeviceBuffer::new::<u8>(
                    &self.device,
                    bytes(self.points, "NUFFT non-uniform values")?,
                    "NUFFT non-uniform values (transforms x M)",
                )?,
                grid: DeviceBuffer::new::<u8>(
                    &self.device,
                    bytes(self.layout.modes_total(), "NUFFT modes")?,
                    "NUFFT modes (transforms x N)",
                )?,
            });
        }
        slot.as_ref()
            .ok_or_else(|| Error::internal("NUFFT host buffers missing"))
    }

    fn execute_host<T: HostComplex>(&self, nonuniform: &mut [T], grid: &mut [T]) -> Result<()> {
        let t = self.spec.transforms;
        let (m, n) = (self.points, self.layout.modes_total());
        if nonuniform.len() != t * m || grid.len() != t * n {
            return Err(Error::size(format!(
                "NUFFT execute: nonuniform has {} values (expected transforms x M = {}), grid {} (expected transforms x N = {})",
                nonuniform.len(),
                t * m,
                grid.len(),
                t * n
            )));
        }
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        let io = self.host_io(&mut io)?;
        let s = self.stream();
        let (input, device_in, device_out, out_len) = match self.spec.kind {
            NufftType::One => (&*nonuniform, &io.nonuniform, &io.grid, t * n),
            NufftType::Two => (&*grid, &io.grid, &io.nonuniform, t * m),
        };
        if self.spec.double {
            let mut staged = try_vec(input.len(), Complex64::default(), "NUFFT input (host copy)")?;
            staged
                .iter_mut()
                .zip(input)
                .for_each(|(d, v)| *d = v.to_c64());
            device_in.upload(&staged, s)?;
            self.execute_device(io.nonuniform.ptr, io.grid.ptr, s)?;
            let mut result = try_vec(out_len, Complex64::default(), "NUFFT output (host copy)")?;
            device_out.download(&mut result, s)?;
            let out = match self.spec.kind {
                NufftType::One => grid,
                NufftType::Two => nonuniform,
            };
            out.iter_mut()
                .zip(&result)
                .for_each(|(d, v)| *d = T::from_c64(*v));
        } else {
            let mut staged = try_vec(input.len(), Complex32::default(), "NUFFT input (host copy)")?;
            staged
                .iter_mut()
                .zip(input)
                .for_each(|(d, v)| *d = Complex32::from_c64(v.to_c64()));
            device_in.upload(&staged, s)?;
            self.execute_device(io.nonuniform.ptr, io.grid.ptr, s)?;
            let mut result = try_vec(out_len, Complex32::default(), "NUFFT output (host copy)")?;
            device_out.download(&mut result, s)?;
            let out = match self.spec.kind {
                NufftType::One => grid,
                NufftType::Two => nonuniform,
            };
            out.iter_mut()
                .zip(&result)
                .for_each(|(d, v)| *d = T::from_c64(v.to_c64()));
        }
        Ok(())
    }
}

impl NufftExecutor for CudaNufft {
    fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()> {
        self.execute_host(nonuniform, grid)
    }

    fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()> {
        self.execute_host(nonuniform, grid)
    }

    fn backend_name(&self) -> String {
        format!("cuda:{}", self.device.ordinal)
    }
}

/// Sorts the points into bins on the device (module documentation).
#[allow(clippy::too_many_arguments)]
fn sort(
    device: &Arc<Device>,
    layout: &Layout,
    kernels: &Kernels,
    geometry: Geometry,
    points: &[f64],
    npoints: usize,
    s: Stream,
) -> Result<Sorted> {
    let m = npoints;
    let dim = layout.dim;
    // The spread axes' coordinates (zeros when no axis is spread).
    let mut x = try_vec(dim * m, 0.0f64, "NUFFT points (host copy)")?;
    for (i, &a) in layout.axes.iter().enumerate() {
        x[i * m..(i + 1) * m].copy_from_slice(&points[a * m..(a + 1) * m]);
    }
    let x = DeviceBuffer::from_host(device, &x, "NUFFT points (M x d)")?;
    let counts = DeviceBuffer::new::<i32>(device, layout.bins_total(), "NUFFT bin counts")?;
    counts.zero(s)?;
    let bin_of = DeviceBuffer::new::<i32>(device, m, "NUFFT point bins (M)")?;
    let rank_of = DeviceBuffer::new::<i32>(device, m, "NUFFT point ranks (M)")?;
    let point_blocks = (if m == 0 { 0 } else { blocks(m) }, 1);
    launch(
        &kernels.bin_count,
        point_blocks,
        THREADS,
        0,
        s,
        &[
            Arg::Geometry(geometry),
            Arg::Ptr(x.ptr),
            Arg::Ptr(counts.ptr),
            Arg::Ptr(bin_of.ptr),
            Arg::Ptr(rank_of.ptr),
        ],
    )?;
    let mut host_counts = try_vec(layout.bins_total(), 0i32, "NUFFT bin counts (host copy)")?;
    counts.download(&mut host_counts, s)?;
    let (starts, list) = layout::subproblems(&host_counts, MAX_SUBPROBLEM);
    let bin_start = DeviceBuffer::from_host(device, &starts, "NUFFT bin starts")?;
    let offset_bytes = layout.offset_bytes();
    let perm = DeviceBuffer::new::<i32>(device, m, "NUFFT sorted order (M)")?;
    let start = DeviceBuffer::new::<i32>(device, dim * m, "NUFFT footprint starts (M x d)")?;
    let offset = DeviceBuffer::new::<u8>(
        device,
        dim * m * offset_bytes,
        "NUFFT footprint offsets (M x d)",
    )?;
    launch(
        &kernels.bin_scatter,
        point_blocks,
        THREADS,
        0,
        s,
        &[
            Arg::Geometry(geometry),
            Arg::Ptr(x.ptr),
            Arg::Ptr(bin_start.ptr),
            Arg::Ptr(bin_of.ptr),
            Arg::Ptr(rank_of.ptr),
            Arg::Ptr(perm.ptr),
            Arg::Ptr(start.ptr),
            Arg::Ptr(offset.ptr),
        ],
    )?;
    let column = |i: usize| -> Vec<i32> { list.iter().map(|e| e[i]).collect() };
    let sorted = Sorted {
        perm,
        start,
        offset,
        sub_bin: DeviceBuffer::from_host(device, &column(0), "NUFFT subproblems")?,
        sub_first: DeviceBuffer::from_host(device, &column(1), "NUFFT subproblems")?,
        sub_count: DeviceBuffer::from_host(device, &column(2), "NUFFT subproblems")?,
        subproblems: list.len(),
        busy_bins: host_counts.iter().filter(|&&c| c > 0).count(),
    };
    // The temporaries are freed on return: wait for the scatter first.
    sync(s, "sorting the NUFFT points")?;
    Ok(sorted)
}
