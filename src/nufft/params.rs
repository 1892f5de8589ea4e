//! The spreading kernel's parameters and the fine grid, chosen from the
//! requested tolerance (FAST-PATH.md §2; Barnett, Magland & af Klinteberg,
//! SIAM J. Sci. Comput. 41(5), 2019).
//!
//! The "exponential of semicircle" (ES) kernel over w fine-grid cells,
//!
//! $$\phi(z) = e^{\beta(\sqrt{1 - z^2} - 1)},\qquad |z| \le 1,$$
//!
//! with z = (distance in cells)/(w/2). For upsampling σ = 2,
//! w = ⌈log₁₀(1/ε)⌉ + 1 and β = γ_w·w (γ_w = 2.20, 2.26, 2.38 for w = 2, 3,
//! 4 and 2.30 above, FINUFFT's values); for any other σ,
//! w = ⌈ln(1/ε) / (π√(1 − 1/σ))⌉ and β = 0.97·π·w·(1 − 1/(2σ)).
//!
//! The fine grid of an axis with n modes has n_f = the smallest even
//! 2,3,5-smooth integer ≥ max(σ·n, 2w) points.

use crate::error::{Error, Result};

/// The most cells a kernel may span (FINUFFT's limit; ε ≈ 1e-15 at σ = 2).
pub const MAX_WIDTH: usize = 16;

/// The smallest tolerance in float32 arithmetic: rounding of the fine grid's
/// values and of the FFT leaves ≈ 1e-7·log n relative error, so requests
/// below this cannot be met.
pub const MIN_TOLERANCE_F32: f64 = 1e-6;

/// The smallest tolerance in float64 arithmetic.
pub const MIN_TOLERANCE_F64: f64 = 1e-12;

/// The largest tolerance accepted (a kernel of two cells).
pub const MAX_TOLERANCE: f64 = 1e-1;

/// Upsampling factors σ (fine grid / modes per axis).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Upsampling {
    /// σ = 2: narrowest kernel for a tolerance; the Toeplitz embedding needs it.
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
        let sigma = upsampling.factor();
        let (width, beta) = match upsampling {
            Upsampling::Two => {
                let w = ((1.0 / tolerance).log10().ceil() as usize + 1).clamp(2, MAX_WIDTH);
                let gamma = match w {
                    2 => 2.20,
                    3 => 2.26,
                    4 => 2.38,
                    _ => 2.30,
                };
                (w, gamma * w as f64)
            }
            Upsampling::OneQuarter => {
                let w = ((1.0 / tolerance).ln()
                    / (std::f64::consts::PI * (1.0 - 1.0 / sigma).sqrt()))
                .ceil() as usize;
                let w = w.clamp(2, MAX_WIDTH);
                let beta = 0.97 * std::f64::consts::PI * w as f64 * (1.0 - 1.0 / (2.0 * sigma));
                (w, beta)
            }
        };
        Ok(KernelParams {
            width,
            beta,
            upsampling,
        })
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
        next_smooth_even(wanted.max(2 * self.width)).ok_or_else(|| {
            Error::invalid(format!(
                "{modes} modes need a fine grid beyond the addressable size"
            ))
        })
    }
}

/// The smallest even integer ≥ n whose only prime factors are 2, 3 and 5.
pub fn next_smooth_even(n: usize) -> Option<usize> {
    let mut m = n.max(2);
    m += m % 2;
    loop {
        let mut r = m;
        for p in [2, 3, 5] {
            while r % p == 0 {
                r /= p;
            }
        }
        if r == 1 {
            return Some(m);
        }
        m = m.checked_add(2)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_sizes() {
        assert_eq!(next_smooth_even(1), Some(2));
        assert_eq!(next_smooth_even(7), Some(8));
        assert_eq!(next_smooth_even(13), Some(16));
        assert_eq!(next_smooth_even(14), Some(16));
        assert_eq!(next_smooth_even(31), Some(32));
        assert_eq!(next_smooth_even(161), Some(162));
        assert_eq!(next_smooth_even(251), Some(256));
        assert_eq!(next_smooth_even(257), Some(270));
    }

    #[test]
    fn widths_follow_the_tolerance() {
        let k = KernelParams::new(1e-6, Upsampling::Two, false).unwrap();
        assert_eq!(k.width, 7);
        assert!((k.beta - 16.1).abs() < 1e-12);
        let k = KernelParams::new(1e-3, Upsampling::Two, false).unwrap();
        assert_eq!(k.width, 4);
        let k = KernelParams::new(1e-12, Upsampling::Two, true).unwrap();
        assert_eq!(k.width, 13);
        let k = KernelParams::new(1e-6, Upsampling::OneQuarter, false).unwrap();
        assert_eq!(k.width, 10);
        assert!(KernelParams::new(1e-7, Upsampling::Two, false).is_err());
        assert!(KernelParams::new(1e-7, Upsampling::Two, true).is_ok());
        assert!(KernelParams::new(0.5, Upsampling::Two, true).is_err());
        assert!(KernelParams::new(f64::NAN, Upsampling::Two, true).is_err());
    }

    #[test]
    fn fine_grids() {
        let k = KernelParams::new(1e-6, Upsampling::Two, false).unwrap();
        assert_eq!(k.fine_size(1).unwrap(), 1);
        assert_eq!(k.fine_size(2).unwrap(), 16); // 2w = 14 → 16
        assert_eq!(k.fine_size(256).unwrap(), 512);
        assert_eq!(k.fine_size(200).unwrap(), 400);
        let k = KernelParams::new(1e-3, Upsampling::OneQuarter, false).unwrap();
        assert_eq!(k.fine_size(96).unwrap(), 120);
    }
}
