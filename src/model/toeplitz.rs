//! The Toeplitz form of the normal operator, backend-neutral: which models
//! it applies to, their phase per lattice step, and the time segmentation
//! of off-resonance. Backends (CPU: `backend::cpu::toeplitz`) compute the
//! kernels and apply the convolutions from a [`ToeplitzSpec`].
//!
//! # The kernels
//!
//! With voxels on a lattice r_n = r_0 + ix·a + iy·b + iz·c and a phase linear
//! in position, φ(j, n) = k0_j + k_j·r_n, the phase difference of two voxels
//! is 2π·κ_j·(i_n − i_n') with κ_{j,axis} = k_j·step_axis / 2π (cycles per
//! lattice step; the k0 term cancels), so
//!
//!   (EᴴWE)_{n,n'} = Σ_c conj(S_c(r_n))·S_c(r_n')·T(i_n − i_n'),
//!   T(Δ) = Σ_j w_j·exp(−2πi·κ_j·Δ),   Δ ∈ (−n, n) per axis.
//!
//! T lives on a periodic grid of g ≥ 2n cells per axis ([`kernel_length`]:
//! the smallest fast FFT length ≥ 2n; axes of one voxel keep 1), at index
//! Δ mod g. Any g ≥ 2n − 1 holds the offsets Δ ∈ (−n, n) without overlap,
//! so the circular convolution on g cells, cropped to the image, is the
//! linear one; the indices n … g − n add nothing to the cropped output
//! and are set to zero ([`kernel_offset`]). Then
//!
//!   EᴴWE x = Σ_c conj(S_c)·crop(IFFT(FFT(T)·FFT(pad(S_c·x)))).
//!
//! T is one type-1 NUFFT (sign −1, points 2π·κ_j, modes Δ = −n … n − 1 per
//! doubled axis, [`ToeplitzSpec::mode_dims`]) of the data w_j, at
//! [`kernel_nufft_tolerance`] on both backends; mode Δ (index Δ + n) goes to
//! kernel-grid index Δ mod g, and the mode Δ = −n is not used.
//!
//! # Off-resonance: time segmentation
//!
//! With off-resonance ω_n the entries get exp(iω_n t_j), which is not a
//! function of i_n − i_n'. Following Fessler et al., "Toeplitz-based
//! iterative image reconstruction for MRI with correction for magnetic field
//! inhomogeneity", IEEE Trans. Signal Process. 53(9):3393–3402 (2005), it is
//! interpolated in time from L segment times τ_l (uniform over [t_min, t_max]):
//!
//!   exp(iδ_n t) ≈ Σ_l a_l(t)·exp(iδ_n τ_l),   δ_n = ω_n − ω_c,
//!
//! (ω_c the centre of the ω range; its factor exp(iω_c t_j) has modulus one
//! and cancels in EᴴE) with the least-squares interpolator over the histogram
//! h of δ (Fessler's "LS / min-max with histogram" choice):
//!
//!   a(t) = argmin Σ_k h_k·|exp(iδ_k t) − Σ_l a_l exp(iδ_k τ_l)|²
//!        = G⁻¹·b(t),  G_{l,l'} = H(τ_l' − τ_l),  b_l(t) = H(t − τ_l),
//!   H(s) = Σ_k h_k exp(iδ_k s)
//!
//! (a ridge of 1e-12·tr(G)/L keeps G invertible). Then
//!
//!   EᴴWE ≈ Σ_{l,l'} diag(conj(P_l)) Sᴴ T_{l,l'} S diag(P_l'),
//!   P_l(n) = exp(iδ_n τ_l),
//!   T_{l,l'}(Δ) = Σ_j w_j·conj(a_l(t_j))·a_l'(t_j)·exp(−2πi κ_j·Δ),
//!
//! with T_{l',l}(Δ) = conj(T_{l,l'}(−Δ)), i.e. FFT(T_{l',l}) = conj(FFT(T_{l,l'})):
//! L(L+1)/2 kernels are computed ([`ToeplitzSpec::kernel_pairs`]); on the CPU
//! from fewer transforms where the pairs' products allow ([`super::kernel_basis`]).
//!
//! The interpolation error ε(t) = sqrt(mean_n |exp(iδ_n t) − Σ_l a_l(t) e^{iδ_n τ_l}|²)
//! is measured on the voxels themselves (up to [`ERROR_VOXELS`] of them,
//! evenly picked) at [`ERROR_TIMES`] times over [t_min, t_max];
//! [`TimeSegmentation::error`] is its maximum. The relative error of the
//! normal operator is about 2ε. `time_segments = 0` picks the smallest L
//! with ε ≤ [`AUTO_ERROR`] (= 2e-4), which keeps the normal operator's
//! relative error below 1e-3 (checked by tests/toeplitz.rs).

use super::grid::lattice_steps;
use super::harmonics::ORDER;
use super::{Basis, Model, Sizes};
use crate::backend::cpu::kernel::on_widest_isa;
use crate::error::{try_vec, Error, Result};
use num_complex::Complex64;
use std::f64::consts::TAU;

/// Interpolation error ε targeted when the number of segments is chosen automatically.
pub const AUTO_ERROR: f64 = 2e-4;
/// The most segments `time_segments = 0` will choose.
pub const MAX_AUTO_SEGMENTS: usize = 64;
/// The most segments a fixed `time_segments` may ask for: the set-up
/// computes L(L+1)/2 kernels on the kernel grid (≥ 2^d·N points) (memory and time grow as L²),
/// and beyond a few tens of segments the interpolation is ill-conditioned.
pub const MAX_TIME_SEGMENTS: usize = 256;
/// Voxels (at most) on which ε is measured.
pub const ERROR_VOXELS: usize = 2048;
/// Times on which ε is measured.
pub const ERROR_TIMES: usize = 257;
/// Every k-th of them, for k in these strides, screens a segment count (in
/// turn) before the full error is measured.
const SCREEN_STRIDES: [usize; 2] = [32, 8];

/// The NUFFT that computes the kernels T (type 1, sign −1, points 2π·κ_j,
/// modes 2n per doubled axis) for a precision mode, with or without time
/// segmentation: (tolerance, float64 arithmetic). Both backends use it, so
/// their kernels agree to it.
///
/// Without off-resonance the kernels are computed far inside the
/// precision's bound (1e-7 in float64 for ACCURATE, 1e-4 in float32 for
/// FAST, 1e-12 in float64 for DOUBLE). With segmentation the normal
/// operator's error is the segmentation's (about 2ε, ε ≤ [`AUTO_ERROR`]
/// when chosen automatically; bound 1e-3), so ACCURATE plans compute the
/// kernels to 1e-5, the ACCURATE class's own bound, in float32 arithmetic
/// (the CPU NUFFT computes in float64 below
/// [`crate::nufft::cpu::FLOAT32_ARITHMETIC_TOLERANCE`] = 1e-5): about half
/// the kernels' time of float64 at 1e-7 (BENCHMARKS.md). FAST and DOUBLE
/// keep their tolerances.
pub fn kernel_nufft_tolerance(precision: crate::op::Precision, segmented: bool) -> (f64, bool) {
    use crate::op::Precision;
    match (precision, segmented) {
        (Precision::Accurate, true) => (1e-5, false),
        (Precision::Accurate, false) => (1e-7, true),
        (Precision::Fast, _) => (1e-4, false),
        (Precision::Double, _) => (1e-12, true),
    }
}

/// The kernel grid's cells along an axis of n voxels: 1 for n = 1, else
/// the smallest fast FFT length ≥ 2n ([`crate::nufft::params::next_fast_even`];
/// 2n itself where it is fast, e.g. 64 → 128, 50 → 108 instead of 100).
pub fn kernel_length(n: usize) -> usize {
    if n > 1 {
        crate::nufft::params::next_fast_even(2 * n).unwrap_or(2 * n)
    } else {
        1
    }
}

/// The kernel grid of an image grid `dims` ([`kernel_length`] per axis).
pub fn kernel_grid(dims: [usize; 3]) -> [usize; 3] {
    dims.map(kernel_length)
}

/// The kernel NUFFT's modes of an image grid `dims`: 2n (Δ = −n … n − 1)
/// along axes with n > 1, 1 along the others.
pub fn mode_grid(dims: [usize; 3]) -> [usize; 3] {
    dims.map(|n| if n > 1 { 2 * n } else { 1 })
}

/// The offset Δ ∈ (−n, n) held at index p of a kernel-grid axis of `g`
/// cells over n voxels: p for p < n, p − g for p > g − n, `None` for the
/// unused indices n ≤ p ≤ g − n (zero in T). Axes of one voxel (g = 1): 0.
pub fn kernel_offset(p: usize, n: usize, g: usize) -> Option<i64> {
    if g == 1 || p < n {
        Some(p as i64)
    } else if p > g - n {
        Some(p as i64 - g as i64)
    } else {
        None
    }
}

/// The kernels' NUFFT (type 1 of `pairs` transforms, sign −1, modes
/// `mode_dims` ([`ToeplitzSpec::mode_dims`]), `samples` points) at
/// `(tolerance, double)` ([`kernel_nufft_tolerance`]), σ by the cost model.
pub fn kernel_nufft_spec(
    mode_dims: [usize; 3],
    samples: usize,
    pairs: usize,
    (tolerance, double): (f64, bool),
) -> Result<crate::nufft::NufftSpec> {
    use crate::nufft::{plan::choose_upsampling, Modes, NufftSpec, NufftType};
    let modes = Modes::new(3, &mode_dims.map(|n| n as i64))?;
    let transforms = i32::try_from(pairs)
        .map_err(|_| crate::error::Error::invalid(format!("{pairs} Toeplitz kernel pairs")))?;
    NufftSpec::new(
        NufftType::One,
        modes,
        -1,
        tolerance,
        transforms,
        double,
        Some(choose_upsampling(&modes, samples, tolerance, double)),
    )
}

/// The heap bytes [`TimeSegmentation::new`] uses besides its result: the
/// offsets δ (N), the histogram, and the error probe's phases of ≤
/// [`ERROR_VOXELS`] voxels and of the bins at [`ERROR_TIMES`] times.
pub fn segmentation_work_bytes(omega: &[f64], times: &[f64]) -> usize {
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            })
    };
    let ((w_min, w_max), (t_min, t_max)) = (range(omega), range(times));
    if w_max <= w_min {
        return 0;
    }
    let bins = Histogram::bins(0.5 * (w_max - w_min), t_max - t_min);
    let voxels = omega
        .len()
        .div_ceil(omega.len().div_ceil(ERROR_VOXELS).max(1));
    let f64s = omega.len() + 2 * bins + 2 * ERROR_TIMES * voxels + voxels + ERROR_TIMES;
    f64s.saturating_mul(8)
        .saturating_add(ERROR_TIMES.saturating_mul(bins).saturating_mul(16))
}

/// What a backend needs to build the Toeplitz normal operator of a model.
#[derive(Clone, Debug)]
pub struct ToeplitzSpec {
    /// The image grid n0×n1×n2.
    pub dims: [usize; 3],
    /// The kernel grid ([`kernel_grid`]): g ≥ 2n along axes with n > 1,
    /// 1 along the others.
    pub kernel_dims: [usize; 3],
    /// M samples.
    pub samples: usize,
    /// κ_{j,axis}: cycles of phase per lattice step of image axis `axis`
    /// at sample j, 3×M (sample fastest); zero along singleton axes.
    pub cycles: Vec<f64>,
    /// Time segmentation of the off-resonance; `None` without off-resonance
    /// (or with a uniform ω, whose phase cancels).
    pub segmentation: Option<TimeSegmentation>,
}

/// exp(iδ_n t_j) ≈ Σ_l a_l(t_j)·exp(iδ_n τ_l) (module documentation).
#[derive(Clone, Debug)]
pub struct TimeSegmentation {
    /// L.
    pub segments: usize,
    /// Segment times τ_l (s), L.
    pub tau: Vec<f64>,
    /// δ_n = ω_n − ω_c (rad/s), N.
    pub delta: Vec<f64>,
    /// a_l(t_j), L×M (sample fastest).
    pub coefficients: Vec<Complex64>,
    /// max_t ε(t), the measured interpolation error (module documentation).
    pub error: f64,
    /// Samples spread over the readout's time on which the kernels' pair
    /// basis is found ([`super::kernel_basis::basis_rows`]).
    pub basis_rows: Vec<usize>,
}

fn toeplitz_invalid(reason: String) -> Error {
    Error::invalid(format!("Toeplitz normal operator: {reason}"))
}

impl ToeplitzSpec {
    /// [`kernel_nufft_tolerance`] of this spec (segmented or not).
    pub fn kernel_tolerance(&self, precision: crate::op::Precision) -> (f64, bool) {
        kernel_nufft_tolerance(precision, self.segmentation.is_some())
    }

    /// Checks that `model` has a Toeplitz normal operator and derives its
    /// spec; `time_segments` = L with off-resonance, 0 = chosen for
    /// ε ≤ [`AUTO_ERROR`].
    ///
    /// Accepted: `set_trajectory` models (1–3 dims) and solid harmonics
    /// whose terms above order 1 are all zero, with voxels on a lattice.
    pub fn new(model: &Model, time_segments: usize) -> Result<ToeplitzSpec> {
        model.check_complete()?;
        let Sizes {
            dims, samples: m, ..
        } = model.sizes;
        let phase = model.require_phase()?;
        // k_c(j), rad/m, for c = x, y, z (absent components are zero).
        let mut k = try_vec(3 * m, 0.0f64, "Toeplitz trajectory (M x 3)")?;
        match &phase.basis {
            Basis::User(_) => {
                return Err(toeplitz_invalid(
                    "the phase model is a user basis (set_basis); Toeplitz needs a phase linear \
                     in position (set_trajectory, or set_solid_harmonics with terms above order 1 zero)"
                        .into(),
                ))
            }
            Basis::Trajectory(d) => k[..d * m].copy_from_slice(&phase.coefficients[..d * m]),
            Basis::SolidHarmonics(t) => {
                for (b, order) in ORDER.iter().enumerate().take(*t).skip(4) {
                    let column = &phase.coefficients[b * m..(b + 1) * m];
                    if let Some(j) = column.iter().position(|&c| c != 0.0) {
                        return Err(toeplitz_invalid(format!(
                            "solid harmonic term {b} (order {}) has a non-zero coefficient at \
                             sample {j} ({}); the phase must be linear in position (terms 0..3: \
                             k0, x, y, z) — an approximate higher-order fast path is not implemented",
                            order, column[j]
                        )));
                    }
                }
                let linear = (*t).min(4).saturating_sub(1);
                k[..linear * m].copy_from_slice(&phase.coefficients[m..(1 + linear) * m]);
            }
        }
        let positions = model.require_positions("the Toeplitz normal operator")?;
        let steps = lattice_steps(dims, positions, "the Toeplitz normal operator")?;
        let mut cycles = try_vec(3 * m, 0.0f64, "Toeplitz cycles per step (M x 3)")?;
        for axis in 0..3 {
            for j in 0..m {
                let dot: f64 = (0..3).map(|c| k[c * m + j] * steps[axis][c]).sum();
                cycles[axis * m + j] = dot / TAU;
            }
        }
        let segmentation = match &model.off_resonance {
            None => None,
            Some(or) => TimeSegmentation::new(&or.omega, &or.times, time_segments)?,
        };
        Ok(ToeplitzSpec {
            dims,
            kernel_dims: kernel_grid(dims),
            samples: m,
            cycles,
            segmentation,
        })
    }

    /// Points of the kernel grid, Π g_a.
    pub fn kernel_points(&self) -> usize {
        self.kernel_dims.iter().product()
    }

    /// The kernel NUFFT's modes ([`mode_grid`]).
    pub fn mode_dims(&self) -> [usize; 3] {
        mode_grid(self.dims)
    }

    /// The NUFFT mode index of kernel-grid index p (Δ + n, 0 along an axis
    /// of one voxel), `None` where p is unused ([`kernel_offset`]).
    pub fn mode_index(&self, axis: usize, p: usize) -> Option<usize> {
        let (n, g) = (self.dims[axis], self.kernel_dims[axis]);
        let delta = kernel_offset(p, n, g)?;
        Some(if g > 1 {
            (delta + n as i64) as usize
        } else {
            0
        })
    }

    /// L (1 without segmentation).
    pub fn segments(&self) -> usize {
        self.segmentation.as_ref().map_or(1, |s| s.segments)
    }

    /// The kernels computed, (l, l') with l ≤ l', in storage order.
    pub fn kernel_pairs(&self) -> Vec<(usize, usize)> {
        let l = self.segments();
        (0..l).flat_map(|a| (a..l).map(move |b| (a, b))).collect()
    }

    /// The index in [`ToeplitzSpec::kernel_pairs`] of (l, l') and whether
    /// the kernel is used conjugated (l > l').
    pub fn pair_index(&self, l: usize, lp: usize) -> (usize, bool) {
        let segments = self.segments();
        let (a, b, conjugate) = if l <= lp {
            (l, lp, false)
        } else {
            (lp, l, true)
        };
        // Pairs before row a: Σ_{r<a} (L − r) = a·L − a(a−1)/2.
        (
            a * segments - a * (a.saturating_sub(1)) / 2 + (b - a),
            conjugate,
        )
    }

    /// The kernels' NUFFT input: for pair (l, l') the column
    /// w_j·conj(a_l(t_j))·a_l'(t_j) (w ≡ 1 when `weights` is `None`), M×pairs.
    pub fn kernel_weights(&self, weights: Option<&[f32]>) -> Result<Vec<Complex64>> {
        let m = self.samples;
        let pairs = self.kernel_pairs();
        use rayon::prelude::*;
        let mut out = try_vec(m * pairs.len(), Complex64::new(0.0, 0.0), "Toeplitz data")?;
        out.par_chunks_mut(m.max(1))
            .zip(&pairs)
            .for_each(|(column, &(l, lp))| {
                for (j, o) in column.iter_mut().enumerate() {
                    let w = weights.map_or(1.0, |w| w[j] as f64);
                    let a = match &self.segmentation {
                        None => Complex64::new(1.0, 0.0),
                        Some(s) => s.coefficients[l * m + j].conj() * s.coefficients[lp * m + j],
                    };
                    *o = a * w;
                }
            });
        Ok(out)
    }
}

/// Lower Cholesky factor of a Hermitian positive definite L×L matrix
/// (row-major), in place; `false` if it is not positive definite, or
/// numerically singular (a pivot below 1e-10 of its diagonal entry).
fn cholesky(a: &mut [Complex64], l: usize) -> bool {
    for j in 0..l {
        let mut d = a[j * l + j].re;
        for k in 0..j {
            d -= a[j * l + k].norm_sqr();
        }
        // A pivot at the level of the ridge (1e-12 of the diagonal, see
        // `Interpolator::new`) means linearly dependent segments.
        if d.is_nan() || d <= 1e-10 * a[j * l + j].re || !d.is_finite() {
            return false;
        }
        let d = d.sqrt();
        a[j * l + j] = Complex64::new(d, 0.0);
        for i in j + 1..l {
            let mut s = a[i * l + j];
            for k in 0..j {
                s -= a[i * l + k] * a[j * l + k].conj();
            }
            a[i * l + j] = s / d;
        }
    }
    true
}

/// Solves (C Cᴴ) x = b with the factor of [`cholesky`], in place.
fn cholesky_solve(c: &[Complex64], l: usize, b: &mut [Complex64]) {
    for i in 0..l {
        let mut s = b[i];
        for k in 0..i {
            s -= c[i * l + k] * b[k];
        }
        b[i] = s / c[i * l + i].re;
    }
    for i in (0..l).rev() {
        let mut s = b[i];
        for k in i + 1..l {
            s -= c[k * l + i].conj() * b[k];
        }
        b[i] = s / c[i * l + i].re;
    }
}

/// The histogram of δ: the occupied bins' centres, counts and places on the
/// bin lattice (centre of bin b = `first` + b·`width`).
struct Histogram {
    centres: Vec<f64>,
    counts: Vec<f64>,
    lattice: Vec<usize>,
    first: f64,
    width: f64,
}

/// Steps between exact restarts of the phase recurrences of
/// [`Interpolator::coefficients`] (along the bin lattice) and
/// [`segment_phases_of`] (along the segments); their rounding grows by
/// ~1e-16 per step.
const RESTART: usize = 64;

impl Histogram {
    /// The bin count for offsets in [−R/2, R/2] over `duration`.
    fn bins(half_range: f64, duration: f64) -> usize {
        let wanted = (2.0 * half_range * duration * 16.0 / TAU).ceil();
        (wanted as usize).clamp(64, 4096)
    }

    /// Bins of width ≤ π/(8·T) over [−R/2, R/2] (H oversampled 16× in δ
    /// relative to its bandwidth T = t_max − t_min), 64 to 4096 bins.
    fn new(delta: &[f64], half_range: f64, duration: f64) -> Histogram {
        let bins = Self::bins(half_range, duration);
        let width = 2.0 * half_range / bins as f64;
        let mut counts = vec![0.0; bins];
        for &d in delta {
            let b = (((d + half_range) / width) as usize).min(bins - 1);
            counts[b] += 1.0;
        }
        let first = -half_range + 0.5 * width;
        let lattice: Vec<usize> = (0..bins).filter(|&b| counts[b] > 0.0).collect();
        Histogram {
            centres: lattice.iter().map(|&b| first + b as f64 * width).collect(),
            counts: lattice.iter().map(|&b| counts[b]).collect(),
            lattice,
            first,
            width,
        }
    }

    /// H(s) = Σ_k h_k exp(iδ_k s).
    fn characteristic(&self, s: f64) -> Complex64 {
        self.centres
            .iter()
            .zip(&self.counts)
            .map(|(&d, &h)| Complex64::from_polar(h, d * s))
            .sum()
    }
}

/// Times per task of [`Interpolator::coefficients`] (the length of its
/// vector loops).
const LANES: usize = 64;

/// Probe voxels per block of the error sums in [`Interpolator::error`]
/// (the block's approximation stays in L1 while the L segments stream by).
const VOXEL_BLOCK: usize = 512;

/// e^{iδ·τ_l} for the uniform segment times `tau` (l = 0 … L−1), given
/// `first` = e^{iδ·τ_0}: P_{l+1} = P_l·e^{iδΔτ}, restarted exactly every
/// [`RESTART`] segments; `put(l, P_l)`. Two sines per voxel instead of L.
pub(crate) fn segment_phases_of(
    delta: f64,
    tau: &[f64],
    first: Complex64,
    mut put: impl FnMut(usize, Complex64),
) {
    let spacing = if tau.len() > 1 { tau[1] - tau[0] } else { 0.0 };
    let step = Complex64::from_polar(1.0, delta * spacing);
    let mut value = first;
    for (l, &t) in tau.iter().enumerate() {
        if l > 0 {
            value = if l % RESTART == 0 {
                Complex64::from_polar(1.0, delta * t)
            } else {
                value * step
            };
        }
        put(l, value);
    }
}

/// Σ_i |x_i − y_i|² over the length of `y` (real and imaginary parts
/// apart), in eight interleaved partial sums (a fixed order, so the same bits
/// on every run; the loop vectorises where a single running sum would wait
/// on each addition).
#[inline(always)]
fn squared_distance(x: (&[f64], &[f64]), y: (&[f64], &[f64])) -> f64 {
    let mut partial = [0.0f64; 8];
    let len = y.0.len();
    let full = len - len % 8;
    let distance = |i: usize| {
        let (re, im) = (x.0[i] - y.0[i], x.1[i] - y.1[i]);
        re * re + im * im
    };
    for start in (0..full).step_by(8) {
        for (k, p) in partial.iter_mut().enumerate() {
            *p += distance(start + k);
        }
    }
    let tail: f64 = (full..len).map(distance).sum();
    partial.iter().sum::<f64>() + tail
}

/// The LS interpolator for L segments: τ, the factor of G, evaluation of a(t).
struct Interpolator<'a> {
    histogram: &'a Histogram,
    tau: Vec<f64>,
    factor: Vec<Complex64>,
    /// h_k e^{−iδ_k τ_l}, L × bins: b_l(t) = H(t − τ_l) = Σ_k this · e^{iδ_k t}.
    weighted: Vec<Complex64>,
}

impl<'a> Interpolator<'a> {
    fn new(histogram: &'a Histogram, t_min: f64, t_max: f64, l: usize) -> Result<Self> {
        let tau: Vec<f64> = if l == 1 {
            vec![0.5 * (t_min + t_max)]
        } else {
            (0..l)
                .map(|i| t_min + (t_max - t_min) * i as f64 / (l - 1) as f64)
                .collect()
        };
        // G is Toeplitz (uniform τ): G_{a,b} = H((b − a)·Δτ), and
        // H(−s) = conj(H(s)): L evaluations of H.
        let spacing = if l > 1 { tau[1] - tau[0] } else { 0.0 };
        let lags: Vec<Complex64> = (0..l)
            .map(|k| histogram.characteristic(k as f64 * spacing))
            .collect();
        let mut g = vec![Complex64::new(0.0, 0.0); l * l];
        for a in 0..l {
            for b in 0..l {
                g[a * l + b] = if b >= a {
                    lags[b - a]
                } else {
                    lags[a - b].conj()
                };
            }
        }
        let trace: f64 = (0..l).map(|a| g[a * l + a].re).sum();
        for a in 0..l {
            g[a * l + a] += 1e-12 * trace / l as f64;
        }
        if !cholesky(&mut g, l) {
            let (lo, hi) = histogram
                .centres
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &d| {
                    (lo.min(d), hi.max(d))
                });
            return Err(toeplitz_invalid(format!(
                "time_segments = {l} is more than this off-resonance map and these sample times \
                 support: the segments' phase factors exp(-i w t) are numerically linearly \
                 dependent (w spans {:.2e} rad/s in {} distinct bins, t spans {:.2e} s; the \
                 {l}x{l} interpolation Gram matrix is singular); use fewer segments, or 0 to \
                 choose them automatically",
                (hi - lo).max(0.0),
                histogram.centres.len(),
                t_max - t_min
            )));
        }
        let weighted = tau
            .iter()
            .flat_map(|&t| {
                histogram
                    .centres
                    .iter()
                    .zip(&histogram.counts)
                    .map(move |(&d, &h)| Complex64::from_polar(h, -d * t))
            })
            .collect();
        Ok(Interpolator {
            histogram,
            tau,
            factor: g,
            weighted,
        })
    }

    /// a(t) for each of `times` (`out`: L per time, times × L), [`LANES`]
    /// times per task. b_l(t) = H(t − τ_l) = Σ_k [h_k e^{−iδ_k τ_l}]·e^{iδ_k t}
    /// with the bin phases e^{iδ_k t} stepped along the bin lattice
    /// (e^{iδ_{b+1} t} = e^{iδ_b t}·e^{i·width·t}, restarted exactly every
    /// [`RESTART`] lattice steps); then a = G⁻¹b. The loops run across the
    /// task's times, so they vectorise.
    fn coefficients(&self, times: &[f64], out: &mut [Complex64]) {
        use rayon::prelude::*;
        let l = self.tau.len();
        out.par_chunks_mut(LANES * l)
            .zip(times.par_chunks(LANES))
            .for_each(|(out, times)| self.coefficients_of_lanes(times, out));
    }

    /// [`Self::coefficients`] for at most [`LANES`] times.
    fn coefficients_of_lanes(&self, t: &[f64], out: &mut [Complex64]) {
        let (l, h, n) = (self.tau.len(), self.histogram, t.len());
        let bins = h.centres.len();
        // e^{iδ_k t_s} at [k·n + s], real and imaginary parts apart.
        let mut v_re = vec![0.0; bins * n];
        let mut v_im = vec![0.0; bins * n];
        let (step_re, step_im): (Vec<f64>, Vec<f64>) = t
            .iter()
            .map(|&t| (h.width * t).cos())
            .zip(t.iter().map(|&t| (h.width * t).sin()))
            .unzip();
        // `exact`: the lattice place of the last exact row; `at`: of the last row.
        let (mut exact, mut at) = (usize::MAX, 0);
        for (k, &b) in h.lattice.iter().enumerate() {
            let (done_re, row_re) = v_re.split_at_mut(k * n);
            let (done_im, row_im) = v_im.split_at_mut(k * n);
            let (row_re, row_im) = (&mut row_re[..n], &mut row_im[..n]);
            if exact == usize::MAX || b - exact >= RESTART {
                let centre = h.first + b as f64 * h.width;
                for ((re, im), &t) in row_re.iter_mut().zip(row_im.iter_mut()).zip(t) {
                    (*im, *re) = (centre * t).sin_cos();
                }
                exact = b;
            } else {
                row_re.copy_from_slice(&done_re[(k - 1) * n..]);
                row_im.copy_from_slice(&done_im[(k - 1) * n..]);
                on_widest_isa(
                    #[inline(always)]
                    || {
                        for _ in at..b {
                            for (((re, im), &c), &s) in row_re
                                .iter_mut()
                                .zip(row_im.iter_mut())
                                .zip(&step_re)
                                .zip(&step_im)
                            {
                                (*re, *im) = (*re * c - *im * s, *re * s + *im * c);
                            }
                        }
                    },
                );
            }
            at = b;
        }
        let mut b_re = vec![0.0; l * n];
        let mut b_im = vec![0.0; l * n];
        on_widest_isa(
            #[inline(always)]
            || {
                for ((b_re, b_im), weighted) in b_re
                    .chunks_exact_mut(n)
                    .zip(b_im.chunks_exact_mut(n))
                    .zip(self.weighted.chunks_exact(bins))
                {
                    for ((w, v_re), v_im) in weighted
                        .iter()
                        .zip(v_re.chunks_exact(n))
                        .zip(v_im.chunks_exact(n))
                    {
                        for (((br, bi), &vr), &vi) in
                            b_re.iter_mut().zip(b_im.iter_mut()).zip(v_re).zip(v_im)
                        {
                            *br += w.re * vr - w.im * vi;
                            *bi += w.re * vi + w.im * vr;
                        }
                    }
                }
            },
        );
        for (s, a) in out.chunks_exact_mut(l).enumerate() {
            for (i, a) in a.iter_mut().enumerate() {
                *a = Complex64::new(b_re[i * n + s], b_im[i * n + s]);
            }
            cholesky_solve(&self.factor, l, a);
        }
    }

    /// max over the probe times of the rms over the probe voxels of the
    /// interpolation error (every `time_stride`-th probe time and the last).
    fn error(&self, probe: &Probe, time_stride: usize) -> f64 {
        use rayon::prelude::*;
        let l = self.tau.len();
        let voxels = probe.delta.len();
        // e^{iδ_d τ_l} ([`segment_phases_of`]), L rows of the voxels,
        // real and imaginary parts apart (the sums below then run over
        // voxels as plain vectorisable loops).
        let mut segment_re = vec![0.0; l * voxels];
        let mut segment_im = vec![0.0; l * voxels];
        for (d, &delta) in probe.delta.iter().enumerate() {
            // τ_0 = t_min, the first probe time, unless L = 1.
            let first = if l > 1 {
                Complex64::new(probe.phase_re[d], probe.phase_im[d])
            } else {
                Complex64::from_polar(1.0, delta * self.tau[0])
            };
            segment_phases_of(delta, &self.tau, first, |i, v| {
                (segment_re[i * voxels + d], segment_im[i * voxels + d]) = (v.re, v.im);
            });
        }
        let picked: Vec<usize> = (0..probe.times.len())
            .filter(|t| t % time_stride == 0 || t + 1 == probe.times.len())
            .collect();
        let times: Vec<f64> = picked.iter().map(|&t| probe.times[t]).collect();
        let mut coefficients = vec![Complex64::new(0.0, 0.0); times.len() * l];
        self.coefficients(&times, &mut coefficients);
        picked
            .par_iter()
            .zip(coefficients.par_chunks(l))
            .map_init(
                || (vec![0.0; VOXEL_BLOCK], vec![0.0; VOXEL_BLOCK]),
                |(approx_re, approx_im), (&t, a)| {
                    let exact_re = &probe.phase_re[t * voxels..(t + 1) * voxels];
                    let exact_im = &probe.phase_im[t * voxels..(t + 1) * voxels];
                    let sum = on_widest_isa(
                        #[inline(always)]
                        || {
                            let mut sum = 0.0;
                            for start in (0..voxels).step_by(VOXEL_BLOCK) {
                                let len = VOXEL_BLOCK.min(voxels - start);
                                let (xr, xi) = (&mut approx_re[..len], &mut approx_im[..len]);
                                xr.fill(0.0);
                                xi.fill(0.0);
                                for (i, a) in a.iter().enumerate() {
                                    let sr = &segment_re[i * voxels + start..][..len];
                                    let si = &segment_im[i * voxels + start..][..len];
                                    for (((xr, xi), &r), &m) in
                                        xr.iter_mut().zip(xi.iter_mut()).zip(sr).zip(si)
                                    {
                                        *xr += a.re * r - a.im * m;
                                        *xi += a.re * m + a.im * r;
                                    }
                                }
                                let exact = (&exact_re[start..], &exact_im[start..]);
                                sum += squared_distance(exact, (xr, xi));
                            }
                            sum
                        },
                    );
                    (sum / voxels.max(1) as f64).sqrt()
                },
            )
            .reduce(|| 0.0, f64::max)
    }
}

/// The voxels and times on which the interpolation error is measured, with
/// their phases computed once for every segment count tried.
struct Probe {
    /// δ of the probe voxels.
    delta: Vec<f64>,
    /// Probe times.
    times: Vec<f64>,
    /// e^{iδ_d t} per probe time (times × voxels), real and imaginary parts.
    phase_re: Vec<f64>,
    phase_im: Vec<f64>,
}

impl Probe {
    fn new(delta: Vec<f64>, times: &[f64]) -> Result<Probe> {
        use rayon::prelude::*;
        let voxels = delta.len();
        let mut phase_re = try_vec(times.len() * voxels, 0.0, "segmentation probe phases")?;
        let mut phase_im = try_vec(times.len() * voxels, 0.0, "segmentation probe phases")?;
        // e^{iδ t} along the uniform probe times by the recurrence
        // e^{iδ(t + h)} = e^{iδ t}·e^{iδ h}, restarted exactly every 32 steps.
        let step = if times.len() > 1 {
            times[1] - times[0]
        } else {
            0.0
        };
        phase_re
            .par_chunks_mut(32 * voxels.max(1))
            .zip(phase_im.par_chunks_mut(32 * voxels.max(1)))
            .enumerate()
            .for_each(|(block, (re, im))| {
                // Row k of the block from row k − 1, all voxels at once.
                let mut rotation = vec![(0.0, 0.0); voxels];
                for (d, &delta) in delta.iter().enumerate() {
                    (im[d], re[d]) = (delta * times[32 * block]).sin_cos();
                    let (sin_h, cos_h) = (delta * step).sin_cos();
                    rotation[d] = (cos_h, sin_h);
                }
                on_widest_isa(
                    #[inline(always)]
                    || {
                        for k in 1..re.len() / voxels.max(1) {
                            let (re_before, re_row) = re[(k - 1) * voxels..].split_at_mut(voxels);
                            let (im_before, im_row) = im[(k - 1) * voxels..].split_at_mut(voxels);
                            for ((((r, i), &c), &s), &(cos_h, sin_h)) in re_row
                                .iter_mut()
                                .zip(im_row.iter_mut())
                                .zip(&*re_before)
                                .zip(&*im_before)
                                .zip(&rotation)
                            {
                                (*r, *i) = (c * cos_h - s * sin_h, s * cos_h + c * sin_h);
                            }
                        }
                    },
                );
            });
        Ok(Probe {
            delta,
            times: times.to_vec(),
            phase_re,
            phase_im,
        })
    }
}

impl TimeSegmentation {
    /// The segmentation for ω (N, rad/s) and times t (M, s) with L =
    /// `segments` (0 = automatic), or `None` when ω is uniform (its phase cancels).
    pub fn new(omega: &[f64], times: &[f64], segments: usize) -> Result<Option<TimeSegmentation>> {
        let (w_min, w_max) = omega
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &w| {
                (a.min(w), b.max(w))
            });
        if w_max <= w_min {
            return Ok(None);
        }
        let centre = 0.5 * (w_min + w_max);
        let half_range = 0.5 * (w_max - w_min);
        let mut delta = try_vec(omega.len(), 0.0f64, "off-resonance offsets (N)")?;
        delta
            .iter_mut()
            .zip(omega)
            .for_each(|(d, w)| *d = w - centre);
        let (t_min, t_max) = times
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &t| {
                (a.min(t), b.max(t))
            });
        let histogram = Histogram::new(&delta, half_range, t_max - t_min);
        let stride = delta.len().div_ceil(ERROR_VOXELS);
        let probe_times: Vec<f64> = (0..ERROR_TIMES)
            .map(|i| t_min + (t_max - t_min) * i as f64 / (ERROR_TIMES - 1) as f64)
            .collect();
        let probe = Probe::new(
            delta.iter().step_by(stride).copied().collect(),
            &probe_times,
        )?;
        let mut singular = None;
        let (interpolator, error) = if segments > 0 {
            let it = Interpolator::new(&histogram, t_min, t_max, segments)?;
            let e = it.error(&probe, 1);
            (it, e)
        } else {
            // The fewest segments that reach AUTO_ERROR; when more segments
            // than the map's distinct values would be needed (a singular Gram
            // matrix), the most that still work.
            // Each count is first screened on every 32nd, then every 8th
            // probe time (SCREEN_STRIDES): each maximum is a lower bound of
            // the full one, so a count a screen rejects is rejected exactly;
            // the full error is computed only for counts that pass the
            // screens (and for the last one tried).
            let mut chosen: Option<(Interpolator, Option<f64>)> = None;
            for l in 1..=MAX_AUTO_SEGMENTS {
                crate::progress::check(l as f64 / MAX_AUTO_SEGMENTS as f64)?;
                let Ok(it) = Interpolator::new(&histogram, t_min, t_max, l) else {
                    singular = Some(l);
                    break;
                };
                if SCREEN_STRIDES
                    .iter()
                    .any(|&stride| it.error(&probe, stride) > AUTO_ERROR)
                {
                    chosen = Some((it, None));
                    continue;
                }
                let e = it.error(&probe, 1);
                let done = e <= AUTO_ERROR;
                chosen = Some((it, Some(e)));
                if done {
                    break;
                }
            }
            let chosen = chosen.map(|(it, e)| {
                let e = e.unwrap_or_else(|| it.error(&probe, 1));
                (it, e)
            });
            chosen.ok_or_else(|| {
                toeplitz_invalid(
                    "the off-resonance map gives no usable time segmentation; use the exact \
                     normal operator (set_toeplitz with enable = 0)"
                        .into(),
                )
            })?
        };
        if let (0, Some(l), true) = (segments, singular, error > AUTO_ERROR) {
            return Err(toeplitz_invalid(format!(
                "the off-resonance map has only {} distinct values (histogram bins of the \
                 segmentation): from {l} segments on they are linearly dependent, and {} segments \
                 reach an interpolation error of {error:.1e}, not {AUTO_ERROR:e}; use the exact \
                 normal operator (set_toeplitz with enable = 0)",
                histogram.centres.len(),
                l - 1
            )));
        }
        if segments == 0 && error > AUTO_ERROR {
            return Err(toeplitz_invalid(format!(
                "the off-resonance spread ({:.1} rad/s over {:.3e} s) needs more than {} time \
                 segments for an interpolation error of {AUTO_ERROR:e}; use the exact normal operator",
                w_max - w_min,
                t_max - t_min,
                MAX_AUTO_SEGMENTS
            )));
        }
        let l = interpolator.tau.len();
        let m = times.len();
        // a(t_j) for every sample (in parallel, M×L), then stored L×M.
        let mut rows = try_vec(l * m, Complex64::new(0.0, 0.0), "segment coefficients")?;
        interpolator.coefficients(times, &mut rows);
        let mut coefficients = try_vec(l * m, Complex64::new(0.0, 0.0), "segment coefficients")?;
        for (j, a) in rows.chunks_exact(l).enumerate() {
            for (i, v) in a.iter().enumerate() {
                coefficients[i * m + j] = *v;
            }
        }
        Ok(Some(TimeSegmentation {
            segments: l,
            tau: interpolator.tau,
            delta,
            coefficients,
            error,
            basis_rows: super::kernel_basis::basis_rows(times, half_range, l * (l + 1) / 2),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_tolerance_is_looser_only_for_segmented_accurate_plans() {
        use crate::op::Precision::{Accurate, Double, Fast};
        assert_eq!(kernel_nufft_tolerance(Accurate, false), (1e-7, true));
        assert_eq!(kernel_nufft_tolerance(Accurate, true), (1e-5, false));
        for segmented in [false, true] {
            assert_eq!(kernel_nufft_tolerance(Fast, segmented), (1e-4, false));
            assert_eq!(kernel_nufft_tolerance(Double, segmented), (1e-12, true));
        }
        // Float32 arithmetic on the CPU too (not float64 below its threshold).
        let spec = kernel_nufft_spec([128, 128, 1], 6000, 20, (1e-5, false)).unwrap();
        assert!(!crate::nufft::cpu::float64_arithmetic(&spec));
    }

    #[test]
    fn kernel_grid_holds_every_offset_once() {
        assert_eq!(kernel_grid([64, 50, 1]), [128, 108, 1]);
        assert_eq!(kernel_grid([110, 1, 100]), [224, 1, 200]);
        for n in 1..300 {
            let g = kernel_length(n);
            assert!(
                g == 1 && n == 1 || g >= 2 * n && g <= 2 * n + 2 * n / 8 + 6,
                "{n}: {g}"
            );
            let offsets: Vec<i64> = (0..g).filter_map(|p| kernel_offset(p, n, g)).collect();
            let expected: Vec<i64> = (0..n as i64).chain(1 - n as i64..0).collect();
            assert_eq!(offsets, expected, "n = {n}, g = {g}");
        }
        let spec = ToeplitzSpec {
            dims: [50, 3, 1],
            kernel_dims: kernel_grid([50, 3, 1]),
            samples: 0,
            cycles: vec![],
            segmentation: None,
        };
        assert_eq!(
            (spec.kernel_dims, spec.mode_dims()),
            ([108, 6, 1], [100, 6, 1])
        );
        assert_eq!(spec.mode_index(0, 0), Some(50));
        assert_eq!(spec.mode_index(0, 49), Some(99));
        assert_eq!(spec.mode_index(0, 50), None);
        assert_eq!(spec.mode_index(0, 58), None);
        assert_eq!(spec.mode_index(0, 59), Some(1));
        assert_eq!(spec.mode_index(0, 107), Some(49));
        assert_eq!(spec.mode_index(1, 3), None);
        assert_eq!(spec.mode_index(1, 4), Some(1));
        assert_eq!(spec.mode_index(2, 0), Some(0));
    }

    #[test]
    fn pair_index_matches_kernel_pairs() {
        for l in 1..6 {
            let spec = ToeplitzSpec {
                dims: [2, 1, 1],
                kernel_dims: [4, 1, 1],
                samples: 1,
                cycles: vec![0.0; 3],
                segmentation: (l > 1).then(|| TimeSegmentation {
                    segments: l,
                    tau: vec![0.0; l],
                    delta: vec![],
                    coefficients: vec![],
                    error: 0.0,
                    basis_rows: vec![],
                }),
            };
            for (i, &(a, b)) in spec.kernel_pairs().iter().enumerate() {
                assert_eq!(spec.pair_index(a, b), (i, false));
                if a != b {
                    assert_eq!(spec.pair_index(b, a), (i, true));
                }
            }
        }
    }

    #[test]
    fn segmentation_interpolates_the_phase() {
        let omega: Vec<f64> = (0..500).map(|i| -900.0 + 3.1 * i as f64).collect();
        let times: Vec<f64> = (0..300).map(|j| 1e-3 + 2e-2 * j as f64 / 299.0).collect();
        let s = TimeSegmentation::new(&omega, &times, 0).unwrap().unwrap();
        assert!(s.error <= AUTO_ERROR, "{}", s.error);
        let centre = 0.5 * (omega[0] + omega[499]);
        let mut worst: f64 = 0.0;
        for (j, &t) in times.iter().enumerate() {
            for &w in &omega {
                let d = w - centre;
                let approx: Complex64 = (0..s.segments)
                    .map(|l| {
                        s.coefficients[l * times.len() + j]
                            * Complex64::from_polar(1.0, d * s.tau[l])
                    })
                    .sum();
                worst = worst.max((approx - Complex64::from_polar(1.0, d * t)).norm());
            }
        }
        assert!(
            worst < 10.0 * AUTO_ERROR,
            "L = {}, max error {worst}",
            s.segments
        );
    }
}
