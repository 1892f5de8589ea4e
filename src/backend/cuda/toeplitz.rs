//! The Toeplitz normal operator on the GPU (`model::toeplitz` has the math):
//!
//!   EᴴWE x = Σ_c conj(S_c)·crop(F⁻¹(K·F(pad(S_c·x)))),   K = F(T)/(2^d·N),
//!
//! and with off-resonance, L time segments with P_l(n) = exp(iδ_n τ_l),
//!
//!   EᴴWE x ≈ Σ_c Σ_l conj(P_l)·conj(S_c)·crop(F⁻¹(Σ_l' K_{l,l'}·F(pad(S_c·P_l'·x)))),
//!
//! K_{l',l} = conj(K_{l,l'}) (only l ≤ l' stored). F, F⁻¹ are cuFFT's
//! unnormalised transforms of the 2n grid, batched over coils (batches sized
//! from the free memory). The kernels T_{l,l'} are exact direct sums: the
//! adjoint of a temporary one-coil CUDA phase-sum operator whose "voxels"
//! are the lattice offsets (`ToeplitzSpec::offset_features`), applied to
//! w_j·conj(a_l(t_j))·a_l'(t_j) (`ToeplitzSpec::kernel_weights`), in the
//! plan's precision (a single kernel has real weights and is Hermitian,
//! T(−Δ) = conj(T(Δ)): half of it is summed and the rest mirrored); they are recomputed when CG's sample weights differ from
//! the last ones. Forward, adjoint and CG's right-hand side are the exact
//! operator's. Grids are float32 complex in accurate and fast modes and
//! float64 in double mode; images stay float64 on the device.

use super::context::{driver_error, Device};
use super::fft::{coil_batch, complex_bytes, to_pairs, Direction, FftOps, FftPlan};
use super::launch::{launch_over, Args};
use super::memory::{DeviceBuffer, Stream};
use super::operator::CudaOperator;
use super::space::{solve_on, DeviceNormal};
use super::work::take;
use crate::error::{checked_bytes, try_copy, Result};
use crate::model::toeplitz::ToeplitzSpec;
use crate::model::{Features, Sizes};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::solver::CgProblem;
use cudarc::driver::result;
use num_complex::{Complex32, Complex64};
use std::sync::{Arc, Mutex};

/// The kernel spectra for one set of sample weights.
struct Kernels {
    /// The weights they were computed for (`None` = 1).
    weights: Option<Vec<f32>>,
    /// K_p for the pairs of `ToeplitzSpec::kernel_pairs`, pairs × 2^d·N REAL2.
    spectra: DeviceBuffer,
}

/// Plan and grids of one call (or one solve).
struct Engine {
    /// `batch` transforms of the kernel grid.
    plan: FftPlan,
    /// F(pad(S_c·P_l'·x)): segments × batch grids.
    spectra: DeviceBuffer,
    /// Σ_l' K_{l,l'}·spectra_l' (segments > 1 only): batch grids.
    sum: Option<DeviceBuffer>,
}

/// EᴴWE by FFT convolutions on one GPU; E and Eᴴ exact.
pub struct CudaToeplitz {
    exact: CudaOperator,
    spec: ToeplitzSpec,
    precision: Precision,
    ops: FftOps,
    /// Coils per FFT batch.
    batch: usize,
    /// P_l(n) = exp(iδ_n τ_l), L×N double2; `None` without segmentation.
    phases: Option<DeviceBuffer>,
    /// The operator of the lattice offsets (kernels), built at first use.
    offsets: Mutex<Option<CudaOperator>>,
    kernels: Mutex<Option<Arc<Kernels>>>,
    engine: Mutex<Option<Engine>>,
}

/// The operator with the kernels of one solve, as CG applies it.
struct WithKernels<'a> {
    op: &'a CudaToeplitz,
    kernels: &'a Kernels,
}

impl DeviceNormal for WithKernels<'_> {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()> {
        self.op.exact.adjoint_dev(d, out, stream)
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        _weights: Option<&DeviceBuffer>,
        _scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        self.op.normal_with(self.kernels, x, y, stream)
    }
}

impl CudaToeplitz {
    pub fn new(
        device: Arc<Device>,
        features: &Features,
        spec: ToeplitzSpec,
        sizes: Sizes,
        precision: Precision,
    ) -> Result<CudaToeplitz> {
        let exact = CudaOperator::new(device.clone(), features, sizes, precision)?;
        let n = sizes.voxels;
        let phases = match &spec.segmentation {
            None => None,
            Some(s) => {
                let values = s.tau.iter().flat_map(|&tau| {
                    s.delta
                        .iter()
                        .map(move |&d| Complex64::from_polar(1.0, d * tau))
                });
                let host = to_pairs(s.segments * n, values)?;
                debug_assert_eq!(host.len(), s.segments * n);
                Some(DeviceBuffer::from_host(
                    &device,
                    &host,
                    "Toeplitz segment phases (N x L)",
                )?)
            }
        };
        let segments = spec.segments();
        let grids_per_coil = segments + usize::from(segments > 1);
        let per_coil = grids_per_coil * spec.kernel_points() * complex_bytes(precision);
        let batch = coil_batch(&device, sizes.coils, per_coil)?;
        Ok(CudaToeplitz {
            ops: FftOps::new(&device, precision)?,
            exact,
            spec,
            precision,
            batch,
            phases,
            offsets: Mutex::new(None),
            kernels: Mutex::new(None),
            engine: Mutex::new(None),
        })
    }

    /// Coils per FFT batch.
    pub fn coil_batch(&self) -> usize {
        self.batch
    }

    fn device(&self) -> &Arc<Device> {
        &self.exact.device
    }

    fn bytes(&self) -> usize {
        complex_bytes(self.precision)
    }

    fn make_engine(&self) -> Result<Engine> {
        let points = self.spec.kernel_points();
        let segments = self.spec.segments();
        let grid = self.batch * points * self.bytes();
        Ok(Engine {
            plan: FftPlan::new(
                self.device(),
                self.spec.kernel_dims,
                self.batch,
                self.precision == Precision::Double,
            )?,
            spectra: DeviceBuffer::new::<u8>(
                self.device(),
                segments * grid,
                "Toeplitz FFT grids (segments x B x 2^d N)",
            )?,
            sum: if segments > 1 {
                Some(DeviceBuffer::new::<u8>(
                    self.device(),
                    grid,
                    "Toeplitz FFT grids (B x 2^d N)",
                )?)
            } else {
                None
            },
        })
    }

    /// The kernel spectra for `weights`, computed on first use and whenever
    /// the weights differ from the last call's.
    fn kernels(&self, weights: Option<&[f32]>) -> Result<Arc<Kernels>> {
        let mut slot = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = slot.as_ref() {
            if k.weights.as_deref() == weights {
                return Ok(k.clone());
            }
        }
        *slot = None;
        let device = self.device().clone();
        let spec = &self.spec;
        let points = spec.kernel_points();
        let pairs = spec.kernel_pairs().len();
        // One kernel (no segmentation) has real weights and is Hermitian: half
        // of it is summed, the rest mirrored ([`ToeplitzSpec::computed_points`]).
        let computed = spec.computed_points();
        let mut offsets_slot = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        let offsets = match &mut *offsets_slot {
            Some(built) => &*built,
            empty => {
                let features = spec.offset_features()?;
                let sizes = Sizes::new(computed as i64, 1, 1, 1, spec.samples as i64)?;
                &*empty.insert(CudaOperator::adjoint_only(
                    device.clone(),
                    &features,
                    sizes,
                    self.precision,
                )?)
            }
        };
        let m = spec.samples;
        let weights64 = spec.kernel_weights(weights)?;
        let data = to_pairs(weights64.len(), weights64.into_iter())?;
        let column = DeviceBuffer::new::<[f64; 2]>(&device, m, "Toeplitz kernel data (M)")?;
        let direct = DeviceBuffer::new::<[f64; 2]>(&device, points, "Toeplitz kernel (2^d N)")?;
        let bytes = self.bytes();
        let spectra = DeviceBuffer::new::<u8>(
            &device,
            checked_bytes(
                pairs.saturating_mul(points),
                bytes,
                "Toeplitz kernel spectra (pairs x 2^d N)",
            )?,
            "Toeplitz kernel spectra (pairs x 2^d N)",
        )?;
        let plan = FftPlan::new(
            &device,
            spec.kernel_dims,
            1,
            self.precision == Precision::Double,
        )?;
        device.bind()?;
        let stream = device
            .ctx
            .new_stream()
            .map_err(|e| driver_error("creating a stream", e))?;
        let s = Stream(stream.cu_stream());
        let [n0, n1, n2] = spec.dims;
        let [g0, g1, g2] = spec.kernel_dims;
        for p in 0..pairs {
            column.upload(&data[p * m..(p + 1) * m], s)?;
            // T_p(Δ) = Σ_j data_j·exp(−2πi κ_j·Δ): the exact adjoint at the offsets.
            offsets.adjoint_dev(&column, &direct, s)?;
            if computed < points {
                launch_over(
                    &self.ops.mirror_conj,
                    points - computed,
                    s,
                    Args::default()
                        .ptr(direct.ptr)
                        .int(computed as i64)
                        .i32(g0 as i32)
                        .i32(g1 as i32)
                        .i32(g2 as i32)
                        .int(points as i64),
                )?;
            }
            let kernel = spectra.ptr + (p * points * bytes) as u64;
            launch_over(
                &self.ops.scale_narrow,
                points,
                s,
                Args::default()
                    .ptr(direct.ptr)
                    .f64(1.0 / points as f64)
                    .i32(n0 as i32)
                    .i32(n1 as i32)
                    .i32(n2 as i32)
                    .i32(g0 as i32)
                    .i32(g1 as i32)
                    .int(points as i64)
                    .ptr(kernel),
            )?;
            plan.exec(kernel, Direction::Forward, s)?;
            // `column` is reused by the next upload: wait (and keep `data` alive).
            // SAFETY: synchronising our own stream.
            unsafe { result::stream::synchronize(s.0) }
                .map_err(|e| driver_error("computing the Toeplitz kernels", e))?;
        }
        let k = Arc::new(Kernels {
            weights: weights
                .map(|w| try_copy(w, "Toeplitz kernel weights (M)"))
                .transpose()?,
            spectra,
        });
        *slot = Some(k.clone());
        Ok(k)
    }

    /// y = EᴴWE x on the device with the kernels `kernels` (module documentation).
    fn normal_with(
        &self,
        kernels: &Kernels,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        s: Stream,
    ) -> Result<()> {
        let e = take(&self.engine, || self.make_engine())?;
        let Sizes {
            voxels: n, coils, ..
        } = self.exact.sizes;
        let spec = &self.spec;
        let points = spec.kernel_points();
        let segments = spec.segments();
        let bytes = self.bytes();
        let b = self.batch;
        let [n0, n1, n2] = spec.dims;
        let [g0, g1, _] = spec.kernel_dims;
        let sens = self.exact.sens_ptr();
        let phase = |l: usize| {
            self.phases
                .as_ref()
                .map_or(0, |p| p.ptr + (l * n * 16) as u64)
        };
        let grids = |l: usize| e.spectra.ptr + (l * b * points * bytes) as u64;
        let kernel = |p: usize| kernels.spectra.ptr + (p * points * bytes) as u64;
        for c0 in (0..coils).step_by(b) {
            for lp in 0..segments {
                launch_over(
                    &self.ops.pad_coils,
                    points * b,
                    s,
                    Args::default()
                        .ptr(x.ptr)
                        .ptr(sens)
                        .ptr(phase(lp))
                        .i32(n0 as i32)
                        .i32(n1 as i32)
                        .i32(n2 as i32)
                        .i32(g0 as i32)
                        .i32(g1 as i32)
                        .int(n as i64)
                        .int(points as i64)
                        .i32(coils as i32)
                        .i32(c0 as i32)
                        .i32(b as i32)
                        .ptr(grids(lp)),
                )?;
                e.plan.exec(grids(lp), Direction::Forward, s)?;
            }
            for l in 0..segments {
                let target = e.sum.as_ref().map_or(grids(0), |v| v.ptr);
                for lp in 0..segments {
                    let (p, conjugate) = spec.pair_index(l, lp);
                    launch_over(
                        &self.ops.kernel_multiply,
                        points * b,
                        s,
                        Args::default()
                            .ptr(kernel(p))
                            .i32(i32::from(conjugate))
                            .ptr(grids(lp))
                            .int(points as i64)
                            .i32(b as i32)
                            .i32(i32::from(lp > 0))
                            .ptr(target),
                    )?;
                }
                e.plan.exec(target, Direction::Inverse, s)?;
                launch_over(
                    &self.ops.crop_accumulate,
                    n,
                    s,
                    Args::default()
                        .ptr(target)
                        .ptr(sens)
                        .ptr(phase(l))
                        .i32(n0 as i32)
                        .i32(n1 as i32)
                        .i32(g0 as i32)
                        .i32(g1 as i32)
                        .int(n as i64)
                        .int(points as i64)
                        .i32(coils as i32)
                        .i32(c0 as i32)
                        .i32(b as i32)
                        .i32(i32::from(c0 > 0 || l > 0))
                        .ptr(y.ptr),
                )?;
            }
        }
        Ok(())
    }
}

impl EncodingOperator for CudaToeplitz {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        self.exact.forward(image, data)
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        self.exact.adjoint(data, image)
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        let kernels = self.kernels(weights)?;
        let w = self.exact.lock()?;
        let s = Stream(w.stream.cu_stream());
        self.exact.upload(&w, image, &w.image, s)?;
        self.normal_with(&kernels, &w.image, &w.image_out, s)?;
        self.exact.download(&w, &w.image_out, out, s)
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        let kernels = self.kernels(problem.sample_weights)?;
        let w = self.exact.lock()?;
        let normal = WithKernels {
            op: self,
            kernels: &kernels,
        };
        solve_on(&self.exact, &normal, &w, problem, image)
    }

    fn backend_name(&self) -> String {
        format!("cuda:{}", self.exact.device.ordinal)
    }
}
