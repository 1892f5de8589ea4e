//! Tiles: the private, padded boxes of the fine grid that spreading writes
//! and interpolation reads, one bin (plus the kernel's reach) each, and
//! their periodic exchange with the fine grid.
//!
//! A tile holds interleaved complex values (re, im as consecutive T), x
//! fastest, `extent` cells per axis: along x the bin's width + L/2 − 1
//! (a kernel row is written or read as one vector of L/2 cells), along a
//! spread y or z axis the bin's width + w − 1, and 1 along axes that are not
//! spread. Tile cell (i, j, k) of a bin with first cell o is grid cell
//! ((o_x + i) mod n_fx, (o_y + j) mod n_fy, (o_z + k) mod n_fz).

use super::horner::HornerKernel;
use super::sort::{AxisBins, Placed};
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Result};
use num_complex::Complex;
use std::sync::Mutex;

/// The tile layout of one plan.
#[derive(Clone, Copy, Debug)]
pub struct TileShape {
    /// n_f per axis.
    pub fine: [usize; 3],
    /// Whether the kernel spreads along each axis (n_f > 1).
    pub spread: [bool; 3],
    /// Kernel width w.
    pub width: usize,
    /// T values per kernel row (2 × the padded width).
    pub lanes: usize,
    /// Cells per axis.
    pub extent: [usize; 3],
}

impl TileShape {
    pub fn new(axes: &[AxisBins; 3], width: usize, lanes: usize) -> TileShape {
        let fine = [0, 1, 2].map(|a| axes[a].fine);
        let spread = fine.map(|f| f > 1);
        let extent = [
            if spread[0] {
                axes[0].max_width + lanes / 2 - 1
            } else {
                lanes / 2
            },
            if spread[1] {
                axes[1].max_width + width - 1
            } else {
                1
            },
            if spread[2] {
                axes[2].max_width + width - 1
            } else {
                1
            },
        ];
        TileShape {
            fine,
            spread,
            width,
            lanes,
            extent,
        }
    }

    /// T values of one tile.
    pub fn values(&self) -> usize {
        2 * self.extent.iter().product::<usize>()
    }

    /// T values per tile row.
    pub fn row(&self) -> usize {
        2 * self.extent[0]
    }

    /// Kernel rows per point along y and z (w, or 1 on an axis not spread).
    pub fn rows(&self) -> [usize; 2] {
        [1, 2].map(|a| if self.spread[a] { self.width } else { 1 })
    }

    /// Calls `run(tile cell, grid cell, cells)` for every contiguous run of
    /// the tile of a bin with first cell `origin`, wrapped periodically.
    pub fn for_each_run(&self, origin: [usize; 3], mut run: impl FnMut(usize, usize, usize)) {
        let [ex, ey, ez] = self.extent;
        let [fx, fy, fz] = self.fine;
        for k in 0..ez {
            let gz = (origin[2] + k) % fz;
            for j in 0..ey {
                let gy = (origin[1] + j) % fy;
                let tile_row = ex * (j + ey * k);
                let grid_row = fx * (gy + fy * gz);
                let (mut i, mut gx) = (0, origin[0] % fx);
                while i < ex {
                    let cells = (ex - i).min(fx - gx);
                    run(tile_row + i, grid_row + gx, cells);
                    i += cells;
                    gx = 0;
                }
            }
        }
    }
}

/// Grid values += tile values (interleaved re, im on both sides).
#[inline]
pub fn add_run<T: Real>(tile: &[T], grid: &mut [T]) {
    for (g, &v) in grid.iter_mut().zip(tile) {
        *g = *g + v;
    }
}

/// The complex values of a grid as interleaved reals (re, im, re, im, …).
pub fn as_reals<T>(values: &[Complex<T>]) -> &[T] {
    // SAFETY: Complex<T> is #[repr(C)] { re: T, im: T }: n complex values
    // are 2n consecutive T, with the alignment of T.
    unsafe { std::slice::from_raw_parts(values.as_ptr() as *const T, 2 * values.len()) }
}

/// Bytes of tiles a task works on at once where the L2 cache's size is
/// unknown, and the least [`tile_budget`] gives.
pub const TILE_BUDGET: usize = 192 << 10;

/// The most [`tile_budget`] gives.
const MAX_TILE_BUDGET: usize = 1 << 20;

/// Bytes of tiles a task works on at once: transforms are spread or
/// interpolated together, sharing each point's kernel weights, as far as
/// their tiles fit half the core's L2 cache (CPUID leaf 0x8000_0006, AMD and
/// Intel alike), within [`TILE_BUDGET`] … 1 MiB. On a Zen 4 (1 MiB L2) that
/// is 512 KiB, four 3D tiles of w = 7 instead of one: ho3d-77k's 84 type-2
/// transforms 190 → 145 ms (BENCHMARKS.md, session 26); spreading is
/// unchanged. The group changes no result: each transform's tile is summed
/// or added on its own.
pub fn tile_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        l2_bytes().map_or(TILE_BUDGET, |l2| {
            (l2 / 2).clamp(TILE_BUDGET, MAX_TILE_BUDGET)
        })
    })
}

/// The L2 cache of the core, in bytes, where the CPU reports it.
fn l2_bytes() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0006 is read
        // only when the highest extended leaf (leaf 0x8000_0000) includes it.
        #[allow(unused_unsafe)]
        let (highest, l2) = unsafe { (__cpuid(0x8000_0000).eax, __cpuid(0x8000_0006).ecx) };
        // ECX bits 31–16: the L2 size in KiB.
        let kib = (l2 >> 16) as usize;
        (highest >= 0x8000_0006 && kib > 0).then_some(kib << 10)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Transforms handled together per task (at least 1).
pub fn transform_group<T>(shape: &TileShape, batch: usize) -> usize {
    let bytes = shape.values() * std::mem::size_of::<T>();
    (tile_budget() / bytes.max(1)).clamp(1, batch.max(1))
}

/// The kernel weights of a point along an axis that is not spread: 1 at cell 0.
#[inline(always)]
pub fn unit_weights<T: Real, const L: usize>() -> [T; L] {
    let mut k = [T::default(); L];
    k[0] = T::from_f64(1.0);
    k[1] = T::from_f64(1.0);
    k
}

/// T values of the kernel weights a task keeps for `points` points across
/// its `groups` transform groups: 3 axes × `lanes` per point, none for one
/// group (evaluated as used).
pub fn kept_len(points: usize, lanes: usize, groups: usize) -> usize {
    if groups > 1 {
        3 * lanes * points
    } else {
        0
    }
}

/// A task's buffer split into `tiles` values of tiles and the store of its
/// `points` points' weights (none for one transform group).
pub fn task_buffers<T>(
    buffer: &mut [T],
    tiles: usize,
    (points, lanes, groups): (usize, usize, usize),
) -> Result<(&mut [T], &mut [T])> {
    let kept = kept_len(points, lanes, groups);
    if buffer.len() < tiles + kept {
        return Err(crate::error::Error::internal(
            "NUFFT tile buffers shorter than tiles and kept weights",
        ));
    }
    let (tiles, store) = buffer.split_at_mut(tiles);
    Ok((tiles, &mut store[..kept]))
}

/// Where a task's points' kernel weights come from (L values per axis and
/// point, stored x, y, z): evaluated (one transform group), evaluated and
/// kept (the first of several groups), or read back (the later groups).
/// With one transform per group (3D tiles of ~100 KB), evaluating by Horner
/// for every group cost ~40 % on top of the tile rows.
pub enum PointWeights<'a, T> {
    Evaluate,
    Keep(&'a mut [T]),
    Kept(&'a [T]),
}

impl<'a, T: Real> PointWeights<'a, T> {
    /// The weights of the `nth` of a task's `groups` transform groups, kept in `store`.
    pub fn for_group(store: &'a mut [T], nth: usize, groups: usize) -> Self {
        match (nth, groups) {
            (_, 1) => PointWeights::Evaluate,
            (0, _) => PointWeights::Keep(store),
            _ => PointWeights::Kept(store),
        }
    }

    /// The x, y, z weights of point `i` of the task (placed at `p`).
    /// Closures are avoided on purpose: one passed to another function (an
    /// array `map`) loses the caller's target features, and FMA becomes a
    /// library call.
    #[inline(always)]
    pub fn of<const L: usize, const FMA: bool>(
        &mut self,
        i: usize,
        p: &Placed<T>,
        kernel: &HornerKernel<T>,
        shape: &TileShape,
    ) -> ([T; L], [T; L], [T; L]) {
        #[inline(always)]
        fn evaluate<T: Real, const L: usize, const FMA: bool>(
            p: &Placed<T>,
            axis: usize,
            kernel: &HornerKernel<T>,
            shape: &TileShape,
        ) -> [T; L] {
            if shape.spread[axis] {
                kernel.evaluate::<L, FMA>(p.z[axis])
            } else {
                unit_weights::<T, L>()
            }
        }
        #[inline(always)]
        fn read<T: Real, const L: usize>(values: &[T]) -> [T; L] {
            let mut k = [T::default(); L];
            k.copy_from_slice(&values[..L]);
            k
        }
        #[inline(always)]
        fn evaluated<T: Real, const L: usize, const FMA: bool>(
            p: &Placed<T>,
            kernel: &HornerKernel<T>,
            shape: &TileShape,
        ) -> ([T; L], [T; L], [T; L]) {
            (
                evaluate::<T, L, FMA>(p, 0, kernel, shape),
                evaluate::<T, L, FMA>(p, 1, kernel, shape),
                evaluate::<T, L, FMA>(p, 2, kernel, shape),
            )
        }
        match self {
            PointWeights::Evaluate => evaluated::<T, L, FMA>(p, kernel, shape),
            PointWeights::Keep(store) => {
                let k = evaluated::<T, L, FMA>(p, kernel, shape);
                let slot = &mut store[3 * L * i..3 * L * (i + 1)];
                slot[..L].copy_from_slice(&k.0);
                slot[L..2 * L].copy_from_slice(&k.1);
                slot[2 * L..].copy_from_slice(&k.2);
                k
            }
            PointWeights::Kept(store) => {
                let slot = &store[3 * L * i..];
                (read(slot), read(&slot[L..]), read(&slot[2 * L..]))
            }
        }
    }
}

/// Scratch buffers of one execution (tile sets; a transform's modes), one
/// per worker thread, allocated before any output is written.
pub struct TileBuffers<T> {
    per_thread: Vec<Mutex<Vec<T>>>,
    /// T values of each buffer.
    len: usize,
}

impl<T: Clone + Default + Send + Sync> TileBuffers<T> {
    pub fn new(len: usize, threads: usize) -> Result<TileBuffers<T>> {
        let per_thread = (0..threads.max(1))
            .map(|_| try_vec(len, T::default(), "NUFFT tiles").map(Mutex::new))
            .collect::<Result<_>>()?;
        Ok(TileBuffers { per_thread, len })
    }

    /// Runs `f` with this thread's buffer (a fresh one if it is taken, which
    /// happens only if `f` itself waits for rayon tasks).
    pub fn with<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        let slot = rayon::current_thread_index().and_then(|i| self.per_thread.get(i));
        if let Some(mut buffer) = slot.and_then(|m| m.try_lock().ok()) {
            return Ok(f(&mut buffer));
        }
        let mut fresh = try_vec(self.len, T::default(), "NUFFT tiles")?;
        Ok(f(&mut fresh))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_tile_once_and_wrap() {
        let axes = [
            AxisBins::new(20, 10).unwrap(),
            AxisBins::new(9, 9).unwrap(),
            AxisBins::new(1, 1).unwrap(),
        ];
        let shape = TileShape::new(&axes, 4, 8);
        assert_eq!(shape.extent, [13, 12, 1]);
        let mut seen = vec![0; shape.extent.iter().product()];
        let mut hits = vec![0; 20 * 9];
        shape.for_each_run([15, 6, 0], |t, g, n| {
            for c in 0..n {
                seen[t + c] += 1;
                hits[g + c] += 1;
                let (ti, tj) = ((t + c) % 13, (t + c) / 13);
                assert_eq!(g + c, (15 + ti) % 20 + 20 * ((6 + tj) % 9));
            }
        });
        assert!(seen.iter().all(|&s| s == 1));
        assert_eq!(hits.iter().sum::<usize>(), 13 * 12);
    }

    /// The tile budget is half the L2 the CPU reports, within its bounds, and
    /// groups at least one transform and at most the batch.
    #[test]
    fn the_tile_budget_follows_the_l2_cache() {
        let budget = tile_budget();
        eprintln!("L2 {:?} bytes, tile budget {budget} bytes", l2_bytes());
        assert!((TILE_BUDGET..=MAX_TILE_BUDGET).contains(&budget));
        if let Some(l2) = l2_bytes() {
            assert_eq!(budget, (l2 / 2).clamp(TILE_BUDGET, MAX_TILE_BUDGET));
        }
        let axes = [16, 16, 16].map(|n| AxisBins::new(64, n).unwrap());
        let shape = TileShape::new(&axes, 7, 16);
        let bytes = shape.values() * 4;
        assert_eq!(
            transform_group::<f32>(&shape, 1000),
            (budget / bytes).max(1)
        );
        assert_eq!(transform_group::<f32>(&shape, 1), 1);
    }
}
