//! The simulation toolkit in the C API (`horecon_sim_*`, src/sim): the same
//! checked, guarded pattern as the rest of the API. Arrays are column-major
//! (first index fastest) as in MODEL.md.
//!
//! Trajectory and refined-grid functions return arrays whose length the
//! caller cannot easily predict: call them with the output pointers NULL to
//! get the count in `*nsamples` (`*npoints`), then again with arrays of that
//! size and the count in `*nsamples` (checked).

use super::work::sim_call;
use super::{guard, horecon_c32, horecon_status, non_null, read, read_c32, write_c32};
use crate::error::{Error, Result};
use crate::sim;

/// A positive count from C (≤ 2^40).
fn positive(argument: &str, value: i64) -> Result<usize> {
    if !(1..=1i64 << 40).contains(&value) {
        return Err(Error::invalid(format!(
            "{argument} must be 1..2^40, got {value}"
        )));
    }
    Ok(value as usize)
}

/// The toolkit call `what`: guarded (C-API.md) and cancellable, reporting work.
fn sim_guard(what: &'static str, body: impl FnOnce() -> Result<()>) -> horecon_status {
    guard(what, || sim_call(what, body))
}

/// The dimensions nx, ny, nz of a grid from C, each 1..2^40.
fn grid_dims(nx: i64, ny: i64, nz: i64) -> Result<[usize; 3]> {
    Ok([
        positive("nx", nx)?,
        positive("ny", ny)?,
        positive("nz", nz)?,
    ])
}

/// `npoints` positions (npoints×3, m) from C.
unsafe fn read_positions(npoints: i64, positions: *const f64) -> Result<Vec<f64>> {
    let n = positive("npoints", npoints)?;
    read("positions", positions, 3 * n)
}

unsafe fn read3(argument: &str, p: *const f64) -> Result<[f64; 3]> {
    let v = read(argument, p, 3)?;
    Ok([v[0], v[1], v[2]])
}

unsafe fn write_f64(out: *mut f64, values: &[f64]) {
    std::ptr::copy_nonoverlapping(values.as_ptr(), out, values.len());
}

/// The trajectory function `what` (the trajectory from `make`) with its
/// query-then-fill protocol.
unsafe fn trajectory(
    what: &'static str,
    (nsamples, k, times): (*mut i64, *mut f64, *mut f64),
    make: impl FnOnce() -> Result<sim::Trajectory>,
) -> horecon_status {
    sim_guard(what, || emit_trajectory(make()?, nsamples, k, times))
}

/// The query-then-fill protocol of the trajectory functions.
unsafe fn emit_trajectory(
    t: sim::Trajectory,
    nsamples: *mut i64,
    k: *mut f64,
    times: *mut f64,
) -> Result<()> {
    non_null("nsamples", nsamples)?;
    let m = t.samples();
    if k.is_null() && times.is_null() {
        *nsamples = m as i64;
        return Ok(());
    }
    non_null("k", k)?;
    non_null("times", times)?;
    if *nsamples != m as i64 {
        return Err(Error::size(format!(
            "*nsamples is {}, but this trajectory has {m} samples (call with k and times NULL to query)",
            *nsamples
        )));
    }
    write_f64(k, &t.k);
    write_f64(times, &t.times);
    Ok(())
}

/// Shepp–Logan phantom values at `npoints` positions (npoints×3, m):
/// `ndims` 2 (Toft's modified 2D, z ignored) or 3 (modified Kak–Slaney 3D),
/// spanning `fov` (m) around `center` (m). `values` receives npoints doubles.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_shepp_logan(
    ndims: i32,
    fov: *const f64,
    center: *const f64,
    npoints: i64,
    positions: *const f64,
    values: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_shepp_logan", || {
        let p = read_positions(npoints, positions)?;
        let fov = read3("fov", fov)?;
        let center = read3("center", center)?;
        non_null("values", values)?;
        let v = sim::shepp_logan(dimensions(ndims)?, fov, center, &p)?;
        write_f64(values, &v);
        Ok(())
    })
}

/// The analytic Fourier transform F(k) = ∫ρ(r)·exp(+i k·r) dr of the same
/// phantom at `nsamples` points k (nsamples×kdims, rad/m, kdims 1..3): real
/// parts to `out_re`, imaginary parts to `out_im` (m² in 2D, m³ in 3D). A
/// voxel sum Σ ρ(r_n)·exp(+i k·r_n)·ΔV approximates it.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_shepp_logan_kspace(
    ndims: i32,
    fov: *const f64,
    center: *const f64,
    nsamples: i64,
    kdims: i32,
    k: *const f64,
    out_re: *mut f64,
    out_im: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_shepp_logan_kspace", || {
        let m = positive("nsamples", nsamples)?;
        if !(1..=3).contains(&kdims) {
            return Err(Error::invalid(format!("kdims must be 1..3, got {kdims}")));
        }
        let fov = read3("fov", fov)?;
        let center = read3("center", center)?;
        let k = read("k", k, m * kdims as usize)?;
        non_null("out_re", out_re)?;
        non_null("out_im", out_im)?;
        let f = sim::shepp_logan_kspace(dimensions(ndims)?, fov, center, kdims as usize, &k)?;
        // Element by element: no second copy of the M values.
        for (j, c) in f.iter().enumerate() {
            *out_re.add(j) = c.re;
            *out_im.add(j) = c.im;
        }
        Ok(())
    })
}

/// The 2D phantom as a grid of field of view `grid_fov` (m, x and y) sees it
/// when acquired up to |k| ≤ `kmax` (rad/m): (1/(fov_x·fov_y))·Σ_{|k|≤kmax}
/// F(k)·exp(−i k·r_n) over the Cartesian grid Δk = 2π/grid_fov, at
/// `npoints` positions (npoints×3). `values` receives npoints complex values.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_shepp_logan_band_limited(
    fov: *const f64,
    center: *const f64,
    npoints: i64,
    positions: *const f64,
    grid_fov: *const f64,
    kmax: f64,
    values: *mut horecon_c32,
) -> horecon_status {
    sim_guard("horecon_sim_shepp_logan_band_limited", || {
        let p = read_positions(npoints, positions)?;
        let fov = read3("fov", fov)?;
        let center = read3("center", center)?;
        let g = read("grid_fov", grid_fov, 2)?;
        non_null("values", values)?;
        let v = sim::shepp_logan_band_limited(fov, center, &p, [g[0], g[1]], kmax)?;
        write_c32(values, &v);
        Ok(())
    })
}

/// A single-shot 2D Archimedean spiral for an n×n grid of field of view
/// `fov` (m): out to k_max = π·n/fov with n/(2·undersampling) turns, one
/// Nyquist step 2π/fov per `dwell` (s) along the readout after a 0.2 ms ramp;
/// times t0 + j·dwell. k is nsamples×2 (rad/m). Query with k, times NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_spiral(
    n: i64,
    fov: f64,
    undersampling: f64,
    dwell: f64,
    t0: f64,
    nsamples: *mut i64,
    k: *mut f64,
    times: *mut f64,
) -> horecon_status {
    trajectory("horecon_sim_spiral", (nsamples, k, times), || {
        sim::spiral(n, fov, undersampling, dwell, t0)
    })
}

/// Density-compensation weights (nsamples, float32, mean 1) of a continuous 2D
/// readout k (nsamples×2, rad/m): w_j = |k_j × (k_{j+1} − k_{j−1})/2|, for
/// the `sample_weights` of horecon_cg.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_density_weights(
    nsamples: i64,
    k: *const f64,
    weights: *mut f32,
) -> horecon_status {
    sim_guard("horecon_sim_density_weights", || {
        let m = positive("nsamples", nsamples)?;
        let k = read("k", k, 2 * m)?;
        non_null("weights", weights)?;
        let w = sim::density_weights_2d(&k)?;
        std::ptr::copy_nonoverlapping(w.as_ptr(), weights, m);
        Ok(())
    })
}

/// `spokes` radial spokes (angles π·p/spokes, 2n samples each from −k_max in
/// steps π/fov), k nsamples×2; times restart per spoke. Query with k, times NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_radial(
    n: i64,
    fov: f64,
    spokes: i64,
    dwell: f64,
    t0: f64,
    nsamples: *mut i64,
    k: *mut f64,
    times: *mut f64,
) -> horecon_status {
    trajectory("horecon_sim_radial", (nsamples, k, times), || {
        sim::radial(n, fov, spokes, dwell, t0)
    })
}

/// Single-shot EPI: n/undersampling lines of n samples, alternating
/// direction, k nsamples×2; times continuous. Query with k, times NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_epi(
    n: i64,
    fov: f64,
    undersampling: i64,
    dwell: f64,
    t0: f64,
    nsamples: *mut i64,
    k: *mut f64,
    times: *mut f64,
) -> horecon_status {
    trajectory("horecon_sim_epi", (nsamples, k, times), || {
        sim::epi(n, fov, undersampling, dwell, t0)
    })
}

/// The full nx×ny Cartesian grid, one line per shot (times t0 + ix·dwell),
/// k nsamples×2. Query with k, times NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_cartesian(
    nx: i64,
    ny: i64,
    fov_x: f64,
    fov_y: f64,
    dwell: f64,
    t0: f64,
    nsamples: *mut i64,
    k: *mut f64,
    times: *mut f64,
) -> horecon_status {
    trajectory("horecon_sim_cartesian", (nsamples, k, times), || {
        sim::cartesian(nx, ny, fov_x, fov_y, dwell, t0)
    })
}

/// A stack of nz spirals (kz = (p − nz/2)·2π/fov_z), k nsamples×3; times
/// restart per partition. Query with k, times NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_stack_of_spirals(
    n: i64,
    nz: i64,
    fov: f64,
    fov_z: f64,
    undersampling: f64,
    dwell: f64,
    t0: f64,
    nsamples: *mut i64,
    k: *mut f64,
    times: *mut f64,
) -> horecon_status {
    trajectory("horecon_sim_stack_of_spirals", (nsamples, k, times), || {
        sim::stack_of_spirals(n, nz, fov, fov_z, undersampling, dwell, t0)
    })
}

/// Sensitivities (npoints×ncoils) of `ncoils` coils evenly spaced on a circle
/// of `radius` (m) around `center` in the xy plane:
/// S_c(r) = w²/(w² + |r − p_c|²)·exp(i(θ_c + 2(r − p_c)·t_c/w)).
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_coil_sensitivities(
    npoints: i64,
    positions: *const f64,
    ncoils: i32,
    radius: f64,
    center: *const f64,
    sensitivities: *mut horecon_c32,
) -> horecon_status {
    sim_guard("horecon_sim_coil_sensitivities", || {
        let p = read_positions(npoints, positions)?;
        let center = read3("center", center)?;
        non_null("sensitivities", sensitivities)?;
        let s = sim::coil_sensitivities(&p, positive("ncoils", ncoils.into())?, radius, center)?;
        write_c32(sensitivities, &s);
        Ok(())
    })
}

/// A smooth off-resonance map ω (rad/s, npoints) peaking at about `max_hz`
/// over the field of view `fov` (m, ≥ 0 per axis; 0 = no variation along
/// that axis) around `center` (m).
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_off_resonance(
    npoints: i64,
    positions: *const f64,
    fov: *const f64,
    center: *const f64,
    max_hz: f64,
    omega: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_off_resonance", || {
        let p = read_positions(npoints, positions)?;
        let fov = read3("fov", fov)?;
        let center = read3("center", center)?;
        non_null("omega", omega)?;
        let w = sim::off_resonance_map(&p, fov, center, max_hz)?;
        write_f64(omega, &w);
        Ok(())
    })
}

/// Higher-order field coefficients (nsamples×16, rad/m^order, the solid
/// harmonics of MODEL.md) from a nominal trajectory k (nsamples×ndims,
/// rad/m, one continuous readout sampled every `dwell` s): terms 1..ndims
/// are k, and every term gets an eddy-current-like deviation of orders 0–3
/// scaled by `strength` (1 = typical), drawn from `seed`.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_field_coefficients(
    nsamples: i64,
    ndims: i32,
    k: *const f64,
    dwell: f64,
    strength: f64,
    seed: u64,
    coefficients: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_field_coefficients", || {
        let m = positive("nsamples", nsamples)?;
        if !(1..=3).contains(&ndims) {
            return Err(Error::invalid(format!("ndims must be 1..3, got {ndims}")));
        }
        let k = read("k", k, m * ndims as usize)?;
        non_null("coefficients", coefficients)?;
        let c = sim::field_coefficients(&k, ndims as usize, dwell, strength, seed)?;
        write_f64(coefficients, &c);
        Ok(())
    })
}

/// Adds complex Gaussian noise in place to `count` values so that
/// rms(|d|)/rms(|noise|) = snr; `sigma` (may be NULL) receives the noise rms.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_add_noise(
    count: i64,
    data: *mut horecon_c32,
    snr: f64,
    seed: u64,
    sigma: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_add_noise", || {
        let n = positive("count", count)?;
        let mut d = read_c32("data", data, n)?;
        let s = sim::add_noise(&mut d, snr, seed)?;
        write_c32(data, &d);
        if !sigma.is_null() {
            *sigma = s;
        }
        Ok(())
    })
}

/// A phantom's dimensions, 2 or 3, else an error naming the value.
fn dimensions(ndims: i32) -> Result<usize> {
    usize::try_from(ndims)
        .ok()
        .filter(|d| (2..=3).contains(d))
        .ok_or_else(|| Error::invalid(format!("ndims must be 2 or 3, got {ndims}")))
}

/// A refinement factor as an index: 1…16, else an error naming its value.
fn refinement(factor: i32) -> Result<usize> {
    usize::try_from(factor)
        .ok()
        .filter(|f| (1..=16).contains(f))
        .ok_or_else(|| Error::invalid(format!("factor must be 1..16, got {factor}")))
}

/// The grid nx×ny×nz (fov, center as horecon_set_grid_positions) refined by
/// `factor` along every non-singleton axis, sub-voxels symmetric around each
/// voxel: positions (npoints×3). Query *npoints with positions NULL.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_refined_grid(
    nx: i64,
    ny: i64,
    nz: i64,
    fov: *const f64,
    center: *const f64,
    factor: i32,
    npoints: *mut i64,
    positions: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_refined_grid", || {
        let dims = grid_dims(nx, ny, nz)?;
        let fov = read3("fov", fov)?;
        let center = read3("center", center)?;
        non_null("npoints", npoints)?;
        let (fine, p) = sim::refined_grid(dims, fov, center, refinement(factor)?)?;
        let n: usize = fine.iter().product();
        if positions.is_null() {
            *npoints = n as i64;
            return Ok(());
        }
        if *npoints != n as i64 {
            return Err(Error::size(format!(
                "*npoints is {}, but the refined grid has {n} points",
                *npoints
            )));
        }
        write_f64(positions, &p);
        Ok(())
    })
}

/// Averages an image on the refined grid (see horecon_sim_refined_grid)
/// back onto the nx×ny×nz grid.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_block_average(
    nx: i64,
    ny: i64,
    nz: i64,
    factor: i32,
    fine: *const horecon_c32,
    coarse: *mut horecon_c32,
) -> horecon_status {
    sim_guard("horecon_sim_block_average", || {
        let dims = grid_dims(nx, ny, nz)?;
        let f = refinement(factor)?;
        // Validates sizes (no overflow, at most 2^30 points) before reading `fine`.
        let n_fine: usize = sim::grid::refined_dims_checked(dims, f)?.iter().product();
        let x = read_c32("fine", fine, n_fine)?;
        non_null("coarse", coarse)?;
        let c = sim::block_average(&x, dims, f)?;
        write_c32(coarse, &c);
        Ok(())
    })
}

unsafe fn metric(
    count: i64,
    x: *const horecon_c32,
    reference: *const horecon_c32,
    out: *mut f64,
    f: fn(&[num_complex::Complex32], &[num_complex::Complex32]) -> Result<f64>,
) -> Result<()> {
    let n = positive("count", count)?;
    let x = read_c32("x", x, n)?;
    let r = read_c32("reference", reference, n)?;
    non_null("out", out)?;
    *out = f(&x, &r)?;
    Ok(())
}

/// NRMSE = ‖x − ref‖₂/‖ref‖₂ over `count` values.
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_nrmse(
    count: i64,
    x: *const horecon_c32,
    reference: *const horecon_c32,
    out: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_nrmse", || {
        metric(count, x, reference, out, sim::nrmse)
    })
}

/// PSNR = 20·log10(max|ref| / √MSE) in dB (Kirk–Hwu fig. 14.18).
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_psnr(
    count: i64,
    x: *const horecon_c32,
    reference: *const horecon_c32,
    out: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_psnr", || {
        metric(count, x, reference, out, sim::psnr)
    })
}

/// Percent error = 100·‖x − ref‖₂/‖ref‖₂ (Stone et al. 2008).
#[no_mangle]
pub unsafe extern "C" fn horecon_sim_percent_error(
    count: i64,
    x: *const horecon_c32,
    reference: *const horecon_c32,
    out: *mut f64,
) -> horecon_status {
    sim_guard("horecon_sim_percent_error", || {
        metric(count, x, reference, out, sim::percent_error)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::{
        HORECON_ERR_INVALID_ARGUMENT, HORECON_ERR_NULL_POINTER, HORECON_ERR_SIZE_MISMATCH,
        HORECON_OK,
    };

    #[test]
    fn trajectory_query_then_fill() {
        let spiral = |n: i64, m: *mut i64, k: *mut f64, t: *mut f64| unsafe {
            horecon_sim_spiral(n, 0.2, 3.0, 4e-6, 0.0, m, k, t)
        };
        let null = std::ptr::null_mut::<f64>();
        let mut m = 0i64;
        assert_eq!(spiral(64, &mut m, null, null), HORECON_OK);
        let expect = sim::spiral(64, 0.2, 3.0, 4e-6, 0.0).unwrap();
        assert_eq!(m as usize, expect.samples());
        let mut k = vec![0.0; 2 * m as usize];
        let mut t = vec![0.0; m as usize];
        assert_eq!(
            spiral(64, &mut m, k.as_mut_ptr(), t.as_mut_ptr()),
            HORECON_OK
        );
        assert_eq!(k, expect.k);
        let mut wrong = m - 1;
        assert_eq!(
            spiral(64, &mut wrong, k.as_mut_ptr(), t.as_mut_ptr()),
            HORECON_ERR_SIZE_MISMATCH
        );
        assert_eq!(
            spiral(64, std::ptr::null_mut(), k.as_mut_ptr(), t.as_mut_ptr()),
            HORECON_ERR_NULL_POINTER
        );
        assert_eq!(spiral(-3, &mut m, null, null), HORECON_ERR_INVALID_ARGUMENT);
    }

    #[test]
    fn metrics_and_phantom_through_c() {
        unsafe {
            let x = [
                horecon_c32 { re: 1.1, im: 0.0 },
                horecon_c32 { re: 0.0, im: 2.0 },
            ];
            let r = [
                horecon_c32 { re: 1.0, im: 0.0 },
                horecon_c32 { re: 0.0, im: 2.0 },
            ];
            let mut out = 0.0;
            assert_eq!(
                horecon_sim_nrmse(2, x.as_ptr(), r.as_ptr(), &mut out),
                HORECON_OK
            );
            assert!((out - 0.1 / 5f64.sqrt()).abs() < 1e-6);
            let (fov, center) = ([0.2, 0.2, 0.0], [0.0; 3]);
            let positions = [0.0, 0.5, 0.0, 0.0, 0.0, 0.0];
            let mut values = [7.0; 2];
            assert_eq!(
                horecon_sim_shepp_logan(
                    2,
                    fov.as_ptr(),
                    center.as_ptr(),
                    2,
                    positions.as_ptr(),
                    values.as_mut_ptr()
                ),
                HORECON_OK
            );
            assert!((values[0] - 0.2).abs() < 1e-12 && values[1] == 0.0);
            assert_eq!(
                horecon_sim_shepp_logan(
                    4,
                    fov.as_ptr(),
                    center.as_ptr(),
                    2,
                    positions.as_ptr(),
                    values.as_mut_ptr()
                ),
                HORECON_ERR_INVALID_ARGUMENT
            );
        }
    }
}
