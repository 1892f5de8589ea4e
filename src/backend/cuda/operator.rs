//! E on one GPU: the model is uploaded once when the operator is built;
//! forward/adjoint move only their input and output vectors; `normal` and
//! `solve` stay on the device between the two halves (CG moves the data up
//! once and the image down once).
//!
//! Each direction is one [`Side`]: out_l(o) = Σ_i w_l(i)·exp(±i2π Σ_f a_f(i)·v_f(o))
//! with the outer points sorted into compact blocks (Morton order of the
//! dominant features) so that each block's float64 reference phase leaves
//! only small float32 differences per pair (kernels/phase_sum.cu; in float32
//! modes with 3+ coils per group the coil sums run on the tensor cores,
//! kernels/phase_sum_tc.cu).

use super::context::{driver_error, Device};
use super::memory::{knob, setting, DeviceBuffer, Stream};
use crate::backend::cpu::fd::Grid;
use crate::error::{Error, Result, Status};
use crate::model::{Features, Sizes};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::solver::{cg, CgProblem, CgSpace, Penalty};
use cudarc::driver::{result, sys, CudaFunction, CudaStream};
use num_complex::{Complex32, Complex64};
use std::cell::{RefCell, RefMut};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// The two phase-sum kernels, each after the pair phase they share.
const PHASE_SUM: &str = concat!(
    include_str!("../../../kernels/phase_pair.cu"),
    "\n",
    include_str!("../../../kernels/phase_sum.cu")
);
const PHASE_SUM_TC: &str = concat!(
    include_str!("../../../kernels/phase_pair.cu"),
    "\n",
    include_str!("../../../kernels/phase_sum_tc.cu")
);
/// util.cu and the FFT operators' kernels (fft_ops.cu) form one NVRTC module
/// per precision mode: compiled once, when the first CUDA operator is built.
pub(super) const UTIL: &str = concat!(
    include_str!("../../../kernels/util.cu"),
    "\n",
    include_str!("../../../kernels/fft_ops.cu")
);
const FD: &str = include_str!("../../../kernels/fd.cu");

/// Threads per phase-sum block.
const THREADS: usize = 64;
/// Threads per block and 8-point outer tiles per warp of the float32 modes'
/// tensor-core phase sum (kernels/phase_sum_tc.cu).
const TC_THREADS: usize = 256;
const TC_TILES: usize = 4;
/// Inner points per shared-memory tile of the tensor path (fewer, longer tiles
/// amortise each tile's loads and two barriers).
const TC_TILE: usize = 256;
/// Accurate mode restarts the tensor-core sums (which truncate) every this
/// many inner points; fast mode once per tile. (bieri-512, H200: 64 → E error
/// 3.64e-6, 128 → 3.67e-6 and 2.4 % faster.)
const TC_SEGMENT_ACCURATE: usize = 128;
/// Coil groups of at least this many coils go on the tensor cores: the mma
/// costs one slot per pair (three in accurate mode) whatever the group, FFMA 4
/// per coil.
const TC_MIN_COILS: usize = 3;
/// More phase terms than this stay on FFMA (registers and shared memory per
/// point grow with the terms).
const TC_MAX_TERMS: usize = 64;
/// Coils per kernel pass (more coils run in groups).
const MAX_COIL_GROUP: usize = 8;
/// Threads per block and blocks of the O(N) kernels.
pub(super) const UTIL_THREADS: u32 = 256;
const UTIL_BLOCKS: u32 = 1024;
const DOT_BLOCKS: usize = 256;
/// RMS phase error (radians) allowed for the float32 phase of accurate mode.
const PHASE_ERROR_BUDGET: f64 = 4e-6;
/// The same for fast mode (its class is 1e-3).
const FAST_PHASE_ERROR_BUDGET: f64 = 1e-4;
/// Pairs sampled to estimate it.
const PROBE_PAIRS: usize = 4096;
/// Above this bound on |phase| (cycles) the kernel always subtracts rint(phase)
/// before sin/cos; below it only when the probe says the unreduced phase is
/// outside the budget (H100: bieri-512's E at up to 28 cycles unreduced, 4.0e-6).
const REDUCE_ABOVE_CYCLES: f64 = 64.0;
/// Longest inner run summed in one float32 level (accurate mode without two levels).
const ONE_LEVEL_SPLIT: usize = 4096;

pub(super) fn mode_code(p: Precision) -> i64 {
    match p {
        Precision::Accurate => 0,
        Precision::Fast => 1,
        Precision::Double => 2,
    }
}

/// Kernel arguments, each stored in 8 bytes (a 32-bit `int` reads the low half).
#[derive(Default)]
pub(super) struct Args(Vec<u64>);

impl Args {
    pub(super) fn ptr(mut self, p: sys::CUdeviceptr) -> Self {
        self.0.push(p);
        self
    }
    pub(super) fn int(mut self, v: i64) -> Self {
        self.0.push(v as u64);
        self
    }
    pub(super) fn i32(mut self, v: i32) -> Self {
        self.0.push(v as u32 as u64);
        self
    }
    pub(super) fn f64(mut self, v: f64) -> Self {
        self.0.push(v.to_bits());
        self
    }
}

pub(super) fn launch(
    f: &CudaFunction,
    grid: (u32, u32, u32),
    block: u32,
    stream: Stream,
    args: Args,
) -> Result<()> {
    let mut values = args.0;
    let mut params: Vec<*mut c_void> = values
        .iter_mut()
        .map(|v| v as *mut u64 as *mut c_void)
        .collect();
    // SAFETY: the parameters match the kernel's signature (8-byte slots, little endian);
    // `values` outlives the call (the driver copies parameters at launch).
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            grid,
            (block, 1, 1),
            0,
            stream.0,
            &mut params,
        )
    }
    .map_err(|e| driver_error("launching a kernel", e))
}

pub(super) fn util_grid(n: usize) -> (u32, u32, u32) {
    let blocks = n
        .div_ceil(UTIL_THREADS as usize)
        .clamp(1, UTIL_BLOCKS as usize);
    (blocks as u32, 1, 1)
}

/// Phase-sum geometry and device data of one direction.
struct Side {
    kernel: CudaFunction,
    /// Outer points per block and blocks in all.
    blk: usize,
    blocks: usize,
    /// Inner points and how they are split over blockIdx.y.
    inner: usize,
    splits: usize,
    split_len: usize,
    /// Outer blocks per launch (memory for the partial sums).
    chunk_blocks: usize,
    full_terms: usize,
    effective_terms: usize,
    split_terms: usize,
    threads: usize,
    shape: String,
    dv: DeviceBuffer,
    vref: DeviceBuffer,
    inner_full: DeviceBuffer,
    inner_eff: DeviceBuffer,
    perm: DeviceBuffer,
    /// Per-outer-point phase (cycles) applied by the epilogue, if any.
    rotation: Option<DeviceBuffer>,
    weights: DeviceBuffer,
    partial: DeviceBuffer,
}

/// What the host computes for a side before anything goes to the device.
struct SideLayout {
    effective: Vec<usize>,
    perm: Vec<u32>,
    vref: Vec<f64>,
    blocks: usize,
}

/// Sorts the outer points into compact blocks of `blk` (Morton order of up to
/// three features that move the phase most) and takes each block's midrange
/// as its reference feature vector.
fn layout(
    outer: &[f64],
    inner: &[f64],
    terms: usize,
    o: usize,
    i: usize,
    blk: usize,
) -> SideLayout {
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            })
    };
    let mut stats = Vec::with_capacity(terms);
    let mut effective = Vec::new();
    for f in 0..terms {
        let (lo, hi) = range(&outer[f * o..(f + 1) * o]);
        let amax = inner[f * i..(f + 1) * i]
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()));
        if hi > lo && amax > 0.0 {
            effective.push(f);
        }
        stats.push((lo, hi, (hi - lo) * amax));
    }
    // Up to three sort keys: features moving the phase by ≥ 5 % of the largest.
    let mut order: Vec<usize> = effective.clone();
    order.sort_by(|a, b| stats[*b].2.total_cmp(&stats[*a].2));
    let top = order.first().map_or(0.0, |f| stats[*f].2);
    let keys: Vec<usize> = order
        .into_iter()
        .filter(|f| stats[*f].2 >= 0.05 * top)
        .take(3)
        .collect();
    // Coordinates in cycles of phase: feature value × largest inner coefficient.
    let coords: Vec<Vec<f64>> = keys
        .iter()
        .map(|&f| {
            let amax = stats[f].2 / (stats[f].1 - stats[f].0);
            outer[f * o..(f + 1) * o].iter().map(|v| v * amax).collect()
        })
        .collect();
    let mut order: Vec<u32> = (0..o as u32).collect();
    bisect(&mut order, &coords, blk);
    let blocks = o.div_ceil(blk);
    let mut perm = vec![u32::MAX; blocks * blk];
    perm[..o].copy_from_slice(&order);
    let mut vref = vec![0.0; blocks * terms];
    for b in 0..blocks {
        let members = &perm[b * blk..((b + 1) * blk).min(o)];
        for f in 0..terms {
            let (lo, hi) =
                members
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &p| {
                        let x = outer[f * o + p as usize];
                        (lo.min(x), hi.max(x))
                    });
            vref[b * terms + f] = 0.5 * (lo + hi);
        }
    }
    SideLayout {
        effective,
        perm,
        vref,
        blocks,
    }
}

/// The float32 phase of the kernel (accurate/fast modes) emulated on sampled
/// pairs against float64: RMS error (radians) and largest |phase| (cycles).
struct PhaseProbe<'a> {
    outer: &'a [f64],
    inner: &'a [f64],
    terms: usize,
    o: usize,
    i: usize,
    blk: usize,
    lay: &'a SideLayout,
    /// (feature, Δv in permuted order, bound), in kernel order.
    rows: &'a [(usize, Vec<f64>, f64)],
    /// Per-outer-point phase applied exactly by the epilogue (cycles).
    rotation: Option<&'a [f64]>,
}

struct PhaseEstimate {
    /// RMS error (radians) of the phase sin/cos sees, reduced to [-½, ½] cycles first.
    rms_error: f64,
    /// The same without the reduction (the kernel's REDUCE = 0).
    rms_unreduced: f64,
    max_abs: f64,
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
    fn run(&self, split: usize) -> PhaseEstimate {
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

/// Orders `points` into groups of `blk` (the last may be short) that are
/// compact in `coords`: recursive bisection along the widest coordinate, at a
/// multiple of `blk` (a k-d tree whose leaves are the thread blocks).
fn bisect(points: &mut [u32], coords: &[Vec<f64>], blk: usize) {
    if points.len() <= blk || coords.is_empty() {
        return;
    }
    let widest = coords
        .iter()
        .map(|c| {
            let (lo, hi) = points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &p| {
                    (lo.min(c[p as usize]), hi.max(c[p as usize]))
                });
            hi - lo
        })
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (d, w)| {
            if w > best.1 {
                (d, w)
            } else {
                best
            }
        })
        .0;
    let left = points.len().div_ceil(blk) / 2 * blk;
    let c = &coords[widest];
    points.select_nth_unstable_by(left, |a, b| c[*a as usize].total_cmp(&c[*b as usize]));
    let (l, r) = points.split_at_mut(left);
    bisect(l, coords, blk);
    bisect(r, coords, blk);
}

/// Values as the kernel's REAL (f32, or f64 in double mode), as raw bytes.
fn real_bytes(values: impl Iterator<Item = f64>, double: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        if double {
            out.extend_from_slice(&v.to_le_bytes());
        } else {
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
    }
    out
}

impl Side {
    #[allow(clippy::too_many_arguments)]
    fn new(
        device: &Arc<Device>,
        precision: Precision,
        sign: i64,
        outer: &[f64],
        inner: &[f64],
        terms: usize,
        o: usize,
        i: usize,
        coil_group: usize,
    ) -> Result<Side> {
        let double = precision == Precision::Double;
        let real = if double { 8 } else { 4 };
        // Float32 modes: the coil sums on the tensor cores (tf32 mma, sm_80+) unless
        // HORECON_CUDA_TENSOR=0; =1 also takes groups under TC_MIN_COILS coils.
        let fast = precision == Precision::Fast;
        let tensor = !double
            && device.capability.0 >= 8
            && terms <= TC_MAX_TERMS
            && setting("HORECON_CUDA_TENSOR").map_or(coil_group >= TC_MIN_COILS, |v| v != 0);
        // Outer points per thread: 4 in float32 (measured best on bieri-512:
        // the coil weights and features read from shared memory serve 4 pairs).
        let r = knob("HORECON_CUDA_R").unwrap_or(match (coil_group, double) {
            (_, false) => 4,
            (1..=4, true) => 2,
            _ => 1,
        });
        let threads = knob("HORECON_CUDA_THREADS")
            .unwrap_or(if tensor { TC_THREADS } else { THREADS })
            .clamp(32, 256)
            / 32
            * 32;
        // Tensor cores: each warp owns MT tiles of 8 outer points.
        let mt = knob("HORECON_CUDA_MT").unwrap_or(TC_TILES).min(16);
        let blk = if tensor {
            threads / 32 * mt * 8
        } else {
            threads * r
        };
        let lay = layout(outer, inner, terms, o, i, blk);
        let opad = lay.blocks * blk;
        // Δv (permuted order) per effective feature, and how far it moves the phase.
        let delta = |f: usize| -> Vec<f64> {
            (0..opad)
                .map(|k| match lay.perm[k] {
                    u32::MAX => 0.0,
                    p => outer[f * o + p as usize] - lay.vref[(k / blk) * terms + f],
                })
                .collect()
        };
        let mut rows: Vec<(usize, Vec<f64>, f64)> = lay
            .effective
            .iter()
            .map(|&f| {
                let dv = delta(f);
                let amax = inner[f * i..(f + 1) * i]
                    .iter()
                    .fold(0.0f64, |m, x| m.max(x.abs()));
                let bound = amax * dv.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                (f, dv, bound)
            })
            .collect();
        // Terms whose inner values are all one constant K (the solid harmonic
        // h0 = 1 in E) add K·Δv(o) per outer point: an exact float64 rotation
        // of the result (applied by the epilogue) instead of a term per pair.
        let mut rotation: Option<Vec<f64>> = None;
        rows.retain(|(f, dv, _)| {
            let column = &inner[f * i..(f + 1) * i];
            let k = column[0];
            if column.iter().any(|&x| x != k) {
                return true;
            }
            let rot = rotation.get_or_insert_with(|| vec![0.0; opad]);
            for (r, d) in rot.iter_mut().zip(dv) {
                *r += k * d;
            }
            false
        });
        // Accurate mode: split the terms that move the phase most until the
        // float32 phase error, measured on sampled pairs, is within budget.
        rows.sort_by(|a, b| b.2.total_cmp(&a.2));
        let probe = PhaseProbe {
            outer,
            inner,
            terms,
            o,
            i,
            blk,
            lay: &lay,
            rows: &rows,
            rotation: rotation.as_deref(),
        };
        let mut split = 0;
        let mut estimate = probe.run(0);
        if precision == Precision::Accurate {
            while estimate.rms_error > PHASE_ERROR_BUDGET && split < rows.len().min(16) {
                split += 1;
                estimate = probe.run(split);
            }
        }
        if let Some(n) = setting("HORECON_CUDA_SPLIT").filter(|_| !(tensor && fast)) {
            split = n.min(rows.len());
            estimate = probe.run(split);
        }
        let fe = rows.len();
        let fa = (fe + split + 1).div_ceil(4) * 4;
        // Shared memory per inner point: its a-record and its coil weights (the
        // tensor path keeps 8 A-fragment entries of 16 bytes, twice in accurate mode).
        let shared_per_point = if tensor {
            fa * real + 8 * 16 * if fast { 1 } else { 2 }
        } else {
            (fa + 2 * coil_group) * real
        };
        // Static shared memory: 24 KiB per block for FFMA (several blocks per
        // SM), 44 KiB for the tensor path (two blocks of 256 threads).
        let shared = if tensor { 45056 } else { 24576 };
        let tile = knob("HORECON_CUDA_TILE")
            .unwrap_or(if tensor { TC_TILE } else { 64 })
            .min(shared / shared_per_point)
            .max(1);
        // The tensor path's sums restart every `segment` inner points (a multiple of 4).
        let segment = if tensor && !fast {
            knob("HORECON_CUDA_SEGMENT")
                .unwrap_or(TC_SEGMENT_ACCURATE)
                .min(tile)
                .div_ceil(4)
                * 4
        } else {
            tile.div_ceil(4) * 4
        };
        let tile = if tensor {
            (tile / segment).max(1) * segment
        } else {
            tile
        };
        // Reduce the float32 phase before sin/cos (two instructions per pair)
        // unless the unreduced phase is within the mode's budget.
        let budget = match precision {
            Precision::Fast => FAST_PHASE_ERROR_BUDGET,
            _ => PHASE_ERROR_BUDGET,
        };
        let reduce = setting("HORECON_CUDA_REDUCE")
            .unwrap_or(usize::from(
                double || estimate.max_abs > REDUCE_ABOVE_CYCLES || estimate.rms_unreduced > budget,
            ))
            .min(1);
        // One-level float32 sums over short splits (added in float64) measured
        // faster than two-level sums (fewer registers); double keeps two levels.
        let two_level = setting("HORECON_CUDA_TWO_LEVEL")
            .unwrap_or(usize::from(double))
            .min(1);
        // Unrolling measured: 1 best for E^H, 2 for E (bieri-512, R = 4).
        let unroll = knob("HORECON_CUDA_UNROLL").unwrap_or(if tensor || (r < 4 || sign > 0) {
            2
        } else {
            1
        });
        // Registers for 6 blocks of 64 threads per SM with R = 4 and 5..8 coils.
        let min_blocks = knob("HORECON_CUDA_MINB").unwrap_or(if tensor {
            2
        } else if r >= 4 && coil_group > 4 && !double {
            6
        } else {
            1
        });
        // One define list: the shared constants, then each kernel's own shape.
        let mut defines = vec![
            ("FE", fe as i64),
            ("NS", split as i64),
            ("LB", coil_group as i64),
            ("MODE", mode_code(precision)),
            ("SIGN", sign),
            ("THREADS", threads as i64),
            ("TILE", tile as i64),
            ("UNROLL", unroll as i64),
            ("REDUCE", reduce as i64),
            ("MINB", min_blocks as i64),
        ];
        let (name, source) = if tensor {
            defines.extend([("MT", mt as i64), ("SEG", segment as i64)]);
            ("phase_sum_tc", PHASE_SUM_TC)
        } else {
            defines.extend([("R", r as i64), ("TWO_LEVEL", two_level as i64)]);
            ("phase_sum", PHASE_SUM)
        };
        let kernel = device.function(name, source, &defines, name)?;
        // Rows FE..FE+NS hold the float32 rounding residuals of the split terms.
        let residual = |x: f64| x - (x as f32) as f64;
        let dv: Vec<u8> = real_bytes(
            rows.iter().flat_map(|r| r.1.iter().copied()).chain(
                rows[..split]
                    .iter()
                    .flat_map(|r| r.1.iter().map(|&x| residual(x))),
            ),
            double,
        );
        let inner_eff = real_bytes(
            rows.iter()
                .flat_map(|r| inner[r.0 * i..(r.0 + 1) * i].iter().copied())
                .chain(
                    rows[..split]
                        .iter()
                        .flat_map(|r| inner[r.0 * i..(r.0 + 1) * i].iter().map(|&x| residual(x))),
                ),
            double,
        );
        // Splits of the inner sum: enough blocks to fill the GPU several times.
        // Few outer blocks split it down to one tile each: that fills the GPU and
        // keeps the float32 sums short (one voxel's Eᴴ over 3000 samples measured
        // 1.3e-5 with 512-point one-level sums, H100).
        let target = device.multiprocessors * 16;
        let mut splits = target
            .div_ceil(lay.blocks)
            .clamp(1, i.div_ceil(tile).max(1));
        if two_level == 0 && !double {
            // one-level float32 sums: keep each split short (the epilogue adds in float64);
            // on the tensor path (sums per tile) the many blocks keep the last wave short
            splits = splits.max(i.div_ceil(ONE_LEVEL_SPLIT));
        }
        if let Some(s) = knob("HORECON_CUDA_SPLITS") {
            splits = s.min(i.max(1));
        }
        let split_len = i.div_ceil(splits).div_ceil(tile) * tile;
        let splits = i.div_ceil(split_len).max(1);
        // Partial sums: at most ~1/4 of free memory (and 1 GiB) per launch.
        let per_block = splits * coil_group * blk * 2 * real;
        let (free, _) = device.memory()?;
        let budget = (free / 4).min(1 << 30);
        let mut chunk_blocks = (budget / per_block).clamp(1, lay.blocks);
        if let Some(c) = knob("HORECON_CUDA_CHUNK_BLOCKS") {
            chunk_blocks = c.min(lay.blocks);
        }
        Ok(Side {
            kernel,
            blk,
            blocks: lay.blocks,
            inner: i,
            splits,
            split_len,
            chunk_blocks,
            full_terms: terms,
            effective_terms: fe,
            split_terms: split,
            threads,
            shape: format!(
                "phase rms {:.1e} rad ({:.1e} unreduced) max {:.1} cycles, {}, threads {threads} tile {tile} unroll {unroll} min-blocks {min_blocks} reduce {reduce}",
                estimate.rms_error,
                estimate.rms_unreduced,
                estimate.max_abs,
                if tensor {
                    format!(
                        "tensor cores ({}), MT {mt} segment {segment}",
                        if fast { "1xTF32" } else { "3xTF32" }
                    )
                } else {
                    format!("FFMA, R {r} two-level {two_level}")
                }
            ),
            dv: DeviceBuffer::from_host(device, &dv, "outer feature differences")?,
            vref: DeviceBuffer::from_host(device, &lay.vref, "block reference features")?,
            inner_full: DeviceBuffer::from_host(device, inner, "inner features")?,
            inner_eff: DeviceBuffer::from_host(device, &inner_eff, "inner features (effective)")?,
            perm: DeviceBuffer::from_host(device, &lay.perm, "outer permutation")?,
            rotation: match &rotation {
                Some(r) => Some(DeviceBuffer::from_host(device, r, "outer phase rotation")?),
                None => None,
            },
            weights: DeviceBuffer::new::<u8>(device, coil_group * i * 2 * real, "kernel weights")?,
            partial: DeviceBuffer::new::<u8>(device, chunk_blocks * per_block, "partial sums")?,
        })
    }

    /// Launches the phase sum for outer blocks [b0, b0 + nb) into `partial`.
    fn run(&self, b0: usize, nb: usize, stream: Stream) -> Result<()> {
        let args = Args::default()
            .ptr(self.dv.ptr)
            .ptr(self.vref.ptr)
            .ptr(self.inner_full.ptr)
            .ptr(self.inner_eff.ptr)
            .ptr(self.weights.ptr)
            .ptr(self.partial.ptr)
            .i32(self.inner as i32)
            .i32(self.split_len as i32)
            .int((self.blocks * self.blk) as i64)
            .int((b0 * self.blk) as i64)
            .int((self.chunk_blocks * self.blk) as i64)
            .i32(self.full_terms as i32);
        launch(
            &self.kernel,
            (nb as u32, self.splits as u32, 1),
            self.threads as u32,
            stream,
            args,
        )
    }

    fn chunks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.blocks)
            .step_by(self.chunk_blocks)
            .map(|b0| (b0, self.chunk_blocks.min(self.blocks - b0)))
    }
}

/// Device vectors and scratch of one operator, used under its lock.
pub(super) struct Work {
    pub(super) stream: Arc<CudaStream>,
    /// N double2 image in/out, M×L double2 data.
    pub(super) image: DeviceBuffer,
    pub(super) image_out: DeviceBuffer,
    pub(super) data: DeviceBuffer,
    pub(super) sample_weights: DeviceBuffer,
    dot: DeviceBuffer,
    /// float2 staging of host vectors (max(N, M·L) elements).
    staging: DeviceBuffer,
}

impl Work {
    pub(super) fn new(device: &Arc<Device>, sizes: Sizes) -> Result<Work> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = sizes;
        device.bind()?;
        let stream = device
            .ctx
            .new_stream()
            .map_err(|e| driver_error("creating a stream", e))?;
        Ok(Work {
            stream,
            image: DeviceBuffer::new::<[f64; 2]>(device, n, "image (N)")?,
            image_out: DeviceBuffer::new::<[f64; 2]>(device, n, "image (N)")?,
            data: DeviceBuffer::new::<[f64; 2]>(device, m * coils, "data (M x L)")?,
            sample_weights: DeviceBuffer::new::<f64>(device, m, "sample weights (M)")?,
            dot: DeviceBuffer::new::<f64>(device, DOT_BLOCKS, "dot-product partial sums")?,
            staging: DeviceBuffer::new::<Complex32>(device, n.max(m * coils), "transfer staging")?,
        })
    }
}

thread_local! {
    /// Operators whose shared workspace this thread holds (a CG solve in progress).
    static HELD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The workspace of one call: the operator's own (under its lock), or, for a
/// call made while this thread already holds it (an operator applied from
/// CG's progress callback), temporary buffers of its own instead of a deadlock.
pub(super) enum WorkGuard<'a> {
    Held {
        guard: std::sync::MutexGuard<'a, Work>,
        key: usize,
    },
    Temporary(Work),
}

impl std::ops::Deref for WorkGuard<'_> {
    type Target = Work;
    fn deref(&self) -> &Work {
        match self {
            WorkGuard::Held { guard, .. } => guard,
            WorkGuard::Temporary(work) => work,
        }
    }
}

impl Drop for WorkGuard<'_> {
    fn drop(&mut self) {
        if let WorkGuard::Held { key, .. } = self {
            let key = *key;
            HELD.with(|held| {
                let mut held = held.borrow_mut();
                if let Some(i) = held.iter().rposition(|k| *k == key) {
                    held.remove(i);
                }
            });
        }
    }
}

pub(super) struct Kernels {
    prep_forward: CudaFunction,
    prep_adjoint: CudaFunction,
    finish_forward: CudaFunction,
    finish_adjoint: CudaFunction,
    scale_samples: CudaFunction,
    dot_re: CudaFunction,
    axpy: CudaFunction,
    xpay: CudaFunction,
    widen: CudaFunction,
    narrow: CudaFunction,
}

/// What every operator on one GPU shares: the device, the sizes and the
/// O(N) kernels (CG's vector operations, transfers, sample weights).
pub struct CudaCore {
    pub(super) device: Arc<Device>,
    pub(super) sizes: Sizes,
    k: Kernels,
}

/// How CG applies the operator on the device: the exact phase sums
/// ([`CudaOperator`]) or an FFT-based normal operator (Toeplitz, Cartesian).
pub(super) trait DeviceNormal: Sync {
    /// out (N) = Eᴴ d for device data d (M×L double2, already multiplied by W).
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()>;
    /// y (N) = Eᴴ W E x; `weights` the device sample weights W (M float64,
    /// `None` = 1) and `scratch` an M×L double2 buffer the operator may use.
    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()>;
}

/// E on one GPU in one precision mode.
pub struct CudaOperator {
    core: CudaCore,
    coil_group: usize,
    groups: usize,
    /// `None` for an adjoint-only operator ([`CudaOperator::adjoint_only`]).
    forward: Option<Side>,
    adjoint: Side,
    sensitivities: Option<DeviceBuffer>,
    work: Mutex<Work>,
}

impl std::ops::Deref for CudaOperator {
    type Target = CudaCore;
    fn deref(&self) -> &CudaCore {
        &self.core
    }
}

impl DeviceNormal for CudaOperator {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()> {
        CudaOperator::adjoint_dev(self, d, out, stream)
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        self.forward_dev(x, scratch, weights, stream)?;
        CudaOperator::adjoint_dev(self, scratch, y, stream)
    }
}

impl CudaCore {
    /// The O(N) kernels of `precision` on `device`.
    pub(super) fn new(device: Arc<Device>, sizes: Sizes, precision: Precision) -> Result<CudaCore> {
        let util =
            |name: &str| device.function("util", UTIL, &[("MODE", mode_code(precision))], name);
        let k = Kernels {
            prep_forward: util("prep_forward")?,
            prep_adjoint: util("prep_adjoint")?,
            finish_forward: util("finish_forward")?,
            finish_adjoint: util("finish_adjoint")?,
            scale_samples: util("scale_samples")?,
            dot_re: util("dot_re")?,
            axpy: util("axpy")?,
            xpay: util("xpay")?,
            widen: util("widen")?,
            narrow: util("narrow")?,
        };
        Ok(CudaCore { device, sizes, k })
    }

    pub(super) fn scale_samples(
        &self,
        d: &DeviceBuffer,
        w: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        let Sizes {
            samples: m, coils, ..
        } = self.sizes;
        launch(
            &self.k.scale_samples,
            util_grid(m * coils),
            UTIL_THREADS,
            stream,
            Args::default()
                .ptr(d.ptr)
                .ptr(w.ptr)
                .int(m as i64)
                .i32(coils as i32),
        )
    }

    /// Host complex64 vector → device double2 `dst` (through the float2 staging).
    pub(super) fn upload(
        &self,
        w: &Work,
        host: &[Complex32],
        dst: &DeviceBuffer,
        s: Stream,
    ) -> Result<()> {
        w.staging.upload(host, s)?;
        launch(
            &self.k.widen,
            util_grid(host.len()),
            UTIL_THREADS,
            s,
            Args::default()
                .ptr(w.staging.ptr)
                .ptr(dst.ptr)
                .int(host.len() as i64),
        )
    }

    /// Device double2 `src` → host complex64 vector (synchronous).
    pub(super) fn download(
        &self,
        w: &Work,
        src: &DeviceBuffer,
        host: &mut [Complex32],
        s: Stream,
    ) -> Result<()> {
        launch(
            &self.k.narrow,
            util_grid(host.len()),
            UTIL_THREADS,
            s,
            Args::default()
                .ptr(src.ptr)
                .ptr(w.staging.ptr)
                .int(host.len() as i64),
        )?;
        w.staging.download(host, s)
    }
}

fn to_device_complex(values: &[Complex32]) -> Vec<[f64; 2]> {
    values.iter().map(|c| [c.re as f64, c.im as f64]).collect()
}

fn from_device_complex(values: &[[f64; 2]], out: &mut [Complex32]) {
    for (o, v) in out.iter_mut().zip(values) {
        *o = Complex32::new(v[0] as f32, v[1] as f32);
    }
}

impl CudaOperator {
    pub fn new(
        device: Arc<Device>,
        features: &Features,
        sizes: Sizes,
        precision: Precision,
    ) -> Result<CudaOperator> {
        Self::build(device, features, sizes, precision, true)
    }

    /// An operator with Eᴴ only (its forward direction is neither laid out
    /// nor compiled): the Toeplitz kernels need just the adjoint.
    pub fn adjoint_only(
        device: Arc<Device>,
        features: &Features,
        sizes: Sizes,
        precision: Precision,
    ) -> Result<CudaOperator> {
        Self::build(device, features, sizes, precision, false)
    }

    fn build(
        device: Arc<Device>,
        features: &Features,
        sizes: Sizes,
        precision: Precision,
        with_forward: bool,
    ) -> Result<CudaOperator> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = sizes;
        if n >= u32::MAX as usize || m >= u32::MAX as usize || n.max(m) > i32::MAX as usize {
            return Err(Error::invalid(format!(
                "the CUDA backend handles at most 2^31 - 1 voxels and samples (N = {n}, M = {m})"
            )));
        }
        let max_group = knob("HORECON_CUDA_COIL_GROUP")
            .unwrap_or(MAX_COIL_GROUP)
            .min(MAX_COIL_GROUP);
        let groups = coils.div_ceil(max_group);
        let coil_group = coils.div_ceil(groups);
        let terms = features.terms;
        let adjoint = Side::new(
            &device,
            precision,
            -1,
            &features.voxel,
            &features.sample,
            terms,
            n,
            m,
            coil_group,
        )?;
        let forward = if with_forward {
            Some(Side::new(
                &device,
                precision,
                1,
                &features.sample,
                &features.voxel,
                terms,
                m,
                n,
                coil_group,
            )?)
        } else {
            None
        };
        let sensitivities = match &features.sensitivities {
            None => None,
            Some(s) => {
                let raw: Vec<[f32; 2]> = s.iter().map(|c| [c.re, c.im]).collect();
                Some(DeviceBuffer::from_host(
                    &device,
                    &raw,
                    "coil sensitivities (N x L)",
                )?)
            }
        };
        let work = Work::new(&device, sizes)?;
        Ok(CudaOperator {
            core: CudaCore::new(device, sizes, precision)?,
            coil_group,
            groups,
            forward,
            adjoint,
            sensitivities,
            work: Mutex::new(work),
        })
    }

    pub(super) fn sens_ptr(&self) -> sys::CUdeviceptr {
        self.sensitivities.as_ref().map_or(0, |s| s.ptr)
    }

    /// out (M×L) = W·E x on the device.
    pub(super) fn forward_dev(
        &self,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        stream: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.sizes;
        let side = self
            .forward
            .as_ref()
            .ok_or_else(|| Error::internal("forward of an adjoint-only CUDA operator"))?;
        let lb = self.coil_group;
        for g in 0..self.groups {
            let l0 = (g * lb) as i32;
            launch(
                &self.k.prep_forward,
                util_grid(n * lb),
                UTIL_THREADS,
                stream,
                Args::default()
                    .ptr(x.ptr)
                    .ptr(self.sens_ptr())
                    .int(n as i64)
                    .i32(coils as i32)
                    .i32(l0)
                    .i32(lb as i32)
                    .ptr(side.weights.ptr),
            )?;
            for (b0, nb) in side.chunks() {
                side.run(b0, nb, stream)?;
                let count = nb * side.blk;
                launch(
                    &self.k.finish_forward,
                    util_grid(count),
                    UTIL_THREADS,
                    stream,
                    Args::default()
                        .ptr(side.partial.ptr)
                        .i32(side.splits as i32)
                        .i32(lb as i32)
                        .int((side.chunk_blocks * side.blk) as i64)
                        .int((b0 * side.blk) as i64)
                        .int(count as i64)
                        .ptr(side.perm.ptr)
                        .int(m as i64)
                        .i32(coils as i32)
                        .i32(l0)
                        .ptr(weights.map_or(0, |w| w.ptr))
                        .ptr(side.rotation.as_ref().map_or(0, |r| r.ptr))
                        .ptr(out.ptr),
                )?;
            }
        }
        Ok(())
    }

    /// out (N) = Eᴴ d on the device.
    pub(super) fn adjoint_dev(
        &self,
        d: &DeviceBuffer,
        out: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.sizes;
        let side = &self.adjoint;
        let lb = self.coil_group;
        for g in 0..self.groups {
            let l0 = (g * lb) as i32;
            launch(
                &self.k.prep_adjoint,
                util_grid(m * lb),
                UTIL_THREADS,
                stream,
                Args::default()
                    .ptr(d.ptr)
                    .int(m as i64)
                    .i32(coils as i32)
                    .i32(l0)
                    .i32(lb as i32)
                    .ptr(side.weights.ptr),
            )?;
            for (b0, nb) in side.chunks() {
                side.run(b0, nb, stream)?;
                let count = nb * side.blk;
                launch(
                    &self.k.finish_adjoint,
                    util_grid(count),
                    UTIL_THREADS,
                    stream,
                    Args::default()
                        .ptr(side.partial.ptr)
                        .i32(side.splits as i32)
                        .i32(lb as i32)
                        .int((side.chunk_blocks * side.blk) as i64)
                        .int((b0 * side.blk) as i64)
                        .int(count as i64)
                        .ptr(side.perm.ptr)
                        .int(n as i64)
                        .i32(coils as i32)
                        .i32(l0)
                        .ptr(self.sens_ptr())
                        .i32(i32::from(g > 0))
                        .ptr(side.rotation.as_ref().map_or(0, |r| r.ptr))
                        .ptr(out.ptr),
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn lock(&self) -> Result<WorkGuard<'_>> {
        self.device.bind()?;
        let key = self as *const CudaOperator as usize;
        if HELD.with(|held| held.borrow().contains(&key)) {
            return Ok(WorkGuard::Temporary(Work::new(&self.device, self.sizes)?));
        }
        let guard = self.work.lock().unwrap_or_else(|e| e.into_inner());
        HELD.with(|held| held.borrow_mut().push(key));
        Ok(WorkGuard::Held { guard, key })
    }

    /// Seconds of the fastest of `reps` device-resident applications
    /// (forward or adjoint on the operator's own buffers; no host transfers).
    pub fn time_resident(&self, forward: bool, reps: usize) -> Result<f64> {
        let w = self.lock()?;
        let s = Stream(w.stream.cu_stream());
        w.image.zero(s)?;
        w.data.zero(s)?;
        let mut best = f64::INFINITY;
        for _ in 0..reps.max(1) {
            // SAFETY: synchronising our own stream.
            unsafe { result::stream::synchronize(s.0) }.map_err(|e| driver_error("timing", e))?;
            let t = std::time::Instant::now();
            if forward {
                self.forward_dev(&w.image, &w.data, None, s)?;
            } else {
                self.adjoint_dev(&w.data, &w.image_out, s)?;
            }
            // SAFETY: as above.
            unsafe { result::stream::synchronize(s.0) }.map_err(|e| driver_error("timing", e))?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(best)
    }

    /// A description of the kernels (for benchmarks and reports).
    pub fn describe(&self) -> String {
        let d = |s: &Side| {
            let regs = s.kernel.num_regs().unwrap_or(-1);
            let local = s.kernel.local_size_bytes().unwrap_or(-1);
            format!(
                "terms {}/{} (split {}) {} blk {} blocks {} splits {} chunk {} regs {regs} local {local}B",
                s.effective_terms, s.full_terms, s.split_terms, s.shape, s.blk, s.blocks, s.splits, s.chunk_blocks
            )
        };
        format!(
            "{} (sm_{}{}, {} SMs), coil group {} x {}; forward: {}; adjoint: {}",
            self.device.name,
            self.device.capability.0,
            self.device.capability.1,
            self.device.multiprocessors,
            self.coil_group,
            self.groups,
            self.forward.as_ref().map_or("none".into(), d),
            d(&self.adjoint)
        )
    }
}

impl EncodingOperator for CudaOperator {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        let w = self.lock()?;
        let s = Stream(w.stream.cu_stream());
        self.upload(&w, image, &w.image, s)?;
        self.forward_dev(&w.image, &w.data, None, s)?;
        self.download(&w, &w.data, data, s)
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        let w = self.lock()?;
        let s = Stream(w.stream.cu_stream());
        self.upload(&w, data, &w.data, s)?;
        self.adjoint_dev(&w.data, &w.image_out, s)?;
        self.download(&w, &w.image_out, image, s)
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        let w = self.lock()?;
        let s = Stream(w.stream.cu_stream());
        self.upload(&w, image, &w.image, s)?;
        let host_weights: Option<Vec<f64>> = weights.map(|v| v.iter().map(|&x| x as f64).collect());
        if let Some(hw) = &host_weights {
            w.sample_weights.upload(hw, s)?;
        }
        self.forward_dev(
            &w.image,
            &w.data,
            host_weights.as_ref().map(|_| &w.sample_weights),
            s,
        )?;
        self.adjoint_dev(&w.data, &w.image_out, s)?;
        self.download(&w, &w.image_out, out, s)
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        let w = self.lock()?;
        solve_on(self, self, &w, problem, image)
    }

    fn backend_name(&self) -> String {
        format!("cuda:{}", self.device.ordinal)
    }
}

/// CG on the device with `normal` applying EᴴWE and Eᴴ, the vectors and
/// transfers of `core`, and the workspace `w` (held by the caller).
pub(super) fn solve_on(
    core: &CudaCore,
    normal: &dyn DeviceNormal,
    w: &Work,
    problem: &CgProblem<'_>,
    image: &mut [Complex32],
) -> Result<CgReport> {
    {
        let s = Stream(w.stream.cu_stream());
        let host_weights: Option<Vec<f64>> = problem
            .sample_weights
            .map(|v| v.iter().map(|&x| x as f64).collect());
        if let Some(hw) = &host_weights {
            w.sample_weights.upload(hw, s)?;
        }
        let space = CudaSpace {
            op: core,
            normal,
            work: w,
            stream: s,
            problem,
            weighted: host_weights.is_some(),
            error: RefCell::new(None),
            fd: RefCell::new(None),
        };
        let mut x = space.zeros()?;
        if problem.warm_start {
            space.set_from_host(image, &mut x)?;
        }
        let report = cg(&space, problem, &mut x);
        if let Some(e) = space.error.borrow_mut().take() {
            return Err(e);
        }
        let report = report?;
        let mut out = vec![[0.0f64; 2]; image.len()];
        x.download(&mut out, s)?;
        from_device_complex(&out, image);
        Ok(report)
    }
}

/// CG's vectors on the GPU (N double2 each); errors of the infallible vector
/// operations are kept and reported when the solve returns.
struct CudaSpace<'a> {
    op: &'a CudaCore,
    normal: &'a dyn DeviceNormal,
    work: &'a Work,
    stream: Stream,
    problem: &'a CgProblem<'a>,
    weighted: bool,
    error: RefCell<Option<Error>>,
    /// The finite-difference state, made on first use by a regularizer.
    fd: RefCell<Option<FdState>>,
}

/// D on the device for one solve: the grid's directions, the static edge
/// weights u (`fd_weights`, uploaded once per solve) and the per-voxel
/// factors ν of the reweighting (kept on the device), all float64 but u.
struct FdState {
    grid: Grid,
    /// ndirs × (offset along the three compact axes, voxel stride), i64.
    directions: DeviceBuffer,
    /// ndirs weights 1/|d|², f64.
    direction_weights: DeviceBuffer,
    /// N×ndirs f32, or none (u = 1).
    fd_weights: Option<DeviceBuffer>,
    /// N f64 ν; meaningful only while `reweighted` (otherwise ν ≡ 1).
    factors: DeviceBuffer,
    reweighted: bool,
    reweight: CudaFunction,
    normal: CudaFunction,
}

impl FdState {
    fn new(op: &CudaCore, problem: &CgProblem<'_>) -> Result<FdState> {
        let grid = Grid::with_neighbourhood(op.sizes.dims, problem.neighbourhood);
        let n = op.sizes.voxels;
        let (table, weights) = grid.device_tables();
        let fd_weights = match problem.fd_weights {
            Some(u) => {
                if u.len() != n * grid.ndims() {
                    return Err(Error::internal(format!(
                        "fd_weights has {} elements, expected {}",
                        u.len(),
                        n * grid.ndims()
                    )));
                }
                Some(DeviceBuffer::from_host(
                    &op.device,
                    u,
                    "fd_weights (N x ndims)",
                )?)
            }
            None => None,
        };
        let function = |name: &str| op.device.function("fd", FD, &[], name);
        Ok(FdState {
            grid,
            directions: DeviceBuffer::from_host(&op.device, &table, "difference directions")?,
            direction_weights: DeviceBuffer::from_host(
                &op.device,
                &weights,
                "difference direction weights",
            )?,
            fd_weights,
            factors: DeviceBuffer::new::<f64>(&op.device, n, "reweighting factors (N)")?,
            reweighted: false,
            reweight: function("fd_reweight")?,
            normal: function("fd_normal")?,
        })
    }

    /// The grid arguments shared by both kernels: compact dims, direction count and tables.
    fn grid_args(&self, args: Args) -> Args {
        let [c0, c1, c2] = self.grid.compact_dims();
        args.int(c0 as i64)
            .int(c1 as i64)
            .int(c2 as i64)
            .i32(self.grid.ndims() as i32)
            .ptr(self.directions.ptr)
            .ptr(self.direction_weights.ptr)
            .ptr(self.fd_weights.as_ref().map_or(0, |u| u.ptr))
    }
}

impl CudaSpace<'_> {
    fn keep(&self, r: Result<()>) {
        if let Err(e) = r {
            let mut slot = self.error.borrow_mut();
            if slot.is_none() {
                *slot = Some(e);
            }
        }
    }
    fn failed(&self) -> Result<()> {
        match self.error.borrow().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The finite-difference state, made (and `fd_weights` uploaded) on first use.
    fn fd_state(&self) -> Result<RefMut<'_, FdState>> {
        let mut slot = self.fd.borrow_mut();
        if slot.is_none() {
            *slot = Some(FdState::new(self.op, self.problem)?);
        }
        RefMut::filter_map(slot, |s| s.as_mut())
            .map_err(|_| Error::internal("finite-difference state missing"))
    }
}

impl CgSpace for CudaSpace<'_> {
    type Vector = DeviceBuffer;

    fn zeros(&self) -> Result<DeviceBuffer> {
        let v =
            DeviceBuffer::new::<[f64; 2]>(&self.op.device, self.op.sizes.voxels, "CG vector (N)")?;
        v.zero(self.stream)?;
        Ok(v)
    }

    fn rhs(&self, b: &mut DeviceBuffer) -> Result<()> {
        self.failed()?;
        let host = to_device_complex(self.problem.data);
        self.work.data.upload(&host, self.stream)?;
        if self.weighted {
            self.op
                .scale_samples(&self.work.data, &self.work.sample_weights, self.stream)?;
        }
        self.normal.adjoint_dev(&self.work.data, b, self.stream)?;
        // `host` must live until the upload completed.
        // SAFETY: synchronising our own stream.
        unsafe { result::stream::synchronize(self.stream.0) }
            .map_err(|e| driver_error("computing the right-hand side", e))
    }

    fn normal(&self, x: &DeviceBuffer, y: &mut DeviceBuffer) -> Result<()> {
        self.failed()?;
        let w = self.weighted.then_some(&self.work.sample_weights);
        self.normal
            .normal_dev(x, y, w, &self.work.data, self.stream)
    }

    fn set_from_host(&self, host: &[Complex32], v: &mut DeviceBuffer) -> Result<()> {
        let h = to_device_complex(host);
        v.upload(&h, self.stream)?;
        // SAFETY: synchronising our own stream before `h` is dropped.
        unsafe { result::stream::synchronize(self.stream.0) }
            .map_err(|e| driver_error("uploading the start image", e))
    }

    fn copy(&self, src: &DeviceBuffer, dst: &mut DeviceBuffer) {
        self.keep(dst.copy_from(src, self.stream));
    }

    fn dot_re(&self, a: &DeviceBuffer, b: &DeviceBuffer) -> f64 {
        let n = self.op.sizes.voxels;
        let r = launch(
            &self.op.k.dot_re,
            (DOT_BLOCKS as u32, 1, 1),
            256,
            self.stream,
            Args::default()
                .ptr(a.ptr)
                .ptr(b.ptr)
                .int(n as i64)
                .ptr(self.work.dot.ptr),
        );
        let mut partial = vec![0.0f64; DOT_BLOCKS];
        let r = r.and_then(|_| self.work.dot.download(&mut partial, self.stream));
        match r {
            Ok(()) => partial.iter().sum(),
            Err(e) => {
                self.keep(Err(e));
                f64::NAN
            }
        }
    }

    fn axpy(&self, alpha: f64, x: &DeviceBuffer, y: &mut DeviceBuffer) {
        let n = self.op.sizes.voxels;
        self.keep(launch(
            &self.op.k.axpy,
            util_grid(n),
            UTIL_THREADS,
            self.stream,
            Args::default()
                .f64(alpha)
                .ptr(x.ptr)
                .ptr(y.ptr)
                .int(n as i64),
        ));
    }

    fn xpay(&self, x: &DeviceBuffer, beta: f64, y: &mut DeviceBuffer) {
        let n = self.op.sizes.voxels;
        self.keep(launch(
            &self.op.k.xpay,
            util_grid(n),
            UTIL_THREADS,
            self.stream,
            Args::default()
                .ptr(x.ptr)
                .f64(beta)
                .ptr(y.ptr)
                .int(n as i64),
        ));
    }

    /// ν_n = ψ'(g_n)/g_n on the device from the weighted gradient magnitude
    /// g of x (kernels/fd.cu, float64); `Quadratic` resets ν ≡ 1.
    fn reweight(&self, penalty: Penalty, x: &DeviceBuffer) -> Result<()> {
        self.failed()?;
        let mut fd = self.fd_state()?;
        let (code, epsilon, sigma) = match penalty {
            Penalty::Quadratic => {
                fd.reweighted = false;
                return Ok(());
            }
            Penalty::TotalVariation { epsilon } => (1, epsilon, 1.0),
            Penalty::Laplace { epsilon, sigma } => (2, epsilon, sigma),
        };
        launch(
            &fd.reweight,
            util_grid(self.op.sizes.voxels),
            UTIL_THREADS,
            self.stream,
            fd.grid_args(Args::default().ptr(x.ptr))
                .i32(code)
                .f64(epsilon)
                .f64(sigma)
                .ptr(fd.factors.ptr),
        )?;
        fd.reweighted = true;
        Ok(())
    }

    /// y ← y + λ·Dᴴ diag(c·u·ν) D x on the device (kernels/fd.cu, float64).
    fn add_fd_normal(&self, lambda: f64, x: &DeviceBuffer, y: &mut DeviceBuffer) -> Result<()> {
        self.failed()?;
        let fd = self.fd_state()?;
        launch(
            &fd.normal,
            util_grid(self.op.sizes.voxels),
            UTIL_THREADS,
            self.stream,
            fd.grid_args(Args::default().ptr(x.ptr).ptr(y.ptr))
                .ptr(if fd.reweighted { fd.factors.ptr } else { 0 })
                .f64(lambda),
        )
    }

    fn backend(&self) -> &'static str {
        "the GPU"
    }

    fn voxels(&self) -> usize {
        self.op.sizes.voxels
    }

    fn to_host(&self, v: &DeviceBuffer, out: &mut [Complex64]) -> Result<()> {
        self.failed()?;
        let mut pairs = vec![[0.0f64; 2]; out.len()];
        v.download(&mut pairs, self.stream)?;
        for (o, p) in out.iter_mut().zip(&pairs) {
            *o = Complex64::new(p[0], p[1]);
        }
        Ok(())
    }

    fn set_from_host64(&self, host: &[Complex64], v: &mut DeviceBuffer) -> Result<()> {
        let pairs: Vec<[f64; 2]> = host.iter().map(|c| [c.re, c.im]).collect();
        v.upload(&pairs, self.stream)?;
        // SAFETY: synchronising our own stream before `pairs` is dropped.
        unsafe { result::stream::synchronize(self.stream.0) }
            .map_err(|e| driver_error("uploading a CG vector", e))
    }
}

/// The status for a failed device lookup.
pub fn unavailable(reason: String) -> Error {
    Error::new(
        Status::BackendUnavailable,
        format!("the CUDA backend is unavailable: {reason}"),
    )
}

#[cfg(test)]
mod tests {
    use super::bisect;

    /// Bisection keeps every point once and tiles a 64×32 grid into 8×8... blocks.
    #[test]
    fn bisection_is_a_permutation_into_compact_blocks() {
        let (w, h, blk) = (64usize, 32usize, 64usize);
        let x: Vec<f64> = (0..w * h).map(|p| (p % w) as f64).collect();
        let y: Vec<f64> = (0..w * h).map(|p| (p / w) as f64).collect();
        let mut order: Vec<u32> = (0..(w * h) as u32).collect();
        bisect(&mut order, &[x.clone(), y.clone()], blk);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert!(seen.iter().enumerate().all(|(i, &p)| p as usize == i));
        for block in order.chunks(blk) {
            let span = |c: &[f64]| {
                let v: Vec<f64> = block.iter().map(|&p| c[p as usize]).collect();
                v.iter().cloned().fold(f64::MIN, f64::max)
                    - v.iter().cloned().fold(f64::MAX, f64::min)
            };
            assert!(
                span(&x) <= 7.0 && span(&y) <= 7.0,
                "block spans {} x {}",
                span(&x),
                span(&y)
            );
        }
    }
}
