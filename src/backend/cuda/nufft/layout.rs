//! The shape of a CUDA NUFFT plan, host-side and testable without a GPU:
//! which axes are spread along, the bins and their shared-memory tiles, and
//! which spreading/interpolation method runs.
//!
//! Spread axes are the transform's axes whose fine grid has more than one
//! point (a singleton axis has the one mode k = 0, e^{i·0·x} = 1, and is left
//! out without changing any linear index). A transform with no such axis
//! (every n_a = 1) is spread along one axis of 2w-ish cells with every point
//! at 0, which gives f_0 = Σ_j c_j as it must.
//!
//! Bins: 1024 cells in 1D, 32×32 in 2D; in 3D 8×8×16 for spreading with w ≤ 6
//! and 16×16×4 for interpolation (measured, [`Layout::new`]), else 16×16×b with
//! the deepest b ≤ 16 whose tile (bin + w cells per axis) fits
//! [`SHARED_BUDGET`] bytes (8×8×b, then 4×4×b for wide double kernels); each
//! extent at most the fine grid's.

use crate::error::Result;
use crate::nufft::cpu::FLOAT32_ARITHMETIC_TOLERANCE;
use crate::nufft::params::Upsampling;
use crate::nufft::{NufftSpec, NufftType};

/// Shared memory a tile may take (bytes): up to three blocks per Hopper SM.
pub(crate) const SHARED_BUDGET: usize = 64 * 1024;
/// Threads per block of the tile (SM) kernels.
pub(crate) const SM_THREADS: usize = 256;
/// Points per subproblem at most (one block each).
pub(crate) const MAX_SUBPROBLEM: usize = 1024;

/// The smallest tolerance of a float plan whose spreading tiles add up in
/// fixed point. Each add rounds to S·2⁻³¹ (S the subproblem's Σ|c_j|), noise
/// that the deconvolution lifts most at σ = 1.25: measured on the fast path's
/// ho3d-96 trajectory (dense subproblems of up to 1024 points, H100,
/// 2026-11-26), the relative l2 error of Eᴴ went from 1.78e-4 to 1.84e-4 at
/// w = 7 (a 9e-4 NUFFT) and from 1.14e-4 to 2.08e-4 at w = 8 (5e-4).
pub(crate) const FIXED_POINT_TOLERANCE: f64 = 5e-4;

/// Bytes of shared memory the output-driven kernel stages a batch of points
/// in (kernel values, strength and footprint start per point).
pub(crate) const BATCH_BUDGET: usize = 10 * 1024;

/// Spreading or interpolation by subproblems in shared-memory tiles, or one
/// thread per sorted point straight on the fine grid (cuFINUFFT's "SM" and
/// "GM-sort"); for spreading also tiles filled output-driven (the block's
/// threads share out each staged point's footprint by cells,
/// kernels/nufft_spread_out.cu; cuFINUFFT's method 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Tiles,
    Points,
    Output,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// The spec's axes spread along, in order (empty: none, see the module doc).
    pub axes: Vec<usize>,
    /// Spread dimensions, 1..=3.
    pub dim: usize,
    /// n_f and n per spread axis, 1 beyond `dim`.
    pub fine: [usize; 3],
    pub modes: [usize; 3],
    /// Fine cells per bin and bins per axis, 1 beyond `dim`.
    pub bins: [usize; 3],
    pub nbins: [usize; 3],
    pub width: usize,
    /// Bytes of one complex value in the arithmetic's precision.
    pub complex_bytes: usize,
    /// Whether a tile fits in [`SHARED_BUDGET`] (else only [`Method::Points`]).
    pub tiles_fit: bool,
    /// Float32 data with the footprint offsets and kernel values in float64
    /// (float32 type-1 plans asked for less than [`FLOAT32_ARITHMETIC_TOLERANCE`];
    /// kernels/nufft_common.cu `PRECISE`). Spreading sums many points into
    /// each mode, so clustered points add their kernel values' float errors
    /// coherently; an interpolated value carries only its own point's error
    /// (H100, 2026-11-24, 3000 points of which 2500 within 1e-3 rad, 1e-6:
    /// type 1 1.2e-6 in float, 3.5–5.4e-7 precise; type 2 4.2–8.5e-7 in
    /// float), and float64 kernel values cost 256³ type 2 9% (10.4 vs 9.5 ms).
    pub precise: bool,
    /// The output-driven spreading adds its tiles in 32-bit fixed point
    /// (kernels/nufft_spread_out.cu `FIXED_POINT`): float plans asked for
    /// [`FIXED_POINT_TOLERANCE`] or more; `HORECON_CUDA_NUFFT_FIXED=0` turns it off.
    pub fixed_point: bool,
}

impl Layout {
    pub fn new(spec: &NufftSpec) -> Result<Layout> {
        let width = spec.kernel.width;
        let axes: Vec<usize> = (0..3).filter(|&a| spec.fine[a] > 1).collect();
        let mut fine = [1usize; 3];
        let mut modes = [1usize; 3];
        if axes.is_empty() {
            fine[0] = spec.kernel.fine_size(2)?;
        } else {
            for (i, &a) in axes.iter().enumerate() {
                fine[i] = spec.fine[a];
                modes[i] = spec.modes.sizes[a];
            }
        }
        let dim = axes.len().max(1);
        let complex_bytes = if spec.double { 16 } else { 8 };
        let tile_bytes = |bins: [usize; 3]| -> usize {
            (0..dim).map(|a| bins[a] + width).product::<usize>() * complex_bytes
        };
        let clamp = |mut bins: [usize; 3]| {
            for a in 0..3 {
                bins[a] = if a < dim {
                    bins[a].min(fine[a]).max(1)
                } else {
                    1
                };
            }
            bins
        };
        let mut bins = match dim {
            1 => clamp([1024, 1, 1]),
            2 => clamp([32, 32, 1]),
            _ => {
                // Measured shapes first (H100, 2026-11-24, bench_cuda_nufft,
                // execute ms against the search's 16×16×b): type 1 with w ≤ 6
                // in 8×8×16 bins, twice the output-driven blocks per SM (96³ ×
                // 16 at 1e-3: 4.90 vs 5.22; 200×200×144 × 16: 35.7 vs 38.0;
                // at w = 8, 256³, 16×16×6 stays best: 13.8 vs 16.7); type 2 in
                // 16×16×4 bins (200×200×144: 25.8 vs 26.7; 96³: 3.36 vs 3.39;
                // 256³ tiles: 9.39 vs 9.50). The fast path's NUFFTs at 1e-3
                // (σ = 1.25, w = 7; H100, 2026-11-26, 208 transforms of 96³
                // modes at 221,184 points, ms against the search's 16×16×8 and
                // the type-2 entry's 16×16×4): type 1 in 12×12×6 (29.4 vs
                // 31.3; 200×200×144 × 32: 31.4 vs 33.2), type 2 in 12×12×8
                // (21.7 vs 24.4; 24.2 vs 25.6).
                let fast_path = width == 7 && spec.kernel.upsampling == Upsampling::OneQuarter;
                let measured = match spec.kind {
                    NufftType::One if width <= 6 => Some(clamp([8, 8, 16])),
                    NufftType::One if fast_path => Some(clamp([12, 12, 6])),
                    NufftType::One => None,
                    NufftType::Two if fast_path => Some(clamp([12, 12, 8])),
                    NufftType::Two => Some(clamp([16, 16, 4])),
                };
                let mut chosen = measured.filter(|&b| tile_bytes(b) <= SHARED_BUDGET);
                'search: for side in [16, 8, 4] {
                    if chosen.is_some() {
                        break;
                    }
                    for depth in (1..=16).rev() {
                        let b = clamp([side, side, depth]);
                        if tile_bytes(b) <= SHARED_BUDGET {
                            chosen = Some(b);
                            break 'search;
                        }
                    }
                }
                chosen.unwrap_or_else(|| clamp([4, 4, 1]))
            }
        };
        if let Some(knob) = std::env::var("HORECON_CUDA_NUFFT_BINS")
            .ok()
            .and_then(|v| parse_bins(&v))
        {
            bins = clamp(knob);
        }
        let tiles_fit = tile_bytes(bins) <= SHARED_BUDGET;
        let mut nbins = [1usize; 3];
        for a in 0..dim {
            nbins[a] = fine[a].div_ceil(bins[a]);
        }
        Ok(Layout {
            axes,
            dim,
            fine,
            modes,
            bins,
            nbins,
            width,
            complex_bytes,
            tiles_fit,
            precise: !spec.double
                && spec.kind == NufftType::One
                && spec.tolerance < FLOAT32_ARITHMETIC_TOLERANCE,
            fixed_point: !spec.double
                && spec.tolerance >= FIXED_POINT_TOLERANCE
                && crate::backend::cuda::memory::setting("HORECON_CUDA_NUFFT_FIXED") != Some(0),
        })
    }

    pub fn fine_total(&self) -> usize {
        self.fine.iter().product()
    }

    pub fn modes_total(&self) -> usize {
        self.modes.iter().product()
    }

    pub fn bins_total(&self) -> usize {
        self.nbins.iter().product()
    }

    /// Cells of one tile (bin + w per spread axis).
    pub fn tile_cells(&self) -> usize {
        (0..self.dim).map(|a| self.bins[a] + self.width).product()
    }

    /// Dynamic shared memory of the tile kernels (bytes).
    pub fn shared_bytes(&self) -> usize {
        self.tile_cells() * self.complex_bytes
    }

    /// Bytes of one stored footprint offset (float64 when precise).
    pub fn offset_bytes(&self) -> usize {
        if self.precise {
            8
        } else {
            self.complex_bytes / 2
        }
    }

    /// Points the output-driven kernel stages at a time (its SPREAD_BATCH):
    /// as many as [`BATCH_BUDGET`] holds at d·w kernel values, a complex
    /// strength and an int each, and at most 16 footprint rows (w^(d−1)
    /// cells, w in 1D) per thread of a block, a multiple of 32 in 32..=256
    /// (H100, 2026-11-24: a3d 64 → 14.4 ms, 32 → 15.9, 128 → 17.6; b96 96 →
    /// 5.57 ms, 128 → 5.35). `HORECON_CUDA_NUFFT_BATCH` overrides it, within
    /// the same range and 40 KiB (the kernel's arrays are static, ≤ 48 KiB).
    pub fn spread_batch(&self) -> usize {
        let real = self.complex_bytes / 2;
        let per_point = self.dim * self.width * real + self.complex_bytes + 4;
        let rows = if self.dim == 1 {
            self.width
        } else {
            self.width.pow(self.dim as u32 - 1)
        };
        let batch = crate::backend::cuda::memory::knob("HORECON_CUDA_NUFFT_BATCH").map_or(
            (BATCH_BUDGET / per_point).min(16 * SM_THREADS / rows),
            |b| b.min(40 * 1024 / per_point),
        );
        (batch / 32 * 32).clamp(32, 256)
    }

    /// Whether the output-driven kernel adds its tile to the fine grid two
    /// cells per (16-byte) atomic: float arithmetic and an even first fine
    /// axis; `HORECON_CUDA_NUFFT_PAIRS=0` turns it off.
    pub fn flush_pairs(&self, double: bool) -> bool {
        !double
            && self.fine[0] % 2 == 0
            && crate::backend::cuda::memory::setting("HORECON_CUDA_NUFFT_PAIRS") != Some(0)
    }

    /// The method for `points` points of which `busy_bins` bins hold some,
    /// spreading (type 1) or interpolating: tiles when they fit and the
    /// footprints a tile serves (w^d cells per point) outweigh the tile's own
    /// traffic (adding or loading its cells) — for interpolation by 3×, since
    /// reading the fine grid straight from L2 costs less than adding to it
    /// (H100, 2026-11-24: at 128 points per 16³ bin and w = 4, points 3.0 ms
    /// vs tiles 3.8 ms (96³ × 16 type 2), tiles 6.1 vs points 6.5 ms (type 1);
    /// at 152 points per 16²×8 bin and w = 7, tiles 7.8 vs 8.3 ms (256³ type 2)),
    /// else points. Spreading by tiles is output-driven (H100, 2026-11-24, type 1
    /// against the shared-atomic tiles: 256³/10⁷ points 14.4 vs 76.9 ms, 96³ × 16
    /// 5.57 vs 10.2, 200²×144 × 16 40.3 vs 70.2, 512² × 8 0.47 vs 0.69).
    /// `HORECON_CUDA_NUFFT_METHOD` = 1 (points), 2 (tiles) or
    /// 3 (output-driven tiles for spreading, tiles for interpolation)
    /// overrides it (tiles only where they fit).
    pub fn method(&self, points: usize, busy_bins: usize, spreading: bool) -> Method {
        if !self.tiles_fit {
            return Method::Points;
        }
        match crate::backend::cuda::memory::setting("HORECON_CUDA_NUFFT_METHOD") {
            Some(1) => return Method::Points,
            Some(2) => return Method::Tiles,
            Some(3) if spreading => return Method::Output,
            Some(3) => return Method::Tiles,
            _ => {}
        }
        let footprint = self.width.pow(self.dim as u32);
        let margin = if spreading { 1 } else { 3 };
        if points.saturating_mul(footprint)
            >= busy_bins
                .saturating_mul(self.tile_cells())
                .saturating_mul(margin)
        {
            if spreading {
                Method::Output
            } else {
                Method::Tiles
            }
        } else {
            Method::Points
        }
    }
}

/// "16x16x8" → [16, 16, 8] (missing axes 1).
fn parse_bins(text: &str) -> Option<[usize; 3]> {
    let mut bins = [1usize; 3];
    for (a, part) in text.split('x').enumerate() {
        if a >= 3 {
            return None;
        }
        bins[a] = part.trim().parse().ok().filter(|&b| b > 0)?;
    }
    Some(bins)
}

/// Subproblems of the sorted points from the bins' counts: for every bin
/// with points, runs of at most `max_points` consecutive sorted points, as
/// (bin, first sorted index, count); and the bins' starts (exclusive scan).
pub fn subproblems(counts: &[i32], max_points: usize) -> (Vec<i32>, Vec<[i32; 3]>) {
    let mut starts = Vec::with_capacity(counts.len());
    let mut list = Vec::new();
    let mut next = 0i64;
    for (bin, &count) in counts.iter().enumerate() {
        starts.push(next as i32);
        let count = count.max(0) as i64;
        let mut first = 0i64;
        while first < count {
            let n = (count - first).min(max_points as i64);
            list.push([bin as i32, (next + first) as i32, n as i32]);
            first += n;
        }
        next += count;
    }
    (starts, list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nufft::{Modes, NufftType, Upsampling};

    fn spec(sizes: &[i64], tolerance: f64, double: bool) -> NufftSpec {
        let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
        NufftSpec::new(
            NufftType::One,
            modes,
            1,
            tolerance,
            1,
            double,
            Some(Upsampling::Two),
        )
        .unwrap()
    }

    #[test]
    fn singleton_axes_are_not_spread() {
        let l = Layout::new(&spec(&[1, 9, 1], 1e-6, false)).unwrap();
        assert_eq!(l.axes, vec![1]);
        assert_eq!(l.dim, 1);
        assert_eq!(l.modes, [9, 1, 1]);
        assert_eq!(l.fine[1..], [1, 1]);
        assert!(l.bins[0] <= l.fine[0]);
        let l = Layout::new(&spec(&[1, 1, 1], 1e-3, false)).unwrap();
        assert!(l.axes.is_empty());
        assert_eq!((l.dim, l.modes_total()), (1, 1));
        assert!(l.fine[0] >= 2 * l.width);
    }

    #[test]
    fn tiles_fit_the_budget() {
        for (sizes, tol, double) in [
            (vec![256i64, 256, 256], 1e-6, false),
            (vec![96, 96, 96], 1e-3, false),
            (vec![200, 200, 144], 1e-3, false),
            (vec![64, 64, 64], 1e-7, true),
            (vec![32, 32, 32], 1e-12, true),
            (vec![512, 512], 1e-4, false),
            (vec![1000], 1e-12, true),
        ] {
            let l = Layout::new(&spec(&sizes, tol, double)).unwrap();
            if l.tiles_fit {
                assert!(l.shared_bytes() <= SHARED_BUDGET, "{sizes:?}: {l:?}");
            }
            for a in 0..l.dim {
                assert!(l.nbins[a] * l.bins[a] >= l.fine[a]);
                assert!(l.bins[a] <= l.fine[a]);
            }
        }
        // The benchmark's 3D case keeps shared-memory tiles of useful size.
        let l = Layout::new(&spec(&[256, 256, 256], 1e-6, false)).unwrap();
        assert!(l.tiles_fit && l.bins.iter().all(|&b| b >= 4), "{l:?}");
    }

    #[test]
    fn measured_bins_and_precise_offsets() {
        let with = |kind, sizes: &[i64], tol, double| {
            let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
            let s = NufftSpec::new(kind, modes, 1, tol, 1, double, Some(Upsampling::Two)).unwrap();
            Layout::new(&s).unwrap()
        };
        let cube = [96i64, 96, 96];
        assert_eq!(with(NufftType::One, &cube, 1e-3, false).bins, [8, 8, 16]);
        assert_eq!(with(NufftType::Two, &cube, 1e-3, false).bins, [16, 16, 4]);
        assert_eq!(with(NufftType::One, &cube, 1e-6, false).bins, [16, 16, 6]);
        // Wide double kernels fall back to the search (16×16×4 does not fit).
        assert_ne!(with(NufftType::Two, &cube, 1e-9, true).bins, [16, 16, 4]);
        for (kind, tol, double, precise) in [
            (NufftType::One, 1e-6, false, true),
            (NufftType::Two, 1e-6, false, false),
            (NufftType::One, 9e-6, false, true),
            (NufftType::One, 1e-5, false, false),
            (NufftType::Two, 1e-9, true, false),
        ] {
            let l = with(kind, &[40, 33], tol, double);
            assert_eq!(l.precise, precise, "{kind:?} {tol:e}");
            assert_eq!(l.offset_bytes(), if precise || double { 8 } else { 4 });
        }
        // Fixed-point tiles: float plans asked for FIXED_POINT_TOLERANCE or more.
        for (tol, double, fixed) in [
            (1e-3, false, true),
            (FIXED_POINT_TOLERANCE, false, true),
            (4.9e-4, false, false),
            (1e-6, false, false),
            (1e-2, true, false),
        ] {
            let l = with(NufftType::One, &cube, tol, double);
            assert_eq!(l.fixed_point, fixed, "{tol:e} double {double}");
        }
    }

    #[test]
    fn methods_follow_the_measured_crossovers() {
        let interpolation = |sizes: &[i64], tol| {
            let modes = Modes::new(3, sizes).unwrap();
            let s = NufftSpec::new(
                NufftType::Two,
                modes,
                1,
                tol,
                1,
                false,
                Some(Upsampling::Two),
            );
            Layout::new(&s.unwrap()).unwrap()
        };
        let l = Layout::new(&spec(&[96, 96, 96], 1e-3, false)).unwrap();
        assert_eq!(l.method(221_184, l.bins_total(), true), Method::Output);
        let l = interpolation(&[96, 96, 96], 1e-3);
        assert_eq!(l.method(221_184, l.bins_total(), false), Method::Points);
        let l = interpolation(&[256, 256, 256], 1e-6);
        assert_eq!(l.method(10_000_000, l.bins_total(), false), Method::Tiles);
        let l = Layout::new(&spec(&[256, 256, 256], 1e-6, false)).unwrap();
        assert_eq!(l.method(1000, 1000, true), Method::Points);
    }

    #[test]
    fn spread_batches_fit_their_budget() {
        for (sizes, tol, double) in [
            (vec![256i64, 256, 256], 1e-6, false),
            (vec![96, 96, 96], 1e-3, false),
            (vec![512, 512], 1e-4, false),
            (vec![32, 32, 32], 1e-12, true),
            (vec![1000], 1e-12, true),
            (vec![5], 1e-1, false),
        ] {
            let l = Layout::new(&spec(&sizes, tol, double)).unwrap();
            let b = l.spread_batch();
            assert!(b % 32 == 0 && (32..=256).contains(&b), "{sizes:?}: {b}");
            let real = l.complex_bytes / 2;
            let bytes = b * (l.dim * l.width * real + l.complex_bytes + 4);
            assert!(bytes <= BATCH_BUDGET || b == 32, "{sizes:?}: {bytes}");
        }
    }

    #[test]
    fn subproblems_cover_every_point_once() {
        let counts = [0, 5, 0, 2048, 1, 1025];
        let (starts, list) = subproblems(&counts, 1024);
        assert_eq!(starts, vec![0, 0, 5, 5, 2053, 2054]);
        let mut covered = 0;
        for &[bin, first, n] in &list {
            assert!((1..=1024).contains(&n));
            assert!(first >= starts[bin as usize]);
            assert!(first + n <= starts[bin as usize] + counts[bin as usize]);
            assert_eq!(first, covered);
            covered += n;
        }
        assert_eq!(covered, 3079);
        assert_eq!(list.len(), 1 + 2 + 1 + 2);
    }
}
