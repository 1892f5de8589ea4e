//! The CPU executor: one plan's sorted points, kernel, tiles and FFT, and the
//! steps of the two types (module documentation of [`crate::nufft`]):
//!
//! - type 1: strengths gathered into sorted order → spread → FFT (sign s)
//!   → mode cells divided by ψ̂(k) = Π_a ψ̂_a(k_a);
//! - type 2: modes divided by ψ̂(k) placed on the fine grid → FFT (sign s)
//!   → interpolated → results scattered back to the caller's order.
//!
//! Transforms run in batches of as many as fit [`BATCH_BYTES`] of fine
//! grids; inside a batch,
//! spreading and interpolation share each point's kernel weights among the
//! transforms whose tiles fit [`super::tile::tile_budget`]. Every buffer
//! is allocated before the first output is written, so a failing call
//! leaves the outputs as they were. Streamed calls
//! ([`NufftExecutor::execute_each`]) take each transform's input as a batch
//! needs it and hand its output over as soon as it is done: no array of
//! every transform's input or output exists.

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
use crate::nufft::{EachInput, EachOutput, NufftExecutor, NufftSpec, NufftType, Sample};
use num_complex::{Complex, Complex32, Complex64};
use rayon::prelude::*;
use rustfft::FftNum;
use std::sync::{Arc, Mutex};

/// Fine-grid memory per batch of transforms (at least one transform runs):
/// about what the last-level cache holds, so that a batch's grids stay there
/// from spreading through the FFT (3D 64³ modes at σ = 2: 16 MB per grid).
pub const BATCH_BYTES: usize = 32 << 20;

/// Transforms per batch of a plan of `spec`: as many as [`BATCH_BYTES`] of
/// fine grids hold.
pub fn transforms_per_batch(spec: &NufftSpec) -> usize {
    let bytes = spec
        .fine_total()
        .saturating_mul(2 * super::real_bytes(spec));
    (BATCH_BYTES / bytes.max(1)).clamp(1, spec.transforms.max(1))
}

/// The fine grids, the values in sorted point order and the tiles of one execution.
type Buffers<T> = (Vec<Complex<T>>, Vec<Complex<T>>, TileBuffers<T>);

/// A call's input: every transform's in one array, or each transform's
/// written by the caller when it is needed ([`EachInput`]).
enum Input<'a, D> {
    Whole(&'a [D]),
    Each(&'a EachInput<'a>),
}

/// A call's output: one array for every transform, or each transform's
/// handed to the caller ([`EachOutput`]).
enum Output<'a, 'b, D> {
    Whole(&'a mut [D]),
    Each(&'a mut EachOutput<'b>),
}

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

    /// Transforms per batch ([`transforms_per_batch`]).
    fn batch(&self) -> usize {
        transforms_per_batch(&self.spec)
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
    fn type1<D: Sample>(
        &self,
        strengths: Input<'_, D>,
        mut modes: Output<'_, '_, D>,
    ) -> Result<()> {
        let m = self.npoints;
        let cells = self.spec.fine_total();
        let total = self.spec.modes.total();
        let batch = self.batch();
        let (mut grids, mut sorted_values, tiles) = self.buffers(batch)?;
        let zero32 = Complex32::new(0.0, 0.0);
        // A batch's strengths (the caller's order) and one transform's modes, when streamed.
        let mut given = match strengths {
            Input::Each(_) => try_vec(m * batch, zero32, "NUFFT strengths (batch x M)")?,
            Input::Whole(_) => Vec::new(),
        };
        let mut taken = match modes {
            Output::Each(_) => try_vec(total, zero32, "NUFFT modes of one transform")?,
            Output::Whole(_) => Vec::new(),
        };
        let zero = Complex::new(T::default(), T::default());
        for first in (0..self.spec.transforms).step_by(batch) {
            let nb = batch.min(self.spec.transforms - first);
            let values = &mut sorted_values[..m * nb];
            if nb > 0 && m > 0 {
                match strengths {
                    Input::Whole(all) => self.sort_values(all, first, values),
                    Input::Each(write) => {
                        let given = &mut given[..m * nb];
                        given
                            .par_chunks_mut(m)
                            .enumerate()
                            .for_each(|(t, out)| write(first + t, out));
                        self.sort_values(given, 0, values)
                    }
                }
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
            match &mut modes {
                Output::Whole(all) => {
                    self.read_modes(grids, &mut all[first * total..(first + nb) * total])
                }
                Output::Each(take) => {
                    for (t, grid) in grids.chunks_exact(cells).enumerate() {
                        self.read_modes(grid, &mut taken);
                        take(first + t, &taken);
                    }
                }
            }
        }
        Ok(())
    }

    /// Type 2: `modes` (transforms × Π n_a) → `values` (transforms × M).
    fn type2<D: Sample>(&self, modes: Input<'_, D>, mut values: Output<'_, '_, D>) -> Result<()> {
        let m = self.npoints;
        let cells = self.spec.fine_total();
        let total = self.spec.modes.total();
        let batch = self.batch();
        let (mut grids, mut sorted_values, tiles) = self.buffers(batch)?;
        let zero32 = Complex32::new(0.0, 0.0);
        let mut taken = match values {
            Output::Each(_) => try_vec(m, zero32, "NUFFT values of one transform (M)")?,
            Output::Whole(_) => Vec::new(),
        };
        // Each thread's modes of one transform, when streamed.
        let given = match modes {
            Input::Each(_) => Some(TileBuffers::new(total, self.pool.current_num_threads())?),
            Input::Whole(_) => None,
        };
        for first in (0..self.spec.transforms).step_by(batch) {
            let nb = batch.min(self.spec.transforms - first);
            let grids = &mut grids[..cells * nb];
            match modes {
                Input::Whole(all) => grids
                    .par_chunks_mut(cells)
                    .zip(all[first * total..(first + nb) * total].par_chunks(total.max(1)))
                    .for_each(|(grid, modes)| self.place_modes(modes, grid)),
                Input::Each(write) => {
                    let given = given.as_ref().ok_or_else(|| {
                        Error::internal("NUFFT mode buffers missing for a streamed input")
                    })?;
                    grids
                        .par_chunks_mut(cells)
                        .enumerate()
                        .try_for_each(|(t, grid)| {
                            given.with(|modes| {
                                write(first + t, modes);
                                self.place_modes(modes, grid)
                            })
                        })?
                }
            }
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
            for t in 0..nb {
                match &mut values {
                    Output::Whole(all) => self.unsort(
                        results,
                        nb,
                        t,
                        &mut all[(first + t) * m..(first + t + 1) * m],
                    ),
                    Output::Each(take) => {
                        self.unsort(results, nb, t, &mut taken);
                        take(first + t, &taken);
                    }
                }
            }
        }
        Ok(())
    }

    /// `values` (sorted points × nb) = transforms base.. of `source`
    /// (transforms × M, the caller's order).
    fn sort_values<S: Sample>(&self, source: &[S], base: usize, values: &mut [Complex<T>]) {
        let m = self.npoints;
        let nb = values.len() / m.max(1);
        values
            .par_chunks_mut(nb.max(1))
            .zip(self.sorted.order.par_iter())
            .for_each(|(row, &j)| {
                for (t, v) in row.iter_mut().enumerate() {
                    *v = source[(base + t) * m + j].widen();
                }
            });
    }

    /// out (M, the caller's order) = transform t of `results` (sorted points × nb).
    fn unsort<D: Sample>(&self, results: &[Complex<T>], nb: usize, t: usize, out: &mut [D]) {
        out.par_iter_mut()
            .zip(self.sorted.rank.par_iter())
            .for_each(|(v, &s)| *v = D::narrow(results[s * nb + t]));
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

    /// The mode cells of one grid (n_f cells) = `modes` (Π n_a) divided by ψ̂
    /// (the rest is never read: the pruned FFT zero-fills it).
    fn place_modes<D: Sample>(&self, modes: &[D], grid: &mut [Complex<T>]) {
        let [n0, n1, _] = self.spec.modes.sizes;
        let [f0, f1, _] = self.spec.fine;
        let [a0, a1, a2] = &self.axes;
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
    }

    fn run<D: Sample>(&self, nonuniform: &mut [D], grid: &mut [D]) -> Result<()> {
        let t = self.spec.transforms;
        if nonuniform.len() != t * self.npoints || grid.len() != t * self.spec.modes.total() {
            return Err(Error::internal(
                "NUFFT executor called with wrongly sized arrays",
            ));
        }
        self.pool.install(|| match self.spec.kind {
            NufftType::One => self.type1(Input::Whole(nonuniform), Output::Whole(grid)),
            NufftType::Two => self.type2(Input::Whole(grid), Output::Whole(nonuniform)),
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

    fn execute_each(
        &self,
        input: &EachInput<'_>,
        output: &mut EachOutput<'_>,
    ) -> Option<Result<()>> {
        Some(self.pool.install(|| match self.spec.kind {
            NufftType::One => self.type1::<Complex32>(Input::Each(input), Output::Each(output)),
            NufftType::Two => self.type2::<Complex32>(Input::Each(input), Output::Each(output)),
        }))
    }

    fn backend_name(&self) -> String {
        "cpu".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nufft::{Modes, Upsampling};

    /// A value in [-1, 1) from `i` (a fixed, scrambled sequence).
    fn value(i: usize) -> f64 {
        let x = (i as u64 ^ 0x9E37_79B9).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    /// Streamed execution ([`NufftExecutor::execute_each`]) gives what whole
    /// arrays give, bit for bit, with several batches (3D 96×96×24 modes at
    /// σ = 2: 14 MB fine grids, two per batch in float32 and one in float64),
    /// and hands the outputs over once each, in order.
    #[test]
    fn streamed_equals_whole_arrays() {
        let pool = crate::plan::thread_pool(2).unwrap();
        let (transforms, m) = (5usize, 700usize);
        let points: Vec<f64> = (0..3 * m)
            .map(|i| std::f64::consts::PI * value(i))
            .collect();
        for (tolerance, double) in [(1e-3, false), (1e-9, true)] {
            for kind in [NufftType::One, NufftType::Two] {
                let modes = Modes::new(3, &[96, 96, 24]).unwrap();
                let spec = NufftSpec::new(
                    kind,
                    modes,
                    1,
                    tolerance,
                    transforms as i32,
                    double,
                    Some(Upsampling::Two),
                )
                .unwrap();
                let ex = crate::nufft::cpu::build(&spec, &points, m, pool.clone()).unwrap();
                let total = modes.total();
                let (inputs, outputs) = match kind {
                    NufftType::Two => (total, m),
                    NufftType::One => (m, total),
                };
                let input = |t: usize, out: &mut [Complex32]| {
                    for (i, o) in out.iter_mut().enumerate() {
                        let j = t * inputs + i;
                        *o = Complex32::new(value(2 * j) as f32, value(2 * j + 1) as f32);
                    }
                };
                let mut given = vec![Complex32::new(0.0, 0.0); transforms * inputs];
                for (t, out) in given.chunks_exact_mut(inputs).enumerate() {
                    input(t, out);
                }
                let mut whole = vec![Complex32::new(0.0, 0.0); transforms * outputs];
                match kind {
                    NufftType::Two => ex.execute(&mut whole, &mut given).unwrap(),
                    NufftType::One => ex.execute(&mut given, &mut whole).unwrap(),
                }
                let mut streamed = Vec::new();
                let mut order = Vec::new();
                let mut take = |t: usize, out: &[Complex32]| {
                    order.push(t);
                    streamed.extend_from_slice(out);
                };
                ex.execute_each(&input, &mut take)
                    .expect("the CPU executor streams")
                    .unwrap();
                assert_eq!(order, (0..transforms).collect::<Vec<_>>(), "{kind:?}");
                assert!(streamed == whole, "{kind:?} double {double}: streamed");
                assert_eq!(transforms_per_batch(&spec), if double { 1 } else { 2 });
            }
        }
    }
}
