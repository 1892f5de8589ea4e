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
//! 45 at ε = 1e-8). With V the right singular vectors (eigenvectors of the
//! Gram matrix, by Jacobi rotations) of the unweighted products at
//! [`basis_rows`] (samples spread
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
use faer::{Mat, MatRef};
use num_complex::{Complex, Complex64};
use rayon::prelude::*;

/// A basis is used only when it needs at most this share of the P transforms.
const WORTHWHILE: f64 = 0.8;
/// Samples (at most) on which the span is checked.
pub const CHECK_ROWS: usize = 512;
/// Pairs above which no basis is sought (L > 16: the Jacobi sweeps over
/// the P×P Gram matrix grow as P³).
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
        // V and σ² from the Gram matrix AᴴA of the sampled products (faer's
        // QR and SVD would keep cache-sized GEMM buffers on every thread,
        // tens of MB the plan's memory estimates do not hold). Its rounding
        // (~1e-16 of the largest σ²) can only raise the rank; the check
        // below catches a span that misses.
        let rows = s.basis_rows.len();
        let sampled = products(spec, s, &s.basis_rows);
        let column = |p: usize| &sampled[p * rows..(p + 1) * rows];
        let mut gram = vec![Complex64::default(); pairs * pairs];
        for p in 0..pairs {
            for q in 0..=p {
                let g: Complex64 = column(p)
                    .iter()
                    .zip(column(q))
                    .map(|(a, b)| a.conj() * b)
                    .sum();
                gram[p * pairs + q] = g;
                gram[q * pairs + p] = g.conj();
            }
        }
        let (values, vectors) = hermitian_eigen(gram, pairs)?;
        let energy: Vec<f64> = values.iter().map(|v| v.max(0.0)).collect();
        let total: f64 = energy.iter().sum();
        if !(total.is_finite() && total > 0.0) {
            return None;
        }
        // The smallest rank whose tail energy is ≤ ε²·total.
        let mut tail = total;
        let mut rank = pairs;
        for (i, e) in energy.iter().enumerate() {
            tail -= e;
            if tail <= epsilon * epsilon * total {
                rank = i + 1;
                break;
            }
        }
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

    /// The NUFFT data of the r transforms, A·V_r (M×r column-major), from
    /// the pairs' data `data` (M×P column-major).
    pub fn compress(&self, data: &[Complex64], samples: usize) -> Result<Vec<Complex64>> {
        mix(data, samples, self.v.as_ref())
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

/// Rows per task of [`mix`].
const BLOCK: usize = 1024;

/// out = input·C (rows×k times k×n, column-major, C in float64), in the
/// input's precision, on the current rayon pool in blocks of rows.
///
/// On the reals (re, im interleaved), with s_q the reals of column q, s'_q
/// those of i·column q (= (−im, re)) and c = C_{q,p}:
/// out_p = Σ_q Re(c)·s_q + Im(c)·s'_q, plain multiply-adds over float
/// arrays. No faer product here: its GEMM keeps cache-sized packing buffers
/// on every thread, tens of MB the plan's memory estimates do not hold.
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
    let coefficients: Vec<Complex<T>> = (0..n)
        .flat_map(|p| (0..k).map(move |q| (p, q)))
        .map(|(p, q)| {
            let v = c[(q, p)];
            Complex::new(T::from_f64(v.re), T::from_f64(v.im))
        })
        .collect();
    let reals = as_reals(input);
    let mut rotated = try_vec(reals.len(), T::default(), "Toeplitz kernel basis product")?;
    rotated
        .par_chunks_mut(2 * BLOCK)
        .zip(input.par_chunks(BLOCK))
        .for_each(|(out, values)| {
            for (o, v) in out.chunks_exact_mut(2).zip(values) {
                o[0] = -v.im;
                o[1] = v.re;
            }
        });
    let blocks = rows.div_ceil(BLOCK);
    let mut pieces: Vec<Vec<&mut [Complex<T>]>> = (0..blocks).map(|_| Vec::new()).collect();
    for column in out.chunks_exact_mut(rows) {
        for (b, piece) in column.chunks_mut(BLOCK).enumerate() {
            pieces[b].push(piece);
        }
    }
    pieces.into_par_iter().enumerate().for_each_init(
        || vec![T::default(); 2 * BLOCK],
        |sum, (b, mut block)| {
            let start = 2 * b * BLOCK;
            for (piece, row) in block.iter_mut().zip(coefficients.chunks_exact(k)) {
                let sum = &mut sum[..2 * piece.len()];
                sum.fill(T::default());
                on_widest_isa(
                    #[inline(always)]
                    || {
                        for (q, w) in row.iter().enumerate() {
                            let at = 2 * q * rows + start;
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

/// Eigenvalues (descending) and unit eigenvectors (column i of the P×P
/// column-major result for value i) of the Hermitian P×P matrix `g`
/// (row-major, both triangles), by cyclic Jacobi rotations until the
/// off-diagonal part is 1e-15 of the whole; `None` if that takes more
/// than 50 sweeps or the matrix is not finite.
///
/// A rotation of (p, q) is U = diag(1, ē)·[[c, s], [−s, c]], e = g_pq/|g_pq|:
/// the phase makes the 2×2 block real, then the real rotation zeroes it
/// (t = tan θ the smaller root of t² + 2τt − 1 = 0, τ = (g_qq − g_pp)/(2|g_pq|)).
fn hermitian_eigen(mut g: Vec<Complex64>, n: usize) -> Option<(Vec<f64>, Vec<Complex64>)> {
    let mut v = vec![Complex64::default(); n * n];
    for i in 0..n {
        v[i * n + i] = Complex64::new(1.0, 0.0);
    }
    let total: f64 = g.iter().map(|x| x.norm_sqr()).sum();
    if !total.is_finite() {
        return None;
    }
    for _ in 0..50 {
        let off: f64 = (0..n)
            .flat_map(|p| (0..n).filter(move |&q| q != p).map(move |q| (p, q)))
            .map(|(p, q)| g[p * n + q].norm_sqr())
            .sum();
        if off <= 1e-30 * total {
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| g[b * n + b].re.total_cmp(&g[a * n + a].re));
            let values = order.iter().map(|&i| g[i * n + i].re).collect();
            let vectors = order
                .iter()
                .flat_map(|&i| v[i * n..(i + 1) * n].iter().copied())
                .collect();
            return Some((values, vectors));
        }
        for p in 0..n {
            for q in p + 1..n {
                let gpq = g[p * n + q];
                let size = gpq.norm();
                if size == 0.0 {
                    continue;
                }
                let e = gpq / size;
                let tau = (g[q * n + q].re - g[p * n + p].re) / (2.0 * size);
                let t =
                    if tau >= 0.0 { 1.0 } else { -1.0 } / (tau.abs() + (1.0 + tau * tau).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = t * c;
                // Columns: [g_kp, g_kq]·U.
                for k in 0..n {
                    let (a, b) = (g[k * n + p], g[k * n + q]);
                    g[k * n + p] = a * c - e.conj() * b * s;
                    g[k * n + q] = a * s + e.conj() * b * c;
                }
                // Rows: Uᴴ·[g_pk; g_qk].
                for k in 0..n {
                    let (a, b) = (g[p * n + k], g[q * n + k]);
                    g[p * n + k] = a * c - e * b * s;
                    g[q * n + k] = a * s + e * b * c;
                }
                // Eigenvectors (column-major: vector i at v[i·n..]): V·U.
                for k in 0..n {
                    let (a, b) = (v[p * n + k], v[q * n + k]);
                    v[p * n + k] = a * c - e.conj() * b * s;
                    v[q * n + k] = a * s + e.conj() * b * c;
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_diagonalises_hermitian_matrices() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for n in [1, 2, 5, 13, 40] {
            let mut g = vec![Complex64::default(); n * n];
            for p in 0..n {
                for q in 0..=p {
                    let x = Complex64::new(uniform(), if p == q { 0.0 } else { uniform() });
                    g[p * n + q] = x;
                    g[q * n + p] = x.conj();
                }
            }
            let (values, vectors) = hermitian_eigen(g.clone(), n).expect("converges");
            assert!(values.windows(2).all(|w| w[0] >= w[1]));
            let scale = values.iter().map(|v| v.abs()).fold(0.0, f64::max);
            for i in 0..n {
                let x = &vectors[i * n..(i + 1) * n];
                for p in 0..n {
                    // (G x)_p − λ x_p
                    let gx: Complex64 = (0..n).map(|q| g[p * n + q] * x[q]).sum();
                    assert!((gx - values[i] * x[p]).norm() < 1e-12 * scale, "n {n}");
                }
                for j in 0..n {
                    let y = &vectors[j * n..(j + 1) * n];
                    let dot: Complex64 = x.iter().zip(y).map(|(a, b)| a.conj() * b).sum();
                    let expect = if i == j { 1.0 } else { 0.0 };
                    assert!((dot - expect).norm() < 1e-12, "n {n}: <v{i}, v{j}> = {dot}");
                }
            }
        }
    }
}
