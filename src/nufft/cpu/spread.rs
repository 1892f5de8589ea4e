//! Type 1's spreading: every strength c_{j,t} (transform t) added to the
//! fine grid with the kernel's tensor-product weights,
//!
//! $$b_t(l) = \sum_j c_{j,t}\, \psi(l_x - g_{j,x})\,\psi(l_y - g_{j,y})\,\psi(l_z - g_{j,z}),$$
//!
//! by subproblems: each rayon task spreads one subproblem's points for a
//! run of transform groups, one group at a time, into private tiles
//! ([`super::tile`]) and adds them to those transforms' grids. The colours
//! of [`super::sort`] run one after another; within a colour the tiles are
//! disjoint and different transform groups write different grids, so the
//! adds need neither atomics nor locks, except for the subproblems of a
//! split (heavy) bin, which add under that bin's lock.
//!
//! Per point and task the kernel weights are evaluated once (Horner, all
//! cells of an axis in one vector, [`PointWeights`]) and reused for every
//! transform of the task's groups; per transform a row of the tile takes
//! one vector FMA, v ← (c ⊗ w_x)·(w_y w_z) + v ([`super::tile_sum::tile_add`]).

use super::horner::HornerKernel;
use super::sort::{Placed, SortedPoints, Subproblem};
use super::tile::{add_run, task_buffers, transform_group, PointWeights, TileBuffers, TileShape};
use super::tile_sum::{tile_add, Rows};
use crate::backend::cpu::real::Real;
use crate::error::Result;
use num_complex::Complex;
use rayon::prelude::*;
use std::sync::Mutex;

/// What every spreading task reads.
pub struct SpreadJob<'a, T> {
    pub kernel: &'a HornerKernel<T>,
    pub shape: TileShape,
    /// The sorted points.
    pub placed: &'a [Placed<T>],
    /// Strengths in sorted order, point-major: c of point s, transform t at s·batch + t.
    pub strengths: &'a [Complex<T>],
    pub batch: usize,
}

/// Spreads the points of `sub` for transforms first.. into `tiles` (one
/// tile per transform, zeroed by the caller).
#[inline(always)]
fn spread_points<T: Real, const L: usize, const FMA: bool, const WIDE: usize>(
    job: &SpreadJob<'_, T>,
    sub: &Subproblem,
    first: usize,
    tiles: &mut [T],
    mut weights: PointWeights<'_, T>,
) {
    let shape = &job.shape;
    let [rows_y, rows_z] = shape.rows();
    let (row, tile_len) = (shape.row(), shape.values());
    let (ey, batch) = (shape.extent[1], job.batch);
    for (i, (s, p)) in (sub.start..sub.end)
        .zip(&job.placed[sub.start..sub.end])
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
        for (t, tile) in tiles.chunks_exact_mut(tile_len).enumerate() {
            let c = job.strengths[s * batch + first + t];
            let mut ckx = [T::default(); L];
            for k in 0..L / 2 {
                ckx[2 * k] = c.re * kx[2 * k];
                ckx[2 * k + 1] = c.im * kx[2 * k + 1];
            }
            tile_add::<T, L, FMA, WIDE>(tile, &rows, &ckx, &ky, &kz);
        }
    }
}

super::isa_kernel!(spread_subproblem => spread_points(
    job: &SpreadJob<'_, T>,
    sub: &Subproblem,
    first: usize,
    tiles: &mut [T],
    weights: PointWeights<'_, T>
));

/// The fine grids (batch × n_f cells, one grid after another) as tasks that
/// write disjoint cells share them.
#[derive(Clone, Copy)]
struct SharedGrids<T> {
    ptr: *mut Complex<T>,
    len: usize,
}

// SAFETY: tasks write only through `add_tile`, whose callers guarantee that
// no two tasks write the same cells at the same time (module documentation).
unsafe impl<T: Send> Send for SharedGrids<T> {}
unsafe impl<T: Send> Sync for SharedGrids<T> {}

impl<T: Real> SharedGrids<T> {
    /// grids first.. += the tiles of a bin with first cell `origin`.
    ///
    /// # Safety
    /// No other thread may access the cells of this bin's tile meanwhile.
    unsafe fn add_tile(&self, shape: &TileShape, origin: [usize; 3], first: usize, tiles: &[T]) {
        let cells: usize = shape.fine.iter().product();
        for (k, tile) in tiles.chunks_exact(shape.values()).enumerate() {
            let t = first + k;
            debug_assert!((t + 1) * cells <= self.len);
            shape.for_each_run(origin, |from, to, n| {
                // SAFETY: to + n ≤ cells (a run stays inside one grid row), so
                // the run lies inside grid t, whose Complex<T> (#[repr(C)]) are
                // 2 consecutive T each; exclusivity is the caller's.
                let grid = unsafe {
                    std::slice::from_raw_parts_mut(self.ptr.add(t * cells + to) as *mut T, 2 * n)
                };
                add_run(&tile[2 * from..2 * (from + n)], grid);
            });
        }
    }
}

/// grids (batch × n_f, zeroed by the caller) += the spread strengths.
pub fn spread<T: Real>(
    job: &SpreadJob<'_, T>,
    sorted: &SortedPoints<T>,
    buffers: &TileBuffers<T>,
    bin_locks: &[Mutex<()>],
    grids: &mut [Complex<T>],
) -> Result<()> {
    let shared = SharedGrids {
        ptr: grids.as_mut_ptr(),
        len: grids.len(),
    };
    let group = transform_group::<T>(&job.shape, job.batch);
    let groups = job.batch.div_ceil(group);
    let (tile_len, lanes) = (job.shape.values(), job.shape.lanes);
    let threads = rayon::current_num_threads();
    // Tasks are (subproblem, run of transform groups) pairs: a colour may
    // hold a single bin (three bins per axis make 27 colours of one), and
    // its transform groups write different grids, so runs of them go in
    // parallel too — as many runs as keep the threads busy (4 tasks each),
    // since each run evaluates its points' weights once.
    for color in &sorted.by_color {
        let runs = (4 * threads).div_ceil(color.len().max(1)).clamp(1, groups);
        (0..color.len() * runs)
            .into_par_iter()
            .try_for_each(|task| -> Result<()> {
                let sub = &sorted.subproblems[color[task / runs]];
                let run = task % runs;
                let (start, end) = (run * groups / runs, (run + 1) * groups / runs);
                buffers.with(|buffer| -> Result<()> {
                    let (buffer, store) = task_buffers(
                        buffer,
                        tile_len * group,
                        (sub.end - sub.start, lanes, end - start),
                    )?;
                    for g in start..end {
                        let first = g * group;
                        let count = group.min(job.batch - first);
                        let tiles = &mut buffer[..tile_len * count];
                        tiles.fill(T::default());
                        let weights = PointWeights::for_group(&mut *store, g - start, end - start);
                        spread_subproblem(lanes, job, sub, first, tiles, weights);
                        let _guard = sub
                            .shared
                            .then(|| bin_locks[sub.bin].lock().unwrap_or_else(|e| e.into_inner()));
                        // SAFETY: within one colour the tiles of different bins are
                        // disjoint (super::sort), tasks of one bin write different
                        // grids unless they share a transform group, and
                        // subproblems sharing a bin hold its lock.
                        unsafe { shared.add_tile(&job.shape, sub.origin, first, tiles) };
                    }
                    Ok(())
                })?
            })?;
    }
    Ok(())
}
