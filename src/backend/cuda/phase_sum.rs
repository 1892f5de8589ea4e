//! One direction of the exact operator on the GPU, a [`Side`]:
//!
//!   out_l(o) = Σ_i w_l(i)·exp(±i2π Σ_f a_f(i)·v_f(o))
//!
//! over outer points o (samples for E, voxels for Eᴴ) and inner points i. The
//! geometry planner [`SidePlan::new`] sorts the outer points into compact blocks
//! ([`super::layout`]), so that each block's float64 reference phase leaves
//! only small float32 differences per pair, measures the float32 phase error
//! ([`super::probe`]) to choose the split terms and the phase reduction, picks
//! the kernel's shape (kernels/phase_sum.cu; in float32 modes with 3+ coils
//! per group the coil sums run on the tensor cores, kernels/phase_sum_tc.cu),
//! the inner splits and the chunks of outer blocks that the free memory
//! allows, and uploads the side's device data.

use super::context::Device;
use super::launch::{launch, mode_code, Args};
use super::layout::layout;
use super::memory::{knob, setting, DeviceBuffer, Stream};
use super::probe::PhaseProbe;
use crate::error::{checked_len, try_collect, try_vec, Result};
use crate::op::Precision;
use cudarc::driver::CudaFunction;
use std::sync::Arc;

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
/// RMS phase error (radians) allowed for the float32 phase of accurate mode.
const PHASE_ERROR_BUDGET: f64 = 4e-6;
/// The same for fast mode (its class is 1e-3).
const FAST_PHASE_ERROR_BUDGET: f64 = 1e-4;
/// Above this bound on |phase| (cycles) the kernel always subtracts rint(phase)
/// before sin/cos; below it only when the probe says the unreduced phase is
/// outside the budget (H100: bieri-512's E at up to 28 cycles unreduced, 4.0e-6).
const REDUCE_ABOVE_CYCLES: f64 = 64.0;
/// Longest inner run summed in one float32 level (accurate mode without two levels).
const ONE_LEVEL_SPLIT: usize = 4096;

/// Phase-sum geometry and device data of one direction.
pub(super) struct Side {
    kernel: CudaFunction,
    /// What `kernel` is compiled from.
    source: KernelSource,
    /// Outer points per block and blocks in all.
    pub(super) blk: usize,
    blocks: usize,
    /// Outer points (before padding to whole blocks).
    pub(super) outer: usize,
    /// Inner points and how they are split over blockIdx.y.
    pub(super) inner: usize,
    pub(super) splits: usize,
    split_len: usize,
    /// Outer blocks per launch (memory for the partial sums).
    pub(super) chunk_blocks: usize,
    pub(super) full_terms: usize,
    effective_terms: usize,
    split_terms: usize,
    threads: usize,
    shape: String,
    dv: DeviceBuffer,
    vref: DeviceBuffer,
    inner_full: DeviceBuffer,
    inner_eff: DeviceBuffer,
    pub(super) perm: DeviceBuffer,
    /// Per-outer-point phase (cycles) applied by the epilogue, if any.
    pub(super) rotation: Option<DeviceBuffer>,
    /// The coil group's inner weights (staged by the prep kernels).
    pub(super) weights: DeviceBuffer,
    /// chunk_blocks × splits × coils × blk partial sums.
    pub(super) partial: DeviceBuffer,
}

/// What a side's plan depends on besides its features: the GPU's compute
/// capability and multiprocessors.
#[derive(Clone, Copy, Debug)]
pub(super) struct Target {
    pub(super) capability: (i32, i32),
    pub(super) multiprocessors: usize,
}

impl Target {
    pub(super) fn of(device: &Device) -> Target {
        Target {
            capability: device.capability,
            multiprocessors: device.multiprocessors,
        }
    }
}

/// What the host computes for a side ([`SidePlan::new`]): its kernel's
/// source and defines, its geometry and the contents of its device buffers.
pub(super) struct SidePlan {
    source: KernelSource,
    blk: usize,
    blocks: usize,
    outer: usize,
    inner: usize,
    splits: usize,
    split_len: usize,
    full_terms: usize,
    effective_terms: usize,
    split_terms: usize,
    threads: usize,
    shape: String,
    dv: Vec<u8>,
    vref: Vec<f64>,
    inner_eff: Vec<u8>,
    perm: Vec<u32>,
    rotation: Option<Vec<f64>>,
    /// Bytes of the coil group's inner weights.
    weight_bytes: usize,
    /// Bytes of the partial sums per outer block of a launch.
    per_block: usize,
}

/// What a side's kernel is compiled from: the source, its defines but
/// REDUCE, and whether (and why) it reduces the phase.
#[derive(Clone)]
struct KernelSource {
    name: &'static str,
    source: &'static str,
    defines: Vec<(&'static str, i64)>,
    reduction: Reduction,
}

impl KernelSource {
    /// The compiled kernel (cached per process and device).
    fn compile(&self, device: &Device) -> Result<CudaFunction> {
        let mut defines = self.defines.clone();
        defines.push(("REDUCE", i64::from(self.reduction.reduce)));
        device.function(self.name, self.source, &defines, self.name)
    }
}

impl SidePlan {
    /// Outer blocks per launch whose partial sums fit in `bytes` (at least
    /// one; `HORECON_CUDA_CHUNK_BLOCKS` overrides).
    fn chunk_blocks(&self, bytes: usize) -> usize {
        match knob("HORECON_CUDA_CHUNK_BLOCKS") {
            Some(c) => c.min(self.blocks),
            None => (bytes / self.per_block).clamp(1, self.blocks),
        }
    }
}

/// Bytes the partial sums of one side may take: ~1/4 of the free memory, at most 1 GiB.
fn chunk_budget(device: &Device) -> Result<usize> {
    let (free, _) = device.memory()?;
    Ok((free / 4).min(1 << 30))
}

/// `count` values as the kernel's REAL (f32, or f64 in double mode), as raw
/// bytes (allocated fallibly: `OutOfMemory` naming `what`).
fn real_bytes(
    values: impl Iterator<Item = f64>,
    count: usize,
    double: bool,
    what: &str,
) -> Result<Vec<u8>> {
    let real = if double { 8 } else { 4 };
    let mut out = try_vec(checked_len(count, real, what)?, 0u8, what)?;
    for (bytes, v) in out.chunks_exact_mut(real).zip(values) {
        if double {
            bytes.copy_from_slice(&v.to_le_bytes());
        } else {
            bytes.copy_from_slice(&(v as f32).to_le_bytes());
        }
    }
    Ok(out)
}

impl SidePlan {
    /// Lays out one direction on the host: `outer` (terms × o features, point
    /// fastest) are the points summed into, `inner` (terms × i) the points summed
    /// over, `sign` the sign of the exponent (+1 for E, −1 for Eᴴ).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        target: Target,
        precision: Precision,
        sign: i64,
        outer: &[f64],
        inner: &[f64],
        terms: usize,
        o: usize,
        i: usize,
        coil_group: usize,
    ) -> Result<SidePlan> {
        let double = precision == Precision::Double;
        let real = if double { 8 } else { 4 };
        // Float32 modes: the coil sums on the tensor cores (tf32 mma, sm_80+) unless
        // HORECON_CUDA_TENSOR=0; =1 also takes groups under TC_MIN_COILS coils.
        let fast = precision == Precision::Fast;
        let tensor = !double
            && target.capability.0 >= 8
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
        let lay = layout(outer, inner, terms, o, i, blk)?;
        let opad = lay.blocks * blk;
        // Δv (permuted order) per effective feature, and how far it moves the phase.
        let delta = |f: usize| -> Result<Vec<f64>> {
            let dv = (0..opad).map(|k| match lay.perm[k] {
                u32::MAX => 0.0,
                p => outer[f * o + p as usize] - lay.vref[(k / blk) * terms + f],
            });
            try_collect(dv, "outer feature differences (points)")
        };
        let mut rows = lay
            .effective
            .iter()
            .map(|&f| {
                let dv = delta(f)?;
                let amax = inner[f * i..(f + 1) * i]
                    .iter()
                    .fold(0.0f64, |m, x| m.max(x.abs()));
                let bound = amax * dv.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                Ok((f, dv, bound))
            })
            .collect::<Result<Vec<(usize, Vec<f64>, f64)>>>()?;
        // Terms whose inner values are all one constant K (the solid harmonic
        // h0 = 1 in E) add K·Δv(o) per outer point: an exact float64 rotation
        // of the result (applied by the epilogue) instead of a term per pair.
        let constant = |f: usize| -> Option<f64> {
            let column = &inner[f * i..(f + 1) * i];
            let k = *column.first()?;
            column.iter().all(|&x| x == k).then_some(k)
        };
        let mut rotation = match rows.iter().any(|(f, ..)| constant(*f).is_some()) {
            true => Some(try_vec(opad, 0.0, "outer phase rotation (points)")?),
            false => None,
        };
        rows.retain(|(f, dv, _)| {
            let (Some(k), Some(rot)) = (constant(*f), rotation.as_mut()) else {
                return true;
            };
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
        let forced = setting("HORECON_CUDA_REDUCE").map(|r| r > 0);
        let large = estimate.max_abs > REDUCE_ABOVE_CYCLES;
        let reduction = Reduction {
            pairs: o as f64 * i as f64,
            unreduced: estimate.rms_unreduced,
            reduced: estimate.rms_error,
            fixed: forced.is_some() || double,
            large,
            budget,
            reduce: forced.unwrap_or(double || large || estimate.rms_unreduced > budget),
        };
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
            ("MINB", min_blocks as i64),
        ];
        let (name, source) = if tensor {
            defines.extend([("MT", mt as i64), ("SEG", segment as i64)]);
            ("phase_sum_tc", PHASE_SUM_TC)
        } else {
            defines.extend([("R", r as i64), ("TWO_LEVEL", two_level as i64)]);
            ("phase_sum", PHASE_SUM)
        };
        // Rows FE..FE+NS hold the float32 rounding residuals of the split terms.
        let residual = |x: f64| x - (x as f32) as f64;
        let dv = real_bytes(
            rows.iter().flat_map(|r| r.1.iter().copied()).chain(
                rows[..split]
                    .iter()
                    .flat_map(|r| r.1.iter().map(|&x| residual(x))),
            ),
            checked_len(
                fe + split,
                opad,
                "outer feature differences (terms x points)",
            )?,
            double,
            "outer feature differences (terms x points)",
        )?;
        let inner_eff = real_bytes(
            rows.iter()
                .flat_map(|r| inner[r.0 * i..(r.0 + 1) * i].iter().copied())
                .chain(
                    rows[..split]
                        .iter()
                        .flat_map(|r| inner[r.0 * i..(r.0 + 1) * i].iter().map(|&x| residual(x))),
                ),
            checked_len(fe + split, i, "inner features (terms x points)")?,
            double,
            "inner features (terms x points)",
        )?;
        // Splits of the inner sum: enough blocks to fill the GPU several times.
        // Few outer blocks split it down to one tile each: that fills the GPU and
        // keeps the float32 sums short (one voxel's Eᴴ over 3000 samples measured
        // 1.3e-5 with 512-point one-level sums, H100).
        let fill = target.multiprocessors * 16;
        let mut splits = fill.div_ceil(lay.blocks).clamp(1, i.div_ceil(tile).max(1));
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
        // Partial sums per outer block of a launch.
        let per_block = checked_len(
            checked_len(splits, coil_group, "partial sums")?,
            blk * 2 * real,
            "partial sums (splits x coils x block)",
        )?;
        Ok(SidePlan {
            source: KernelSource {
                name,
                source,
                defines,
                reduction,
            },
            blk,
            blocks: lay.blocks,
            outer: o,
            inner: i,
            splits,
            split_len,
            full_terms: terms,
            effective_terms: fe,
            split_terms: split,
            threads,
            shape: format!(
                "phase rms {:.1e} rad ({:.1e} unreduced) max {:.1} cycles, {}, threads {threads} tile {tile} unroll {unroll} min-blocks {min_blocks}",
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
            dv,
            vref: lay.vref,
            inner_eff,
            perm: lay.perm,
            rotation,
            weight_bytes: checked_len(coil_group, i * 2 * real, "kernel weights (coils x points)")?,
            per_block,
        })
    }
}

/// Whether a side's kernel reduces the float32 phase before sin/cos (two
/// instructions per pair), and what decided it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reduction {
    /// Outer × inner pairs.
    pairs: f64,
    /// RMS phase error (radians) on the probe's pairs, unreduced and reduced.
    unreduced: f64,
    reduced: f64,
    /// Settled by `HORECON_CUDA_REDUCE` or double precision.
    fixed: bool,
    /// Phases beyond [`REDUCE_ABOVE_CYCLES`]: always reduced.
    large: bool,
    /// RMS phase error the mode allows.
    budget: f64,
    pub(super) reduce: bool,
}

impl Reduction {
    /// Whether the RMS error decides (nothing settled it).
    pub(super) fn free(&self) -> bool {
        !self.fixed && !self.large
    }
}

/// The reduction that the free sides of the parts of one operator split by
/// samples (one direction each) share, as that operator would decide it on
/// all its pairs: always where some part's phases are beyond
/// [`REDUCE_ABOVE_CYCLES`] (the whole operator's are then too), else where
/// the RMS phase error over all pairs, √(Σ_p pairs_p·rms_p² / Σ_p pairs_p)
/// with the free parts unreduced, is beyond the budget. `None` where no side
/// is free. Each part alone would decide on its own samples, and late samples
/// of a readout carry the larger phases: bieri-512's E on two H100s had its
/// second half reduce (4.6e-6 rad against 2.5e-6 for the first, 3.7e-6 for
/// both) and run 10 % longer than the first, the whole split waiting for it.
pub(super) fn shared_reduction(parts: &[Reduction]) -> Option<bool> {
    let budget = parts.iter().find(|p| p.free())?.budget;
    if parts.iter().any(|p| p.large) {
        return Some(true);
    }
    let errors: Vec<(f64, f64)> = parts
        .iter()
        .map(|p| {
            let error = if p.free() || !p.reduce {
                p.unreduced
            } else {
                p.reduced
            };
            (p.pairs, error)
        })
        .collect();
    Some(beyond_budget(&errors, budget))
}

/// Whether the RMS over all pairs of parts' RMS phase errors, (pairs, rms)
/// each, is beyond `budget`.
fn beyond_budget(parts: &[(f64, f64)], budget: f64) -> bool {
    let pairs: f64 = parts.iter().map(|p| p.0).sum();
    let squares: f64 = parts.iter().map(|(n, e)| n * e * e).sum();
    pairs > 0.0 && (squares / pairs).sqrt() > budget
}

impl Side {
    /// Compiles and uploads one direction laid out by `plan` ([`SidePlan::new`];
    /// `inner` the inner features it was planned with).
    pub(super) fn from_plan(device: &Arc<Device>, plan: SidePlan, inner: &[f64]) -> Result<Side> {
        let kernel = plan.source.compile(device)?;
        let chunk_blocks = plan.chunk_blocks(chunk_budget(device)?);
        Ok(Side {
            kernel,
            source: plan.source,
            blk: plan.blk,
            blocks: plan.blocks,
            outer: plan.outer,
            inner: plan.inner,
            splits: plan.splits,
            split_len: plan.split_len,
            chunk_blocks,
            full_terms: plan.full_terms,
            effective_terms: plan.effective_terms,
            split_terms: plan.split_terms,
            threads: plan.threads,
            dv: DeviceBuffer::from_host(device, &plan.dv, "outer feature differences")?,
            vref: DeviceBuffer::from_host(device, &plan.vref, "block reference features")?,
            inner_full: DeviceBuffer::from_host(device, inner, "inner features")?,
            inner_eff: DeviceBuffer::from_host(
                device,
                &plan.inner_eff,
                "inner features (effective)",
            )?,
            perm: DeviceBuffer::from_host(device, &plan.perm, "outer permutation")?,
            rotation: match &plan.rotation {
                Some(r) => Some(DeviceBuffer::from_host(device, r, "outer phase rotation")?),
                None => None,
            },
            weights: DeviceBuffer::new::<u8>(device, plan.weight_bytes, "kernel weights")?,
            partial: DeviceBuffer::new::<u8>(
                device,
                chunk_blocks * plan.per_block,
                "partial sums",
            )?,
            shape: plan.shape,
        })
    }

    /// Makes the side what [`Side::from_plan`] would build from `plan` (the same
    /// kernel, geometry and device data), reusing its device buffers where
    /// their sizes allow; `inner` is the new inner features (terms × i), or
    /// `None` when they are those the side was built with. The partial sums
    /// keep their allocation when it holds at least one outer block (chunking
    /// changes no result). On error the side is unusable (its owner drops it).
    pub(super) fn update(
        &mut self,
        device: &Arc<Device>,
        plan: SidePlan,
        inner: Option<&[f64]>,
    ) -> Result<()> {
        self.kernel = plan.source.compile(device)?;
        self.dv.refill(&plan.dv, "outer feature differences")?;
        self.vref.refill(&plan.vref, "block reference features")?;
        if let Some(inner) = inner {
            self.inner_full.refill(inner, "inner features")?;
        }
        self.inner_eff
            .refill(&plan.inner_eff, "inner features (effective)")?;
        self.perm.refill(&plan.perm, "outer permutation")?;
        match (&plan.rotation, &mut self.rotation) {
            (Some(r), Some(buffer)) => buffer.refill(r, "outer phase rotation")?,
            (Some(r), None) => {
                self.rotation = Some(DeviceBuffer::from_host(device, r, "outer phase rotation")?)
            }
            (None, _) => self.rotation = None,
        }
        if self.weights.bytes != plan.weight_bytes.max(16) {
            self.weights = DeviceBuffer::new::<u8>(device, plan.weight_bytes, "kernel weights")?;
        }
        let mut chunk_blocks = plan.chunk_blocks(self.partial.bytes);
        if chunk_blocks * plan.per_block > self.partial.bytes {
            chunk_blocks = plan.chunk_blocks(chunk_budget(device)?);
            self.partial =
                DeviceBuffer::new::<u8>(device, chunk_blocks * plan.per_block, "partial sums")?;
        }
        self.blk = plan.blk;
        self.blocks = plan.blocks;
        self.outer = plan.outer;
        self.inner = plan.inner;
        self.splits = plan.splits;
        self.split_len = plan.split_len;
        self.chunk_blocks = chunk_blocks;
        self.full_terms = plan.full_terms;
        self.effective_terms = plan.effective_terms;
        self.split_terms = plan.split_terms;
        self.threads = plan.threads;
        self.shape = plan.shape;
        self.source = plan.source;
        Ok(())
    }

    /// Whether and why the kernel reduces the phase.
    pub(super) fn reduction(&self) -> Reduction {
        self.source.reduction
    }

    /// Reduces the phase or not where the side is free to choose
    /// ([`Reduction::free`]; [`shared_reduction`]): the kernel is compiled
    /// anew, its data stay.
    pub(super) fn set_reduce(&mut self, device: &Device, reduce: bool) -> Result<()> {
        if self.source.reduction.free() && self.source.reduction.reduce != reduce {
            let mut source = self.source.clone();
            source.reduction.reduce = reduce;
            self.kernel = source.compile(device)?;
            self.source = source;
        }
        Ok(())
    }

    /// Launches the phase sum for outer blocks [b0, b0 + nb) into `partial`.
    pub(super) fn run(&self, b0: usize, nb: usize, stream: Stream) -> Result<()> {
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

    /// The chunks of outer blocks, (first block, blocks), one launch each.
    pub(super) fn chunks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.blocks)
            .step_by(self.chunk_blocks)
            .map(|b0| (b0, self.chunk_blocks.min(self.blocks - b0)))
    }

    /// The kernel's shape and resources (for benchmarks and reports).
    pub(super) fn describe(&self) -> String {
        let regs = self.kernel.num_regs().unwrap_or(-1);
        let local = self.kernel.local_size_bytes().unwrap_or(-1);
        format!(
            "terms {}/{} (split {}) {} reduce {} blk {} blocks {} splits {} chunk {} regs {regs} local {local}B",
            self.effective_terms,
            self.full_terms,
            self.split_terms,
            self.shape,
            u8::from(self.source.reduction.reduce),
            self.blk,
            self.blocks,
            self.splits,
            self.chunk_blocks
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{beyond_budget, shared_reduction, Reduction};

    fn side(unreduced: f64, fixed: bool, large: bool) -> Reduction {
        Reduction {
            pairs: 1.0,
            unreduced,
            reduced: unreduced / 4.0,
            fixed,
            large,
            budget: 4e-6,
            reduce: fixed || large || unreduced > 4e-6,
        }
    }

    #[test]
    fn parts_share_the_reduction_one_operator_would_choose() {
        // bieri-512's halves: within the budget together
        assert_eq!(
            shared_reduction(&[side(2.5e-6, false, false), side(4.6e-6, false, false)]),
            Some(false)
        );
        assert_eq!(
            shared_reduction(&[side(3.5e-6, false, false), side(5e-6, false, false)]),
            Some(true)
        );
        // one part's phases beyond the cycle bound: the whole operator reduces
        assert_eq!(
            shared_reduction(&[side(1e-6, false, true), side(5e-6, false, false)]),
            Some(true)
        );
        // a fixed side counts with its error as it runs, and chooses nothing
        assert_eq!(
            shared_reduction(&[side(1e-6, true, false), side(5e-6, false, false)]),
            Some(false)
        );
        assert_eq!(
            shared_reduction(&[side(1e-6, true, false), side(1e-6, true, false)]),
            None
        );
    }

    #[test]
    fn a_split_reduces_on_the_rms_error_of_all_its_pairs() {
        // bieri-512's E on two H100s: 2.5e-6 and 4.6e-6 rad, 3.7e-6 together
        assert!(!beyond_budget(&[(1.0, 2.5e-6), (1.0, 4.6e-6)], 4e-6));
        assert!(beyond_budget(&[(1.0, 3.5e-6), (1.0, 5e-6)], 4e-6));
        // weighted by pairs: 3.85e-6 and 4.36e-6
        assert!(!beyond_budget(&[(3.0, 1e-6), (1.0, 7.5e-6)], 4e-6));
        assert!(beyond_budget(&[(1.0, 1e-6), (3.0, 5e-6)], 4e-6));
        assert!(!beyond_budget(&[(0.0, 1.0)], 4e-6));
        assert!(beyond_budget(&[(5.0, 4.1e-6)], 4e-6));
    }
}
