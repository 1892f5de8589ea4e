//! The C API of the calibration chain (issue 12): noise whitening, coil
//! sensitivities (ESPIRiT, Walsh's adaptive combine), B0 maps from
//! multi-echo data, delay estimation, and the codes of preconditioned CG
//! and its stopping rule.

use super::{
    guard, horecon_c32, horecon_cg_info, horecon_cg_options, horecon_plan, horecon_status,
    non_null, plan_ref, read, read_c32, write_c32,
};
use crate::calib;
use crate::error::{Error, Result};
use crate::plan::CgInfo;
use num_complex::{Complex32, Complex64};

pub const HORECON_PRECONDITIONER_NONE: i32 = 0;
pub const HORECON_PRECONDITIONER_DIAGONAL: i32 = 1;
pub const HORECON_PRECONDITIONER_CIRCULANT: i32 = 2;

pub const HORECON_STOP_TOLERANCE: i32 = 1;
pub const HORECON_STOP_MAX_ITERATIONS: i32 = 2;
pub const HORECON_STOP_DISCREPANCY: i32 = 3;
pub const HORECON_STOP_BREAKDOWN: i32 = 4;

/// sizeof(horecon_cg_options) of the header before `preconditioner`
/// (ending with `neighbours`, padded to the struct's alignment).
pub(super) const CG_OPTIONS_SIZE_V2: usize = {
    let end = std::mem::offset_of!(horecon_cg_options, neighbours) + 4;
    let align = std::mem::align_of::<horecon_cg_options>();
    end.div_ceil(align) * align
};

/// Bytes of an older caller's struct that are fields (its padding is not copied).
pub(super) fn cg_options_bytes(size: usize) -> usize {
    size.min(std::mem::offset_of!(horecon_cg_options, preconditioner))
}

/// Writes `info`: every field for a caller of the current header, only the
/// original four otherwise (an older caller's struct is smaller).
pub(super) unsafe fn write_cg_info(info: *mut horecon_cg_info, result: &CgInfo, current: bool) {
    if current {
        *info = horecon_cg_info {
            iterations: result.iterations as i32,
            converged: result.converged as i32,
            rel_residual: result.rel_residual,
            seconds: result.seconds,
            stop_reason: result.stop_reason as i32,
            data_residual: result.data_residual.unwrap_or(-1.0),
        };
    } else {
        std::ptr::addr_of_mut!((*info).iterations).write(result.iterations as i32);
        std::ptr::addr_of_mut!((*info).converged).write(result.converged as i32);
        std::ptr::addr_of_mut!((*info).rel_residual).write(result.rel_residual);
        std::ptr::addr_of_mut!((*info).seconds).write(result.seconds);
    }
}

/// A count given through the C API: 1..2^40.
fn count(argument: &str, value: i64) -> Result<usize> {
    if !(1..=1i64 << 40).contains(&value) {
        return Err(Error::invalid(format!(
            "{argument} must be 1..2^40, got {value}"
        )));
    }
    Ok(value as usize)
}

/// `a`·`b` elements, or InvalidArgument when the product overflows.
fn product(what: &str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .filter(|&v| v <= 1usize << 40)
        .ok_or_else(|| Error::invalid(format!("{what} is too large")))
}

/// The reference grid from C: dims[3], fov[3], center[3] (MODEL.md's grid helper).
unsafe fn reference_grid(
    dims: *const i64,
    fov: *const f64,
    center: *const f64,
) -> Result<calib::reference::ReferenceGrid> {
    let d = read("ref_dims", dims, 3)?;
    let f = read("ref_fov", fov, 3)?;
    let c = read("ref_center", center, 3)?;
    calib::reference::ReferenceGrid::new([d[0], d[1], d[2]], [f[0], f[1], f[2]], [c[0], c[1], c[2]])
}

fn to_c64(values: &[Complex32]) -> Vec<Complex64> {
    values
        .iter()
        .map(|c| Complex64::new(c.re as f64, c.im as f64))
        .collect()
}

fn to_c32(values: &[Complex64]) -> Vec<Complex32> {
    values
        .iter()
        .map(|c| Complex32::new(c.re as f32, c.im as f32))
        .collect()
}

/// Reads an options struct whose first field is `struct_size` (NULL = defaults).
unsafe fn read_options<T: Copy>(argument: &str, o: *const T, defaults: T) -> Result<T> {
    if o.is_null() {
        return Ok(defaults);
    }
    let size = std::ptr::read(o as *const u32);
    if size as usize != std::mem::size_of::<T>() {
        return Err(Error::invalid(format!(
            "{argument}->struct_size is {size}, expected {}: initialise it with its horecon_default_* function",
            std::mem::size_of::<T>()
        )));
    }
    Ok(*o)
}

/// The coil noise covariance Ψ (L×L, column major) from noise-only samples
/// `noise` (nsamples×ncoils, sample fastest, nsamples ≥ ncoils):
/// Ψ_ab = (1/nsamples)·Σ_j n_{j,a}·conj(n_{j,b}) (zero-mean noise).
#[no_mangle]
pub unsafe extern "C" fn horecon_noise_covariance(
    noise: *const horecon_c32,
    nsamples: i64,
    ncoils: i64,
    covariance: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_noise_covariance", || {
        let (m, l) = (count("nsamples", nsamples)?, count("ncoils", ncoils)?);
        let n = read_c32("noise", noise, product("nsamples*ncoils", m, l)?)?;
        non_null("covariance", covariance)?;
        let psi = to_c32(&calib::noise::noise_covariance(&n, l)?);
        // Noise of magnitude ~1e19 and more: Ψ beyond float32's range.
        crate::finite::check_result("covariance", &psi)?;
        write_c32(covariance, &psi);
        Ok(())
    })
}

/// Whitening (Pruessmann et al. 2001): with Ψ = C·Cᴴ (Cholesky), every row
/// x of `values` (npoints×ncoils, point fastest) becomes C⁻¹x, in place. Apply
/// it to the data (M×L) and the sensitivities (N×L) alike: CG on them is the
/// noise-optimal reconstruction, with σ = 1 for the discrepancy rule.
/// `covariance` (L×L) must be Hermitian positive definite (else
/// HORECON_ERR_INVALID_ARGUMENT); a result beyond float32's range is
/// HORECON_ERR_NOT_FINITE; `values` is unchanged on error.
#[no_mangle]
pub unsafe extern "C" fn horecon_whiten(
    covariance: *const horecon_c32,
    ncoils: i64,
    npoints: i64,
    values: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_whiten", || {
        let (l, n) = (count("ncoils", ncoils)?, count("npoints", npoints)?);
        let psi = read_c32("covariance", covariance, product("ncoils^2", l, l)?)?;
        crate::model::check_finite("covariance", &psi)?;
        let mut v = read_c32("values", values, product("npoints*ncoils", n, l)?)?;
        calib::noise::whiten(&to_c64(&psi), l, &mut v)?;
        write_c32(values, &v);
        Ok(())
    })
}

/// Coil images (nx·ny·nz×ncoils) from Cartesian reference k-space of the
/// same size: the exact inverse of y_c(p) = Σ_n m_c(r_n)·exp(+i k_p·r_n) with
/// voxels r at MODEL.md's grid helper (ref_dims, ref_fov, ref_center) and
/// samples at k_a = 2π(p_a − ⌊n_a/2⌋)/fov_a (horecon_set_cartesian's).
#[no_mangle]
pub unsafe extern "C" fn horecon_cartesian_images(
    ref_dims: *const i64,
    ref_fov: *const f64,
    ref_center: *const f64,
    ncoils: i64,
    kspace: *const horecon_c32,
    images: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_cartesian_images", || {
        let grid = reference_grid(ref_dims, ref_fov, ref_center)?;
        let l = count("ncoils", ncoils)?;
        let y = read_c32(
            "kspace",
            kspace,
            product("reference size", grid.voxels(), l)?,
        )?;
        crate::model::check_finite("kspace", &y)?;
        non_null("images", images)?;
        let m = to_c32(&grid.images(&y, l)?);
        crate::finite::check_result("images", &m)?;
        write_c32(images, &m);
        Ok(())
    })
}

/// Settings of horecon_espirit; fill with horecon_default_espirit_options.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct horecon_espirit_options {
    /// = sizeof(horecon_espirit_options).
    pub struct_size: u32,
    /// Kernel width k (2..16) along every axis of more than one voxel (6).
    pub kernel: i32,
    /// Width of the central calibration region per axis (24; clipped to the reference grid).
    pub calibration: i32,
    /// Singular values σ_i ≥ threshold·σ_1 span the signal subspace (0.02).
    pub threshold: f64,
    /// Maps are zero where the largest eigenvalue of G(r) is below crop (0.8).
    pub crop: f64,
}

/// Fills `o` with the ESPIRiT defaults (kernel 6, calibration 24, threshold 0.02, crop 0.8).
#[no_mangle]
pub unsafe extern "C" fn horecon_default_espirit_options(o: *mut horecon_espirit_options) {
    super::guard_value((), || {
        if !o.is_null() {
            *o = default_espirit_options();
        }
    })
}

fn default_espirit_options() -> horecon_espirit_options {
    let d = calib::espirit::EspiritOptions::default();
    horecon_espirit_options {
        struct_size: std::mem::size_of::<horecon_espirit_options>() as u32,
        kernel: d.kernel as i32,
        calibration: d.calibration as i32,
        threshold: d.threshold,
        crop: d.crop,
    }
}

/// ESPIRiT coil sensitivities (Uecker et al. 2014) at the plan's positions:
/// calibration matrix of the central `calibration`^d samples of the Cartesian
/// reference k-space (nx·ny·nz×L, L = the plan's ncoils; grid and k-space as in
/// horecon_cartesian_images), its SVD (faer) with the threshold, the
/// image-space matrices G(r) = Σ_δ K(δ)·exp(+2πi Σ_a δ_a r_a/fov_a) evaluated
/// exactly at the plan's positions (any grid, field of view or centre), and
/// their dominant eigenvectors: `maps` (N×L) with Σ_c|S_c|² = 1, zero where
/// the eigenvalue is below crop, phase fixed by the calibration data's
/// dominant coil combination. `eigenvalues` (N, may be NULL) receives the
/// largest eigenvalue (≈ 1 inside the object). 2D when ref_dims[2] = 1.
/// Errors: a calibration region smaller than the kernel or all zero
/// (HORECON_ERR_INVALID_ARGUMENT), a plan without positions
/// (HORECON_ERR_INCOMPLETE_PLAN).
#[no_mangle]
pub unsafe extern "C" fn horecon_espirit(
    plan: *const horecon_plan,
    ref_dims: *const i64,
    ref_fov: *const f64,
    ref_center: *const f64,
    kspace: *const horecon_c32,
    o: *const horecon_espirit_options,
    maps: *mut horecon_c32,
    eigenvalues: *mut f32,
) -> horecon_status {
    guard("horecon_espirit", || {
        let p = plan_ref(plan)?;
        let grid = reference_grid(ref_dims, ref_fov, ref_center)?;
        let c = read_options("o", o, default_espirit_options())?;
        let s = p.sizes();
        let y = read_c32(
            "kspace",
            kspace,
            product("reference size", grid.voxels(), s.coils)?,
        )?;
        non_null("maps", maps)?;
        let options = calib::espirit::EspiritOptions {
            kernel: usize::try_from(c.kernel).unwrap_or(0),
            calibration: usize::try_from(c.calibration)
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "o->calibration must be >= 1, got {}",
                        c.calibration
                    ))
                })?,
            threshold: c.threshold,
            crop: c.crop,
        };
        let result = p.espirit(&grid, &y, &options)?;
        write_c32(maps, &result.maps);
        if !eigenvalues.is_null() {
            std::ptr::copy_nonoverlapping(result.eigenvalues.as_ptr(), eigenvalues, s.voxels);
        }
        Ok(())
    })
}

/// Adaptive-combine coil sensitivities (Walsh et al. 2000) at the plan's
/// positions from coil images on the reference grid (nx·ny·nz×L, L = the
/// plan's ncoils; e.g. from horecon_cartesian_images): per reference voxel
/// the dominant eigenvector of the signal correlation over a `window`^d box,
/// phase fixed by the dominant coil combination, interpolated trilinearly
/// onto the plan's positions and normalised to Σ_c|S_c|² = 1. `maps` N×L.
#[no_mangle]
pub unsafe extern "C" fn horecon_walsh(
    plan: *const horecon_plan,
    ref_dims: *const i64,
    ref_fov: *const f64,
    ref_center: *const f64,
    images: *const horecon_c32,
    window: i32,
    maps: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_walsh", || {
        let p = plan_ref(plan)?;
        let grid = reference_grid(ref_dims, ref_fov, ref_center)?;
        let s = p.sizes();
        let m = read_c32(
            "images",
            images,
            product("reference size", grid.voxels(), s.coils)?,
        )?;
        non_null("maps", maps)?;
        let window = usize::try_from(window)
            .map_err(|_| Error::invalid(format!("window must be 1..64, got {window}")))?;
        let out = p.walsh(&grid, &m, window)?;
        write_c32(maps, &out);
        Ok(())
    })
}

/// Settings of horecon_b0_map; fill with horecon_default_b0_options.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct horecon_b0_options {
    /// = sizeof(horecon_b0_options).
    pub struct_size: u32,
    /// CG iterations of the smooth fit (2000).
    pub max_iterations: i32,
    /// Mask: combined first-echo magnitude ≥ mask_threshold × its 99th percentile (0.1).
    pub mask_threshold: f64,
    /// μ of the smooth fit Σ_mask w(ω − ω_meas)² + μ·w̄·‖Δω‖² (1; voxel units).
    pub smoothness: f64,
}

fn default_b0_options() -> horecon_b0_options {
    let d = calib::b0::B0Options::default();
    horecon_b0_options {
        struct_size: std::mem::size_of::<horecon_b0_options>() as u32,
        max_iterations: d.max_iterations as i32,
        mask_threshold: d.mask_threshold,
        smoothness: d.smoothness,
    }
}

/// Fills `o` with the B0 defaults (mask 0.1, smoothness 1, 2000 iterations).
#[no_mangle]
pub unsafe extern "C" fn horecon_default_b0_options(o: *mut horecon_b0_options) {
    super::guard_value((), || {
        if !o.is_null() {
            *o = default_b0_options();
        }
    })
}

/// The off-resonance map ω (N, rad/s) at the plan's positions from a
/// multi-echo gradient-echo reference: `kspace` nx·ny·nz×ncoils×nechoes
/// (echo slowest; grid as horecon_cartesian_images), `echo_times` (nechoes ≥ 2,
/// s, strictly increasing). Coil-combined phase differences Σ_c m_{c,e}·conj(m_{c,0}),
/// quality-guided spatial unwrapping of the closest echo pair, unwrapping
/// across echoes, a least-squares slope, a magnitude mask and a regularised
/// smooth fit (second differences) that extends the map beyond the object,
/// interpolated trilinearly onto the plan's positions. Any ncoils.
/// Errors: nechoes < 2, echo times not increasing, all-zero k-space
/// (HORECON_ERR_INVALID_ARGUMENT).
#[no_mangle]
pub unsafe extern "C" fn horecon_b0_map(
    plan: *const horecon_plan,
    ref_dims: *const i64,
    ref_fov: *const f64,
    ref_center: *const f64,
    ncoils: i64,
    nechoes: i32,
    echo_times: *const f64,
    kspace: *const horecon_c32,
    o: *const horecon_b0_options,
    omega: *mut f64,
) -> horecon_status {
    guard("horecon_b0_map", || {
        let p = plan_ref(plan)?;
        let grid = reference_grid(ref_dims, ref_fov, ref_center)?;
        let l = count("ncoils", ncoils)?;
        if nechoes < 2 {
            return Err(Error::invalid(format!(
                "a B0 map needs at least 2 echoes, got nechoes = {nechoes}"
            )));
        }
        let e = nechoes as usize;
        let times = read("echo_times", echo_times, e)?;
        // The echo times before the k-space their count sizes is read.
        calib::b0::check_echo_times(&times)?;
        let per_echo = product("reference size", grid.voxels(), l)?;
        let y = read_c32("kspace", kspace, product("reference size", per_echo, e)?)?;
        let c = read_options("o", o, default_b0_options())?;
        non_null("omega", omega)?;
        let options = calib::b0::B0Options {
            mask_threshold: c.mask_threshold,
            smoothness: c.smoothness,
            max_iterations: usize::try_from(c.max_iterations).map_err(|_| {
                Error::invalid(format!(
                    "o->max_iterations must be >= 0, got {}",
                    c.max_iterations
                ))
            })?,
        };
        let result = p.b0_map(&grid, &y, l, &times, &options)?;
        std::ptr::copy_nonoverlapping(result.omega.as_ptr(), omega, result.omega.len());
        Ok(())
    })
}

/// Settings of horecon_estimate_delay; fill with horecon_default_delay_options.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct horecon_delay_options {
    /// = sizeof(horecon_delay_options).
    pub struct_size: u32,
    /// CG iterations of each short reconstruction (10).
    pub iterations: i32,
    /// Search over [−range, range] seconds (20e-6).
    pub range: f64,
    /// Spacing of the coarse grid, s (4e-6).
    pub step: f64,
    /// Width of the final golden-section bracket, s (0.05e-6).
    pub tolerance: f64,
    /// Tikhonov λ of the short reconstructions (0).
    pub lambda: f64,
    /// Coefficient groups that are delayed: bit o = solid-harmonic order o
    /// (1 = k0, 2 = linear, 4 = 2nd, 8 = 3rd order); 0 = all columns.
    pub groups: u32,
}

fn default_delay_options() -> horecon_delay_options {
    let d = calib::delay::DelayOptions::default();
    horecon_delay_options {
        struct_size: std::mem::size_of::<horecon_delay_options>() as u32,
        iterations: d.iterations as i32,
        range: d.range,
        step: d.step,
        tolerance: d.tolerance,
        lambda: d.lambda,
        groups: d.groups,
    }
}

/// Fills `o` with the delay-search defaults (±20 µs, 4 µs, 0.05 µs, 10 iterations, all groups).
#[no_mangle]
pub unsafe extern "C" fn horecon_default_delay_options(o: *mut horecon_delay_options) {
    super::guard_value((), || {
        if !o.is_null() {
            *o = default_delay_options();
        }
    })
}

/// The delay Δt (s) between field-monitoring coefficients (or the nominal
/// trajectory) and the data: for each candidate Δt the coefficients are
/// resampled at t + Δt (cubic Hermite within each readout, where `times`
/// increase), a short reconstruction (o->iterations of CG from zero with the
/// plan's geometry, sensitivities and off-resonance) is made and its data
/// residual ‖Eρ − d‖ is the cost: a coarse grid over [−range, range], then
/// golden-section refinement to `tolerance`. `coefficients` has the shape of
/// the plan's phase model (M×B of set_solid_harmonics, set_trajectory or
/// set_basis; NULL = the plan's own); `times` M sample times (s); `data` M×L.
/// Writes *delay, *residual (may be NULL) and, when given, the residual
/// curve sorted by delay: up to `curve_capacity` pairs into curve_delays and
/// curve_residuals, the number of evaluations into *curve_length. The plan
/// itself is not changed (a private copy is reconstructed).
#[no_mangle]
pub unsafe extern "C" fn horecon_estimate_delay(
    plan: *const horecon_plan,
    data: *const horecon_c32,
    coefficients: *const f64,
    times: *const f64,
    o: *const horecon_delay_options,
    delay: *mut f64,
    residual: *mut f64,
    curve_capacity: i32,
    curve_delays: *mut f64,
    curve_residuals: *mut f64,
    curve_length: *mut i32,
) -> horecon_status {
    guard("horecon_estimate_delay", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let d = read_c32("data", data, s.samples * s.coils)?;
        let t = read("times", times, s.samples)?;
        let terms = p.model().phase.as_ref().map_or(0, |ph| ph.terms);
        let k = if coefficients.is_null() {
            None
        } else {
            if terms == 0 {
                return Err(Error::incomplete(
                    "the plan has no phase model: set one first (its shape gives the coefficients')",
                ));
            }
            Some(read("coefficients", coefficients, terms * s.samples)?)
        };
        let c = read_options("o", o, default_delay_options())?;
        non_null("delay", delay)?;
        if curve_capacity < 0 {
            return Err(Error::invalid(format!(
                "curve_capacity must be >= 0, got {curve_capacity}"
            )));
        }
        if curve_capacity > 0 {
            non_null("curve_delays", curve_delays)?;
            non_null("curve_residuals", curve_residuals)?;
        }
        let options = calib::delay::DelayOptions {
            range: c.range,
            step: c.step,
            tolerance: c.tolerance,
            iterations: usize::try_from(c.iterations).unwrap_or(0),
            lambda: c.lambda,
            groups: c.groups,
        };
        let result = calib::delay::estimate_delay(p, &d, k.as_deref(), &t, &options)?;
        *delay = result.delay;
        if !residual.is_null() {
            *residual = result.residual;
        }
        for (i, &(x, r)) in result
            .curve
            .iter()
            .take(curve_capacity as usize)
            .enumerate()
        {
            *curve_delays.add(i) = x;
            *curve_residuals.add(i) = r;
        }
        if !curve_length.is_null() {
            *curve_length = result.curve.len() as i32;
        }
        Ok(())
    })
}

/// Simulated Cartesian reference k-space (nx·ny·nz×ncoils×nechoes, echo
/// slowest) of an object `image` (npoints) at `positions` (npoints×3) with
/// sensitivities (npoints×ncoils), off-resonance `omega` (npoints rad/s, or
/// NULL) and echo times (nechoes, s): the exact sum
/// y_{c,e}(p) = Σ_n weight·ρ_n·S_c(r_n)·exp(iω_n·TE_e)·exp(+i k_p·r_n) at the
/// reference grid's k-space points (give a finer grid's positions and weight
/// 1/f^d to avoid the inverse crime). No noise (horecon_sim_add_noise,
/// horecon_sim_correlated_noise).
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_reference(
    ref_dims: *const i64,
    ref_fov: *const f64,
    ref_center: *const f64,
    npoints: i64,
    positions: *const f64,
    image: *const horecon_c32,
    ncoils: i64,
    sensitivities: *const horecon_c32,
    omega: *const f64,
    nechoes: i32,
    echo_times: *const f64,
    weight: f64,
    kspace: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_sim_reference", || {
        let grid = reference_grid(ref_dims, ref_fov, ref_center)?;
        let n = count("npoints", npoints)?;
        let l = count("ncoils", ncoils)?;
        let e = count("nechoes", nechoes as i64)?;
        let r = read("positions", positions, product("npoints*3", n, 3)?)?;
        let x = read_c32("image", image, n)?;
        let s = read_c32(
            "sensitivities",
            sensitivities,
            product("npoints*ncoils", n, l)?,
        )?;
        let w = if omega.is_null() {
            None
        } else {
            Some(read("omega", omega, n)?)
        };
        let te = read("echo_times", echo_times, e)?;
        if !weight.is_finite() {
            return Err(Error::invalid(format!(
                "weight must be finite, got {weight}"
            )));
        }
        non_null("kspace", kspace)?;
        let out = crate::sim::reference::cartesian_reference(
            &grid,
            &r,
            &x,
            &s,
            l,
            w.as_deref(),
            &te,
            weight,
        )?;
        write_c32(kspace, &out);
        Ok(())
    })
}

/// A plausible coil noise covariance (ncoils×ncoils): standard deviations in
/// [1, 1 + spread], correlation^|a−b| between coils a and b, random phases.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_noise_covariance(
    ncoils: i64,
    correlation: f64,
    spread: f64,
    seed: u64,
    covariance: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_sim_noise_covariance", || {
        let l = count("ncoils", ncoils)?;
        non_null("covariance", covariance)?;
        let psi = crate::sim::reference::noise_covariance_model(l, correlation, spread, seed)?;
        write_c32(covariance, &to_c32(&psi));
        Ok(())
    })
}

/// Adds correlated complex Gaussian noise with covariance Ψ (ncoils×ncoils,
/// Hermitian positive definite) to every row of `values` (npoints×ncoils) in
/// place (values all zero = noise-only samples).
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_correlated_noise(
    covariance: *const horecon_c32,
    ncoils: i64,
    npoints: i64,
    seed: u64,
    values: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_sim_correlated_noise", || {
        let (l, n) = (count("ncoils", ncoils)?, count("npoints", npoints)?);
        let psi = read_c32("covariance", covariance, product("ncoils^2", l, l)?)?;
        crate::model::check_finite("covariance", &psi)?;
        let mut v = read_c32("values", values, product("npoints*ncoils", n, l)?)?;
        crate::sim::reference::add_correlated_noise(&mut v, l, &to_c64(&psi), seed)?;
        write_c32(values, &v);
        Ok(())
    })
}
