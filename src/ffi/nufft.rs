//! The C API of the standalone non-uniform FFT (issue 14).

use super::{
    check_struct_size, guard, guard_value, horecon_c32, horecon_options, horecon_status, non_null,
    options_from_c, read,
};
use crate::error::{try_vec, Error, Result};
use crate::nufft::{Nufft, NufftType};
use crate::plan::Options;
use num_complex::{Complex32, Complex64};

/// A double-precision complex number: the layout of C99 `double _Complex`,
/// numpy `complex128` and MATLAB's interleaved double.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct horecon_c64 {
    pub re: f64,
    pub im: f64,
}

/// An opaque non-uniform FFT plan (horecon_nufft_create).
pub struct horecon_nufft {
    nufft: Nufft,
}

unsafe fn nufft_ref<'a>(p: *const horecon_nufft) -> Result<&'a Nufft> {
    Ok(&(*non_null("nufft", p)?).nufft)
}

/// Reads `len` values from C memory; NULL is allowed when `len` is 0.
unsafe fn read_or_empty<T: Copy + Send + Sync>(
    argument: &str,
    p: *const T,
    len: usize,
) -> Result<Vec<T>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    read(argument, p, len)
}

/// The C layouts of the data: horecon_c32 and horecon_c64.
trait CData: Copy + Default + Send + Sync {
    type Value: Copy + Default + Send + Sync;
    fn value(self) -> Self::Value;
    fn from_value(v: Self::Value) -> Self;
}

impl CData for horecon_c32 {
    type Value = Complex32;
    fn value(self) -> Complex32 {
        Complex32::new(self.re, self.im)
    }
    fn from_value(v: Complex32) -> Self {
        horecon_c32 { re: v.re, im: v.im }
    }
}

impl CData for horecon_c64 {
    type Value = Complex64;
    fn value(self) -> Complex64 {
        Complex64::new(self.re, self.im)
    }
    fn from_value(v: Complex64) -> Self {
        horecon_c64 { re: v.re, im: v.im }
    }
}

/// The body of both execute functions: the input array copied in, the
/// transform computed, the output written only on success.
unsafe fn execute<D: CData>(
    nufft: *mut horecon_nufft,
    nonuniform: *mut D,
    grid: *mut D,
    run: impl FnOnce(&Nufft, &mut [D::Value], &mut [D::Value]) -> Result<()>,
) -> Result<()> {
    let plan = nufft_ref(nufft)?;
    let (m, n) = plan.lengths();
    let to_values = |v: Vec<D>| v.into_iter().map(D::value).collect::<Vec<_>>();
    let (mut c, mut f) = match plan.spec().kind {
        NufftType::One => {
            let c = to_values(read_or_empty("nonuniform", nonuniform, m)?);
            if n > 0 {
                non_null("grid", grid)?;
            }
            (c, try_vec(n, D::Value::default(), "grid")?)
        }
        NufftType::Two => {
            let f = to_values(read_or_empty("grid", grid, n)?);
            if m > 0 {
                non_null("nonuniform", nonuniform)?;
            }
            (try_vec(m, D::Value::default(), "nonuniform")?, f)
        }
    };
    run(plan, &mut c, &mut f)?;
    let (out, values) = match plan.spec().kind {
        NufftType::One => (grid, f),
        NufftType::Two => (nonuniform, c),
    };
    if !values.is_empty() {
        let dst = std::slice::from_raw_parts_mut(out, values.len());
        for (d, v) in dst.iter_mut().zip(values) {
            *d = D::from_value(v);
        }
    }
    Ok(())
}

/// Creates a non-uniform FFT plan (FINUFFT's conventions) in *out:
///
/// type 1 (non-uniform → grid): grid[k] = Σ_j c_j·exp(sign·i k·x_j);
/// type 2 (grid → non-uniform): c_j = Σ_k grid[k]·exp(sign·i k·x_j).
///
/// ndims 1, 2 or 3; modes[ndims] ≥ 1 each; the grid of one transform holds
/// modes[0]·modes[1]·… values, first axis fastest, mode k = i − ⌊n/2⌋ at
/// index i of an axis of n modes (−n/2 … n/2 − 1 for even n). npoints ≥ 0
/// points, `points` npoints×ndims (all x, then all y, then all z), in
/// radians: any finite value, used modulo 2π (FINUFFT's range [−3π, 3π)
/// is exact to rounding; larger values lose accuracy in proportion);
/// NULL only with npoints = 0. sign +1 or −1. ntransforms ≥ 1 vectors per
/// execute, stored one after another, share the points (coils, time
/// segments). Type 1 with sign s and type 2 with sign −s are adjoint.
///
/// tolerance: the relative l2 error promised against the exact sums, in
/// [1e-6, 1e-1] in single precision, [1e-12, 1e-1] in double; the kernel
/// width is chosen so that the error stays at or below it for any points
/// (one or two cells wider than FINUFFT's rule, which gives about the
/// tolerance, not below it). Single-precision plans asked for less than
/// 1e-5 compute in float64 on the CPU; on CUDA they stay float32, and at
/// 1e-6 itself float32 rounding is the whole error and as large as the
/// request (measured 3.8e-7 to 1.1e-6 in 3D with most points in one cell;
/// DOUBLE precision meets 1e-6 strictly). The upsampling (2 or 1.25) is
/// chosen by speed.
///
/// options (NULL = defaults): precision HORECON_PRECISION_DOUBLE computes
/// in float64, ACCURATE and FAST in float32; num_threads CPU threads (0 =
/// all); backend AUTO (CUDA when usable, else the CPU), CPU, or CUDA
/// (device `options->device`; HORECON_ERR_BACKEND_UNAVAILABLE without a
/// usable GPU, driver, NVRTC or cuFFT). With CUDA, num_devices = D > 1
/// shares the transforms out over devices device … device+D−1 (each
/// transform on one GPU, as it would run alone; at most one device per
/// transform; more devices than exist: BACKEND_UNAVAILABLE).
///
/// The points are sorted once here; execute reuses the plan. Errors:
/// NULL_POINTER (out, modes, points with npoints > 0), INVALID_ARGUMENT
/// (type, ndims, a mode < 1 or a grid too large, npoints < 0, sign,
/// tolerance out of range, ntransforms < 1, options), NOT_FINITE (a point),
/// OUT_OF_MEMORY, BACKEND_UNAVAILABLE. *out is written only on success.
#[no_mangle]
pub unsafe extern "C" fn horecon_nufft_create(
    out: *mut *mut horecon_nufft,
    r#type: i32,
    ndims: i32,
    modes: *const i64,
    npoints: i64,
    points: *const f64,
    sign: i32,
    tolerance: f64,
    ntransforms: i32,
    options: *const horecon_options,
) -> horecon_status {
    guard("horecon_nufft_create", || {
        non_null("out", out)?;
        let kind = NufftType::from_code(r#type)?;
        if !(1..=3).contains(&ndims) {
            return Err(Error::invalid(format!(
                "ndims must be 1, 2 or 3, got {ndims}"
            )));
        }
        let modes = read("modes", modes, ndims as usize)?;
        let count = usize::try_from(npoints)
            .map_err(|_| Error::invalid(format!("npoints must be >= 0, got {npoints}")))?;
        let len = count
            .checked_mul(ndims as usize)
            .filter(|&l| l <= isize::MAX as usize / 8)
            .ok_or_else(|| {
                Error::invalid(format!("npoints = {npoints}: npoints x ndims is too large"))
            })?;
        let points = read_or_empty("points", points, len)?;
        let options = if options.is_null() {
            Options::default()
        } else {
            check_struct_size(
                "options",
                std::ptr::addr_of!((*options).struct_size).read(),
                std::mem::size_of::<horecon_options>(),
            )?;
            options_from_c(&*options)
                .map_err(|e| Error::new(e.status, e.message.replacen("opts", "options", 1)))?
        };
        let nufft = Nufft::new(
            kind,
            ndims,
            &modes,
            npoints,
            &points,
            sign,
            tolerance,
            ntransforms,
            &options,
        )?;
        *out = Box::into_raw(Box::new(horecon_nufft { nufft }));
        Ok(())
    })
}

/// Runs the plan's ntransforms transforms. Type 1 reads `nonuniform`
/// (ntransforms×npoints) and writes `grid` (ntransforms×Π modes); type 2
/// reads `grid` and writes `nonuniform`. Single-precision data (in any
/// precision; DOUBLE plans round their float64 results to float32: use
/// horecon_nufft_execute_c64 to keep them). Errors: NULL_POINTER (nufft, an
/// array that is not empty), NOT_FINITE (NaN or Inf in the input, or a
/// result beyond the arithmetic's range: finite inputs near 3.4e38 in
/// float32), OUT_OF_MEMORY. The output is written only on success; the input is not
/// modified. One plan may execute from several threads at once.
#[no_mangle]
pub unsafe extern "C" fn horecon_nufft_execute(
    nufft: *mut horecon_nufft,
    nonuniform: *mut horecon_c32,
    grid: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_nufft_execute", || {
        execute(nufft, nonuniform, grid, |plan, c, f| plan.execute(c, f))
    })
}

/// As horecon_nufft_execute for double-precision data (horecon_c64: C99
/// double _Complex, numpy complex128). The arithmetic is still the plan's:
/// float64 for HORECON_PRECISION_DOUBLE plans (tolerances down to 1e-12),
/// float32 otherwise.
#[no_mangle]
pub unsafe extern "C" fn horecon_nufft_execute_c64(
    nufft: *mut horecon_nufft,
    nonuniform: *mut horecon_c64,
    grid: *mut horecon_c64,
) -> horecon_status {
    guard("horecon_nufft_execute_c64", || {
        execute(nufft, nonuniform, grid, |plan, c, f| plan.execute_c64(c, f))
    })
}

/// Destroys a plan; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn horecon_nufft_destroy(nufft: *mut horecon_nufft) {
    guard_value((), || {
        if !nufft.is_null() {
            drop(Box::from_raw(nufft));
        }
    })
}
