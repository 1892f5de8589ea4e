//! The separable form of E used by the fast path (FAST-PATH.md §1, §3),
//! backend-neutral:
//!
//! $$E_{(j,c),n} = S_c(r_n)\, e^{i\varphi(j,n)} \approx
//!   S_c(r_n) \sum_{l=1}^{K} \tilde a_l(t_j)\, b_l(r_n)\, e^{i x_j\cdot m_n},
//!   \qquad \tilde a_l(t_j) = a_l(t_j)\, e^{2\pi i k_0(j)}$$
//!
//! so E ρ = Σ_l ã_l ⊙ NUFFT₂(b_l ⊙ S_c ⊙ ρ) over the lattice modes m
//! ([`crate::model::lattice`]), the phase split by [`split`] and exp(iψ)
//! expanded by [`expansion`].

pub mod expansion;
pub mod split;

use crate::error::{try_vec, Error, Result};
use crate::model::lattice::Lattice;
use crate::model::{Features, Model};
pub use expansion::Method;
use num_complex::Complex64;
use rayon::prelude::*;

/// Everything a backend needs to apply the separated operator.
#[derive(Clone, Debug)]
pub struct Separation {
    pub lattice: Lattice,
    /// NUFFT dimensions and points x_j (radians per lattice step, in [−π, π)), ndims×M.
    pub ndims: usize,
    pub points: Vec<f64>,
    /// K.
    pub rank: usize,
    /// ã_l(t_j) = a_l(t_j)·exp(2πi k0_j), K×M (sample fastest).
    pub temporal: Vec<Complex64>,
    /// b_l(r_n), K×N (voxel fastest).
    pub spatial: Vec<Complex64>,
    /// The expansion's relative error measured on its samples (not the certificate).
    pub sampled_error: f64,
    pub method: Method,
    /// P, the residual (non-linear) phase terms.
    pub residual_terms: usize,
}

/// Lattice cells per axis of the regular sub-lattice [`lattice_cover`] takes.
const COVER_CELLS: usize = 10;

/// The voxels on a regular sub-lattice of about [`COVER_CELLS`] points per
/// axis, each axis's first and last index included (the corners of the
/// field of view, where higher orders are extreme).
fn lattice_cover(lattice: &Lattice, n: usize) -> Vec<usize> {
    let step: [usize; 3] = std::array::from_fn(|a| lattice.modes[a].div_ceil(COVER_CELLS).max(1));
    let on = |a: usize, m: f64| {
        let i = (m + (lattice.modes[a] / 2) as f64) as usize;
        i % step[a] == 0 || i + 1 == lattice.modes[a]
    };
    (0..n)
        .into_par_iter()
        .filter(|&v| {
            let m = lattice.coordinates(v);
            (0..3).all(|a| on(a, m[a]))
        })
        .collect()
}

impl Separation {
    /// The separation of `model` (features `features`) with the expansion's
    /// relative error ≤ `target`. `InvalidArgument` with the reason when the
    /// model has none (voxels off any lattice, too many terms needed).
    pub fn new(model: &Model, features: &Features, target: f64) -> Result<Separation> {
        let sizes = model.sizes;
        let (n, m) = (sizes.voxels, sizes.samples);
        let positions = model.positions.as_deref().ok_or_else(|| {
            Error::invalid("the fast path needs voxel positions to find their lattice")
        })?;
        let lattice = Lattice::detect(sizes.dims, positions)?;
        let split = split::Split::new(features, &lattice, n)?;
        let mut weights = try_vec(n, 1.0f64, "voxel weights (N)")?;
        if let Some(s) = &features.sensitivities {
            weights.par_iter_mut().enumerate().for_each(|(v, w)| {
                *w = (0..sizes.coils)
                    .map(|c| s[c * n + v].norm_sqr() as f64)
                    .sum();
            });
        }
        let e = expansion::Expansion::new(
            split.residual_terms,
            m,
            &split.temporal,
            &split.spatial,
            &weights,
            target,
            &lattice_cover(&lattice, n),
        )?;
        let mut temporal = e.temporal;
        for (j, &k0) in split.offset.iter().enumerate() {
            let phase = Complex64::from_polar(1.0, std::f64::consts::TAU * k0.fract());
            for l in 0..e.rank {
                temporal[l * m + j] *= phase;
            }
        }
        Ok(Separation {
            lattice,
            ndims: split.ndims,
            points: split.points,
            rank: e.rank,
            temporal,
            spatial: e.spatial,
            sampled_error: e.sampled_error,
            method: e.method,
            residual_terms: split.residual_terms,
        })
    }
}
