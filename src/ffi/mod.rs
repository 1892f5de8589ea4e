//! The C API (design/C-API.md). Only checking and translation live here:
//! every body runs inside [`guard::guard`], checks each pointer, builds
//! slices of the sizes the plan implies, and writes outputs only on success.
//!
//! In-place calls (an output pointer equal to, or overlapping, an input) are
//! supported: inputs are copied before any output is written.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

mod calib;
mod cartesian;
mod guard;
mod recon;
mod sim;
mod toeplitz;
mod work;
// Appended last so that its functions come last in the header.
mod nufft;

pub use calib::*;
// Appended last so that its items come last in the header.
mod approximation;
// After it, for the same reason.
mod phase;

pub use approximation::*;
pub use cartesian::*;
pub use nufft::*;
pub use phase::*;
pub use recon::*;
pub use sim::*;
pub use work::*;

use crate::error::{Error, Result};
use crate::op::Precision;
use crate::plan::{fd_directions, BackendKind, CgOptions, Options, Plan};
use crate::solver::{Neighbourhood, Regularizer};
use guard::{guard, guard_value};
use num_complex::Complex32;
use std::ffi::c_void;
use std::os::raw::c_char;

/// Status of every call: `HORECON_OK` (0) or an error code.
pub type horecon_status = i32;

pub const HORECON_OK: horecon_status = 0;
pub const HORECON_ERR_NULL_POINTER: horecon_status = 1;
pub const HORECON_ERR_INVALID_ARGUMENT: horecon_status = 2;
pub const HORECON_ERR_SIZE_MISMATCH: horecon_status = 3;
pub const HORECON_ERR_NOT_FINITE: horecon_status = 4;
pub const HORECON_ERR_INCOMPLETE_PLAN: horecon_status = 5;
pub const HORECON_ERR_OUT_OF_MEMORY: horecon_status = 6;
pub const HORECON_ERR_BACKEND_UNAVAILABLE: horecon_status = 7;
pub const HORECON_ERR_BACKEND: horecon_status = 8;
pub const HORECON_ERR_CANCELLED: horecon_status = 9;
pub const HORECON_ERR_INTERNAL: horecon_status = 99;

pub const HORECON_BACKEND_AUTO: i32 = 0;
pub const HORECON_BACKEND_CPU: i32 = 1;
pub const HORECON_BACKEND_CUDA: i32 = 2;

pub const HORECON_PRECISION_ACCURATE: i32 = 0;
pub const HORECON_PRECISION_FAST: i32 = 1;
pub const HORECON_PRECISION_DOUBLE: i32 = 2;

pub const HORECON_REG_NONE: i32 = 0;
pub const HORECON_REG_TIKHONOV: i32 = 1;
pub const HORECON_REG_FINITE_DIFFERENCE: i32 = 2;
pub const HORECON_REG_TOTAL_VARIATION: i32 = 3;
pub const HORECON_REG_LAPLACE: i32 = 4;

/// A single-precision complex number: the layout of C99 `float _Complex`,
/// numpy `complex64` and MATLAB's interleaved single.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct horecon_c32 {
    pub re: f32,
    pub im: f32,
}

/// An opaque plan: geometry, phase model, coils and the operator built from them.
pub struct horecon_plan {
    plan: Plan,
    /// The plan's cancel control, apart from `plan` so that `horecon_cancel`
    /// never touches what a setter on another thread may be changing.
    control: std::sync::Arc<crate::progress::Control>,
}

/// Plan options; fill with `horecon_default_options`, then change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct horecon_options {
    /// = sizeof(horecon_options); set by horecon_default_options.
    pub struct_size: u32,
    /// HORECON_BACKEND_AUTO (CUDA if usable, else CPU), _CPU or _CUDA.
    pub backend: i32,
    /// First CUDA device index.
    pub device: i32,
    /// CUDA devices to use (1): device … device + num_devices − 1 (more than
    /// present: HORECON_ERR_BACKEND_UNAVAILABLE). The exact operators are split
    /// by samples, the Toeplitz, Cartesian and fast-path operators by coils, a
    /// NUFFT plan by transforms; results as on one device within the accuracy
    /// class. > 1 with the CPU backend: HORECON_ERR_INVALID_ARGUMENT.
    pub num_devices: i32,
    /// CPU threads, 0 = all cores.
    pub num_threads: i32,
    /// HORECON_PRECISION_ACCURATE (≤ 1e-5), _FAST (≤ 1e-3) or _DOUBLE (≤ 1e-7).
    /// FAST sums the phase in float32, so its error grows with the phase's
    /// size: ≤ 1e-3 for phases up to about 1e4 rad (measured on the CPU:
    /// 8e-5 at 1e3 rad, 6e-4 at 1e4, 7e-3 at 1e5); ACCURATE and DOUBLE hold
    /// at any phase.
    pub precision: i32,
    /// 0 silent, 1 one line per solve, 2 one line per iteration (stderr).
    pub verbosity: i32,
}

/// Progress callback of `horecon_cg`: called after every iteration, on the
/// thread that called `horecon_cg`; return nonzero to stop (the call then
/// returns HORECON_ERR_CANCELLED).
pub type horecon_progress_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, iteration: i32, rel_residual: f64) -> i32>;

/// Options of `horecon_cg`; fill with `horecon_default_cg_options`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct horecon_cg_options {
    /// = sizeof(horecon_cg_options).
    pub struct_size: u32,
    /// 50.
    pub max_iterations: i32,
    /// Relative residual ‖b − Aρ‖/‖b‖ of the normal equations at which to stop (1e-6).
    /// CG also stops at the rounding level of the plan's arithmetic, 16 units of
    /// roundoff (3.6e-15 in DOUBLE, 1.9e-6 otherwise), whatever the tolerance.
    pub tolerance: f64,
    /// HORECON_REG_NONE, _TIKHONOV (λ‖ρ‖²), _FINITE_DIFFERENCE (λ‖Dρ‖²_u),
    /// _TOTAL_VARIATION (2λ·Σ sqrt(|Dρ|² + ε²)) or _LAPLACE
    /// (2λ·Σ (1 − exp(−sqrt(|Dρ|² + ε²)/σ))); D: forward differences over the
    /// grid axes of more than one voxel, none from the last voxel of an axis
    /// (or to every neighbour: `neighbours`);
    /// |Dρ|²_n = Σ_a u_{a,n}·|(Dρ)_{a,n}|² with u = fd_weights.
    pub regularizer: i32,
    /// Regularisation weight λ ≥ 0 (0 = no regularisation).
    pub lambda: f64,
    /// Outer reweighting steps (weighted CG solves of up to max_iterations
    /// each) for TV / Laplace, ≥ 1 (5); the first uses unit weights unless
    /// warm-started. horecon_cg_info then counts all their iterations.
    pub reweightings: i32,
    /// Smoothing ε > 0 for TV / Laplace, in image units (1e-3); Laplace
    /// multiplies it by 0.1 at every weight update (continuation).
    pub epsilon: f64,
    /// σ > 0 of the Laplace prior, in image units (1).
    pub sigma: f64,
    /// M non-negative per-sample weights W shared by all coils, or NULL.
    pub sample_weights: *const f32,
    /// N×ndims non-negative per-edge weights u of the finite-difference, TV and
    /// Laplace priors (ndims = grid axes of more than one voxel, x before y
    /// before z; entry a·N + n weighs the edge from voxel n to its successor
    /// along axis a), or NULL = 1. With neighbours = 26: N×ndirections in the
    /// order given at `neighbours`.
    pub fd_weights: *const f32,
    /// Nonzero: start from *image instead of 0.
    pub warm_start: i32,
    pub progress: horecon_progress_fn,
    pub progress_user: *mut c_void,
    /// The differences D of the finite-difference, TV and Laplace priors:
    /// 6 (or 0) = along the grid axes (default); 26 = to every neighbour,
    /// each edge once, the difference along offset d weighted 1/|d|² in
    /// |Dρ|²: 13 directions in 3D, in the order e0, e1, e2, e0+e1, e0−e1,
    /// e0+e2, e0−e2, e1+e2, e1−e2, e0+e1+e2, e0+e1−e2, e0−e1+e2, e0−e1−e2
    /// over the axes e0, e1, e2 of more than one voxel (x before y before
    /// z), and those of them within the grid's axes on a 2D grid (e0, e1,
    /// e0+e1, e0−e1: the 8-neighbourhood) or 1D grid (e0). fd_weights then
    /// has one column per direction (N×ndirections, entry d·N + n weighs the
    /// edge from voxel n to voxel n + d). Added at the end of the struct: a
    /// caller built against the struct without it (its smaller struct_size)
    /// gets 6.
    pub neighbours: i32,
    /// HORECON_PRECONDITIONER_NONE (0, default), _DIAGONAL (1: 1/diag(EᴴWE + λR)
    /// = 1/((Σ_j w_j)·Σ_c|S_c|² + λR_nn)) or _CIRCULANT (2: T. Chan's circulant
    /// of the Toeplitz kernel scaled by (Σ_c|S_c|²)^½; needs horecon_set_toeplitz).
    /// Fields from here on were added at the end of the struct: callers built
    /// against an older struct (its smaller struct_size) get the defaults, and
    /// only callers passing the current struct_size get horecon_cg_info's
    /// newer fields written.
    pub preconditioner: i32,
    /// τ of the discrepancy rule: stop at the first iterate with
    /// ‖W^{1/2}(Eρ − d)‖ ≤ τ·σ·sqrt(L·Σ_j w_j) (Σ_j w_j = M without weights);
    /// 0 = off (default); typical 1.0–1.1. Not with TV / Laplace.
    pub discrepancy_tau: f64,
    /// σ of the discrepancy rule: the noise standard deviation per complex
    /// sample, E|n|² = σ² (1 for whitened data, sqrt(trace(Ψ)/L) for data with
    /// noise covariance Ψ from horecon_noise_covariance). Default 1.
    pub noise_sigma: f64,
}

/// What `horecon_cg` did. The fields after `seconds` were added at the end
/// of the struct and are written only when the call's options carry the
/// current struct_size (a caller compiled against this header; NULL options
/// or an older struct get only the first four fields written).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct horecon_cg_info {
    pub iterations: i32,
    /// 1 when stopped by the tolerance or the discrepancy rule.
    pub converged: i32,
    pub rel_residual: f64,
    pub seconds: f64,
    /// HORECON_STOP_TOLERANCE (1: the tolerance, or the rounding level of the
    /// plan's arithmetic, 16 units of roundoff, which also ends a solve with
    /// tolerance 0), _MAX_ITERATIONS (2), _DISCREPANCY (3) or _BREAKDOWN (4:
    /// pᴴAp ≤ 0, no further progress possible).
    pub stop_reason: i32,
    /// ‖W^{1/2}(Eρ − d)‖ of the result with the discrepancy rule on, else −1.
    pub data_residual: f64,
}

fn default_options() -> horecon_options {
    let d = Options::default();
    horecon_options {
        struct_size: std::mem::size_of::<horecon_options>() as u32,
        backend: d.backend as i32,
        device: d.device,
        num_devices: d.num_devices,
        num_threads: d.num_threads as i32,
        precision: d.precision as i32,
        verbosity: d.verbosity,
    }
}

fn default_cg_options() -> horecon_cg_options {
    horecon_cg_options {
        struct_size: std::mem::size_of::<horecon_cg_options>() as u32,
        max_iterations: 50,
        tolerance: 1e-6,
        regularizer: HORECON_REG_NONE,
        lambda: 0.0,
        reweightings: 5,
        epsilon: 1e-3,
        sigma: 1.0,
        sample_weights: std::ptr::null(),
        fd_weights: std::ptr::null(),
        warm_start: 0,
        progress: None,
        progress_user: std::ptr::null_mut(),
        neighbours: 6,
        preconditioner: HORECON_PRECONDITIONER_NONE,
        discrepancy_tau: 0.0,
        noise_sigma: 1.0,
    }
}

/// sizeof(horecon_cg_options) of older headers (before `neighbours`, before
/// `preconditioner`): such callers get the defaults of the newer fields.
const CG_OPTIONS_OLDER_SIZES: [usize; 2] = [
    std::mem::offset_of!(horecon_cg_options, neighbours),
    calib::CG_OPTIONS_SIZE_V2,
];

fn check_struct_size(argument: &str, got: u32, expected: usize) -> Result<()> {
    if got as usize != expected {
        return Err(Error::invalid(format!(
            "{argument}->struct_size is {got}, expected {expected}: initialise it with its horecon_default_* function"
        )));
    }
    Ok(())
}

fn options_from_c(o: &horecon_options) -> Result<Options> {
    check_struct_size(
        "opts",
        o.struct_size,
        std::mem::size_of::<horecon_options>(),
    )?;
    let backend = BackendKind::from_code(o.backend).ok_or_else(|| {
        Error::invalid(format!(
            "opts->backend must be 0 (auto), 1 (cpu) or 2 (cuda), got {}",
            o.backend
        ))
    })?;
    let precision = Precision::from_code(o.precision).ok_or_else(|| {
        Error::invalid(format!(
            "opts->precision must be 0 (accurate), 1 (fast) or 2 (double), got {}",
            o.precision
        ))
    })?;
    if o.num_threads < 0 {
        return Err(Error::invalid(format!(
            "opts->num_threads must be >= 0, got {}",
            o.num_threads
        )));
    }
    Ok(Options {
        backend,
        device: o.device,
        num_devices: o.num_devices,
        num_threads: o.num_threads as usize,
        precision,
        verbosity: o.verbosity,
    })
}

/// A non-null pointer or `NullPointer` naming the argument.
fn non_null<T>(argument: &str, p: *const T) -> Result<*const T> {
    if p.is_null() {
        Err(Error::null(argument))
    } else {
        Ok(p)
    }
}

/// Copies `len` elements from C memory (so outputs may alias inputs).
unsafe fn read<T: Copy + Send + Sync>(argument: &str, p: *const T, len: usize) -> Result<Vec<T>> {
    let p = non_null(argument, p)?;
    let mut out = crate::error::try_vec(len, std::mem::zeroed::<T>(), argument)?;
    std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), len);
    Ok(out)
}

// horecon_c32 and Complex32 are both #[repr(C)] { re: f32, im: f32 }.
const _: () = assert!(
    std::mem::size_of::<horecon_c32>() == std::mem::size_of::<Complex32>()
        && std::mem::align_of::<horecon_c32>() == std::mem::align_of::<Complex32>()
);

/// A pointer aligned to a float, else `InvalidArgument` naming the argument.
fn aligned<T>(argument: &str, p: *const T) -> Result<()> {
    if (p as usize) % std::mem::align_of::<Complex32>() != 0 {
        return Err(Error::invalid(format!(
            "{argument} ({p:?}) is not aligned to 4 bytes (a float)"
        )));
    }
    Ok(())
}

/// `len` values of C memory read in place for the duration of a call (the
/// operators' inputs: no copy of a data vector per call). Outputs are
/// written only after the call succeeded, so they may still alias inputs.
/// A pointer not aligned to a float is `InvalidArgument` naming the argument.
pub(super) unsafe fn borrow_c32<'a>(
    argument: &str,
    p: *const horecon_c32,
    len: usize,
) -> Result<&'a [Complex32]> {
    let p = non_null(argument, p)?;
    aligned(argument, p)?;
    if len == 0 {
        return Ok(&[]);
    }
    Ok(std::slice::from_raw_parts(p.cast::<Complex32>(), len))
}

/// An operator's output array, checked (not NULL, aligned to a float)
/// before anything is computed.
pub(super) fn output_c32(argument: &str, p: *mut horecon_c32) -> Result<*mut horecon_c32> {
    non_null(argument, p)?;
    aligned(argument, p)?;
    Ok(p)
}

/// The zeroed buffer an operator writes its result into, made on the plan's
/// threads (a 28 MB data vector: its pages are touched in parallel).
pub(super) fn output_buffer(plan: &Plan, len: usize, what: &str) -> Result<Vec<Complex32>> {
    plan.on_pool(|| crate::error::try_vec(len, Complex32::default(), what))
}

/// Writes an operator's result to C memory `out` (checked by [`output_c32`])
/// on the plan's threads, once everything succeeded.
pub(super) unsafe fn write_output(plan: &Plan, out: *mut horecon_c32, values: &[Complex32]) {
    let out = std::slice::from_raw_parts_mut(out.cast::<Complex32>(), values.len());
    plan.on_pool(|| crate::call_pool::copy(values, out));
}

/// Copies `len` values from C memory (so outputs may alias inputs).
unsafe fn read_c32(argument: &str, p: *const horecon_c32, len: usize) -> Result<Vec<Complex32>> {
    crate::error::try_copy(borrow_c32(argument, p, len)?, argument)
}

/// Writes results to C memory (only called once everything succeeded).
unsafe fn write_c32(out: *mut horecon_c32, values: &[Complex32]) {
    std::ptr::copy_nonoverlapping(values.as_ptr().cast::<horecon_c32>(), out, values.len());
}

unsafe fn plan_ref<'a>(p: *const horecon_plan) -> Result<&'a Plan> {
    Ok(&(*non_null("plan", p)?).plan)
}

unsafe fn plan_mut<'a>(p: *mut horecon_plan) -> Result<&'a mut Plan> {
    if p.is_null() {
        return Err(Error::null("plan"));
    }
    Ok(&mut (*p).plan)
}

/// Fills `opts` with the defaults (AUTO backend, accurate precision, all cores).
#[no_mangle]
pub unsafe extern "C" fn horecon_default_options(opts: *mut horecon_options) {
    guard_value((), || {
        if !opts.is_null() {
            *opts = default_options();
        }
    })
}

/// Fills `o` with the CG defaults (50 iterations, tolerance 1e-6, no
/// regularizer): sizeof(horecon_cg_options) of THIS header's struct. The
/// struct grows at its end between versions, so a program compiled against an
/// older header must not call the function directly: the header's trailer
/// defines `horecon_default_cg_options(o)` as
/// `horecon_init_cg_options((o), sizeof *(o))`, which every C/C++ caller
/// compiled against this header uses.
#[no_mangle]
pub unsafe extern "C" fn horecon_default_cg_options(o: *mut horecon_cg_options) {
    guard_value((), || {
        if !o.is_null() {
            *o = default_cg_options();
        }
    })
}

/// Fills the `size` bytes of the caller's `*o` with the CG defaults and sets
/// o->struct_size = size: `size` = sizeof(horecon_cg_options) of the header
/// the caller was compiled against (this one's, or an older one's; an older
/// struct gets only its own fields). Any other size is INVALID_ARGUMENT and
/// writes nothing.
#[no_mangle]
pub unsafe extern "C" fn horecon_init_cg_options(
    o: *mut horecon_cg_options,
    size: usize,
) -> horecon_status {
    guard("horecon_init_cg_options", || {
        non_null("o", o)?;
        let current = std::mem::size_of::<horecon_cg_options>();
        if size != current && !CG_OPTIONS_OLDER_SIZES.contains(&size) {
            return Err(Error::invalid(format!(
                "size is {size}, expected sizeof(horecon_cg_options) = {current} (or an older \
                 header's {CG_OPTIONS_OLDER_SIZES:?})"
            )));
        }
        let mut defaults = default_cg_options();
        defaults.struct_size = size as u32;
        std::ptr::copy_nonoverlapping(
            std::ptr::addr_of!(defaults) as *const u8,
            o as *mut u8,
            if size == current {
                current
            } else {
                calib::cg_options_bytes(size)
            },
        );
        Ok(())
    })
}

/// Creates a plan for an nx×ny×nz image (N = nx·ny·nz voxels, voxel
/// n = ix + nx·(iy + ny·iz)), `ncoils` coils and `nsamples` samples per coil.
/// `opts` NULL means defaults. On success *plan_out holds the plan.
#[no_mangle]
pub unsafe extern "C" fn horecon_plan_create(
    opts: *const horecon_options,
    nx: i64,
    ny: i64,
    nz: i64,
    ncoils: i64,
    nsamples: i64,
    plan_out: *mut *mut horecon_plan,
) -> horecon_status {
    guard("horecon_plan_create", || {
        non_null("plan_out", plan_out)?;
        let options = if opts.is_null() {
            Options::default()
        } else {
            // As in horecon_cg: check struct_size before the struct is read.
            check_struct_size(
                "opts",
                std::ptr::addr_of!((*opts).struct_size).read(),
                std::mem::size_of::<horecon_options>(),
            )?;
            options_from_c(&*opts)?
        };
        let plan = Plan::new(options, nx, ny, nz, ncoils, nsamples)?;
        let control = plan.control().clone();
        *plan_out = Box::into_raw(Box::new(horecon_plan { plan, control }));
        Ok(())
    })
}

/// Destroys a plan; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn horecon_plan_destroy(plan: *mut horecon_plan) -> horecon_status {
    guard("horecon_plan_destroy", || {
        if !plan.is_null() {
            drop(Box::from_raw(plan));
        }
        Ok(())
    })
}

/// Voxel positions, N×3 in metres (all x, then all y, then all z).
#[no_mangle]
pub unsafe extern "C" fn horecon_set_positions(
    plan: *mut horecon_plan,
    positions: *const f64,
) -> horecon_status {
    guard("horecon_set_positions", || {
        let p = plan_mut(plan)?;
        let v = read("positions", positions, 3 * p.sizes().voxels)?;
        p.set_positions(&v)
    })
}

/// Grid positions: x_i = center_x + (i − ⌊nx/2⌋)·fov_x/nx, likewise y and z.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_grid_positions(
    plan: *mut horecon_plan,
    fov: *const f64,
    center: *const f64,
) -> horecon_status {
    guard("horecon_set_grid_positions", || {
        let p = plan_mut(plan)?;
        let fov = read("fov", fov, 3)?;
        let center = read("center", center, 3)?;
        p.set_grid_positions([fov[0], fov[1], fov[2]], [center[0], center[1], center[2]])
    })
}

/// Built-in real solid harmonics (nterms 1, 4, 9, 16) with M×nterms
/// coefficients in rad/m^order. Needs positions.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_solid_harmonics(
    plan: *mut horecon_plan,
    nterms: i32,
    coefficients: *const f64,
) -> horecon_status {
    guard("horecon_set_solid_harmonics", || {
        let p = plan_mut(plan)?;
        if ![1, 4, 9, 16].contains(&nterms) {
            return Err(Error::invalid(format!(
                "nterms must be 1, 4, 9 or 16, got {nterms}"
            )));
        }
        let c = read(
            "coefficients",
            coefficients,
            nterms as usize * p.sizes().samples,
        )?;
        p.set_solid_harmonics(nterms, &c)
    })
}

/// A user basis h_b(r_n), N×nterms, with M×nterms coefficients.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_basis(
    plan: *mut horecon_plan,
    nterms: i32,
    basis: *const f64,
    coefficients: *const f64,
) -> horecon_status {
    guard("horecon_set_basis", || {
        let p = plan_mut(plan)?;
        if !(1..=4096).contains(&nterms) {
            return Err(Error::invalid(format!(
                "nterms must be 1..4096, got {nterms}"
            )));
        }
        let s = p.sizes();
        let h = read("basis", basis, nterms as usize * s.voxels)?;
        let c = read("coefficients", coefficients, nterms as usize * s.samples)?;
        p.set_basis(nterms, &h, &c)
    })
}

/// A k-space trajectory k (M×ndims, rad/m): B = ndims, h = (x, y, z). Needs positions.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_trajectory(
    plan: *mut horecon_plan,
    ndims: i32,
    k: *const f64,
) -> horecon_status {
    guard("horecon_set_trajectory", || {
        let p = plan_mut(plan)?;
        if !(1..=3).contains(&ndims) {
            return Err(Error::invalid(format!(
                "ndims must be 1, 2 or 3, got {ndims}"
            )));
        }
        let k = read("k", k, ndims as usize * p.sizes().samples)?;
        p.set_trajectory(ndims, &k)
    })
}

/// Off-resonance ω (N, rad/s) and sample times (M, s); omega NULL clears it
/// (times is then ignored).
#[no_mangle]
pub unsafe extern "C" fn horecon_set_off_resonance(
    plan: *mut horecon_plan,
    omega: *const f64,
    times: *const f64,
) -> horecon_status {
    guard("horecon_set_off_resonance", || {
        let p = plan_mut(plan)?;
        if omega.is_null() {
            return p.set_off_resonance(None);
        }
        let s = p.sizes();
        let w = read("omega", omega, s.voxels)?;
        let t = read("times", times, s.samples)?;
        p.set_off_resonance(Some((&w, &t)))
    })
}

/// Coil sensitivities S (N×L complex); NULL means S ≡ 1 and needs L = 1.
#[no_mangle]
pub unsafe extern "C" fn horecon_set_sensitivities(
    plan: *mut horecon_plan,
    s: *const horecon_c32,
) -> horecon_status {
    guard("horecon_set_sensitivities", || {
        let p = plan_mut(plan)?;
        if s.is_null() {
            return p.set_sensitivities(None);
        }
        let sz = p.sizes();
        let v = read_c32("s", s, sz.voxels * sz.coils)?;
        p.set_sensitivities(Some(&v))
    })
}

/// d = E ρ: image N → data M×L. Safe to call concurrently on one plan.
/// A result beyond float32's range (finite inputs whose sums exceed 3.4e38)
/// is HORECON_ERR_NOT_FINITE, the output left untouched.
#[no_mangle]
pub unsafe extern "C" fn horecon_forward(
    plan: *const horecon_plan,
    image: *const horecon_c32,
    data: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_forward", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let x = borrow_c32("image", image, s.voxels)?;
        let data = output_c32("data", data)?;
        let mut d = output_buffer(p, s.samples * s.coils, "data")?;
        p.forward(x, &mut d)?;
        write_output(p, data, &d);
        Ok(())
    })
}

/// ρ = Eᴴ d: data M×L → image N. Safe to call concurrently on one plan.
/// A result beyond float32's range (finite inputs whose sums exceed 3.4e38)
/// is HORECON_ERR_NOT_FINITE, the output left untouched.
#[no_mangle]
pub unsafe extern "C" fn horecon_adjoint(
    plan: *const horecon_plan,
    data: *const horecon_c32,
    image: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_adjoint", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let d = borrow_c32("data", data, s.samples * s.coils)?;
        let image = output_c32("image", image)?;
        let mut x = output_buffer(p, s.voxels, "image")?;
        p.adjoint(d, &mut x)?;
        write_output(p, image, &x);
        Ok(())
    })
}

/// out = Eᴴ E ρ (N → N). Safe to call concurrently on one plan.
/// A result beyond float32's range (finite inputs whose sums exceed 3.4e38)
/// is HORECON_ERR_NOT_FINITE, the output left untouched.
#[no_mangle]
pub unsafe extern "C" fn horecon_normal(
    plan: *const horecon_plan,
    image: *const horecon_c32,
    out: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_normal", || {
        let p = plan_ref(plan)?;
        let n = p.sizes().voxels;
        let x = borrow_c32("image", image, n)?;
        let out = output_c32("out", out)?;
        let mut y = output_buffer(p, n, "out")?;
        p.normal(x, &mut y)?;
        write_output(p, out, &y);
        Ok(())
    })
}

/// Conjugate gradient on (EᴴWE + λR)ρ = EᴴWd. `image` (N) is the start when
/// `warm_start` is set and receives the solution. On any error, cancellation
/// included, `image` is left untouched (a solution beyond float32's range is
/// HORECON_ERR_NOT_FINITE). `o` NULL = defaults; `info` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_cg(
    plan: *const horecon_plan,
    data: *const horecon_c32,
    o: *const horecon_cg_options,
    image: *mut horecon_c32,
    info: *mut horecon_cg_info,
) -> horecon_status {
    guard("horecon_cg", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let c = if o.is_null() {
            default_cg_options()
        } else {
            // Only `struct_size` may be read before it is checked: a caller
            // built against a smaller (older) struct owns no more bytes.
            let size = std::ptr::addr_of!((*o).struct_size).read();
            if CG_OPTIONS_OLDER_SIZES.contains(&(size as usize)) {
                // An older caller owns only the fields of its struct.
                let mut c = default_cg_options();
                std::ptr::copy_nonoverlapping(
                    o as *const u8,
                    std::ptr::addr_of_mut!(c) as *mut u8,
                    calib::cg_options_bytes(size as usize),
                );
                c.struct_size = std::mem::size_of::<horecon_cg_options>() as u32;
                c
            } else {
                check_struct_size("o", size, std::mem::size_of::<horecon_cg_options>())?;
                *o
            }
        };
        let regularizer = Regularizer::from_code(c.regularizer)?;
        if c.max_iterations < 0 {
            return Err(Error::invalid(format!(
                "o->max_iterations must be >= 0, got {}",
                c.max_iterations
            )));
        }
        let d = borrow_c32("data", data, s.samples * s.coils)?;
        let image = output_c32("image", image)?;
        let mut x = if c.warm_start != 0 {
            read_c32("image", image, s.voxels)?
        } else {
            crate::error::try_vec(s.voxels, Complex32::default(), "image")?
        };
        let weights = if c.sample_weights.is_null() {
            None
        } else {
            Some(read("o->sample_weights", c.sample_weights, s.samples)?)
        };
        let neighbourhood = Neighbourhood::from_code(c.neighbours)
            .map_err(|e| Error::invalid(format!("o->{}", e.message)))?;
        let fd_weights = if c.fd_weights.is_null() {
            None
        } else {
            Some(read(
                "o->fd_weights",
                c.fd_weights,
                s.voxels * fd_directions(s, neighbourhood),
            )?)
        };
        if c.reweightings < 1
            && matches!(
                regularizer,
                Regularizer::TotalVariation | Regularizer::Laplace
            )
        {
            return Err(Error::invalid(format!(
                "o->reweightings must be >= 1 for total variation and Laplace, got {}",
                c.reweightings
            )));
        }
        let callback = c.progress;
        let user = c.progress_user as usize;
        let progress = move |iteration: usize, rel: f64| -> bool {
            // SAFETY: the caller promises `progress` is callable with its `progress_user`.
            callback.is_some_and(|f| unsafe { f(user as *mut c_void, iteration as i32, rel) != 0 })
        };
        let options = CgOptions {
            max_iterations: c.max_iterations as usize,
            tolerance: c.tolerance,
            regularizer,
            lambda: c.lambda,
            reweightings: c.reweightings.max(0) as usize,
            epsilon: c.epsilon,
            sigma: c.sigma,
            sample_weights: weights.as_deref(),
            fd_weights: fd_weights.as_deref(),
            neighbourhood,
            warm_start: c.warm_start != 0,
            progress: if callback.is_some() {
                Some(&progress)
            } else {
                None
            },
            preconditioner: crate::solver::PreconditionerKind::from_code(c.preconditioner)
                .map_err(|e| Error::invalid(format!("o->{}", e.message)))?,
            discrepancy_tau: c.discrepancy_tau,
            noise_sigma: c.noise_sigma,
        };
        let result = p.cg(d, &options, &mut x)?;
        write_output(p, image, &x);
        if !info.is_null() {
            let current = !o.is_null()
                && std::ptr::addr_of!((*o).struct_size).read() as usize
                    == std::mem::size_of::<horecon_cg_options>();
            calib::write_cg_info(info, &result, current);
        }
        Ok(())
    })
}

/// The message of the last failing call on this thread ("" if none). Valid
/// until the next horecon call on this thread.
#[no_mangle]
pub extern "C" fn horecon_last_error() -> *const c_char {
    guard_value(c"".as_ptr(), guard::last_error_ptr)
}

/// A static description of a status code.
#[no_mangle]
pub extern "C" fn horecon_status_string(s: horecon_status) -> *const c_char {
    use crate::error::Status::*;
    guard_value(
        c"unknown status".as_ptr(),
        || match crate::error::Status::from_code(s) {
            Some(Ok) => c"HORECON_OK: success".as_ptr(),
            Some(NullPointer) => c"HORECON_ERR_NULL_POINTER: a required pointer is NULL".as_ptr(),
            Some(InvalidArgument) => {
                c"HORECON_ERR_INVALID_ARGUMENT: bad count, size, enum or option value".as_ptr()
            }
            Some(SizeMismatch) => {
                c"HORECON_ERR_SIZE_MISMATCH: array sizes disagree with the plan".as_ptr()
            }
            Some(NotFinite) => c"HORECON_ERR_NOT_FINITE: NaN or Inf in an input array".as_ptr(),
            Some(IncompletePlan) => {
                c"HORECON_ERR_INCOMPLETE_PLAN: positions and phase model must be set first".as_ptr()
            }
            Some(OutOfMemory) => {
                c"HORECON_ERR_OUT_OF_MEMORY: host or device allocation failed".as_ptr()
            }
            Some(BackendUnavailable) => {
                c"HORECON_ERR_BACKEND_UNAVAILABLE: CUDA requested but no driver, GPU or NVRTC"
                    .as_ptr()
            }
            Some(Backend) => c"HORECON_ERR_BACKEND: a CUDA, NVRTC or cuFFT call failed".as_ptr(),
            Some(Cancelled) => {
                c"HORECON_ERR_CANCELLED: the progress callback asked to stop".as_ptr()
            }
            Some(Internal) => {
                c"HORECON_ERR_INTERNAL: internal error (a bug, please report it)".as_ptr()
            }
            None => c"unknown status".as_ptr(),
        },
    )
}

/// The library version, "MAJOR.MINOR.PATCH".
#[no_mangle]
pub extern "C" fn horecon_version() -> *const c_char {
    static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr() as *const c_char
}

/// Number of usable CUDA devices; 0 without driver or GPU (never an error).
#[no_mangle]
pub unsafe extern "C" fn horecon_cuda_device_count(count: *mut i32) -> horecon_status {
    guard("horecon_cuda_device_count", || {
        non_null("count", count)?;
        *count = crate::backend::cuda_device_count() as i32;
        Ok(())
    })
}

/// The backend the plan runs on: HORECON_BACKEND_CPU or HORECON_BACKEND_CUDA (never AUTO).
#[no_mangle]
pub unsafe extern "C" fn horecon_plan_backend(
    plan: *const horecon_plan,
    backend: *mut i32,
) -> horecon_status {
    guard("horecon_plan_backend", || {
        let p = plan_ref(plan)?;
        non_null("backend", backend)?;
        *backend = p.backend() as i32;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;

    #[test]
    fn inputs_are_read_in_place_from_aligned_memory_only() {
        let values = [
            horecon_c32 { re: 1.0, im: -2.0 },
            horecon_c32 { re: 3.0, im: 4.0 },
        ];
        // SAFETY: two valid values.
        let read = unsafe { borrow_c32("data", values.as_ptr(), 2) }.unwrap();
        assert_eq!(read, &[Complex32::new(1.0, -2.0), Complex32::new(3.0, 4.0)]);
        assert_eq!(read.as_ptr() as usize, values.as_ptr() as usize);
        // SAFETY: the pointer is rejected before it is read.
        let e = unsafe { borrow_c32("data", std::ptr::null(), 2) }.unwrap_err();
        assert_eq!(e.status, Status::NullPointer);
        let bytes = [0u8; 24];
        let odd = bytes
            .as_ptr()
            .wrapping_add(1 + (4 - bytes.as_ptr() as usize % 4) % 4);
        // SAFETY: the pointer is rejected before it is read.
        let e = unsafe { borrow_c32("data", odd.cast::<horecon_c32>(), 2) }.unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert!(
            e.message.contains("data") && e.message.contains("aligned"),
            "{}",
            e.message
        );
        let copy = unsafe { read_c32("image", values.as_ptr(), 2) }.unwrap();
        assert_eq!(copy, read);
    }
}
