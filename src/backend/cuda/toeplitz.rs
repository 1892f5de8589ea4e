//! The Toeplitz normal operator on the GPU (`model::toeplitz` has the math):
//!
//!   EᴴWE x = Σ_c conj(S_c)·crop(F⁻¹(K·F(pad(S_c·x)))),   K = F(T)/Π g_a,
//!
//! and with off-resonance, L time segments with P_l(n) = exp(iδ_n τ_l),
//!
//!   EᴴWE x ≈ Σ_c Σ_l conj(P_l)·conj(S_c)·crop(F⁻¹(Σ_l' K_{l,l'}·F(pad(S_c·P_l'·x)))),
//!
//! K_{l',l} = conj(K_{l,l'}) (only l ≤ l' stored). F, F⁻¹ are cuFFT's
//! unnormalised transforms of the kernel grid (g ≥ 2n cells per axis,
//! `ToeplitzSpec::kernel_dims`), batched over coils (batches sized
//! from the free memory). The kernels T_{l,l'}(Δ) = Σ_j γ_j e^{−2πi κ_j·Δ},
//! γ_j = w_j·conj(a_l(t_j))·a_l'(t_j) (`ToeplitzSpec::kernel_weights`), are
//! one batched type-1 NUFFT (sign −1, points 2π κ_j, modes Δ = −n … n − 1 per
//! doubled axis, all pairs at once; `nufft::CudaNufft`) at the tolerance and
//! precision of `model::toeplitz::kernel_nufft_tolerance`, moved onto the
//! kernel grid (kernels/nufft_toeplitz.cu) and transformed there, all on the
//! device; the NUFFT plan (its sorted points) is kept and the kernels are
//! recomputed when CG's sample weights differ from the last ones. Forward,
//! adjoint and CG's right-hand side are the exact
//! operator's. Grids are float32 complex in accurate and fast modes and
//! float64 in double mode; images stay float64 on the device.

use super::coil_split::CoilPart;
use super::context::{driver_error, Device};
use super::fft::{coil_batch, complex_bytes, to_pairs, Direction, FftOps, FftPlan};
use super::launch::mode_code;
use super::launch::{launch_over, Args};
use super::memory::{DeviceBuffer, Stream};
use super::nufft::CudaNufft;
use super::operator::{CudaOperator, DeviceOperator};
use super::space::{solve_on, DeviceNormal};
use super::vectors::CudaCore;
use super::work::take;
use crate::error::{checked_bytes, try_copy, Result};
use crate::model::toeplitz::ToeplitzSpec;
use crate::model::Sizes;
use crate::nufft::{Modes, NufftSpec, NufftType, Upsampling};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::solver::CgProblem;
use cudarc::driver::result;
use num_complex::{Complex32, Complex64};
use std::sync::{Arc, Mutex};

/// The kernel spectra for one set of sample weights.
struct Kernels {
    /// The weights they were computed for (`None` = 1).
    weights: Option<Vec<f32>>,
    /// K_p for the pairs of `ToeplitzSpec::kernel_pairs`, pairs × kernel grid REAL2.
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
    /// The type-1 NUFFT of the kernels (its points sorted once), built at first use.
    nufft: Mutex<Option<CudaNufft>>,
    kernels: Mutex<Option<Arc<Kernels>>>,
    engine: Mutex<Option<Engine>>,
}

/// The operator with the kernels of one solve, as CG applies it.
struct WithKernels<'a> {
    op: &'a CudaToeplitz,
    kernels: Arc<Kernels>,
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
        self.op.normal_with(&self.kernels, x, y, stream)
    }
}

impl CudaToeplitz {
    /// The Toeplitz operator of `spec` around the exact operator `exact`
    /// (of the same model, `sizes` and `precision`).
    pub fn new(
        exact: CudaOperator,
        spec: ToeplitzSpec,
        sizes: Sizes,
        precision: Precision,
    ) -> Result<CudaToeplitz> {
        let device = exact.device.clone();
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
        let batch = coil_batch(&device, sizes.coils, (per_coil, spec.kernel_points()))?;
        Ok(CudaToeplitz {
            ops: FftOps::new(&device, precision)?,
            exact,
            spec,
            precision,
            batch,
            phases,
            nufft: Mutex::new(None),
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
                "Toeplitz FFT grids (segments x B x kernel grid)",
            )?,
            sum: if segments > 1 {
                Some(DeviceBuffer::new::<u8>(
                    self.device(),
                    grid,
                    "Toeplitz FFT grids (B x kernel grid)",
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
        let m = spec.samples;
        let (tolerance, nufft_double) = spec.kernel_tolerance(self.precision);
        let mut nufft_slot = self.nufft.lock().unwrap_or_else(|e| e.into_inner());
        if nufft_slot.is_none() {
            let modes = Modes::new(3, &spec.mode_dims().map(|n| n as i64))?;
            let nufft_spec = NufftSpec::new(
                NufftType::One,
                modes,
                -1,
                tolerance,
                pairs as i32,
                nufft_double,
                Some(Upsampling::Two),
            )?;
            let x: Vec<f64> = spec
                .cycles
                .iter()
                .map(|&k| std::f64::consts::TAU * k)
                .collect();
            *nufft_slot = Some(CudaNufft::new(&nufft_spec, &x, m, device.ordinal)?);
        }
        let nufft = nufft_slot
            .as_ref()
            .ok_or_else(|| crate::error::Error::internal("Toeplitz NUFFT missing"))?;
        let weights_data = spec.kernel_weights(weights)?;
        let nufft_bytes = if nufft_double { 16 } else { 8 };
        let data = DeviceBuffer::new::<u8>(
            &device,
            checked_bytes(
                pairs.saturating_mul(m),
                nufft_bytes,
                "Toeplitz kernel weights (pairs x M)",
            )?,
            "Toeplitz kernel weights (pairs x M)",
        )?;
        let s = nufft.stream();
        if nufft_double {
            data.upload(&to_pairs(weights_data.len(), weights_data.into_iter())?, s)?;
        } else {
            let narrow: Vec<[f32; 2]> = weights_data
                .iter()
                .map(|c| [c.re as f32, c.im as f32])
                .collect();
            data.upload(&narrow, s)?;
        }
        let mode_points: usize = spec.mode_dims().iter().product();
        let modes = DeviceBuffer::new::<u8>(
            &device,
            checked_bytes(
                pairs.saturating_mul(mode_points),
                nufft_bytes,
                "Toeplitz kernel modes (pairs x 2^d N)",
            )?,
            "Toeplitz kernel modes (pairs x 2^d N)",
        )?;
        let bytes = self.bytes();
        let spectra = DeviceBuffer::new::<u8>(
            &device,
            checked_bytes(
                pairs.saturating_mul(points),
                bytes,
                "Toeplitz kernel spectra (pairs x kernel grid)",
            )?,
            "Toeplitz kernel spectra (pairs x kernel grid)",
        )?;
        // The pairs' spectra in batches that one cuFFT plan takes.
        let batch = super::fft::fft_batch(pairs, points);
        let plan = FftPlan::new(
            &device,
            spec.kernel_dims,
            batch,
            self.precision == Precision::Double,
        )?;
        let move_kernels = super::nufft::kernels::toeplitz_from_modes(
            &device,
            nufft_double,
            mode_code(self.precision),
        )?;
        // T_p(Δ) for every pair p, as modes Δ = −n … n − 1.
        nufft.execute_device(data.ptr, modes.ptr, s)?;
        let [n0, n1, n2] = spec.dims;
        let [g0, g1, g2] = spec.kernel_dims;
        launch_over(
            &move_kernels,
            points * pairs,
            s,
            Args::default()
                .ptr(modes.ptr)
                .f64(1.0 / points as f64)
                .i32(n0 as i32)
                .i32(n1 as i32)
                .i32(n2 as i32)
                .i32(g0 as i32)
                .i32(g1 as i32)
                .i32(g2 as i32)
                .int(points as i64)
                .i32(pairs as i32)
                .ptr(spectra.ptr),
        )?;
        let full = pairs - pairs % batch;
        for first in (0..full).step_by(batch) {
            let at = spectra.ptr + (first * points * bytes) as u64;
            plan.exec(at, Direction::Forward, s)?;
        }
        if full < pairs {
            let last = FftPlan::new(
                &device,
                spec.kernel_dims,
                pairs - full,
                self.precision == Precision::Double,
            )?;
            last.exec(
                spectra.ptr + (full * points * bytes) as u64,
                Direction::Forward,
                s,
            )?;
        }
        // `data` and `modes` are freed on return.
        // SAFETY: synchronising the NUFFT's own stream.
        unsafe { result::stream::synchronize(s.0) }
            .map_err(|e| driver_error("computing the Toeplitz kernels", e))?;
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
        let normal = WithKernels { op: self, kernels };
        solve_on(&self.exact, &normal, &w, problem, image)
    }

    /// The kernels are downloaded (float32 or float64 pairs) and summed on the host.
    fn toeplitz_kernel(
        &self,
        weights: Option<&[f32]>,
    ) -> Result<Option<(Vec<Complex64>, [usize; 3])>> {
        let kernels = self.kernels(weights)?;
        let spec = &self.spec;
        let points = spec.kernel_points();
        let bytes = self.bytes();
        let mut raw = crate::error::try_vec(
            spec.kernel_pairs().len() * points * bytes,
            0u8,
            "Toeplitz kernels on the host",
        )?;
        let device = self.device().clone();
        device.bind()?;
        let stream = device
            .ctx
            .new_stream()
            .map_err(|e| driver_error("creating a stream", e))?;
        kernels
            .spectra
            .download(&mut raw, Stream(stream.cu_stream()))?;
        let value = |offset: usize| -> Complex64 {
            let part = |o: usize| -> f64 {
                if bytes == 16 {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&raw[o..o + 8]);
                    f64::from_ne_bytes(b)
                } else {
                    let mut b = [0u8; 4];
                    b.copy_from_slice(&raw[o..o + 4]);
                    f32::from_ne_bytes(b) as f64
                }
            };
            Complex64::new(part(offset), part(offset + bytes / 2))
        };
        let total = crate::solver::precondition::sum_kernel_pairs(spec, |p, v| {
            value((p * points + v) * bytes)
        })?;
        Ok(Some((total, spec.kernel_dims)))
    }

    fn backend_name(&self) -> String {
        format!("cuda:{}", self.exact.device.ordinal)
    }
}

/// A part of a coil split: its coils' exact E and Eᴴ, EᴴWE with its kernels.
impl CoilPart for CudaToeplitz {
    fn core(&self) -> &CudaCore {
        DeviceOperator::core(&self.exact)
    }

    fn forward_part(&self, x: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        self.exact.forward_dev(x, out, None, s)
    }

    fn adjoint_part(&self, d: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        self.exact.adjoint_dev(d, out, s)
    }

    fn normal_part(&self, weights: Option<&[f32]>) -> Result<Box<dyn DeviceNormal + Send + '_>> {
        let kernels = self.kernels(weights)?;
        Ok(Box::new(WithKernels { op: self, kernels }))
    }
}
