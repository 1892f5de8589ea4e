//! The Toeplitz kernels of the L(L+1)/2 segment pairs from fewer NUFFTs.
//!
//! With time segmentation (`super::toeplitz`) the kernel of pair p = (l, l')
//! is the type-1 NUFFT of the column
//!
//!   A_p(j) = w_j·conj(a_l(t_j))·a_l'(t_j).
//!
//! The a_l are least-squares interpolators spanned by exp(iδt), |δ| ≤ R, so
//! their products are functions of t of bandwidth 4R over the readout: the
//! P = L(L+1)/2 columns have a numerical rank r well below P (9 segments over
//! ±150 Hz and 25 ms: r ≈ 24 of 45 at 1e-10). With V the right singular
//! vectors of the unweighted products at [`basis_rows`] (samples spread
//! evenly over the readout's time; a weight w_j scales row j and leaves the
//! span alone), truncated at the smallest r whose discarded singular values
//! hold at most ε² of the total energy,
//!
//!   A ≈ (A V_r)·V_rᴴ,   T_p = Σ_q conj(V_{p,q})·T̃_q,   T̃_q = NUFFT₁((A V_r)_q),
//!
//! so r transforms give all P kernels. V_r has orthonormal columns: the
//! NUFFT's own error in the T̃_q reaches each T_p through a unit-norm row
//! of coefficients and is not amplified. The span is checked on
//! [`CHECK_ROWS`] further samples (relative residual ≤ 10·ε); where the check
//! fails, or r would save too little, there is no basis and every pair gets
//! its own transform.

use super::toeplitz::{TimeSegmentation, ToeplitzSpec};
use crate::backend::cpu::kernel::on_widest_isa;
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Result};
use crate::nufft::cpu::tile::as_reals;
use faer::{Accum, Mat, MatRef, Par};
use num_complex::{Complex, Complex64};
use rayon::prelude::*;

/// A basis is used only when it needs at most this share of the P transforms.
const WORTHWHILE: f64 = 0.8;
/// Samples (at most) on which the span is checked.
pub const CHECK_ROWS: usize = 512;
/// Pairs above which no basis is sought (its SVD would cost more than it saves).
pub const MAX_PAIRS: usize = 528;

/// Sample indices whose times spread evenly over [t_min, t_max]: for each of
/// `count` evenly spaced target times the sample nearest to it (duplicates
/// dropped). `count` comes from the products' bandwidth: at least four rows
/// per degree of freedom, 4R·T/2π of them, and twice the pairs.
pub fn basis_rows(times: &[f64], half_range: f64, pairs: usize) -> Vec<usize> {
    let m = times.len();
    if m == 0 || pairs > MAX_PAIRS {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| times[a].total_cmp(&times[b]));
    let (t_min, t_max) = (times[order[0]], times[order[m - 1]]);
    let freedom = 4.0 * half_range * (t_max - t_min) / std::f64::consts::TAU;
    let count = ((4.0 * freedom).ceil() as usize)
        .max(2 * pairs)
        .saturating_add(32)
        .min(m);
    let mut rows: Vec<usize> = Vec::with_capacity(count);
    for q in 0..count {
        let target = t_min + (t_max - t_min) * q as f64 / (count - 1).max(1) as f64;
        let at = order.partition_point(|&j| times[j] < target).min(m - 1);
        let nearer = if at > 0 && target - times[order[at - 1]] < times[order[at]] - target {
            at - 1
        } else {
            at
        };
        let j = order[nearer];
        if rows.last() != Some(&j) {
            rows.push(j);
        }
    }
    rows
}

/// V_r of the module documentation.
#[derive(Clone, Debug)]
pub struct KernelBasis {
    /// P, the pairs of [`ToeplitzSpec::kernel_pairs`].
    pub pairs: usize,
    /// r, the transforms that replace them.
    pub rank: usize,
    /// V_r, P×r.
    v: Mat<Complex64>,
    /// V_rᴴ, r×P.
    vh: Mat<Complex64>,
}

/// conj(a_l(t_j))·a_l'(t_j) for the pairs of `spec` at the samples `rows`,
/// rows×P column-major.
fn products(spec: &ToeplitzSpec, s: &TimeSegmentation, rows: &[usize]) -> Mat<Complex64> {
    let m = spec.samples;
    let pairs = spec.kernel_pairs();
    Mat::from_fn(rows.len(), pairs.len(), |i, p| {
        let (l, lp) = pairs[p];
        let j = rows[i];
        s.coefficients[l * m + j].conj() * s.coefficients[lp * m + j]
    })
}

impl KernelBasis {
    /// The basis of `spec`'s pairs for a relative error ε (`epsilon`) of the
    /// kernels' data, or `None` (no segmentation, too few pairs, too little
    /// saved, or a span the check rejects).
    pub fn new(spec: &ToeplitzSpec, epsilon: f64) -> Option<KernelBasis> {
        let s = spec.segmentation.as_ref()?;
        let pairs = spec.kernel_pairs().len();
        if pairs < 3 || s.basis_rows.len() < pairs {
            return None;
        }
        let sampled = products(spec, s, &s.basis_rows);
        let r = sampled.qr().thin_R().to_owned();
        let svd = r.thin_svd().ok()?;
        let sigma: Vec<f64> = (0..pairs).map(|i| svd.S().column_vector()[i].re).collect();
        let total: f64 = sigma.iter().map(|x| x * x).sum();
        if !(total.is_finite() && total > 0.0) {
            return None;
        }
        // The smallest rank whose tail energy is ≤ ε²·total.
        let mut tail = total;
        let mut rank = pairs;
        for (i, x) in sigma.iter().enumerate() {
            tail -= x * x;
            if tail <= epsilon * epsilon * total {
                rank = i + 1;
                break;
            }
        }
        if rank as f64 > WORTHWHILE * pairs as f64 {
            return None;
        }
        let v = svd.V().subcols(0, rank).to_owned();
        let vh = v.adjoint().to_owned();
        let basis = KernelBasis { pairs, rank, v, vh };
        (basis.check_residual(spec, s) <= 10.0 * epsilon).then_some(basis)
    }

    /// ‖A − A V_r V_rᴴ‖_F / ‖A‖_F on up to [`CHECK_ROWS`] samples evenly
    /// strided through the sample order (the basis rows follow time instead).
    fn check_residual(&self, spec: &ToeplitzSpec, s: &TimeSegmentation) -> f64 {
        let m = spec.samples;
        let stride = m.div_ceil(CHECK_ROWS).max(1);
        let rows: Vec<usize> = (stride / 2..m).step_by(stride).collect();
        let a = products(spec, s, &rows);
        let projected = &a * &self.v * &self.vh;
        let norm = a.norm_l2();
        if norm == 0.0 {
            return 0.0;
        }
        (&a - &projected).norm_l2() / norm
    }

    /// The NUFFT data of the r transforms, A·V_r (M×r column-major), from
    /// the pairs' data `data` (M×P column-major).
    pub fn compress(&self, data: &[Complex64], samples: usize) -> Result<Vec<Complex64>> {
        let a = MatRef::from_column_major_slice(data, samples, self.pairs);
        self.product(
            a,
            self.v.as_ref(),
            samples,
            "Toeplitz kernel data (M x rank)",
        )
    }

    /// The P kernels (or their spectra: the map is linear) T_p = Σ_q
    /// conj(V_{p,q})·T̃_q, points×P column-major, from the r transforms'
    /// `reduced` (points×r column-major), in the caller's precision, on the
    /// current rayon pool in blocks of points.
    ///
    /// On the reals (re, im interleaved), with s_q the 2·points reals of
    /// T̃_q, s'_q those of i·T̃_q (= (−im, re)) and c = conj(V_{p,q}):
    /// T_p = Σ_q Re(c)·s_q + Im(c)·s'_q, plain multiply-adds over float arrays.
    pub fn expand<T: Real>(
        &self,
        reduced: &[Complex<T>],
        points: usize,
    ) -> Result<Vec<Complex<T>>> {
        const BLOCK: usize = 1024;
        let zero = Complex::new(T::default(), T::default());
        let mut out = try_vec(
            points * self.pairs,
            zero,
            "Toeplitz kernels (2^d N x pairs)",
        )?;
        let coefficients: Vec<Complex<T>> = (0..self.pairs)
            .flat_map(|p| (0..self.rank).map(move |q| (p, q)))
            .map(|(p, q)| {
                let v = self.vh[(q, p)];
                Complex::new(T::from_f64(v.re), T::from_f64(v.im))
            })
            .collect();
        let reals = as_reals(reduced);
        let mut rotated = try_vec(reals.len(), T::default(), "Toeplitz kernels (rotated)")?;
        rotated
            .par_chunks_mut(2 * BLOCK)
            .zip(reduced.par_chunks(BLOCK))
            .for_each(|(out, values)| {
                for (o, v) in out.chunks_exact_mut(2).zip(values) {
                    o[0] = -v.im;
                    o[1] = v.re;
                }
            });
        let blocks = points.div_ceil(BLOCK);
        let mut pieces: Vec<Vec<&mut [Complex<T>]>> = (0..blocks).map(|_| Vec::new()).collect();
        for column in out.chunks_exact_mut(points.max(1)) {
            for (b, piece) in column.chunks_mut(BLOCK).enumerate() {
                pieces[b].push(piece);
            }
        }
        pieces.into_par_iter().enumerate().for_each_init(
            || vec![T::default(); 2 * BLOCK],
            |sum, (b, mut block)| {
                let start = 2 * b * BLOCK;
                for (piece, row) in block.iter_mut().zip(coefficients.chunks_exact(self.rank)) {
                    let sum = &mut sum[..2 * piece.len()];
                    sum.fill(T::default());
                    on_widest_isa(
                        #[inline(always)]
                        || {
                            for (q, w) in row.iter().enumerate() {
                                let at = 2 * q * points + start;
                                let s = &reals[at..][..sum.len()];
                                let r = &rotated[at..][..sum.len()];
                                for ((o, &s), &r) in sum.iter_mut().zip(s).zip(r) {
                                    *o = *o + w.re * s + w.im * r;
                                }
                            }
                        },
                    );
                    for (o, v) in piece.iter_mut().zip(sum.chunks_exact(2)) {
                        *o = Complex::new(v[0], v[1]);
                    }
                }
            },
        );
        Ok(out)
    }

    /// lhs·rhs into a new column-major vector (the current rayon pool).
    fn product(
        &self,
        lhs: MatRef<'_, Complex64>,
        rhs: MatRef<'_, Complex64>,
        rows: usize,
        what: &str,
    ) -> Result<Vec<Complex64>> {
        let cols = rhs.ncols();
        let mut out = try_vec(rows * cols, Complex64::default(), what)?;
        faer::linalg::matmul::matmul(
            faer::MatMut::from_column_major_slice_mut(&mut out, rows, cols),
            Accum::Replace,
            lhs,
            rhs,
            Complex64::new(1.0, 0.0),
            Par::rayon(0),
        );
        Ok(out)
    }
}
