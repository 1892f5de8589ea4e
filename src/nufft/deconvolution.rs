//! The kernel's Fourier transform at the modes, by which the FFT of the fine
//! grid is divided (type 1) or the modes are pre-divided (type 2).
//!
//! Spreading c_j with ψ(u) = φ(2u/w) (u in fine cells) onto n_f cells and
//! transforming gives, by Poisson summation,
//!
//! $$\sum_l \psi(l - g_j)\, e^{\pm 2\pi i k l / n_f} \approx
//!   e^{\pm i k x_j}\, \hat\psi(k),\qquad
//!   \hat\psi(k) = \frac{w}{2}\int_{-1}^{1} \phi(z)\cos\!\Big(\frac{\pi k w z}{n_f}\Big)\,dz,$$
//!
//! with g_j = x_j·n_f/2π the point's position in cells. ψ̂ is computed once
//! per plan and axis by Gauss–Legendre quadrature after the substitution
//! z = sin θ, which removes the square-root singularity of φ at z = ±1:
//!
//! $$\int_{-1}^{1} \phi(z)\cos(\omega z)\,dz =
//!   \int_{-\pi/2}^{\pi/2} e^{\beta(\cos\theta - 1)}\cos(\omega\sin\theta)\cos\theta\,d\theta,$$
//!
//! an analytic integrand (ω ≤ πw/(2σ)); 16 + 8w nodes reach float64 rounding (tested).

use super::params::KernelParams;
use rayon::prelude::*;

/// Gauss–Legendre nodes and weights on [−1, 1] (Newton on P_q from the
/// Tricomi initial guesses; exact for polynomials of degree ≤ 2q − 1).
pub fn gauss_legendre(q: usize) -> (Vec<f64>, Vec<f64>) {
    let mut nodes = vec![0.0; q];
    let mut weights = vec![0.0; q];
    for i in 0..q.div_ceil(2) {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (q as f64 + 0.5)).cos();
        let mut derivative = 1.0;
        for _ in 0..100 {
            // P_q(z) and P_q'(z) by the three-term recurrence.
            let (mut p0, mut p1) = (1.0, z);
            for k in 2..=q {
                let p2 = ((2 * k - 1) as f64 * z * p1 - (k - 1) as f64 * p0) / k as f64;
                p0 = p1;
                p1 = p2;
            }
            let p = if q == 0 {
                1.0
            } else if q == 1 {
                z
            } else {
                p1
            };
            let p_prev = if q == 1 { 1.0 } else { p0 };
            derivative = q as f64 * (z * p - p_prev) / (z * z - 1.0);
            let step = p / derivative;
            z -= step;
            if step.abs() < 1e-16 {
                break;
            }
        }
        nodes[i] = -z;
        nodes[q - 1 - i] = z;
        let weight = 2.0 / ((1.0 - z * z) * derivative * derivative);
        weights[i] = weight;
        weights[q - 1 - i] = weight;
    }
    (nodes, weights)
}

/// ψ̂(k) for the modes k = −⌊n/2⌋ … ⌈n/2⌉ − 1 of an axis (in that order,
/// FAST-PATH.md's mode order), fine grid n_f. A singleton axis (n = 1,
/// n_f = 1) is not spread along: its factor is 1.
pub fn kernel_transform(kernel: &KernelParams, modes: usize, fine: usize) -> Vec<f64> {
    if fine <= 1 {
        return vec![1.0; modes];
    }
    let w = kernel.width as f64;
    let (nodes, weights) = gauss_legendre(16 + 8 * kernel.width);
    let half_pi = std::f64::consts::FRAC_PI_2;
    // z = sin θ at the nodes θ = (π/2)·t, and the weight (π/2)·q·φ(z)·cos θ.
    let z: Vec<f64> = nodes.iter().map(|&t| (half_pi * t).sin()).collect();
    let weighted: Vec<f64> = nodes
        .iter()
        .zip(&weights)
        .map(|(&t, &q)| {
            let theta = half_pi * t;
            half_pi * q * (kernel.beta * (theta.cos() - 1.0)).exp() * theta.cos()
        })
        .collect();
    // ψ̂ is even: the table holds |k| = 0 … ⌊n/2⌋, in blocks that start from
    // exact cosines and step k by a rotation of (cos, sin)(ω_k z) per node
    // (rounding grows ≲ ROTATION_BLOCK·u, against a cosine per mode and node).
    let step = std::f64::consts::PI * w / fine as f64;
    let mut table = vec![0.0; modes / 2 + 1];
    table
        .par_chunks_mut(ROTATION_BLOCK)
        .enumerate()
        .for_each(|(block, out)| {
            let k0 = (block * ROTATION_BLOCK) as f64;
            let (mut sin, mut cos): (Vec<f64>, Vec<f64>) =
                z.iter().map(|&z| (step * k0 * z).sin_cos()).unzip();
            let (sin_step, cos_step): (Vec<f64>, Vec<f64>) =
                z.iter().map(|&z| (step * z).sin_cos()).unzip();
            for value in out {
                *value = 0.5 * w * cos.iter().zip(&weighted).map(|(c, q)| q * c).sum::<f64>();
                for i in 0..z.len() {
                    let (c, s) = (cos[i], sin[i]);
                    cos[i] = c * cos_step[i] - s * sin_step[i];
                    sin[i] = s * cos_step[i] + c * sin_step[i];
                }
            }
        });
    let first = -((modes / 2) as i64);
    (0..modes as i64)
        .map(|i| table[(first + i).unsigned_abs() as usize])
        .collect()
}

/// Modes per block of [`kernel_transform`]'s rotation.
const ROTATION_BLOCK: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nufft::params::Upsampling;

    #[test]
    fn quadrature_is_exact_for_polynomials() {
        for q in [1, 2, 5, 16, 40, 72] {
            let (z, w) = gauss_legendre(q);
            assert!((w.iter().sum::<f64>() - 2.0).abs() < 1e-13, "q = {q}");
            for degree in 0..(2 * q).min(30) {
                let integral: f64 = z
                    .iter()
                    .zip(&w)
                    .map(|(&x, &v)| v * x.powi(degree as i32))
                    .sum();
                let exact = if degree % 2 == 1 {
                    0.0
                } else {
                    2.0 / (degree as f64 + 1.0)
                };
                assert!((integral - exact).abs() < 1e-12, "q = {q} degree {degree}");
            }
        }
    }

    /// ψ̂ against a composite Simpson rule with 20001 points in θ (z = sin θ).
    #[test]
    fn transform_matches_a_fine_quadrature() {
        for (tolerance, up) in [
            (1e-6, Upsampling::Two),
            (1e-3, Upsampling::OneQuarter),
            (1e-12, Upsampling::Two),
        ] {
            let kernel = KernelParams::new(tolerance, up, true).unwrap();
            let modes = 37;
            let fine = kernel.fine_size(modes).unwrap();
            let fast = kernel_transform(&kernel, modes, fine);
            let w = kernel.width as f64;
            let steps = 20000;
            let h = 2.0 / steps as f64;
            for (i, &value) in fast.iter().enumerate() {
                let k = i as f64 - 18.0;
                let half_pi = std::f64::consts::FRAC_PI_2;
                let f = |t: f64| {
                    let z = (half_pi * t).sin();
                    half_pi
                        * kernel.phi(z)
                        * (half_pi * t).cos()
                        * (std::f64::consts::PI * k * w * z / fine as f64).cos()
                };
                let mut sum = f(-1.0) + f(1.0);
                for s in 1..steps {
                    sum += f(-1.0 + s as f64 * h) * if s % 2 == 1 { 4.0 } else { 2.0 };
                }
                let reference = 0.5 * w * sum * h / 3.0;
                assert!(
                    (value - reference).abs() < 1e-12 * reference.abs(),
                    "k = {k}: {value} vs {reference}"
                );
            }
        }
    }
}
