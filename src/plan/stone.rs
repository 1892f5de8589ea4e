//! Fᴴd and Q of Stone et al. 2008 (Kirk–Hwu ch. 14) on a single-coil
//! trajectory plan, computed by the plan's own backend.
//!
//! Stone's model is F_{m,n} = φ(k_m)·exp(−i2π k_m·x_n) with k in cycles/m;
//! the plan's is E_{m,n} = exp(+i k̃_m·r_n) with its trajectory k̃ in rad/m.
//! They agree when k̃ = −2π·k (MODEL.md, last section): to use Stone's
//! trajectory k, give the plan k̃ = −2π·k. Then
//!
//! - Fᴴd (eq. 4): (Fᴴd)_n = Σ_m φ*(k_m)·d_m·exp(+i2π k_m·x_n) = (Eᴴ(φ*⊙d))_n;
//! - Q (eq. 3): Q(x) = Σ_m |φ(k_m)|²·exp(+i2π k_m·x), evaluated on the
//!   2×-oversampled grid of voxel offsets, is Eᴴ(|φ|²) of a temporary
//!   operator whose voxels sit at those offsets, built on the plan's backend.
//!
//! Accepted plans: one coil, no sensitivities, no off-resonance, the phase
//! model set by `set_trajectory` (1 to 3 dimensions). Q also needs the
//! voxels on a lattice, r_n = r_0 + ix·a + iy·b + iz·c (any grid made by
//! `set_grid_positions` is one).

use super::{expect_len, Plan};
use crate::backend;
use crate::error::{try_vec, Error, Result};
use crate::model::grid::lattice_steps;
use crate::model::{check_finite, Basis, Model, Sizes};
use num_complex::Complex32;

impl Plan {
    /// The trajectory (ndims, M×ndims rad/m) of a plan Stone's formulas apply to.
    /// The coil count comes first: a plan of several coils never qualifies,
    /// whatever else it is given.
    pub(super) fn stone_trajectory(&self, what: &str) -> Result<(usize, &[f64])> {
        let model = &self.model;
        if model.sizes.coils != 1 {
            return Err(Error::invalid(format!(
                "{what} needs a single-coil plan (ncoils = 1), this one has {} coils",
                model.sizes.coils
            )));
        }
        model.check_complete()?;
        if model.sensitivities.is_some() {
            return Err(Error::invalid(format!(
                "{what} needs a plan without sensitivities (Stone's F has none); use the adjoint for Eᴴ with S"
            )));
        }
        if model.off_resonance.is_some() {
            return Err(Error::invalid(format!(
                "{what} needs a plan without off-resonance (Stone's F and its Toeplitz kernel Q have none); \
                 use the adjoint for Eᴴ with off-resonance"
            )));
        }
        match model.phase.as_ref().map(|p| (&p.basis, &p.coefficients)) {
            Some((Basis::Trajectory(d), k)) => Ok((*d, k)),
            _ => Err(Error::invalid(format!(
                "{what} needs a phase model set by set_trajectory (a k-space trajectory), \
                 not solid harmonics or a user basis"
            ))),
        }
    }

    /// Fᴴd of Stone et al. (eq. 4) for Stone's trajectory k = −k̃/2π of this
    /// plan: out_n = Σ_m φ*(k_m)·d_m·exp(+i2π k_m·x_n) = (Eᴴ(φ*⊙d))_n, with
    /// φ ≡ 1 when `phi` is `None`. φ*⊙d is rounded to float32 before Eᴴ.
    pub fn fhd(
        &self,
        data: &[Complex32],
        phi: Option<&[Complex32]>,
        out: &mut [Complex32],
    ) -> Result<()> {
        self.stone_trajectory("fhd")?;
        let s = self.sizes();
        expect_len("data", data.len(), s.samples, "M (one coil)")?;
        expect_len("out", out.len(), s.voxels, "N = nx*ny*nz")?;
        check_finite("data", data)?;
        let mut weighted = crate::error::try_copy(data, "phi* x data (M)")?;
        if let Some(phi) = phi {
            expect_len("phi", phi.len(), s.samples, "M")?;
            check_finite("phi", phi)?;
            for (d, p) in weighted.iter_mut().zip(phi) {
                let d64 = num_complex::Complex64::new(d.re as f64, d.im as f64);
                let p64 = num_complex::Complex64::new(p.re as f64, -p.im as f64);
                let v = p64 * d64;
                *d = Complex32::new(v.re as f32, v.im as f32);
            }
        }
        self.run(super::Call::Fhd, || {
            self.operator()?.adjoint(&weighted, out)
        })
    }

    /// The lattice steps of the voxel positions that Q is computed on (else
    /// the error naming what is missing or wrong).
    pub(super) fn q_steps(&self) -> Result<[[f64; 3]; 3]> {
        let positions = self.model.require_positions("q")?;
        lattice_steps(self.sizes().dims, positions, "q")
    }

    /// The size of Q: 2n along every axis of more than one voxel, 1 along the others.
    pub fn q_dims(&self) -> [usize; 3] {
        self.sizes().dims.map(|d| if d > 1 { 2 * d } else { 1 })
    }

    /// Q of Stone et al. (eq. 3) on the 2×-oversampled grid:
    ///
    /// Q[i + qx·(j + qy·l)] = Σ_m |φ(k_m)|²·exp(+i2π k_m·q_{ijl}),
    /// q_{ijl} = (i − nx)·a + (j − ny)·b + (l − nz)·c,
    ///
    /// (q_x, q_y, q_z) = [`Plan::q_dims`], a, b, c the lattice steps of the
    /// voxel positions (a singleton axis contributes index 0 and no offset),
    /// |φ|² ≡ 1 when `phi_mag2` is `None`. Index (nx, ny, nz) is offset 0, so
    /// (FᴴF ρ)_n = Σ_n' Q[i_n − i_n' + nx, j_n − j_n' + ny, l_n − l_n' + nz]·ρ_n'.
    pub fn q(&self, phi_mag2: Option<&[f32]>, q: &mut [Complex32]) -> Result<()> {
        self.run(super::Call::Q, || self.q_inner(phi_mag2, q))
    }

    fn q_inner(&self, phi_mag2: Option<&[f32]>, q: &mut [Complex32]) -> Result<()> {
        let (ndims, k) = self.stone_trajectory("q")?;
        let s = self.sizes();
        let q_dims = self.q_dims();
        let q_voxels: usize = q_dims.iter().product();
        expect_len(
            "q",
            q.len(),
            q_voxels,
            "2nx*2ny*2nz, axes of one voxel not doubled",
        )?;
        let mut weights = try_vec(s.samples, Complex32::new(1.0, 0.0), "|phi|^2 (M)")?;
        if let Some(w) = phi_mag2 {
            expect_len("phi_mag2", w.len(), s.samples, "M")?;
            check_finite("phi_mag2", w)?;
            if let Some(i) = w.iter().position(|&v| v < 0.0) {
                return Err(Error::invalid(format!(
                    "phi_mag2[{i}] = {} is negative",
                    w[i]
                )));
            }
            for (o, &v) in weights.iter_mut().zip(w) {
                *o = Complex32::new(v, 0.0);
            }
        }
        let steps = self.q_steps()?;
        let mut q_positions = try_vec(3 * q_voxels, 0.0f64, "positions of Q (2N x 3)")?;
        for l in 0..q_dims[2] {
            for j in 0..q_dims[1] {
                for i in 0..q_dims[0] {
                    let v = i + q_dims[0] * (j + q_dims[1] * l);
                    let mut r = [0.0; 3];
                    for (axis, index) in [i, j, l].into_iter().enumerate() {
                        if s.dims[axis] > 1 {
                            let offset = index as f64 - s.dims[axis] as f64;
                            for (c, rc) in r.iter_mut().enumerate() {
                                *rc += offset * steps[axis][c];
                            }
                        }
                    }
                    for (c, rc) in r.into_iter().enumerate() {
                        q_positions[c * q_voxels + v] = rc;
                    }
                }
            }
        }
        let sizes = Sizes::new(
            q_dims[0] as i64,
            q_dims[1] as i64,
            q_dims[2] as i64,
            1,
            s.samples as i64,
        )?;
        let mut model = Model::new(sizes);
        model.set_positions(&q_positions)?;
        drop(q_positions);
        model.set_trajectory(ndims as i32, k)?;
        let op = self.on_pool(|| {
            let features = model.features()?;
            drop(model);
            backend::build(
                self.backend,
                &features,
                sizes,
                &self.options,
                self.pool.clone(),
            )
        })?;
        op.adjoint(&weights, q)
    }
}
