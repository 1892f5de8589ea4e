//! The fast path of a plan (issue 17; FAST-PATH.md): with an approximation
//! tolerance > 0, E, Eᴴ, Fᴴd, EᴴWE and CG use the separated operator
//! ([`crate::backend::fast`]) when the voxels are on a lattice, with its
//! error measured against the exact operator when it is built; otherwise
//! the exact path, with the reason kept for [`Plan::approximation_info`].

use super::Plan;
use crate::backend::cuda;
use crate::backend::fast::coils::CoilCompression;
use crate::backend::fast::{certificate, nufft_tolerance, FastOperator};
use crate::error::{Error, Result, Status};
use crate::model::separation::expansion::{SAMPLE_VOXELS, WIDER_SAMPLE};
use crate::model::separation::{Separation, Target};
use crate::op::EncodingOperator;
use crate::plan::BackendKind;
use std::sync::Arc;

/// Whether CUDA plans run the fast path device-resident ([`cuda::fast::CudaFast`]):
/// yes unless `HORECON_CUDA_FAST_DEVICE=0` (then the CPU-side products with
/// the NUFFTs through the CUDA executor's host interface, the earlier path).
fn device_resident() -> bool {
    crate::backend::cuda::memory::setting("HORECON_CUDA_FAST_DEVICE") != Some(0)
}

/// Whether the fast path may compress the coils ([`CoilCompression`]): yes
/// unless `HORECON_COIL_COMPRESSION=0` (a benchmark knob: the plan's coils
/// as they are).
fn coil_compression() -> bool {
    crate::backend::cuda::memory::setting("HORECON_COIL_COMPRESSION") != Some(0)
}

/// The smallest tolerance accepted (float32 data and NUFFTs).
pub const MIN_APPROXIMATION: f64 = 1e-5;
/// The largest tolerance accepted.
pub const MAX_APPROXIMATION: f64 = 0.1;
/// The share of the tolerance given to the expansion (the NUFFT is asked for 0.9
/// of it and errs 3–5× less than asked in l2, `backend::fast::nufft_tolerance`):
/// E and Eᴴ then stay near half the tolerance, and EᴴE, which carries both
/// errors, within it.
const EXPANSION_SHARE: f64 = 0.45;
/// The share of the tolerance the coil compression may take
/// ([`CoilCompression`]): its error adds to the expansion's in quadrature
/// (0.45 and 0.15 make 0.47), and it is known exactly.
const COIL_SHARE: f64 = 0.15;
/// The largest certificate, as a share of the tolerance, with which the fast
/// path is used. A first build above it is built once more from
/// [`WIDER_SAMPLE`] times the drawn voxels, its expansion's aim scaled by
/// half the ratio of this share to the measured error; above it again (or
/// not finite), the plan stays exact and says so.
/// Healthy builds measure 0.2–0.5 of the tolerance (fuzzing: true errors ≤
/// 0.42 of it, certificates 0.68–1.23× the true error); a drawn sample can
/// miss rare combinations of basis values (a rough off-resonance map over
/// higher orders: 1,367 of 3,840 voxels fitted to 1.2e-4, the operator off
/// by 2.4e-3 at a tolerance of 1e-3), and the certificate, within 3× of the
/// true error, may fall short of it by up to that factor.
const ACCEPTED_SHARE: f64 = 0.6;
/// The share of the tolerance that plans with few outputs
/// ([`certificate::few_outputs`]) are built for, expansion and NUFFT alike
/// (a term or two more, a wider kernel: cheap there): a single image's (or
/// data set's) error strays several times from the RMS that the tolerance
/// bounds there (fuzzing: up to 5× on N = 24 … 1,335 or M·L = 7 … 184,
/// where E has few large singular values). Where 64 terms cannot reach that
/// aim the expansion is the one for [`EXPANSION_SHARE`] of the tolerance
/// itself.
const FEW_OUTPUTS_MARGIN: f64 = 1.0 / 3.0;

/// The tolerance the fast path of a plan of `sizes` is built for
/// ([`FEW_OUTPUTS_MARGIN`]).
fn working_tolerance(tolerance: f64, sizes: crate::model::Sizes) -> f64 {
    if certificate::few_outputs(sizes) {
        FEW_OUTPUTS_MARGIN * tolerance
    } else {
        tolerance
    }
}

/// What [`Plan::approximation_info`] reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApproximationInfo {
    /// The fast path is in use.
    pub active: bool,
    /// K, the terms of the expansion (0 when inactive).
    pub rank: usize,
    /// The larger relative RMS error of E and Eᴴ measured against the exact
    /// operator on random probes when the plan was prepared.
    pub estimated_error: f64,
    /// Why the fast path is not in use; when in use, what limits it (a
    /// plan of several devices runs it on the first only), else "".
    pub reason: String,
}

/// The fast path of the current model: its operator, or why there is none.
pub(super) struct FastPath {
    pub operator: Option<Arc<dyn EncodingOperator>>,
    pub info: ApproximationInfo,
}

fn inactive(reason: impl Into<String>) -> FastPath {
    FastPath {
        operator: None,
        info: ApproximationInfo {
            reason: reason.into(),
            ..ApproximationInfo::default()
        },
    }
}

impl Plan {
    /// Sets the approximation tolerance: 0 (the default) = exact direct sums;
    /// in [1e-5, 0.1] = the fast path, with E's and Eᴴ's relative RMS error
    /// against the exact operator ≤ tolerance. Anything else is `InvalidArgument`.
    pub fn set_approximation(&mut self, tolerance: f64) -> Result<()> {
        if !(tolerance == 0.0 || (MIN_APPROXIMATION..=MAX_APPROXIMATION).contains(&tolerance)) {
            return Err(Error::invalid(format!(
                "tolerance must be 0 (exact) or in [{MIN_APPROXIMATION:e}, {MAX_APPROXIMATION}], got {tolerance}"
            )));
        }
        self.approximation = tolerance;
        // The exact operators (and Toeplitz's) stay as built.
        *self.fast.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// The approximation tolerance (0 = exact).
    pub fn approximation(&self) -> f64 {
        self.approximation
    }

    /// Whether the fast path is in use, its rank and its measured error, or
    /// why not. Prepares the plan (builds the operator) when it is not yet:
    /// an incomplete model is `IncompletePlan`.
    pub fn approximation_info(&self) -> Result<ApproximationInfo> {
        if self.approximation == 0.0 {
            return Ok(inactive("the approximation tolerance is 0: exact operators").info);
        }
        if self.cartesian.is_some() {
            return Ok(inactive("Cartesian mode computes the operators exactly with FFTs").info);
        }
        self.fast_path(|fast| fast.info.clone())
    }

    /// The fast operator when the fast path is in use.
    pub(super) fn fast_operator(&self) -> Result<Option<Arc<dyn EncodingOperator>>> {
        if self.approximation == 0.0 || self.cartesian.is_some() {
            return Ok(None);
        }
        self.fast_path(|fast| fast.operator.clone())
    }

    fn fast_path<T>(&self, read: impl FnOnce(&FastPath) -> T) -> Result<T> {
        let mut slot = self.fast.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            // On the plan's threads (never rayon's global pool).
            let progress = crate::progress::Progress::current();
            *slot = Some(progress.install(&self.pool, || self.build_fast_path())?);
        }
        slot.as_ref()
            .map(read)
            .ok_or_else(|| Error::internal("fast path missing after its build"))
    }

    fn build_fast_path(&self) -> Result<FastPath> {
        // Built for `tolerance` (≤ the user's), the expansion bounded by the user's.
        let tolerance = working_tolerance(self.approximation, self.sizes());
        let mut target = Target {
            aim: EXPANSION_SHARE * tolerance,
            bound: EXPANSION_SHARE * self.approximation,
            voxels: SAMPLE_VOXELS,
        };
        let accepted = ACCEPTED_SHARE * self.approximation;
        // Reasons fit the C API's 160 bytes (`horecon_approximation_info`).
        let above = |fast: &FastPath| {
            let measured = fast.info.estimated_error;
            measured > accepted || measured.is_nan()
        };
        let first = self.fast_attempt(tolerance, target)?;
        if !first.info.active || !above(&first) {
            return Ok(first);
        }
        let measured = first.info.estimated_error;
        drop(first); // before the rebuild (device memory)
        if !measured.is_finite() {
            return Ok(inactive(format!(
                "measured error {measured:.2e}: exact operators"
            )));
        }
        target.voxels = WIDER_SAMPLE * SAMPLE_VOXELS;
        target.aim *= 0.5 * accepted / measured;
        let fast = self.fast_attempt(tolerance, target)?;
        Ok(if !fast.info.active {
            inactive(format!(
                "rebuilt after a measured error of {measured:.1e}: {}",
                fast.info.reason
            ))
        } else if above(&fast) {
            inactive(format!(
                "measured error {measured:.1e}, rebuilt {:.1e} (K = {}): above {ACCEPTED_SHARE} of the \
                 tolerance {:.0e}, exact operators",
                fast.info.estimated_error, fast.info.rank, self.approximation
            ))
        } else {
            fast
        })
    }

    /// One build of the fast path for `tolerance` with the expansion's
    /// `target`: its operator and certificate, or (inactive) why the model
    /// has none.
    fn fast_attempt(&self, tolerance: f64, target: Target) -> Result<FastPath> {
        let started = std::time::Instant::now();
        let features = self.model.features()?;
        let featured = started.elapsed().as_secs_f64();
        let separation = match Separation::new(&self.model, &features, target) {
            Ok(s) => s,
            Err(e) if e.status == Status::InvalidArgument => return Ok(inactive(e.message)),
            Err(e) => return Err(e),
        };
        let sizes = self.sizes();
        let compression = match self.model.sensitivities.as_deref() {
            Some(s) if coil_compression() && !self.split_by_coils() => {
                CoilCompression::new(s, sizes.voxels, COIL_SHARE * tolerance)?.map(Arc::new)
            }
            _ => None,
        };
        let separated = started.elapsed().as_secs_f64();
        let sensitivities = self.model.sensitivities.as_deref();
        // The certificate, with sparse probes: through the plan's operator,
        // or on the CPU (an application ∝ L·M, a build cheap) through the
        // probed rows of a few coils.
        let cpu = match self.backend {
            BackendKind::Cpu => Some(Arc::new(self.cpu_operator(
                &separation,
                compression.clone(),
                tolerance,
                sizes,
            )?)),
            _ => None,
        };
        let operator: Arc<dyn EncodingOperator> = match &cpu {
            Some(fast) => fast.clone(),
            None => self.separated_operator(&separation, compression.clone(), tolerance, sizes)?,
        };
        let built = started.elapsed().as_secs_f64();
        let probes =
            certificate::probe_count(separation.rank, separation.lattice.grid_points(), sizes);
        let estimated_error = match &cpu {
            // The entries probe the expansion and the NUFFTs on the plan's
            // coils; the compression's known error adds in quadrature.
            Some(fast) => certificate::estimate_by_entries(
                fast,
                &separation,
                (features, sizes),
                probes,
                &self.options,
                self.pool.clone(),
            )?
            .hypot(compression.as_ref().map_or(0.0, |c| c.error)),
            None => certificate::estimate(
                &certificate::Whole(operator.as_ref(), sizes),
                (&features, sizes),
                &certificate::suspects(&separation, None, sensitivities)?,
                probes,
                &self.options,
                self.pool.clone(),
            )?,
        };
        if self.options.verbosity >= 2 {
            eprintln!(
                "horecon: fast path set-up: features {featured:.3} s, expansion (K = {}, {} voxels \
                 drawn) {:.3} s, operator {:.3} s, certificate {:.3} s ({estimated_error:.2e}); {}",
                separation.rank,
                target.voxels,
                separated - featured,
                built - separated,
                started.elapsed().as_secs_f64() - built,
                operator.backend_name()
            );
        }
        Ok(FastPath {
            operator: Some(operator),
            info: ApproximationInfo {
                active: true,
                rank: separation.rank,
                estimated_error,
                reason: String::new(),
            },
        })
    }

    /// Whether the fast operator will be split by coils over several CUDA
    /// devices ([`cuda::build_fast`]), whose parts keep the plan's coils: no
    /// coil compression is computed for it.
    fn split_by_coils(&self) -> bool {
        self.backend == BackendKind::Cuda
            && device_resident()
            && self.sizes().coils > 1
            && cuda::placement(&self.options).is_ok_and(|devices| devices.len() > 1)
    }

    /// The fast operator of `separation` with the plan's coils (`sizes`),
    /// on the virtual coils of `compression` when given, on the plan's
    /// backend (device-resident on CUDA when possible), with NUFFTs for
    /// `tolerance`.
    fn separated_operator(
        &self,
        separation: &Separation,
        compression: Option<Arc<CoilCompression>>,
        tolerance: f64,
        sizes: crate::model::Sizes,
    ) -> Result<Arc<dyn EncodingOperator>> {
        let nufft = nufft_tolerance(tolerance, self.options.precision);
        if self.backend == BackendKind::Cuda && device_resident() {
            let coils = (self.model.sensitivities.as_deref(), compression.as_deref());
            match cuda::build_fast(separation, coils, sizes, nufft, &self.options) {
                Err(e) if e.status == Status::BackendUnavailable => {}
                built => return Ok(Arc::from(built?)),
            }
        }
        Ok(Arc::new(self.cpu_operator(
            separation,
            compression,
            tolerance,
            sizes,
        )?))
    }

    /// The fast operator with host arrays (NUFFTs on the plan's backend),
    /// sharing the plan's sensitivities (or `compression`'s virtual maps).
    fn cpu_operator(
        &self,
        separation: &Separation,
        compression: Option<Arc<CoilCompression>>,
        tolerance: f64,
        sizes: crate::model::Sizes,
    ) -> Result<FastOperator> {
        let device = usize::try_from(self.options.device).map_err(|_| {
            Error::invalid(format!("device must be >= 0, got {}", self.options.device))
        })?;
        FastOperator::new(
            separation,
            (self.model.sensitivities.clone(), compression),
            sizes,
            nufft_tolerance(tolerance, self.options.precision),
            (self.backend, device),
            self.pool.clone(),
        )
    }
}
