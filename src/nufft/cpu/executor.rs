//! The CPU executor: one plan's sorted points, kernel, tiles and FFT, and the
//! steps of the two types (module documentation of [`crate::nufft`]):
//!
//! - type 1: strengths gathered into sorted order → spread → FFT (sign s)
//!   → mode cells divided by ψ̂(k) = Π_a ψ̂_a(k_a);
//! - type 2: modes divided by ψ̂(k) placed on the fine grid → FFT (sign s)
//!   → interpolated → results scattered back to the caller's order.
//!
//! Transforms run in batches of as many as fit [`BATCH_BYTES`] of fine
//! grids; inside a batch, spreading and interpolation share each point's
//! kernel weights among the transforms whose tiles fit
//! [`super::tile::TILE_BUDGET`]. Every buffer is allocated before
//! the first output is written, so a failing call leaves the outputs as
//! they were.

use super::fft::{FineFft, Pruning};
use super::horner::HornerKernel;
use super::interpolate::{interpolate, InterpolationJob};
use super::sort::SortedPoints;
use super::spread::{spread, SpreadJob};
use super::tile::{kept_len, transform_group, TileBuffers, TileShape};
use crate::backend::cpu::fft::Direction;
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Error, Result};
use crate::nufft::deconvolution::kernel_transform;
use crate::nufft::{NufftExecutor, NufftSpec, NufftType, Sample};
use num_complex::{Complex, Complex32, Complex64};
use rayon::prelude::*;
use rustfft::FftNum;
use std::sync::{Arc, Mutex};

/// Fine-grid memory per batch of transforms (at least one transform runs):
/// about what the last-level cache holds, so that a batch's grids stay there
/// from spreading through the FFT (3D 64³ modes at σ = 2: 16 MB per grid).
pub const BATCH_BYTES: usize = 32 << 20;

/// The fine grids, the values in sorted point order and the tiles of one execution.
type Buffers<T> = (Vec<Complex<T>>, Vec<Complex<T>>, TileBuffers<T>);

/// One axis of the modes: the fine cell (k mod n_f) of mode index i and 1/ψ̂(k) there.
struct ModeAxis<T> {
    cells: Vec<usize>,
    factors: Vec<T>,
}

/// A NUFFT plan on the CPU in arithmetic T (f32 or f64).
pub struct CpuNufft<T: FftNum + Real> {
    spec: NufftSpec,
    npoints: usize,
    pool: Arc<rayon::ThreadPool>,
    kernel: HornerKernel<T>,
    shape: TileShape,
    sorted: SortedPoints<T>,
    fft: FineFft<T>,
    axes: [ModeAxis<T>; 3],
    /// Locks of the bins whose subproblems share a tile region (split bins).
    bin_locks: Vec<Mutex<()>>,
}

impl<T: FftNum + Real> CpuNufft<T> {
    /// Sorts the points (`points[a·npoints + j]`, finite) and prepares the
    /// kernel, the tiles and the FFT plans of `spec`.
    pub fn new(
        spec: &NufftSpec,
        points: &[f64],
        npoints: usize,
        pool: Arc<rayon::ThreadPool>,
    ) -> Result<CpuNufft<T>> {
        if points.len() < spec.modes.ndims * npoints {
            return Err(Error::internal("NUFFT points shorter than ndims x npoints"));
        }
        // rustfft's planner and the per-axis tables allocate infallibly: make
        // sure a fine grid and 4 axis-long tables fit first (OutOfMemory, not an abort).
        let longest = spec.fine.iter().copied().max().unwrap_or(1);
        drop(try_vec(
            spec.fine_total().saturating_add(4 * longest),
            Complex::new(T::default(), T::default()),
            "NUFFT fine grid",
        )?);
        let lanes = super::lanes(spec.kernel.width);
        let kernel = HornerKernel::new(&spec.kernel, lanes);
        let sorted = pool.install(|| SortedPoints::new(spec, points, npoints))?;
        let shape = TileShape::new(&sorted.axes, spec.kernel.width, lanes);
        let axes = [0, 1, 2].map(|a| {
            let (n, f) = (spec.modes.sizes[a], spec.fine[a]);
            let first = spec.modes.first(a);
            ModeAxis {
                cells: (0..n as i64)
                    .map(|i| (first + i).rem_euclid(f as i64) as usize)
                    .collect(),
                factors: kernel_transform(&spec.kernel, n, f)
                    .into_iter()
                    .map(|p| <T as Real>::from_f64(1.0 / p))
                    .collect(),
            }
        });
        let mut bin_locks = Vec::new();
        bin_locks
            .try_reserve_exact(sorted.bins)
            .map_err(|_| Error::out_of_memory("could not allocate the NUFFT bin locks"))?;
        bin_locks.extend((0..sorted.bins).map(|_| Mutex::new(())));
        Ok(CpuNufft {
            spec: spec.clone(),
            npoints,
            fft: FineFft::new(spec.fine, spec.modes.sizes),
            pool,
            kernel,
            shape,
            sorted,
            axes,
            bin_locks,
        })
    }

    fn direction(&self) -> Direction {
        if self.spec.sign > 0 {
            Direction::Inverse
        } else {
            Direction::Forward
        }
    }

    /// Transforms per batch.
    fn batch(&self) -> usize {
        let bytes = self.spec.fine_total() * std::mem::size_of::<Complex<T>>();
        (BATCH_BYTES / bytes.max(1)).clamp(1, self.spec.transforms)
    }

    /// Buffers of one execution: fine grids, sorted point values, tiles.
    fn buffers(&self, batch: usize) -> Result<Buffers<T>> {
        let zero = Complex::new(T::default(), T::default());
        let cells = self.spec.fine_total();
        let grids = try_vec(cells * batch, zero, "NUFFT fine grids (batch x fine grid)")?;
        let values = try_vec(
            self.npoints * batch,
            zero,
            "NUFFT sorted values (batch x npoints)",
        )?;
        let group = transform_group::<T>(&self.shape, batch);
        // Each point's kernel weights kept across transform groups.
        let kept = kept_len(
            self.sorted.largest_subproblem(),
            self.shape.lanes,
            batch.div_ceil(group),
        );
        let tiles = TileBuffers::new(
            self.shape.values() * group + kept,
            self.pool.current_num_threads(),
        )?;
        Ok((grids, values, tiles))
    }

    /// Type 1: `strengths` (transforms × M) → `modes` (transforms × Π n_a).
    fn type1<D: Sample>(&self, strengths: &[D], modes: &mut [D]) -> Result<()> {
        let m = self.npoints;
        let cells = self.spec.fine_total();
        let total = self.spec.modes.total();
        let batch = self.batch();
        let (mut grids, mut sorted_values, tiles) = self.buffers(batch)?;
        let zero = Complex::new(T::default(), T::default());
        for first in (0..self.spec.transforms).step_by(batch) {
            let nb = batch.min(self.spec.transforms - first);
            let values = &mut sorted_values[..m * nb];
            if nb > 0 && m > 0 {
                values
                    .par_chunks_mut(nb)
                    .zip(self.sorted.order.par_iter())
                    .for_each(|(row, &j)| {
                        for (t, v) in row.iter_mut().enumerate() {
                            *v = strengths[(first + t) * m + j].widen();
                        }
                    });
            }
            let grids = &mut grids[..cells * nb];
            grids.par_iter_mut().for_each(|g| *g = zero);
            let job = SpreadJob {
                kernel: &self.kernel,
                shape: self.shape,
                placed: &self.sorted.placed,
                strengths: values,
                batch: nb,
            };
            spread(&job, &self.sorted, &tiles, &self.bin_locks, grids)?;
            for grid in grids.chunks_exact_mut(cells) {
                self.fft
                    .process(grid, self.direction(), Pruning::KeepModes)?;
            }
            let out = &mut modes[first * total..(first + nb) * total];
            self.read_modes(grids, out);
        }
        Ok(())
    }

    /// Type 2: `modes` (transforms × Π n_a) → `values` (transforms × M).
    fn type2<D: Sample>(&self, modes: &[D], values: &mut [D]) -> Result<()> {
        let m = self.npoints;
        let cells = self.spec.fine_total();
        let total = self.spec.modes.total();
        let batch = self.batch();
        let (mut grids, mut sorted_values, tiles) = self.buffers(batch)?;
        for first in (0..self.spec.transforms).step_by(batch) {
            let nb = batch.min(self.spec.transforms - first);
            let grids = &mut grids[..cells * nb];
            self.place_modes(&modes[first * total..(first + nb) * total], grids);
            for grid in grids.chunks_exact_mut(cells) {
                self.fft
                    .process(grid, self.direction(), Pruning::FromModes)?;
            }
            let job = InterpolationJob {
                kernel: &self.kernel,
                shape: self.shape,
                placed: &self.sorted.placed,
                batch: nb,
            };
            let results = &mut sorted_values[..m * nb];
            interpolate(&job, &self.sorted, &tiles, grids, results)?;
            let results = &*results;
            for (t, out) in values[first * m..(first + nb) * m]
                .chunks_exact_mut(m.max(1))
                .enumerate()
            {
                out.par_iter_mut()
                    .zip(self.sorted.rank.par_iter())
                    .for_each(|(v, &s)| *v = D::narrow(results[s * nb + t]));
            }
        }
        Ok(())
    }

    /// out (nb × Π n_a) = the mode cells of the transformed grids divided by ψ̂.
    fn read_modes<D: Sample>(&self, grids: &[Complex<T>], out: &mut [D]) {
        let [n0, n1, n2] = self.spec.modes.sizes;
        let [f0, f1, _] = self.spec.fine;
        let cells = self.spec.fine_total();
        let [a0, a1, a2] = &self.axes;
        out.par_chunks_mut(n0).enumerate().for_each(|(row, out)| {
            let (i1, i2, t) = (row % n1, (row / n1) % n2, row / (n1 * n2));
            let grid = &grids[t * cells..(t + 1) * cells];
            let offset = f0 * (a1.cells[i1] + f1 * a2.cells[i2]);
            let scale = a1.factors[i1] * a2.factors[i2];
            for ((o, &c), &f) in out.iter_mut().zip(&a0.cells).zip(&a0.factors) {
                let g = grid[offset + c];
                let s = f * scale;
                *o = D::narrow(Complex::new(g.re * s, g.im * s));
            }
        });
    }

    /// The mode cells of the grids (nb × n_f) = modes divided by ψ̂ (the rest is
    /// never read: the pruned FFT zero-fills it).
    fn place_modes<D: Sample>(&self, modes: &[D], grids: &mut [Complex<T>]) {
        let [n0, n1, n2] = self.spec.modes.sizes;
        let [f0, f1, _] = self.spec.fine;
        let cells = self.spec.fine_total();
        let [a0, a1, a2] = &self.axes;
        grids
            .par_chunks_mut(cells)
            .enumerate()
            .for_each(|(t, grid)| {
                let modes = &modes[t * n0 * n1 * n2..(t + 1) * n0 * n1 * n2];
                for (row, input) in modes.chunks_exact(n0).enumerate() {
                    let (i1, i2) = (row % n1, row / n1);
                    let offset = f0 * (a1.cells[i1] + f1 * a2.cells[i2]);
                    let scale = a1.factors[i1] * a2.factors[i2];
                    for ((v, &c), &f) in input.iter().zip(&a0.cells).zip(&a0.factors) {
                        let v: Complex<T> = v.widen();
                        let s = f * scale;
                        grid[offset + c] = Complex::new(v.re * s, v.im * s);
                    }
                }
            });
    }

    fn run<D: Sample>(&self, nonuniform: &mut [D], grid: &mut [D]) -> Result<()> {
        let t = self.spec.transforms;
        if nonuniform.len() != t * self.npoints || grid.len() != t * self.spec.modes.total() {
            return Err(Error::internal(
                "NUFFT executor called with wrongly sized arrays",
            ));
        }
        self.pool.install(|| match self.spec.kind {
            NufftType::One => self.type1(nonuniform, grid),
            NufftType::Two => self.type2(grid, nonuniform),
        })
    }
}

impl<T: FftNum + Real> NufftExecutor for CpuNufft<T> {
    fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()> {
        self.run(nonuniform, grid)
    }

    fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()> {
        self.run(nonuniform, grid)
    }

    fn backend_name(&self) -> String {
        "cpu".into()
    }
}
