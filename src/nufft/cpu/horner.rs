//! The ES kernel as w polynomials in one shared variable, evaluated by
//! Horner's rule over all w cells at once (FINUFFT's approach: Barnett,
//! Magland & af Klinteberg 2019, §4; one vector of FMAs per degree instead
//! of w exp/sqrt).
//!
//! A point at fine-grid position g (cells) touches the w cells i₀ + i,
//! i = 0…w−1, with i₀ = ⌈g − w/2⌉. Their distances are u_i = i − w/2 + t
//! with t = i₀ − (g − w/2) ∈ [0, 1), so with z = 2t − 1 ∈ [−1, 1)
//!
//! $$\psi(u_i) = \phi\Big(\frac{2i - w + 1 + z}{w}\Big) \approx p_i(z) = \sum_{d=0}^{D} c_{d,i}\, z^d .$$
//!
//! Each p_i is the Chebyshev interpolant of degree D = w + 2 on [−1, 1]
//! (Chebyshev coefficients by the discrete cosine sum, then converted to
//! monomials). Its error is at the level of the kernel's own truncation
//! (φ(±1) = e^{−β}) for every tolerance: about ε/20 … ε/200 of φ(0) = 1
//! (tested below).
//!
//! The table is laid out for interleaved complex arithmetic: row d holds
//! `lanes` values, c_{d,i} at lanes 2i and 2i + 1 (zero beyond 2w), so one
//! evaluation yields every weight already paired with the real and the
//! imaginary part of a complex grid row.

use super::super::params::KernelParams;
use crate::backend::cpu::real::Real;

/// The fitted polynomials of one kernel (module documentation).
#[derive(Clone, Debug)]
pub struct HornerKernel<T> {
    /// w.
    pub width: usize,
    /// D.
    pub degree: usize,
    /// Values per row (2 × the padded width, a multiple of 8).
    pub lanes: usize,
    /// (D + 1) rows of `lanes` coefficients, row d = the z^d coefficients.
    table: Vec<T>,
}

/// Monomial coefficients (length q) of the Chebyshev interpolant of `f` of degree q − 1 on [−1, 1].
fn chebyshev_fit(f: impl Fn(f64) -> f64, q: usize) -> Vec<f64> {
    let nodes: Vec<f64> = (0..q)
        .map(|k| (std::f64::consts::PI * (k as f64 + 0.5) / q as f64).cos())
        .collect();
    let values: Vec<f64> = nodes.iter().map(|&z| f(z)).collect();
    // a_m = (2/q) Σ_k f(z_k) cos(π m (k + ½)/q), a_0 halved.
    let chebyshev: Vec<f64> = (0..q)
        .map(|m| {
            let sum: f64 = values
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    v * (std::f64::consts::PI * m as f64 * (k as f64 + 0.5) / q as f64).cos()
                })
                .sum();
            sum * if m == 0 { 1.0 } else { 2.0 } / q as f64
        })
        .collect();
    // Σ a_m T_m(z) in monomials, T_0 = 1, T_1 = z, T_{m+1} = 2z T_m − T_{m−1}.
    let mut monomial = vec![0.0; q];
    let mut previous = vec![0.0; q];
    let mut current = vec![0.0; q];
    current[0] = 1.0;
    for (m, &a) in chebyshev.iter().enumerate() {
        for (out, c) in monomial.iter_mut().zip(&current) {
            *out += a * c;
        }
        let next: Vec<f64> = (0..q)
            .map(|d| {
                let shifted = if d > 0 { current[d - 1] } else { 0.0 };
                if m == 0 {
                    shifted
                } else {
                    2.0 * shifted - previous[d]
                }
            })
            .collect();
        previous = std::mem::replace(&mut current, next);
    }
    monomial
}

impl<T: Real> HornerKernel<T> {
    /// The polynomials of `kernel`, rows of `lanes` values (`lanes` ≥ 2w, even).
    pub fn new(kernel: &KernelParams, lanes: usize) -> HornerKernel<T> {
        let w = kernel.width;
        let degree = w + 2;
        let mut table = vec![T::default(); (degree + 1) * lanes];
        for i in 0..w {
            let f = |z: f64| kernel.phi((2.0 * i as f64 - w as f64 + 1.0 + z) / w as f64);
            for (d, c) in chebyshev_fit(f, degree + 1).into_iter().enumerate() {
                table[d * lanes + 2 * i] = T::from_f64(c);
                table[d * lanes + 2 * i + 1] = T::from_f64(c);
            }
        }
        HornerKernel {
            width: w,
            degree,
            lanes,
            table,
        }
    }

    /// The w kernel weights at z ∈ [−1, 1), each twice (lanes 2i, 2i + 1),
    /// zero beyond 2w; `L` must equal [`HornerKernel::lanes`].
    #[inline(always)]
    pub fn evaluate<const L: usize, const FMA: bool>(&self, z: T) -> [T; L] {
        debug_assert_eq!(L, self.lanes);
        let mut rows = self.table.chunks_exact(L).rev();
        let mut acc = [T::default(); L];
        if let Some(top) = rows.next() {
            acc.copy_from_slice(top);
        }
        for row in rows {
            for (a, &c) in acc.iter_mut().zip(row) {
                *a = a.madd::<FMA>(z, c);
            }
        }
        acc
    }
}

impl HornerKernel<f64> {
    /// The w kernel weights at z ∈ [−1, 1), one per cell (the values
    /// [`HornerKernel::evaluate`] pairs, by the same polynomials).
    pub fn weights(&self, z: f64) -> Vec<f64> {
        (0..self.width)
            .map(|i| {
                let mut rows = self.table.chunks_exact(self.lanes).rev();
                let top = rows.next().map_or(0.0, |row| row[2 * i]);
                rows.fold(top, |acc, row| acc * z + row[2 * i])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nufft::params::Upsampling;

    /// Every tolerance and both σ: the polynomials match φ to well below ε.
    #[test]
    fn polynomials_match_the_kernel() {
        for upsampling in [Upsampling::Two, Upsampling::OneQuarter] {
            for exponent in 1..=12 {
                let tolerance = 10f64.powi(-exponent);
                let kernel = KernelParams::new(tolerance, upsampling, true).unwrap();
                let w = kernel.width;
                let horner = HornerKernel::<f64>::new(&kernel, 32);
                let mut worst: f64 = 0.0;
                for step in 0..=400 {
                    let z = -1.0 + 2.0 * step as f64 / 401.0;
                    let values = horner.evaluate::<32, false>(z);
                    let weights = horner.weights(z);
                    assert!(
                        (0..w).all(|i| weights[i] == values[2 * i]),
                        "weights at {z}"
                    );
                    for i in 0..w {
                        let exact = kernel.phi((2.0 * i as f64 - w as f64 + 1.0 + z) / w as f64);
                        assert_eq!(values[2 * i], values[2 * i + 1]);
                        worst = worst.max((values[2 * i] - exact).abs());
                    }
                    assert!(values[2 * w..].iter().all(|&v| v == 0.0));
                }
                assert!(
                    worst <= tolerance / 10.0,
                    "{upsampling:?} ε = {tolerance:e} (w = {w}): {worst:e}"
                );
            }
        }
    }

    #[test]
    fn chebyshev_fit_reproduces_polynomials() {
        let c = chebyshev_fit(|z| 1.0 - 2.0 * z + 0.5 * z * z * z, 5);
        let expect = [1.0, -2.0, 0.0, 0.5, 0.0];
        for (a, b) in c.iter().zip(expect) {
            assert!((a - b).abs() < 1e-14, "{c:?}");
        }
    }
}
