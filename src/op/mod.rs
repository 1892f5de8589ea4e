//! The encoding operator E of one plan, as every backend provides it.

use crate::error::Result;
use crate::solver::CgProblem;
use num_complex::Complex32;

/// Arithmetic of the operators (MODEL.md's accuracy classes).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// float32 accumulation, phase kept in float64 and reduced exactly: ≤ 1e-5.
    #[default]
    Accurate = 0,
    /// float32 phase and short sin/cos polynomials (hardware sin/cos on GPUs): ≤ 1e-3.
    Fast = 1,
    /// float64 throughout: ≤ 1e-7.
    Double = 2,
}

impl Precision {
    pub fn from_code(code: i32) -> Option<Precision> {
        [Precision::Accurate, Precision::Fast, Precision::Double]
            .into_iter()
            .find(|p| *p as i32 == code)
    }
}

/// "accurate", "fast" or "double" (the bindings' and examples' names).
impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(name: &str) -> std::result::Result<Precision, String> {
        match name {
            "accurate" => Ok(Precision::Accurate),
            "fast" => Ok(Precision::Fast),
            "double" => Ok(Precision::Double),
            other => Err(format!(
                "precision must be accurate, fast or double, got {other}"
            )),
        }
    }
}

/// Why a conjugate-gradient solve stopped (`horecon_cg_info.stop_reason`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StopReason {
    /// ‖b − Aρ‖/‖b‖ reached the tolerance, or the rounding level of the
    /// plan's arithmetic (`CgProblem::residual_floor`; also: b = 0).
    Tolerance = 1,
    /// `max_iterations` were done.
    #[default]
    MaxIterations = 2,
    /// The data residual reached the discrepancy threshold τ·σ·sqrt(L·Σw).
    Discrepancy = 3,
    /// No further progress possible (pᴴAp ≤ 0: A singular along p).
    Breakdown = 4,
}

/// The result of a conjugate-gradient solve.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CgReport {
    pub iterations: usize,
    pub converged: bool,
    pub rel_residual: f64,
    pub stop: StopReason,
    /// ‖W^{1/2}(Eρ − d)‖ of the result, computed when the discrepancy rule is on.
    pub data_residual: Option<f64>,
}

/// E (samples·coils × voxels) of MODEL.md applied on the fly:
///
/// - forward: d_{j,c} = Σ_n S_c(r_n)·exp(+i·φ(j,n))·ρ_n
/// - adjoint: ρ̂_n = Σ_c conj(S_c(r_n)) Σ_j exp(−i·φ(j,n))·d_{j,c}
/// - normal:  Eᴴ W E ρ with optional per-sample weights W (shared by coils)
///
/// Images are N, data M×L (sample index fastest). Implementations are
/// `Send + Sync`: one operator may be applied from several threads at once.
pub trait EncodingOperator: Send + Sync {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()>;
    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()>;
    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()>;
    /// Conjugate gradient on (EᴴWE + λR)ρ = EᴴWd with the vectors kept where
    /// the backend computes (so a GPU solve moves data up once, the image down once).
    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport>;
    /// Takes new sample features in place, when only they changed: `sample`
    /// is the new F×M a_f(j) of [`crate::model::Features::sample`], `voxel`
    /// the F×N v_f(n) the operator was built with (unchanged, as are the
    /// sizes, sensitivities and precision: the caller guarantees it). `Ok(true)`:
    /// the operator now computes what one built from the new features would;
    /// `Ok(false)`: it cannot update in place and is unchanged (rebuild it).
    /// After an error it may be half updated: drop it. By default `Ok(false)`.
    fn update_samples(&mut self, voxel: &[f64], sample: &[f64]) -> Result<bool> {
        let _ = (voxel, sample);
        Ok(false)
    }
    /// A short name of where it runs ("cpu", "cuda:0").
    fn backend_name(&self) -> String;
    /// For a Toeplitz normal operator: the summed kernel spectrum
    /// Σ_{l,l'} FFT(T_{l,l'})/(2^d N) for the sample weights (the kernel at the
    /// centre of the off-resonance range; [`crate::model::toeplitz`]) on the
    /// kernel grid, and that grid's dims. `None` for other operators.
    fn toeplitz_kernel(
        &self,
        weights: Option<&[f32]>,
    ) -> Result<Option<(Vec<num_complex::Complex64>, [usize; 3])>> {
        let _ = weights;
        Ok(None)
    }
}
