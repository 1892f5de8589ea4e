//! The Toeplitz kernels of the L(L+1)/2 segment pairs from fewer NUFFTs.
//!
//! With time segmentation (`super::toeplitz`) the kernel of pair p = (l, l')
//! is the type-1 NUFFT of the column
//!
//!   A_p(j) = w_j·conj(a_l(t_j))·a_l'(t_j).
//!
//! The a_l are least-squares interpolators spanned by exp(iδt), |δ| ≤ R, so
//! their products are functions of t of bandwidth 4R over the readout: the
//! P = L(L+1)/2 columns have a numerical rank r well below P (the 64²
//! spiral of `bench_toeplitz`, 9 segments over 150 Hz and 25 ms: r = 20 of
//! 45 at ε = 1e-8). With V the right singular vectors of the unweighted
//! products at [`basis_rows`] (`super::row_space`: pivoted QR, then
//! one-sided Jacobi; samples spread
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

use super::row_space::truncated_row_space;
use super::toeplitz::{TimeSegmentation, ToeplitzSpec};
use crate::backend::cpu::column_blocks;
use crate::backend::cpu::kernel::on_widest_isa;
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Result};
use crate::nufft::cpu::tile::as_reals;
use faer::{Mat, MatRef};
use num_complex::{Complex, Complex64};
use rayon::prelude::*;

/// A basis is used only when it needs at most this share of the P transforms.
const WORTHWHILE: f64 = 0.8;
/// Samples (at most) on which the span is checked.
pub const CHECK_ROWS: usize = 512;
/// Pairs above which no basis is sought (L > 16: the pivoted QR of
/// [`super::row_space`] on ≥ 2P sampled rows grows as P³).
pub const MAX_PAIRS: usize = 136;

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
fn products(spec: &ToeplitzSpec, s: &TimeSegmentation, rows: &[usize]) -> Vec<Complex64> {
    let m = spec.samples;
    spec.kernel_pairs()
        .iter()
        .flat_map(|&(l, lp)| {
            rows.iter()
                .map(move |&j| s.coefficients[l * m + j].conj() * s.coefficients[lp * m + j])
        })
        .collect()
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
        let rows = s.basis_rows.len();
        let sampled = products(spec, s, &s.basis_rows);
        let (vectors, sigma) = truncated_row_space(sampled, rows, pairs, epsilon)?;
        let rank = sigma.len();
        if rank as f64 > WORTHWHILE * pairs as f64 {
            return None;
        }
        let v = Mat::<Complex64>::from_fn(pairs, rank, |p, i| vectors[i * pairs + p]);
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
        let norm: f64 = a.iter().map(|x| x.norm_sqr()).sum::<f64>().sqrt();
        let projected = mix(&a, rows.len(), self.v.as_ref())
            .and_then(|reduced| mix(&reduced, rows.len(), self.vh.as_ref()));
        match projected {
            Ok(projected) if norm > 0.0 => {
                let residual: f64 = a
                    .iter()
                    .zip(&projected)
                    .map(|(x, y)| (x - y).norm_sqr())
                    .sum();
                residual.sqrt() / norm
            }
            Ok(_) => 0.0,
            Err(_) => f64::INFINITY,
        }
    }

    /// The NUFFT data of the r transforms, A·V_r (M×r column-major), A
    /// the pairs' data w_j·conj(a_l(t_j))·a_l'(t_j) of `spec` with the
    /// sample weights `weights` (`None` = 1), formed block by block of
    /// samples (A itself, M×P, is never held).
    pub fn compressed_weights(
        &self,
        spec: &ToeplitzSpec,
        weights: Option<&[f32]>,
    ) -> Result<Vec<Complex64>> {
        let m = spec.samples;
        let zero = Complex64::default();
        let mut out = try_vec(m * self.rank, zero, "Toeplitz kernel data (M x r)")?;
        let Some(s) = spec.segmentation.as_ref() else {
            return Ok(out);
        };
        if m == 0 {
            return Ok(out);
        }
        let pairs = spec.kernel_pairs();
        let coefficients = coefficients_of::<f64>(self.v.as_ref());
        let a = &s.coefficients;
        pieces_by_block(&mut out, m).enumerate().for_each_init(
            || (vec![0.0; 2 * BLOCK * pairs.len()], vec![0.0; 4 * BLOCK]),
            |(products, sums), (b, mut block)| {
                let (start, len) = (b * BLOCK, block[0].len());
                let products = &mut products[..2 * len * pairs.len()];
                for (column, &(l, lp)) in products.chunks_exact_mut(2 * len).zip(&pairs) {
                    let (al, alp) = (&a[l * m + start..][..len], &a[lp * m + start..][..len]);
                    for (j, (o, (x, y))) in column
                        .chunks_exact_mut(2)
                        .zip(al.iter().zip(alp))
                        .enumerate()
                    {
                        let v = x.conj() * y * weights.map_or(1.0, |w| w[start + j] as f64);
                        (o[0], o[1]) = (v.re, v.im);
                    }
                }
                let products = &*products;
                let sums = &mut sums[..4 * len];
                on_widest_isa(
                    #[inline(always)]
                    || {
                        mix_rows(
                            |q| &products[2 * q * len..][..2 * len],
                            &coefficients,
                            pairs.len(),
                            sums,
                            |p, a, b| store_sum(block[p], a, b),
                        )
                    },
                );
            },
        );
        Ok(out)
    }

    /// The P kernels (or their spectra: the map is linear) T_p = Σ_q
    /// conj(V_{p,q})·T̃_q, points×P column-major, from the r transforms'
    /// `reduced` (points×r column-major), in the caller's precision.
    pub fn expand<T: Real>(
        &self,
        reduced: &[Complex<T>],
        points: usize,
    ) -> Result<Vec<Complex<T>>> {
        mix(reduced, points, self.vh.as_ref())
    }
}

/// Rows per task of [`mix`] and [`KernelBasis::compressed_weights`]: the
/// block's k input columns stay in L2 while the n outputs are formed.
const BLOCK: usize = 256;

/// The coefficients of C (k×n, float64) in the working precision, output
/// column p's k coefficients contiguous.
fn coefficients_of<T: Real>(c: MatRef<'_, Complex64>) -> Vec<Complex<T>> {
    (0..c.ncols())
        .flat_map(|p| (0..c.nrows()).map(move |q| (p, q)))
        .map(|(p, q)| {
            let v = c[(q, p)];
            Complex::new(T::from_f64(v.re), T::from_f64(v.im))
        })
        .collect()
}

/// One block of rows of out = input·C: `column(q)` is input column q's
/// rows of the block as reals (re, im interleaved), `coefficients` those of
/// [`coefficients_of`], `store(p, a, b)` receives output column p as
/// a + i·b with a = Σ_q Re(C_qp)·s_q and b = Σ_q Im(C_qp)·s_q over the
/// interleaved reals s_q (plain multiply-add sweeps, four terms each, no
/// shuffles; `sums` holds 2 × the block's reals).
#[inline(always)]
fn mix_rows<'a, T: Real + 'a>(
    column: impl Fn(usize) -> &'a [T],
    coefficients: &[Complex<T>],
    k: usize,
    sums: &mut [T],
    mut store: impl FnMut(usize, &[T], &[T]),
) {
    let (a, b) = sums.split_at_mut(sums.len() / 2);
    for (p, row) in coefficients.chunks_exact(k).enumerate() {
        a.fill(T::default());
        b.fill(T::default());
        // Four terms per sweep: the sums are loaded and stored a quarter as often.
        let mut quads = row.chunks_exact(4);
        for (i, w) in quads.by_ref().enumerate() {
            let (s0, s1, s2, s3) = (
                column(4 * i),
                column(4 * i + 1),
                column(4 * i + 2),
                column(4 * i + 3),
            );
            for (((((a, b), &s0), &s1), &s2), &s3) in a
                .iter_mut()
                .zip(b.iter_mut())
                .zip(s0)
                .zip(s1)
                .zip(s2)
                .zip(s3)
            {
                *a = *a + (w[0].re * s0 + w[1].re * s1) + (w[2].re * s2 + w[3].re * s3);
                *b = *b + (w[0].im * s0 + w[1].im * s1) + (w[2].im * s2 + w[3].im * s3);
            }
        }
        let done = k - quads.remainder().len();
        for (q, w) in quads.remainder().iter().enumerate() {
            for ((a, b), &s) in a.iter_mut().zip(b.iter_mut()).zip(column(done + q)) {
                *a = *a + w.re * s;
                *b = *b + w.im * s;
            }
        }
        store(p, a, b);
    }
}

/// out ← a + i·b for interleaved reals a, b (see [`mix_rows`]).
#[inline(always)]
fn store_sum<T: Real>(out: &mut [Complex<T>], a: &[T], b: &[T]) {
    for ((o, a), b) in out.iter_mut().zip(a.chunks_exact(2)).zip(b.chunks_exact(2)) {
        *o = Complex::new(a[0] - b[1], a[1] + b[0]);
    }
}

/// Output column pieces grouped by block of `rows` ([`column_blocks`]),
/// handed to the pool's threads in as many runs as it has threads, so that
/// each thread sets up its scratch once.
fn pieces_by_block<T: Send>(
    out: &mut [T],
    rows: usize,
) -> rayon::iter::MinLen<rayon::vec::IntoIter<Vec<&mut [T]>>> {
    let pieces = column_blocks(out, rows, BLOCK);
    let runs = pieces.len().div_ceil(rayon::current_num_threads()).max(1);
    pieces.into_par_iter().with_min_len(runs)
}

/// out = input·C (rows×k times k×n, column-major, C in float64), in the
/// input's precision, on the current rayon pool in blocks of rows (no
/// faer product here: its GEMM keeps cache-sized packing buffers on every
/// thread, tens of MB the plan's memory estimates do not hold).
fn mix<T: Real>(
    input: &[Complex<T>],
    rows: usize,
    c: MatRef<'_, Complex64>,
) -> Result<Vec<Complex<T>>> {
    let (k, n) = (c.nrows(), c.ncols());
    let zero = Complex::new(T::default(), T::default());
    let mut out = try_vec(rows * n, zero, "Toeplitz kernel basis product")?;
    if rows == 0 || n == 0 {
        return Ok(out);
    }
    let coefficients = coefficients_of::<T>(c);
    let reals = as_reals(input);
    pieces_by_block(&mut out, rows).enumerate().for_each_init(
        || vec![T::default(); 4 * BLOCK],
        |sums, (b, mut block)| {
            let (start, len) = (2 * b * BLOCK, 2 * block[0].len());
            let sums = &mut sums[..2 * len];
            on_widest_isa(
                #[inline(always)]
                || {
                    mix_rows(
                        |q| &reals[2 * q * rows + start..][..len],
                        &coefficients,
                        k,
                        sums,
                        |p, a, b| store_sum(block[p], a, b),
                    )
                },
            );
        },
    );
    Ok(out)
}
