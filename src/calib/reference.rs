//! The grid of a Cartesian reference scan and the two ways its results
//! reach a reconstruction: coil images from k-space, and interpolation onto
//! the reconstruction's positions.
//!
//! The reference grid follows MODEL.md's grid helper: voxel i sits at
//! r_a = c_a + (i_a − ⌊n_a/2⌋)·fov_a/n_a, and k-space sample p (first index
//! fastest, like an image) at k_a = 2π(p_a − ⌊n_a/2⌋)/fov_a, the samples of
//! `horecon_set_cartesian`. Its data are y_c(p) = Σ_n m_c(r_n)·exp(+i k_p·r_n).

use crate::backend::cpu::fft::{Direction, GridFft};
use crate::error::{try_vec, Error, Result};
use num_complex::{Complex32, Complex64};
use std::f64::consts::TAU;

/// A reference scan's grid (dims, field of view and centre in metres).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReferenceGrid {
    pub dims: [usize; 3],
    pub fov: [f64; 3],
    pub center: [f64; 3],
}

/// The largest k-space phase k·c (radians) of the reference centre: float64
/// keeps it to 1e-6 rad.
const MAX_CENTRE_PHASE: f64 = 1e10;

impl ReferenceGrid {
    /// Checks counts, field of view (> 0, not too small for the counts) and
    /// centre (finite, its k-space phase k·c ≤ 1e10 rad).
    pub fn new(dims: [i64; 3], fov: [f64; 3], center: [f64; 3]) -> Result<ReferenceGrid> {
        let sizes = crate::model::Sizes::new(dims[0], dims[1], dims[2], 1, 1)
            .map_err(|e| Error::invalid(format!("reference {}", e.message)))?;
        crate::model::check_finite("reference fov", &fov)?;
        crate::model::check_finite("reference center", &center)?;
        if let Some(a) = (0..3).find(|&a| fov[a] <= 0.0) {
            return Err(Error::invalid(format!(
                "reference fov[{a}] must be > 0 metres, got {}",
                fov[a]
            )));
        }
        // The k-space phase k·c of the centre must be a number float64 keeps
        // to 1e-6 rad: |k| ≤ π·n/fov, |k·c| ≤ 1e10 rad (a 256-sample axis of
        // 25.6 cm centred 1 m from the isocentre: 3.1e3 rad).
        for a in 0..3 {
            let k = std::f64::consts::PI * sizes.dims[a] as f64 / fov[a];
            if !k.is_finite() {
                return Err(Error::invalid(format!(
                    "reference fov[{a}] = {:e} m is too small for {} samples (|k| would be {k})",
                    fov[a], sizes.dims[a]
                )));
            }
            if k * center[a].abs() > MAX_CENTRE_PHASE {
                return Err(Error::invalid(format!(
                    "reference center[{a}] = {:e} m is too far from the isocentre for a field of \
                     view of {:e} m and {} samples: the phase k·c would reach {:.1e} rad (at \
                     most {MAX_CENTRE_PHASE:e})",
                    center[a],
                    fov[a],
                    sizes.dims[a],
                    k * center[a].abs()
                )));
            }
        }
        Ok(ReferenceGrid {
            dims: sizes.dims,
            fov,
            center,
        })
    }

    /// N_ref = n0·n1·n2.
    pub fn voxels(&self) -> usize {
        self.dims.iter().product()
    }

    /// k of sample index p along axis a (rad/m).
    pub fn k(&self, axis: usize, p: usize) -> f64 {
        TAU * (p as f64 - (self.dims[axis] / 2) as f64) / self.fov[axis]
    }

    /// The coil images m_c on the grid from k-space y_c (N_ref×L, column
    /// major), the exact inverse of y_c(p) = Σ_n m_c(r_n)·e^{+ik_p·r_n}:
    ///
    /// m(i) = (1/N) Σ_p y(p)·e^{−ik_p·c}·Π_a e^{−2πi(p_a−h_a)(i_a−h_a)/n_a},  h = ⌊n/2⌋.
    pub fn images(&self, kspace: &[Complex32], coils: usize) -> Result<Vec<Complex64>> {
        let n = self.voxels();
        let fft = GridFft::<f64>::new(self.dims);
        let mut out = try_vec(n * coils, Complex64::new(0.0, 0.0), "coil images (N x L)")?;
        // e^{−2πi(p−h)(i−h)/n} = e^{−2πi p i/n}·e^{2πi p h/n}·e^{2πi h i/n}·e^{−2πi h²/n}.
        let pre: Vec<Vec<Complex64>> = (0..3)
            .map(|a| {
                let (len, h) = (self.dims[a], (self.dims[a] / 2) as f64);
                (0..len)
                    .map(|p| {
                        Complex64::from_polar(
                            1.0,
                            -self.k(a, p) * self.center[a] + TAU * p as f64 * h / len as f64,
                        )
                    })
                    .collect()
            })
            .collect();
        let post: Vec<Vec<Complex64>> = (0..3)
            .map(|a| {
                let (len, h) = (self.dims[a], (self.dims[a] / 2) as f64);
                (0..len)
                    .map(|i| {
                        Complex64::from_polar(1.0, TAU * h * (i as f64 - h) / len as f64)
                            / len as f64
                    })
                    .collect()
            })
            .collect();
        let index = |v: usize| {
            [
                v % self.dims[0],
                (v / self.dims[0]) % self.dims[1],
                v / (self.dims[0] * self.dims[1]),
            ]
        };
        for (c, image) in out.chunks_exact_mut(n).enumerate() {
            for (v, m) in image.iter_mut().enumerate() {
                let [p0, p1, p2] = index(v);
                let y = kspace[c * n + v];
                *m =
                    Complex64::new(y.re as f64, y.im as f64) * pre[0][p0] * pre[1][p1] * pre[2][p2];
            }
            fft.process(image, Direction::Forward);
            for (v, m) in image.iter_mut().enumerate() {
                let [i0, i1, i2] = index(v);
                *m *= post[0][i0] * post[1][i1] * post[2][i2];
            }
        }
        Ok(out)
    }

    /// Continuous voxel index of position r along axis a (clamped to the grid).
    fn index_of(&self, axis: usize, r: f64) -> f64 {
        let n = self.dims[axis];
        if n == 1 {
            return 0.0;
        }
        let u = (r - self.center[axis]) * n as f64 / self.fov[axis] + (n / 2) as f64;
        u.clamp(0.0, (n - 1) as f64)
    }

    /// Trilinear interpolation of `values` (N_ref×columns, column major) at
    /// `positions` (P×3): P×columns. Positions outside the grid take the
    /// value of the nearest edge.
    pub fn interpolate<T: Interpolable>(
        &self,
        values: &[T],
        columns: usize,
        positions: &[f64],
    ) -> Result<Vec<T>> {
        let n = self.voxels();
        let points = positions.len() / 3;
        let mut out = try_vec(points * columns, T::default(), "interpolated values")?;
        for q in 0..points {
            let mut corners = [(0usize, 1.0f64); 8];
            let mut count = 1;
            let mut stride = 1;
            for a in 0..3 {
                let u = self.index_of(a, positions[a * points + q]);
                let i0 = u.floor() as usize;
                let f = u - i0 as f64;
                let i1 = (i0 + 1).min(self.dims[a] - 1);
                for k in 0..count {
                    let (base, w) = corners[k];
                    corners[k] = (base + i0 * stride, w * (1.0 - f));
                    corners[k + count] = (base + i1 * stride, w * f);
                }
                count *= 2;
                stride *= self.dims[a];
            }
            for c in 0..columns {
                let mut s = T::default();
                for &(v, w) in &corners[..count] {
                    if w != 0.0 {
                        s = s.add_scaled(values[c * n + v], w);
                    }
                }
                out[c * points + q] = s;
            }
        }
        Ok(out)
    }
}

/// Values that can be interpolated: s + w·v.
pub trait Interpolable: Copy + Default + Send + Sync {
    fn add_scaled(self, v: Self, w: f64) -> Self;
}

impl Interpolable for f64 {
    fn add_scaled(self, v: f64, w: f64) -> f64 {
        self + w * v
    }
}

impl Interpolable for Complex32 {
    fn add_scaled(self, v: Complex32, w: f64) -> Complex32 {
        self + v * w as f32
    }
}

/// Checks a k-space or image array of N_ref×`per_voxel` values.
pub fn check_reference_array(
    argument: &str,
    values: &[Complex32],
    grid: &ReferenceGrid,
    per_voxel: usize,
    shape: &str,
) -> Result<()> {
    let expected = grid.voxels() * per_voxel;
    if values.len() != expected {
        return Err(Error::size(format!(
            "{argument} has {} elements, expected {expected} ({shape})",
            values.len()
        )));
    }
    crate::model::check_finite(argument, values)?;
    if values.iter().all(|v| v.re == 0.0 && v.im == 0.0) {
        return Err(Error::invalid(format!(
            "{argument} is all zero: there is nothing to calibrate from"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// images() inverts the forward model y(p) = Σ_n m(r_n) e^{ik_p·r_n} on odd and even grids.
    #[test]
    fn images_invert_the_cartesian_model() {
        let seed = crate::sim::metrics::test_seed("images_invert_the_cartesian_model");
        let mut rng = crate::sim::SimRng::new(seed);
        for dims in [[4usize, 3, 1], [5, 2, 3]] {
            let grid = ReferenceGrid::new(
                dims.map(|d| d as i64),
                [0.2, 0.15, 0.1],
                [0.01, -0.02, 0.03],
            )
            .unwrap();
            let positions =
                crate::model::grid::grid_positions(grid.dims, grid.fov, grid.center).unwrap();
            let n = grid.voxels();
            let m: Vec<Complex64> = (0..n)
                .map(|_| Complex64::new(rng.normal(), rng.normal()))
                .collect();
            let mut y = vec![Complex32::default(); n];
            for (p, yp) in y.iter_mut().enumerate() {
                let idx = [
                    p % dims[0],
                    (p / dims[0]) % dims[1],
                    p / (dims[0] * dims[1]),
                ];
                let mut s = Complex64::new(0.0, 0.0);
                for (v, mv) in m.iter().enumerate() {
                    let phase: f64 = (0..3)
                        .map(|a| grid.k(a, idx[a]) * positions[a * n + v])
                        .sum();
                    s += mv * Complex64::from_polar(1.0, phase);
                }
                *yp = Complex32::new(s.re as f32, s.im as f32);
            }
            let back = grid.images(&y, 1).unwrap();
            let err = back
                .iter()
                .zip(&m)
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
            assert!(err < 1e-5, "{dims:?}: {err}");
        }
    }

    #[test]
    fn interpolation_is_exact_for_linear_functions() {
        let grid = ReferenceGrid::new([4, 5, 1], [0.2, 0.25, 0.01], [0.0, 0.01, 0.0]).unwrap();
        let p = crate::model::grid::grid_positions(grid.dims, grid.fov, grid.center).unwrap();
        let n = grid.voxels();
        let f = |x: f64, y: f64| 3.0 * x - 2.0 * y + 1.0;
        let values: Vec<f64> = (0..n).map(|v| f(p[v], p[n + v])).collect();
        let q = [0.013, -0.04, 0.01, 0.02, 0.0, 0.0];
        let out = grid.interpolate(&values, 1, &q).unwrap();
        assert!((out[0] - f(0.013, 0.01)).abs() < 1e-12);
        assert!((out[1] - f(-0.04, 0.02)).abs() < 1e-12);
    }
}
