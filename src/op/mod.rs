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

/// The result of a conjugate-gradient solve.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CgReport {
    pub iterations: usize,
    pub converged: bool,
    pub rel_residual: f64,
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
    /// A short name of where it runs ("cpu", "cuda:0").
    fn backend_name(&self) -> String;
}
