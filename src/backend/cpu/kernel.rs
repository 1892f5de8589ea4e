//! The one CPU kernel behind E and Eᴴ: a phase-weighted sum
//!
//!   out_l(o) = Σ_i w_l(i) · exp(±i·2π·Σ_f a_f(i)·b_f(o))
//!
//! over "inner" points i for every "outer" point o and coil l. The adjoint
//! has outer = voxels, inner = samples, w = data, sign −; the forward has
//! outer = samples, inner = voxels, w = S·ρ, sign +.
//!
//! Outer points go in lanes of `LANES` (the vectorised dimension); inner
//! points in tiles of `TILE`. Per tile: (1) phase, reduction and sin/cos
//! for TILE×LANES pairs into a table; (2) per coil, a complex
//! multiply-accumulate over the table into tile sums, which are then added
//! to the running sums (two-level summation keeps the float32 rounding
//! error of long sums near u·(√TILE + √(inner/TILE)) instead of u·√inner).

use super::real::Real;
use super::trig::sincos_cycles;
use crate::error::{try_vec, Result};
use crate::progress::Progress;
use num_complex::Complex;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Outer points per vector group.
pub const LANES: usize = 16;
/// Inner points per tile.
const TILE: usize = 64;
/// Vector groups per parallel task.
const GROUPS: usize = 4;

/// The arithmetic of a precision mode.
pub trait Mode: Send + Sync + 'static {
    /// Type of the phase sum (features are stored in it).
    type Phase: Real;
    /// Type of sin/cos and of the accumulation.
    type Acc: Real;
    /// (sin, cos) of 2π·x for x ∈ [−½, ½].
    fn sincos<const FMA: bool>(x: Self::Phase) -> (Self::Acc, Self::Acc);
}

/// Phase in float64, reduced there, sin/cos and sums in float32.
pub struct Accurate;
/// Everything in float32 with short polynomials.
pub struct Fast;
/// Everything in float64.
pub struct Double;

impl Mode for Accurate {
    type Phase = f64;
    type Acc = f32;
    #[inline(always)]
    fn sincos<const FMA: bool>(x: f64) -> (f32, f32) {
        sincos_cycles::<f32, FMA, 5, 6>(x as f32)
    }
}
impl Mode for Fast {
    type Phase = f32;
    type Acc = f32;
    #[inline(always)]
    fn sincos<const FMA: bool>(x: f32) -> (f32, f32) {
        sincos_cycles::<f32, FMA, 3, 4>(x)
    }
}
impl Mode for Double {
    type Phase = f64;
    type Acc = f64;
    #[inline(always)]
    fn sincos<const FMA: bool>(x: f64) -> (f64, f64) {
        sincos_cycles::<f64, FMA, 9, 10>(x)
    }
}

/// One side of the sum: its F features per point in two layouts, F×count
/// (point fastest: read as vector lanes when the side is outer) and count×F
/// (feature fastest: read as one contiguous row when the side is inner).
#[derive(Clone, Copy)]
pub struct Points<'a, P> {
    pub by_feature: &'a [P],
    pub by_point: &'a [P],
    pub count: usize,
}

/// Sums into `out` (coils × GROUPS·LANES, lane fastest) for the outer
/// points starting at `o0` and inner points `inner_range`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn task<Mo: Mode, const FMA: bool>(
    terms: usize,
    outer: Points<'_, Mo::Phase>,
    o0: usize,
    inner: Points<'_, Mo::Phase>,
    inner_range: (usize, usize),
    weights: &[Complex<Mo::Acc>],
    coils: usize,
    conjugate: bool,
    out: &mut [Complex<Mo::Acc>],
) {
    type P<M> = <M as Mode>::Phase;
    type A<M> = <M as Mode>::Acc;
    let zero_a = A::<Mo>::default();
    let sign = if conjugate {
        A::<Mo>::from_f64(-1.0)
    } else {
        A::<Mo>::from_f64(1.0)
    };
    let mut lane_features = vec![[P::<Mo>::default(); LANES]; terms];
    let mut cos_table = [[zero_a; LANES]; TILE];
    let mut sin_table = [[zero_a; LANES]; TILE];
    for g in 0..GROUPS {
        let base = o0 + g * LANES;
        if base >= outer.count {
            break;
        }
        for (f, row) in lane_features.iter_mut().enumerate() {
            for (k, v) in row.iter_mut().enumerate() {
                let o = base + k;
                *v = if o < outer.count {
                    outer.by_feature[f * outer.count + o]
                } else {
                    P::<Mo>::default()
                };
            }
        }
        let mut sum_re = vec![[zero_a; LANES]; coils];
        let mut sum_im = vec![[zero_a; LANES]; coils];
        let (start, end) = inner_range;
        let mut i0 = start;
        while i0 < end {
            let nt = TILE.min(end - i0);
            for t in 0..nt {
                let i = i0 + t;
                let mut phase = [P::<Mo>::default(); LANES];
                let inner_row = &inner.by_point[i * terms..(i + 1) * terms];
                for (&a, row) in inner_row.iter().zip(&lane_features) {
                    for k in 0..LANES {
                        phase[k] = a.madd::<FMA>(row[k], phase[k]);
                    }
                }
                for k in 0..LANES {
                    let (s, c) = Mo::sincos::<FMA>(phase[k] - phase[k].round_even());
                    cos_table[t][k] = c;
                    sin_table[t][k] = s * sign;
                }
            }
            // Coils in pairs, so each loaded sin/cos row serves two accumulations.
            let mut l = 0;
            while l < coils {
                let block = if l + 2 <= coils { 2 } else { 1 };
                let rows = |c: usize| &weights[c * inner.count + i0..c * inner.count + i0 + nt];
                let tiles = if block == 2 {
                    accumulate::<Mo::Acc, FMA, 2>(
                        [rows(l), rows(l + 1)],
                        &cos_table[..nt],
                        &sin_table[..nt],
                    )
                } else {
                    let [one] = accumulate::<Mo::Acc, FMA, 1>(
                        [rows(l)],
                        &cos_table[..nt],
                        &sin_table[..nt],
                    );
                    [one, one]
                };
                for (c, (tile_re, tile_im)) in tiles.iter().take(block).enumerate() {
                    add_lanes(&mut sum_re[l + c], tile_re);
                    add_lanes(&mut sum_im[l + c], tile_im);
                }
                l += block;
            }
            i0 += nt;
        }
        for l in 0..coils {
            for k in 0..LANES {
                out[l * GROUPS * LANES + g * LANES + k] = Complex::new(sum_re[l][k], sum_im[l][k]);
            }
        }
    }
}

#[inline(always)]
fn add_lanes<A: Real>(sum: &mut [A; LANES], tile: &[A; LANES]) {
    for (s, t) in sum.iter_mut().zip(tile) {
        *s = *s + *t;
    }
}

/// Σ_t w_c(t)·(cos + i·sin)[t][lane] for C coils at once: returns (re, im) lanes per coil.
#[inline(always)]
fn accumulate<A: Real, const FMA: bool, const C: usize>(
    weights: [&[Complex<A>]; C],
    cos_table: &[[A; LANES]],
    sin_table: &[[A; LANES]],
) -> [([A; LANES], [A; LANES]); C] {
    let zero = A::default();
    let mut tiles = [([zero; LANES], [zero; LANES]); C];
    for (t, (cos_row, sin_row)) in cos_table.iter().zip(sin_table).enumerate() {
        for (c, (tile_re, tile_im)) in tiles.iter_mut().enumerate() {
            let (wr, wi) = (weights[c][t].re, weights[c][t].im);
            for k in 0..LANES {
                let (cs, sn) = (cos_row[k], sin_row[k]);
                tile_re[k] = wr.madd::<FMA>(cs, (-wi).madd::<FMA>(sn, tile_re[k]));
                tile_im[k] = wr.madd::<FMA>(sn, wi.madd::<FMA>(cs, tile_im[k]));
            }
        }
    }
    tiles
}

/// The widest instruction set this CPU has, picked once (also used by the
/// NUFFT's spreading kernels, `crate::nufft::cpu`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Isa {
    Avx512,
    Avx2,
    Baseline,
}

pub(crate) fn isa() -> Isa {
    static ISA: once_cell::sync::Lazy<Isa> = once_cell::sync::Lazy::new(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::env::var_os("HORECON_CPU_BASELINE").is_none() {
                if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
                    return Isa::Avx512;
                }
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    return Isa::Avx2;
                }
            }
        }
        Isa::Baseline
    });
    *ISA
}

/// Runs `f` compiled for the widest instruction set this CPU has: `f` is
/// inlined into a function with those target features, so plain loops in
/// it (not the rayon tasks it may start) vectorise with AVX2 or AVX-512.
#[inline(always)]
pub(crate) fn on_widest_isa<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        match isa() {
            // SAFETY: the CPU has these features (checked at run time in `isa`).
            Isa::Avx512 => return unsafe { avx512(f) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(f) },
            Isa::Baseline => {}
        }
    }
    f()
}

macro_rules! isa_entry {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<Mo: Mode>(
            terms: usize,
            outer: Points<'_, Mo::Phase>,
            o0: usize,
            inner: Points<'_, Mo::Phase>,
            inner_range: (usize, usize),
            weights: &[Complex<Mo::Acc>],
            coils: usize,
            conjugate: bool,
            out: &mut [Complex<Mo::Acc>],
        ) {
            task::<Mo, true>(
                terms,
                outer,
                o0,
                inner,
                inner_range,
                weights,
                coils,
                conjugate,
                out,
            )
        }
    };
}
isa_entry!(task_avx512, "avx512f,avx512dq,avx512vl,avx2,fma");
isa_entry!(task_avx2, "avx2,fma");

/// How `phase_sum` splits its work: (tasks of GROUPS·LANES outer points,
/// parts of the inner sum per task, inner points per part).
fn split(outer: usize, inner: usize, threads: usize) -> (usize, usize, usize) {
    let tasks = outer.div_ceil(GROUPS * LANES);
    // Few outer points (e.g. one sample): split the inner sum too, so all threads work.
    let wanted = 4 * threads.max(1);
    let parts = if tasks >= wanted {
        1
    } else {
        wanted
            .div_ceil(tasks.max(1))
            .min(inner.div_ceil(4 * TILE))
            .max(1)
    };
    (tasks, parts, inner.div_ceil(parts))
}

/// Elements of the partial sums `phase_sum` allocates (for memory estimates).
pub fn partial_len(outer: usize, inner: usize, coils: usize, threads: usize) -> usize {
    let (tasks, parts, _) = split(outer, inner, threads);
    tasks
        .saturating_mul(parts)
        .saturating_mul(coils)
        .saturating_mul(GROUPS * LANES)
}

/// out (coils × outer.count, outer index fastest) = the phase-weighted sums.
/// `weights` is coils × inner.count. Runs on the current rayon pool and
/// reports to the current [`Progress`] (checked before every task of
/// GROUPS·LANES outer points); fails with `OutOfMemory` (the partial sums
/// are as large as `out`) or `Cancelled`.
pub fn phase_sum<Mo: Mode>(
    terms: usize,
    outer: Points<'_, Mo::Phase>,
    inner: Points<'_, Mo::Phase>,
    weights: &[Complex<Mo::Acc>],
    coils: usize,
    conjugate: bool,
    out: &mut [Complex<Mo::Acc>],
) -> Result<()> {
    debug_assert_eq!(outer.by_feature.len(), terms * outer.count);
    debug_assert_eq!(inner.by_point.len(), terms * inner.count);
    debug_assert_eq!(weights.len(), coils * inner.count);
    debug_assert_eq!(out.len(), coils * outer.count);
    let width = GROUPS * LANES;
    let (tasks, parts, span) = split(outer.count, inner.count, rayon::current_num_threads());
    let block = coils * width;
    let mut partial = try_vec(
        partial_len(
            outer.count,
            inner.count,
            coils,
            rayon::current_num_threads(),
        ),
        Complex::new(Mo::Acc::default(), Mo::Acc::default()),
        "partial sums",
    )?;
    let isa = isa();
    let progress = Progress::current();
    let total = (tasks * parts).max(1) as f64;
    let finished = AtomicUsize::new(0);
    partial
        .par_chunks_mut(block)
        .enumerate()
        .try_for_each(|(index, chunk)| -> Result<()> {
            progress.check(finished.load(Ordering::Relaxed) as f64 / total)?;
            let (t, p) = (index / parts, index % parts);
            let range = (
                (p * span).min(inner.count),
                ((p + 1) * span).min(inner.count),
            );
            let o0 = t * width;
            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has these features (checked at run time in `isa`).
                Isa::Avx512 => unsafe {
                    task_avx512::<Mo>(
                        terms, outer, o0, inner, range, weights, coils, conjugate, chunk,
                    )
                },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                Isa::Avx2 => unsafe {
                    task_avx2::<Mo>(
                        terms, outer, o0, inner, range, weights, coils, conjugate, chunk,
                    )
                },
                _ => task::<Mo, false>(
                    terms, outer, o0, inner, range, weights, coils, conjugate, chunk,
                ),
            }
            finished.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })?;
    progress.check(1.0)?;
    out.par_chunks_mut(outer.count)
        .enumerate()
        .for_each(|(l, row)| {
            for (o, value) in row.iter_mut().enumerate() {
                let (t, k) = (o / width, o % width);
                let mut sum = partial[(t * parts) * block + l * width + k];
                for p in 1..parts {
                    let add = partial[(t * parts + p) * block + l * width + k];
                    sum = Complex::new(sum.re + add.re, sum.im + add.im);
                }
                *value = sum;
            }
        });
    Ok(())
}
