//! E on several GPUs of one process ([`CudaMulti`]), split by samples: part
//! p holds the samples [s_p, s_p + M_p) of every coil, the whole image and
//! the coil sensitivities, as a one-GPU [`CudaOperator`] of its own. With
//! E_p the rows of part p,
//!
//!   E x = [E_0 x; E_1 x; …]        (x broadcast, each part's rows gathered)
//!   Eᴴ d = Σ_p E_pᴴ d_p            (d scattered, the images summed)
//!   EᴴWE x = Σ_p E_pᴴ W_p E_p x    (no data moves between the GPUs)
//!
//! so the only transfers are one image to every part and one image back per
//! application. Vectors live on the first part's device (CG's among them),
//! the image goes out to the parts and their images come back summed by
//! NCCL where each part has a GPU of its own ([`super::collective`]), else
//! by device-to-device copies and sums in part order; the data's slices move
//! by device-to-device copies, one strided copy per part for all its coils
//! (`DeviceBuffer::copy_rows_from`). The parts run concurrently, each on its
//! own stream, issued in turn from the caller's thread (on host threads of
//! their own where a part's call waits for its stream, [`on_part_streams`]);
//! the host waits for them before the sum. The
//! parts' kernels are planned together: they reduce the float32 phase or not
//! as the one-GPU operator would ([`super::phase_sum::shared_reduction`]), so
//! that no part runs longer than its share of the pairs.
//!
//! For tests, `HORECON_CUDA_TEST_PARTS=P` places P parts on one GPU with the
//! same copies and sums ([`super::placement`]).

use super::collective::Links;
use super::context::Device;
use super::launch::{launch_over, Args};
use super::memory::{DeviceBuffer, Stream};
use super::operator::{time_resident, CudaOperator, DeviceOperator};
use super::phase_sum::shared_reduction;
use super::space::DeviceNormal;
use super::vectors::CudaCore;
use super::work::{Work, WorkGuard};
use crate::error::{try_collect, Error, Result};
use crate::model::{Features, Sizes};
use crate::op::Precision;
use crate::progress::Progress;
use std::sync::{Arc, Mutex};

/// Bytes of one device complex value (double2).
const COMPLEX: usize = 16;
/// Bytes of one device sample weight (double).
const WEIGHT: usize = 8;

/// One part: its operator and its samples [first, first + len).
struct Part {
    op: CudaOperator,
    first: usize,
    len: usize,
}

/// E split by samples over several devices (module documentation).
pub struct CudaMulti {
    /// The first part's device, the whole sizes and the O(N) kernels.
    core: CudaCore,
    parts: Vec<Part>,
    /// How images move between the parts.
    links: Links,
    /// Whole-size vectors on the first device (host transfers, CG).
    work: Mutex<Work>,
}

/// The contiguous ranges (first, len) of `parts` parts of `count` items
/// (sizes differ by at most one): the samples of the exact operator's parts,
/// the transforms of a split NUFFT's.
pub(super) fn part_ranges(count: usize, parts: usize) -> Vec<(usize, usize)> {
    (0..parts)
        .map(|p| {
            let first = p * count / parts;
            (first, (p + 1) * count / parts - first)
        })
        .collect()
}

/// The features of samples [first, first + len): each term's row sliced;
/// the voxel features and sensitivities shared.
fn sample_slice(features: &Features, samples: usize, first: usize, len: usize) -> Result<Features> {
    let part = len.max(1);
    let rows =
        (0..features.terms * len).map(|i| features.sample[(i / part) * samples + first + i % part]);
    Ok(Features {
        terms: features.terms,
        voxel: features.voxel.clone(),
        sample: try_collect(rows, "a part's sample features")?.into(),
        sensitivities: features.sensitivities.clone(),
    })
}

impl CudaMulti {
    /// Splits E over `devices` (one part each, in order; a device may repeat).
    /// Needs at least two devices and as many samples.
    pub fn new(
        devices: &[Arc<Device>],
        features: &Features,
        sizes: Sizes,
        precision: Precision,
    ) -> Result<CudaMulti> {
        if devices.len() < 2 || devices.len() > sizes.samples {
            return Err(Error::internal(format!(
                "a split over {} parts of {} samples",
                devices.len(),
                sizes.samples
            )));
        }
        let mut parts = devices
            .iter()
            .zip(part_ranges(sizes.samples, devices.len()))
            .map(|(device, (first, len))| {
                let part_sizes = Sizes {
                    samples: len,
                    ..sizes
                };
                let slice = sample_slice(features, sizes.samples, first, len)?;
                Ok(Part {
                    op: CudaOperator::new(device.clone(), &slice, part_sizes, precision)?,
                    first,
                    len,
                })
            })
            .collect::<Result<Vec<Part>>>()?;
        // The parts reduce the phase as the whole operator would.
        let reductions: Vec<_> = parts.iter().map(|p| p.op.reductions()).collect();
        let shared = (
            shared_reduction(&reductions.iter().map(|r| r.0).collect::<Vec<_>>()),
            shared_reduction(&reductions.iter().filter_map(|r| r.1).collect::<Vec<_>>()),
        );
        for part in &mut parts {
            part.op.set_reductions(shared)?;
        }
        let first = devices[0].clone();
        let links = Links::new(&devices.iter().collect::<Vec<_>>())?;
        let work = Work::new(&first, sizes)?;
        Ok(CudaMulti {
            core: CudaCore::new(first, sizes, precision)?,
            parts,
            links,
            work: Mutex::new(work),
        })
    }

    /// The devices of the parts, in order.
    pub fn devices(&self) -> Vec<usize> {
        self.parts.iter().map(|p| p.op.device.ordinal).collect()
    }

    /// How images move between the parts, in words.
    pub fn links(&self) -> String {
        self.links.describe()
    }

    /// The parts' workspaces, each under its operator's lock.
    fn lock_parts(&self) -> Result<Vec<WorkGuard<'_>>> {
        self.parts.iter().map(|p| p.op.lock()).collect()
    }

    /// Runs `each(part, its workspace, its stream)` on every part and waits
    /// for it ([`on_part_streams`]); `directions` (forward, adjoint) are those
    /// `each` applies, which say whether a part's call waits for its stream.
    fn on_parts(
        &self,
        works: &[WorkGuard<'_>],
        stream: Stream,
        (forward, adjoint): (bool, bool),
        each: impl Fn(&Part, &Work, Stream) -> Result<()> + Sync,
    ) -> Result<()> {
        let devices: Vec<&Arc<Device>> = self.parts.iter().map(|p| &p.op.device).collect();
        let works: Vec<&Work> = works.iter().map(|w| &**w).collect();
        let waits = self.parts.iter().any(|p| p.op.waits(forward, adjoint));
        on_part_streams(
            &self.core.device,
            (&devices, waits),
            &works,
            stream,
            |p, w, ps| each(&self.parts[p], w, ps),
        )
    }

    /// A part's inputs on its stream: the image `x` (first device) into its
    /// `image` unless `sent` (broadcast already), its slice of the sample
    /// weights (first device, M) into its `sample_weights`, which it returns
    /// (`None` = W ≡ 1).
    fn part_inputs<'w>(
        &self,
        part: &Part,
        w: &'w Work,
        (x, sent): (&DeviceBuffer, bool),
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<Option<&'w DeviceBuffer>> {
        if !sent {
            w.image
                .copy_range_from(0, x, 0, self.core.sizes.voxels * COMPLEX, s)?;
        }
        weights
            .map(|all| {
                w.sample_weights
                    .copy_range_from(0, all, part.first * WEIGHT, part.len * WEIGHT, s)
                    .map(|()| &w.sample_weights)
            })
            .transpose()
    }

    /// Copies `part`'s samples of every coil between the whole M×L data
    /// `whole` and its len×L `data`: into `data` when `into_part`, else back.
    fn part_samples(
        &self,
        part: &Part,
        data: &DeviceBuffer,
        whole: &DeviceBuffer,
        into_part: bool,
        s: Stream,
    ) -> Result<()> {
        let Sizes {
            samples: m, coils, ..
        } = self.core.sizes;
        let len = part.len * COMPLEX;
        let in_part = (0, len);
        let in_whole = (part.first * COMPLEX, m * COMPLEX);
        if into_part {
            data.copy_rows_from(in_part, whole, in_whole, len, coils, s)
        } else {
            whole.copy_rows_from(in_whole, data, in_part, len, coils, s)
        }
    }

    fn adjoint_parts(&self, d: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        let works = self.lock_parts()?;
        self.on_parts(&works, s, (false, true), |part, w, ps| {
            self.part_samples(part, &w.data, d, true, ps)?;
            part.op.adjoint_dev(&w.data, &w.image_out, ps)
        })?;
        sum_part_images(&self.core, &self.links, &guarded(&works), out, s)
    }

    fn normal_parts(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<()> {
        let works = self.lock_parts()?;
        let sent = broadcast_image(&self.core, &self.links, &guarded(&works), x, s)?;
        self.on_parts(&works, s, (true, true), |part, w, ps| {
            let wp = self.part_inputs(part, w, (x, sent), weights, ps)?;
            part.op.normal_dev(&w.image, &w.image_out, wp, &w.data, ps)
        })?;
        sum_part_images(&self.core, &self.links, &guarded(&works), y, s)
    }

    /// Seconds of the fastest of `reps` device-resident applications
    /// (forward or adjoint on the whole-size vectors of the first device,
    /// the parts' copies and sums included; no host transfers).
    pub fn time_resident(&self, forward: bool, reps: usize) -> Result<f64> {
        time_resident(self, forward, reps)
    }

    /// Seconds of each part alone ([`CudaOperator::time_resident`] on its own
    /// device, one part after the other): the split's balance, apart from its
    /// copies and sums.
    pub fn time_parts(&self, forward: bool, reps: usize) -> Result<Vec<f64>> {
        let times = self
            .parts
            .iter()
            .map(|p| {
                p.op.device.bind()?;
                p.op.time_resident(forward, reps)
            })
            .collect();
        self.core.device.bind()?;
        times
    }

    /// The parts and their kernels (for benchmarks and reports).
    pub fn describe(&self) -> String {
        self.parts
            .iter()
            .map(|p| {
                format!(
                    "samples {}..{}: {}",
                    p.first,
                    p.first + p.len,
                    p.op.describe()
                )
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

impl DeviceNormal for CudaMulti {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, stream: Stream) -> Result<()> {
        self.adjoint_parts(d, out, stream)
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        _scratch: &DeviceBuffer,
        stream: Stream,
    ) -> Result<()> {
        self.normal_parts(x, y, weights, stream)
    }
}

impl DeviceOperator for CudaMulti {
    fn core(&self) -> &CudaCore {
        &self.core
    }

    fn work(&self) -> &Mutex<Work> {
        &self.work
    }

    /// out (M×L, first device) = W·E x.
    fn forward_dev(
        &self,
        x: &DeviceBuffer,
        out: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        s: Stream,
    ) -> Result<()> {
        let works = self.lock_parts()?;
        let sent = broadcast_image(&self.core, &self.links, &guarded(&works), x, s)?;
        self.on_parts(&works, s, (true, false), |part, w, ps| {
            let wp = self.part_inputs(part, w, (x, sent), weights, ps)?;
            part.op.forward_dev(&w.image, &w.data, wp, ps)
        })?;
        let gathered = self
            .parts
            .iter()
            .zip(&works)
            .try_for_each(|(part, w)| self.part_samples(part, &w.data, out, false, s));
        // the parts' data buffers are read by these copies, also after an error
        gathered.and(s.synchronize("gathering the GPU parts' data"))
    }

    fn devices(&self) -> Vec<usize> {
        CudaMulti::devices(self)
    }

    /// "cuda:0+1 (NCCL 2.28.3)": the parts' devices and how images move.
    fn name(&self) -> String {
        let devices: Vec<String> = self.devices().iter().map(|d| d.to_string()).collect();
        format!("cuda:{} ({})", devices.join("+"), self.links.describe())
    }
}

/// The workspaces behind their guards.
pub(super) fn guarded<'a>(works: &'a [WorkGuard<'_>]) -> Vec<&'a Work> {
    works.iter().map(|w| &**w).collect()
}

/// Runs `each(i)` for every part i on a host thread of its own with
/// `devices[i]` bound (the parts concurrently, so that the chunk loops'
/// cancellation points, which wait for their stream, do not serialise the
/// GPUs), inside the caller's progress span, and leaves `first` bound. The
/// parts' results in order, or the first failing part's error.
pub(super) fn on_devices<T: Send>(
    first: &Device,
    devices: &[&Arc<Device>],
    each: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    // the call's progress span, for the parts' cancellation points
    let span = Progress::current();
    let outcomes: Vec<Result<T>> = std::thread::scope(|scope| {
        let threads: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(p, device)| {
                let (span, each) = (&span, &each);
                scope.spawn(move || {
                    span.enter(|| {
                        device.bind()?;
                        each(p)
                    })
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(Error::internal("a GPU part's thread panicked")))
            })
            .collect()
    });
    first.bind()?;
    outcomes.into_iter().collect()
}

/// Runs `each(i, works[i], its stream)` on every part and waits for the
/// parts' streams. `stream` is the caller's stream on `first`: the inputs it
/// is producing are waited for first. Where a part's call `waits` for its
/// stream (cancellation points between chunks), each part runs on a host
/// thread of its own ([`on_devices`]), so that the GPUs are not serialised;
/// else the caller issues every part's work in turn and then waits for all:
/// a thread per part and call cost 0.15–0.2 ms to start on the GPU machine
/// (2 × H100, bieri-512: E on two GPUs 1.81× one GPU with threads, 1.90×
/// without; BENCHMARKS.md, 2026-11-27, session 16).
pub(super) fn on_part_streams(
    first: &Device,
    (devices, waits): (&[&Arc<Device>], bool),
    works: &[&Work],
    stream: Stream,
    each: impl Fn(usize, &Work, Stream) -> Result<()> + Sync,
) -> Result<()> {
    let part_stream = |p: usize| Stream(works[p].stream.cu_stream());
    first.bind()?;
    stream.synchronize("waiting for the inputs of the GPU parts")?;
    // Every stream that may hold work is waited for, also after an error:
    // the caller's buffers are in use until then.
    if waits {
        return on_devices(first, devices, |p| {
            let issued = each(p, works[p], part_stream(p));
            issued.and(part_stream(p).synchronize("running the GPU parts"))
        })
        .map(|_| ());
    }
    let mut outcome = Ok(());
    let mut issued = 0;
    for (p, device) in devices.iter().enumerate() {
        issued = p + 1;
        outcome = device
            .bind()
            .and_then(|()| each(p, works[p], part_stream(p)));
        if outcome.is_err() {
            break;
        }
    }
    for (p, device) in devices.iter().enumerate().take(issued) {
        let synced = device
            .bind()
            .and_then(|()| part_stream(p).synchronize("running the GPU parts"));
        outcome = outcome.and(synced);
    }
    first.bind()?;
    outcome
}

/// `buffer(w)` of every part's workspace `w` with the workspace's stream.
fn on_their_streams<'a>(
    works: &[&'a Work],
    buffer: impl Fn(&'a Work) -> &'a DeviceBuffer,
) -> Vec<(&'a DeviceBuffer, Stream)> {
    works
        .iter()
        .map(|w| (buffer(w), Stream(w.stream.cu_stream())))
        .collect()
}

/// The first `bytes` bytes of `x` (first device, produced on its stream `s`)
/// into every part's `target(w)` by one NCCL broadcast on the parts' streams
/// (true), or false where the links have no NCCL (each part copies it then).
pub(super) fn broadcast_to_parts<'a>(
    links: &Links,
    works: &[&'a Work],
    (x, bytes): (&DeviceBuffer, usize),
    target: impl Fn(&'a Work) -> &'a DeviceBuffer,
    s: Stream,
) -> Result<bool> {
    if !links.nccl() {
        return Ok(false);
    }
    s.synchronize("waiting for the inputs of the GPU parts")?;
    links.broadcast(x, &on_their_streams(works, target), bytes)
}

/// The image `x` (N, first device of `core`) into every part's `image`
/// ([`broadcast_to_parts`]).
pub(super) fn broadcast_image(
    core: &CudaCore,
    links: &Links,
    works: &[&Work],
    x: &DeviceBuffer,
    s: Stream,
) -> Result<bool> {
    let bytes = core.sizes.voxels * COMPLEX;
    broadcast_to_parts(links, works, (x, bytes), |w| &w.image, s)
}

/// out (N, the first device of `core`) = Σ_p images_p: the parts' `image_out`
/// summed by one NCCL reduction, or without NCCL in part order (results do
/// not depend on timing) through the first part's `image` as the landing
/// buffer.
pub(super) fn sum_part_images(
    core: &CudaCore,
    links: &Links,
    works: &[&Work],
    out: &DeviceBuffer,
    s: Stream,
) -> Result<()> {
    let bytes = core.sizes.voxels * COMPLEX;
    if links.sum(&on_their_streams(works, |w| &w.image_out), out, bytes)? {
        return Ok(());
    }
    let landing = &works[0].image;
    for (p, w) in works.iter().enumerate() {
        if p == 0 {
            out.copy_range_from(0, &w.image_out, 0, bytes, s)?;
        } else {
            landing.copy_range_from(0, &w.image_out, 0, bytes, s)?;
            launch_over(
                &core.k.axpy,
                core.sizes.voxels,
                s,
                Args::default()
                    .f64(1.0)
                    .ptr(landing.ptr)
                    .ptr(out.ptr)
                    .int(core.sizes.voxels as i64),
            )?;
        }
    }
    // the landing buffer is reused by the next call on the parts' streams
    s.synchronize("summing the GPU parts' images")
}

#[cfg(test)]
mod tests {
    use super::part_ranges;

    #[test]
    fn sample_ranges_cover_every_sample_once() {
        for samples in 1..40 {
            for parts in 1..=samples.min(9) {
                let ranges = part_ranges(samples, parts);
                assert_eq!(ranges.len(), parts);
                let mut next = 0;
                for &(first, len) in &ranges {
                    assert_eq!(first, next);
                    assert!(len >= samples / parts && len <= samples.div_ceil(parts));
                    next += len;
                }
                assert_eq!(next, samples);
            }
        }
    }
}
