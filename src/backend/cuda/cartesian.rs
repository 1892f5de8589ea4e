//! Cartesian mode on the GPU: E = Φ·F·S computed exactly with cuFFT, the
//! formulas of `model::cartesian` (sample m in FFT bin q_m with phase θ_m):
//!
//! - forward: d_{m,c} = e^{iθ_m}·X_c(q_m), X_c = F⁻¹(S_c x);
//! - adjoint: x = Σ_c conj(S_c)·F(G_c), G_c(q_m) = e^{−iθ_m}·d_{m,c}, zero elsewhere;
//! - normal:  Eᴴ W E x = Σ_c conj(S_c)·F(W_q·F⁻¹(S_c x)), W_q the sample
//!   weights on their bins (the phases cancel),
//!
//! F / F⁻¹ the unnormalised forward / inverse FFTs (cuFFT, coils batched).
//! e^{iθ_m} is formed in float64 on the host. Grids are float32 complex in
//! accurate and fast modes (cuFFT's float32 error is ~1e-7·log N, inside
//! accurate's 1e-5 class) and float64 in double mode; images and data are
//! float64 on the device as in the exact operator. Coils are transformed in
//! batches sized from the free memory (`fft::coil_batch`).

use super::context::Device;
use super::fft::{coil_batch, complex_bytes, to_pairs, Direction, FftOps, FftPlan};
use super::launch::{launch_over, Args};
use super::memory::{DeviceBuffer, Stream};
use super::operator::{check_index_range, DeviceOperator};
use super::space::DeviceNormal;
use super::vectors::{upload_sensitivities, CudaCore};
use super::work::{take, Work};
use crate::error::{try_collect, Result};
use crate::model::cartesian::Cartesian;
use crate::model::Sizes;
use crate::op::Precision;
use num_complex::{Complex32, Complex64};
use std::sync::{Arc, Mutex};

/// Grids and plans of one call (or of one solve).
struct Engine {
    plan: FftPlan,
    /// B grids of N REAL2.
    grid: DeviceBuffer,
    /// The sample weights on the grid, N REAL.
    wgrid: DeviceBuffer,
}

/// The Cartesian E on one GPU.
pub struct CudaCartesian {
    core: CudaCore,
    precision: Precision,
    dims: [usize; 3],
    batch: usize,
    /// q_m (M u32) and e^{iθ_m} (M double2).
    bins: DeviceBuffer,
    theta: DeviceBuffer,
    sensitivities: Option<DeviceBuffer>,
    ops: FftOps,
    engine: Mutex<Option<Engine>>,
    work: Mutex<Work>,
}

impl CudaCartesian {
    pub fn new(
        device: Arc<Device>,
        sizes: Sizes,
        precision: Precision,
        cartesian: &Cartesian,
        sensitivities: Option<&[Complex32]>,
    ) -> Result<CudaCartesian> {
        let Sizes {
            dims,
            voxels: n,
            samples: m,
            coils,
        } = sizes;
        cartesian.check_sizes(sizes)?;
        check_index_range(sizes)?;
        let bins = try_collect(
            cartesian.bins.iter().map(|&q| q as u32),
            "Cartesian FFT bins (M)",
        )?;
        let theta = to_pairs(
            m,
            cartesian
                .phase_cycles
                .iter()
                .map(|&c| Complex64::from_polar(1.0, std::f64::consts::TAU * (c - c.round()))),
        )?;
        let per_coil = n * complex_bytes(precision);
        let batch = coil_batch(&device, coils, (per_coil, dims.iter().product()))?;
        let sensitivities = upload_sensitivities(&device, sensitivities)?;
        let work = Work::new(&device, sizes)?;
        Ok(CudaCartesian {
            bins: DeviceBuffer::from_host(&device, &bins, "Cartesian FFT bins (M)")?,
            theta: DeviceBuffer::from_host(&device, &theta, "Cartesian sample phases (M)")?,
            sensitivities,
            ops: FftOps::new(&device, precision)?,
            core: CudaCore::new(device, sizes, precision)?,
            precision,
            dims,
            batch,
            engine: Mutex::new(None),
            work: Mutex::new(work),
        })
    }

    /// Coils per FFT batch.
    pub fn coil_batch(&self) -> usize {
        self.batch
    }

    fn make_engine(&self) -> Result<Engine> {
        let n = self.core.sizes.voxels;
        let bytes = complex_bytes(self.precision);
        Ok(Engine {
            plan: FftPlan::new(
                &self.core.device,
                self.dims,
                self.batch,
                self.precision == Precision::Double,
            )?,
            grid: DeviceBuffer::new::<u8>(
                &self.core.device,
                self.batch * n * bytes,
                "FFT grids (B x N)",
            )?,
            wgrid: DeviceBuffer::new::<u8>(&self.core.device, n * bytes / 2, "grid weights (N)")?,
        })
    }

    fn sens_ptr(&self) -> u64 {
        self.sensitivities.as_ref().map_or(0, |s| s.ptr)
    }

    fn chunks(&self) -> impl Iterator<Item = usize> {
        (0..self.core.sizes.coils).step_by(self.batch)
    }

    /// grid[b] = S_{c0+b}·x, then the inverse FFT.
    fn spread_ifft(&self, e: &Engine, x: &DeviceBuffer, c0: usize, s: Stream) -> Result<()> {
        let Sizes {
            voxels: n, coils, ..
        } = self.core.sizes;
        launch_over(
            &self.ops.cart_spread,
            n * self.batch,
            s,
            Args::default()
                .ptr(x.ptr)
                .ptr(self.sens_ptr())
                .int(n as i64)
                .i32(coils as i32)
                .i32(c0 as i32)
                .i32(self.batch as i32)
                .ptr(e.grid.ptr),
        )?;
        e.plan.exec(e.grid.ptr, Direction::Inverse, s)
    }

    /// The forward FFT, then y (+)= Σ_b conj(S_{c0+b})·grid[b].
    fn fft_collect(&self, e: &Engine, y: &DeviceBuffer, c0: usize, s: Stream) -> Result<()> {
        let Sizes {
            voxels: n, coils, ..
        } = self.core.sizes;
        e.plan.exec(e.grid.ptr, Direction::Forward, s)?;
        launch_over(
            &self.ops.cart_collect,
            n,
            s,
            Args::default()
                .ptr(e.grid.ptr)
                .ptr(self.sens_ptr())
                .int(n as i64)
                .i32(coils as i32)
                .i32(c0 as i32)
                .i32(self.batch as i32)
                .i32(i32::from(c0 > 0))
                .ptr(y.ptr),
        )
    }

    /// d (M×L) = W·E x on the device.
    fn forward_with(
        &self,
        e: &Engine,
        x: &DeviceBuffer,
        d: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.core.sizes;
        for c0 in self.chunks() {
            self.spread_ifft(e, x, c0, s)?;
            launch_over(
                &self.ops.cart_gather,
                m * self.batch,
                s,
                Args::default()
                    .ptr(e.grid.ptr)
                    .ptr(self.bins.ptr)
                    .ptr(self.theta.ptr)
                    .int(n as i64)
                    .int(m as i64)
                    .i32(coils as i32)
                    .i32(c0 as i32)
                    .i32(self.batch as i32)
                    .ptr(weights.map_or(0, |w| w.ptr))
                    .ptr(d.ptr),
            )?;
        }
        Ok(())
    }

    /// out (N) = Eᴴ d on the device.
    fn adjoint_with(
        &self,
        e: &Engine,
        d: &DeviceBuffer,
        out: &DeviceBuffer,
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.core.sizes;
        for c0 in self.chunks() {
            e.grid.zero(s)?;
            launch_over(
                &self.ops.cart_scatter,
                m * self.batch,
                s,
                Args::default()
                    .ptr(d.ptr)
                    .ptr(self.bins.ptr)
                    .ptr(self.theta.ptr)
                    .int(n as i64)
                    .int(m as i64)
                    .i32(coils as i32)
                    .i32(c0 as i32)
                    .i32(self.batch as i32)
                    .ptr(e.grid.ptr),
            )?;
            self.fft_collect(e, out, c0, s)?;
        }
        Ok(())
    }

    /// y = Eᴴ W E x on the device: no gather, the weights on the grid.
    fn normal_with(
        &self,
        e: &Engine,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = self.core.sizes;
        e.wgrid.zero(s)?;
        launch_over(
            &self.ops.cart_weights,
            m,
            s,
            Args::default()
                .ptr(weights.map_or(0, |w| w.ptr))
                .ptr(self.bins.ptr)
                .int(m as i64)
                .ptr(e.wgrid.ptr),
        )?;
        for c0 in self.chunks() {
            self.spread_ifft(e, x, c0, s)?;
            launch_over(
                &self.ops.grid_weight,
                n * self.batch,
                s,
                Args::default()
                    .ptr(e.wgrid.ptr)
                    .int(n as i64)
                    .i32(self.batch as i32)
                    .ptr(e.grid.ptr),
            )?;
            self.fft_collect(e, y, c0, s)?;
        }
        Ok(())
    }
}

impl DeviceNormal for CudaCartesian {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()> {
        let e = take(&self.engine, || self.make_engine())?;
        self.adjoint_with(&e, d, out, stream)
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        _scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        let e = take(&self.engine, || self.make_engine())?;
        self.normal_with(&e, x, y, weights, stream)
    }
}

/// Host calls: one upload, the device work, one download; CG on the device
/// (the blanket [`crate::op::EncodingOperator`] of a [`DeviceOperator`]).
impl DeviceOperator for CudaCartesian {
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
        let e = take(&self.engine, || self.make_engine())?;
        self.forward_with(&e, x, out, weights, stream)
    }
}
