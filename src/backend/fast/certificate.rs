//! The fast path's certificate (FAST-PATH.md §5): its error measured, not
//! predicted, with sparse random probes so that the exact reference is a
//! small sub-model.
//!
//! Points: V (voxels where the forward probe is nonzero), R (samples
//! compared), T (samples where the adjoint probe is nonzero) and Q (voxels
//! compared) are each a set of fixed points plus points drawn stratified
//! among the others (one in each of equal runs of the index, so the whole
//! field of view and readout are covered). The fixed voxels are those where
//! each voxel feature is smallest and largest (the corners of the field of
//! view for higher-order terms, where the expansion errs most) and the
//! [`suspects`]; the fixed samples those where each sample feature is (the
//! ends of the readout, the edges of k-space). A fixed point has the weight
//! w = 1, a drawn one the length of its run (all 1 where every point is
//! taken), so that the sums below are unbiased sums over all voxels and
//! samples (Horvitz–Thompson). (Counted like drawn voxels, the 10–32
//! corners of a rough model weighed ~N/|Q| times their share: certificates
//! 3–5× above the true error, and plans that met their tolerance left
//! exact.)
//!
//! Forward: an image x on V (zero elsewhere) with independent complex normal
//! values of variance ∝ w_v, compared at the rows R:
//!
//! $$\hat\varepsilon_E^2 = \frac{\sum_{c}\sum_{j\in R} w_j |(\tilde E x)_{j,c} - (E x)_{j,c}|^2}
//!                              {\sum_{j\in R} w_j \sum_{v\in V} |x_v|^2 \sum_c |S_c(r_v)|^2}.$$
//!
//! The denominator is the mean of the weighted ‖(Ex)_R‖² over the phases of
//! x, exact because every entry of E has modulus |S_c(r_v)|: unlike
//! ‖(Ex)_R‖² itself it does not fluctuate where E_{R,V} has few large
//! singular values (a phase that barely varies over the voxels makes E
//! nearly rank one, and ‖(Ex)_R‖² of one probe then ranges over orders of
//! magnitude). Over the probes, numerator and denominator are the weighted
//! sums Σ_{j∈R} Σ_{v∈V} w_j w_v |(Ẽ − E)_{j,v}|² and the same of |E_{j,v}|²,
//! whose expectations over the draws are the full ‖Ẽ − E‖_F² and ‖E‖_F²:
//! ε̂_E is a consistent estimate of the relative RMS error of E on random
//! images, ‖Ẽ − E‖_F/‖E‖_F. Adjoint: data d on T (all coils, variance ∝
//! w_j), the image compared at Q, the same way (denominator
//! Σ_{v∈Q} w_v Σ_c |S_c(r_v)|² Σ_{j∈T} |d_{j,c}|²). Both sums, above and
//! below, run over [`probe_count`] independent probes (up to [`MAX_PROBES`]
//! on small plans, where E_{R,V} may have few large singular values and one
//! probe's error few degrees of freedom). The certificate is
//! max(ε̂_E, ε̂_Eᴴ).
//!
//! How the fast operator is applied is the
//! [`Probe`]'s: on CUDA the plan's own operator once each way (all coils,
//! [`Whole`]); on the CPU, where an application costs ∝ L·M (K fine-grid
//! FFTs per coil and direction), the operator's entries at the compared
//! points only ([`Entries`]: the matrix of its NUFFT, [`NufftMatrix`], at
//! R or T, with the operator's factors: ho3d-77k's 2 × 1.2 M entries cost
//! less than the 2 × 14 fine-grid FFTs of its rows did) for one coil, the
//! coils' root sum of squares S_p = (Σ_c |S_c|²)^{1/2} ([`probed_coil`]) —
//! the same numbers as [`Whole`]'s for that coil, but for the FFTs'
//! float32 rounding. Both operators take the coil map as a factor,
//! Ẽ_c − E_c = (Ẽ₁ − E₁)·diag(S_c) with Ẽ₁, E₁ those of a coil S ≡ 1, so
//! every quantity above depends on the coils only through Σ_c |S_c(r_v)|²
//! per voxel: S_p gives the all-coil ratios exactly, at the cost of one coil.
//! (A random combination Σ_c w_c S_c gives them only on average over w; one
//! draw weighted the voxels by |Σ_c w_c S_c|², and on a 5-voxel plan of 3
//! coils the certificate came out 3.1× below the true error.)
//! The exact references are the CPU's exact operator in DOUBLE precision on
//! the sub-models R×V and Q×T (at most [`PROBES`]·[`VOXEL_SUPPORT`]·L and
//! [`PROBES`]·[`SAMPLE_SUPPORT`]·L pairs), on every backend: a few million
//! pairs take milliseconds on the plan's threads (bieri-512's certificate on
//! an H100 host: 18–25 ms, against 73–145 ms with CUDA's double-precision
//! exact operators, most of that plan's set-up).

use super::{gather, FastOperator};
use crate::backend;
use crate::backend::cpu::kernel::on_widest_isa;
use crate::error::{try_vec, Result};
use crate::model::separation::expansion::{even, extreme_indices};
use crate::model::separation::Separation;
use crate::model::{coil_energy, Features, Sizes};
use crate::nufft::cpu::matrix::NufftMatrix;
use crate::op::{EncodingOperator, Precision};
use crate::plan::{BackendKind, Options};
use crate::sim::noise::SimRng;
use faer::{c64, Mat};
use num_complex::{Complex32, Complex64};
use rayon::prelude::*;
use std::sync::Arc;

/// Samples (rows of E) and voxels (columns) where the results are compared.
pub const PROBES: usize = 256;
/// Voxels on which the forward probe is nonzero: as for the adjoint's
/// [`SAMPLE_SUPPORT`], the estimate's spread comes from the [`PROBES`] rows
/// compared (15 random plans of ~20,000 voxels, `the_sparse_certificate_is_honest_on_larger_plans`'s:
/// certificate/true 0.68–1.05 with 4,096, 0.71–1.09 with 16,384), and the
/// CPU's entries and the exact references cost ∝ their number.
pub const VOXEL_SUPPORT: usize = 4096;
/// Random probes per direction at most ([`probe_count`]).
pub const MAX_PROBES: usize = 8;
/// K·(lattice points) from which one probe per direction is used ([`probe_count`]).
pub const PROBE_WORK: usize = 1 << 20;
/// Samples on which the adjoint probe is nonzero: the estimate's spread
/// comes from the [`PROBES`] voxels compared, not from these, and on the CPU
/// the fast adjoint's entries cost ∝ their number.
pub const SAMPLE_SUPPORT: usize = 4096;

/// The probed coil of a plan with more than one coil,
/// S_p(r) = (Σ_c |S_c(r)|²)^{1/2} (module documentation).
struct ProbedCoil {
    /// S_p, N values.
    sensitivities: Vec<Complex32>,
    /// The sizes of that one-coil sub-model.
    sizes: Sizes,
}

/// The probed coil of a plan with several coils; `None` for one coil or none.
fn probed_coil(sensitivities: Option<&[Complex32]>, sizes: Sizes) -> Result<Option<ProbedCoil>> {
    let (Some(s), true) = (sensitivities, sizes.coils > 1) else {
        return Ok(None);
    };
    let n = sizes.voxels;
    let mut combined = try_vec(n, Complex32::new(0.0, 0.0), "probe sensitivities (N)")?;
    combined.par_iter_mut().enumerate().for_each(|(v, out)| {
        *out = Complex32::new(coil_energy(s, n, v).sqrt() as f32, 0.0);
    });
    let [nx, ny, nz] = sizes.dims;
    let sub = Sizes::new(nx as i64, ny as i64, nz as i64, 1, sizes.samples as i64)?;
    Ok(Some(ProbedCoil {
        sensitivities: combined,
        sizes: sub,
    }))
}

/// The fast operator as the certificate applies it (module documentation).
pub trait Probe {
    /// L, the coils probed.
    fn coils(&self) -> usize;
    /// (Ẽx)_{j,c} at the samples j ∈ `rows` (sorted) for the image x that is
    /// `values` on the voxels `support` (sorted) and zero elsewhere,
    /// |rows|×L (coil-major).
    fn forward_rows(
        &self,
        support: &[usize],
        values: &[Complex32],
        rows: &[usize],
    ) -> Result<Vec<Complex32>>;
    /// (Ẽᴴd)_v at the voxels v ∈ `voxels` (sorted) for d nonzero only at the
    /// samples `samples` (sorted), where it is `values` (|samples|×L,
    /// coil-major).
    fn adjoint_at(
        &self,
        samples: &[usize],
        values: &[Complex32],
        voxels: &[usize],
    ) -> Result<Vec<Complex32>>;
    /// Whether the two directions may run at once (the CPU's entries: on
    /// the plan's threads; a device operator is applied one call at a time).
    fn concurrent(&self) -> bool {
        false
    }
}

/// A whole operator of sizes `.1` (any backend): applied in full, the rows
/// gathered from its output and the data scattered into its input.
pub struct Whole<'a>(pub &'a dyn EncodingOperator, pub Sizes);

impl Probe for Whole<'_> {
    fn coils(&self) -> usize {
        self.1.coils
    }

    fn forward_rows(
        &self,
        support: &[usize],
        values: &[Complex32],
        rows: &[usize],
    ) -> Result<Vec<Complex32>> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.1;
        let zero = Complex32::new(0.0, 0.0);
        let mut image = try_vec(n, zero, "probe image (N)")?;
        for (&v, &x) in support.iter().zip(values) {
            image[v] = x;
        }
        let mut data = try_vec(m * coils, zero, "probe data (M x L)")?;
        self.0.forward(&image, &mut data)?;
        gather(&data, m, rows, "fast rows")
    }

    fn adjoint_at(
        &self,
        samples: &[usize],
        values: &[Complex32],
        voxels: &[usize],
    ) -> Result<Vec<Complex32>> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.1;
        let zero = Complex32::new(0.0, 0.0);
        let mut data = try_vec(m * coils, zero, "probe data (M x L)")?;
        for (c, column) in values.chunks_exact(samples.len().max(1)).enumerate() {
            for (&j, &x) in samples.iter().zip(column) {
                data[c * m + j] = x;
            }
        }
        let mut image = try_vec(n, zero, "probe image (N)")?;
        self.0.adjoint(&data, &mut image)?;
        gather(&image, n, voxels, "fast voxels")
    }
}

/// Entries of the NUFFT's matrix per block of [`Entries`]' products (whole
/// columns, at least one).
const ENTRY_BLOCK: usize = 1 << 18;

/// A CPU fast operator's entries for some coils (module documentation),
///
/// $$\tilde E_{(j,c),v} = \sum_l \tilde a_l(t_j)\, G_{j,v}\, b_l(r_v)\, S_c(r_v),$$
///
/// G the matrix of its NUFFT ([`NufftMatrix`]) at the compared samples;
/// `points` are the separation's (ndims×M), `sensitivities` the probed
/// coils' (N×C; `None` = the plan's maps the operator holds, which are its
/// own unless it runs on compressed virtual coils: one-coil plans never do).
/// Blocks of whole columns of G, about [`ENTRY_BLOCK`] entries each, meet
/// the factors in matrix products (faer).
pub struct Entries<'a> {
    pub operator: &'a FastOperator,
    pub points: &'a [f64],
    pub sensitivities: Option<&'a [Complex32]>,
}

impl Entries<'_> {
    /// The probed coils' maps (N×C), `None` = S ≡ 1.
    fn maps(&self) -> Option<&[Complex32]> {
        self.sensitivities
            .or(self.operator.sensitivities.as_deref())
    }

    /// S_c(r_v), 1 without maps.
    fn sensitivity(&self, c: usize, v: usize) -> Complex32 {
        let n = self.operator.sizes.voxels;
        self.maps()
            .map_or(Complex32::new(1.0, 0.0), |s| s[c * n + v])
    }

    /// N, M, K, the coils probed and the products' width K × coils.
    fn shape(&self) -> [usize; 5] {
        let (sizes, coils) = (self.operator.sizes, self.coils());
        let k = self.operator.rank;
        [sizes.voxels, sizes.samples, k, coils, k * coils]
    }

    /// G at the samples `at`.
    fn matrix(&self, at: &[usize]) -> Result<NufftMatrix<f32>> {
        let op = self.operator;
        let m = op.sizes.samples;
        if self.points.len() != op.nufft.modes.ndims * m || at.iter().any(|&j| j >= m) {
            return Err(crate::error::Error::internal(format!(
                "entries of a fast operator with {m} samples: {} points, samples up to {:?}",
                self.points.len(),
                at.iter().max()
            )));
        }
        let spec = op.nufft.forward_spec()?;
        NufftMatrix::new(
            &spec,
            &gather(self.points, m, at, "probe points")?,
            at.len(),
        )
    }

    /// Σ over blocks of `voxels` of G(block) · rhs(block) into `out`
    /// (|points|×width, row-major), G(block) the block's columns of G at
    /// `g`'s points and rhs(block) the block's rows of `rhs` (|voxels|×width,
    /// row-major); for the `adjoint`, out (|voxels|×width) = the blocks of Gᴴ
    /// times `rhs` (|points|×width) instead.
    fn products(
        &self,
        g: &NufftMatrix<f32>,
        (voxels, adjoint): (&[usize], bool),
        (rhs, width): (&[Complex32], usize),
        out: &mut [Complex32],
    ) -> Result<()> {
        use faer::linalg::matmul::matmul;
        use faer::{Accum, MatMut, MatRef, Par};
        let p = g.points();
        let zero = Complex32::new(0.0, 0.0);
        let per_block = (ENTRY_BLOCK / p.max(1)).clamp(1, voxels.len().max(1));
        let mut block = try_vec(p * per_block, zero, "NUFFT matrix block")?;
        let one = Complex32::new(1.0, 0.0);
        for (b, chunk) in voxels.chunks(per_block).enumerate() {
            let columns = &mut block[..p * chunk.len()];
            columns
                .par_chunks_mut(p.max(1))
                .zip(chunk)
                .for_each(|(column, &v)| g.column(self.operator.grid_index(v), adjoint, column));
            let columns = MatRef::from_column_major_slice(columns, p, chunk.len());
            let rows = b * per_block..b * per_block + chunk.len();
            if adjoint {
                let part = &mut out[rows.start * width..rows.end * width];
                let dst = MatMut::from_row_major_slice_mut(part, chunk.len(), width);
                let rhs = MatRef::from_row_major_slice(rhs, p, width);
                matmul(
                    dst,
                    Accum::Replace,
                    columns.transpose(),
                    rhs,
                    one,
                    Par::rayon(0),
                );
            } else {
                let dst = MatMut::from_row_major_slice_mut(out, p, width);
                let rhs = MatRef::from_row_major_slice(
                    &rhs[rows.start * width..rows.end * width],
                    chunk.len(),
                    width,
                );
                let accum = if b == 0 { Accum::Replace } else { Accum::Add };
                matmul(dst, accum, columns, rhs, one, Par::rayon(0));
            }
        }
        Ok(())
    }
}

impl Probe for Entries<'_> {
    fn coils(&self) -> usize {
        let sizes = self.operator.sizes;
        self.sensitivities
            .map_or(sizes.coils, |s| s.len() / sizes.voxels.max(1))
    }

    /// y_{j,c} = Σ_l ã_l(t_j) Σ_v G_{j,v} · b_l(r_v) S_c(r_v) x_v.
    fn forward_rows(
        &self,
        support: &[usize],
        values: &[Complex32],
        rows: &[usize],
    ) -> Result<Vec<Complex32>> {
        let (op, [n, m, k, coils, width]) = (self.operator, self.shape());
        let zero = Complex32::new(0.0, 0.0);
        let g = self.matrix(rows)?;
        // Z_{v,(c,l)} = b_l(r_v) S_c(r_v) x_v.
        let mut z = try_vec(support.len() * width, zero, "probe factors (V x L·K)")?;
        z.par_chunks_mut(width.max(1))
            .zip(support.par_iter().zip(values))
            .for_each(|(row, (&v, &x))| {
                for (i, out) in row.iter_mut().enumerate() {
                    let (c, l) = (i / k, i % k);
                    *out = op.spatial[l * n + v] * self.sensitivity(c, v) * x;
                }
            });
        let mut y = try_vec(rows.len() * width, zero, "probe products (R x L·K)")?;
        self.products(&g, (support, false), (&z, width), &mut y)?;
        let mut out = try_vec(rows.len() * coils, zero, "fast rows")?;
        for (c, column) in out.chunks_exact_mut(rows.len().max(1)).enumerate() {
            for (r, (o, &j)) in column.iter_mut().zip(rows).enumerate() {
                let products = &y[r * width + c * k..r * width + (c + 1) * k];
                *o = products
                    .iter()
                    .enumerate()
                    .map(|(l, p)| op.temporal[l * m + j] * p)
                    .sum();
            }
        }
        Ok(out)
    }

    /// x_v = Σ_c S̄_c(r_v) Σ_l b̄_l(r_v) Σ_j Ḡ_{j,v} · ã̄_l(t_j) d_{j,c}.
    fn adjoint_at(
        &self,
        samples: &[usize],
        values: &[Complex32],
        voxels: &[usize],
    ) -> Result<Vec<Complex32>> {
        let (op, [n, m, k, coils, width]) = (self.operator, self.shape());
        let zero = Complex32::new(0.0, 0.0);
        let g = self.matrix(samples)?;
        // D_{j,(c,l)} = ã̄_l(t_j) d_{j,c}.
        let t = samples.len();
        let mut d = try_vec(t * width, zero, "probe factors (T x L·K)")?;
        d.par_chunks_mut(width.max(1))
            .enumerate()
            .for_each(|(i, row)| {
                for (w, out) in row.iter_mut().enumerate() {
                    let (c, l) = (w / k, w % k);
                    *out = op.temporal[l * m + samples[i]].conj() * values[c * t + i];
                }
            });
        let mut x = try_vec(voxels.len() * width, zero, "probe products (Q x L·K)")?;
        self.products(&g, (voxels, true), (&d, width), &mut x)?;
        Ok(voxels
            .iter()
            .zip(x.chunks_exact(width.max(1)))
            .map(|(&v, products)| {
                (0..coils)
                    .map(|c| {
                        let image: Complex32 = (0..k)
                            .map(|l| op.spatial[l * n + v].conj() * products[c * k + l])
                            .sum();
                        self.sensitivity(c, v).conj() * image
                    })
                    .sum()
            })
            .collect())
    }

    fn concurrent(&self) -> bool {
        true
    }
}

/// Voxels that [`suspects`] scans: all up to this many, else this many
/// spread evenly over the index.
pub const SUSPECT_SCAN: usize = 1 << 17;
/// Suspects compared with the corners ([`suspects`]).
pub const SUSPECTS: usize = 32;
/// Times (evenly spread) over which [`suspects`] measures each voxel.
const SUSPECT_TIMES: usize = 256;
/// Voxels per task of [`suspects`].
const SUSPECT_BLOCK: usize = 1024;

/// The [`SUSPECTS`] voxels where the expansion most likely errs most: at a
/// voxel n the approximation of the unit phasors exp(iψ(t, n)) over T
/// times is A·b(n) (A the T×K values a_l(t), b(n) the K values b_l(n)), so
/// its RMS error there is at least |1 − ‖A b(n)‖/√T| = |1 − ‖R b(n)‖|,
/// R the triangular factor of A/√T. Ranked by that bound squared times
/// the voxel's weight Σ_c |S_c|², over every voxel where `spatial` is
/// given, else over the voxels [`SUSPECT_SCAN`] allows.
/// A voxel whose combination of basis values the expansion's samples never
/// saw gets factors of the wrong size: a rough model (16 harmonics of
/// ~15 rad, a noisy 325 Hz map, 10,201 voxels) carried 93 % of its error on
/// one such voxel, which the drawn voxels of the certificate missed (it
/// measured 0.47 of the true error, 1.09 of the tolerance); this bound put
/// that voxel first, 55× above the next. `spatial` = b_l(n) at every voxel
/// (K×N, point fastest) where the caller has them (then every voxel is
/// scanned), else they are evaluated at the scanned voxels.
pub fn suspects(
    separation: &Separation,
    spatial: Option<&[Complex32]>,
    sensitivities: Option<&[Complex32]>,
) -> Result<Vec<usize>> {
    let (k, n, m) = (
        separation.rank,
        separation.spatial.count,
        separation.temporal.count,
    );
    let terms = separation.residual_terms;
    if terms == 0 || k == 0 || n <= SUSPECTS {
        return Ok(Vec::new());
    }
    // R of A/√T at evenly spread times (the offset phase leaves |A b| as it is).
    let times = even(m, SUSPECT_TIMES);
    let temporal = &separation.temporal;
    let a = temporal.skeleton.evaluate_all(
        times.len(),
        &gather(&temporal.features, m, &times, "suspect times' features")?,
        None,
        |v| v,
        "suspect times' a_l(t)",
    )?;
    let root = (times.len() as f64).sqrt();
    let scaled = Mat::<c64>::from_fn(times.len(), k, |t, l| {
        let v = a[l * times.len() + t] / root;
        c64::new(v.re, v.im)
    });
    let r = scaled.qr().thin_R().to_owned();
    let rows = r.nrows().min(k);
    let r: Vec<Complex64> = (0..rows * k)
        .map(|i| {
            let v = r[(i / k, i % k)];
            Complex64::new(v.re, v.im)
        })
        .collect();
    // b_l at the scanned voxels (K×count, point fastest).
    let held = spatial.filter(|values| values.len() == k * n);
    let scanned = even(n, if held.is_some() { n } else { SUSPECT_SCAN });
    let evaluated;
    let (b, stride): (&[Complex32], usize) = match held {
        Some(values) => (values, n),
        None => {
            let space = &separation.spatial;
            evaluated = space.skeleton.evaluate_all(
                scanned.len(),
                &gather(&space.features, n, &scanned, "suspect voxels' features")?,
                None,
                crate::backend::cpu::narrow::<f64>,
                "suspect voxels' b_l(n)",
            )?;
            (&evaluated, scanned.len())
        }
    };
    // ‖R b(n)‖² in blocks of voxels: per row of R, Σ_l R_{row,l} b_l over
    // the block at once (vectorised over the voxels).
    let mut scores: Vec<(f64, usize)> = scanned
        .par_chunks(SUSPECT_BLOCK)
        .enumerate()
        .flat_map_iter(|(block, voxels)| {
            let first = block * SUSPECT_BLOCK;
            let len = voxels.len();
            let (mut y_re, mut y_im, mut norm) = (vec![0.0; len], vec![0.0; len], vec![0.0; len]);
            on_widest_isa(
                #[inline(always)]
                || {
                    for row in 0..rows {
                        y_re.fill(0.0);
                        y_im.fill(0.0);
                        for l in row..k {
                            let c = r[row * k + l];
                            let values = &b[l * stride + first..l * stride + first + len];
                            for ((re, im), x) in y_re.iter_mut().zip(&mut y_im).zip(values) {
                                let (xr, xi) = (x.re as f64, x.im as f64);
                                *re += c.re * xr - c.im * xi;
                                *im += c.re * xi + c.im * xr;
                            }
                        }
                        for ((s, re), im) in norm.iter_mut().zip(&y_re).zip(&y_im) {
                            *s += re * re + im * im;
                        }
                    }
                },
            );
            voxels.iter().zip(norm).map(move |(&v, norm)| {
                let weight = sensitivities.map_or(1.0, |s| coil_energy(s, n, v));
                (weight * (1.0 - norm.sqrt()).powi(2), v)
            })
        })
        .collect();
    // Non-finite scores (factors that overflowed) would crowd out the rest.
    scores.retain(|(score, _)| score.is_finite());
    let keep = SUSPECTS.min(scores.len());
    if keep < scores.len() {
        scores.select_nth_unstable_by(keep - 1, |x, y| y.0.total_cmp(&x.0));
    }
    Ok(scores[..keep].iter().map(|&(_, v)| v).collect())
}

/// Outputs per probe, min(N, M·L), below which a plan has few outputs
/// ([`few_outputs`]).
pub const FEW_OUTPUTS: usize = 4096;

/// Whether a plan of `sizes` has fewer than [`FEW_OUTPUTS`] outputs per
/// probe: E then has few large singular values, one image's or data set's
/// error strays from the RMS (`plan::approximation` builds such plans for a
/// third of the tolerance) and so does one probe's.
pub fn few_outputs(sizes: Sizes) -> bool {
    let outputs = sizes
        .voxels
        .min(sizes.samples.saturating_mul(sizes.coils.max(1)));
    outputs < FEW_OUTPUTS
}

/// Random probes per direction for a fast operator of rank K on a lattice
/// of `grid_points` points: ⌊[`PROBE_WORK`] / (K·points)⌋ within
/// 1 … [`MAX_PROBES`], so [`MAX_PROBES`] on small plans, where each costs
/// little and E_{R,V} may have few large singular values (a phase that
/// hardly varies over the voxels: one probe's squared error then ranges
/// over orders of magnitude), and one from K·points > [`PROBE_WORK`]/2 up
/// (any scan with gradient encoding gives E_{R,V} many comparable singular
/// values there, and the benchmarks' set-up stays as it was).
/// [`MAX_PROBES`] wherever a plan of `sizes` has [`few_outputs`]: with 2 or
/// 3 probes such a plan (N = 7,656, M·L = 1,580, K = 49) measured 0.46× its
/// true error, with 8 probes 1.0× (fuzzing, 220 served plans: the lowest
/// ratio 0.46 → 0.78).
pub fn probe_count(rank: usize, grid_points: usize, sizes: Sizes) -> usize {
    if few_outputs(sizes) {
        return MAX_PROBES;
    }
    (PROBE_WORK / rank.max(1).saturating_mul(grid_points.max(1))).clamp(1, MAX_PROBES)
}

/// The certificate of a CPU fast operator of `separation` (the plan's
/// model: `features`, `sizes`) through its entries ([`Entries`]) for one
/// coil ([`probed_coil`]), `probes` per direction ([`probe_count`]), with
/// its [`suspects`]; exact references on the CPU.
pub fn estimate_by_entries(
    fast: &FastOperator,
    separation: &Separation,
    (features, sizes): (Features, Sizes),
    probes: usize,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<f64> {
    let suspects = suspects(
        separation,
        Some(&fast.spatial),
        features.sensitivities.as_deref(),
    )?;
    let (features, sizes) = match probed_coil(features.sensitivities.as_deref(), sizes)? {
        None => (features, sizes),
        Some(subset) => (
            Features {
                sensitivities: Some(subset.sensitivities.into()),
                ..features
            },
            subset.sizes,
        ),
    };
    let entries = Entries {
        operator: fast,
        points: &separation.points,
        // None: the operator's own coil (a one-coil plan).
        sensitivities: if sizes.coils == fast.sizes.coils {
            None
        } else {
            features.sensitivities.as_deref()
        },
    };
    estimate(
        &entries,
        (&features, sizes),
        &suspects,
        probes,
        options,
        pool,
    )
}

/// Random probes from the toolkit's seeded generator.
struct Probes(SimRng);

impl Probes {
    fn normal(&mut self) -> Complex32 {
        Complex32::new(self.0.normal() as f32, self.0.normal() as f32)
    }

    /// `count` sorted indices of 0..total, one drawn uniformly in each of
    /// `count` equal runs, with the runs' lengths (all, each 1, when
    /// total ≤ count).
    fn runs(&mut self, total: usize, count: usize) -> Vec<(usize, f64)> {
        if total <= count {
            return (0..total).map(|i| (i, 1.0)).collect();
        }
        (0..count)
            .map(|i| {
                let (lo, hi) = (i * total / count, (i + 1) * total / count);
                let drawn = lo + (self.0.next_u64() % (hi - lo) as u64) as usize;
                (drawn, (hi - lo) as f64)
            })
            .collect()
    }

    /// The indices `fixed` (sorted, without repeats) and `count` more drawn
    /// stratified among the other total − |fixed|, sorted, with the weights
    /// of an unbiased sum over all `total`: 1 for a fixed index, its run's
    /// length for a drawn one (module documentation).
    fn with_fixed(
        &mut self,
        total: usize,
        count: usize,
        fixed: &[usize],
    ) -> (Vec<usize>, Vec<f64>) {
        debug_assert!(
            fixed.windows(2).all(|w| w[0] < w[1]) && fixed.last().is_none_or(|&v| v < total)
        );
        // The p-th index not in `fixed`, for ascending p (a merge walk).
        let mut skipped = 0;
        let mut others: Vec<(usize, f64)> = self
            .runs(total - fixed.len(), count)
            .into_iter()
            .map(|(p, weight)| {
                while skipped < fixed.len() && fixed[skipped] <= p + skipped {
                    skipped += 1;
                }
                (p + skipped, weight)
            })
            .collect();
        others.extend(fixed.iter().map(|&v| (v, 1.0)));
        others.sort_unstable_by_key(|&(v, _)| v);
        others.into_iter().unzip()
    }
}

/// The points where each of the F features (F×n: voxels' or samples') is
/// smallest and largest.
fn extremes(features: &[f64], n: usize) -> Vec<usize> {
    features
        .par_chunks_exact(n.max(1))
        .flat_map_iter(|column| {
            let (lo, hi) = extreme_indices(column);
            [lo, hi]
        })
        .collect()
}

/// `indices` sorted and without repeats.
fn sorted(mut indices: Vec<usize>) -> Vec<usize> {
    indices.sort_unstable();
    indices.dedup();
    indices
}

/// The squared differences of fast and exact results over a direction's
/// probes and the sum of their expected exact energies.
#[derive(Default)]
struct Pooled {
    difference: f64,
    expected: f64,
}

impl Pooled {
    /// One probe: fast results `a`, exact `b`, and the mean of ‖b‖² over
    /// the probe's phases (module documentation).
    fn add(&mut self, a: &[Complex32], b: &[Complex32], expected: f64) {
        self.difference += a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm_sqr() as f64)
            .sum::<f64>();
        self.expected += expected;
    }

    /// sqrt(Σ‖a − b‖² / Σ expected); the absolute difference where nothing is expected.
    fn relative(&self) -> f64 {
        if self.expected > 0.0 {
            (self.difference / self.expected).sqrt()
        } else {
            self.difference.sqrt()
        }
    }
}

/// a_i and b_i times √w_i: compared values that count w_i times.
fn scale(a: &mut [Complex32], b: &mut [Complex32], weights: &[f64]) {
    for ((a, b), w) in a.iter_mut().zip(b).zip(weights) {
        let root = w.sqrt() as f32;
        *a *= root;
        *b *= root;
    }
}

/// Σ_i a_i Σ_c b_c |S_c(r_{v_i})|² over the voxels v_i of `voxels` (with
/// weights a = `voxel_weights`) and the coils c (b = `coil_weights`), S ≡ 1
/// when `sensitivities` (N×L) is `None`: the mean of ‖Ex‖² or ‖Eᴴd‖² over
/// the probe's phases, as |E_{(j,c),v}| = |S_c(r_v)| (module documentation).
fn expected_energy(
    sensitivities: Option<&[Complex32]>,
    n: usize,
    (voxels, voxel_weights): (&[usize], &[f64]),
    coil_weights: &[f64],
) -> f64 {
    let coil = |c: usize, v: usize| sensitivities.map_or(1.0, |s| s[c * n + v].norm_sqr() as f64);
    voxels
        .iter()
        .zip(voxel_weights)
        .map(|(&v, a)| {
            a * coil_weights
                .iter()
                .enumerate()
                .map(|(c, b)| b * coil(c, v))
                .sum::<f64>()
        })
        .sum()
}

/// The estimated relative error of `fast` (its coils' model: `features`,
/// `sizes`) against the exact operator (CPU, double precision), the voxels
/// `suspects` ([`suspects`]) compared with the corners.
pub fn estimate(
    fast: &(dyn Probe + Sync),
    (features, sizes): (&Features, Sizes),
    suspects: &[usize],
    probes: usize,
    options: &Options,
    pool: Arc<rayon::ThreadPool>,
) -> Result<f64> {
    let Sizes {
        voxels: n,
        samples: m,
        coils,
        ..
    } = sizes;
    if fast.coils() != coils {
        return Err(crate::error::Error::internal(format!(
            "certificate of {} coils probed with {}",
            coils,
            fast.coils()
        )));
    }
    let exact_options = Options {
        precision: Precision::Double,
        ..*options
    };
    let exact_operator = |model: &Features, sub: Sizes| {
        backend::build(BackendKind::Cpu, model, sub, &exact_options, pool.clone())
    };
    let mut rng = Probes(SimRng::new(
        0x005E_ED0F_FA57 ^ ((n as u64) << 20) ^ m as u64,
    ));
    let zero = Complex32::new(0.0, 0.0);
    let corners = {
        let mut fixed = extremes(&features.voxel, n);
        fixed.extend(suspects.iter().filter(|&&v| v < n));
        sorted(fixed)
    };
    let ends = sorted(extremes(&features.sample, m));
    let sub_model = |voxels: &[usize], samples: &[usize]| -> Result<(Features, Sizes)> {
        let model = Features {
            terms: features.terms,
            voxel: gather(&features.voxel, n, voxels, "probe voxel features")?.into(),
            sample: gather(&features.sample, m, samples, "probe sample features")?.into(),
            sensitivities: match &features.sensitivities {
                Some(s) => Some(gather(s, n, voxels, "probe sensitivities")?.into()),
                None => None,
            },
        };
        let sizes = Sizes::new(
            voxels.len() as i64,
            1,
            1,
            coils as i64,
            samples.len() as i64,
        )?;
        Ok((model, sizes))
    };

    // Every draw first, in the order the probes have always taken them (the
    // same plan, the same certificate), so that the directions may run at once.
    let sensitivities = features.sensitivities.as_deref();
    let (support, weights) = rng.with_fixed(n, VOXEL_SUPPORT, &corners);
    let (rows, row_weights) = rng.with_fixed(m, PROBES, &ends);
    // Var x_v ∝ w_v: E‖(Ẽ − E)_{R,V} x‖² ∝ Σ_v w_v ‖(Ẽ − E)_{R,v}‖².
    let images: Vec<Vec<Complex32>> = (0..probes)
        .map(|_| {
            weights
                .iter()
                .map(|w| rng.normal() * w.sqrt() as f32)
                .collect()
        })
        .collect();
    let (samples, sample_weights) = rng.with_fixed(m, SAMPLE_SUPPORT, &ends);
    let (voxels, voxel_weights) = rng.with_fixed(n, PROBES, &corners);
    // Var d_{j,c} ∝ w_j (each sample counts w_j times).
    let data: Vec<Vec<Complex32>> = (0..probes)
        .map(|_| {
            (0..coils)
                .flat_map(|_| sample_weights.iter())
                .map(|w| rng.normal() * w.sqrt() as f32)
                .collect()
        })
        .collect();

    // Forward: x on V, E x compared at the rows R (all coils).
    let forward = || -> Result<f64> {
        let (model, sub) = sub_model(&support, &rows)?;
        let exact = exact_operator(&model, sub)?;
        let all_coils = vec![row_weights.iter().sum::<f64>(); coils];
        let mut forward = Pooled::default();
        for values in &images {
            let mut fast_rows = fast.forward_rows(&support, values, &rows)?;
            let mut exact_rows = try_vec(rows.len() * coils, zero, "exact rows")?;
            exact.forward(values, &mut exact_rows)?;
            // Each compared row counts w_j times.
            for (a, b) in fast_rows
                .chunks_exact_mut(rows.len().max(1))
                .zip(exact_rows.chunks_exact_mut(rows.len().max(1)))
            {
                scale(a, b, &row_weights);
            }
            // E‖E_{R,V}x‖² = Σ_{j∈R} w_j·Σ_v |x_v|² Σ_c |S_c(v)|².
            let magnitudes: Vec<f64> = values.iter().map(|x| x.norm_sqr() as f64).collect();
            forward.add(
                &fast_rows,
                &exact_rows,
                expected_energy(sensitivities, n, (&support, &magnitudes), &all_coils),
            );
        }
        Ok(forward.relative())
    };

    // Adjoint: d on the samples T (all coils), Eᴴ d compared at the voxels Q.
    let adjoint = || -> Result<f64> {
        let (model, sub) = sub_model(&voxels, &samples)?;
        let exact = exact_operator(&model, sub)?;
        let mut adjoint = Pooled::default();
        for values in &data {
            let mut fast_voxels = fast.adjoint_at(&samples, values, &voxels)?;
            let mut exact_voxels = try_vec(voxels.len(), zero, "exact voxels")?;
            exact.adjoint(values, &mut exact_voxels)?;
            // Each compared voxel counts w_q times.
            scale(&mut fast_voxels, &mut exact_voxels, &voxel_weights);
            // E‖(Eᴴd)_Q‖² = Σ_{v∈Q} w_v Σ_c |S_c(v)|² Σ_j |d_{j,c}|².
            let data_energy: Vec<f64> = values
                .chunks_exact(samples.len().max(1))
                .map(|column| column.iter().map(|d| d.norm_sqr() as f64).sum())
                .collect();
            adjoint.add(
                &fast_voxels,
                &exact_voxels,
                expected_energy(sensitivities, n, (&voxels, &voxel_weights), &data_energy),
            );
        }
        Ok(adjoint.relative())
    };

    let (forward, adjoint) = if fast.concurrent() {
        pool.install(|| rayon::join(forward, adjoint))
    } else {
        (forward(), adjoint())
    };
    Ok(forward?.max(adjoint?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stratified_draws_cover_every_run_once() {
        let mut rng = Probes(SimRng::new(5));
        let picked = rng.runs(1000, 7);
        assert_eq!(picked.len(), 7);
        for (i, &(v, length)) in picked.iter().enumerate() {
            let (lo, hi) = (i * 1000 / 7, (i + 1) * 1000 / 7);
            assert!(v >= lo && v < hi, "{i}: {v}");
            assert_eq!(length, (hi - lo) as f64);
        }
        let all: Vec<usize> = rng.runs(5, 7).into_iter().map(|(v, _)| v).collect();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn plans_with_few_outputs_take_the_most_probes() {
        let sizes = |voxels: i64, coils: i64, samples: i64| {
            Sizes::new(voxels, 1, 1, coils, samples).expect("sizes")
        };
        // Fewer than FEW_OUTPUTS voxels, or samples × coils: MAX_PROBES.
        assert_eq!(probe_count(49, 7656, sizes(7656, 4, 395)), MAX_PROBES);
        assert_eq!(probe_count(60, 4000, sizes(4000, 8, 5000)), MAX_PROBES);
        // Otherwise by the work: one for the ho3d-77k plan, more when small.
        assert_eq!(probe_count(14, 77440, sizes(77440, 6, 25813)), 1);
        assert_eq!(probe_count(10, 20000, sizes(20000, 2, 4096)), 5);
        assert!(few_outputs(sizes(100_000, 1, 4095)) && !few_outputs(sizes(4096, 1, 4096)));
    }

    #[test]
    fn fixed_points_count_once_and_drawn_ones_for_their_runs() {
        let mut rng = Probes(SimRng::new(9));
        for (n, count, fixed) in [
            (1000, 7, vec![0, 3, 999]),
            (50, 10, vec![]),
            (12, 10, vec![4, 5]),
            (12, 20, vec![11]),
        ] {
            let (voxels, weights) = rng.with_fixed(n, count, &fixed);
            assert!(voxels.windows(2).all(|w| w[0] < w[1]), "{voxels:?}");
            assert!(fixed.iter().all(|v| voxels.contains(v)));
            assert_eq!(voxels.len(), fixed.len() + count.min(n - fixed.len()));
            // The weights sum to N: each voxel is represented once.
            assert_eq!(weights.iter().sum::<f64>(), n as f64);
            for (v, w) in voxels.iter().zip(&weights) {
                if fixed.contains(v) {
                    assert_eq!(*w, 1.0, "fixed voxel {v}");
                }
            }
        }
    }

    #[test]
    fn gathers_columns_of_each_row() {
        let values: Vec<f64> = (0..12).map(|x| x as f64).collect();
        let out = gather(&values, 4, &[1, 3], "test").unwrap();
        assert_eq!(out, vec![1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
        assert!(gather::<f64>(&[], 4, &[1], "test").unwrap().is_empty());
    }
}
