//! Coil compression of the fast path: the plan's L sensitivity maps S (N×L)
//! are replaced by R < L virtual maps
//!
//! $$s = S\,V_R,\qquad S \approx \tilde S = s\,V_R^H,$$
//!
//! V_R the R dominant eigenvectors of the Gram matrix SᴴS (L×L, float64),
//! R the fewest whose discarded share of ‖S‖²_F meets the aim. The
//! separated operator then runs its K·R NUFFTs on the virtual coils and
//!
//! $$d_c = \sum_p \overline{V_{c,p}}\,\tilde d_p,\qquad
//!   \tilde d_p = \sum_c V_{c,p}\, d_c$$
//!
//! map the virtual coils' data to the plan's coils and back (E and Eᴴ; the
//! two are adjoint). V_Rᴴ V_R = I, and the sample weights are the same for
//! every coil, so EᴴWE needs neither: it is the virtual coils' own. The
//! error this adds to E and Eᴴ is, for random images and data,
//! ‖S − S̃‖_F / ‖S‖_F (the relative RMS error the tolerance bounds), known
//! exactly from the eigenvalues. Smooth arrays compress well (cases.py's 16
//! coils: R = 11 at 1.5e-4); arrays that do not keep their coils.

use crate::backend::cpu::kernel::on_widest_isa;
use crate::error::{try_vec, Result};
use crate::model::Shared;
use faer::{c64, Mat, Side};
use num_complex::{Complex32, Complex64};
use rayon::prelude::*;

/// Voxels per block of the Gram matrix's sum (the blocks are added in order:
/// the same maps give the same compression).
const GRAM_BLOCK: usize = 8192;

/// The virtual coils of a plan's sensitivities.
#[derive(Debug)]
pub struct CoilCompression {
    /// L, the plan's coils.
    pub coils: usize,
    /// R, the virtual coils (1 ≤ R < L).
    pub rank: usize,
    /// s_p(r_n), N×R (virtual coil p at p·N), float32.
    pub maps: Shared<Complex32>,
    /// conj(V_{c,p}) at c·R + p: d_c = Σ_p mix[c·R + p]·d̃_p.
    pub mix: Vec<Complex64>,
    /// V_{c,p} at p·L + c, its conjugate transpose: s_p = Σ_c S_c·V_{c,p}
    /// and d̃_p = Σ_c V_{c,p}·d_c.
    unmix: Vec<Complex64>,
    /// ‖S − S̃‖_F / ‖S‖_F.
    pub error: f64,
}

impl CoilCompression {
    /// The compression of `sensitivities` (N×L) with the fewest virtual
    /// coils whose error is ≤ `aim`; `None` when that takes all L coils
    /// (or the maps are zero).
    pub fn new(
        sensitivities: &[Complex32],
        voxels: usize,
        aim: f64,
    ) -> Result<Option<CoilCompression>> {
        let n = voxels;
        let coils = sensitivities.len() / n.max(1);
        if coils < 2 || n == 0 {
            return Ok(None);
        }
        let gram = gram(sensitivities, n, coils);
        let eigen = gram
            .as_ref()
            .self_adjoint_eigen(Side::Lower)
            .map_err(|e| crate::error::Error::internal(format!("coil Gram matrix: {e:?}")))?;
        // Eigenpairs, largest first.
        let mut order: Vec<(f64, usize)> =
            (0..coils).map(|i| (eigen.S()[i].re.max(0.0), i)).collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        let total: f64 = order.iter().map(|e| e.0).sum();
        if !(total > 0.0 && total.is_finite()) {
            return Ok(None);
        }
        let tail = |r: usize| (order[r..].iter().map(|e| e.0).sum::<f64>() / total).sqrt();
        let Some(rank) = (1..coils).find(|&r| tail(r) <= aim) else {
            return Ok(None);
        };
        let u = eigen.U();
        let v = |c: usize, p: usize| {
            let z = u[(c, order[p].1)];
            Complex64::new(z.re, z.im)
        };
        let mix: Vec<Complex64> = (0..coils)
            .flat_map(|c| (0..rank).map(move |p| (c, p)))
            .map(|(c, p)| v(c, p).conj())
            .collect();
        let unmix: Vec<Complex64> = (0..rank)
            .flat_map(|p| (0..coils).map(move |c| (c, p)))
            .map(|(c, p)| v(c, p))
            .collect();
        let mut maps = try_vec(n * rank, Complex32::default(), "virtual coil maps (N x R)")?;
        combine(sensitivities, n, &unmix, &mut maps);
        Ok(Some(CoilCompression {
            coils,
            rank,
            maps: maps.into(),
            mix,
            unmix,
            error: tail(rank),
        }))
    }

    /// The plan's coils' data (M×L) from the virtual coils' `virtual_data`
    /// (M×R): d_c = Σ_p conj(V_{c,p})·d̃_p.
    pub fn expand(&self, virtual_data: &[Complex32], data: &mut [Complex32], samples: usize) {
        combine(virtual_data, samples, &self.mix, data);
    }

    /// The virtual coils' data (M×R) from the plan's coils' `data` (M×L):
    /// d̃_p = Σ_c V_{c,p}·d_c, the adjoint of [`CoilCompression::expand`].
    pub fn reduce(&self, data: &[Complex32], samples: usize) -> Result<Vec<Complex32>> {
        let mut out = try_vec(
            samples * self.rank,
            Complex32::default(),
            "virtual coil data (M x R)",
        )?;
        combine(data, samples, &self.unmix, &mut out);
        Ok(out)
    }
}

/// Values per block of [`combine`]'s float64 sums.
const COMBINE_BLOCK: usize = 1024;

/// out_o = Σ_q w[o·Q + q] · column_q for the `columns` (Q of `len` values
/// each) and the outputs `out` (columns of `len` values): a task per block
/// of [`COMBINE_BLOCK`] rows reads each input's block once for every
/// output, sums in float64 (real and imaginary parts apart, so the loop
/// vectorizes) and rounds to float32 once.
fn combine(columns: &[Complex32], len: usize, w: &[Complex64], out: &mut [Complex32]) {
    let inputs = columns.len() / len.max(1);
    let blocks = crate::backend::cpu::column_blocks(out, len, COMBINE_BLOCK);
    blocks.into_par_iter().enumerate().for_each(|(b, outputs)| {
        on_widest_isa(
            #[inline(always)]
            || combine_block(columns, len, (inputs, w), b * COMBINE_BLOCK, outputs),
        )
    });
}

/// [`combine`]'s rows `start..` of every output (`outputs`, one block each).
#[inline(always)]
fn combine_block(
    columns: &[Complex32],
    len: usize,
    (inputs, w): (usize, &[Complex64]),
    start: usize,
    outputs: Vec<&mut [Complex32]>,
) {
    let (mut re, mut im) = ([0.0f64; COMBINE_BLOCK], [0.0f64; COMBINE_BLOCK]);
    for (o, block) in outputs.into_iter().enumerate() {
        let count = block.len();
        let (re, im) = (&mut re[..count], &mut im[..count]);
        re.fill(0.0);
        im.fill(0.0);
        for (q, w) in w[o * inputs..(o + 1) * inputs].iter().enumerate() {
            let column = &columns[q * len + start..q * len + start + count];
            for ((r, i), x) in re.iter_mut().zip(im.iter_mut()).zip(column) {
                let (xr, xi) = (x.re as f64, x.im as f64);
                *r += w.re * xr - w.im * xi;
                *i += w.re * xi + w.im * xr;
            }
        }
        for ((o, r), i) in block.iter_mut().zip(re.iter()).zip(im.iter()) {
            *o = Complex32::new(*r as f32, *i as f32);
        }
    }
}

/// SᴴS (L×L) in float64, summed over blocks of [`GRAM_BLOCK`] voxels in order.
fn gram(sensitivities: &[Complex32], n: usize, coils: usize) -> Mat<c64> {
    let blocks: Vec<Mat<c64>> = (0..n.div_ceil(GRAM_BLOCK))
        .into_par_iter()
        .map(|b| {
            let (v0, v1) = (b * GRAM_BLOCK, ((b + 1) * GRAM_BLOCK).min(n));
            let s = Mat::<c64>::from_fn(v1 - v0, coils, |i, c| {
                let x = sensitivities[c * n + v0 + i];
                c64::new(x.re as f64, x.im as f64)
            });
            s.adjoint() * &s
        })
        .collect();
    let mut g = Mat::<c64>::zeros(coils, coils);
    for block in &blocks {
        g += block;
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Maps of rank 3 (each coil a combination of three smooth profiles)
    /// plus a small independent part per coil.
    fn maps(n: usize, coils: usize, small: f64) -> Vec<Complex32> {
        let profile = |k: usize, v: usize| {
            let x = v as f64 / n as f64;
            Complex64::from_polar(1.0 + k as f64 * x, 3.0 * (k + 1) as f64 * x)
        };
        let mut s = vec![Complex32::default(); n * coils];
        for c in 0..coils {
            for v in 0..n {
                let mut z: Complex64 = (0..3)
                    .map(|k| {
                        profile(k, v) * Complex64::new((c + k) as f64 % 3.0 + 0.5, 0.3 * k as f64)
                    })
                    .sum();
                z += small * Complex64::from_polar(1.0, ((7 * c * v) % 11) as f64);
                s[c * n + v] = Complex32::new(z.re as f32, z.im as f32);
            }
        }
        s
    }

    fn error_of(c: &CoilCompression, s: &[Complex32], n: usize) -> f64 {
        // S̃ = s·V_Rᴴ: coil c = Σ_p mix[c·R + p]·s_p.
        let (mut diff, mut norm) = (0.0, 0.0);
        for coil in 0..c.coils {
            for v in 0..n {
                let approx: Complex64 = (0..c.rank)
                    .map(|p| {
                        let x = c.maps[p * n + v];
                        c.mix[coil * c.rank + p] * Complex64::new(x.re as f64, x.im as f64)
                    })
                    .sum();
                let x = s[coil * n + v];
                let exact = Complex64::new(x.re as f64, x.im as f64);
                diff += (approx - exact).norm_sqr();
                norm += exact.norm_sqr();
            }
        }
        (diff / norm).sqrt()
    }

    #[test]
    fn the_virtual_coils_reproduce_the_maps_to_the_stated_error() {
        let (n, coils) = (3001, 7);
        let s = maps(n, coils, 1e-3);
        for aim in [1e-1, 1e-2, 1e-3] {
            let c = CoilCompression::new(&s, n, aim).unwrap().unwrap();
            let measured = error_of(&c, &s, n);
            assert!(
                c.rank < coils && c.rank >= 3 && c.error <= aim,
                "{aim}: R {}",
                c.rank
            );
            assert!(
                (measured - c.error).abs() <= 0.02 * c.error + 1e-6,
                "{aim}: stated {:.3e}, measured {measured:.3e}",
                c.error
            );
        }
        // Exactly rank 3: three virtual coils, error at float32 rounding.
        let exact = maps(n, coils, 0.0);
        let c = CoilCompression::new(&exact, n, 1e-5).unwrap().unwrap();
        assert_eq!(c.rank, 3);
        assert!(error_of(&c, &exact, n) < 1e-6);
    }

    #[test]
    fn incompressible_or_single_coils_stay() {
        let n = 500;
        // Independent random-phase coils: no direction to drop at 1e-3.
        let s: Vec<Complex32> = (0..4 * n)
            .map(|i| Complex32::from_polar(1.0, ((i * i) % 97) as f32))
            .collect();
        assert!(CoilCompression::new(&s, n, 1e-3).unwrap().is_none());
        assert!(CoilCompression::new(&s[..n], n, 1e-1).unwrap().is_none());
        assert!(
            CoilCompression::new(&vec![Complex32::default(); 3 * n], n, 1e-1)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn expand_and_reduce_are_adjoint_and_reduce_inverts_expand() {
        let (n, coils, m) = (800, 6, 257);
        let s = maps(n, coils, 1e-2);
        let c = CoilCompression::new(&s, n, 5e-2).unwrap().unwrap();
        let r = c.rank;
        let v: Vec<Complex32> = (0..m * r)
            .map(|i| Complex32::new((i as f32 * 0.37).sin(), (i as f32 * 0.11).cos()))
            .collect();
        let d: Vec<Complex32> = (0..m * coils)
            .map(|i| Complex32::new((i as f32 * 0.23).cos(), (i as f32 * 0.71).sin()))
            .collect();
        let mut ev = vec![Complex32::default(); m * coils];
        c.expand(&v, &mut ev, m);
        let rd = c.reduce(&d, m).unwrap();
        let dot = |a: &[Complex32], b: &[Complex32]| -> Complex64 {
            a.iter()
                .zip(b)
                .map(|(a, b)| {
                    let (a, b) = (a.conj(), *b);
                    Complex64::new(a.re as f64, a.im as f64)
                        * Complex64::new(b.re as f64, b.im as f64)
                })
                .sum()
        };
        let (lhs, rhs) = (dot(&ev, &d), dot(&v, &rd));
        assert!(
            (lhs - rhs).norm() <= 1e-5 * lhs.norm().max(1.0),
            "{lhs} vs {rhs}"
        );
        // V_Rᴴ V_R = I: reduce(expand(v)) = v.
        let back = c.reduce(&ev, m).unwrap();
        let worst = back
            .iter()
            .zip(&v)
            .map(|(a, b)| (a - b).norm())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "{worst}");
    }
}
