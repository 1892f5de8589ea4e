//! The fast path's certificate (FAST-PATH.md §5): its error measured, not
//! predicted. For a random image x, the relative RMS difference between the
//! fast E x and the exact E x on a random subset of samples, and for random
//! data d, between the fast Eᴴ d and the exact Eᴴ d on a random subset of
//! voxels; the larger of the two. The exact rows and voxels come from the
//! backend's exact operator in DOUBLE precision on the sub-model of those
//! samples or voxels (|rows|·N·L and |voxels|·M·L pairs).
//!
//! The expansion and the NUFFT are shared by all coils, so the probes use
//! [`PROBE_COILS`] coils drawn at random ([`coil_subset`]): the fast
//! operator of those coils costs a fraction of a full application.

use crate::backend;
use crate::error::{try_vec, Result};
use crate::model::{Features, Sizes};
use crate::op::{EncodingOperator, Precision};
use crate::plan::{BackendKind, Options};
use crate::sim::noise::SimRng;
use num_complex::Complex32;
use std::sync::Arc;

/// Samples (rows of E) and voxels (columns) probed.
pub const PROBES: usize = 128;
/// Coils probed (all when the plan has fewer).
pub const PROBE_COILS: usize = 2;

/// The probed coils of a plan with more than [`PROBE_COILS`] coils.
pub struct CoilSubset {
    /// The coils, sorted.
    pub coils: Vec<usize>,
    /// Their sensitivities, N×|coils|.
    pub sensitivities: Vec<Complex32>,
    /// The sizes of that sub-model.
    pub sizes: Sizes,
}

/// The probed coils; `None` when every coil is probed.
pub fn coil_subset(
    sensitivities: Option<&[Complex32]>,
    sizes: Sizes,
) -> Result<Option<CoilSubset>> {
    let (Some(s), true) = (sensitivities, sizes.coils > PROBE_COILS) else {
        return Ok(None);
    };
    let mut rng = Probes(SimRng::new(0xC011_5EED ^ sizes.coils as u64));
    let coils = rng.subset(sizes.coils, PROBE_COILS);
    let n = sizes.voxels;
    let mut subset = try_vec(
        n * coils.len(),
        Complex32::new(0.0, 0.0),
        "probe sensitivities",
    )?;
    for (k, &c) in coils.iter().enumerate() {
        subset[k * n..(k + 1) * n].copy_from_slice(&s[c * n..(c + 1) * n]);
    }
    let [nx, ny, nz] = sizes.dims;
    let sub = Sizes::new(
        nx as i64,
        ny as i64,
        nz as i64,
        coils.len() as i64,
        sizes.samples as i64,
    )?;
    Ok(Some(CoilSubset {
        coils,
        sensitivities: subset,
        sizes: sub,
    }))
}

/// Random probes from the toolkit's seeded generator.
struct Probes(SimRng);

impl Probes {
    fn vector(&mut self, len: usize, what: &str) -> Result<Vec<Complex32>> {
        let mut out = try_vec(len, Complex32::new(0.0, 0.0), what)?;
        for x in out.iter_mut() {
            *x = Complex32::new(self.0.normal() as f32, self.0.normal() as f32);
        }
        Ok(out)
    }
    /// `count` distinct sorted indices of 0..total (all when total ≤ count).
    fn subset(&mut self, total: usize, count: usize) -> Vec<usize> {
        if total <= count {
            return (0..total).collect();
        }
        let mut picked = std::collections::BTreeSet::new();
        while picked.len() < count {
            picked.insert((self.0.next_u64() % total as u64) as usize);
        }
        picked.into_iter().collect()
    }
}

/// ‖a − b‖/‖b‖.
fn relative(a: &[Complex32], b: &[Complex32]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm_sqr() as f64)
        .sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr() as f64).sum();
    if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    }
}

/// The estimated relative error of `fast` against the exact operator of
/// `features` (the plan's model) on `backend`.
pub fn estimate(
    fast: &dyn EncodingOperator,
    features: &Features,
    sizes: Sizes,
    backend: BackendKind,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<f64> {
    let Sizes {
        voxels: n,
        samples: m,
        coils,
        ..
    } = sizes;
    let f = features.terms;
    let exact_options = Options {
        precision: Precision::Double,
        ..*options
    };
    let mut rng = Probes(SimRng::new(
        0x005E_ED0F_FA57 ^ ((n as u64) << 20) ^ m as u64,
    ));

    // Rows: E x at the probed samples, all coils.
    let image = rng.vector(n, "probe image (N)")?;
    let mut fast_data = try_vec(m * coils, Complex32::new(0.0, 0.0), "probe data (M x L)")?;
    fast.forward(&image, &mut fast_data)?;
    let rows = rng.subset(m, PROBES);
    let r = rows.len();
    let mut sample = try_vec(f * r, 0.0f64, "probe sample features")?;
    for t in 0..f {
        for (i, &j) in rows.iter().enumerate() {
            sample[t * r + i] = features.sample[t * m + j];
        }
    }
    let row_model = Features {
        terms: f,
        voxel: crate::error::try_copy(&features.voxel, "probe voxel features")?,
        sample,
        sensitivities: match &features.sensitivities {
            Some(s) => Some(crate::error::try_copy(s, "probe sensitivities")?),
            None => None,
        },
    };
    let [nx, ny, nz] = sizes.dims;
    let row_sizes = Sizes::new(nx as i64, ny as i64, nz as i64, coils as i64, r as i64)?;
    let exact = backend::build(backend, &row_model, row_sizes, &exact_options, pool.clone())?;
    let mut exact_rows = try_vec(r * coils, Complex32::new(0.0, 0.0), "exact rows")?;
    exact.forward(&image, &mut exact_rows)?;
    drop(exact);
    let mut fast_rows = try_vec(r * coils, Complex32::new(0.0, 0.0), "fast rows")?;
    for c in 0..coils {
        for (i, &j) in rows.iter().enumerate() {
            fast_rows[c * r + i] = fast_data[c * m + j];
        }
    }
    let forward_error = relative(&fast_rows, &exact_rows);

    // Voxels: Eᴴ d at the probed voxels.
    let data = rng.vector(m * coils, "probe data (M x L)")?;
    let mut fast_image = try_vec(n, Complex32::new(0.0, 0.0), "probe image (N)")?;
    fast.adjoint(&data, &mut fast_image)?;
    let voxels = rng.subset(n, PROBES);
    let q = voxels.len();
    let mut voxel = try_vec(f * q, 0.0f64, "probe voxel features")?;
    for t in 0..f {
        for (i, &v) in voxels.iter().enumerate() {
            voxel[t * q + i] = features.voxel[t * n + v];
        }
    }
    let sensitivities = match &features.sensitivities {
        None => None,
        Some(s) => {
            let mut out = try_vec(q * coils, Complex32::new(0.0, 0.0), "probe sensitivities")?;
            for c in 0..coils {
                for (i, &v) in voxels.iter().enumerate() {
                    out[c * q + i] = s[c * n + v];
                }
            }
            Some(out)
        }
    };
    let voxel_model = Features {
        terms: f,
        voxel,
        sample: crate::error::try_copy(&features.sample, "probe sample features")?,
        sensitivities,
    };
    let voxel_sizes = Sizes::new(q as i64, 1, 1, coils as i64, m as i64)?;
    let exact = backend::build(backend, &voxel_model, voxel_sizes, &exact_options, pool)?;
    let mut exact_voxels = try_vec(q, Complex32::new(0.0, 0.0), "exact voxels")?;
    exact.adjoint(&data, &mut exact_voxels)?;
    let fast_voxels: Vec<Complex32> = voxels.iter().map(|&v| fast_image[v]).collect();
    let adjoint_error = relative(&fast_voxels, &exact_voxels);
    Ok(forward_error.max(adjoint_error))
}
