//! The Cartesian FFT operator on the CPU (issue 5 §3): E, Eᴴ and EᴴWE of
//! [`crate::model::cartesian`] with grid FFTs, in float32 (accurate, fast)
//! or float64 (double).
//!
//! Per coil c, with X = F⁻¹(S_c x) (unnormalised inverse FFT):
//!
//! - forward: d_{m,c} = e^{iθ_m}·X(q_m)
//! - adjoint: x = Σ_c conj(S_c)·F(G_c), G_c(q_m) = e^{−iθ_m}·d_{m,c}
//! - normal:  x ↦ Σ_c conj(S_c)·F(W_q·F⁻¹(S_c x)); along an axis where W_q is
//!   constant the inverse and forward 1D transforms cancel to a factor n_a,
//!   so that axis is skipped (a fully sampled readout costs no FFT).

use super::fft::{Direction, GridFft};
use super::real::Real;
use super::space::{self, CpuNormal};
use super::{apply_sample_weights, complex_zeros, mul, narrow_into, widen_all};
use crate::error::{try_vec, Result};
use crate::model::cartesian::Cartesian;
use crate::model::Sizes;
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::solver::CgProblem;
use num_complex::{Complex, Complex32};
use rayon::prelude::*;
use rustfft::FftNum;
use std::sync::Arc;

/// Builds the Cartesian operator: float32 FFTs for accurate and fast,
/// float64 for double.
pub fn build(
    cartesian: Arc<Cartesian>,
    sensitivities: Option<&[Complex32]>,
    sizes: Sizes,
    precision: Precision,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    Ok(match precision {
        Precision::Accurate | Precision::Fast => Box::new(CartesianOperator::<f32>::new(
            cartesian,
            sensitivities,
            sizes,
            pool,
        )?),
        Precision::Double => Box::new(CartesianOperator::<f64>::new(
            cartesian,
            sensitivities,
            sizes,
            pool,
        )?),
    })
}

/// The per-bin weights W_q of the normal operator and the axes it must
/// transform (those along which W_q is not constant), with the product of
/// the skipped axes' lengths folded into W_q.
struct BinWeights<T> {
    weights: Vec<T>,
    axes: [bool; 3],
    /// When W_q is constant along x (a fully sampled readout): W on one
    /// y–z plane, z fastest (the order of the slab path's z transforms).
    plane_zy: Option<Vec<T>>,
}

impl<T: Real> BinWeights<T> {
    fn new(cartesian: &Cartesian, sample_weights: Option<&[f32]>) -> Result<Self> {
        let dims = cartesian.geometry.dims;
        let w = cartesian.bin_weights(sample_weights)?;
        let strides = [1, dims[0], dims[0] * dims[1]];
        let mut axes = [false; 3];
        let mut factor = 1.0;
        for a in 0..3 {
            let n = dims[a];
            // Constant along axis a: every value equals the one at index 0 of that axis.
            let constant = n == 1
                || w.par_iter().enumerate().all(|(v, &x)| {
                    let i = (v / strides[a]) % n;
                    x == w[v - i * strides[a]]
                });
            axes[a] = !constant;
            if constant {
                factor *= n as f64;
            }
        }
        let mut weights = try_vec(w.len(), T::default(), "Cartesian bin weights (N)")?;
        weights
            .par_iter_mut()
            .zip(&w)
            .for_each(|(o, &x)| *o = <T as Real>::from_f64(x * factor));
        let plane_zy = if axes[0] {
            None
        } else {
            let (nx, ny, nz) = (dims[0], dims[1], dims[2]);
            let mut plane = try_vec(ny * nz, T::default(), "Cartesian plane weights")?;
            for y in 0..ny {
                for z in 0..nz {
                    plane[z + nz * y] = weights[nx * (y + ny * z)];
                }
            }
            Some(plane)
        };
        Ok(BinWeights {
            weights,
            axes,
            plane_zy,
        })
    }
}

/// E of a Cartesian plan on the CPU with FFTs in T.
pub struct CartesianOperator<T: Real + FftNum> {
    sizes: Sizes,
    cartesian: Arc<Cartesian>,
    fft: GridFft<T>,
    /// e^{iθ_m} per sample.
    phases: Vec<Complex<T>>,
    /// N×L, or `None` for S ≡ 1.
    sensitivities: Option<Vec<Complex<T>>>,
    /// W_q without sample weights.
    unit_weights: BinWeights<T>,
    /// The sensitivities in the slab path's order (when W_q is constant
    /// along x): per block of [`SLAB`] x, per coil, per y–z point, x fastest.
    slab_sensitivities: Option<Vec<Complex<T>>>,
    pool: Arc<rayon::ThreadPool>,
}

impl<T: Real + FftNum> CartesianOperator<T> {
    pub fn new(
        cartesian: Arc<Cartesian>,
        sensitivities: Option<&[Complex32]>,
        sizes: Sizes,
        pool: Arc<rayon::ThreadPool>,
    ) -> Result<Self> {
        let fft = GridFft::new(sizes.dims);
        let mut phases = complex_zeros(cartesian.phase_cycles.len(), "Cartesian phases (M)")?;
        phases
            .iter_mut()
            .zip(&cartesian.phase_cycles)
            .for_each(|(p, &c)| {
                let (s, co) = (2.0 * std::f64::consts::PI * c).sin_cos();
                *p = Complex::new(<T as Real>::from_f64(co), <T as Real>::from_f64(s));
            });
        let sensitivities = match sensitivities {
            None => None,
            Some(s) => Some(pool.install(|| widen_all(s, "sensitivities"))?),
        };
        let unit_weights = pool.install(|| BinWeights::new(&cartesian, None))?;
        let slab_sensitivities = match (&sensitivities, &unit_weights.plane_zy) {
            (Some(s), Some(_)) => Some(slab_order(s, sizes)?),
            _ => None,
        };
        Ok(CartesianOperator {
            slab_sensitivities,
            sizes,
            cartesian,
            fft,
            phases,
            sensitivities,
            unit_weights,
            pool,
        })
    }

    /// buffer = S_c·x.
    fn weighted_image(&self, c: usize, x: &[Complex<T>], buffer: &mut [Complex<T>]) {
        let n = self.sizes.voxels;
        match &self.sensitivities {
            None => buffer.par_iter_mut().zip(x).for_each(|(b, x)| *b = *x),
            Some(s) => buffer
                .par_iter_mut()
                .zip(x)
                .zip(&s[c * n..(c + 1) * n])
                .for_each(|((b, x), s)| *b = mul(*s, *x)),
        }
    }

    /// y (+)= conj(S_c)·buffer (assigns for the first coil).
    fn accumulate(&self, c: usize, buffer: &[Complex<T>], y: &mut [Complex<T>]) {
        let n = self.sizes.voxels;
        let first = c == 0;
        match &self.sensitivities {
            None => y.par_iter_mut().zip(buffer).for_each(|(y, b)| {
                *y = if first { *b } else { *y + *b };
            }),
            Some(s) => y
                .par_iter_mut()
                .zip(buffer)
                .zip(&s[c * n..(c + 1) * n])
                .for_each(|((y, b), s)| {
                    let v = mul(s.conj(), *b);
                    *y = if first { v } else { *y + v };
                }),
        }
    }

    /// d = E x (M×L).
    fn forward_acc(&self, x: &[Complex<T>], d: &mut [Complex<T>]) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.sizes;
        let mut buffer = complex_zeros(n, "Cartesian FFT grid (N)")?;
        let bins = &self.cartesian.bins;
        for c in 0..coils {
            self.weighted_image(c, x, &mut buffer);
            self.fft.process(&mut buffer, Direction::Inverse);
            d[c * m..(c + 1) * m]
                .par_iter_mut()
                .zip(bins)
                .zip(&self.phases)
                .for_each(|((d, &q), p)| *d = mul(*p, buffer[q]));
        }
        Ok(())
    }

    /// x = Eᴴ d.
    fn adjoint_acc(&self, d: &[Complex<T>], x: &mut [Complex<T>]) -> Result<()> {
        let Sizes {
            voxels: n,
            samples: m,
            coils,
            ..
        } = self.sizes;
        let mut buffer = complex_zeros(n, "Cartesian FFT grid (N)")?;
        let bins = &self.cartesian.bins;
        let zero = Complex::new(T::default(), T::default());
        for c in 0..coils {
            buffer.par_iter_mut().for_each(|b| *b = zero);
            for ((&q, p), d) in bins.iter().zip(&self.phases).zip(&d[c * m..(c + 1) * m]) {
                buffer[q] = mul(p.conj(), *d);
            }
            self.fft.process(&mut buffer, Direction::Forward);
            self.accumulate(c, &buffer, x);
        }
        Ok(())
    }

    /// y = Eᴴ W E x without gathering: W_q on the FFT grid.
    fn normal_acc(
        &self,
        x: &[Complex<T>],
        y: &mut [Complex<T>],
        sample_weights: Option<&[f32]>,
    ) -> Result<()> {
        let custom;
        let weights = match sample_weights {
            None => &self.unit_weights,
            Some(w) => {
                custom = BinWeights::new(&self.cartesian, Some(w))?;
                &custom
            }
        };
        if let Some(plane) = &weights.plane_zy {
            self.normal_slabs(x, y, plane, weights.axes);
            return Ok(());
        }
        let mut buffer = complex_zeros(self.sizes.voxels, "Cartesian FFT grid (N)")?;
        for c in 0..self.sizes.coils {
            self.weighted_image(c, x, &mut buffer);
            self.fft
                .process_axes(&mut buffer, Direction::Inverse, weights.axes);
            buffer
                .par_iter_mut()
                .zip(&weights.weights)
                .for_each(|(b, &w)| *b = Complex::new(b.re * w, b.im * w));
            self.fft
                .process_axes(&mut buffer, Direction::Forward, weights.axes);
            self.accumulate(c, &buffer, y);
        }
        Ok(())
    }

    /// The normal operator when W_q is constant along x (no x transforms):
    /// independent y–z planes, processed in blocks of [`SLAB`] consecutive x
    /// that stay in cache through all coils, so each of x, y and S_c crosses
    /// memory once per application. Per plane and coil: y = S_c·x, inverse
    /// FFT along y, transpose, inverse FFT along z, ·W, forward FFT along z,
    /// transpose back, forward FFT along y, accumulate conj(S_c)·(…).
    fn normal_slabs(&self, x: &[Complex<T>], y: &mut [Complex<T>], w_zy: &[T], axes: [bool; 3]) {
        let [nx, ny, nz] = self.sizes.dims;
        let (plane, coils) = (ny * nz, self.sizes.coils);
        let zero = Complex::new(T::default(), T::default());
        let plans = [Direction::Inverse, Direction::Forward].map(|d| {
            [
                self.fft.line_plan(1, d).clone(),
                self.fft.line_plan(2, d).clone(),
            ]
        });
        let scratch_len = plans
            .iter()
            .flatten()
            .map(|p| p.get_inplace_scratch_len())
            .max()
            .unwrap_or(0);
        let out = SharedImage(y.as_mut_ptr());
        let sensitivities = self.slab_sensitivities.as_deref();
        (0..nx.div_ceil(SLAB)).into_par_iter().for_each_init(
            || {
                (
                    vec![zero; SLAB * plane],
                    vec![zero; SLAB * plane],
                    vec![zero; SLAB * plane],
                    vec![zero; plane],
                    vec![zero; scratch_len],
                )
            },
            |(buffer, acc, xb, transposed, scratch), block| {
                let x0 = block * SLAB;
                let b = SLAB.min(nx - x0);
                for v in 0..plane {
                    let row = x0 + nx * v;
                    xb[v * b..(v + 1) * b].copy_from_slice(&x[row..row + b]);
                }
                let xb = &xb[..plane * b];
                for c in 0..coils {
                    let s = sensitivities.map(|s| {
                        let start = x0 * plane * coils + c * b * plane;
                        &s[start..start + b * plane]
                    });
                    match s {
                        Some(s) => {
                            for (v, (s, xv)) in
                                s.chunks_exact(b).zip(xb.chunks_exact(b)).enumerate()
                            {
                                for i in 0..b {
                                    buffer[i * plane + v] = mul(s[i], xv[i]);
                                }
                            }
                        }
                        None => {
                            for (v, xv) in xb.chunks_exact(b).enumerate() {
                                for i in 0..b {
                                    buffer[i * plane + v] = xv[i];
                                }
                            }
                        }
                    }
                    for i in 0..b {
                        let p = &mut buffer[i * plane..(i + 1) * plane];
                        if axes[1] {
                            plans[0][0].process_with_scratch(p, scratch);
                        }
                        if axes[2] {
                            for yy in 0..ny {
                                for z in 0..nz {
                                    transposed[z + nz * yy] = p[yy + ny * z];
                                }
                            }
                            plans[0][1].process_with_scratch(transposed, scratch);
                            for (t, &w) in transposed.iter_mut().zip(w_zy) {
                                *t = Complex::new(t.re * w, t.im * w);
                            }
                            plans[1][1].process_with_scratch(transposed, scratch);
                            for yy in 0..ny {
                                for z in 0..nz {
                                    p[yy + ny * z] = transposed[z + nz * yy];
                                }
                            }
                        } else {
                            for yy in 0..ny {
                                for z in 0..nz {
                                    let (t, w) = (&mut p[yy + ny * z], w_zy[z + nz * yy]);
                                    *t = Complex::new(t.re * w, t.im * w);
                                }
                            }
                        }
                        if axes[1] {
                            plans[1][0].process_with_scratch(p, scratch);
                        }
                    }
                    for v in 0..plane {
                        for i in 0..b {
                            let t = buffer[i * plane + v];
                            let value = match s {
                                Some(s) => mul(s[v * b + i].conj(), t),
                                None => t,
                            };
                            let a = &mut acc[v * b + i];
                            *a = if c == 0 { value } else { *a + value };
                        }
                    }
                }
                for v in 0..plane {
                    let row = x0 + nx * v;
                    for i in 0..b {
                        // SAFETY: row + i < nx·ny·nz = y.len(), and the x
                        // range x0..x0+b belongs to this block only.
                        unsafe { *out.at(row + i) = acc[v * b + i] };
                    }
                }
            },
        );
    }
}

/// N×L sensitivities (voxel fastest) reordered for the slab path: per
/// block of [`SLAB`] consecutive x, per coil, per y–z point, x fastest.
fn slab_order<T: Real>(s: &[Complex<T>], sizes: Sizes) -> Result<Vec<Complex<T>>> {
    let [nx, ny, nz] = sizes.dims;
    let (plane, coils, n) = (ny * nz, sizes.coils, sizes.voxels);
    let mut out = complex_zeros(s.len(), "sensitivities in slab order (N x L)")?;
    for x0 in (0..nx).step_by(SLAB) {
        let b = SLAB.min(nx - x0);
        for c in 0..coils {
            let start = x0 * plane * coils + c * b * plane;
            for v in 0..plane {
                let row = c * n + x0 + nx * v;
                out[start + v * b..start + (v + 1) * b].copy_from_slice(&s[row..row + b]);
            }
        }
    }
    Ok(out)
}

/// Voxels of consecutive x per block of the slab path (64 bytes of complex float32).
const SLAB: usize = 8;

/// A raw view of the output image shared by blocks writing disjoint x ranges.
#[derive(Clone, Copy)]
struct SharedImage<T>(*mut Complex<T>);

// SAFETY: every block of `normal_slabs` writes only the voxels of its own x
// range; the ranges of different blocks are disjoint.
unsafe impl<T: Send> Send for SharedImage<T> {}
unsafe impl<T: Send> Sync for SharedImage<T> {}

impl<T> SharedImage<T> {
    /// # Safety
    /// `offset` must lie inside the image this view was made from.
    unsafe fn at(&self, offset: usize) -> *mut Complex<T> {
        self.0.add(offset)
    }
}

impl<T: Real + FftNum> CpuNormal<T> for CartesianOperator<T> {
    fn sizes(&self) -> Sizes {
        self.sizes
    }

    fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    fn rhs(&self, data: &[Complex32], weights: Option<&[f32]>, b: &mut [Complex<T>]) -> Result<()> {
        let mut d = widen_all(data, "data")?;
        if let Some(w) = weights {
            apply_sample_weights(&mut d, self.sizes.samples, w);
        }
        self.adjoint_acc(&d, b)
    }

    fn normal(
        &self,
        x: &[Complex<T>],
        y: &mut [Complex<T>],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        self.normal_acc(x, y, weights)
    }
}

impl<T: Real + FftNum> EncodingOperator for CartesianOperator<T> {
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        self.pool.install(|| {
            let x = widen_all::<T>(image, "image")?;
            let mut d = complex_zeros(data.len(), "data")?;
            self.forward_acc(&x, &mut d)?;
            narrow_into(&d, data);
            Ok(())
        })
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        self.pool.install(|| {
            let d = widen_all::<T>(data, "data")?;
            let mut x = complex_zeros(image.len(), "image")?;
            self.adjoint_acc(&d, &mut x)?;
            narrow_into(&x, image);
            Ok(())
        })
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        self.pool.install(|| {
            let x = widen_all::<T>(image, "image")?;
            let mut y = complex_zeros(out.len(), "image")?;
            self.normal_acc(&x, &mut y, weights)?;
            narrow_into(&y, out);
            Ok(())
        })
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        space::solve(self, problem, image)
    }

    fn backend_name(&self) -> String {
        "cpu (Cartesian FFT)".into()
    }
}
