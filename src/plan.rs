//! A plan: the geometry and phase model of one acquisition (the expensive,
//! reusable part) plus the operator built from it on the chosen backend.
//!
//! The Rust face of the C API; `ffi` is a thin, checked layer over it.

/// cbindgen:ignore
mod approximation;
mod calib;
mod gridding;
mod memory;
mod precondition;
mod stone;

pub use approximation::ApproximationInfo;
pub use memory::{Call, Memory};

use crate::backend;
use crate::error::{Error, Result};
use crate::model::cartesian::Cartesian;
use crate::model::toeplitz::ToeplitzSpec;
use crate::model::{check_finite, check_result, Model, Sizes};
use crate::op::{CgReport, EncodingOperator, StopReason};
pub use crate::options::{BackendKind, Options};
use crate::progress::{self, Callback, Control};
use crate::solver::{CgProblem, Neighbourhood, PreconditionerKind, Regularizer};
use num_complex::Complex32;
use std::sync::{Arc, Mutex};

/// The most CPU threads a plan may ask for (each is a thread of its pool).
pub const MAX_THREADS: usize = 1024;

impl Options {
    /// Checks what every plan checks: device ≥ 0, num_devices ≥ 1,
    /// num_threads ≤ [`MAX_THREADS`], verbosity 0…2.
    pub fn check(&self) -> Result<()> {
        if self.device < 0 {
            return Err(Error::invalid(format!(
                "device must be >= 0, got {}",
                self.device
            )));
        }
        if self.num_devices < 1 {
            return Err(Error::invalid(format!(
                "num_devices must be >= 1, got {}",
                self.num_devices
            )));
        }
        if self.num_threads > MAX_THREADS {
            return Err(Error::invalid(format!(
                "num_threads must be 0 (all cores) to {MAX_THREADS}, got {}",
                self.num_threads
            )));
        }
        if !(0..=2).contains(&self.verbosity) {
            return Err(Error::invalid(format!(
                "verbosity must be 0, 1 or 2, got {}",
                self.verbosity
            )));
        }
        Ok(())
    }
}

/// Address space a new pool thread takes at least: its stack (2 MiB) and
/// its first allocations (glibc maps a small heap for each new thread).
const THREAD_ADDRESS_SPACE: u64 = 3 << 20;
/// Address space left free for the call that starts the pool.
const CALL_ADDRESS_SPACE: u64 = 4 << 20;

/// Bytes of address space left under `RLIMIT_AS` (`None`: no limit, or the
/// system does not say): the limit less `VmSize` of /proc/self/status.
fn address_space_left() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the local struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every platform
    let limit = limit.rlim_cur as u64;
    Some(limit.saturating_sub(kib.saturating_mul(1024)))
}

/// A plan's CPU thread pool of `num_threads` threads (0 = all cores).
/// `OutOfMemory` where an address-space limit (`ulimit -v`) leaves too
/// little room to start them: a thread whose first allocation fails aborts
/// the process, which no status could report.
pub(crate) fn thread_pool(num_threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    let threads = match num_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let needed = threads as u64 * THREAD_ADDRESS_SPACE + CALL_ADDRESS_SPACE;
    if let Some(left) = address_space_left().filter(|&left| left < needed) {
        return Err(Error::out_of_memory(format!(
            "the address-space limit (RLIMIT_AS, `ulimit -v`) leaves {left} bytes, too few to start \
             {threads} CPU threads (about {needed} bytes); raise the limit or set num_threads"
        )));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(num_threads)
        .thread_name(|i| format!("horecon-{i}"))
        .build()
        // Starting threads fails only for want of resources (memory,
        // thread limits): a status the caller can act on, not a bug.
        .map_err(|e| Error::out_of_memory(format!("could not start the CPU thread pool: {e}")))?;
    // Every thread started (its first allocations made) before the call
    // goes on to allocate its arrays, so that those, not a thread, meet a
    // limit first.
    pool.broadcast(|_| ());
    Ok(Arc::new(pool))
}

/// Options of a conjugate-gradient solve (the Rust mirror of `horecon_cg_options`).
#[derive(Clone, Copy)]
pub struct CgOptions<'a> {
    pub max_iterations: usize,
    pub tolerance: f64,
    pub regularizer: Regularizer,
    pub lambda: f64,
    /// Outer reweighting steps of TV and Laplace (≥ 1).
    pub reweightings: usize,
    /// Smoothing ε of TV and Laplace (> 0, image units); Laplace's continuation starts here.
    pub epsilon: f64,
    /// σ of the Laplace prior (> 0, image units).
    pub sigma: f64,
    pub sample_weights: Option<&'a [f32]>,
    /// N×ndims non-negative per-edge weights of the finite-difference
    /// regularizers (ndims = [`Sizes::grid_axes`]), voxel fastest; `None` = 1.
    pub fd_weights: Option<&'a [f32]>,
    /// The directions of D for the finite-difference regularizers: the grid
    /// axes (default) or all neighbours (26 in 3D, 8 in 2D) weighted 1/|d|²;
    /// `fd_weights` then has one column per direction
    /// ([`crate::backend::cpu::fd`] lists them in order).
    pub neighbourhood: Neighbourhood,
    pub warm_start: bool,
    /// (iteration, relative residual) → true to stop.
    pub progress: Option<&'a (dyn Fn(usize, f64) -> bool + Sync)>,
    /// Diagonal or circulant preconditioning ([`crate::solver::precondition`]).
    pub preconditioner: PreconditionerKind,
    /// τ of the discrepancy rule (stop when ‖W^{1/2}(Eρ − d)‖ ≤ τ·σ·sqrt(L·Σ_j w_j));
    /// 0 = off.
    pub discrepancy_tau: f64,
    /// σ: the noise standard deviation per complex sample (E|n|² = σ²); 1 for whitened data.
    pub noise_sigma: f64,
}

impl Default for CgOptions<'_> {
    fn default() -> Self {
        CgOptions {
            max_iterations: 50,
            tolerance: 1e-6,
            regularizer: Regularizer::None,
            lambda: 0.0,
            reweightings: 5,
            epsilon: 1e-3,
            sigma: 1.0,
            sample_weights: None,
            fd_weights: None,
            neighbourhood: Neighbourhood::Axes,
            warm_start: false,
            progress: None,
            preconditioner: PreconditionerKind::None,
            discrepancy_tau: 0.0,
            noise_sigma: 1.0,
        }
    }
}

/// The result of [`Plan::cg`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CgInfo {
    pub iterations: usize,
    pub converged: bool,
    pub rel_residual: f64,
    pub seconds: f64,
    /// Why the solve stopped.
    pub stop_reason: StopReason,
    /// ‖W^{1/2}(Eρ − d)‖ of the result when the discrepancy rule was on.
    pub data_residual: Option<f64>,
}

/// A reconstruction plan. Setters need `&mut self`; the operators take
/// `&self` and may be called from several threads at once.
pub struct Plan {
    options: Options,
    backend: BackendKind,
    model: Model,
    /// Cartesian FFT mode ([`Plan::set_cartesian`]); `None` = the exact phase sum.
    cartesian: Option<Arc<Cartesian>>,
    pool: Arc<rayon::ThreadPool>,
    /// Built on first use after the model changed (so a GPU gets the model once).
    operator: Mutex<Option<Arc<dyn EncodingOperator>>>,
    /// `Some(time_segments)` when the Toeplitz normal operator is enabled
    /// (0 = segments chosen automatically).
    toeplitz: Option<usize>,
    /// The Toeplitz operator (normal and CG), built on first use.
    toeplitz_operator: Mutex<Option<Arc<dyn EncodingOperator>>>,
    /// Cancellation of the calls running on this plan ([`Plan::control`]).
    control: Arc<Control>,
    /// The progress callback of long calls ([`Plan::set_progress`]).
    progress: Option<Callback>,
    /// The approximation tolerance of the fast path (0 = exact).
    approximation: f64,
    /// The fast path of the current model, built on first use.
    fast: Mutex<Option<approximation::FastPath>>,
}

fn expect_len(argument: &str, got: usize, expected: usize, shape: &str) -> Result<()> {
    if got != expected {
        return Err(Error::size(format!(
            "{argument} has {got} elements, expected {expected} ({shape})"
        )));
    }
    Ok(())
}

/// The number of difference directions (columns of `fd_weights`) of a grid.
pub fn fd_directions(sizes: Sizes, neighbourhood: Neighbourhood) -> usize {
    crate::backend::cpu::fd::Grid::with_neighbourhood(sizes.dims, neighbourhood).ndims()
}

/// Checks the options of the finite-difference regularizers: `fd_weights`
/// (only with them; N×ndims, finite, ≥ 0), and for TV and Laplace
/// `reweightings` ≥ 1 and ε > 0, for Laplace also σ > 0.
fn check_regularizer_options(options: &CgOptions<'_>, sizes: Sizes) -> Result<()> {
    use Regularizer::*;
    let reg = options.regularizer;
    let name = match reg {
        None => "none",
        Tikhonov => "Tikhonov",
        FiniteDifference => "finite difference",
        TotalVariation => "total variation",
        Laplace => "Laplace",
    };
    if let Some(w) = options.fd_weights {
        if !matches!(reg, FiniteDifference | TotalVariation | Laplace) {
            return Err(Error::invalid(format!(
                "fd_weights are given but the regularizer is {name}: they apply only to \
                 finite difference, total variation and Laplace"
            )));
        }
        let ndims = fd_directions(sizes, options.neighbourhood);
        let what = match options.neighbourhood {
            Neighbourhood::Axes => "grid axes of more than one voxel",
            Neighbourhood::Full => "neighbour directions (neighbours = 26)",
        };
        expect_len(
            "fd_weights",
            w.len(),
            sizes.voxels * ndims,
            &format!("N x ndims with ndims = {ndims} {what}"),
        )?;
        check_finite("fd_weights", w)?;
        if let Some(i) = w.iter().position(|&v| v < 0.0) {
            return Err(Error::invalid(format!(
                "fd_weights[{i}] = {} is negative",
                w[i]
            )));
        }
    }
    if matches!(reg, TotalVariation | Laplace) {
        if options.reweightings < 1 {
            return Err(Error::invalid(format!(
                "reweightings must be >= 1 for {name}, got {}",
                options.reweightings
            )));
        }
        if !(options.epsilon.is_finite() && options.epsilon > 0.0) {
            return Err(Error::invalid(format!(
                "epsilon must be finite and > 0 for {name}, got {}",
                options.epsilon
            )));
        }
    }
    if reg == Laplace && !(options.sigma.is_finite() && options.sigma > 0.0) {
        return Err(Error::invalid(format!(
            "sigma must be finite and > 0 for Laplace, got {}",
            options.sigma
        )));
    }
    Ok(())
}

impl Plan {
    /// A plan for an nx×ny×nz image, `ncoils` coils and `nsamples` samples per coil.
    pub fn new(
        options: Options,
        nx: i64,
        ny: i64,
        nz: i64,
        ncoils: i64,
        nsamples: i64,
    ) -> Result<Plan> {
        let sizes = Sizes::new(nx, ny, nz, ncoils, nsamples)?;
        options.check()?;
        let backend = backend::resolve(&options)?;
        let pool = thread_pool(options.num_threads)?;
        Ok(Plan {
            options,
            backend,
            model: Model::new(sizes),
            cartesian: None,
            pool,
            operator: Mutex::new(None),
            toeplitz: None,
            toeplitz_operator: Mutex::new(None),
            control: Arc::new(Control::default()),
            progress: None,
            approximation: 0.0,
            fast: Mutex::new(None),
        })
    }

    /// What cancels the calls running on this plan: [`Control::cancel`] may
    /// be called from any thread while they run (`horecon_cancel`).
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// The progress callback of this plan's long calls (`None` removes it):
    /// called on the calling thread with the fraction done, at the start and
    /// then at most every [`progress::INTERVAL`]; non-zero cancels the call
    /// ([`crate::progress`]).
    pub fn set_progress(&mut self, callback: Option<Callback>) {
        self.progress = callback;
    }

    /// Runs `f` as the long call `what` of this plan (the body of
    /// [`Plan::run`]'s calls, or a calibration step that calls other plans):
    /// cancellable by `horecon_cancel` of this plan and reporting to its
    /// progress callback ([`crate::progress`]).
    pub(crate) fn long_call<R>(
        &self,
        what: &'static str,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        progress::run(what, &self.control, self.progress, || {
            crate::call_pool::within(&self.pool, f)
        })
    }

    /// Makes `horecon_cancel` of `other` cancel this plan's calls too (a
    /// private plan that works for `other`'s call).
    pub(crate) fn share_cancel(&mut self, other: &Plan) {
        self.control = other.control.clone();
    }

    /// Runs the body of the long call `call` as a cancellable, reporting
    /// [`progress::Work`], after checking that the memory it needs is there.
    fn run<R>(&self, call: Call, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let what = call.name();
        self.preflight(call, what)?;
        self.long_call(what, f)
    }

    pub fn sizes(&self) -> Sizes {
        self.model.sizes
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The backend the operators run on (never `Auto`).
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    fn changed(&mut self) {
        *self.operator.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        *self
            .toeplitz_operator
            .get_mut()
            .unwrap_or_else(|e| e.into_inner()) = None;
        *self.fast.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Voxel positions, N×3 metres (x column, then y, then z).
    pub fn set_positions(&mut self, positions: &[f64]) -> Result<()> {
        expect_len(
            "positions",
            positions.len(),
            3 * self.sizes().voxels,
            "N x 3",
        )?;
        self.model.set_positions(positions)?;
        self.cartesian = None;
        self.changed();
        Ok(())
    }

    /// Grid positions (MODEL.md's FFT-centred helper).
    pub fn set_grid_positions(&mut self, fov: [f64; 3], center: [f64; 3]) -> Result<()> {
        self.model.set_grid_positions(fov, center)?;
        self.cartesian = None;
        self.changed();
        Ok(())
    }

    /// The built-in solid harmonics (nterms 1, 4, 9 or 16) with M×nterms coefficients.
    pub fn set_solid_harmonics(&mut self, nterms: i32, coefficients: &[f64]) -> Result<()> {
        if let Ok(t) = usize::try_from(nterms) {
            expect_len(
                "coefficients",
                coefficients.len(),
                t * self.sizes().samples,
                "M x nterms",
            )?;
        }
        self.model.set_solid_harmonics(nterms, coefficients)?;
        self.cartesian = None;
        self.changed();
        Ok(())
    }

    /// A user basis, N×B, with M×B coefficients.
    pub fn set_basis(&mut self, nterms: i32, basis: &[f64], coefficients: &[f64]) -> Result<()> {
        let terms = usize::try_from(nterms)
            .ok()
            .filter(|&t| (1..=4096).contains(&t))
            .ok_or_else(|| Error::invalid(format!("nterms must be 1..4096, got {nterms}")))?;
        let s = self.sizes();
        expect_len("basis", basis.len(), terms * s.voxels, "N x nterms")?;
        expect_len(
            "coefficients",
            coefficients.len(),
            terms * s.samples,
            "M x nterms",
        )?;
        self.model.set_basis(basis, coefficients)?;
        self.cartesian = None;
        self.changed();
        Ok(())
    }

    /// New M×B coefficients for the current phase model (its basis and
    /// terms stay), e.g. the same trajectory at another delay. The exact
    /// operator, when built and not shared, takes the new sample features in
    /// place ([`EncodingOperator::update_samples`]: on a GPU the voxel data,
    /// sensitivities and buffers stay) instead of being rebuilt on next use;
    /// the Toeplitz operator and the fast path, which depend on the
    /// trajectory, are rebuilt on next use, and Cartesian mode is left (as
    /// any phase-model setter leaves it). On error the plan is unchanged.
    pub fn set_coefficients(&mut self, coefficients: &[f64]) -> Result<()> {
        self.model.set_coefficients(coefficients)?;
        if self.cartesian.take().is_some() {
            self.changed();
            return Ok(());
        }
        *self
            .toeplitz_operator
            .get_mut()
            .unwrap_or_else(|e| e.into_inner()) = None;
        *self.fast.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        let slot = self.operator.get_mut().unwrap_or_else(|e| e.into_inner());
        // In place only when the plan holds the operator alone (no caller
        // applies it meanwhile); anything else, an error included, rebuilds.
        let model = &self.model;
        let updated = slot.as_mut().and_then(Arc::get_mut).is_some_and(|op| {
            // On the plan's threads (a GPU operator plans its sides on the host).
            let update = || op.update_samples(&model.voxel_features()?, &model.sample_features()?);
            matches!(self.pool.install(update), Ok(true))
        });
        if !updated {
            *slot = None;
        }
        Ok(())
    }

    /// A k-space trajectory, M×ndims rad/m (h = x, y, z).
    pub fn set_trajectory(&mut self, ndims: i32, k: &[f64]) -> Result<()> {
        if let Ok(d) = usize::try_from(ndims) {
            expect_len("k", k.len(), d * self.sizes().samples, "M x ndims")?;
        }
        self.model.set_trajectory(ndims, k)?;
        self.cartesian = None;
        self.changed();
        Ok(())
    }

    /// Off-resonance ω (N, rad/s) with sample times (M, s); `None` clears it.
    pub fn set_off_resonance(&mut self, omega_and_times: Option<(&[f64], &[f64])>) -> Result<()> {
        if let Some((omega, times)) = omega_and_times {
            if self.cartesian.is_some() {
                return Err(Error::invalid(
                    "off-resonance cannot be set in Cartesian mode: the FFT cannot apply a \
                     per-voxel, time-dependent phase (set a phase model to leave Cartesian mode)",
                ));
            }
            expect_len("omega", omega.len(), self.sizes().voxels, "N")?;
            expect_len("times", times.len(), self.sizes().samples, "M")?;
        }
        self.model.set_off_resonance(omega_and_times)?;
        self.changed();
        Ok(())
    }

    /// Coil sensitivities, N×L; `None` = S ≡ 1 (only with one coil).
    pub fn set_sensitivities(&mut self, sensitivities: Option<&[Complex32]>) -> Result<()> {
        if let Some(s) = sensitivities {
            expect_len(
                "sensitivities",
                s.len(),
                self.sizes().voxels * self.sizes().coils,
                "N x L",
            )?;
        }
        self.model.set_sensitivities(sensitivities)?;
        self.changed();
        Ok(())
    }

    /// Cartesian FFT mode: the samples are the grid points where `mask`
    /// (nx·ny·nz bytes, column-major) is non-zero, in column-major order,
    /// so nsamples must equal their count. Needs positions on an
    /// axis-aligned grid (`set_grid_positions`, or `set_positions` with such
    /// a grid). Sets the phase model to the trajectory
    /// k_a = 2π(p_a − ⌊n_a/2⌋)/fov_a of those points (so [`Model::features`]
    /// still describes E) and computes E, Eᴴ and EᴴE exactly with FFTs.
    /// Any later positions or phase-model setter leaves Cartesian mode
    /// (the trajectory stays until replaced, computed by the phase sum);
    /// off-resonance is refused in Cartesian mode.
    pub fn set_cartesian(&mut self, mask: &[u8]) -> Result<()> {
        expect_len("mask", mask.len(), self.sizes().voxels, "N = nx*ny*nz")?;
        if self.model.off_resonance.is_some() {
            return Err(Error::invalid(
                "Cartesian mode cannot include off-resonance: the FFT cannot apply a per-voxel, \
                 time-dependent phase (clear it with set_off_resonance(NULL) first)",
            ));
        }
        let positions = self.model.positions.as_ref().ok_or_else(|| {
            Error::incomplete(
                "set_cartesian needs the grid: set positions first (horecon_set_grid_positions)",
            )
        })?;
        let cartesian = Cartesian::new(self.sizes(), positions, mask)?;
        let k = cartesian.trajectory()?;
        self.model.set_trajectory(3, &k)?;
        self.cartesian = Some(Arc::new(cartesian));
        self.changed();
        Ok(())
    }

    /// The Cartesian sampling when the plan is in Cartesian FFT mode.
    pub fn cartesian(&self) -> Option<&Cartesian> {
        self.cartesian.as_deref()
    }

    /// Builds the operator of the current model on the plan's backend: the
    /// Cartesian FFT operator in Cartesian mode, else the phase sum.
    /// The backend of the FFT-based operators (Toeplitz, Cartesian): the
    /// plan's, except that an AUTO plan on a GPU without cuFFT computes them
    /// on the CPU, silently, as AUTO does without a GPU (a plan that asked for
    /// CUDA gets BACKEND_UNAVAILABLE with the reason).
    fn fft_backend(&self) -> BackendKind {
        let auto = self.options.backend == BackendKind::Auto;
        if auto && self.backend == BackendKind::Cuda && !backend::cuda_fft_available() {
            BackendKind::Cpu
        } else {
            self.backend
        }
    }

    fn build_operator(&self) -> Result<Arc<dyn EncodingOperator>> {
        Ok(match &self.cartesian {
            Some(cartesian) => {
                self.model.check_complete()?;
                Arc::from(backend::build_cartesian(
                    self.fft_backend(),
                    cartesian.clone(),
                    self.model.sensitivities.as_deref(),
                    self.sizes(),
                    &self.options,
                    self.pool.clone(),
                )?)
            }
            None => {
                // On the plan's threads, never rayon's global pool (the
                // features run parallel loops; a GPU operator lays out its
                // sides on the host).
                Arc::from(self.on_pool(|| {
                    let features = self.model.features()?;
                    backend::build(
                        self.backend,
                        &features,
                        self.sizes(),
                        &self.options,
                        self.pool.clone(),
                    )
                })?)
            }
        })
    }

    /// The operator for the current model, built on first use: the fast
    /// path's when it is in use ([`Plan::set_approximation`]).
    pub fn operator(&self) -> Result<Arc<dyn EncodingOperator>> {
        if let Some(fast) = self.fast_operator()? {
            return Ok(fast);
        }
        let mut slot = self.operator.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(op) = slot.as_ref() {
            return Ok(op.clone());
        }
        let op = self.build_operator()?;
        *slot = Some(op.clone());
        Ok(op)
    }

    /// Enables (or disables) the Toeplitz normal operator for `normal` and
    /// `cg` ([`crate::model::toeplitz`]): EᴴWE through FFTs of the
    /// 2×-oversampled grid. `time_segments` is L of the off-resonance time
    /// segmentation (0 = the fewest segments with interpolation error ≤ 2e-4,
    /// normal operator within 1e-3; ignored without off-resonance); < 0 is an error.
    ///
    /// The model is checked lazily, when `normal` or `cg` next builds the
    /// operator (so this may be called before the model is set): a phase
    /// model with non-zero terms above order 1, a user basis, or voxels off
    /// a lattice then fail there with `InvalidArgument` naming the reason.
    /// Forward and adjoint stay exact and are unaffected.
    pub fn set_toeplitz(&mut self, enable: bool, time_segments: i32) -> Result<()> {
        let max = crate::model::toeplitz::MAX_TIME_SEGMENTS;
        let segments = usize::try_from(time_segments)
            .ok()
            .filter(|&s| s <= max)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "time_segments must be 0 (automatic) to {max}, got {time_segments}"
                ))
            })?;
        self.toeplitz = enable.then_some(segments);
        // E and Eᴴ (and the fast path, which takes precedence) stay as built.
        *self
            .toeplitz_operator
            .get_mut()
            .unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// `Some(time_segments)` when the Toeplitz normal operator is enabled.
    pub fn toeplitz(&self) -> Option<usize> {
        self.toeplitz
    }

    /// The Toeplitz spec of the current model (segments, interpolation
    /// error), or the reason it has none; regardless of whether Toeplitz is enabled.
    pub fn toeplitz_spec(&self, time_segments: usize) -> Result<ToeplitzSpec> {
        self.on_pool(|| ToeplitzSpec::new(&self.model, time_segments))
    }

    /// `f` on the plan's threads with the current call's progress span:
    /// every parallel loop of the library runs on the plan's pool, never on
    /// rayon's global one (whose threads, one per core, a plan of
    /// `num_threads` must not start).
    pub(crate) fn on_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        crate::progress::Progress::current().install(&self.pool, f)
    }

    /// The operator `normal` and `cg` use: the Toeplitz one when enabled
    /// (and not in Cartesian mode, whose FFTs are exact and cheaper), else
    /// [`Plan::operator`].
    pub fn normal_operator(&self) -> Result<Arc<dyn EncodingOperator>> {
        if let Some(fast) = self.fast_operator()? {
            return Ok(fast);
        }
        let Some(segments) = self.toeplitz.filter(|_| self.cartesian.is_none()) else {
            return self.operator();
        };
        let mut slot = self
            .toeplitz_operator
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(op) = slot.as_ref() {
            return Ok(op.clone());
        }
        let model = &self.model;
        let op: Arc<dyn EncodingOperator> = Arc::from(self.on_pool(|| {
            backend::build_toeplitz(
                self.fft_backend(),
                &model.features()?,
                move || ToeplitzSpec::new(model, segments),
                self.sizes(),
                &self.options,
                self.pool.clone(),
            )
        })?);
        *slot = Some(op.clone());
        Ok(op)
    }

    fn check_image(&self, argument: &str, image: &[Complex32]) -> Result<()> {
        expect_len(argument, image.len(), self.sizes().voxels, "N = nx*ny*nz")
    }

    fn check_data(&self, argument: &str, data: &[Complex32]) -> Result<()> {
        let s = self.sizes();
        expect_len(argument, data.len(), s.samples * s.coils, "M x L")
    }

    /// d = E ρ (MODEL.md).
    pub fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        self.check_image("image", image)?;
        self.check_data("data", data)?;
        self.on_pool(|| check_finite("image", image))?;
        self.run(Call::Forward, || self.operator()?.forward(image, data))?;
        self.on_pool(|| check_result("data", data))
    }

    /// ρ = Eᴴ d.
    pub fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        self.check_data("data", data)?;
        self.check_image("image", image)?;
        self.on_pool(|| check_finite("data", data))?;
        self.run(Call::Adjoint, || self.operator()?.adjoint(data, image))?;
        self.on_pool(|| check_result("image", image))
    }

    /// out = Eᴴ E ρ.
    pub fn normal(&self, image: &[Complex32], out: &mut [Complex32]) -> Result<()> {
        self.check_image("image", image)?;
        self.check_image("out", out)?;
        self.on_pool(|| check_finite("image", image))?;
        self.run(Call::Normal, || {
            self.normal_operator()?.normal(image, out, None)
        })?;
        self.on_pool(|| check_result("out", out))
    }

    /// Conjugate gradient on (EᴴWE + λR)ρ = EᴴWd. `image` holds the start
    /// when `warm_start`, and receives the solution. On error (cancellation
    /// included) `image` is left untouched.
    ///
    /// Total variation and Laplace run `reweightings` outer CG solves
    /// ([`crate::solver::reweight`]); the returned iterations are their
    /// total, `converged` and `rel_residual` those of the last one.
    pub fn cg(
        &self,
        data: &[Complex32],
        options: &CgOptions<'_>,
        image: &mut [Complex32],
    ) -> Result<CgInfo> {
        let s = self.sizes();
        self.check_data("data", data)?;
        self.check_image("image", image)?;
        check_finite("data", data)?;
        if options.warm_start {
            check_finite("image (warm start)", image)?;
        }
        if !(options.tolerance.is_finite() && options.tolerance >= 0.0) {
            return Err(Error::invalid(format!(
                "tolerance must be finite and >= 0, got {}",
                options.tolerance
            )));
        }
        if !(options.lambda.is_finite() && options.lambda >= 0.0) {
            return Err(Error::invalid(format!(
                "lambda must be finite and >= 0, got {}",
                options.lambda
            )));
        }
        if let Some(w) = options.sample_weights {
            expect_len("sample_weights", w.len(), s.samples, "M")?;
            check_finite("sample_weights", w)?;
            if let Some(i) = w.iter().position(|&v| v < 0.0) {
                return Err(Error::invalid(format!(
                    "sample_weights[{i}] = {} is negative",
                    w[i]
                )));
            }
        }
        check_regularizer_options(options, s)?;
        let verbosity = self.options.verbosity;
        let user = options.progress;
        let progress = move |iteration: usize, rel: f64| {
            if verbosity >= 2 {
                eprintln!("horecon cg: iteration {iteration:4}  relative residual {rel:.3e}");
            }
            user.is_some_and(|f| f(iteration, rel))
        };
        let start = std::time::Instant::now();
        let mut solution = crate::error::try_copy(image, "image")?;
        let (report, op): (CgReport, _) = self.run(Call::Cg, || {
            // Inside the call: building a Toeplitz operator (time segmentation) takes a while.
            let op = self.normal_operator()?;
            let preconditioner = self.preconditioner(op.as_ref(), options)?;
            let residual =
                |x: &[num_complex::Complex64]| self.data_residual(op.as_ref(), data, options, x);
            let discrepancy = self.discrepancy(data, options, &residual)?;
            let problem = CgProblem {
                data,
                sample_weights: options.sample_weights,
                regularizer: options.regularizer,
                lambda: options.lambda,
                fd_weights: options.fd_weights,
                neighbourhood: options.neighbourhood,
                reweightings: options.reweightings,
                epsilon: options.epsilon,
                sigma: options.sigma,
                max_iterations: options.max_iterations,
                tolerance: options.tolerance,
                residual_floor: crate::solver::residual_floor(self.options.precision),
                warm_start: options.warm_start,
                progress: Some(&progress),
                preconditioner: preconditioner.as_ref(),
                discrepancy,
            };
            Ok((op.solve(&problem, &mut solution)?, op))
        })?;
        check_result("image (the solution)", &solution)?;
        image.copy_from_slice(&solution);
        let info = CgInfo {
            iterations: report.iterations,
            converged: report.converged,
            rel_residual: report.rel_residual,
            seconds: start.elapsed().as_secs_f64(),
            stop_reason: report.stop,
            data_residual: report.data_residual,
        };
        if verbosity >= 1 {
            eprintln!(
                "horecon cg: {} iterations, relative residual {:.3e}, {}, {:.3} s on {}",
                info.iterations,
                info.rel_residual,
                if info.converged {
                    "converged"
                } else {
                    "not converged"
                },
                info.seconds,
                op.backend_name()
            );
        }
        Ok(info)
    }
}
