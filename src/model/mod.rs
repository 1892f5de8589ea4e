//! The encoding model of MODEL.md as plain, validated host data.
//!
//! φ(j, n) = Σ_b k_b(t_j)·h_b(r_n) + ω_n·t_j,   E[(j,c), n] = S_c(r_n)·exp(+i·φ(j, n)).
//!
//! All arrays use MODEL.md's layouts, first index fastest. The model knows
//! nothing of backends: they consume its [`Features`].

pub mod cartesian;
pub mod grid;
pub mod harmonics;
/// cbindgen:ignore
pub mod kernel_basis;
pub mod lattice;
pub mod row_space;
/// cbindgen:ignore
pub mod separation;
// Rust-only constants: cbindgen skips the module (the C API documents them in words).
/// cbindgen:ignore
pub mod toeplitz;

use crate::error::{try_copy, try_vec, Error, Result};
use num_complex::Complex32;
use std::sync::Arc;

/// A read-only array that the plan, its features and its operators (or
/// an operator's parts) hold at once without copying it: the coil
/// sensitivities (N×L complex values, 737 MB for ho3d-1mm) and the phase's
/// voxel and sample features.
#[derive(Clone, Debug, PartialEq)]
pub struct Shared<T>(Arc<Vec<T>>);

impl<T> From<Vec<T>> for Shared<T> {
    fn from(values: Vec<T>) -> Shared<T> {
        Shared(Arc::new(values))
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

/// Σ_c |S_c(r_v)|², the coils' energy at voxel v, of coil maps
/// `sensitivities` (N×L, voxel fastest, N = `voxels`).
pub fn coil_energy(sensitivities: &[Complex32], voxels: usize, v: usize) -> f64 {
    sensitivities
        .iter()
        .skip(v)
        .step_by(voxels.max(1))
        .map(|s| s.norm_sqr() as f64)
        .sum()
}

/// Problem sizes: N voxels on an nx×ny×nz grid, M samples per coil, L coils.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub dims: [usize; 3],
    pub voxels: usize,
    pub samples: usize,
    pub coils: usize,
}

/// Largest number of elements of any one array: keeps every byte count
/// (elements × 16 bytes × a few) far from overflowing isize.
const MAX_ELEMENTS: usize = 1 << 40;

impl Sizes {
    /// Checks counts given through the C API (signed there).
    pub fn new(nx: i64, ny: i64, nz: i64, ncoils: i64, nsamples: i64) -> Result<Sizes> {
        for (name, v) in [
            ("nx", nx),
            ("ny", ny),
            ("nz", nz),
            ("ncoils", ncoils),
            ("nsamples", nsamples),
        ] {
            if v < 1 {
                return Err(Error::invalid(format!("{name} must be >= 1, got {v}")));
            }
            if v as u64 > MAX_ELEMENTS as u64 {
                return Err(Error::invalid(format!("{name} = {v} is too large")));
            }
        }
        let dims = [nx as usize, ny as usize, nz as usize];
        let voxels = dims[0]
            .checked_mul(dims[1])
            .and_then(|v| v.checked_mul(dims[2]))
            .filter(|&v| v <= MAX_ELEMENTS / 64)
            .ok_or_else(|| Error::invalid(format!("nx*ny*nz = {nx}*{ny}*{nz} is too large")))?;
        let (samples, coils) = (nsamples as usize, ncoils as usize);
        for (name, count) in [
            ("nsamples*ncoils", samples.checked_mul(coils)),
            ("nx*ny*nz*ncoils", voxels.checked_mul(coils)),
        ] {
            if count.is_none_or(|c| c > MAX_ELEMENTS / 64) {
                return Err(Error::invalid(format!("{name} is too large")));
            }
        }
        Ok(Sizes {
            dims,
            voxels,
            samples,
            coils,
        })
    }

    /// Number of grid axes with more than one voxel (at least 1).
    pub fn grid_axes(&self) -> usize {
        self.dims.iter().filter(|&&d| d > 1).count().max(1)
    }
}

pub use crate::finite::{check_finite, check_result};

/// The spatial basis h_b(r) of the phase model.
#[derive(Clone, Debug, PartialEq)]
pub enum Basis {
    /// The first `nterms` built-in real solid harmonics, evaluated at the positions.
    SolidHarmonics(usize),
    /// A plain k-space trajectory: h = (x, y, z) truncated to `ndims`.
    Trajectory(usize),
    /// A user basis, N×B (first index fastest).
    User(Vec<f64>),
}

/// A phase model: a basis and its M×B coefficients (rad/m^order).
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseModel {
    pub basis: Basis,
    pub terms: usize,
    pub coefficients: Vec<f64>,
}

/// Static off-resonance ω (N, rad/s) with the sample times t (M, s).
#[derive(Clone, Debug, PartialEq)]
pub struct OffResonance {
    pub omega: Vec<f64>,
    pub times: Vec<f64>,
}

/// Everything a plan knows about the encoding: sizes, positions, phase
/// model, off-resonance and coil sensitivities.
#[derive(Clone, Debug)]
pub struct Model {
    pub sizes: Sizes,
    pub positions: Option<Vec<f64>>,
    pub phase: Option<PhaseModel>,
    pub off_resonance: Option<OffResonance>,
    /// N×L complex sensitivities; `None` means S ≡ 1 (and L = 1).
    pub sensitivities: Option<Shared<Complex32>>,
}

impl Model {
    pub fn new(sizes: Sizes) -> Model {
        Model {
            sizes,
            positions: None,
            phase: None,
            off_resonance: None,
            sensitivities: None,
        }
    }

    pub fn set_positions(&mut self, positions: &[f64]) -> Result<()> {
        check_finite("positions", positions)?;
        self.positions = Some(try_copy(positions, "positions")?);
        Ok(())
    }

    pub fn set_grid_positions(&mut self, fov: [f64; 3], center: [f64; 3]) -> Result<()> {
        check_finite("fov", &fov)?;
        check_finite("center", &center)?;
        if let Some(axis) = fov.iter().position(|&f| f <= 0.0) {
            return Err(Error::invalid(format!(
                "fov[{axis}] must be > 0 metres, got {}",
                fov[axis]
            )));
        }
        self.positions = Some(grid::grid_positions(self.sizes.dims, fov, center)?);
        Ok(())
    }

    /// The voxel positions, or `IncompletePlan`: `what` needs them.
    pub fn require_positions(&self, what: &str) -> Result<&[f64]> {
        self.positions.as_deref().ok_or_else(|| {
            Error::incomplete(format!(
                "{what} needs positions: set positions first (horecon_set_positions or \
                 horecon_set_grid_positions)"
            ))
        })
    }

    pub fn set_solid_harmonics(&mut self, nterms: i32, coefficients: &[f64]) -> Result<()> {
        let terms = usize::try_from(nterms)
            .ok()
            .filter(|t| harmonics::SOLID_HARMONIC_TERMS.contains(t))
            .ok_or_else(|| Error::invalid(format!("nterms must be 1, 4, 9 or 16, got {nterms}")))?;
        check_finite("coefficients", coefficients)?;
        self.require_positions("set_solid_harmonics")?;
        self.phase = Some(PhaseModel {
            basis: Basis::SolidHarmonics(terms),
            terms,
            coefficients: try_copy(coefficients, "coefficients")?,
        });
        Ok(())
    }

    pub fn set_trajectory(&mut self, ndims: i32, k: &[f64]) -> Result<()> {
        let terms = usize::try_from(ndims)
            .ok()
            .filter(|d| (1..=3).contains(d))
            .ok_or_else(|| Error::invalid(format!("ndims must be 1, 2 or 3, got {ndims}")))?;
        check_finite("k", k)?;
        self.require_positions("set_trajectory")?;
        self.phase = Some(PhaseModel {
            basis: Basis::Trajectory(terms),
            terms,
            coefficients: try_copy(k, "k")?,
        });
        Ok(())
    }

    /// `nterms` has been checked ≥ 1 by the caller (it sized the slices).
    pub fn set_basis(&mut self, basis: &[f64], coefficients: &[f64]) -> Result<()> {
        check_finite("basis", basis)?;
        check_finite("coefficients", coefficients)?;
        let terms = basis.len() / self.sizes.voxels;
        self.phase = Some(PhaseModel {
            basis: Basis::User(try_copy(basis, "basis")?),
            terms,
            coefficients: try_copy(coefficients, "coefficients")?,
        });
        Ok(())
    }

    pub fn set_off_resonance(&mut self, omega_and_times: Option<(&[f64], &[f64])>) -> Result<()> {
        match omega_and_times {
            None => self.off_resonance = None,
            Some((omega, times)) => {
                check_finite("omega", omega)?;
                check_finite("times", times)?;
                self.off_resonance = Some(OffResonance {
                    omega: try_copy(omega, "omega")?,
                    times: try_copy(times, "times")?,
                });
            }
        }
        Ok(())
    }

    pub fn set_sensitivities(&mut self, sensitivities: Option<&[Complex32]>) -> Result<()> {
        match sensitivities {
            None if self.sizes.coils != 1 => Err(Error::invalid(format!(
                "sensitivities may be NULL (S = 1) only when ncoils = 1, but the plan has {} coils",
                self.sizes.coils
            ))),
            None => {
                self.sensitivities = None;
                Ok(())
            }
            Some(s) => {
                check_finite("sensitivities", s)?;
                self.sensitivities = Some(try_copy(s, "sensitivities")?.into());
                Ok(())
            }
        }
    }

    /// Checks that the operators can be applied.
    pub fn check_complete(&self) -> Result<()> {
        if !matches!(
            self.phase,
            Some(PhaseModel {
                basis: Basis::User(_),
                ..
            })
        ) {
            self.require_positions("the operator")?;
        }
        self.require_phase()?;
        if self.sizes.coils > 1 && self.sensitivities.is_none() {
            return Err(Error::incomplete(format!(
                "the plan has {} coils but no sensitivities are set (horecon_set_sensitivities)",
                self.sizes.coils
            )));
        }
        Ok(())
    }

    /// The phase model, or `IncompletePlan` naming its setters.
    pub fn require_phase(&self) -> Result<&PhaseModel> {
        self.phase.as_ref().ok_or_else(|| {
            Error::incomplete(
                "no phase model is set (horecon_set_trajectory, horecon_set_solid_harmonics or \
                 horecon_set_basis)",
            )
        })
    }

    /// Replaces the M×B coefficients of the current phase model (same basis
    /// and terms); on error the model is unchanged.
    pub fn set_coefficients(&mut self, coefficients: &[f64]) -> Result<()> {
        let m = self.sizes.samples;
        let phase = self.phase.as_mut().ok_or_else(|| {
            Error::incomplete(
                "set_coefficients needs a phase model: set one first (horecon_set_trajectory, \
                 horecon_set_solid_harmonics or horecon_set_basis)",
            )
        })?;
        if coefficients.len() != phase.coefficients.len() {
            return Err(Error::size(format!(
                "coefficients has {} elements, expected M x B = {m} x {} (the phase model's)",
                coefficients.len(),
                phase.terms
            )));
        }
        check_finite("coefficients", coefficients)?;
        phase.coefficients.copy_from_slice(coefficients);
        Ok(())
    }

    /// F = B (+1 with off-resonance), the number of features.
    fn feature_terms(&self) -> Result<usize> {
        Ok(self.require_phase()?.terms + usize::from(self.off_resonance.is_some()))
    }

    /// The voxel features v_f(n) of [`Features::voxel`] (F×N).
    pub fn voxel_features(&self) -> Result<Vec<f64>> {
        self.check_complete()?;
        let n = self.sizes.voxels;
        let phase = self.require_phase()?;
        let b = phase.terms;
        let mut voxel = try_vec(
            self.feature_terms()? * n,
            0.0f64,
            "voxel features (N x terms)",
        )?;
        match &phase.basis {
            Basis::SolidHarmonics(t) => {
                let p = self.require_positions("the solid harmonics")?;
                harmonics::evaluate(*t, p, n, &mut voxel[..t * n]);
            }
            Basis::Trajectory(d) => {
                let p = self.require_positions("the trajectory")?;
                voxel[..d * n].copy_from_slice(&p[..d * n]);
            }
            Basis::User(h) => voxel[..b * n].copy_from_slice(h),
        }
        if let Some(or) = &self.off_resonance {
            voxel[b * n..].copy_from_slice(&or.omega);
        }
        Ok(voxel)
    }

    /// The sample features a_f(j) in cycles of [`Features::sample`] (F×M).
    pub fn sample_features(&self) -> Result<Vec<f64>> {
        self.check_complete()?;
        let m = self.sizes.samples;
        let phase = self.require_phase()?;
        let b = phase.terms;
        let mut sample = try_vec(
            self.feature_terms()? * m,
            0.0f64,
            "sample features (M x terms)",
        )?;
        let cycles = 1.0 / (2.0 * std::f64::consts::PI);
        for (s, k) in sample[..b * m].iter_mut().zip(&phase.coefficients) {
            *s = k * cycles;
        }
        if let Some(or) = &self.off_resonance {
            for (s, t) in sample[b * m..].iter_mut().zip(&or.times) {
                *s = t * cycles;
            }
        }
        Ok(sample)
    }

    /// The phase as a bilinear form in cycles, ready for a backend.
    pub fn features(&self) -> Result<Features> {
        self.check_complete()?;
        Ok(Features {
            terms: self.feature_terms()?,
            voxel: self.voxel_features()?.into(),
            sample: self.sample_features()?.into(),
            sensitivities: self.sensitivities.clone(),
        })
    }
}

/// The phase in cycles as a sum of products, φ(j,n)/2π = Σ_f a_f(j)·v_f(n),
/// with off-resonance as one more term (v = ω, a = t/2π).
#[derive(Clone, Debug)]
pub struct Features {
    /// F = B (+1 with off-resonance).
    pub terms: usize,
    /// v_f(n): F×N, voxel index fastest (shared by the parts of a split operator).
    pub voxel: Shared<f64>,
    /// a_f(j) in cycles: F×M, sample index fastest (shared likewise).
    pub sample: Shared<f64>,
    /// N×L, or `None` for S ≡ 1 (the plan's own array, shared).
    pub sensitivities: Option<Shared<Complex32>>,
}
