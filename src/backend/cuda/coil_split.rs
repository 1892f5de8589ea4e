//! The FFT-based operators (Toeplitz, Cartesian, the fast path) on several
//! GPUs of one process ([`CoilSplit`]), split by coils: part p holds the
//! coils [c_p, c_p + L_p) (counts differing by at most one) as a one-GPU
//! operator of its own, built from the model with only those coils'
//! sensitivities. With E_p the rows of those coils,
//!
//!   E x = [E_0 x; E_1 x; …]        (x broadcast; the parts' data are
//!                                   contiguous runs of the M×L data)
//!   Eᴴ d = Σ_p E_pᴴ d_p            (each part's run of d, the images summed)
//!   EᴴWE x = Σ_p E_pᴴ W E_p x      (W broadcast; no data moves)
//!
//! Coils, not samples, because these operators' work (FFTs of coil grids,
//! NUFFTs of coil transforms) is per coil, while their set-up (Toeplitz
//! kernels, NUFFT point sorting) is per sample set: every part repeats the
//! set-up for all samples and does 1/P of each application. Vectors live on
//! the first part's device (CG's among them); images and weights go out and
//! images come back summed by NCCL or device-to-device copies
//! ([`super::collective`]), the data's runs by copies, as in
//! [`super::multi`] (whose helpers these are). `HORECON_CUDA_TEST_PARTS=P`
//! places the P parts on one GPU for the tests.

use super::collective::Links;
use super::context::Device;
use super::memory::{DeviceBuffer, Stream};
use super::multi::{
    broadcast_image, broadcast_to_parts, guarded, on_devices, on_part_streams, part_ranges,
    sum_part_images,
};
use super::operator::DeviceOperator;
use super::space::{solve_on, DeviceNormal};
use super::vectors::CudaCore;
use super::work::{Work, WorkGuard};
use crate::error::{Error, Result};
use crate::model::Sizes;
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::options::Options;
use crate::solver::CgProblem;
use num_complex::{Complex32, Complex64};
use std::sync::{Arc, Mutex};

/// Bytes of one device complex value (double2).
const COMPLEX: usize = 16;
/// Bytes of one device sample weight (double).
const WEIGHT: usize = 8;

/// A one-GPU operator of some of the coils, as a [`CoilSplit`] part uses it.
pub(super) trait CoilPart: EncodingOperator {
    /// Its device, its sizes (its coils) and its O(N) kernels.
    fn core(&self) -> &CudaCore;
    /// out (M × its coils, double2) = E x on the device, unweighted.
    fn forward_part(&self, x: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()>;
    /// out (N) = Eᴴ d for its coils' data d on the device.
    fn adjoint_part(&self, d: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()>;
    /// EᴴWE as CG applies it with the sample weights `weights` (`None` = 1):
    /// the Toeplitz operator's kernels for those weights are made here.
    fn normal_part(&self, weights: Option<&[f32]>) -> Result<Box<dyn DeviceNormal + Send + '_>>;
}

/// A one-GPU device operator (Cartesian, the fast path) is a part as it
/// stands: its EᴴWE needs nothing made per set of sample weights.
impl<T: DeviceOperator + Send + Sync> CoilPart for T {
    fn core(&self) -> &CudaCore {
        DeviceOperator::core(self)
    }

    fn forward_part(&self, x: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        self.forward_dev(x, out, None, s)
    }

    fn adjoint_part(&self, d: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        self.adjoint_dev(d, out, s)
    }

    fn normal_part(&self, _weights: Option<&[f32]>) -> Result<Box<dyn DeviceNormal + Send + '_>> {
        Ok(Box::new(self))
    }
}

/// One part: its operator, its first coil and its workspace on its device.
struct Part {
    op: Box<dyn CoilPart>,
    first: usize,
    work: Mutex<Work>,
}

impl Part {
    fn device(&self) -> &Arc<Device> {
        &self.op.core().device
    }

    fn sizes(&self) -> Sizes {
        self.op.core().sizes
    }

    fn lock(&self) -> Result<WorkGuard<'_>> {
        WorkGuard::lock(&self.work, self.device(), self.sizes())
    }
}

/// An FFT-based operator split by coils over several devices (module documentation).
pub struct CoilSplit {
    /// The first part's device, the whole sizes and the O(N) kernels.
    core: CudaCore,
    parts: Vec<Part>,
    /// How images and weights move between the parts.
    links: Links,
    /// Whole-size vectors on the first device (host transfers, CG).
    work: Mutex<Work>,
    name: String,
}

/// The parts' normal operators for one call or solve, with their workspaces.
struct SplitNormal<'a> {
    split: &'a CoilSplit,
    normals: Vec<Box<dyn DeviceNormal + Send + 'a>>,
    works: Vec<WorkGuard<'a>>,
}

impl CoilSplit {
    /// The parts `make(device, first coil, part sizes)` over `devices` (one
    /// part each, in order; a device may repeat), made concurrently. Needs at
    /// least two devices and as many coils.
    pub(super) fn new(
        devices: &[Arc<Device>],
        sizes: Sizes,
        precision: Precision,
        make: impl Fn(Arc<Device>, usize, Sizes) -> Result<Box<dyn CoilPart>> + Sync,
    ) -> Result<CoilSplit> {
        if devices.len() < 2 || devices.len() > sizes.coils {
            return Err(Error::internal(format!(
                "a split over {} parts of {} coils",
                devices.len(),
                sizes.coils
            )));
        }
        let first = devices[0].clone();
        let ranges = part_ranges(sizes.coils, devices.len());
        let refs: Vec<&Arc<Device>> = devices.iter().collect();
        let ops = on_devices(&first, &refs, |p| {
            let (coil, coils) = ranges[p];
            make(devices[p].clone(), coil, Sizes { coils, ..sizes })
        })?;
        let mut parts = Vec::with_capacity(ops.len());
        for (op, (coil, _)) in ops.into_iter().zip(&ranges) {
            let work = Work::new(&op.core().device, op.core().sizes)?;
            parts.push(Part {
                op,
                first: *coil,
                work: Mutex::new(work),
            });
        }
        first.bind()?;
        let links = Links::new(&refs)?;
        let ordinals: Vec<String> = devices.iter().map(|d| d.ordinal.to_string()).collect();
        let name = format!(
            "cuda:{} by coils ({}; {})",
            ordinals.join("+"),
            parts[0].op.backend_name(),
            links.describe()
        );
        Ok(CoilSplit {
            core: CudaCore::new(first.clone(), sizes, precision)?,
            work: Mutex::new(Work::new(&first, sizes)?),
            parts,
            links,
            name,
        })
    }

    fn lock(&self) -> Result<WorkGuard<'_>> {
        WorkGuard::lock(&self.work, &self.core.device, self.core.sizes)
    }

    fn lock_parts(&self) -> Result<Vec<WorkGuard<'_>>> {
        self.parts.iter().map(Part::lock).collect()
    }

    fn devices(&self) -> Vec<&Arc<Device>> {
        self.parts.iter().map(Part::device).collect()
    }

    /// Byte range of part `p`'s coils in the M×L device data.
    fn data_range(&self, p: usize) -> (usize, usize) {
        let m = self.core.sizes.samples;
        let part = &self.parts[p];
        (part.first * m * COMPLEX, part.sizes().coils * m * COMPLEX)
    }

    /// The parts' normal operators for `weights` (made concurrently) and workspaces.
    fn normals(&self, weights: Option<&[f32]>) -> Result<SplitNormal<'_>> {
        let works = self.lock_parts()?;
        let normals = on_devices(&self.core.device, &self.devices(), |p| {
            self.parts[p].op.normal_part(weights)
        })?;
        Ok(SplitNormal {
            split: self,
            normals,
            works,
        })
    }

    /// out (N, first device) = Σ_p E_pᴴ d_p: each part's run of the device
    /// data d (M×L) into its workspace `works[p]`, `adjoint(p, d_p, image_p,
    /// stream)` there (its operator's Eᴴ, or its CG normal operator's), the
    /// images summed.
    fn adjoint_dev(
        &self,
        works: &[&Work],
        d: &DeviceBuffer,
        out: &DeviceBuffer,
        s: Stream,
        adjoint: impl Fn(usize, &DeviceBuffer, &DeviceBuffer, Stream) -> Result<()> + Sync,
    ) -> Result<()> {
        on_part_streams(
            &self.core.device,
            (&self.devices(), true),
            works,
            s,
            |p, w, ps| {
                let (from, len) = self.data_range(p);
                w.data.copy_range_from(0, d, from, len, ps)?;
                adjoint(p, &w.data, &w.image_out, ps)
            },
        )?;
        sum_part_images(&self.core, &self.links, works, out, s)
    }

    /// out (M×L, first device) = E x.
    fn forward_dev(&self, x: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        let works = self.lock_parts()?;
        let bytes = self.core.sizes.voxels * COMPLEX;
        let sent = broadcast_image(&self.core, &self.links, &guarded(&works), x, s)?;
        on_part_streams(
            &self.core.device,
            (&self.devices(), true),
            &guarded(&works),
            s,
            |p, w, ps| {
                if !sent {
                    w.image.copy_range_from(0, x, 0, bytes, ps)?;
                }
                self.parts[p].op.forward_part(&w.image, &w.data, ps)
            },
        )?;
        for (p, w) in works.iter().enumerate() {
            let (at, len) = self.data_range(p);
            out.copy_range_from(at, &w.data, 0, len, s)?;
        }
        // the parts' data buffers are read by these copies
        s.synchronize("gathering the GPU parts' data")
    }
}

impl DeviceNormal for SplitNormal<'_> {
    fn adjoint_dev(&self, d: &DeviceBuffer, out: &DeviceBuffer, s: Stream) -> Result<()> {
        let works = guarded(&self.works);
        self.split.adjoint_dev(&works, d, out, s, |p, dp, op, ps| {
            self.normals[p].adjoint_dev(dp, op, ps)
        })
    }

    fn normal_dev(
        &self,
        x: &DeviceBuffer,
        y: &DeviceBuffer,
        weights: Option<&DeviceBuffer>,
        _scratch: &DeviceBuffer,
        s: Stream,
    ) -> Result<()> {
        let split = self.split;
        let works = guarded(&self.works);
        let Sizes {
            voxels: n,
            samples: m,
            ..
        } = split.core.sizes;
        let sent = broadcast_image(&split.core, &split.links, &works, x, s)?;
        let weights_sent = match weights {
            Some(all) => {
                let weights = (all, m * WEIGHT);
                broadcast_to_parts(&split.links, &works, weights, |w| &w.sample_weights, s)?
            }
            None => false,
        };
        on_part_streams(
            &split.core.device,
            (&split.devices(), true),
            &works,
            s,
            |p, w, ps| {
                if !sent {
                    w.image.copy_range_from(0, x, 0, n * COMPLEX, ps)?;
                }
                let wp = match weights {
                    Some(all) => {
                        if !weights_sent {
                            w.sample_weights
                                .copy_range_from(0, all, 0, m * WEIGHT, ps)?;
                        }
                        Some(&w.sample_weights)
                    }
                    None => None,
                };
                self.normals[p].normal_dev(&w.image, &w.image_out, wp, &w.data, ps)
            },
        )?;
        sum_part_images(&split.core, &split.links, &works, y, s)
    }
}

/// Host calls: one upload on the first device, the parts, one download; CG
/// on the first device.
impl EncodingOperator for CoilSplit {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        let w = self.lock()?;
        let run = |s| self.forward_dev(&w.image, &w.data, s);
        self.core.call(&w, image, &w.image, run, &w.data, data)
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        let w = self.lock()?;
        let works = self.lock_parts()?;
        let run = |s| {
            self.adjoint_dev(
                &guarded(&works),
                &w.data,
                &w.image_out,
                s,
                |p, dp, op, ps| self.parts[p].op.adjoint_part(dp, op, ps),
            )
        };
        self.core.call(&w, data, &w.data, run, &w.image_out, image)
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        let w = self.lock()?;
        let normal = self.normals(weights)?;
        self.core.call_normal(&w, image, weights, out, |wd, s| {
            normal.normal_dev(&w.image, &w.image_out, wd, &w.data, s)
        })
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        let w = self.lock()?;
        let normal = self.normals(problem.sample_weights)?;
        solve_on(&self.core, &normal, &w, problem, image)
    }

    fn backend_name(&self) -> String {
        self.name.clone()
    }

    /// The first part's: the kernels do not depend on the coils.
    fn toeplitz_kernel(
        &self,
        weights: Option<&[f32]>,
    ) -> Result<Option<(Vec<Complex64>, [usize; 3])>> {
        self.parts[0].op.toeplitz_kernel(weights)
    }
}

/// The operator for `options` with `sizes.coils` coils of sensitivities
/// `sensitivities` (N×L, `None` = 1): `make(device, part sizes, part
/// sensitivities)` on the first device of [`super::placement`] when it
/// gives one device or there is one coil, else a [`CoilSplit`] over as many
/// of its devices as there are coils (at most). cuFFT must load. `what`
/// names the operator in the verbose note.
pub(super) fn build(
    options: &Options,
    sizes: Sizes,
    sensitivities: Option<&[Complex32]>,
    what: &str,
    make: impl Fn(Arc<Device>, Sizes, Option<&[Complex32]>) -> Result<Box<dyn CoilPart>> + Sync,
) -> Result<Box<dyn EncodingOperator>> {
    let mut devices = super::placement(options)?;
    super::fft::available().map_err(super::context::unavailable)?;
    devices.truncate(sizes.coils.max(1));
    let part = |device, first, part: Sizes| {
        let n = sizes.voxels;
        let sens = sensitivities.map(|s| &s[first * n..(first + part.coils) * n]);
        make(device, part, sens)
    };
    if devices.len() == 1 {
        let op: Box<dyn EncodingOperator> = part(devices.remove(0), 0, sizes)?;
        return Ok(op);
    }
    let split = CoilSplit::new(&devices, sizes, options.precision, part)?;
    if options.verbosity >= 1 {
        eprintln!(
            "horecon: {what} runs on {} parts split by coils: {}",
            devices.len(),
            split.name
        );
    }
    Ok(Box::new(split))
}
