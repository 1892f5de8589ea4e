//! The memory a call needs, estimated before running it
//! (`horecon_plan_memory`), and the check that refuses a call the system
//! cannot hold (HORECON_ERR_OUT_OF_MEMORY at once instead of the kernel's
//! OOM killer half-way through).
//!
//! The estimates add up the buffers each path allocates (see the backends),
//! with the kernel's partial sums and the C API's copies of the caller's
//! arrays, and the one-time set-up the call would trigger now (the operator,
//! Toeplitz kernels, Cartesian weights). They are upper estimates of the peak
//! of live heap bytes the call adds to what is live before it (a built
//! operator is not counted again); tests/memory.rs measures that peak with a
//! counting allocator and checks peak ≤ estimate ≤ 4 × peak.

use super::Plan;
use crate::backend::cpu::{fft, kernel};
use crate::error::{check_available, Result};
use crate::model::kernel_basis::KernelBasis;
use crate::model::toeplitz::{kernel_nufft_tolerance, ToeplitzSpec};
use crate::model::Sizes;
use crate::op::Precision;
use crate::plan::BackendKind;

/// The calls whose memory can be asked for (`HORECON_CALL_*`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Forward = 0,
    Adjoint = 1,
    Normal = 2,
    Cg = 3,
    Fhd = 4,
    Q = 5,
    Gridding = 6,
}

impl Call {
    /// The call's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Call::Forward => "forward",
            Call::Adjoint => "adjoint",
            Call::Normal => "normal",
            Call::Cg => "cg",
            Call::Fhd => "fhd",
            Call::Q => "q",
            Call::Gridding => "gridding",
        }
    }

    pub fn from_code(code: i32) -> Option<Call> {
        use Call::*;
        [Forward, Adjoint, Normal, Cg, Fhd, Q, Gridding]
            .into_iter()
            .find(|c| *c as i32 == code)
    }
}

/// Bytes a call needs at most: on the host and on the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub host: u64,
    pub device: u64,
}

/// Saturating byte arithmetic: an estimate never overflows, it only grows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Bytes(u64);

impl Bytes {
    fn of(count: usize, size: usize) -> Bytes {
        Bytes((count as u64).saturating_mul(size as u64))
    }
}

impl std::ops::Add for Bytes {
    type Output = Bytes;
    fn add(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(other.0))
    }
}

/// The element sizes of a precision mode on the CPU: the phase type and a
/// complex accumulator.
fn cpu_types(precision: Precision) -> (usize, usize) {
    match precision {
        Precision::Accurate => (8, 8),
        Precision::Fast => (4, 8),
        Precision::Double => (8, 16),
    }
}

const C32: usize = 8;
const F64: usize = 8;
const C64: usize = 16;

/// The exact phase-sum operator: its resident part, and what building it
/// holds besides (the model's features, float64, and sensitivities).
fn exact_operator(terms: usize, s: Sizes, precision: Precision) -> (Bytes, Bytes) {
    let (phase, acc) = cpu_types(precision);
    let points = s.voxels.saturating_add(s.samples);
    let features = Bytes::of(terms.saturating_mul(points), F64)
        + Bytes::of(s.voxels.saturating_mul(s.coils), C32);
    let resident = Bytes::of(terms.saturating_mul(points), 2 * phase)
        + Bytes::of(s.voxels.saturating_mul(s.coils), acc);
    (resident, features)
}

/// What a call allocates besides the vectors counted (rayon's jobs, the
/// progress machinery, messages, small tables): a fixed allowance, one per
/// thread, and 1/32 of the vectors.
const OVERHEAD: u64 = 6 << 10;
const PER_THREAD: u64 = 2 << 10;
const SLACK: u64 = 32;

/// One phase sum over `outer` points with `inner` points and `coils` columns.
fn phase_sum(outer: usize, inner: usize, coils: usize, acc: usize, threads: usize) -> Bytes {
    Bytes::of(kernel::partial_len(outer, inner, coils, threads), acc)
}

impl Plan {
    /// The memory the call `call` needs (module docs). Computes the Toeplitz
    /// time segmentation when the call would (it takes up to a few seconds
    /// with automatic segments); otherwise cheap.
    pub fn memory(&self, call: Call) -> Result<Memory> {
        self.estimate(call, true)
    }

    /// Fails with `OutOfMemory` when the call's estimate exceeds the memory
    /// available (parts that need an expensive set-up to size are left to
    /// that set-up's own check).
    pub(super) fn preflight(&self, call: Call, what: &str) -> Result<()> {
        match self.estimate(call, false) {
            Ok(m) => check_available(m.host, what),
            // The call itself reports what is missing or wrong.
            Err(_) => Ok(()),
        }
    }

    fn estimate(&self, call: Call, full: bool) -> Result<Memory> {
        let s = self.sizes();
        let threads = self.pool.current_num_threads();
        let precision = self.options.precision;
        let (_, acc) = cpu_types(precision);
        let (n, m, l) = (s.voxels, s.samples, s.coils);
        let ml = m.saturating_mul(l);
        let nl = n.saturating_mul(l);
        // The C API's copies: its output buffer and CG's start image and
        // weights (the operators' inputs are read in place).
        let io = |input: usize, output: usize| Bytes::of(input, C32) + Bytes::of(output, C32);
        let built = |slot: &std::sync::Mutex<Option<_>>| {
            slot.lock().unwrap_or_else(|e| e.into_inner()).is_some()
        };
        match call {
            Call::Fhd => _ = self.stone_trajectory("fhd")?,
            Call::Q => {
                self.stone_trajectory("q")?;
                self.q_steps()?;
            }
            Call::Gridding => _ = self.gridding_model()?,
            _ => {}
        }
        if matches!(call, Call::Gridding) {
            return Ok(Memory {
                host: self.gridding_memory(threads).0,
                device: 0,
            });
        }
        self.model.check_complete()?;
        let terms = self.model.phase.as_ref().map_or(0, |p| p.terms)
            + usize::from(self.model.off_resonance.is_some());
        let (resident, transient) = if self.cartesian.is_some() {
            // phases, sensitivities (twice in slab order), unit weights (f64 and T)
            let r = Bytes::of(m, acc) + Bytes::of(nl, 2 * acc) + Bytes::of(n, F64 + acc);
            (r, Bytes::of(n, F64))
        } else {
            exact_operator(terms, s, precision)
        };
        // A call on the exact operator: `work` beyond it, and when the call
        // builds it, the operator itself and, while building, the features.
        let fresh = !built(&self.operator);
        let on_exact = |work: Bytes| {
            if fresh {
                resident + transient.max(work)
            } else {
                work
            }
        };
        let threads_allowance = Bytes(OVERHEAD + (threads as u64).saturating_mul(PER_THREAD));
        // One application of E or Eᴴ (widened input, output, intermediates).
        let (forward, adjoint) = if self.cartesian.is_some() {
            (
                Bytes::of(n, 2 * acc) + Bytes::of(ml, acc),
                Bytes::of(n, 2 * acc) + Bytes::of(ml, acc),
            )
        } else {
            (
                Bytes::of(n, acc)
                    + Bytes::of(ml, acc)
                    + Bytes::of(nl, acc)
                    + phase_sum(m, n, l, acc, threads),
                Bytes::of(ml, acc)
                    + Bytes::of(n, acc)
                    + Bytes::of(
                        if self.model.sensitivities.is_some() {
                            nl
                        } else {
                            0
                        },
                        acc,
                    )
                    + phase_sum(n, m, l, acc, threads),
            )
        };
        let normal_exact = Bytes::of(n, 2 * acc) + Bytes::of(ml, acc) + forward.max(adjoint);
        let toeplitz = self.toeplitz.filter(|_| self.cartesian.is_none());
        // x, b, r, p, Ap, a zero vector, the solution copy, FD state; the
        // right-hand side is an adjoint of the widened data.
        let cg_vectors = Bytes::of(n, 6 * acc) + Bytes::of(n, C32 + 2 * F64);
        let cg_rhs = adjoint + Bytes::of(ml, acc);
        let host = match (call, toeplitz) {
            (Call::Normal, Some(segments)) => {
                // The Toeplitz operator holds its own exact operator.
                self.toeplitz_memory(segments, resident, transient, full, threads)?
                    + Bytes::of(n, 2 * acc)
                    + io(0, n)
            }
            (Call::Cg, Some(segments)) => {
                let toeplitz =
                    self.toeplitz_memory(segments, resident, transient, full, threads)?;
                toeplitz + cg_vectors + Bytes::of(n, 2 * acc).max(cg_rhs) + io(n + m, 0)
            }
            (Call::Forward, _) => on_exact(forward) + io(0, ml),
            (Call::Adjoint, _) => on_exact(adjoint) + io(0, n),
            (Call::Normal, _) => on_exact(normal_exact) + io(0, n),
            (Call::Cg, _) => on_exact(cg_vectors + normal_exact.max(cg_rhs)) + io(n + m, 0),
            (Call::Fhd, _) => on_exact(adjoint) + io(0, n) + Bytes::of(m, C32),
            (Call::Q, _) => {
                let q: usize = self.q_dims().iter().product();
                let qs = Sizes {
                    dims: self.q_dims(),
                    voxels: q,
                    samples: m,
                    coils: 1,
                };
                let (q_resident, q_features) = exact_operator(3, qs, precision);
                // positions (twice while copied), the operator, the adjoint
                Bytes::of(q, 6 * F64)
                    + q_resident
                    + q_features.max(
                        Bytes::of(m, acc) + Bytes::of(q, acc) + phase_sum(q, m, 1, acc, threads),
                    )
                    + io(2 * m, q)
            }
            (Call::Gridding, _) => unreachable!("handled above"),
        };
        let host = host + Bytes(host.0 / SLACK) + threads_allowance;
        let device = if self.backend == BackendKind::Cuda {
            // The model (features as float64, sensitivities) and the vectors as double2.
            let model = Bytes::of(terms.saturating_mul(n + m), F64) + Bytes::of(nl, C32);
            let vectors = Bytes::of(n, 8 * C64) + Bytes::of(ml, 2 * C64);
            (model + vectors).0
        } else {
            0
        };
        Ok(Memory {
            host: host.0,
            device,
        })
    }

    /// The Toeplitz normal operator's part of a normal or cg call: its FFT
    /// buffers and, when the call builds it, the operator (its exact
    /// operator of `resident` bytes, built from `features`; segment phases;
    /// kernels for one set of weights) with the kernels' set-up (the offsets
    /// operator and its data).
    fn toeplitz_memory(
        &self,
        segments: usize,
        resident: Bytes,
        features: Bytes,
        full: bool,
        threads: usize,
    ) -> Result<Bytes> {
        let built = self
            .toeplitz_operator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        let s = self.sizes();
        let (_, acc) = cpu_types(self.options.precision);
        let kernel_dims = crate::model::toeplitz::kernel_grid(s.dims);
        let mode_dims = crate::model::toeplitz::mode_grid(s.dims);
        let kernel_points = kernel_dims.iter().fold(1usize, |a, &b| a.saturating_mul(b));
        // L, the kernels' transforms (r of the CPU's pair basis,
        // model::kernel_basis, when the full estimate computes the spec,
        // else one per pair) and their NUFFT's tolerance (without the spec,
        // that of no segmentation: float64 for ACCURATE, the larger).
        let precision = self.options.precision;
        let unsegmented = kernel_nufft_tolerance(precision, false);
        let (l, transforms, tolerance) = if self.model.off_resonance.is_none() {
            (1, 1, unsegmented)
        } else if full {
            self.on_pool(|| -> Result<(usize, usize, (f64, bool))> {
                let spec = ToeplitzSpec::new(&self.model, segments)?;
                let pairs = spec.kernel_pairs().len();
                let tolerance = spec.kernel_tolerance(precision);
                let basis = (self.backend == crate::plan::BackendKind::Cpu)
                    .then(|| KernelBasis::new(&spec, tolerance.0 / 10.0))
                    .flatten();
                Ok((spec.segments(), basis.map_or(pairs, |b| b.rank), tolerance))
            })?
        } else if segments > 0 {
            (segments, segments * (segments + 1) / 2, unsegmented)
        } else {
            // Sized by the set-up's own check once the segments are known.
            (1, 1, unsegmented)
        };
        let (n, m) = (s.voxels, s.samples);
        let pairs = l.saturating_mul(l + 1) / 2;
        // FFT buffers of one application: L spectra, L sums when segmented,
        // and the FFTs' own.
        let buffers = Bytes::of(
            (if l > 1 { 2 * l } else { 1 }).saturating_mul(kernel_points),
            acc,
        ) + Bytes::of(fft::working_len(kernel_dims, threads), acc);
        if built {
            return Ok(buffers);
        }
        // The operator: the exact one, the segmentation (coefficients L x M,
        // δ), segment phases (L x N) and the kernels (pairs x points).
        let segmentation = if l > 1 {
            Bytes::of(l.saturating_mul(m), C64) + Bytes::of(n, F64)
        } else {
            Bytes(0)
        } + match &self.model.off_resonance {
            Some(or) => {
                Bytes(crate::model::toeplitz::segmentation_work_bytes(&or.omega, &or.times) as u64)
            }
            None => Bytes(0),
        };
        let operator = resident
            + segmentation
            + Bytes::of(l.saturating_mul(n), acc)
            + Bytes::of(pairs.saturating_mul(kernel_points), acc);
        // The kernels' set-up: one type-1 NUFFT of the weighted data (M x
        // transforms, float64: the pairs' data, or its M x r compression
        // by the pair basis, formed without the M x P) onto the modes
        // (transforms x points, float64), its points (3 x M) and its plan and
        // buffers; with a basis also the r spectra beside the P kernels they
        // expand into.
        let nufft = crate::model::toeplitz::kernel_nufft_spec(mode_dims, m, transforms, tolerance)?;
        let reduced = if transforms < pairs {
            Bytes::of(transforms.saturating_mul(kernel_points), acc)
        } else {
            Bytes(0)
        };
        let setup = Bytes::of(m.saturating_mul(transforms), C64)
            + Bytes::of(transforms.saturating_mul(kernel_points), C64)
            + Bytes::of(3usize.saturating_mul(m), F64)
            + Bytes(crate::nufft::cpu::memory_bytes(&nufft, m, threads))
            + reduced;
        Ok(operator + features.max(setup) + buffers)
    }

    /// Gridding: sample tables, the oversampled grid and its slab buffers,
    /// Pipe–Menon's grids, the image accumulators.
    fn gridding_memory(&self, threads: usize) -> Bytes {
        let s = self.sizes();
        let grid: usize = s
            .dims
            .iter()
            .map(|&d| if d > 1 { (2 * d).max(d + 1) } else { 1 })
            .fold(1usize, |a, b| a.saturating_mul(b));
        let slabs = Bytes::of(grid, C64) + Bytes::of(grid / 2 + 12 * threads, C64);
        let samples = Bytes::of(s.samples, 24 + C64 + F64 + C64 + 2 * 8);
        let pipe_menon = Bytes::of(grid, F64 + C64) + Bytes::of(s.samples, F64);
        let image = Bytes::of(s.voxels, C64 + F64 + C64 + C32);
        samples
            + Bytes::of(grid, C64)
            + slabs.max(pipe_menon + slabs)
            + image
            + Bytes::of(s.samples.saturating_mul(s.coils) + s.samples, C32)
    }
}
