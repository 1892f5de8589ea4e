//! Type 2's interpolation: every point reads the fine grid with the
//! kernel's tensor-product weights,
//!
//! $$c_{j,t} = \sum_l b_t(l)\, \psi(l_x - g_{j,x})\,\psi(l_y - g_{j,y})\,\psi(l_z - g_{j,z}),$$
//!
//! by the same subproblems as spreading: each rayon task copies its bin's
//! tile out of the grid (periodically wrapped) and interpolates its points
//! from it. Tasks only read the grid and write their own points' results,
//! so all subproblems run at once.
//!
//! Per point and transform, each tile row takes one vector FMA,
//! a ← row·(w_y w_z) + a ([`super::tile_sum`]), with the rows' weights
//! w_y w_z formed once per point for all its transforms
//! ([`super::tile_sum::row_weights`]: ho3d-77k's type 2 ~15 % faster than
//! forming them per row and transform), and the row sums meet the x weights
//! once at the end. A point's kernel weights are evaluated once per
//! task and kept ([`PointWeights`]) for the task's later transform groups:
//! with one transform per group (3D tiles of ~100 KB) Horner's evaluation
//! otherwise cost ~40 % on top of the row sums.

use super::horner::HornerKernel;
use super::sort::{Placed, SortedPoints, Subproblem};
use super::tile::{as_reals, task_buffers, transform_group, PointWeights, TileBuffers, TileShape};
use super::tile_sum::{row_weights, tile_sum, Rows, ROW_WEIGHTS};
use crate::backend::cpu::real::Real;
use crate::error::Result;
use num_complex::Complex;
use rayon::prelude::*;

/// What every interpolation task reads.
pub struct InterpolationJob<'a, T> {
    pub kernel: &'a HornerKernel<T>,
    pub shape: TileShape,
    pub placed: &'a [Placed<T>],
    pub batch: usize,
}

/// Interpolates the points of `sub` for transforms first.. from `tiles`
/// (one per transform) into `out` (the subproblem's points × batch,
/// point-major), the kernel weights from `weights`.
#[inline(always)]
fn interpolate_points<T: Real, const L: usize, const FMA: bool, const WIDE: usize>(
    job: &InterpolationJob<'_, T>,
    sub: &Subproblem,
    first: usize,
    tiles: &[T],
    out: &mut [Complex<T>],
    mut weights: PointWeights<'_, T>,
) {
    let shape = &job.shape;
    let [rows_y, rows_z] = shape.rows();
    let (row, tile_len) = (shape.row(), shape.values());
    let (ey, batch) = (shape.extent[1], job.batch);
    let mut per_row = [T::default(); ROW_WEIGHTS];
    for (i, (p, values)) in job.placed[sub.start..sub.end]
        .iter()
        .zip(out.chunks_exact_mut(batch))
        .enumerate()
    {
        let (kx, ky, kz) = weights.of::<L, FMA>(i, p, job.kernel, shape);
        let [lx, ly, lz] = p.local.map(|v| v as usize);
        let rows = Rows {
            base: row * (ly + ey * lz) + 2 * lx,
            stride: row,
            extent_y: ey,
            count: [rows_y, rows_z],
        };
        row_weights(&rows, &ky, &kz, &mut per_row);
        for (tile, value) in tiles.chunks_exact(tile_len).zip(&mut values[first..]) {
            let (re, im) = tile_sum::<T, L, FMA, WIDE>(tile, &rows, &kx, &per_row);
            *value = Complex::new(re, im);
        }
    }
}

super::isa_kernel!(interpolate_subproblem => interpolate_points(
    job: &InterpolationJob<'_, T>,
    sub: &Subproblem,
    first: usize,
    tiles: &[T],
    out: &mut [Complex<T>],
    weights: PointWeights<'_, T>
));

/// out (sorted points × batch, point-major) = the interpolated grids
/// (batch × n_f cells, one grid after another).
pub fn interpolate<T: Real>(
    job: &InterpolationJob<'_, T>,
    sorted: &SortedPoints<T>,
    buffers: &TileBuffers<T>,
    grids: &[Complex<T>],
    out: &mut [Complex<T>],
) -> Result<()> {
    let batch = job.batch;
    let cells: usize = job.shape.fine.iter().product();
    let tile_len = job.shape.values();
    // Each subproblem's results, disjoint slices of `out` in sorted order.
    let mut rest = out;
    let mut parts = Vec::with_capacity(sorted.subproblems.len());
    for sub in &sorted.subproblems {
        let (mine, tail) = rest.split_at_mut((sub.end - sub.start) * batch);
        parts.push((sub, mine));
        rest = tail;
    }
    let group = transform_group::<T>(&job.shape, batch);
    let groups = batch.div_ceil(group);
    let lanes = job.shape.lanes;
    parts.into_par_iter().try_for_each(|(sub, values)| {
        buffers.with(|buffer| -> Result<()> {
            let (buffer, store) = task_buffers(
                buffer,
                tile_len * group,
                (sub.end - sub.start, lanes, groups),
            )?;
            for first in (0..batch).step_by(group) {
                let count = group.min(batch - first);
                let tiles = &mut buffer[..tile_len * count];
                for (k, tile) in tiles.chunks_exact_mut(tile_len).enumerate() {
                    let t = first + k;
                    let grid = as_reals(&grids[t * cells..(t + 1) * cells]);
                    job.shape.for_each_run(sub.origin, |from, to, n| {
                        tile[2 * from..2 * (from + n)].copy_from_slice(&grid[2 * to..2 * (to + n)]);
                    });
                }
                let weights = PointWeights::for_group(&mut *store, first / group, groups);
                interpolate_subproblem(lanes, job, sub, first, tiles, values, weights);
            }
            Ok(())
        })?
    })
}
