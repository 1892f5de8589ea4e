//! The fast path's operator (FAST-PATH.md §3): the separated E of
//! [`crate::model::separation`] applied by batched NUFFTs,
//!
//! $$E\rho = \sum_l \tilde a_l \odot \mathrm{NUFFT}_2^{+}(b_l \odot S_c \odot \rho),\qquad
//!   E^H d = \sum_c \bar S_c \odot \sum_l \bar b_l \odot \mathrm{NUFFT}_1^{-}(\bar{\tilde a}_l \odot d_c)$$
//!
//! (type 2 with sign +1 over the lattice modes, type 1 with sign −1, its
//! adjoint), so Eᴴ is the exact adjoint of the approximate E and CG solves a
//! consistent system. EᴴWE is Eᴴ W E (the NUFFT pair). All K terms of a chunk
//! of coils go through one executor call sharing the points. On the CPU each
//! transform's input is written as the NUFFT reads it and its output used as
//! the NUFFT gives it (`run_each`), so no array of all K·L transforms exists
//! and all coils form one chunk; elsewhere chunks keep the arrays within
//! [`BUFFER_BYTES`]. Where the plan's coil maps compress ([`coils`]), the
//! transforms run on R < L virtual coils and E's data are mixed to the
//! plan's coils (Eᴴ's back), which divides the K·L transforms by L/R.

pub mod certificate;
pub mod coils;
pub mod executor;

use crate::backend::cpu::{complex_zeros, CpuNormal};
use crate::error::{try_vec, Error, Result};
use crate::model::separation::Separation;
use crate::model::{Shared, Sizes};
use crate::nufft::plan::choose_upsampling;
use crate::nufft::{
    EachInput, EachOutput, KernelParams, Modes, NufftExecutor, NufftSpec, NufftType, Upsampling,
};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::plan::BackendKind;
use crate::solver::CgProblem;
use coils::CoilCompression;
use num_complex::Complex32;
use rayon::prelude::*;
use std::sync::Arc;

/// The factors' names in errors.
pub const TEMPORAL: &str = "expansion a_l(t) (K x M)";
pub const SPATIAL: &str = "expansion b_l(r) (K x N)";

/// Samples or voxels per task where a transform's output meets the factors.
const BLOCK: usize = 4096;

/// Bytes of grid and sample buffers one executor call may use.
pub const BUFFER_BYTES: usize = 512 << 20;

/// The specs of the NUFFT pair of a coil chunk (`transforms` = K × its
/// coils): type 2 with sign +1 (E) and type 1 with sign −1 (Eᴴ).
pub fn pair_specs(
    modes: Modes,
    (tolerance, double): (f64, bool),
    upsampling: Upsampling,
    transforms: usize,
) -> Result<[NufftSpec; 2]> {
    let transforms = i32::try_from(transforms)
        .map_err(|_| Error::invalid(format!("{transforms} NUFFT transforms are too many")))?;
    let spec = |kind, sign| {
        NufftSpec::new(
            kind,
            modes,
            sign,
            tolerance,
            transforms,
            double,
            Some(upsampling),
        )
    };
    Ok([spec(NufftType::Two, 1)?, spec(NufftType::One, -1)?])
}

/// The coil chunks covering `coils`, `chunk` coils each but the last, made
/// by `make(count)`; the full-size one (returned first) is shared.
pub fn coil_chunks<T>(
    coils: usize,
    chunk: usize,
    make: impl Fn(usize) -> Result<Arc<T>>,
) -> Result<(Arc<T>, Vec<Arc<T>>)> {
    let full = make(chunk)?;
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < coils {
        let count = chunk.min(coils - start);
        chunks.push(if count == chunk {
            full.clone()
        } else {
            make(count)?
        });
        start += count;
    }
    Ok((full, chunks))
}

/// The NUFFT tolerance for an approximation tolerance ε: 0.9·ε, within what
/// the arithmetic allows (float64 arithmetic for DOUBLE plans). The NUFFT's
/// width rule bounds its worst single output with a margin (`nufft::params`),
/// so its relative l2 error, which is what ε bounds, stays 3–5× under what it
/// is asked for (examples/nufft_accuracy, 3D, asked 1e-3: σ = 1.25, w = 7 gives
/// 2.2e-4; σ = 2, w = 5 gives 1.2e-4); with the expansion's 0.45·ε
/// (`model::separation`) E's error stays near 0.5·ε. Half of ε instead would
/// widen the σ = 1.25 kernel by a cell (3D spreading ∝ w³) for no gain that
/// ε asks for.
pub fn nufft_tolerance(tolerance: f64, precision: Precision) -> (f64, bool) {
    let double = precision == Precision::Double;
    let lowest = if double {
        crate::nufft::params::MIN_TOLERANCE_F64
    } else {
        crate::nufft::params::MIN_TOLERANCE_F32
    };
    (
        (0.9 * tolerance).clamp(lowest, crate::nufft::params::MAX_TOLERANCE),
        double,
    )
}

/// The columns `indices` of each row of the matrix `values` (rows of `count`).
pub(crate) fn gather<T: Copy + Send + Sync>(
    values: &[T],
    count: usize,
    indices: &[usize],
    what: &str,
) -> Result<Vec<T>> {
    let rows = values.len() / count.max(1);
    let q = indices.len();
    let Some(&first) = values.first() else {
        return Ok(Vec::new());
    };
    let mut out = try_vec(rows * q, first, what)?;
    out.par_chunks_mut(q.max(1))
        .zip(values.par_chunks(count.max(1)))
        .for_each(|(o, row)| o.iter_mut().zip(indices).for_each(|(o, &i)| *o = row[i]));
    Ok(out)
}

/// Runs `ex` (of `kind`; `transforms` transforms on M = `points` points and `modes`
/// lattice modes) with each transform's input from `input` and its output
/// handed to `output` in order ([`NufftExecutor::execute_each`]): streamed
/// on the CPU, through whole arrays of every transform where the executor
/// cannot stream (CUDA).
fn run_each(
    (ex, kind): (&dyn NufftExecutor, NufftType),
    transforms: usize,
    (points, modes): (usize, usize),
    input: &EachInput<'_>,
    output: &mut EachOutput<'_>,
) -> Result<()> {
    if let Some(done) = ex.execute_each(input, output) {
        return done;
    }
    let two = kind == NufftType::Two;
    let (inputs, outputs) = if two {
        (modes, points)
    } else {
        (points, modes)
    };
    let mut given = complex_zeros::<f32>(transforms * inputs, "fast-path NUFFT inputs")?;
    let mut taken = complex_zeros::<f32>(transforms * outputs, "fast-path NUFFT outputs")?;
    given
        .par_chunks_mut(inputs.max(1))
        .enumerate()
        .for_each(|(t, out)| input(t, out));
    if two {
        ex.execute(&mut taken, &mut given)?;
    } else {
        ex.execute(&mut given, &mut taken)?;
    }
    for (t, out) in taken.chunks_exact(outputs.max(1)).enumerate() {
        output(t, out);
    }
    Ok(())
}

/// The pair of executors for chunks of `coils` coils.
struct Executors {
    coils: usize,
    forward: Box<dyn NufftExecutor>,
    adjoint: Box<dyn NufftExecutor>,
}

/// How a [`FastOperator`] builds its NUFFT executors: the lattice's modes,
/// the NUFFT tolerance and arithmetic, σ and where they run.
#[derive(Clone, Copy)]
struct NufftChoice {
    modes: Modes,
    tolerance: (f64, bool),
    upsampling: Upsampling,
    backend: (BackendKind, usize),
}

impl NufftChoice {
    /// The spec of one forward transform (type 2, sign +1): its matrix is
    /// E's NUFFT factor, and the adjoint's is its conjugate transpose.
    fn forward_spec(&self) -> Result<NufftSpec> {
        let [forward, _] = pair_specs(self.modes, self.tolerance, self.upsampling, 1)?;
        Ok(forward)
    }

    /// The executor pairs for K·L transforms on `points` (ndims×M), in coil
    /// chunks whose buffers stay within [`BUFFER_BYTES`], and the backend's
    /// name.
    fn executors(
        &self,
        k: usize,
        sizes: Sizes,
        grid_points: usize,
        points: &[f64],
        pool: &Arc<rayon::ThreadPool>,
    ) -> Result<(Vec<Arc<Executors>>, String)> {
        let per_coil = k
            .checked_mul(grid_points + sizes.samples)
            .and_then(|e| e.checked_mul(std::mem::size_of::<Complex32>()))
            .ok_or_else(|| Error::out_of_memory("fast-path buffers are too large"))?;
        let (backend, device) = self.backend;
        // The CPU streams each transform's input and output (`run_each`): no
        // buffers of every transform to bound, all coils in one call.
        let chunk = match backend {
            BackendKind::Cpu => sizes.coils.max(1),
            _ => (BUFFER_BYTES / per_coil.max(1)).clamp(1, sizes.coils.max(1)),
        };
        let make = |coils: usize| -> Result<Arc<Executors>> {
            let [forward, adjoint] =
                pair_specs(self.modes, self.tolerance, self.upsampling, k * coils)?;
            let build = |spec: &NufftSpec| {
                executor::build(backend, device, spec, points, sizes.samples, pool.clone())
            };
            Ok(Arc::new(Executors {
                coils,
                forward: build(&forward)?,
                adjoint: build(&adjoint)?,
            }))
        };
        let (full, chunks) = coil_chunks(sizes.coils, chunk, make)?;
        Ok((chunks, full.forward.backend_name()))
    }
}

/// E, Eᴴ and EᴴWE of a separated model by NUFFTs.
pub struct FastOperator {
    sizes: Sizes,
    rank: usize,
    grid_points: usize,
    /// Grid index of each voxel; `None` = the voxel index.
    index: Option<Arc<Vec<usize>>>,
    /// ã_l(t_j), K×M.
    temporal: Vec<Complex32>,
    /// b_l(r_n), K×N.
    spatial: Vec<Complex32>,
    /// The plan's S_c (N×L).
    sensitivities: Option<Shared<Complex32>>,
    /// The virtual coils the NUFFTs run on, when the maps compress
    /// ([`coils`]); `None`: the plan's coils.
    compression: Option<Arc<CoilCompression>>,
    /// Full chunks (of virtual coils when compressed), and the last,
    /// smaller one if the coils are not a multiple.
    chunks: Vec<Arc<Executors>>,
    nufft: NufftChoice,
    pool: Arc<rayon::ThreadPool>,
    name: String,
}

impl FastOperator {
    /// The operator of `separation` with NUFFTs of relative tolerance
    /// `nufft_tolerance` (float64 arithmetic when `double`) on `backend`;
    /// `sensitivities` are held as shared, not copied; with `compression`
    /// the NUFFTs run on its virtual coils.
    pub fn new(
        separation: &Separation,
        (sensitivities, compression): (Option<Shared<Complex32>>, Option<Arc<CoilCompression>>),
        sizes: Sizes,
        (tolerance, double): (f64, bool),
        backend: (BackendKind, usize),
        pool: Arc<rayon::ThreadPool>,
    ) -> Result<FastOperator> {
        let lattice = &separation.lattice;
        let ndims = separation.ndims;
        let sizes_i64: Vec<i64> = lattice.modes[..ndims].iter().map(|&m| m as i64).collect();
        let modes = Modes::new(ndims as i32, &sizes_i64)?;
        let nufft = NufftChoice {
            modes,
            tolerance: (tolerance, double),
            upsampling: choose_upsampling(&modes, sizes.samples, tolerance, double),
            backend,
        };
        let (k, grid_points) = (separation.rank, lattice.grid_points());
        let transformed = Sizes {
            coils: compression.as_ref().map_or(sizes.coils, |c| c.rank),
            ..sizes
        };
        let (chunks, backend_name) =
            nufft.executors(k, transformed, grid_points, &separation.points, &pool)?;
        let temporal = separation.temporal.values_f32(TEMPORAL)?;
        let spatial = separation.spatial.values_f32(SPATIAL)?;
        let kernel = KernelParams::new(tolerance, nufft.upsampling, double)?;
        let name = format!(
            "{backend_name} (fast path, K = {k}, NUFFT tolerance {tolerance:.1e} sigma {} w {}{})",
            kernel.upsampling.factor(),
            kernel.width,
            compressed_name(compression.as_deref())
        );
        Ok(FastOperator {
            sizes,
            rank: k,
            grid_points,
            index: lattice.index.clone().map(Arc::new),
            temporal,
            spatial,
            sensitivities,
            compression,
            chunks,
            nufft,
            pool,
            name,
        })
    }

    /// K.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The map of transformed coil c (virtual when compressed) at voxel v.
    fn sensitivity(&self, c: usize, v: usize) -> Complex32 {
        let maps = match &self.compression {
            Some(compression) => Some(&compression.maps),
            None => self.sensitivities.as_ref(),
        };
        maps.map_or(Complex32::new(1.0, 0.0), |s| s[c * self.sizes.voxels + v])
    }

    /// The coils the NUFFTs run on: R virtual ones, or the plan's L.
    fn transformed_coils(&self) -> usize {
        self.compression
            .as_ref()
            .map_or(self.sizes.coils, |c| c.rank)
    }

    /// d = E x (M×L): the transformed coils' data, expanded to the plan's
    /// coils when they are virtual ([`CoilCompression::expand`]).
    fn forward_into(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        let Some(compression) = &self.compression else {
            return self.forward_transformed(image, data);
        };
        let m = self.sizes.samples;
        let mut virtual_data =
            complex_zeros::<f32>(m * compression.rank, "virtual coil data (M x R)")?;
        self.forward_transformed(image, &mut virtual_data)?;
        compression.expand(&virtual_data, data, m);
        Ok(())
    }

    /// x = Eᴴ d (N): the plan's coils' data reduced to the virtual coils'
    /// when compressed ([`CoilCompression::reduce`]), then transformed.
    fn adjoint_into(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        match &self.compression {
            None => self.adjoint_transformed(data, image),
            Some(compression) => {
                let virtual_data = compression.reduce(data, self.sizes.samples)?;
                self.adjoint_transformed(&virtual_data, image)
            }
        }
    }

    fn grid_index(&self, v: usize) -> usize {
        self.index.as_ref().map_or(v, |i| i[v])
    }

    /// d = E x (M × the transformed coils): per transform t = (coil, l), the
    /// modes b_l ⊙ S_c ⊙ x written as the NUFFT places them and its values
    /// added as ã_l ⊙ y to d_c as it gives them ([`run_each`]).
    fn forward_transformed(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = self.sizes;
        let (k, g) = (self.rank, self.grid_points);
        let mut first = 0;
        for ex in &self.chunks {
            let modes = |t: usize, out: &mut [Complex32]| {
                let (c, l) = (first + t / k, t % k);
                let b = &self.spatial[l * n..(l + 1) * n];
                if g > n {
                    out.fill(Complex32::new(0.0, 0.0));
                }
                for v in 0..n {
                    out[self.grid_index(v)] = b[v] * self.sensitivity(c, v) * image[v];
                }
            };
            let coils = &mut data[first * m..(first + ex.coils) * m];
            let mut add = |t: usize, y: &[Complex32]| {
                let (ci, l) = (t / k, t % k);
                let a = &self.temporal[l * m..(l + 1) * m];
                coils[ci * m..(ci + 1) * m]
                    .par_chunks_mut(BLOCK)
                    .zip(y.par_chunks(BLOCK).zip(a.par_chunks(BLOCK)))
                    .for_each(|(d, (y, a))| {
                        for ((d, y), a) in d.iter_mut().zip(y).zip(a) {
                            *d = if l == 0 { a * y } else { *d + a * y };
                        }
                    });
            };
            run_each(
                (&*ex.forward, NufftType::Two),
                k * ex.coils,
                (m, g),
                &modes,
                &mut add,
            )?;
            first += ex.coils;
        }
        Ok(())
    }

    /// x = Eᴴ d (N) for the transformed coils' d: per transform t = (coil,
    /// l), the values ã_l* ⊙ d_c written as the NUFFT sorts them and its
    /// modes summed as Σ_l b_l* ⊙ (modes), then S_c* ⊙ that added to x, as
    /// it gives them.
    fn adjoint_transformed(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = self.sizes;
        let (k, g) = (self.rank, self.grid_points);
        let zero = Complex32::new(0.0, 0.0);
        let mut coil = complex_zeros::<f32>(n, "fast-path coil image (N)")?;
        image.iter_mut().for_each(|x| *x = zero);
        let mut first = 0;
        for ex in &self.chunks {
            let values = |t: usize, out: &mut [Complex32]| {
                let (c, l) = (first + t / k, t % k);
                let a = &self.temporal[l * m..(l + 1) * m];
                let d = &data[c * m..(c + 1) * m];
                for ((o, a), d) in out.iter_mut().zip(a).zip(d) {
                    *o = a.conj() * d;
                }
            };
            let mut add = |t: usize, modes: &[Complex32]| {
                let (c, l) = (first + t / k, t % k);
                let b = &self.spatial[l * n..(l + 1) * n];
                coil.par_chunks_mut(BLOCK)
                    .zip(image.par_chunks_mut(BLOCK))
                    .enumerate()
                    .for_each(|(block, (coil, image))| {
                        let start = block * BLOCK;
                        for (i, (s, x)) in coil.iter_mut().zip(image.iter_mut()).enumerate() {
                            let v = start + i;
                            let term = b[v].conj() * modes[self.grid_index(v)];
                            *s = if l == 0 { term } else { *s + term };
                            if l + 1 == k {
                                *x += self.sensitivity(c, v).conj() * *s;
                            }
                        }
                    });
            };
            run_each(
                (&*ex.adjoint, NufftType::One),
                k * ex.coils,
                (m, g),
                &values,
                &mut add,
            )?;
            first += ex.coils;
        }
        Ok(())
    }

    fn normal_into(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        // On the transformed coils: with virtual ones, V_Rᴴ V_R = I and the
        // weights are the same for every coil, so W commutes with the mixing.
        let m = self.sizes.samples;
        let coils = self.transformed_coils();
        let mut data = complex_zeros::<f32>(m * coils, "intermediate data (M x coils)")?;
        self.forward_transformed(image, &mut data)?;
        if let Some(w) = weights {
            crate::backend::cpu::apply_sample_weights(&mut data, m, w);
        }
        self.adjoint_transformed(&data, out)
    }
}

/// ", R virtual coils of L" for an operator's name ("" uncompressed).
pub fn compressed_name(compression: Option<&CoilCompression>) -> String {
    compression.map_or_else(String::new, |c| {
        format!(", {} virtual coils of {}", c.rank, c.coils)
    })
}

impl CpuNormal<f32> for FastOperator {
    fn sizes(&self) -> Sizes {
        self.sizes
    }

    fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    fn rhs(&self, data: &[Complex32], weights: Option<&[f32]>, b: &mut [Complex32]) -> Result<()> {
        match weights {
            None => self.adjoint_into(data, b),
            Some(w) => {
                let mut d = try_vec(data.len(), Complex32::new(0.0, 0.0), "weighted data")?;
                d.copy_from_slice(data);
                crate::backend::cpu::apply_sample_weights(&mut d, self.sizes.samples, w);
                self.adjoint_into(&d, b)
            }
        }
    }

    fn normal(&self, x: &[Complex32], y: &mut [Complex32], weights: Option<&[f32]>) -> Result<()> {
        self.normal_into(x, y, weights)
    }
}

impl EncodingOperator for FastOperator {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        self.pool.install(|| self.forward_into(image, data))
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        self.pool.install(|| self.adjoint_into(data, image))
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        self.pool.install(|| self.normal_into(image, out, weights))
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        crate::backend::cpu::space::solve(self, problem, image)
    }

    fn backend_name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    /// A CPU executor seen only through whole arrays, as CUDA's is.
    struct Whole(Box<dyn NufftExecutor>);

    impl NufftExecutor for Whole {
        fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()> {
            self.0.execute(nonuniform, grid)
        }
        fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()> {
            self.0.execute_c64(nonuniform, grid)
        }
        fn backend_name(&self) -> String {
            "whole".into()
        }
    }

    /// `run_each` through whole arrays (the fallback) hands over what the
    /// streamed CPU executor does, in the same order, for both types.
    #[test]
    fn run_each_falls_back_to_whole_arrays_with_the_same_results() {
        let pool = crate::plan::thread_pool(2).unwrap();
        let (transforms, m) = (4usize, 300usize);
        let modes = Modes::new(2, &[21, 16]).unwrap();
        let points: Vec<f64> = (0..2 * m)
            .map(|i| ((i * 7919 % 1000) as f64 / 500.0 - 1.0) * std::f64::consts::PI)
            .collect();
        let [two, one] = pair_specs(modes, (1e-4, false), Upsampling::Two, transforms).unwrap();
        for (spec, kind) in [(two, NufftType::Two), (one, NufftType::One)] {
            let streaming = crate::nufft::cpu::build(&spec, &points, m, pool.clone()).unwrap();
            let whole = Whole(crate::nufft::cpu::build(&spec, &points, m, pool.clone()).unwrap());
            let input = |t: usize, out: &mut [Complex32]| {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = Complex32::new(((t * 31 + i) % 17) as f32 - 8.0, (i % 5) as f32);
                }
            };
            let run = |ex: &dyn NufftExecutor| {
                let mut taken = Vec::new();
                let mut take = |t: usize, out: &[Complex32]| taken.push((t, out.to_vec()));
                run_each(
                    (ex, kind),
                    transforms,
                    (m, modes.total()),
                    &input,
                    &mut take,
                )
                .unwrap();
                taken
            };
            let (a, b) = (run(&*streaming), run(&whole));
            assert_eq!(a.len(), transforms, "{kind:?}");
            assert_eq!(a, b, "{kind:?}");
        }
    }
}
