//! E on one GPU: the model is uploaded once when the operator is built;
//! forward/adjoint move only their input and output vectors; `normal` and
//! `solve` stay on the device between the two halves (CG moves the data up
//! once and the image down once, [`super::space`]).
//!
//! Each direction is one [`Side`] ([`super::phase_sum`]):
//! out_l(o) = Σ_i w_l(i)·exp(±i2π Σ_f a_f(i)·v_f(o)), run coil group by coil
//! group: the prologue stages the group's inner weights (E: S_c·x, Eᴴ: d_c),
//! the phase sum writes partial sums per chunk of outer blocks, the epilogue
//! adds them to the output (E: ·W, Eᴴ: ·conj(S_c) summed over the coils).

use super::context::Device;
use super::launch::{launch_over, Args};
use super::memory::{knob, DeviceBuffer, Stream};
use super::phase_sum::{Reduction, Side, SidePlan, Target};
use super::space::{solve_on, DeviceNormal};
use super::vectors::{upload_sensitivities, CudaCore};
use super::work::{Work, WorkGuard};
use crate::error::{Error, Result};
use crate::model::{Features, Sizes};
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::solver::CgProblem;
use cudarc::driver::{sys, CudaFunction};
use num_complex::Complex32;
use std::sync::{Arc, Mutex};

/// Coils per kernel pass (more coils run in groups).
const MAX_COIL_GROUP: usize = 8;

/// E on one GPU in one precision mode.
pub struct CudaOperator {
    core: CudaCore,
    precision: Precision,
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

/// The kernels index voxels and samples with 32-bit integers.
pub(super) fn check_index_range(sizes: Sizes) -> Result<()> {
    let (n, m) = (sizes.voxels, sizes.samples);
    if n.max(m) > i32::MAX as usize {
        return Err(Error::invalid(format!(
            "the CUDA backend handles at most 2^31 - 1 voxels and samples (N = {n}, M = {m})"
        )));
    }
    Ok(())
}

/// The host plans of the adjoint side (outer = voxels) and, when
/// `with_forward`, the forward side (outer = samples) of `terms` features
/// `voxel` (terms × n) and `sample` (terms × m): independent, so planned in
/// parallel.
fn plan_sides(
    target: Target,
    precision: Precision,
    (voxel, sample, terms): (&[f64], &[f64], usize),
    (n, m, group): (usize, usize, usize),
    with_forward: bool,
) -> (Result<SidePlan>, Result<Option<SidePlan>>) {
    rayon::join(
        || SidePlan::new(target, precision, -1, voxel, sample, terms, n, m, group),
        || {
            with_forward
                .then(|| SidePlan::new(target, precision, 1, sample, voxel, terms, m, n, group))
                .transpose()
        },
    )
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
        check_index_range(sizes)?;
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = sizes;
        let max_group = knob("HORECON_CUDA_COIL_GROUP")
            .unwrap_or(MAX_COIL_GROUP)
            .min(MAX_COIL_GROUP);
        let groups = coils.div_ceil(max_group);
        let coil_group = coils.div_ceil(groups);
        let terms = features.terms;
        let (voxel, sample) = (&features.voxel, &features.sample);
        let (adjoint, forward) = plan_sides(
            Target::of(&device),
            precision,
            (voxel, sample, terms),
            (n, m, coil_group),
            with_forward,
        );
        let adjoint = Side::from_plan(&device, adjoint?, sample)?;
        let forward = match forward? {
            Some(plan) => Some(Side::from_plan(&device, plan, voxel)?),
            None => None,
        };
        let sensitivities = upload_sensitivities(&device, features.sensitivities.as_deref())?;
        let work = Work::new(&device, sizes)?;
        Ok(CudaOperator {
            core: CudaCore::new(device, sizes, precision)?,
            precision,
            coil_group,
            groups,
            forward,
            adjoint,
            sensitivities,
            work: Mutex::new(work),
        })
    }

    /// New sample features in place ([`EncodingOperator::update_samples`]):
    /// both sides are planned on the host as a build would plan them (the
    /// same layout, split terms and kernel, so the result equals a fresh
    /// build's) and their device data re-uploaded into the existing buffers;
    /// the voxel features on the device, the sensitivities, the workspace and
    /// the stream stay.
    fn update_sample_features(&mut self, voxel: &[f64], sample: &[f64]) -> Result<bool> {
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = self.sizes;
        let terms = self.adjoint.full_terms;
        if voxel.len() != terms * n || sample.len() != terms * m {
            return Ok(false);
        }
        let device = self.device.clone();
        let (adjoint, forward) = plan_sides(
            Target::of(&device),
            self.precision,
            (voxel, sample, terms),
            (n, m, self.coil_group),
            self.forward.is_some(),
        );
        self.adjoint.update(&device, adjoint?, Some(sample))?;
        if let (Some(side), Some(plan)) = (self.forward.as_mut(), forward?) {
            // Its inner features are the voxels': unchanged on the device.
            side.update(&device, plan, None)?;
        }
        Ok(true)
    }

    pub(super) fn sens_ptr(&self) -> sys::CUdeviceptr {
        self.sensitivities.as_ref().map_or(0, |s| s.ptr)
    }

    /// One direction on the device, coil group by coil group: `prep` stages
    /// the group's inner weights (its arguments: `input`, then the inner
    /// count, coils, first coil, group size and the side's weights), then per
    /// chunk of outer blocks the phase sum and `finish` (its arguments: the
    /// partial sums and their layout, the outer count, coils, first coil,
    /// `epilogue(args, group)`, the phase rotation and `out`).
    #[allow(clippy::too_many_arguments)]
    fn sweep(
        &self,
        side: &Side,
        prep: &CudaFunction,
        input: impl Fn() -> Args,
        finish: &CudaFunction,
        epilogue: impl Fn(Args, usize) -> Args,
        out: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        let coils = self.sizes.coils;
        let lb = self.coil_group;
        // Cancellation points between chunks (issue 11), only when there are several.
        let total = self.groups * side.chunks().count();
        let mut done = 0;
        for g in 0..self.groups {
            let l0 = (g * lb) as i32;
            launch_over(
                prep,
                side.inner * lb,
                stream,
                input()
                    .int(side.inner as i64)
                    .i32(coils as i32)
                    .i32(l0)
                    .i32(lb as i32)
                    .ptr(side.weights.ptr),
            )?;
            for (b0, nb) in side.chunks() {
                side.run(b0, nb, stream)?;
                let count = nb * side.blk;
                let args = Args::default()
                    .ptr(side.partial.ptr)
                    .i32(side.splits as i32)
                    .i32(lb as i32)
                    .int((side.chunk_blocks * side.blk) as i64)
                    .int((b0 * side.blk) as i64)
                    .int(count as i64)
                    .ptr(side.perm.ptr)
                    .int(side.outer as i64)
                    .i32(coils as i32)
                    .i32(l0);
                launch_over(
                    finish,
                    count,
                    stream,
                    epilogue(args, g)
                        .ptr(side.rotation.as_ref().map_or(0, |r| r.ptr))
                        .ptr(out.ptr),
                )?;
                done += 1;
                if total > 1 {
                    super::checkpoint(stream, done as f64 / total as f64)?;
                }
            }
        }
        Ok(())
    }

    /// Whether and why its kernels reduce the phase: adjoint, forward.
    pub(super) fn reductions(&self) -> (Reduction, Option<Reduction>) {
        (
            self.adjoint.reduction(),
            self.forward.as_ref().map(Side::reduction),
        )
    }

    /// The reductions of the phase (adjoint, forward; `None`: as planned) on
    /// the sides free to choose ([`Side::set_reduce`]).
    pub(super) fn set_reductions(
        &mut self,
        (adjoint, forward): (Option<bool>, Option<bool>),
    ) -> Result<()> {
        if let Some(reduce) = adjoint {
            self.adjoint.set_reduce(&self.core.device, reduce)?;
        }
        if let (Some(reduce), Some(side)) = (forward, self.forward.as_mut()) {
            side.set_reduce(&self.core.device, reduce)?;
        }
        Ok(())
    }

    /// Whether a call in the directions (forward, adjoint) waits for its
    /// stream: a cancellation point between chunks, where a direction runs
    /// in more than one coil group or chunk of outer blocks ([`Self::sweep`]).
    pub(super) fn waits(&self, forward: bool, adjoint: bool) -> bool {
        let several = |side: &Side| self.groups * side.chunks().count() > 1;
        (forward && self.forward.as_ref().is_some_and(several))
            || (adjoint && several(&self.adjoint))
    }

    /// out (N) = Eᴴ d on the device.
    pub(super) fn adjoint_dev(
        &self,
        d: &DeviceBuffer,
        out: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        self.sweep(
            &self.adjoint,
            &self.k.prep_adjoint,
            || Args::default().ptr(d.ptr),
            &self.k.finish_adjoint,
            |args, g| args.ptr(self.sens_ptr()).i32(i32::from(g > 0)),
            out,
            stream,
        )
    }

    /// Seconds of the fastest of `reps` device-resident applications
    /// (forward or adjoint on the operator's own buffers; no host transfers).
    pub fn time_resident(&self, forward: bool, reps: usize) -> Result<f64> {
        time_resident(self, forward, reps)
    }

    /// A description of the kernels (for benchmarks and reports).
    pub fn describe(&self) -> String {
        format!(
            "{} (sm_{}{}, {} SMs), coil group {} x {}; forward: {}; adjoint: {}",
            self.device.name,
            self.device.capability.0,
            self.device.capability.1,
            self.device.multiprocessors,
            self.coil_group,
            self.groups,
            self.forward.as_ref().map_or("none".into(), Side::describe),
            self.adjoint.describe()
        )
    }
}

/// An operator held on the device (the exact one on one GPU or split over
/// several, [`super::CudaMulti`]; the fast path's, [`super::fast::CudaFast`]):
/// what its host calls need beyond [`DeviceNormal`].
pub(super) trait DeviceOperator: DeviceNormal {
    /// The device of its vectors, the whole sizes and the O(N) kernels.
    fn core(&self) -> &CudaCore;
    /// Its whole-size workspace, held by [`DeviceOperator::lock`].
    fn work(&self) -> &Mutex<Work>;
    /// Its whole-size workspace for one call (or one solve).
    fn lock(&self) -> Result<WorkGuard<'_>> {
        let core = self.core();
        WorkGuard::lock(self.work(), &core.device, core.sizes)
    }
    /// out (M×L) = W·E x on the device.
    fn forward_dev(
        &self,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        stream: Stream,
    ) -> Result<()>;
    /// The devices it runs on (its parts' in order): by default its core's.
    fn devices(&self) -> Vec<usize> {
        vec![self.core().device.ordinal]
    }
    /// [`EncodingOperator::backend_name`]: by default "cuda:" and the devices.
    fn name(&self) -> String {
        let devices: Vec<String> = self.devices().iter().map(|d| d.to_string()).collect();
        format!("cuda:{}", devices.join("+"))
    }
    /// [`EncodingOperator::update_samples`]; by default not in place.
    fn update_samples(&mut self, voxel: &[f64], sample: &[f64]) -> Result<bool> {
        let _ = (voxel, sample);
        Ok(false)
    }
}

/// The host calls of an exact device operator: one upload, the device
/// work, one download; CG entirely on the device.
impl<T: DeviceOperator + Send + Sync> EncodingOperator for T {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        let w = self.lock()?;
        let run = |s| self.forward_dev(&w.image, &w.data, None, s);
        self.core().call(&w, image, &w.image, run, &w.data, data)
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        let w = self.lock()?;
        let run = |s| self.adjoint_dev(&w.data, &w.image_out, s);
        self.core()
            .call(&w, data, &w.data, run, &w.image_out, image)
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        let w = self.lock()?;
        self.core().call_normal(&w, image, weights, out, |wd, s| {
            self.normal_dev(&w.image, &w.image_out, wd, &w.data, s)
        })
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        let w = self.lock()?;
        solve_on(self.core(), self, &w, problem, image)
    }

    fn update_samples(&mut self, voxel: &[f64], sample: &[f64]) -> Result<bool> {
        DeviceOperator::update_samples(self, voxel, sample)
    }

    fn backend_name(&self) -> String {
        self.name()
    }
}

impl DeviceOperator for CudaOperator {
    fn core(&self) -> &CudaCore {
        &self.core
    }

    fn work(&self) -> &Mutex<Work> {
        &self.work
    }

    /// out (M×L) = W·E x on the device.
    fn forward_dev(
        &self,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        stream: Stream,
    ) -> Result<()> {
        let side = self
            .forward
            .as_ref()
            .ok_or_else(|| Error::internal("forward of an adjoint-only CUDA operator"))?;
        self.sweep(
            side,
            &self.k.prep_forward,
            || Args::default().ptr(x.ptr).ptr(self.sens_ptr()),
            &self.k.finish_forward,
            |args, _| args.ptr(weights.map_or(0, |w| w.ptr)),
            out,
            stream,
        )
    }

    fn update_samples(&mut self, voxel: &[f64], sample: &[f64]) -> Result<bool> {
        self.update_sample_features(voxel, sample)
    }
}

/// Seconds of the fastest of `reps` device-resident applications of `op`
/// (forward or adjoint on its whole-size buffers; no host transfers).
pub(super) fn time_resident(op: &impl DeviceOperator, forward: bool, reps: usize) -> Result<f64> {
    let w = op.lock()?;
    let s = Stream(w.stream.cu_stream());
    w.image.zero(s)?;
    w.data.zero(s)?;
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        s.synchronize("timing")?;
        let t = std::time::Instant::now();
        if forward {
            op.forward_dev(&w.image, &w.data, None, s)?;
        } else {
            op.adjoint_dev(&w.data, &w.image_out, s)?;
        }
        s.synchronize("timing")?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}
