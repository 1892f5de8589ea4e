//! The NUFFT plan: arguments checked, the backend resolved from the
//! options as reconstruction plans resolve it, the executor built once
//! (points sorted, kernel and FFT plans made) and applied many times.
//!
//! Arithmetic: float64 for `Precision::Double`, float32 otherwise (ACCURATE
//! and FAST alike; tolerances down to [`super::params::MIN_TOLERANCE_F32`]).
//! The upsampling σ is chosen by [`choose_upsampling`] unless given.

use super::{KernelParams, Modes, NufftExecutor, NufftSpec, NufftType, Sample, Upsampling};
use crate::error::{Error, Result, Status};
use crate::finite::{check_finite, check_result};
use crate::op::Precision;
use crate::plan::{BackendKind, Options};
use num_complex::{Complex32, Complex64};
use std::sync::Arc;

/// A non-uniform FFT plan (module documentation of [`crate::nufft`]).
pub struct Nufft {
    spec: NufftSpec,
    npoints: usize,
    backend: BackendKind,
    executor: Box<dyn NufftExecutor>,
}

/// Measured CPU costs (BENCHMARKS.md, "NUFFT: choosing σ"; both
/// arithmetics): per point, [`POINT_NS`] plus [`CELL_NS`] per kernel cell
/// (x padded to the vector width), and per fine-grid cell
/// [`GRID_NS`]`[d − 1]` for clearing, adding tiles, the FFT and the modes.
pub const POINT_NS: f64 = 45.0;
/// See [`POINT_NS`].
pub const CELL_NS: f64 = 0.3;
/// See [`POINT_NS`]; 3D grids rarely fit a cache, so their cells cost more.
pub const GRID_NS: [f64; 3] = [6.0, 6.0, 20.0];

/// The estimated CPU cost (ns) of one transform of `npoints` points with this kernel and σ.
fn estimated_cost(
    modes: &Modes,
    npoints: usize,
    tolerance: f64,
    double: bool,
    upsampling: Upsampling,
) -> Option<f64> {
    let kernel = KernelParams::new(tolerance, upsampling, double).ok()?;
    let w = kernel.width as f64;
    let spread: Vec<usize> = (0..3).filter(|&a| modes.sizes[a] > 1).collect();
    let cells_per_point = spread.iter().enumerate().fold(1.0, |acc, (i, _)| {
        acc * if i == 0 {
            (super::cpu::lanes(kernel.width) / 2) as f64
        } else {
            w
        }
    });
    let mut fine = 1.0;
    for a in 0..3 {
        fine *= kernel.fine_size(modes.sizes[a]).ok()? as f64;
    }
    let d = spread.len().max(1);
    Some(npoints as f64 * (POINT_NS + CELL_NS * cells_per_point) + fine * GRID_NS[d - 1])
}

/// The upsampling σ used when none is given: the cheaper of σ = 2 and
/// σ = 1.25 by the measured cost model above (σ = 1.25 wins where points are
/// few for the grid, e.g. 3D below about one point per mode at 1e-3, or a
/// tenth of a point per mode at 1e-6). [`KernelParams::new`] may still
/// replace 1.25 by 2 (tolerances out of its reach, float32 below 1e-3).
pub fn choose_upsampling(
    modes: &Modes,
    npoints: usize,
    tolerance: f64,
    double: bool,
) -> Upsampling {
    let two = estimated_cost(modes, npoints, tolerance, double, Upsampling::Two);
    let quarter = estimated_cost(modes, npoints, tolerance, double, Upsampling::OneQuarter);
    match (two, quarter) {
        (Some(a), Some(b)) if b < a => Upsampling::OneQuarter,
        _ => Upsampling::Two,
    }
}

impl Nufft {
    /// The standalone plan of the C API (`horecon_nufft_create`): type,
    /// ndims and modes[ndims], npoints ≥ 0 points (`points[a·npoints + j]`,
    /// finite radians), sign ±1, tolerance, ntransforms ≥ 1, options (backend,
    /// threads, precision). Runs on its own thread pool.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: NufftType,
        ndims: i32,
        modes: &[i64],
        npoints: i64,
        points: &[f64],
        sign: i32,
        tolerance: f64,
        ntransforms: i32,
        options: &Options,
    ) -> Result<Nufft> {
        options.check()?;
        let modes = Modes::new(ndims, modes)?;
        let npoints = usize::try_from(npoints)
            .map_err(|_| Error::invalid(format!("npoints must be >= 0, got {npoints}")))?;
        let double = options.precision == Precision::Double;
        let spec = NufftSpec::new(
            kind,
            modes,
            sign,
            tolerance,
            ntransforms,
            double,
            Some(choose_upsampling(&modes, npoints, tolerance, double)),
        )?;
        Nufft::with_spec(spec, points, npoints, options, None)
    }

    /// A plan for `spec` on the backend `options` resolve to, CPU work on
    /// `pool` (how the library's own users, Toeplitz and gridding, share
    /// their plan's threads), or `None`: a pool of `options.num_threads`.
    pub fn with_spec(
        spec: NufftSpec,
        points: &[f64],
        npoints: usize,
        options: &Options,
        pool: Option<Arc<rayon::ThreadPool>>,
    ) -> Result<Nufft> {
        options.check()?;
        let d = spec.modes.ndims;
        let expected = d
            .checked_mul(npoints)
            .filter(|&n| n <= isize::MAX as usize / 8)
            .ok_or_else(|| {
                Error::invalid(format!("npoints = {npoints}: ndims x npoints is too large"))
            })?;
        if points.len() != expected {
            return Err(Error::size(format!(
                "points has {} elements, expected {expected} (npoints x ndims = {npoints} x {d})",
                points.len()
            )));
        }
        crate::model::check_finite("points", points)?;
        let backend = crate::backend::resolve(options)?;
        let cpu = |pool: Option<Arc<rayon::ThreadPool>>| {
            let pool = match pool {
                Some(p) => p,
                None => crate::plan::thread_pool(options.num_threads)?,
            };
            super::cpu::build(&spec, points, npoints, pool)
        };
        let (backend, executor) = match backend {
            BackendKind::Cuda => {
                let built =
                    crate::backend::cuda::nufft::split::build(&spec, points, npoints, options);
                match built {
                    Ok(executor) => (BackendKind::Cuda, executor),
                    // AUTO on a GPU that cannot run it (cuFFT missing): the CPU.
                    Err(e)
                        if options.backend == BackendKind::Auto
                            && e.status == Status::BackendUnavailable =>
                    {
                        (BackendKind::Cpu, cpu(pool)?)
                    }
                    Err(e) => return Err(e),
                }
            }
            _ => (BackendKind::Cpu, cpu(pool)?),
        };
        Ok(Nufft {
            spec,
            npoints,
            backend,
            executor,
        })
    }

    pub fn spec(&self) -> &NufftSpec {
        &self.spec
    }

    /// M.
    pub fn npoints(&self) -> usize {
        self.npoints
    }

    /// Where it runs: `Cpu` or `Cuda`, never `Auto`.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// Values of `nonuniform` (ntransforms × M) and of `grid` (ntransforms × Π n_a).
    pub fn lengths(&self) -> (usize, usize) {
        let t = self.spec.transforms;
        (t * self.npoints, t * self.spec.modes.total())
    }

    fn check<D: Sample>(&self, nonuniform: &[D], grid: &[D]) -> Result<()> {
        let (m, n) = self.lengths();
        let t = self.spec.transforms;
        if nonuniform.len() != m {
            return Err(Error::size(format!(
                "nonuniform has {} elements, expected {m} (ntransforms x npoints = {t} x {})",
                nonuniform.len(),
                self.npoints
            )));
        }
        if grid.len() != n {
            return Err(Error::size(format!(
                "grid has {} elements, expected {n} (ntransforms x modes = {t} x {})",
                grid.len(),
                self.spec.modes.total()
            )));
        }
        match self.spec.kind {
            NufftType::One => check_finite("nonuniform", nonuniform),
            NufftType::Two => check_finite("grid", grid),
        }
    }

    /// Type 1 reads `nonuniform` and writes `grid`; type 2 reads `grid` and
    /// writes `nonuniform`. The output is written only on success.
    pub fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()> {
        self.check(nonuniform, grid)?;
        self.executor.execute(nonuniform, grid)?;
        self.check_result(nonuniform, grid)
    }

    /// As [`Nufft::execute`] for float64 data.
    pub fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()> {
        self.check(nonuniform, grid)?;
        self.executor.execute_c64(nonuniform, grid)?;
        self.check_result(nonuniform, grid)
    }

    /// A result beyond the arithmetic's range (finite inputs whose sums
    /// overflow, near 3.4e38 in float32): `NotFinite` naming the output.
    fn check_result<D: Sample>(&self, nonuniform: &[D], grid: &[D]) -> Result<()> {
        match self.spec.kind {
            NufftType::One => check_result("grid", grid),
            NufftType::Two => check_result("nonuniform", nonuniform),
        }
    }

    /// "cpu" or "cuda:<device>".
    pub fn backend_name(&self) -> String {
        self.executor.backend_name()
    }
}
