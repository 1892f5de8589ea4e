//! The finite-difference regularizers on the device (kernels/fd.cu, float64;
//! `backend::cpu::fd` has the grid, its directions and the formulas): D of
//! one solve, the reweighting factors ν_n = ψ'(g_n)/g_n and
//!
//!   y ← y + λ·Dᴴ diag(c·u·ν) D x
//!
//! with c the directions' weights 1/|d|² and u the static edge weights.

use super::launch::{launch_over, Args};
use super::memory::{DeviceBuffer, Stream};
use super::vectors::CudaCore;
use crate::backend::cpu::fd::Grid;
use crate::error::{Error, Result};
use crate::solver::{CgProblem, Penalty};
use cudarc::driver::CudaFunction;

const FD: &str = include_str!("../../../kernels/fd.cu");

/// D on the device for one solve: the grid's directions, the static edge
/// weights u (`fd_weights`, uploaded once per solve) and the per-voxel
/// factors ν of the reweighting (kept on the device), all float64 but u.
pub(super) struct FdState {
    grid: Grid,
    /// ndirs × (offset along the three compact axes, voxel stride), i64.
    directions: DeviceBuffer,
    /// ndirs weights 1/|d|², f64.
    direction_weights: DeviceBuffer,
    /// N×ndirs f32, or none (u = 1).
    fd_weights: Option<DeviceBuffer>,
    /// N f64 ν; meaningful only while `reweighted` (otherwise ν ≡ 1).
    factors: DeviceBuffer,
    reweighted: bool,
    reweight: CudaFunction,
    normal: CudaFunction,
}

impl FdState {
    pub(super) fn new(op: &CudaCore, problem: &CgProblem<'_>) -> Result<FdState> {
        let grid = Grid::with_neighbourhood(op.sizes.dims, problem.neighbourhood);
        let n = op.sizes.voxels;
        let (table, weights) = grid.device_tables();
        let fd_weights = match problem.fd_weights {
            Some(u) => {
                if u.len() != n * grid.ndims() {
                    return Err(Error::internal(format!(
                        "fd_weights has {} elements, expected {}",
                        u.len(),
                        n * grid.ndims()
                    )));
                }
                Some(DeviceBuffer::from_host(
                    &op.device,
                    u,
                    "fd_weights (N x ndims)",
                )?)
            }
            None => None,
        };
        let function = |name: &str| op.device.function("fd", FD, &[], name);
        Ok(FdState {
            grid,
            directions: DeviceBuffer::from_host(&op.device, &table, "difference directions")?,
            direction_weights: DeviceBuffer::from_host(
                &op.device,
                &weights,
                "difference direction weights",
            )?,
            fd_weights,
            factors: DeviceBuffer::new::<f64>(&op.device, n, "reweighting factors (N)")?,
            reweighted: false,
            reweight: function("fd_reweight")?,
            normal: function("fd_normal")?,
        })
    }

    /// The grid arguments shared by both kernels: compact dims, direction count and tables.
    fn grid_args(&self, args: Args) -> Args {
        let [c0, c1, c2] = self.grid.compact_dims();
        args.int(c0 as i64)
            .int(c1 as i64)
            .int(c2 as i64)
            .i32(self.grid.ndims() as i32)
            .ptr(self.directions.ptr)
            .ptr(self.direction_weights.ptr)
            .ptr(self.fd_weights.as_ref().map_or(0, |u| u.ptr))
    }

    /// ν_n = ψ'(g_n)/g_n from the weighted gradient magnitude g of x;
    /// `Quadratic` resets ν ≡ 1.
    pub(super) fn reweight(
        &mut self,
        penalty: Penalty,
        x: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        let (code, epsilon, sigma) = match penalty {
            Penalty::Quadratic => {
                self.reweighted = false;
                return Ok(());
            }
            Penalty::TotalVariation { epsilon } => (1, epsilon, 1.0),
            Penalty::Laplace { epsilon, sigma } => (2, epsilon, sigma),
        };
        launch_over(
            &self.reweight,
            self.grid.voxels(),
            stream,
            self.grid_args(Args::default().ptr(x.ptr))
                .i32(code)
                .f64(epsilon)
                .f64(sigma)
                .ptr(self.factors.ptr),
        )?;
        self.reweighted = true;
        Ok(())
    }

    /// y ← y + λ·Dᴴ diag(c·u·ν) D x.
    pub(super) fn add_normal(
        &self,
        lambda: f64,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        launch_over(
            &self.normal,
            self.grid.voxels(),
            stream,
            self.grid_args(Args::default().ptr(x.ptr).ptr(y.ptr))
                .ptr(if self.reweighted { self.factors.ptr } else { 0 })
                .f64(lambda),
        )
    }
}
