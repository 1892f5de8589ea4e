//! The split of the phase into its part linear in the lattice coordinates
//! and the rest (FAST-PATH.md §3):
//!
//! $$\varphi(j,n) = 2\pi\sum_f a_f(j)\,v_f(n) = 2\pi k_0(j) + x_j\cdot m_n + \psi(j,n)$$
//!
//! with each voxel feature fitted by least squares over the plan's voxels,
//! v_f(n) ≈ α_f + β_f·m_n (exact for 1, x, y, z on a lattice, and the best
//! linear part of anything else: a user basis, higher orders, ω), so
//! k0(j) = Σ_f a_f(j)·α_f (cycles), x_j = 2π Σ_f a_f(j)·β_f (radians per
//! lattice step: the NUFFT's points) and ψ(j,n) = Σ_p u_p(j)·g_p(n) over the
//! features with a residual g_p = v_p − α_p − β_p·m that matters,
//! u_p = 2π·a_p (radians).

use crate::error::{try_vec, Result};
use crate::model::lattice::Lattice;
use crate::model::Features;
use rayon::prelude::*;
use std::f64::consts::TAU;

/// Voxels or samples per task of the residuals' and the points' evaluation.
const RESIDUAL_BLOCK: usize = 1 << 15;

/// A residual that moves the phase by less than this (radians) is dropped.
const NEGLIGIBLE_PHASE: f64 = 1e-9;

/// The phase split of one model on one lattice.
#[derive(Clone, Debug)]
pub struct Split {
    /// NUFFT dimensions (axes of the lattice up to the last with more than one mode).
    pub ndims: usize,
    /// x_{j,a} (radians per lattice step, wrapped into [−π, π)), ndims×M, sample fastest.
    pub points: Vec<f64>,
    /// k0(j) in cycles, M.
    pub offset: Vec<f64>,
    /// P, the features with a non-linear residual.
    pub residual_terms: usize,
    /// u_p(j) = 2π a_p(j), P×M (radians per unit of g).
    pub temporal: Vec<f64>,
    /// g_p(n), P×N.
    pub spatial: Vec<f64>,
}

impl Split {
    pub fn new(features: &Features, lattice: &Lattice, voxels: usize) -> Result<Split> {
        let f_count = features.terms;
        let m = features.sample.len() / f_count.max(1);
        let n = voxels;
        let ndims = lattice.ndims();
        // Columns of the fit: 1 and the centred coordinates of the axes with > 1 mode.
        let axes: Vec<usize> = (0..3).filter(|&a| lattice.modes[a] > 1).collect();
        let cols = 1 + axes.len();
        let mut coords = try_vec(axes.len() * n, 0.0f64, "lattice coordinates")?;
        coords
            .par_chunks_mut(n.max(1))
            .zip(axes.par_iter())
            .for_each(|(column, &a)| {
                column
                    .iter_mut()
                    .enumerate()
                    .for_each(|(v, c)| *c = lattice.coordinates(v)[a])
            });
        let mean: Vec<f64> = (0..axes.len())
            .map(|k| coords[k * n..(k + 1) * n].iter().sum::<f64>() / n as f64)
            .collect();
        coords
            .par_chunks_mut(n.max(1))
            .zip(mean.par_iter())
            .for_each(|(column, mu)| column.iter_mut().for_each(|c| *c -= mu));
        let design = |col: usize, v: usize| {
            if col == 0 {
                1.0
            } else {
                coords[(col - 1) * n + v]
            }
        };
        // Summed in a fixed order (crate::reduce): the same fit on every run.
        let gram = crate::reduce::partials(n, |voxels| {
            let mut gram = vec![0.0f64; cols * cols];
            for v in voxels {
                for i in 0..cols {
                    for j in 0..cols {
                        gram[i * cols + j] += design(i, v) * design(j, v);
                    }
                }
            }
            gram
        })
        .into_iter()
        .fold(vec![0.0f64; cols * cols], |a, b| {
            a.iter().zip(&b).map(|(x, y)| x + y).collect()
        });
        let axis = |k: usize| &coords[k * n..(k + 1) * n];
        // v − α − β·m for the fit `coef` of one feature, over the voxels of `out`'s block.
        let residuals = |coef: &[f64], values: &[f64], first: usize, out: &mut [f64]| {
            out.iter_mut()
                .zip(&values[first..])
                .for_each(|(o, &x)| *o = x - coef[0]);
            for (k, beta) in coef[1..].iter().enumerate() {
                out.iter_mut()
                    .zip(&axis(k)[first..])
                    .for_each(|(o, &c)| *o -= beta * c);
            }
        };
        // Each feature's linear fit, and whether the rest matters.
        let fits: Vec<(Vec<f64>, bool)> = (0..f_count)
            .into_par_iter()
            .map(|f| {
                let v_f = &features.voxel[f * n..(f + 1) * n];
                let a_f = &features.sample[f * m..(f + 1) * m];
                let mut rhs = vec![v_f.iter().sum::<f64>(); cols];
                for (k, r) in rhs[1..].iter_mut().enumerate() {
                    *r = axis(k).iter().zip(v_f).map(|(c, x)| c * x).sum();
                }
                let coef = solve_small(&gram, &rhs, cols);
                let mut block = vec![0.0; RESIDUAL_BLOCK.min(n)];
                let largest = (0..n).step_by(RESIDUAL_BLOCK).fold(0.0f64, |s, first| {
                    let out = &mut block[..RESIDUAL_BLOCK.min(n - first)];
                    residuals(&coef, v_f, first, out);
                    out.iter().fold(s, |s, r| s.max(r.abs()))
                });
                let swing = a_f.iter().fold(0.0f64, |s, a| s.max(a.abs())) * TAU;
                (coef, largest * swing > NEGLIGIBLE_PHASE)
            })
            .collect();
        let residual: Vec<usize> = (0..f_count).filter(|&f| fits[f].1).collect();
        let residual_terms = residual.len();
        // g_p = v_p − α_p − β_p·m and u_p = 2π a_p of those, each allocated once.
        let mut spatial = try_vec(
            residual_terms * n,
            0.0f64,
            "non-linear basis residual (P x N)",
        )?;
        spatial
            .par_chunks_mut(n.max(1))
            .zip(residual.par_iter())
            .for_each(|(row, &f)| {
                let v_f = &features.voxel[f * n..(f + 1) * n];
                row.par_chunks_mut(RESIDUAL_BLOCK)
                    .enumerate()
                    .for_each(|(b, out)| residuals(&fits[f].0, v_f, b * RESIDUAL_BLOCK, out));
            });
        let mut temporal = try_vec(residual_terms * m, 0.0f64, "residual phase terms (P x M)")?;
        temporal
            .par_chunks_mut(m.max(1))
            .zip(residual.par_iter())
            .for_each(|(out, &f)| {
                let a_f = &features.sample[f * m..(f + 1) * m];
                out.iter_mut().zip(a_f).for_each(|(o, a)| *o = TAU * a);
            });
        // α in the uncentred coordinates: α = c_0 − Σ β·mean.
        let alpha: Vec<f64> = fits
            .iter()
            .map(|(coef, _)| coef[0] - (1..cols).map(|i| coef[i] * mean[i - 1]).sum::<f64>())
            .collect();
        // k0 = Σ_f a_f·α_f and x_a = 2π Σ_f a_f·β_{f,a}, feature by feature over blocks of samples.
        let combine = |weights: &[f64], out: &mut [f64], first: usize| {
            for (f, &w) in weights.iter().enumerate() {
                let a_f = &features.sample[f * m + first..f * m + first + out.len()];
                out.iter_mut().zip(a_f).for_each(|(o, a)| *o += a * w);
            }
        };
        let mut offset = try_vec(m, 0.0f64, "phase offsets k0 (M)")?;
        offset
            .par_chunks_mut(RESIDUAL_BLOCK)
            .enumerate()
            .for_each(|(b, out)| combine(&alpha, out, b * RESIDUAL_BLOCK));
        let mut points = try_vec(ndims * m, 0.0f64, "NUFFT points (M x ndims)")?;
        points
            .par_chunks_mut(m.max(1))
            .enumerate()
            .for_each(|(axis, column)| {
                let Some(k) = axes.iter().position(|&a| a == axis) else {
                    return;
                };
                let betas: Vec<f64> = fits.iter().map(|(coef, _)| TAU * coef[1 + k]).collect();
                column
                    .par_chunks_mut(RESIDUAL_BLOCK)
                    .enumerate()
                    .for_each(|(b, out)| combine(&betas, out, b * RESIDUAL_BLOCK));
            });
        for x in points.iter_mut() {
            *x = wrap(*x);
        }
        Ok(Split {
            ndims,
            points,
            offset,
            residual_terms,
            temporal,
            spatial,
        })
    }
}

/// x reduced into [−π, π) (the modes are integers, so this changes nothing).
pub fn wrap(x: f64) -> f64 {
    x - TAU * ((x + std::f64::consts::PI) / TAU).floor()
}

/// Solves the small symmetric positive (semi)definite system G c = r by
/// Gaussian elimination with partial pivoting (singular directions get 0).
fn solve_small(gram: &[f64], rhs: &[f64], k: usize) -> Vec<f64> {
    let mut a: Vec<f64> = gram.to_vec();
    let mut b: Vec<f64> = rhs.to_vec();
    let scale = (0..k).map(|i| a[i * k + i]).fold(0.0f64, f64::max);
    let mut zero = vec![false; k];
    for col in 0..k {
        let pivot = (col..k)
            .max_by(|&x, &y| a[x * k + col].abs().total_cmp(&a[y * k + col].abs()))
            .unwrap_or(col);
        for c in 0..k {
            a.swap(col * k + c, pivot * k + c);
        }
        b.swap(col, pivot);
        let p = a[col * k + col];
        if p.abs() <= 1e-12 * scale {
            zero[col] = true;
            continue;
        }
        for row in col + 1..k {
            let f = a[row * k + col] / p;
            for c in col..k {
                a[row * k + c] -= f * a[col * k + c];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; k];
    for row in (0..k).rev() {
        if zero[row] {
            continue;
        }
        let s: f64 = (row + 1..k).map(|c| a[row * k + c] * x[c]).sum();
        x[row] = (b[row] - s) / a[row * k + row];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping() {
        assert!((wrap(3.5 * std::f64::consts::PI) + 0.5 * std::f64::consts::PI).abs() < 1e-12);
        assert_eq!(wrap(0.25), 0.25);
        assert!(wrap(-std::f64::consts::PI) >= -std::f64::consts::PI);
    }

    #[test]
    fn linear_features_leave_no_residual() {
        // 4×3 grid, features 1, x (in lattice steps of 0.5 m plus an offset) and x².
        let lattice = Lattice {
            modes: [4, 3, 1],
            index: None,
        };
        let n = 12;
        let mut voxel = vec![0.0; 3 * n];
        for v in 0..n {
            let c = lattice.coordinates(v);
            voxel[v] = 1.0;
            voxel[n + v] = 0.3 + 0.5 * c[0] - 0.25 * c[1];
            voxel[2 * n + v] = c[0] * c[0];
        }
        let sample = vec![0.1, -0.2, 0.05, 0.02, 0.0, 0.01];
        let features = Features {
            terms: 3,
            voxel: voxel.into(),
            sample: sample.into(),
            sensitivities: None,
        };
        let s = Split::new(&features, &lattice, n).unwrap();
        assert_eq!(s.residual_terms, 1);
        assert_eq!(s.ndims, 2);
        for j in 0..2 {
            for v in 0..n {
                let exact: f64 = (0..3)
                    .map(|f| features.sample[f * 2 + j] * features.voxel[f * n + v])
                    .sum::<f64>()
                    * TAU;
                let c = lattice.coordinates(v);
                let split = TAU * s.offset[j]
                    + s.points[j] * c[0]
                    + s.points[2 + j] * c[1]
                    + s.temporal[j] * s.spatial[v];
                let d = (exact - split) / TAU;
                assert!(
                    (d - d.round()).abs() < 1e-12,
                    "j {j} v {v}: {exact} vs {split}"
                );
            }
        }
    }
}
