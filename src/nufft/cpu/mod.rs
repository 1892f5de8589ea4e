//! The CPU executor of the NUFFT (FAST-PATH.md §2): bin-sorted points
//! ([`sort`]), spreading by subproblems into private tiles ([`spread`],
//! [`tile`]), the pruned FFT of the fine grid ([`fft`]), interpolation from
//! the same tiles ([`interpolate`]), and the deconvolution
//! ([`executor`]); the kernel is evaluated by Horner's rule ([`horner`]).
//! float32 and float64 arithmetic share one generic implementation; the
//! inner loops are compiled for AVX-512, AVX2+FMA and a portable baseline
//! and picked at run time like the phase-sum kernel's.

pub mod executor;
pub mod fft;
pub mod horner;
pub mod interpolate;
pub mod matrix;
pub mod sort;
pub mod spread;
pub mod tile;
pub mod tile_sum;

pub use executor::CpuNufft;

use super::{NufftExecutor, NufftSpec};
use crate::error::Result;
use std::sync::Arc;

/// Float32 plans asked for less than this compute in float64 (their data stay
/// float32): float32 rounding in spreading and the FFTs alone reaches about
/// 1e-6 (measured 1.2e-6 at ε = 1e-6 for 3D modes with 2500 clustered points).
pub const FLOAT32_ARITHMETIC_TOLERANCE: f64 = 1e-5;

/// Whether a plan of `spec` computes in float64.
pub fn float64_arithmetic(spec: &NufftSpec) -> bool {
    spec.double || spec.tolerance < FLOAT32_ARITHMETIC_TOLERANCE
}

/// Bytes of one real number in a plan of `spec` ([`float64_arithmetic`]).
pub fn real_bytes(spec: &NufftSpec) -> usize {
    if float64_arithmetic(spec) {
        8
    } else {
        4
    }
}

/// The CPU executor for `spec` and its points (`points[a·npoints + j]`,
/// finite, checked by the caller), running on `pool`.
pub fn build(
    spec: &NufftSpec,
    points: &[f64],
    npoints: usize,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn NufftExecutor>> {
    Ok(if float64_arithmetic(spec) {
        Box::new(CpuNufft::<f64>::new(spec, points, npoints, pool)?)
    } else {
        Box::new(CpuNufft::<f32>::new(spec, points, npoints, pool)?)
    })
}

/// An upper estimate of the heap bytes a CPU plan of `spec` with `npoints`
/// points holds (sorted points, bins, locks) plus one execution's buffers
/// (a batch of fine grids and sorted values, per-thread tiles) on `threads`
/// threads, or the fine grid that creation checks, whichever is larger.
pub fn memory_bytes(spec: &NufftSpec, npoints: usize, threads: usize) -> u64 {
    let real = real_bytes(spec) as u64;
    let complex = 2 * real;
    let (m, fine) = (npoints as u64, spec.fine_total() as u64);
    // Per point: its bin, two placements (3 reals, 3 cell indices), order and rank.
    let plan = m.saturating_mul(4 + 2 * (3 * real + 12) + 16) + fine.saturating_mul(4 + 8);
    let grid = fine.saturating_mul(complex);
    let batch = executor::transforms_per_batch(spec) as u64;
    // A thread's tiles (tile::TileBuffers): a tile spans the widest bin of
    // each spread axis (sort::AxisBins) plus the kernel's reach (x: the row
    // padded to the vector width), and transforms are grouped as far as
    // tile::tile_budget allows (tile::transform_group), at least one.
    let spread = spec.fine.iter().filter(|&&f| f > 1).count();
    let target = sort::target_width(spread);
    let half_lanes = lanes(spec.kernel.width) / 2;
    let tile = (0..3).fold(complex, |bytes, a| {
        let f = spec.fine[a];
        let bin = f.div_ceil((f / target).max(1));
        let cells = match (f > 1, a) {
            (true, 0) => bin + half_lanes - 1,
            (true, _) => bin + spec.kernel.width - 1,
            (false, 0) => half_lanes,
            (false, _) => 1,
        };
        bytes.saturating_mul(cells as u64)
    });
    let group = (tile::tile_budget() as u64 / tile.max(1)).clamp(1, batch);
    // With several transform groups, each task keeps its points' kernel
    // weights (tile::PointWeights): 3 axes × lanes per point of a subproblem.
    let points = m.min(sort::MAX_SUBPROBLEM as u64) as usize;
    let groups = batch.div_ceil(group) as usize;
    let kept = tile::kept_len(points, lanes(spec.kernel.width), groups) as u64 * real;
    let tiles = group.saturating_mul(tile).saturating_add(kept);
    let execution = batch
        .saturating_mul(grid.saturating_add(m.saturating_mul(complex)))
        .saturating_add(tiles.saturating_mul(threads.max(1) as u64));
    plan.saturating_add(execution.max(grid))
}

/// Defines `$dispatch::<T>(lanes, args…)`, which runs the `#[inline(always)]`
/// generic kernel `$kernel::<T, L, FMA, WIDE>(args…)` for L = `lanes` ∈ {8,
/// 16, 24, 32} compiled for the widest instruction set of this CPU
/// ([`crate::backend::cpu::kernel::isa`]); WIDE is its vector width in bytes
/// (64 AVX-512, 32 AVX2, 0 neither), for kernels with explicit vectors
/// ([`tile_sum`]).
macro_rules! isa_kernel {
    ($dispatch:ident => $kernel:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<T: Real, const L: usize>($($arg: $ty),*) {
            $kernel::<T, L, true, 64>($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T: Real, const L: usize>($($arg: $ty),*) {
            $kernel::<T, L, true, 32>($($arg),*)
        }

        /// The kernel for `lanes` values per row on the widest instruction set.
        fn $dispatch<T: Real>(lanes: usize, $($arg: $ty),*) {
            use crate::backend::cpu::kernel::{isa, Isa};
            match (isa(), lanes) {
                // SAFETY: the CPU has these features (checked at run time in `isa`).
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx512, 8) => unsafe { avx512::<T, 8>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx512, 16) => unsafe { avx512::<T, 16>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx512, 24) => unsafe { avx512::<T, 24>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx512, _) => unsafe { avx512::<T, 32>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx2, 8) => unsafe { avx2::<T, 8>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx2, 16) => unsafe { avx2::<T, 16>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx2, 24) => unsafe { avx2::<T, 24>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx2, _) => unsafe { avx2::<T, 32>($($arg),*) },
                (_, 8) => $kernel::<T, 8, false, 0>($($arg),*),
                (_, 16) => $kernel::<T, 16, false, 0>($($arg),*),
                (_, 24) => $kernel::<T, 24, false, 0>($($arg),*),
                _ => $kernel::<T, 32, false, 0>($($arg),*),
            }
        }
    };
}
pub(crate) use isa_kernel;

/// T values per kernel row for width w: 2 × w rounded up to a multiple of 4
/// (8, 16, 24 or 32; one AVX-512 register of float32 for w = 5…8).
pub fn lanes(width: usize) -> usize {
    2 * width.div_ceil(4).clamp(1, 4) * 4
}
