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

use crate::error::{try_collect, try_vec, Error, Result};
use crate::model::lattice::Lattice;
use crate::model::{Features, Model};
pub use expansion::{Method, Skeleton, Target};
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
    /// ã_l(t_j) = a_l(t_j)·exp(2πi k0_j) (M points).
    pub temporal: Factor,
    /// b_l(r_n) (N points).
    pub spatial: Factor,
    /// The expansion's relative error measured on its samples (not the certificate).
    pub sampled_error: f64,
    pub method: Method,
    /// P, the residual (non-linear) phase terms.
    pub residual_terms: usize,
}

/// One factor of the expansion with the points it is evaluated at:
///
/// $$f_l(x_i)\,e^{2\pi i\,o_i},\qquad f_l(x) = \sum_s e^{i\,x\cdot f_s}\,c_{s,l}$$
///
/// (the skeleton's f_s and c_s), K×count values that the host evaluates with
/// [`Factor::values`] and the GPU from the same skeleton.
#[derive(Clone, Debug)]
pub struct Factor {
    pub skeleton: Skeleton,
    /// The points' features x_i, P×count (point fastest).
    pub features: Vec<f64>,
    pub count: usize,
    /// o_i in cycles within (−1, 1), `None` = 0.
    pub offset: Option<Vec<f64>>,
}

impl Factor {
    /// P.
    pub fn terms(&self) -> usize {
        self.features.len() / self.count.max(1)
    }

    /// The K×count values (point fastest), evaluated on the host and
    /// rounded to float32.
    pub fn values_f32(&self, what: &str) -> Result<Vec<num_complex::Complex32>> {
        self.skeleton.evaluate_all(
            self.count,
            &self.features,
            self.offset.as_deref(),
            crate::backend::cpu::narrow::<f64>,
            what,
        )
    }
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
    /// relative error ≤ `target` ([`Target`]: its aim where reachable, else
    /// its bound). `InvalidArgument` with the reason when the model has none
    /// (voxels off any lattice, too many terms needed).
    pub fn new(
        model: &Model,
        features: &Features,
        target: impl Into<Target>,
    ) -> Result<Separation> {
        let sizes = model.sizes;
        let (n, m) = (sizes.voxels, sizes.samples);
        let positions = model.positions.as_deref().ok_or_else(|| {
            Error::invalid("the fast path needs voxel positions to find their lattice")
        })?;
        let lattice = Lattice::detect(sizes.dims, positions)?;
        let split = split::Split::new(features, &lattice, n)?;
        let mut weights = try_vec(n, 1.0f64, "voxel weights (N)")?;
        if let Some(s) = &features.sensitivities {
            weights
                .par_iter_mut()
                .enumerate()
                .for_each(|(v, w)| *w = crate::model::coil_energy(s, n, v));
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
        let offset = try_collect(
            split.offset.iter().map(|k0| k0.fract()),
            "phase offsets (M)",
        )?;
        Ok(Separation {
            lattice,
            ndims: split.ndims,
            points: split.points,
            rank: e.rank,
            temporal: Factor {
                skeleton: e.temporal,
                features: split.temporal,
                count: m,
                offset: Some(offset),
            },
            spatial: Factor {
                skeleton: e.spatial,
                features: split.spatial,
                count: n,
                offset: None,
            },
            sampled_error: e.sampled_error,
            method: e.method,
            residual_terms: split.residual_terms,
        })
    }
}
