//! Shepp–Logan phantoms (2D: Toft's modified version; 3D: the modified
//! Kak–Slaney ellipsoids, rotations about z only) and their analytic
//! Fourier transform in the sign convention of MODEL.md:
//!
//! $$F(\mathbf k) = \int \rho(\mathbf r)\, e^{+i\,\mathbf k\cdot\mathbf r}\, d\mathbf r .$$
//!
//! Each ellipse (ellipsoid) is the unit disk (ball) under the affine map
//! r = A·u + c, so its transform is
//! F(k) = a·|det A|·Ĵ(‖Aᵀk‖)·exp(+i k·c) with Ĵ₂(κ) = π·2J₁(κ)/κ (2D) and
//! Ĵ₃(κ) = (4π/3)·3(sin κ − κ cos κ)/κ³ (3D). A voxel sum approximates it:
//! Σ_n ρ(r_n)·e^{+i k·r_n}·ΔV ≈ F(k).
//!
//! The phantom spans `fov` (m, the normalised square [−1, 1]² or cube
//! [−1, 1]³ maps onto it) around `center` (m).

use crate::error::{Error, Result};
use num_complex::Complex64;
use std::f64::consts::PI;

/// (intensity, semi-axes a, b, centre x0, y0, rotation in degrees), normalised units.
const SHEPP_LOGAN_2D: [[f64; 6]; 10] = [
    [1.0, 0.69, 0.92, 0.0, 0.0, 0.0],
    [-0.8, 0.6624, 0.874, 0.0, -0.0184, 0.0],
    [-0.2, 0.11, 0.31, 0.22, 0.0, -18.0],
    [-0.2, 0.16, 0.41, -0.22, 0.0, 18.0],
    [0.1, 0.21, 0.25, 0.0, 0.35, 0.0],
    [0.1, 0.046, 0.046, 0.0, 0.1, 0.0],
    [0.1, 0.046, 0.046, 0.0, -0.1, 0.0],
    [0.1, 0.046, 0.023, -0.08, -0.605, 0.0],
    [0.1, 0.023, 0.023, 0.0, -0.606, 0.0],
    [0.1, 0.023, 0.046, 0.06, -0.605, 0.0],
];

/// (intensity, semi-axes a, b, c, centre x0, y0, z0, rotation about z in degrees).
const SHEPP_LOGAN_3D: [[f64; 8]; 10] = [
    [1.0, 0.69, 0.92, 0.81, 0.0, 0.0, 0.0, 0.0],
    [-0.8, 0.6624, 0.874, 0.78, 0.0, -0.0184, 0.0, 0.0],
    [-0.2, 0.11, 0.31, 0.22, 0.22, 0.0, 0.0, -18.0],
    [-0.2, 0.16, 0.41, 0.28, -0.22, 0.0, 0.0, 18.0],
    [0.1, 0.21, 0.25, 0.41, 0.0, 0.35, -0.15, 0.0],
    [0.1, 0.046, 0.046, 0.05, 0.0, 0.1, 0.25, 0.0],
    [0.1, 0.046, 0.046, 0.05, 0.0, -0.1, 0.25, 0.0],
    [0.1, 0.046, 0.023, 0.05, -0.08, -0.605, 0.0, 0.0],
    [0.1, 0.023, 0.023, 0.02, 0.0, -0.606, 0.0, 0.0],
    [0.1, 0.023, 0.046, 0.02, 0.06, -0.605, 0.0, 0.0],
];

/// One ellipse/ellipsoid: intensity, the map A (3×3, row-major) and its
/// inverse, the centre c (m).
#[derive(Clone, Copy, Debug)]
struct Ellipsoid {
    intensity: f64,
    a: [[f64; 3]; 3],
    a_inv: [[f64; 3]; 3],
    det: f64,
    center: [f64; 3],
}

/// A Shepp–Logan phantom of `ndims` (2 or 3) dimensions, `fov` wide (m), at `center` (m).
#[derive(Clone, Debug)]
pub struct Phantom {
    pub ndims: usize,
    ellipsoids: Vec<Ellipsoid>,
}

fn mat_vec(m: &[[f64; 3]; 3], v: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|i| m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2])
}

fn transpose_vec(m: &[[f64; 3]; 3], v: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|i| m[0][i] * v[0] + m[1][i] * v[1] + m[2][i] * v[2])
}

impl Phantom {
    pub fn new(ndims: usize, fov: [f64; 3], center: [f64; 3]) -> Result<Phantom> {
        if ndims != 2 && ndims != 3 {
            return Err(Error::invalid(format!("ndims must be 2 or 3, got {ndims}")));
        }
        crate::model::check_finite("fov", &fov)?;
        crate::model::check_finite("center", &center)?;
        if let Some(axis) = fov[..ndims].iter().position(|&f| f <= 0.0) {
            return Err(Error::invalid(format!(
                "fov[{axis}] must be > 0 metres, got {}",
                fov[axis]
            )));
        }
        let rows: Vec<[f64; 8]> = if ndims == 2 {
            SHEPP_LOGAN_2D
                .iter()
                .map(|e| [e[0], e[1], e[2], 1.0, e[3], e[4], 0.0, e[5]])
                .collect()
        } else {
            SHEPP_LOGAN_3D.to_vec()
        };
        let half = [
            fov[0] / 2.0,
            fov[1] / 2.0,
            if ndims == 3 { fov[2] / 2.0 } else { 1.0 },
        ];
        let ellipsoids = rows
            .iter()
            .map(|e| {
                let (s, c) = e[7].to_radians().sin_cos();
                // A = S·R(φ)·diag(a, b, c): the unit ball onto the ellipsoid.
                let r = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]];
                let axes = [e[1], e[2], e[3]];
                let a = [0, 1, 2].map(|i| [0, 1, 2].map(|j| half[i] * r[i][j] * axes[j]));
                let a_inv = [0, 1, 2].map(|i| [0, 1, 2].map(|j| r[j][i] / axes[i] / half[j]));
                let det = half[0] * half[1] * half[2] * axes[0] * axes[1] * axes[2];
                let center = [0, 1, 2].map(|i| {
                    if i < ndims {
                        center[i] + half[i] * e[4 + i]
                    } else {
                        center[i]
                    }
                });
                Ellipsoid {
                    intensity: e[0],
                    a,
                    a_inv,
                    det,
                    center,
                }
            })
            .collect();
        Ok(Phantom { ndims, ellipsoids })
    }

    /// ρ(r): the sum of the intensities of the ellipses containing r (2D ignores z).
    pub fn value(&self, r: [f64; 3]) -> f64 {
        self.ellipsoids
            .iter()
            .filter(|e| {
                let mut d = [0, 1, 2].map(|i| r[i] - e.center[i]);
                if self.ndims == 2 {
                    d[2] = 0.0;
                }
                let u = mat_vec(&e.a_inv, d);
                u[0] * u[0] + u[1] * u[1] + u[2] * u[2] <= 1.0
            })
            .map(|e| e.intensity)
            .sum()
    }

    /// F(k) = ∫ρ(r)e^{+ik·r}dr (m² in 2D, m³ in 3D); k in rad/m, the z component is ignored in 2D.
    pub fn kspace(&self, k: [f64; 3]) -> Complex64 {
        let mut k = k;
        if self.ndims == 2 {
            k[2] = 0.0;
        }
        self.ellipsoids
            .iter()
            .map(|e| {
                let q = transpose_vec(&e.a, k);
                let kappa = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2]).sqrt();
                let shape = if self.ndims == 2 {
                    PI * jinc(kappa)
                } else {
                    4.0 / 3.0 * PI * sphere_shape(kappa)
                };
                let phase = k[0] * e.center[0] + k[1] * e.center[1] + k[2] * e.center[2];
                Complex64::from_polar(e.intensity * e.det * shape, phase)
            })
            .sum()
    }
}

/// J₁(x) by the trapezoid rule on Bessel's integral
/// J₁(x) = (1/2π)∫₀^{2π} cos(τ − x·sin τ) dτ, exact to rounding once the
/// number of nodes exceeds |x| by a margin (the integrand is periodic and analytic).
pub fn bessel_j1(x: f64) -> f64 {
    if !x.is_finite() {
        return 0.0; // the limit |x| → ∞ (NaN never reaches here: inputs are checked)
    }
    if x.abs() > ASYMPTOTIC_J1 {
        return bessel_j1_asymptotic(x);
    }
    // J_ν(x) is negligible once ν exceeds x by ~10·x^{1/3} (the aliasing error of the rule).
    let nodes = (x.abs() + 10.0 * x.abs().cbrt()).ceil() as usize + 48;
    let step = std::f64::consts::TAU / nodes as f64;
    (0..nodes)
        .map(|j| {
            let tau = j as f64 * step;
            (tau - x * tau.sin()).cos()
        })
        .sum::<f64>()
        / nodes as f64
}

/// Beyond this |x| J₁ comes from Hankel's asymptotic expansion (the
/// quadrature's cost grows with x; the expansion's error there is ~1e-17).
const ASYMPTOTIC_J1: f64 = 2000.0;

/// J₁(x) = √(2/(πx))·(P cos χ − Q sin χ), χ = x − 3π/4, with Hankel's
/// P = 1 + 15/(128x²) − 14175/(98304x⁴), Q = 3/(8x) − 315/(3072x³)
/// (Abramowitz & Stegun 9.2.5, μ = 4); J₁(−x) = −J₁(x).
fn bessel_j1_asymptotic(x: f64) -> f64 {
    let a = x.abs();
    let (a2, a4) = (a * a, a * a * a * a);
    let p = 1.0 + 15.0 / (128.0 * a2) - 14175.0 / (98304.0 * a4);
    let q = 3.0 / (8.0 * a) - 315.0 / (3072.0 * a2 * a);
    let chi = a - 0.75 * PI;
    let value = (2.0 / (PI * a)).sqrt() * (p * chi.cos() - q * chi.sin());
    if x < 0.0 {
        -value
    } else {
        value
    }
}

/// 2J₁(κ)/κ, 1 at κ = 0.
fn jinc(kappa: f64) -> f64 {
    if kappa < 1e-4 {
        1.0 - kappa * kappa / 8.0
    } else {
        2.0 * bessel_j1(kappa) / kappa
    }
}

/// 3(sin κ − κ cos κ)/κ³, 1 at κ = 0.
fn sphere_shape(kappa: f64) -> f64 {
    if kappa < 1e-2 {
        let k2 = kappa * kappa;
        1.0 - k2 / 10.0 + k2 * k2 / 280.0
    } else {
        3.0 * (kappa.sin() - kappa * kappa.cos()) / kappa.powi(3)
    }
}

/// Phantom values at N positions (N×3, first index fastest).
pub fn shepp_logan(
    ndims: usize,
    fov: [f64; 3],
    center: [f64; 3],
    positions: &[f64],
) -> Result<Vec<f64>> {
    let phantom = Phantom::new(ndims, fov, center)?;
    if positions.len() % 3 != 0 {
        return Err(Error::size(format!(
            "positions has {} elements, not a multiple of 3 (N x 3)",
            positions.len()
        )));
    }
    crate::model::check_finite("positions", positions)?;
    let n = positions.len() / 3;
    super::tabulate(n, "phantom values (N)", |i| {
        phantom.value([positions[i], positions[n + i], positions[2 * n + i]])
    })
}

/// Analytic F(k_j) at M k-space points (M×d with d = `kdims` ≤ 3 columns, rad/m).
pub fn shepp_logan_kspace(
    ndims: usize,
    fov: [f64; 3],
    center: [f64; 3],
    kdims: usize,
    k: &[f64],
) -> Result<Vec<Complex64>> {
    let phantom = Phantom::new(ndims, fov, center)?;
    if !(1..=3).contains(&kdims) || k.len() % kdims != 0 {
        return Err(Error::size(format!(
            "k has {} elements, not M x {kdims} (kdims 1..3)",
            k.len()
        )));
    }
    crate::model::check_finite("k", k)?;
    let m = k.len() / kdims;
    super::tabulate(m, "phantom transform (M)", |j| {
        let mut kj = [0.0; 3];
        for (d, v) in kj.iter_mut().enumerate().take(kdims) {
            *v = k[d * m + j];
        }
        phantom.kspace(kj)
    })
}

/// The phantom as a grid of field of view `grid_fov` (m, x and y) acquired
/// up to |k| ≤ `kmax` (rad/m) sees it: the inverse Fourier series of the
/// analytic transform over the Cartesian grid Δk = 2π/grid_fov inside the disk,
///
/// ρ_ref(r_n) = (1/(fov_x·fov_y))·Σ_{|k| ≤ kmax} F(k)·e^{−i k·r_n},
///
/// at N positions (N×3; 2D phantoms only, z ignored). This is the reference
/// a reconstruction from a trajectory that covers that disk can reach
/// (a spiral covers the inscribed disk, not the corners of the grid's k-space).
pub fn shepp_logan_band_limited(
    fov: [f64; 3],
    center: [f64; 3],
    positions: &[f64],
    grid_fov: [f64; 2],
    kmax: f64,
) -> Result<Vec<num_complex::Complex32>> {
    use rayon::prelude::*;
    let phantom = Phantom::new(2, fov, center)?;
    if positions.len() % 3 != 0 {
        return Err(Error::size(format!(
            "positions has {} elements, not a multiple of 3 (N x 3)",
            positions.len()
        )));
    }
    crate::model::check_finite("positions", positions)?;
    if !(grid_fov.iter().all(|f| f.is_finite() && *f > 0.0) && kmax.is_finite() && kmax > 0.0) {
        return Err(Error::invalid(format!(
            "grid_fov {grid_fov:?} and kmax {kmax} must be finite and > 0"
        )));
    }
    let dk = [2.0 * PI / grid_fov[0], 2.0 * PI / grid_fov[1]];
    let reach = [kmax / dk[0], kmax / dk[1]].map(f64::floor);
    // (2·reach + 1)² grid points, of which the disk keeps ~π/4.
    let points = reach[0] * reach[1];
    if points.is_nan() || points > (1u64 << 24) as f64 {
        return Err(Error::invalid(format!(
            "kmax = {kmax} is too large for grid_fov {grid_fov:?} (more than 2^26 k-space \
             points): use kmax <= pi*n/grid_fov for an n-point grid"
        )));
    }
    let reach = reach.map(|r| r as i64);
    let n = positions.len() / 3;
    // Work: the spectrum, then N·K phase terms in parallel chunks.
    let progress = crate::progress::Progress::current();
    let grid_points = ((2 * reach[0] + 1) * (2 * reach[1] + 1)) as usize;
    let mut spectrum = Vec::new();
    spectrum.try_reserve_exact(grid_points).map_err(|_| {
        Error::out_of_memory(format!(
            "could not allocate the band-limited spectrum: {grid_points} points of 32 bytes"
        ))
    })?;
    let spectrum_part = progress.part(0.0, 0.05);
    for iy in -reach[1]..=reach[1] {
        spectrum_part.check((iy + reach[1]) as f64 / (2 * reach[1] + 1) as f64)?;
        for ix in -reach[0]..=reach[0] {
            let k = [ix as f64 * dk[0], iy as f64 * dk[1]];
            if k[0].hypot(k[1]) <= kmax {
                spectrum.push((k, phantom.kspace([k[0], k[1], 0.0])));
            }
        }
    }
    let sums = progress.part(0.05, 1.0);
    let scale = 1.0 / (grid_fov[0] * grid_fov[1]);
    let mut values = crate::error::try_vec(
        n,
        num_complex::Complex32::default(),
        "band-limited values (N)",
    )?;
    let chunk = (1usize << 22).div_ceil(spectrum.len().max(1)).max(1);
    let chunks = n.div_ceil(chunk).max(1) as f64;
    let finished = std::sync::atomic::AtomicUsize::new(0);
    values
        .par_chunks_mut(chunk)
        .enumerate()
        .try_for_each(|(c, out)| -> Result<()> {
            sums.check(finished.load(std::sync::atomic::Ordering::Relaxed) as f64 / chunks)?;
            for (o, i) in out.iter_mut().zip(c * chunk..) {
                let (x, y) = (positions[i], positions[n + i]);
                let sum: Complex64 = spectrum
                    .iter()
                    .map(|(k, f)| f * Complex64::from_polar(1.0, -(k[0] * x + k[1] * y)))
                    .sum();
                let v = sum * scale;
                *o = num_complex::Complex32::new(v.re as f32, v.im as f32);
            }
            finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })?;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{metrics::test_seed, SimRng};

    #[test]
    fn bessel_j1_known_values() {
        // Abramowitz & Stegun table 9.1 values.
        for (x, j1) in [
            (0.5, 0.242_268_457_674_873_9),
            (1.0, 0.440_050_585_744_933_5),
            (5.0, -0.327_579_137_591_465_2),
            (10.0, 0.043_472_746_168_861_44),
        ] {
            assert!(
                (bessel_j1(x) - j1).abs() < 1e-14,
                "J1({x}) = {}",
                bessel_j1(x)
            );
        }
        // Large arguments against the asymptotic form √(2/πx)·cos(x − 3π/4) (error ~ 1/x^1.5).
        let x = 4000.0f64;
        let asym = (2.0 / (PI * x)).sqrt() * (x - 0.75 * PI).cos();
        assert!((bessel_j1(x) - asym).abs() < 1e-5);
        // Hankel's expansion takes over from the quadrature seamlessly, and
        // huge or infinite arguments return at once (they used to loop ~forever).
        for x in [1500.0, 1999.0, 1999.999] {
            let (quadrature, hankel) = (bessel_j1(x), bessel_j1_asymptotic(x));
            assert!(
                (quadrature - hankel).abs() < 1e-14,
                "{x}: {quadrature} vs {hankel}"
            );
        }
        assert!((bessel_j1(-2500.5) + bessel_j1(2500.5)).abs() < 1e-18);
        assert!(bessel_j1(1e300).abs() < 1e-150 && bessel_j1(f64::INFINITY) == 0.0);
    }

    #[test]
    fn values_inside_known_regions() {
        let p = Phantom::new(2, [0.2, 0.2, 0.0], [0.01, 0.0, 0.0]).unwrap();
        // centre of the phantom: outer ellipse 1 − 0.8 = 0.2.
        assert!((p.value([0.01, 0.0, 0.0]) - 0.2).abs() < 1e-12);
        // far outside: 0
        assert_eq!(p.value([0.2, 0.2, 0.0]), 0.0);
        // inside the small spot centred at (0, 0.1) normalised (radius 0.046): 1 − 0.8 + 0.1.
        assert!((p.value([0.01, 0.08 * 0.1, 0.0]) - 0.3).abs() < 1e-12);
    }

    /// The analytic transform against a direct sum over a finely sampled phantom.
    #[test]
    fn analytic_fourier_transform_matches_fine_dft_2d() {
        let mut rng = SimRng::new(test_seed("analytic_fourier_transform_matches_fine_dft_2d"));
        let fov = 0.2;
        let center = [rng.normal() * 0.01, rng.normal() * 0.01, 0.0];
        let phantom = Phantom::new(2, [fov, fov, 0.0], center).unwrap();
        let n = 1024; // fine sampling of the phantom
        let dx = fov / n as f64;
        let mut points = Vec::new();
        for iy in 0..n {
            for ix in 0..n {
                let r = [
                    center[0] + (ix as f64 + 0.5 - n as f64 / 2.0) * dx,
                    center[1] + (iy as f64 + 0.5 - n as f64 / 2.0) * dx,
                    0.0,
                ];
                let v = phantom.value(r);
                if v != 0.0 {
                    points.push((r, v));
                }
            }
        }
        // k up to the Nyquist limit of a 64² reconstruction grid, in random directions.
        let kmax = PI / (fov / 64.0);
        for trial in 0..12 {
            let angle = rng.uniform() * std::f64::consts::TAU;
            let radius = kmax * rng.uniform();
            let k = [radius * angle.cos(), radius * angle.sin(), 0.0];
            let analytic = phantom.kspace(k);
            let dft: Complex64 = points
                .iter()
                .map(|(r, v)| Complex64::from_polar(v * dx * dx, k[0] * r[0] + k[1] * r[1]))
                .sum();
            let scale = phantom.kspace([0.0; 3]).norm();
            let err = (dft - analytic).norm() / scale;
            eprintln!("trial {trial} |k| {radius:.0} rad/m: analytic {analytic:.4e} dft {dft:.4e} err {err:.2e}");
            // Staircase boundaries of the fine sampling limit the agreement to ~dx/fov.
            assert!(err < 2e-3, "relative error {err}");
        }
        // DC: intensity-weighted area, and the sign +i: a shifted phantom gets e^{+ik·c}.
        let k = [300.0, -200.0, 0.0];
        let shifted = Phantom::new(2, [fov, fov, 0.0], [center[0] + 0.01, center[1], 0.0]).unwrap();
        let ratio = shifted.kspace(k) / phantom.kspace(k);
        assert!((ratio - Complex64::from_polar(1.0, 300.0 * 0.01)).norm() < 1e-9);
    }

    #[test]
    fn band_limited_reference_approaches_the_phantom() {
        // With kmax large the reference tends to the phantom away from edges.
        let (fov, center) = ([0.2, 0.2, 0.0], [0.003, -0.002, 0.02]);
        // The phantom's centre and a point inside the small spot at (0, 0.08) normalised.
        let p = [0.003, 0.003, -0.002, -0.002 + 0.008, 0.02, 0.02];
        let r = shepp_logan_band_limited(fov, center, &p, [0.22, 0.22], PI * 256.0 / 0.22).unwrap();
        let exact = shepp_logan(2, fov, center, &p).unwrap();
        for i in 0..2 {
            assert!(
                (r[i].re as f64 - exact[i]).abs() < 0.02,
                "{} vs {}",
                r[i],
                exact[i]
            );
            assert!(r[i].im.abs() < 0.02);
        }
        assert!(shepp_logan_band_limited(fov, center, &p, [0.22, 0.0], 1e3).is_err());
    }

    #[test]
    fn analytic_fourier_transform_matches_fine_dft_3d() {
        let mut rng = SimRng::new(test_seed("analytic_fourier_transform_matches_fine_dft_3d"));
        let fov = [0.2, 0.22, 0.18];
        let center = [0.0, 0.01, -0.02];
        let phantom = Phantom::new(3, fov, center).unwrap();
        let n = 160;
        let d = fov.map(|f| f / n as f64);
        let mut points = Vec::new();
        for iz in 0..n {
            for iy in 0..n {
                for ix in 0..n {
                    let r = [ix, iy, iz]
                        .map(|i| i as f64 + 0.5 - n as f64 / 2.0)
                        .iter()
                        .enumerate()
                        .map(|(a, u)| center[a] + u * d[a])
                        .collect::<Vec<_>>();
                    let r = [r[0], r[1], r[2]];
                    let v = phantom.value(r);
                    if v != 0.0 {
                        points.push((r, v));
                    }
                }
            }
        }
        let dv = d[0] * d[1] * d[2];
        let scale = phantom.kspace([0.0; 3]).norm();
        for _ in 0..6 {
            let k = [0, 1, 2].map(|a| (rng.uniform() - 0.5) * PI / (fov[a] / 16.0));
            let analytic = phantom.kspace(k);
            let dft: Complex64 = points
                .iter()
                .map(|(r, v)| {
                    Complex64::from_polar(v * dv, k[0] * r[0] + k[1] * r[1] + k[2] * r[2])
                })
                .sum();
            let err = (dft - analytic).norm() / scale;
            eprintln!("3D k {k:?}: err {err:.2e}");
            assert!(err < 5e-3, "relative error {err}");
        }
    }
}
