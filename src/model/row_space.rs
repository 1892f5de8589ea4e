//! The truncated row space of a small dense complex matrix, for
//! [`super::kernel_basis`]: right singular vectors V_r of A (rows × cols)
//! with ‖A − A V_r V_rᴴ‖_F ≤ ε‖A‖_F, found without forming AᴴA (whose
//! rounding, ~1e-16 of σ_max², would hide tails of ε² = 1e-16 of the energy).
//!
//! 1. Householder QR with column pivoting (Businger–Golub),
//!    A Π = Q R, stopped at the first k whose trailing block has
//!    ‖R_{k:,k:}‖_F² ≤ (ε/4)²·‖A‖_F² (recomputed from the entries, not
//!    downdated): A ≈ Q_k B with B = R_{:k,:} Πᵀ (k × cols).
//! 2. One-sided Jacobi (Hestenes) on the k columns of Bᴴ: plane rotations
//!    until every pair of columns is orthogonal to 1e-15, so that
//!    Bᴴ W = V Σ with V's columns the right singular vectors of B (and,
//!    to the dropped tail, of A) and σ their norms, accurate to ~1e-16·σ_max.
//! 3. r = the fewest σ (largest first) whose dropped energy, with step 1's
//!    tail, is ≤ ε²·‖A‖_F².
//!
//! No faer here: its QR and SVD keep cache-sized GEMM buffers on every
//! thread, tens of MB the plan's memory estimates do not hold.

use num_complex::Complex64;

/// V_r (cols × r, column-major, orthonormal columns) and σ_1 ≥ … ≥ σ_r of
/// the module documentation for A (`a`, rows × cols column-major), or
/// `None` when A is not finite, zero, or the rotations do not converge.
pub fn truncated_row_space(
    mut a: Vec<Complex64>,
    rows: usize,
    cols: usize,
    epsilon: f64,
) -> Option<(Vec<Complex64>, Vec<f64>)> {
    debug_assert_eq!(a.len(), rows * cols);
    let total: f64 = a.iter().map(|x| x.norm_sqr()).sum();
    if !(total.is_finite() && total > 0.0) {
        return None;
    }
    let (k, qr_tail, permutation) = pivoted_qr(&mut a, rows, cols, (epsilon / 4.0).powi(2) * total);
    // Bᴴ (cols × k): column i is row i of R, conjugated, in the original
    // column order.
    let mut bh = vec![Complex64::default(); cols * k];
    for i in 0..k {
        for (j, &p) in permutation.iter().enumerate().skip(i) {
            bh[i * cols + p] = a[j * rows + i].conj();
        }
    }
    let sigma = one_sided_jacobi(&mut bh, cols, k)?;
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&x, &y| sigma[y].total_cmp(&sigma[x]));
    // Drop the smallest σ while the dropped energy (summed from the
    // smallest up, so that no subtraction loses it) stays within ε²·‖A‖².
    let budget = epsilon * epsilon * total;
    let (mut tail, mut rank) = (qr_tail, k);
    while rank > 1 {
        let next = tail + sigma[order[rank - 1]].powi(2);
        if next > budget {
            break;
        }
        (tail, rank) = (next, rank - 1);
    }
    if sigma[order[rank - 1]] <= 0.0 {
        return None;
    }
    let mut v = Vec::with_capacity(cols * rank);
    for &c in &order[..rank] {
        let column = &bh[c * cols..(c + 1) * cols];
        v.extend(column.iter().map(|x| x / sigma[c]));
    }
    Some((v, order[..rank].iter().map(|&c| sigma[c]).collect()))
}

/// Householder QR with column pivoting of `a` (rows × cols, column-major),
/// in place (R on and above the diagonal; below it, garbage), until the
/// trailing block's squared Frobenius norm is ≤ `stop`. Returns the steps
/// taken k, that trailing energy and the original index of each column.
fn pivoted_qr(
    a: &mut [Complex64],
    rows: usize,
    cols: usize,
    stop: f64,
) -> (usize, f64, Vec<usize>) {
    let mut permutation: Vec<usize> = (0..cols).collect();
    let mut norms = vec![0.0; cols];
    let mut k = 0;
    loop {
        for (j, n) in norms.iter_mut().enumerate().skip(k) {
            *n = a[j * rows + k..(j + 1) * rows]
                .iter()
                .map(|x| x.norm_sqr())
                .sum();
        }
        let trailing: f64 = norms[k..].iter().sum();
        if k == rows.min(cols) || trailing <= stop {
            return (k, trailing, permutation);
        }
        let pivot = (k..cols)
            .max_by(|&x, &y| norms[x].total_cmp(&norms[y]))
            .unwrap_or(k);
        if pivot != k {
            for i in 0..rows {
                a.swap(k * rows + i, pivot * rows + i);
            }
            permutation.swap(k, pivot);
            norms.swap(k, pivot);
        }
        // v = x − α·e_1 with α = −e^{i·arg x_0}·‖x‖ (no cancellation),
        // H = I − 2 v vᴴ / ‖v‖².
        let x = &a[k * rows + k..(k + 1) * rows];
        let size = norms[k].sqrt();
        let phase = if x[0].norm() > 0.0 {
            x[0] / x[0].norm()
        } else {
            Complex64::new(1.0, 0.0)
        };
        let alpha = -phase * size;
        let mut v: Vec<Complex64> = x.to_vec();
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|x| x.norm_sqr()).sum();
        if vv > 0.0 {
            for j in k..cols {
                let column = &mut a[j * rows + k..(j + 1) * rows];
                let dot: Complex64 = v.iter().zip(column.iter()).map(|(v, c)| v.conj() * c).sum();
                let f = dot * (2.0 / vv);
                column.iter_mut().zip(&v).for_each(|(c, v)| *c -= f * v);
            }
        }
        k += 1;
    }
}

/// One-sided Jacobi on the `n` columns (length `len`, column-major) of `x`,
/// in place: cyclic sweeps of plane rotations until |x_pᴴx_q| ≤
/// 1e-15·‖x_p‖‖x_q‖ for every pair; then the columns are orthogonal and
/// their norms are returned. `None` after 60 sweeps or for non-finite data.
fn one_sided_jacobi(x: &mut [Complex64], len: usize, n: usize) -> Option<Vec<f64>> {
    let norm2 = |x: &[Complex64], p: usize| -> f64 {
        x[p * len..(p + 1) * len].iter().map(|v| v.norm_sqr()).sum()
    };
    for _ in 0..60 {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let (head, tail) = x.split_at_mut(q * len);
                let (xp, xq) = (&mut head[p * len..(p + 1) * len], &mut tail[..len]);
                let alpha: f64 = xp.iter().map(|v| v.norm_sqr()).sum();
                let beta: f64 = xq.iter().map(|v| v.norm_sqr()).sum();
                let gamma: Complex64 = xp.iter().zip(xq.iter()).map(|(a, b)| a.conj() * b).sum();
                let g = gamma.norm();
                if !(alpha.is_finite() && beta.is_finite() && g.is_finite()) {
                    return None;
                }
                if g <= 1e-15 * (alpha * beta).sqrt() || g == 0.0 {
                    continue;
                }
                rotated = true;
                // Diagonalise [[α, γ], [γ̄, β]]: with e = γ/|γ|, the real
                // rotation of [[α, |γ|], [|γ|, β]] (t = tan θ, the smaller
                // root of t² + 2ζt − 1 = 0, ζ = (β − α)/(2|γ|)).
                let e = gamma / g;
                let zeta = (beta - alpha) / (2.0 * g);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let t = if zeta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for (a, b) in xp.iter_mut().zip(xq.iter_mut()) {
                    let (u, w) = (*a, *b * e.conj());
                    *a = u * c - w * s;
                    *b = (u * s + w * c) * e;
                }
            }
        }
        if !rotated {
            return Some((0..n).map(|p| norm2(x, p).sqrt()).collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_matrix(rows: usize, cols: usize, rank: usize, seed: u64) -> Vec<Complex64> {
        let mut state = seed | 1;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut c = || Complex64::new(uniform(), uniform());
        // Σ_i (10^{-i}) u_i v_iᴴ with random u, v: singular values spread
        // over `rank` decades.
        let u: Vec<Complex64> = (0..rows * rank).map(|_| c()).collect();
        let v: Vec<Complex64> = (0..cols * rank).map(|_| c()).collect();
        let mut a = vec![Complex64::default(); rows * cols];
        for i in 0..rank {
            let s = 10f64.powi(-(i as i32));
            for q in 0..cols {
                for p in 0..rows {
                    a[q * rows + p] += u[i * rows + p] * v[i * cols + q].conj() * s;
                }
            }
        }
        a
    }

    /// ‖A − A V Vᴴ‖_F / ‖A‖_F.
    fn residual(a: &[Complex64], rows: usize, cols: usize, v: &[Complex64], r: usize) -> f64 {
        let mut worst = 0.0;
        let mut total = 0.0;
        for p in 0..rows {
            let row: Vec<Complex64> = (0..cols).map(|q| a[q * rows + p]).collect();
            let coefficients: Vec<Complex64> = (0..r)
                .map(|i| (0..cols).map(|q| row[q] * v[i * cols + q]).sum())
                .collect();
            for q in 0..cols {
                let projected: Complex64 = (0..r)
                    .map(|i| coefficients[i] * v[i * cols + q].conj())
                    .sum();
                worst += (row[q] - projected).norm_sqr();
                total += row[q].norm_sqr();
            }
        }
        (worst / total).sqrt()
    }

    #[test]
    fn row_space_meets_the_tolerance_with_orthonormal_vectors() {
        for (rows, cols, rank, seed) in [
            (40, 12, 12, 3),
            (122, 45, 14, 5),
            (9, 20, 9, 7),
            (1, 3, 1, 9),
        ] {
            let a = random_matrix(rows, cols, rank, seed);
            for epsilon in [1e-2, 1e-5, 1e-8, 1e-12] {
                let (v, sigma) =
                    truncated_row_space(a.clone(), rows, cols, epsilon).expect("converges");
                let r = sigma.len();
                assert!(sigma.windows(2).all(|w| w[0] >= w[1]));
                let e = residual(&a, rows, cols, &v, r);
                assert!(
                    e <= epsilon,
                    "{rows}x{cols} ε {epsilon}: residual {e:.2e} at r {r}"
                );
                // Singular values a decade apart: the optimal rank is the
                // number of them above ε·σ_1, give or take one.
                let optimal = (0..rank)
                    .filter(|&i| 10f64.powi(-(i as i32)) > epsilon)
                    .count();
                assert!(
                    r <= optimal + 1,
                    "{rows}x{cols} ε {epsilon}: rank {r}, optimal ~{optimal}"
                );
                for i in 0..r {
                    for j in 0..r {
                        let dot: Complex64 = (0..cols)
                            .map(|q| v[i * cols + q].conj() * v[j * cols + q])
                            .sum();
                        let expect = if i == j { 1.0 } else { 0.0 };
                        assert!((dot - expect).norm() < 1e-12, "<v{i}, v{j}> = {dot}");
                    }
                }
            }
        }
    }

    #[test]
    fn zero_and_non_finite_matrices_have_no_row_space() {
        assert!(truncated_row_space(vec![Complex64::default(); 6], 2, 3, 1e-8).is_none());
        let mut a = random_matrix(4, 3, 3, 11);
        a[5] = Complex64::new(f64::NAN, 0.0);
        assert!(truncated_row_space(a, 4, 3, 1e-8).is_none());
    }
}
