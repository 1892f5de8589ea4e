//! The C API of the seeds' fast paths (issue 5): Fᴴd and Q of Stone et al.,
//! and the gridding baseline.

use super::{
    borrow_c32, guard, horecon_c32, horecon_plan, horecon_status, non_null, output_buffer,
    output_c32, plan_ref, read, write_output,
};

/// Fᴴd of Stone et al. 2008, eq. 4 (Kirk–Hwu ch. 14):
/// out_n = Σ_m conj(φ(k_m))·d_m·exp(+i2π k_m·x_n) with Stone's k in cycles/m.
///
/// The plan must be a single-coil trajectory plan: ncoils = 1, no
/// sensitivities, no off-resonance, phase model from horecon_set_trajectory
/// (else HORECON_ERR_INVALID_ARGUMENT). Stone's F = φ·exp(−i2π k·x) is the
/// plan's E = exp(+i k̃·r) for k̃ = −2π·k: give the plan the trajectory
/// k̃ = −2π·k (rad/m) to use Stone's k (cycles/m). Then out = Eᴴ(conj(φ)·d)
/// (computed by horecon_adjoint's machinery, on the plan's backend).
/// `data` M, `phi` M or NULL (φ ≡ 1), `out` N.
#[no_mangle]
pub unsafe extern "C" fn horecon_fhd(
    plan: *const horecon_plan,
    data: *const horecon_c32,
    phi: *const horecon_c32,
    out: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_fhd", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let d = borrow_c32("data", data, s.samples)?;
        let phi = if phi.is_null() {
            None
        } else {
            Some(borrow_c32("phi", phi, s.samples)?)
        };
        let out = output_c32("out", out)?;
        let mut x = output_buffer(p, s.voxels, "out")?;
        p.fhd(d, phi, &mut x)?;
        write_output(p, out, &x);
        Ok(())
    })
}

/// The size of horecon_q's output: dims[a] = 2·n_a for every axis of more
/// than one voxel, 1 for the others (2nx·2ny·2nz in 3D, 2nx·2ny·1 in 2D).
#[no_mangle]
pub unsafe extern "C" fn horecon_q_dims(
    plan: *const horecon_plan,
    dims: *mut i64,
) -> horecon_status {
    guard("horecon_q_dims", || {
        let p = plan_ref(plan)?;
        non_null("dims", dims)?;
        let d = p.q_dims();
        for (a, v) in d.into_iter().enumerate() {
            *dims.add(a) = v as i64;
        }
        Ok(())
    })
}

/// Q of Stone et al. 2008, eq. 3, the Toeplitz kernel of FᴴF, on the
/// 2×-oversampled grid (computed once per trajectory, reusable):
/// q[i + qx·(j + qy·l)] = Σ_m |φ(k_m)|²·exp(+i2π k_m·r_ijl) with
/// r_ijl = (i − nx)·a + (j − ny)·b + (l − nz)·c, where (qx, qy, qz) is given
/// by horecon_q_dims and a, b, c are the steps of the voxel grid (for
/// horecon_set_grid_positions: fov_x/nx along x, …; an axis of one voxel
/// contributes index 0 and no offset). Index (nx, ny, nz) is offset 0:
/// (FᴴF ρ)_n = Σ_n' q[i_n − i_n' + nx, j_n − j_n' + ny, l_n − l_n' + nz]·ρ_n'.
///
/// Same plans as horecon_fhd (Stone's k = −k̃/2π), with the voxel positions
/// on a lattice r_n = r_0 + ix·a + iy·b + iz·c (else
/// HORECON_ERR_INVALID_ARGUMENT). `phi_mag2` M non-negative values |φ(k_m)|²
/// or NULL (1); `q` qx·qy·qz.
#[no_mangle]
pub unsafe extern "C" fn horecon_q(
    plan: *const horecon_plan,
    phi_mag2: *const f32,
    q: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_q", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let w = if phi_mag2.is_null() {
            None
        } else {
            Some(read("phi_mag2", phi_mag2, s.samples)?)
        };
        let q = output_c32("q", q)?;
        let len: usize = p.q_dims().iter().product();
        let mut out = output_buffer(p, len, "q")?;
        p.q(w.as_deref(), &mut out)?;
        write_output(p, q, &out);
        Ok(())
    })
}

/// The gridding reconstruction, the seeds' comparison method: Kaiser–Bessel
/// convolution gridding (width 6 cells, 2×-oversampled grid, β of Beatty et
/// al. 2005), FFT, deapodization and coil combination. It approximates
/// (relative RMS error ~1e-5)
///
/// ρ̂_c(r_n) = Σ_j w_j·d_{j,c}·exp(−i(k0_j + k_j·r_n)),
///
/// combined as image_n = Σ_c conj(S_c(r_n))·ρ̂_c(r_n) / Σ_c |S_c(r_n)|²
/// (0 where the denominator is 0) with sensitivities, ρ̂_1 for one coil
/// without, and the root-sum-of-squares (Σ_c |ρ̂_c|²)^½ for several coils
/// without sensitivities (such a plan is accepted here only).
///
/// The plan's voxels must lie on a lattice (horecon_set_grid_positions makes
/// one) and its phase model must be a trajectory (horecon_set_trajectory,
/// k0 = 0) or solid harmonics, of which only orders 0 (k0) and 1 (k) are
/// used: higher orders and off-resonance are ignored (gridding is the
/// uncorrected baseline). A user basis gives HORECON_ERR_INVALID_ARGUMENT.
///
/// `data` M×L; `dcf` M non-negative density-compensation weights w, or NULL
/// for Pipe–Menon weights (20 iterations w ← w/(C Cᵀ w) with the same
/// kernel, scaled so that the formula above applied to the exact data of the
/// uniform image ρ ≡ 1 gives 1 at the centre voxel); `image` N, written only
/// on success.
#[no_mangle]
pub unsafe extern "C" fn horecon_gridding(
    plan: *const horecon_plan,
    data: *const horecon_c32,
    dcf: *const f32,
    image: *mut horecon_c32,
) -> horecon_status {
    guard("horecon_gridding", || {
        let p = plan_ref(plan)?;
        let s = p.sizes();
        let d = borrow_c32("data", data, s.samples * s.coils)?;
        let w = if dcf.is_null() {
            None
        } else {
            Some(read("dcf", dcf, s.samples)?)
        };
        let image = output_c32("image", image)?;
        let mut x = output_buffer(p, s.voxels, "image")?;
        p.gridding(d, w.as_deref(), &mut x)?;
        write_output(p, image, &x);
        Ok(())
    })
}
