//! The spreading kernel's parameters and the fine grid, chosen from the
//! requested tolerance (FAST-PATH.md §2; Barnett, Magland & af Klinteberg,
//! SIAM J. Sci. Comput. 41(5), 2019).
//!
//! The "exponential of semicircle" (ES) kernel over w fine-grid cells,
//!
//! $$\phi(z) = e^{\beta(\sqrt{1 - z^2} - 1)},\qquad |z| \le 1,$$
//!
//! with z = (distance in cells)/(w/2).
//!
//! # The width: measured, with a margin
//! FINUFFT's rule (σ = 2: w = ⌈log₁₀(1/ε)⌉ + 1) gives relative l2 errors of
//! about ε on uniform random points, not below it (pip finufft 2.5.1, 2D,
//! ε = 1e-6: 2.1e-6), and points clustered at one place see the error of
//! that place, up to ~3.5× the average. This crate promises error ≤ ε for
//! any points, so the width comes from measurements
//! (examples/nufft_accuracy.rs `table`): [`ERROR_SIGMA_2`] and
//! [`ERROR_SIGMA_5_4`] hold, per w, the largest error of a single type-2
//! output relative to the rms output, worst over 1D (n = 64), 2D (40) and 3D
//! (32), 3 draws of 1500 uniform points, float64; w is the smallest width
//! whose error times [`SAFETY`] is ≤ ε. At σ = 2 that is ⌈log₁₀(1/ε)⌉ + 2
//! for decade tolerances 1e-1 … 1e-7 (one cell more than FINUFFT), + 3 for
//! 1e-8 … 1e-11 and + 2 for 1e-12.
//! β = γ_w·w with γ = 1.82, 2.12, 2.20, 2.24 for w = 2 … 5 and 2.30 above
//! (the measured optima) at σ = 2, and β = 0.97·π·w·(1 − 1/(2σ)) at
//! σ = 1.25 (the measured optimum too). A tolerance σ = 1.25 cannot reach
//! with w ≤ 16 gets σ = 2, and so does float32 arithmetic below
//! [`MIN_TOLERANCE_F32_SIGMA_5_4`]: at σ = 1.25 the deconvolution divides
//! the edge modes by a ψ̂ up to ~10² (per axis) smaller than ψ̂(0), which
//! lifts float32 rounding above ε (measured, 3D: 1.5e-4 at ε = 1e-5,
//! 2e-3 at 1e-6; at ε = 1e-4, w = 9, 5.0e-5 and 3.1e-5 for types 1 and 2:
//! `nufft_accuracy 3 32 3000 3`, 2026-11-26).
//!
//! The fine grid of an axis with n modes has n_f = the smallest even fast
//! FFT length ≥ max(σ·n, 2w) points: q = 2^a·3^b, or q·c with c = 5, 7,
//! 11 or 25 and q a multiple of 4 and ≥ 8. FINUFFT takes every 2,3,5-smooth length
//! (fast in FFTW); rustfft 6.4's planner computes a length whose factors
//! other than 2 and 3 are not one of its butterflies (35, 49, 125, ...) by
//! Bluestein's algorithm, and a 5, 7 or 25 over a small q (10, 20, 30, 90,
//! 14, 28, 126, 50, 100, 150, ...) slowly too. Measured, float32 lines on the
//! development CPU (ns per point, 2026-11-27): 50 1.84 and 54 0.57, 100 1.81
//! and 108 0.88, 126 1.86 and 128 0.62, 250 2.14 and 252 0.91, against
//! 0.74–0.93 for 56, 60, 80, 84, 112, 120, 160, 168, 180, 224, 240 and
//! 1.20–1.43 for 200, 300 and 400 (kept: the next faster lengths are 8 %
//! and more larger); with an 11, 88 1.00, 132 0.95, 176 0.85 (kept: 96, 144
//! and 180 are 0.68–0.84 on 2–9 % more cells per axis, and a 3D grid's
//! other passes cost per cell) against 44 1.15, 110 1.45, 220 1.43 (not
//! kept). cuFFT is fast on every such length. The fast path's
//! 40-mode axes went from 50 to 54 cells: its 192 float32 type-2 transforms
//! of ho3d-40 −18 %, type 1 −11 %, both more accurate (BENCHMARKS.md,
//! session 8).

use crate::error::{Error, Result};

/// The most cells a kernel may span (FINUFFT's limit; ε ≈ 1e-15 at σ = 2).
pub const MAX_WIDTH: usize = 16;

/// The smallest tolerance in float32 arithmetic: rounding of the fine grid's
/// values and of the FFT leaves ≈ 1e-7·log n relative error, so requests
/// below this cannot be met. At this tolerance rounding is the whole error
/// and about as large as it: CUDA float32, 3D, 2500 of 3000 points within
/// one cell, 15 seeds (2026-11-27): types 1 and 2 at 3.8e-7 to 9.9e-7, once
/// 1.09e-6 (type 1 spread point by point with float32 atomics); the CPU
/// computes float32 plans below [`super::cpu::FLOAT32_ARITHMETIC_TOLERANCE`]
/// in float64.
pub const MIN_TOLERANCE_F32: f64 = 1e-6;

/// The smallest tolerance in float64 arithmetic.
pub const MIN_TOLERANCE_F64: f64 = 1e-12;

/// The largest tolerance accepted.
pub const MAX_TOLERANCE: f64 = 1e-1;

/// The measured largest single-output error of widths w = 2 … 16 at σ = 2
/// (module documentation).
pub const ERROR_SIGMA_2: [f64; 15] = [
    2.64e-1, 2.48e-2, 3.34e-3, 3.65e-4, 4.23e-5, 4.34e-6, 4.78e-7, 5.90e-8, 8.28e-9, 9.85e-10,
    8.65e-11, 9.01e-12, 7.68e-13, 9.81e-14, 3.66e-14,
];

/// The same at σ = 1.25.
pub const ERROR_SIGMA_5_4: [f64; 15] = [
    8.62e-1, 2.07e-1, 5.46e-2, 1.40e-2, 3.31e-3, 7.00e-4, 1.12e-4, 2.59e-5, 1.05e-5, 3.83e-6,
    1.11e-6, 2.57e-7, 4.35e-8, 4.22e-9, 3.14e-9,
];

/// The smallest float32 tolerance at which σ = 1.25 is used (module documentation).
pub const MIN_TOLERANCE_F32_SIGMA_5_4: f64 = 1e-4;

/// Measured error × SAFETY ≤ ε picks the width.
pub const SAFETY: f64 = 1.25;

/// The smallest width whose measured error (table `errors`, w = 2…16) times [`SAFETY`] is ≤ ε.
fn width_for(tolerance: f64, errors: &[f64; 15]) -> Option<usize> {
    errors
        .iter()
        .position(|&e| SAFETY * e <= tolerance)
        .map(|i| i + 2)
}

/// Upsampling factors σ (fine grid / modes per axis).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Upsampling {
    /// σ = 2: the narrowest kernel for a tolerance.
    Two,
    /// σ = 1.25: 2^d/1.25^d less fine-grid memory and FFT work, wider kernel.
    OneQuarter,
}

impl Upsampling {
    /// σ.
    pub fn factor(self) -> f64 {
        match self {
            Upsampling::Two => 2.0,
            Upsampling::OneQuarter => 1.25,
        }
    }
}

/// The ES kernel of one transform: width, shape and upsampling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelParams {
    /// w, cells the kernel spans (2 ≤ w ≤ [`MAX_WIDTH`]).
    pub width: usize,
    /// β, the shape parameter of φ.
    pub beta: f64,
    /// σ.
    pub upsampling: Upsampling,
}

impl KernelParams {
    /// The kernel for relative tolerance `tolerance` at upsampling σ, in
    /// float32 (`double = false`) or float64 arithmetic.
    ///
    /// Tolerances outside [1e-6, 1e-1] (float32) or [1e-12, 1e-1] (float64)
    /// are `InvalidArgument`, naming the range.
    pub fn new(tolerance: f64, upsampling: Upsampling, double: bool) -> Result<KernelParams> {
        let lowest = if double {
            MIN_TOLERANCE_F64
        } else {
            MIN_TOLERANCE_F32
        };
        if !(tolerance.is_finite() && (lowest..=MAX_TOLERANCE).contains(&tolerance)) {
            return Err(Error::invalid(format!(
                "tolerance must be in [{lowest:e}, {MAX_TOLERANCE:e}] in {} precision, got {tolerance:e}",
                if double { "double" } else { "single" }
            )));
        }
        let quarter_allowed = double || tolerance >= MIN_TOLERANCE_F32_SIGMA_5_4;
        let (width, upsampling) = match upsampling {
            Upsampling::OneQuarter if quarter_allowed => {
                match width_for(tolerance, &ERROR_SIGMA_5_4) {
                    Some(w) => (w, Upsampling::OneQuarter),
                    None => (
                        width_for(tolerance, &ERROR_SIGMA_2).unwrap_or(MAX_WIDTH),
                        Upsampling::Two,
                    ),
                }
            }
            _ => (
                width_for(tolerance, &ERROR_SIGMA_2).unwrap_or(MAX_WIDTH),
                Upsampling::Two,
            ),
        };
        Ok(KernelParams::with_width(width, upsampling))
    }

    /// The kernel of width w (2…[`MAX_WIDTH`]) at σ with this module's β.
    pub fn with_width(width: usize, upsampling: Upsampling) -> KernelParams {
        let beta = match upsampling {
            Upsampling::Two => {
                let gamma = match width {
                    2 => 1.82,
                    3 => 2.12,
                    4 => 2.20,
                    5 => 2.24,
                    _ => 2.30,
                };
                gamma * width as f64
            }
            Upsampling::OneQuarter => {
                let sigma = upsampling.factor();
                0.97 * std::f64::consts::PI * width as f64 * (1.0 - 1.0 / (2.0 * sigma))
            }
        };
        KernelParams {
            width,
            beta,
            upsampling,
        }
    }

    /// φ(z) for |z| ≤ 1, 0 outside.
    pub fn phi(&self, z: f64) -> f64 {
        let s = 1.0 - z * z;
        if s < 0.0 {
            0.0
        } else {
            (self.beta * (s.sqrt() - 1.0)).exp()
        }
    }

    /// The kernel as a function of the distance x in fine-grid cells:
    /// φ(2x/w).
    pub fn value(&self, x: f64) -> f64 {
        self.phi(2.0 * x / self.width as f64)
    }

    /// n_f for an axis of `modes` modes (1 for a singleton axis, which is
    /// not spread along).
    pub fn fine_size(&self, modes: usize) -> Result<usize> {
        if modes <= 1 {
            return Ok(1);
        }
        let wanted = (self.upsampling.factor() * modes as f64).ceil() as usize;
        next_fast_even(wanted.max(2 * self.width)).ok_or_else(|| {
            Error::invalid(format!(
                "{modes} modes need a fine grid beyond the addressable size"
            ))
        })
    }
}

/// The smallest even integer ≥ n that is a fast FFT length (module
/// documentation): q = 2^a·3^b, or q·c with c ∈ {5, 7, 11, 25} and q a
/// multiple of 4 and ≥ 8; `None` past `usize::MAX`.
pub fn next_fast_even(n: usize) -> Option<usize> {
    let n = n.max(2);
    // Per c and power of 3, the smallest admissible power of 2: O(log² n)
    // candidates (a scan of the even numbers took seconds near 10¹¹).
    let mut best: Option<usize> = None;
    for (c, least_q, least_two) in [(1, 2, 1), (5, 8, 2), (7, 8, 2), (11, 8, 2), (25, 8, 2)] {
        let mut three = Some(1usize);
        while let Some(t) = three {
            let Some(base) = t.checked_mul(c) else {
                break;
            };
            // q = 2^a·t with 2^a ≥ 2^least_two, q ≥ least_q and q·c ≥ n.
            let mut q = t.checked_mul(1 << least_two);
            while let Some(v) = q.filter(|&v| v < least_q || v.saturating_mul(c) < n) {
                q = v.checked_mul(2);
            }
            if let Some(m) = q.and_then(|q| q.checked_mul(c)) {
                best = Some(best.map_or(m, |b| b.min(m)));
            }
            if base >= n {
                break;
            }
            three = t.checked_mul(3);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether n is q = 2^a·3^b, or q·c with c ∈ {5, 7, 11, 25}, 4 | q and q ≥ 8.
    fn fast_length(n: usize) -> bool {
        let mut q = n;
        for p in [2, 3] {
            while q > 1 && q % p == 0 {
                q /= p;
            }
        }
        let (c, q) = (q, n / q);
        c == 1 || (matches!(c, 5 | 7 | 11 | 25) && q % 4 == 0 && q >= 8)
    }

    /// The smallest even fast length by scanning, as [`next_fast_even`] once was.
    fn scanned(n: usize) -> usize {
        let mut m = n.max(2);
        m += m % 2;
        while !fast_length(m) {
            m += 2;
        }
        m
    }

    #[test]
    fn fast_lengths_match_a_scan_and_stay_quick_when_huge() {
        for n in 0..200_000 {
            assert_eq!(next_fast_even(n), Some(scanned(n)), "n = {n}");
        }
        for n in [
            1usize << 40,
            10usize.pow(11) + 7,
            10usize.pow(15) + 1,
            usize::MAX / 4,
        ] {
            let m = next_fast_even(n).unwrap();
            assert!(m >= n && m % 2 == 0 && fast_length(m), "{n} -> {m}");
            assert!(m as f64 <= 1.07 * n as f64, "{n} -> {m}");
        }
        assert_eq!(next_fast_even(usize::MAX), None);
    }

    #[test]
    fn fast_lengths() {
        let cases = [
            (0, 2),
            (1, 2),
            (7, 8),
            (9, 12),
            (13, 16),
            (14, 16),
            (31, 32),
            (37, 40),
            (50, 54),
            (55, 56),
            (61, 64),
            (81, 84),
            (43, 48),
            (85, 88),
            (89, 96),
            (109, 112),
            (129, 132),
            (99, 108),
            (125, 128),
            (161, 162),
            (199, 200),
            (250, 252),
            (253, 256),
            (257, 264),
            (265, 288),
        ];
        for (n, fast) in cases {
            assert_eq!(next_fast_even(n), Some(fast), "{n}");
        }
        // Every even length from 2 to 10⁴ has a fast length at most 1/8 (+ 6) above it.
        for n in (2..10_000).step_by(2) {
            let m = next_fast_even(n).unwrap();
            assert!(
                fast_length(m) && m % 2 == 0 && m >= n && m <= n + n / 8 + 6,
                "{n} → {m}"
            );
        }
        assert_eq!(next_fast_even(usize::MAX - 1), None);
        assert_eq!(next_fast_even(usize::MAX), None);
    }

    #[test]
    fn widths_follow_the_tolerance() {
        let k = KernelParams::new(1e-6, Upsampling::Two, false).unwrap();
        assert_eq!(k.width, 8);
        assert!((k.beta - 18.4).abs() < 1e-12);
        let k = KernelParams::new(1e-3, Upsampling::Two, false).unwrap();
        assert_eq!(k.width, 5);
        let k = KernelParams::new(1e-1, Upsampling::Two, false).unwrap();
        assert_eq!(k.width, 3);
        let k = KernelParams::new(1e-12, Upsampling::Two, true).unwrap();
        assert_eq!(k.width, 14);
        let k = KernelParams::new(1e-8, Upsampling::Two, true).unwrap();
        assert_eq!(k.width, 11);
        let k = KernelParams::new(1e-6, Upsampling::OneQuarter, true).unwrap();
        assert_eq!((k.width, k.upsampling), (13, Upsampling::OneQuarter));
        let k = KernelParams::new(1e-6, Upsampling::OneQuarter, false).unwrap();
        assert_eq!((k.width, k.upsampling), (8, Upsampling::Two));
        let k = KernelParams::new(1e-3, Upsampling::OneQuarter, false).unwrap();
        assert_eq!((k.width, k.upsampling), (7, Upsampling::OneQuarter));
        let k = KernelParams::new(1e-10, Upsampling::OneQuarter, true).unwrap();
        assert_eq!((k.width, k.upsampling), (13, Upsampling::Two));
        assert!(KernelParams::new(1e-7, Upsampling::Two, false).is_err());
        assert!(KernelParams::new(1e-7, Upsampling::Two, true).is_ok());
        assert!(KernelParams::new(0.5, Upsampling::Two, true).is_err());
        assert!(KernelParams::new(f64::NAN, Upsampling::Two, true).is_err());
    }

    #[test]
    fn fine_grids() {
        let k = KernelParams::new(1e-6, Upsampling::Two, false).unwrap();
        assert_eq!(k.fine_size(1).unwrap(), 1);
        assert_eq!(k.fine_size(2).unwrap(), 16); // 2w = 16
        assert_eq!(k.fine_size(256).unwrap(), 512);
        assert_eq!(k.fine_size(200).unwrap(), 400);
        let k = KernelParams::new(1e-3, Upsampling::OneQuarter, false).unwrap();
        assert_eq!(k.fine_size(96).unwrap(), 120);
    }
}
