//! The phase probe: the float32 phase that the phase-sum kernels compute
//! (kernels/phase_pair.cu), emulated on the host on sampled (outer, inner)
//! pairs and compared with float64. `phase_sum::SidePlan::new` uses it to decide
//! how many terms to split (accurate mode) and whether to reduce the phase
//! before sin/cos.

use super::layout::SideLayout;

/// Pairs sampled to estimate the float32 phase error.
const PROBE_PAIRS: usize = 4096;

/// The float32 phase of the kernel (accurate/fast modes) emulated on sampled
/// pairs against float64: RMS error (radians) and largest |phase| (cycles).
pub(super) struct PhaseProbe<'a> {
    pub(super) outer: &'a [f64],
    pub(super) inner: &'a [f64],
    pub(super) terms: usize,
    pub(super) o: usize,
    pub(super) i: usize,
    pub(super) blk: usize,
    pub(super) lay: &'a SideLayout,
    /// (feature, Δv in permuted order, bound), in kernel order.
    pub(super) rows: &'a [(usize, Vec<f64>, f64)],
    /// Per-outer-point phase applied exactly by the epilogue (cycles).
    pub(super) rotation: Option<&'a [f64]>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct PhaseEstimate {
    /// RMS error (radians) of the phase sin/cos sees, reduced to [-½, ½] cycles first.
    pub(super) rms_error: f64,
    /// The same without the reduction (the kernel's REDUCE = 0).
    pub(super) rms_unreduced: f64,
    /// Largest |phase| (cycles) that sin/cos sees unreduced.
    pub(super) max_abs: f64,
}

/// The phase (cycles) that the hardware sin/cos of `__sincosf(2π·x)` sees:
/// FMUL by float32 2π (to nearest), then FMUL.RZ by float32 1/(2π) (toward zero;
/// the SASS of kernels/phase_sum.cu). Both products are exact in f64.
fn mufu_cycles(x: f32) -> f64 {
    let radians = (x as f64 * std::f32::consts::TAU as f64) as f32;
    let v = radians as f64 * (1.0 / std::f32::consts::TAU) as f64;
    let mut r = v as f32;
    if (r as f64).abs() > v.abs() {
        r = f32::from_bits(r.to_bits() - 1);
    }
    r as f64
}

impl PhaseProbe<'_> {
    /// The estimate with the first `split` rows split into float32 hi + lo parts.
    pub(super) fn run(&self, split: usize) -> PhaseEstimate {
        let (terms, o, i) = (self.terms, self.o, self.i);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as usize) % n.max(1)
        };
        let (mut sum_sq, mut sum_sq_unreduced, mut max_abs) = (0.0f64, 0.0f64, 0.0f64);
        for _ in 0..PROBE_PAIRS {
            let k = next(o); // sorted position; the first o are real points
            let p = self.lay.perm[k] as usize;
            let q = next(i);
            let block = k / self.blk;
            let mut reference = 0.0f64;
            let mut exact = 0.0f64;
            for f in 0..terms {
                let a = self.inner[f * i + q];
                reference = a.mul_add(self.lay.vref[block * terms + f], reference);
                exact = a.mul_add(self.outer[f * o + p], exact);
            }
            let mut ph = (reference - reference.round_ties_even()) as f32;
            for (n, (f, dv, _)) in self.rows.iter().enumerate() {
                let a = self.inner[f * i + q];
                let (a32, d32) = (a as f32, dv[k] as f32);
                if n < split {
                    let (alo, dlo) = ((a - a32 as f64) as f32, (dv[k] - d32 as f64) as f32);
                    let mut prod = a32 * d32;
                    let mut e = a32.mul_add(d32, -prod);
                    e = a32.mul_add(dlo, e);
                    e = alo.mul_add(d32, e);
                    prod -= prod.round_ties_even();
                    ph += prod;
                    ph += e;
                } else {
                    ph = a32.mul_add(d32, ph);
                }
            }
            max_abs = max_abs.max(ph.abs() as f64);
            let error = |seen: f64| {
                let diff = seen + self.rotation.map_or(0.0, |r| r[k]) - exact;
                let diff = diff - diff.round_ties_even();
                diff * diff
            };
            sum_sq += error(mufu_cycles(ph - ph.round_ties_even()));
            sum_sq_unreduced += error(mufu_cycles(ph));
        }
        let rms = |s: f64| std::f64::consts::TAU * (s / PROBE_PAIRS as f64).sqrt();
        PhaseEstimate {
            rms_error: rms(sum_sq),
            rms_unreduced: rms(sum_sq_unreduced),
            max_abs,
        }
    }
}
