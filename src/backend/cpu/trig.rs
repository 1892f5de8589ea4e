//! sin and cos of 2π·x for a reduced phase x ∈ [−½, ½] cycles, as
//! branch-free polynomials that vectorise (MODEL.md: work in cycles,
//! subtract the nearest integer, then evaluate).
//!
//! x = q/4 + r with q = round(4x), r ∈ [−⅛, ⅛], θ = 2πr ∈ [−π/4, π/4];
//! Taylor polynomials of sin θ and cos θ, then the quadrant q rotates them.

use super::real::Real;

/// Taylor coefficients (−1)^k/(2k+1)! and (−1)^k/(2k)! for k ≥ 1.
const SIN: [f64; 7] = [
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5040.0,
    1.0 / 362880.0,
    -1.0 / 39916800.0,
    1.0 / 6227020800.0,
    -1.0 / 1307674368000.0,
];
const COS: [f64; 8] = [
    -1.0 / 2.0,
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40320.0,
    -1.0 / 3628800.0,
    1.0 / 479001600.0,
    -1.0 / 87178291200.0,
    1.0 / 20922789888000.0,
];

/// (sin 2πx, cos 2πx) with `SN` sine and `CN` cosine correction terms: the
/// truncation error is below θ^(2SN+3)/(2SN+3)! and θ^(2CN+2)/(2CN+2)!
/// at θ = π/4.
#[inline(always)]
pub fn sincos_cycles<T: Real, const FMA: bool, const SN: usize, const CN: usize>(x: T) -> (T, T) {
    let q = (x * T::from_f64(4.0)).round_even();
    let r = x - q * T::from_f64(0.25);
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
    // angle = q·π/2 + θ: q odd swaps sin and cos; the signs follow the quadrant.
    let qi = q.to_i32();
    let (sw, cw) = if qi & 1 != 0 { (c, s) } else { (s, c) };
    let sin = if qi & 2 != 0 { -sw } else { sw };
    let cos = if (qi + 1) & 2 != 0 { -cw } else { cw };
    (sin, cos)
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
        let e32 = max_error::<f32, 4, 5>();
        let fast = max_error::<f32, 2, 3>();
        let e64 = max_error::<f64, 7, 8>();
        assert!(e32 < 3e-7, "f32 accurate sincos error {e32}");
        assert!(fast < 1e-4, "f32 fast sincos error {fast}");
        assert!(e64 < 1e-15, "f64 sincos error {e64}");
    }
}
