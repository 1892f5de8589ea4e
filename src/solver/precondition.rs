//! Preconditioners of CG on the normal equations (EᴴWE + λR)ρ = EᴴWd,
//! applied on the host in float64 (z = M⁻¹r).
//!
//! - **Diagonal** (Jacobi): M = diag(A). For E[(j,c),n] = S_c(r_n)·e^{iφ},
//!   $$A_{nn} = \Big(\sum_j w_j\Big)\sum_c |S_c(\mathbf r_n)|^2 + \lambda R_{nn},$$
//!   R_nn = 1 (Tikhonov) or 2·(number of difference directions) (the interior
//!   diagonal of DᴴD, without `fd_weights` and reweighting factors).
//! - **Circulant** (T. Chan's optimal circulant of the Toeplitz kernel, where
//!   the Toeplitz normal operator is active): EᴴWE = Σ_c S_cᴴ T S_c ≈ D^{1/2} T D^{1/2}
//!   with D = Σ_c |S_c|², and T (a convolution with T(Δ), Δ ∈ (−n, n) per axis)
//!   is replaced by the cyclic convolution with
//!   $$c(q) = \sum_{\Delta \equiv q \bmod n} \prod_a \Big(1 - \frac{|\Delta_a|}{n_a}\Big) T(\Delta),$$
//!   whose eigenvalues (the DFT of c) are the Fejér means of the sampling
//!   measure Σ_j w_j δ(κ − κ_j): non-negative. Then
//!   M⁻¹ = D^{−1/2} F⁻¹ diag(1/(ĉ + λ r̂/D̄)) F D^{−1/2}, with r̂ the symbol of R
//!   (1, or Σ_a (2 − 2cos 2πm_a/n_a) for the finite-difference priors) and D̄
//!   the mean of D.
//!
//! Both are Hermitian positive definite (entries and symbols are floored at
//! 1e-6 of their maximum), so preconditioned CG solves the same system.

use crate::backend::cpu::fft::{Direction, GridFft};
use crate::error::{try_vec, Error, Result};
use crate::model::toeplitz::kernel_offset;
use num_complex::Complex64;

/// The preconditioner codes of the C API (`horecon_cg_options.preconditioner`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreconditionerKind {
    /// Plain CG.
    #[default]
    None = 0,
    /// 1/diag(EᴴWE + λR).
    Diagonal = 1,
    /// The circulant approximation of the Toeplitz kernel (needs the Toeplitz normal operator).
    Circulant = 2,
}

impl PreconditionerKind {
    pub fn from_code(code: i32) -> Result<PreconditionerKind> {
        match code {
            0 => Ok(PreconditionerKind::None),
            1 => Ok(PreconditionerKind::Diagonal),
            2 => Ok(PreconditionerKind::Circulant),
            _ => Err(Error::invalid(format!(
                "preconditioner must be 0 (none), 1 (diagonal) or 2 (circulant), got {code}"
            ))),
        }
    }
}

/// Entries below this fraction of the largest are raised to it.
const FLOOR: f64 = 1e-6;

/// M⁻¹ of one solve (module documentation).
pub enum Preconditioner {
    /// z_n = r_n / A_nn: the reciprocals, N.
    Diagonal(Vec<f64>),
    /// z = s ⊙ F⁻¹((F(s ⊙ r)) / symbol) / N with s = D^{−1/2}.
    Circulant {
        fft: GridFft<f64>,
        /// D^{−1/2}, N.
        scale: Vec<f64>,
        /// 1/(ĉ + λ r̂/D̄)/N on the image grid, N.
        inverse_symbol: Vec<f64>,
    },
}

/// Floors `values` at [`FLOOR`]·max and returns the maximum (0 if all ≤ 0).
fn floor_relative(values: &mut [f64]) -> f64 {
    let max = values.iter().cloned().fold(0.0f64, f64::max);
    let floor = FLOOR * max;
    for v in values.iter_mut() {
        if v.is_nan() || *v <= floor {
            *v = floor;
        }
    }
    max
}

/// D_n = Σ_c |S_c(n)|² (1 without sensitivities), N.
pub fn coil_energy(
    voxels: usize,
    sensitivities: Option<&[num_complex::Complex32]>,
) -> Result<Vec<f64>> {
    let mut d = try_vec(voxels, 0.0f64, "preconditioner (N)")?;
    match sensitivities {
        None => d.fill(1.0),
        Some(s) => {
            for coil in s.chunks_exact(voxels) {
                for (d, s) in d.iter_mut().zip(coil) {
                    *d += s.norm_sqr() as f64;
                }
            }
        }
    }
    Ok(d)
}

impl Preconditioner {
    /// The diagonal preconditioner from D = Σ_c|S_c|², the weight sum Σ_j w_j
    /// and the regulariser's diagonal λR_nn.
    pub fn diagonal(mut coil_energy: Vec<f64>, weight_sum: f64, regularizer_diagonal: f64) -> Self {
        for d in coil_energy.iter_mut() {
            *d = *d * weight_sum + regularizer_diagonal;
        }
        if floor_relative(&mut coil_energy) <= 0.0 {
            coil_energy.fill(1.0);
        }
        coil_energy.iter_mut().for_each(|d| *d = 1.0 / *d);
        Preconditioner::Diagonal(coil_energy)
    }

    /// The circulant preconditioner of an image grid `dims` from the summed
    /// Toeplitz kernel spectrum K = FFT(T)/Π g_a on `kernel_dims` g (the
    /// layout of [`crate::model::toeplitz`]), D = Σ_c|S_c|², and the
    /// regulariser's symbol `regularizer(m)` (already multiplied by λ) at the
    /// grid frequency index m.
    pub fn circulant(
        dims: [usize; 3],
        kernel_dims: [usize; 3],
        mut spectrum: Vec<Complex64>,
        mut coil_energy: Vec<f64>,
        regularizer: impl Fn([usize; 3]) -> f64,
    ) -> Result<Self> {
        let points: usize = kernel_dims.iter().product();
        let voxels: usize = dims.iter().product();
        if spectrum.len() != points || coil_energy.len() != voxels {
            return Err(Error::internal(format!(
                "circulant preconditioner: kernel {} (expected {points}), D {} (expected {voxels})",
                spectrum.len(),
                coil_energy.len()
            )));
        }
        // T = IFFT(K) (K carries the 1/points of the forward transform).
        GridFft::<f64>::new(kernel_dims).process(&mut spectrum, Direction::Inverse);
        // Kernel-grid point v as (image-grid index of Δ mod n, Chan's weight
        // Π_a (1 − |Δ_a|/n_a)); `None` at the unused indices, which hold zero
        // (model::toeplitz).
        let fold = |v: usize| -> Option<(usize, f64)> {
            let index = [
                v % kernel_dims[0],
                (v / kernel_dims[0]) % kernel_dims[1],
                v / (kernel_dims[0] * kernel_dims[1]),
            ];
            let (mut target, mut weight) = (0, 1.0);
            for a in (0..3).rev() {
                let n = dims[a];
                let delta = kernel_offset(index[a], n, kernel_dims[a])?;
                weight *= 1.0 - delta.unsigned_abs() as f64 / n as f64;
                target = target * n + delta.rem_euclid(n as i64) as usize;
            }
            Some((target, weight))
        };
        let mut folded = try_vec(voxels, Complex64::new(0.0, 0.0), "circulant kernel (N)")?;
        for (v, t) in spectrum.iter().enumerate() {
            if let Some((target, weight)) = fold(v) {
                folded[target] += t * weight;
            }
        }
        let fft = GridFft::<f64>::new(dims);
        fft.process(&mut folded, Direction::Forward);
        let mean_energy = coil_energy.iter().sum::<f64>() / voxels as f64;
        if floor_relative(&mut coil_energy) <= 0.0 {
            coil_energy.fill(1.0);
        }
        let mut symbol = try_vec(voxels, 0.0f64, "circulant symbol (N)")?;
        for (v, s) in symbol.iter_mut().enumerate() {
            let m = [
                v % dims[0],
                (v / dims[0]) % dims[1],
                v / (dims[0] * dims[1]),
            ];
            *s = folded[v].re + regularizer(m) / mean_energy.max(f64::MIN_POSITIVE);
        }
        if floor_relative(&mut symbol) <= 0.0 {
            symbol.fill(1.0);
        }
        symbol
            .iter_mut()
            .for_each(|s| *s = 1.0 / (*s * voxels as f64));
        coil_energy.iter_mut().for_each(|d| *d = 1.0 / d.sqrt());
        Ok(Preconditioner::Circulant {
            fft,
            scale: coil_energy,
            inverse_symbol: symbol,
        })
    }

    /// N.
    pub fn len(&self) -> usize {
        match self {
            Preconditioner::Diagonal(d) => d.len(),
            Preconditioner::Circulant { scale, .. } => scale.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// z = M⁻¹ r (both N).
    pub fn apply(&self, r: &[Complex64], z: &mut [Complex64]) -> Result<()> {
        match self {
            Preconditioner::Diagonal(inverse) => {
                for ((z, r), d) in z.iter_mut().zip(r).zip(inverse) {
                    *z = r * d;
                }
            }
            Preconditioner::Circulant {
                fft,
                scale,
                inverse_symbol,
            } => {
                for ((z, r), s) in z.iter_mut().zip(r).zip(scale) {
                    *z = r * s;
                }
                fft.process(z, Direction::Forward);
                for (z, s) in z.iter_mut().zip(inverse_symbol) {
                    *z *= s;
                }
                fft.process(z, Direction::Inverse);
                for (z, s) in z.iter_mut().zip(scale) {
                    *z *= s;
                }
            }
        }
        Ok(())
    }
}

/// Σ_{l,l'} K_{l,l'} over every segment pair from the stored pairs l ≤ l'
/// (K_{l',l} = conj(K_{l,l'}) in the spectral domain): the kernel spectrum
/// of the normal operator at the centre of the off-resonance range.
/// `kernel(p, v)` is stored pair p's spectrum at kernel-grid point v.
pub fn sum_kernel_pairs(
    spec: &crate::model::toeplitz::ToeplitzSpec,
    kernel: impl Fn(usize, usize) -> Complex64,
) -> Result<Vec<Complex64>> {
    let points = spec.kernel_points();
    let mut total = try_vec(
        points,
        Complex64::new(0.0, 0.0),
        "Toeplitz kernel sum (kernel grid)",
    )?;
    for (p, &(l, lp)) in spec.kernel_pairs().iter().enumerate() {
        for (v, t) in total.iter_mut().enumerate() {
            let k = kernel(p, v);
            *t += if l == lp { k } else { k + k.conj() };
        }
    }
    Ok(total)
}

/// The symbol Σ_a (2 − 2cos(2π m_a/n_a)) of DᴴD over the grid axes of
/// more than one voxel, at frequency index m.
pub fn difference_symbol(dims: [usize; 3], m: [usize; 3]) -> f64 {
    (0..3)
        .filter(|&a| dims[a] > 1)
        .map(|a| 2.0 - 2.0 * (std::f64::consts::TAU * m[a] as f64 / dims[a] as f64).cos())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For a kernel T that is itself n-periodic in effect (a single sample
    /// at k = 0: T ≡ w), Chan's circulant is w·N·δ(m): the symbol is w·N at
    /// m = 0 and the floor elsewhere; the preconditioner inverts it there.
    #[test]
    fn circulant_of_a_constant_kernel() {
        let dims = [4, 3, 1];
        // The 2n grid and a longer one (unused indices n … g − n).
        for kd in [[8, 6, 1], [12, 8, 1]] {
            let points = kd[0] * kd[1];
            // T ≡ 2 except at the unused indices: K = FFT(T)/points.
            let mut t: Vec<Complex64> = (0..points)
                .map(|v| {
                    let (i, j) = (v % kd[0], v / kd[0]);
                    let used = kernel_offset(i, 4, kd[0]).is_some()
                        && kernel_offset(j, 3, kd[1]).is_some();
                    Complex64::new(if used { 2.0 } else { 0.0 }, 0.0)
                })
                .collect();
            GridFft::<f64>::new(kd).process(&mut t, Direction::Forward);
            t.iter_mut().for_each(|v| *v /= points as f64);
            let p = Preconditioner::circulant(dims, kd, t, vec![1.0; 12], |_| 0.0).unwrap();
            // A constant image is the m = 0 mode: M⁻¹·1 = 1/(2·N).
            let r = vec![Complex64::new(1.0, 0.0); 12];
            let mut z = vec![Complex64::new(0.0, 0.0); 12];
            p.apply(&r, &mut z).unwrap();
            for v in &z {
                // The other modes' symbols are floored at 1e-6 of the largest.
                assert!((v.re * 24.0 - 1.0).abs() < 1e-8, "{kd:?}: {v}");
                assert!(v.im.abs() < 1e-8 / 24.0);
            }
        }
    }
}
