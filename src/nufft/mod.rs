//! Non-uniform FFTs of types 1 and 2 (FINUFFT's conventions), used by the
//! Toeplitz kernels, gridding and the fast paths, and exported as a
//! standalone C API (`horecon_nufft_*`).
//!
//! For points x_j ∈ ℝ^d (radians; any value, reduced modulo 2π), modes
//! k ∈ K = Π_a {−⌊n_a/2⌋, …, ⌈n_a/2⌉ − 1} and sign s = ±1:
//!
//! - type 1 (non-uniform → grid): $f_k = \sum_j c_j\, e^{s i k\cdot x_j}$
//! - type 2 (grid → non-uniform): $c_j = \sum_k f_k\, e^{s i k\cdot x_j}$
//!
//! Grids are stored first axis fastest with mode −⌊n/2⌋ + i at index i.
//! Type 1 with sign s and type 2 with sign −s are adjoint to each other.
//!
//! Method (FAST-PATH.md §2): spread the c_j onto a fine grid of n_f ≈ σn
//! cells per axis with the ES kernel ([`params`]), FFT, and divide by the
//! kernel's Fourier transform ([`deconvolution`]); type 2 runs the steps
//! backwards. [`direct`] holds the float64 direct sums the tests compare
//! against.

pub mod cpu;
pub mod deconvolution;
pub mod direct;
pub mod params;
pub mod plan;

pub use params::{KernelParams, Upsampling};
pub use plan::Nufft;

use crate::backend::cpu::real::Real;
use crate::error::{Error, Result};
use crate::finite::Finite;
use num_complex::{Complex, Complex32, Complex64};

/// Which sum a transform computes (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NufftType {
    /// Non-uniform points → uniform modes.
    One = 1,
    /// Uniform modes → non-uniform points.
    Two = 2,
}

impl NufftType {
    pub fn from_code(code: i32) -> Result<NufftType> {
        match code {
            1 => Ok(NufftType::One),
            2 => Ok(NufftType::Two),
            other => Err(Error::invalid(format!("type must be 1 or 2, got {other}"))),
        }
    }
}

/// The modes of a transform: n_a per axis, 1 on the axes beyond `ndims`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modes {
    /// d, 1 to 3.
    pub ndims: usize,
    /// n_0, n_1, n_2 (1 beyond `ndims`).
    pub sizes: [usize; 3],
}

impl Modes {
    /// Checks d ∈ {1, 2, 3} and every n_a ≥ 1 with a total that fits memory arithmetic.
    pub fn new(ndims: i32, sizes: &[i64]) -> Result<Modes> {
        let d = usize::try_from(ndims)
            .ok()
            .filter(|d| (1..=3).contains(d))
            .ok_or_else(|| Error::invalid(format!("ndims must be 1, 2 or 3, got {ndims}")))?;
        if sizes.len() < d {
            return Err(Error::size(format!(
                "modes has {} entries, expected ndims = {d}",
                sizes.len()
            )));
        }
        let mut n = [1usize; 3];
        for (axis, &m) in sizes.iter().take(d).enumerate() {
            n[axis] = usize::try_from(m)
                .ok()
                .filter(|&m| m >= 1)
                .ok_or_else(|| Error::invalid(format!("modes[{axis}] must be >= 1, got {m}")))?;
        }
        n.iter()
            .try_fold(1usize, |acc, &m| acc.checked_mul(m))
            .filter(|&total| total <= isize::MAX as usize / 16)
            .ok_or_else(|| Error::invalid(format!("modes {n:?}: the grid is too large")))?;
        Ok(Modes { ndims: d, sizes: n })
    }

    /// Π n_a.
    pub fn total(&self) -> usize {
        self.sizes.iter().product()
    }

    /// The first mode of axis a, −⌊n_a/2⌋.
    pub fn first(&self, axis: usize) -> i64 {
        -((self.sizes[axis] / 2) as i64)
    }
}

/// Everything about one transform plan except its points: what the
/// backends' executors are built from.
#[derive(Clone, Debug, PartialEq)]
pub struct NufftSpec {
    pub kind: NufftType,
    pub modes: Modes,
    /// s = ±1.
    pub sign: i32,
    /// The requested relative tolerance ε.
    pub tolerance: f64,
    /// Transforms per call sharing the points (coils, time segments, ...).
    pub transforms: usize,
    /// float64 arithmetic (else float32).
    pub double: bool,
    pub kernel: KernelParams,
    /// n_f per axis (1 on singleton axes).
    pub fine: [usize; 3],
}

impl NufftSpec {
    /// Checks the arguments and chooses the kernel and fine grid;
    /// `upsampling` `None` = σ = 2.
    pub fn new(
        kind: NufftType,
        modes: Modes,
        sign: i32,
        tolerance: f64,
        transforms: i32,
        double: bool,
        upsampling: Option<Upsampling>,
    ) -> Result<NufftSpec> {
        if sign != 1 && sign != -1 {
            return Err(Error::invalid(format!("sign must be +1 or -1, got {sign}")));
        }
        let transforms = usize::try_from(transforms)
            .ok()
            .filter(|&t| t >= 1)
            .ok_or_else(|| Error::invalid(format!("ntransforms must be >= 1, got {transforms}")))?;
        let kernel = KernelParams::new(tolerance, upsampling.unwrap_or(Upsampling::Two), double)?;
        let mut fine = [1usize; 3];
        for (axis, f) in fine.iter_mut().enumerate() {
            *f = kernel.fine_size(modes.sizes[axis])?;
        }
        Ok(NufftSpec {
            kind,
            modes,
            sign,
            tolerance,
            transforms,
            double,
            kernel,
            fine,
        })
    }

    /// Points of the fine grid, Π n_f.
    pub fn fine_total(&self) -> usize {
        self.fine.iter().product()
    }
}

/// `input(t, out)` writes all of transform t's input into `out`: its modes
/// (Π n_a, type 2) or its values at the points (M, the caller's order, type 1).
/// Called in parallel for different t. With [`EachOutput`], a caller that
/// forms each transform's input from shared factors (the fast path: b_l·S_c·ρ,
/// ã_l·d_c) never holds an array of all transforms' inputs or outputs, and
/// makes no extra pass over one (issue 17's "tricks that pay").
pub type EachInput<'a> = dyn Fn(usize, &mut [Complex32]) + Sync + 'a;

/// `output(t, values)` takes transform t's output (the layout of the other
/// side of [`EachInput`]), once per t in increasing order.
pub type EachOutput<'a> = dyn FnMut(usize, &[Complex32]) + Send + 'a;

/// A transform plan with its points, as a backend computes it. Type 1
/// reads `nonuniform` (transforms × M, one vector after another) and writes
/// `grid` (transforms × Π n_a); type 2 reads `grid` and writes `nonuniform`.
/// Implementations are `Send + Sync`; lengths are checked by the caller.
pub trait NufftExecutor: Send + Sync {
    /// float32 data (arithmetic as [`NufftSpec::double`] says).
    fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()>;
    /// float32 data one transform at a time, where the executor can
    /// ([`EachInput`], [`EachOutput`]); `None` where it cannot (use
    /// [`NufftExecutor::execute`]).
    fn execute_each(
        &self,
        _input: &EachInput<'_>,
        _output: &mut EachOutput<'_>,
    ) -> Option<Result<()>> {
        None
    }
    /// float64 data.
    fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()>;
    /// Where it runs ("cpu", "cuda:0").
    fn backend_name(&self) -> String;
}

/// The caller's data types: float32 or float64 complex values.
pub trait Sample: Finite + Send + Sync {
    fn widen<T: Real>(self) -> Complex<T>;
    fn narrow<T: Real>(c: Complex<T>) -> Self;
}

impl Sample for Complex32 {
    #[inline(always)]
    fn widen<T: Real>(self) -> Complex<T> {
        Complex::new(T::from_f64(self.re as f64), T::from_f64(self.im as f64))
    }
    #[inline(always)]
    fn narrow<T: Real>(c: Complex<T>) -> Self {
        Complex32::new(c.re.to_f64() as f32, c.im.to_f64() as f32)
    }
}

impl Sample for Complex64 {
    #[inline(always)]
    fn widen<T: Real>(self) -> Complex<T> {
        Complex::new(T::from_f64(self.re), T::from_f64(self.im))
    }
    #[inline(always)]
    fn narrow<T: Real>(c: Complex<T>) -> Self {
        Complex64::new(c.re.to_f64(), c.im.to_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_checked() {
        let m = Modes::new(2, &[5, 4]).unwrap();
        assert_eq!(m.sizes, [5, 4, 1]);
        assert_eq!(m.total(), 20);
        assert_eq!(m.first(0), -2);
        assert_eq!(m.first(1), -2);
        assert!(Modes::new(0, &[]).is_err());
        assert!(Modes::new(4, &[1, 1, 1, 1]).is_err());
        assert!(Modes::new(2, &[5]).is_err());
        assert!(Modes::new(1, &[0]).is_err());
        assert!(Modes::new(3, &[1 << 30, 1 << 30, 1 << 30]).is_err());
        assert!(NufftType::from_code(3).is_err());
    }
}
