//! The matrix that a CPU plan applies, column by column at a few points.
//!
//! Spreading with the kernel, the FFT of the fine grid and the division by
//! ψ̂ are linear maps whose product is, exactly (the FFT is a rearranged
//! sum), the tensor product over the axes a of
//!
//! $$F_a(j, k) = \frac{1}{\hat\psi_a(k)} \sum_{c=0}^{w-1} \psi_a(i_{0} + c - g_{j,a})\,
//!   e^{\,i s\, 2\pi (i_0 + c) k / n_{f,a}},$$
//!
//! with i₀ and the weights ψ_a(i₀ + c − g) of point j placed as the executor
//! places it ([`super::sort::place`], [`super::horner`]): type 2 (sign s)
//! gives c_j = Σ_k G_{j,k} f_k with G_{j,k} = Π_a F_a(j, k_a), type 1
//! (sign s) f_k = Σ_j G_{j,k} c_j, and G of sign −s is the conjugate of G
//! of sign s (ψ is real). Only the FFT's rounding separates the two.
//!
//! A point's factors cost Σ_a n_a·w operations, so the rows of G at a few
//! hundred points, or its columns at a few thousand, cost far less than a
//! transform of the fine grid: the CPU certificate
//! ([`crate::backend::fast::certificate`]) compares the fast operator with
//! the exact one through them.

use super::horner::HornerKernel;
use super::sort::place;
use crate::backend::cpu::kernel::on_widest_isa;
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Error, Result};
use crate::nufft::deconvolution::kernel_transform;
use crate::nufft::NufftSpec;
use num_complex::Complex;
use rayon::prelude::*;
use std::f64::consts::TAU;

/// Points per block of [`NufftMatrix`]'s factors.
const BLOCK: usize = 64;

/// The factors F_a(j, k) of a plan at some points (module documentation),
/// computed in float64 and kept in T (float32 for float32 entries: half the
/// memory, which the system hands over page by page).
pub struct NufftMatrix<T> {
    /// Per axis a, blocks of [`BLOCK`] points: a block's n_a × [`BLOCK`]
    /// values F_a(j, k) (point fastest, modes in the order −⌊n_a/2⌋ …; the
    /// last block padded).
    factors: [Vec<Complex<T>>; 3],
    /// n_a (1 beyond the plan's dimensions).
    sizes: [usize; 3],
    points: usize,
}

impl<T: Real> NufftMatrix<T> {
    /// The factors of `spec`'s matrix at `count` points (`points[a·count + j]`,
    /// finite radians).
    pub fn new(spec: &NufftSpec, points: &[f64], count: usize) -> Result<NufftMatrix<T>> {
        let ndims = spec.modes.ndims;
        if points.len() < ndims * count {
            return Err(Error::internal(
                "NUFFT matrix points shorter than ndims x count",
            ));
        }
        let w = spec.kernel.width;
        let kernel = HornerKernel::<f64>::new(&spec.kernel, super::lanes(w));
        let blocks = count.div_ceil(BLOCK);
        let axis = |a: usize| -> Result<Vec<Complex<T>>> {
            let (n, fine) = (spec.modes.sizes[a], spec.fine[a]);
            let one = Complex::new(T::from_f64(1.0), T::default());
            let mut out = try_vec(blocks * n * BLOCK, one, "NUFFT matrix factors")?;
            if fine <= 1 || a >= ndims {
                return Ok(out);
            }
            let first = spec.modes.first(a);
            let inverse: Vec<f64> = kernel_transform(&spec.kernel, n, fine)
                .into_iter()
                .map(|p| 1.0 / p)
                .collect();
            // e^{i s 2π g k / n_f} for every cell g and mode index i: the real
            // parts of a cell's n modes, then the imaginary ones.
            let mut phases = try_vec(2 * fine * n, 0.0f64, "NUFFT matrix phases")?;
            phases
                .par_chunks_mut(2 * n)
                .enumerate()
                .for_each(|(g, row)| {
                    for i in 0..n {
                        let turns = (g as i64 * (first + i as i64)).rem_euclid(fine as i64);
                        let angle = spec.sign as f64 * TAU * turns as f64 / fine as f64;
                        (row[n + i], row[i]) = angle.sin_cos();
                    }
                });
            let coordinates = &points[a * count..(a + 1) * count];
            out.par_chunks_mut(n * BLOCK)
                .zip(coordinates.par_chunks(BLOCK))
                .for_each(|(block, xs)| {
                    // Each point's n factors (real parts, then imaginary),
                    // vectorized over the modes, then transposed into the block.
                    let (mut re, mut im) = (vec![0.0; n], vec![0.0; n]);
                    for (b, &x) in xs.iter().enumerate() {
                        let (cell, z) = place(x, fine, w);
                        let weights = kernel.weights(z);
                        on_widest_isa(
                            #[inline(always)]
                            || {
                                re.fill(0.0);
                                im.fill(0.0);
                                for (c, &weight) in weights.iter().enumerate() {
                                    let g = (cell + c) % fine;
                                    let (p_re, p_im) =
                                        phases[2 * g * n..2 * (g + 1) * n].split_at(n);
                                    for (r, p) in re.iter_mut().zip(p_re) {
                                        *r += p * weight;
                                    }
                                    for (r, p) in im.iter_mut().zip(p_im) {
                                        *r += p * weight;
                                    }
                                }
                            },
                        );
                        for i in 0..n {
                            block[i * BLOCK + b] = Complex::new(
                                T::from_f64(re[i] * inverse[i]),
                                T::from_f64(im[i] * inverse[i]),
                            );
                        }
                    }
                });
            Ok(out)
        };
        Ok(NufftMatrix {
            factors: [axis(0)?, axis(1)?, axis(2)?],
            sizes: spec.modes.sizes,
            points: count,
        })
    }

    /// The points.
    pub fn points(&self) -> usize {
        self.points
    }

    /// Column `mode` of G (its index in the modes array, axis 0 fastest)
    /// at every point into `out` (conjugated when `conjugate`): G of the
    /// opposite sign, or Gᴴ's row.
    pub fn column(&self, mode: usize, conjugate: bool, out: &mut [Complex<T>]) {
        let [n0, n1, _] = self.sizes;
        let index = [mode % n0, (mode / n0) % n1, mode / (n0 * n1)];
        for (b, out) in out[..self.points].chunks_mut(BLOCK).enumerate() {
            let [f0, f1, f2] = std::array::from_fn(|a| {
                let start = (b * self.sizes[a] + index[a]) * BLOCK;
                &self.factors[a][start..start + BLOCK]
            });
            on_widest_isa(
                #[inline(always)]
                || {
                    for (((o, a), b), c) in out.iter_mut().zip(f0).zip(f1).zip(f2) {
                        let (re, im) = (a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
                        let (re, im) = (re * c.re - im * c.im, re * c.im + im * c.re);
                        *o = Complex::new(re, if conjugate { -im } else { im });
                    }
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nufft::{Modes, NufftType, Upsampling};
    use num_complex::{Complex32, Complex64};

    /// A value in [-1, 1) from `i` (a fixed, scrambled sequence).
    fn value(i: usize) -> f64 {
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 31;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 29;
        ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    /// Σ_k G_{j,k} f_k and Σ_j G_{j,k} c_j from the columns equal what the
    /// executor computes for types 2 and 1, both signs, both σ, 1D to 3D
    /// with odd and even sizes, points beyond [−π, π): to float32 rounding,
    /// and to float64 rounding for float64 plans.
    #[test]
    fn columns_reproduce_the_executor() {
        let pool = crate::plan::thread_pool(2).unwrap();
        let cases: [(&[i64], f64, bool, Upsampling, i32); 5] = [
            (&[37], 1e-3, false, Upsampling::OneQuarter, 1),
            (&[16, 9], 1e-6, true, Upsampling::Two, -1),
            (&[11, 8, 7], 1e-3, false, Upsampling::OneQuarter, 1),
            (&[6, 5, 10], 1e-9, true, Upsampling::OneQuarter, -1),
            (&[12, 1, 3], 1e-4, false, Upsampling::Two, 1),
        ];
        for (case, &(sizes, tolerance, double, upsampling, sign)) in cases.iter().enumerate() {
            let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
            let m = 150;
            let points: Vec<f64> = (0..modes.ndims * m)
                .map(|i| 1.3 * std::f64::consts::PI * value(1000 * case + i))
                .collect();
            let total = modes.total();
            let input = |n: usize, salt: usize| -> Vec<Complex64> {
                (0..n)
                    .map(|i| Complex64::new(value(salt + 2 * i), value(salt + 2 * i + 1)))
                    .collect()
            };
            let plan = |kind, sign| {
                NufftSpec::new(kind, modes, sign, tolerance, 1, double, Some(upsampling)).unwrap()
            };
            let relative = |a: &[Complex64], b: &[Complex64]| {
                let d: f64 = a.iter().zip(b).map(|(a, b)| (a - b).norm_sqr()).sum();
                let s: f64 = a.iter().map(|a| a.norm_sqr()).sum();
                (d / s).sqrt()
            };
            let mut column = vec![Complex64::new(0.0, 0.0); m];
            // The matrix of a plan of `kind` and the plan's c (M) and f (modes),
            // its input drawn and its output computed.
            let run = |kind| {
                let spec = plan(kind, sign);
                let g = NufftMatrix::<f64>::new(&spec, &points, m).unwrap();
                let (mut c, mut f) = match kind {
                    NufftType::Two => (vec![Complex64::new(0.0, 0.0); m], input(total, 7)),
                    NufftType::One => (input(m, 9), vec![Complex64::new(0.0, 0.0); total]),
                };
                let ex = crate::nufft::cpu::build(&spec, &points, m, pool.clone()).unwrap();
                ex.execute_c64(&mut c, &mut f).unwrap();
                (g, c, f)
            };
            // Type 2: c = G f.
            let (g, c, f) = run(NufftType::Two);
            let mut direct = vec![Complex64::new(0.0, 0.0); m];
            for (k, fk) in f.iter().enumerate() {
                g.column(k, false, &mut column);
                for (d, gk) in direct.iter_mut().zip(&column) {
                    *d += gk * fk;
                }
            }
            let e2 = relative(&direct, &c);
            // Type 1: f = Gᵀ c (the same sign).
            let (g, c, f) = run(NufftType::One);
            let direct: Vec<Complex64> = (0..total)
                .map(|k| {
                    g.column(k, false, &mut column);
                    column.iter().zip(&c).map(|(gk, cj)| gk * cj).sum()
                })
                .collect();
            let e1 = relative(&direct, &f);
            // The conjugate column is the opposite sign's; float32 columns
            // are the float64 ones to float32 rounding.
            let opposite =
                NufftMatrix::<f64>::new(&plan(NufftType::One, -sign), &points, m).unwrap();
            let mut a = column.clone();
            g.column(total / 2, true, &mut a);
            opposite.column(total / 2, false, &mut column);
            assert_eq!(a, column, "{sizes:?}: conjugate");
            let narrow = NufftMatrix::<f32>::new(&plan(NufftType::One, -sign), &points, m).unwrap();
            let mut single = vec![Complex32::new(0.0, 0.0); m];
            narrow.column(total / 2, false, &mut single);
            for (a, b) in single.iter().zip(&column) {
                let a = Complex64::new(a.re as f64, a.im as f64);
                assert!(
                    (a - b).norm() <= 1e-6 * b.norm().max(1.0),
                    "{sizes:?}: float32 {a} vs {b}"
                );
            }
            let bound = if double { 1e-12 } else { 2e-6 };
            eprintln!("{sizes:?} {tolerance:e} double {double}: type 2 {e2:.2e}, type 1 {e1:.2e}");
            assert!(
                e2 <= bound && e1 <= bound,
                "{sizes:?} {tolerance:e} double {double}: type 2 {e2:.2e}, type 1 {e1:.2e}"
            );
        }
    }
}
