//! sin and cos of 2π·x for a reduced phase x ∈ [−½, ½] cycles, as
//! branch-free polynomials that vectorise (MODEL.md: work in cycles,
//! subtract the nearest integer, then evaluate).
//!
//! x = q/2 + r with q = round(2x) ∈ {−1, 0, 1} and r ∈ [−¼, ¼], so
//! θ = 2πr ∈ [−π/2, π/2] and (sin, cos)(2πx) = (−1)^q·(sin θ, cos θ),
//! with Taylor polynomials of sin θ and cos θ.

use super::kernel::{isa, on_widest_isa, Isa};
use super::real::Real;

/// Taylor coefficients (−1)^k/(2k+1)! for k = 1..
const SIN: [f64; 9] = [
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5040.0,
    1.0 / 362880.0,
    -1.0 / 39916800.0,
    1.0 / 6227020800.0,
    -1.0 / 1307674368000.0,
    1.0 / 355687428096000.0,
    -1.0 / 121645100408832000.0,
];
/// Taylor coefficients (−1)^k/(2k)! for k = 1..
const COS: [f64; 10] = [
    -1.0 / 2.0,
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40320.0,
    -1.0 / 3628800.0,
    1.0 / 479001600.0,
    -1.0 / 87178291200.0,
    1.0 / 20922789888000.0,
    -1.0 / 6402373705728000.0,
    1.0 / 2432902008176640000.0,
];

/// (sin 2πx, cos 2πx) for x ∈ [−½, ½], with `SN` sine and `CN` cosine
/// correction terms: truncation error below (π/2)^(2SN+3)/(2SN+3)! and
/// (π/2)^(2CN+2)/(2CN+2)!.
#[inline(always)]
pub fn sincos_cycles<T: Real, const FMA: bool, const SN: usize, const CN: usize>(x: T) -> (T, T) {
    let q = (x * T::from_f64(2.0)).round_even();
    let r = q.madd::<FMA>(T::from_f64(-0.5), x);
    let t = r * T::from_f64(std::f64::consts::TAU);
    let t2 = t * t;
    let mut ps = T::from_f64(SIN[SN - 1]);
    for k in (0..SN - 1).rev() {
        ps = ps.madd::<FMA>(t2, T::from_f64(SIN[k]));
    }
    let s = (t * t2).madd::<FMA>(ps, t);
    let mut pc = T::from_f64(COS[CN - 1]);
    for k in (0..CN - 1).rev() {
        pc = pc.madd::<FMA>(t2, T::from_f64(COS[k]));
    }
    let c = t2.madd::<FMA>(pc, T::from_f64(1.0));
    // (−1)^q for q ∈ {−1, 0, 1} is 1 − 2|q|.
    let sign = q.abs_().madd::<FMA>(T::from_f64(-2.0), T::from_f64(1.0));
    (s * sign, c * sign)
}

/// (cos 2πx, sin 2πx) for every x of `cycles` (any magnitude: the nearest
/// integer is subtracted first, exactly) into `re` and `im` (each as long),
/// in float64: error ≤ 2e-15 plus |x|·2⁻⁵³ from x's own rounding. Vectorised
/// with the widest instruction set the CPU has (several times faster than
/// `sin_cos` point by point).
pub fn unit_phasors(cycles: &[f64], re: &mut [f64], im: &mut [f64]) {
    #[inline(always)]
    fn each<const FMA: bool>(cycles: &[f64], re: &mut [f64], im: &mut [f64]) {
        for ((&x, c), s) in cycles.iter().zip(re.iter_mut()).zip(im.iter_mut()) {
            (*s, *c) = sincos_cycles::<f64, FMA, 9, 10>(x - x.round_ties_even());
        }
    }
    let fma = isa() != Isa::Baseline;
    on_widest_isa(
        #[inline(always)]
        || {
            if fma {
                each::<true>(cycles, re, im)
            } else {
                each::<false>(cycles, re, im)
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_error<T: Real, const SN: usize, const CN: usize>() -> f64 {
        let mut worst = 0.0f64;
        for i in 0..=100_000 {
            let x = -0.5 + i as f64 / 100_000.0;
            let (s, c) = sincos_cycles::<T, false, SN, CN>(T::from_f64(x));
            let a = std::f64::consts::TAU * T::from_f64(x).to_f64();
            worst = worst
                .max((s.to_f64() - a.sin()).abs())
                .max((c.to_f64() - a.cos()).abs());
        }
        worst
    }

    #[test]
    fn accuracy_of_each_mode() {
        let accurate = max_error::<f32, 5, 6>();
        let fast = max_error::<f32, 3, 4>();
        let double = max_error::<f64, 9, 10>();
        eprintln!(
            "sincos max errors: accurate {accurate:.2e}, fast {fast:.2e}, double {double:.2e}"
        );
        assert!(accurate < 4e-7, "f32 accurate sincos error {accurate}");
        assert!(fast < 2e-4, "f32 fast sincos error {fast}");
        assert!(double < 2e-15, "f64 sincos error {double}");
    }

    #[test]
    fn unit_phasors_match_sin_cos_at_any_magnitude() {
        let cycles: Vec<f64> = (0..4099)
            .map(|i| (i as f64 * 0.618_033_988_749_895).fract() * 2e3 - 1e3 + i as f64 * 1e-3)
            .collect();
        let (mut re, mut im) = (vec![0.0; cycles.len()], vec![0.0; cycles.len()]);
        unit_phasors(&cycles, &mut re, &mut im);
        for ((&x, &c), &s) in cycles.iter().zip(&re).zip(&im) {
            let a = std::f64::consts::TAU * (x - x.round());
            assert!(
                (c - a.cos()).abs() < 1e-14 && (s - a.sin()).abs() < 1e-14,
                "{x}"
            );
        }
    }
}
