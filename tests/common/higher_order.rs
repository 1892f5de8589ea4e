//! Random higher-order problems for the fast-path tests (CPU and CUDA):
//! lattices (axis-aligned, oblique, masked in random order), eddy-current-like
//! coefficient curves, a user basis, strong off-resonance, smooth coils.

use super::{Problem, Rng};
use horecon::model::harmonics::ORDER;
use horecon::Complex32;
use num_complex::Complex64;
use std::f64::consts::{PI, TAU};

pub const FOV: f64 = 0.22;

/// The kinds of problem the fast path must serve.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Solid harmonics (16 terms) with off-resonance on an axis-aligned grid.
    Grid,
    /// 9 solid harmonics on an oblique lattice.
    Oblique,
    /// A masked subset of an oblique lattice, listed in random order.
    Masked,
    /// A user basis: x, y, z plus non-linear functions of position.
    UserBasis,
    /// Strong off-resonance (±300 Hz over 30 ms) with linear terms only.
    StrongB0,
    /// Solid harmonics (16 terms, three times [`Kind::Grid`]'s higher
    /// orders) with a rough off-resonance map: 450 Hz smooth plus 90 Hz of
    /// independent noise per voxel, as a measured map outside the object.
    RoughB0,
}

/// Lattice positions c + A·i for the index vectors of `dims`, A oblique when
/// asked, axis a's step stretched by `aspect[a]` (anisotropic voxels).
pub fn lattice_positions(
    rng: &mut Rng,
    dims: [usize; 3],
    oblique: bool,
    aspect: [f64; 3],
) -> Vec<[f64; 3]> {
    let step: [f64; 3] = std::array::from_fn(|a| aspect[a] * FOV / dims[a].max(8) as f64);
    let axes: Vec<[f64; 3]> = (0..3)
        .map(|a| {
            std::array::from_fn(|c| {
                if c == a {
                    step[a]
                } else if oblique {
                    step[a] * rng.range(-0.3, 0.3)
                } else {
                    0.0
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let i = [ix, iy, iz];
                out.push(std::array::from_fn(|c| {
                    (0..3)
                        .map(|a| (i[a] as f64 - (dims[a] / 2) as f64) * axes[a][c])
                        .sum::<f64>()
                        + 0.004 * (c as f64 - 1.0)
                }));
            }
        }
    }
    out
}

/// A smooth eddy-current-like coefficient curve over M samples.
pub fn curve(rng: &mut Rng, m: usize, amplitude: f64) -> Vec<f64> {
    let rate = rng.range(0.1, 0.6);
    let wiggle = rng.range(0.0, 0.3);
    let a = amplitude * rng.range(0.5, 1.0) * if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
    (0..m)
        .map(|j| {
            let tau = j as f64 / m as f64;
            a * ((1.0 - (-tau / rate).exp()) + wiggle * (TAU * 2.0 * tau).sin())
        })
        .collect()
}

/// A random problem of `kind` with `samples` samples and `coils` coils.
pub fn higher_order_problem(
    rng: &mut Rng,
    kind: Kind,
    dims: [usize; 3],
    coils: usize,
    samples: usize,
) -> Problem {
    anisotropic_problem(rng, kind, dims, coils, samples, [1.0; 3])
}

/// [`higher_order_problem`] with axis a's voxel step stretched by `aspect[a]`.
pub fn anisotropic_problem(
    rng: &mut Rng,
    kind: Kind,
    dims: [usize; 3],
    coils: usize,
    samples: usize,
    aspect: [f64; 3],
) -> Problem {
    let oblique = matches!(kind, Kind::Oblique | Kind::Masked);
    let mut points = lattice_positions(rng, dims, oblique, aspect);
    let mut dims = dims;
    if let Kind::Masked = kind {
        // Keep about 70 % of the voxels (at least one), in random order.
        let first = points[0];
        points.retain(|_| rng.uniform() < 0.7);
        if points.is_empty() {
            points.push(first);
        }
        for i in (1..points.len()).rev() {
            let j = rng.int(0, i);
            points.swap(i, j);
        }
        dims = [points.len(), 1, 1];
    }
    let n = points.len();
    let m = samples;
    let positions: Vec<f64> = (0..3)
        .flat_map(|c| points.iter().map(move |p| p[c]))
        .collect();
    let ndims = (0..3).filter(|&a| dims[a] > 1).count().max(1);
    let step = FOV / 8.0_f64.max(dims.iter().copied().max().unwrap_or(1) as f64);
    let kmax = PI / step;
    // Trajectory: a spiral in x-y, a sweep in z for 3D lattices.
    let sweep = ndims == 3 || oblique;
    let linear: Vec<Vec<f64>> = (0..3)
        .map(|axis| {
            (0..m)
                .map(|j| {
                    let tau = j as f64 / m as f64;
                    match axis {
                        0 => kmax * tau * (TAU * 4.0 * tau).cos(),
                        1 => kmax * tau * (TAU * 4.0 * tau).sin(),
                        _ if sweep => kmax * (2.0 * ((tau * 3.0) % 1.0) - 1.0) * 0.5,
                        _ => 0.0,
                    }
                })
                .collect()
        })
        .collect();
    let times: Vec<f64> = (0..m).map(|j| 0.03 * j as f64 / m as f64).collect();
    let (terms, user_basis, coefficients) = match kind {
        Kind::Grid | Kind::Oblique | Kind::Masked | Kind::RoughB0 => {
            let terms = if matches!(kind, Kind::Oblique | Kind::Masked) {
                9
            } else {
                16
            };
            let scale = if matches!(kind, Kind::RoughB0) {
                3.0
            } else {
                1.0
            };
            let mut c = vec![0.0; terms * m];
            for b in 0..terms {
                let column = match ORDER[b] {
                    0 => curve(rng, m, 2.0),
                    1 => {
                        let eddy = curve(rng, m, 5.0);
                        linear[b - 1]
                            .iter()
                            .zip(&eddy)
                            .map(|(k, e)| k + e)
                            .collect()
                    }
                    2 => curve(rng, m, 300.0 * scale),
                    _ => curve(rng, m, 3000.0 * scale),
                };
                c[b * m..(b + 1) * m].copy_from_slice(&column);
            }
            (terms, None, c)
        }
        Kind::UserBasis => {
            let terms = 5;
            let mut h = vec![0.0; terms * n];
            for (v, p) in points.iter().enumerate() {
                let (x, y, z) = (p[0], p[1], p[2]);
                h[v] = x;
                h[n + v] = y;
                h[2 * n + v] = z;
                h[3 * n + v] = (x * 20.0).sin() * 0.05 + x * x;
                h[4 * n + v] = (x * y).exp() - 1.0 + z * z * 3.0;
            }
            let mut c = vec![0.0; terms * m];
            for b in 0..3 {
                c[b * m..(b + 1) * m].copy_from_slice(&linear[b]);
            }
            let c3 = curve(rng, m, 150.0);
            let c4 = curve(rng, m, 400.0);
            c[3 * m..4 * m].copy_from_slice(&c3);
            c[4 * m..].copy_from_slice(&c4);
            (terms, Some(h), c)
        }
        Kind::StrongB0 => {
            let mut c = vec![0.0; 4 * m];
            c[..m].copy_from_slice(&curve(rng, m, 1.0));
            for b in 1..4 {
                c[b * m..(b + 1) * m].copy_from_slice(&linear[b - 1]);
            }
            (4, None, c)
        }
    };
    let (hz, noise_hz) = match kind {
        Kind::StrongB0 => (300.0, 0.0),
        Kind::RoughB0 => (450.0, 90.0),
        Kind::UserBasis => (0.0, 0.0),
        _ => (60.0, 0.0),
    };
    let off_resonance = (hz > 0.0).then(|| {
        let omega = points
            .iter()
            .map(|p| {
                let r2 = (p[0] - 0.02).powi(2) + (p[1] + 0.01).powi(2) + p[2].powi(2);
                let noise = if noise_hz > 0.0 { rng.normal() } else { 0.0 };
                TAU * hz * ((-r2 / (2.0 * 0.05f64.powi(2))).exp() - 0.3) + TAU * noise_hz * noise
            })
            .collect();
        (omega, times.clone())
    });
    let sensitivities = (coils > 1).then(|| {
        let mut s = Vec::with_capacity(n * coils);
        for c in 0..coils {
            let a = TAU * c as f64 / coils as f64;
            for p in &points {
                let d2 = (p[0] - 0.15 * a.cos()).powi(2) + (p[1] - 0.15 * a.sin()).powi(2);
                let mag = (-d2 / (2.0 * 0.12f64.powi(2))).exp();
                let ph = a + 5.0 * (p[0] * a.cos() + p[1] * a.sin());
                s.push(Complex32::new(
                    (mag * ph.cos()) as f32,
                    (mag * ph.sin()) as f32,
                ));
            }
        }
        s
    });
    Problem {
        dims,
        coils,
        samples: m,
        positions,
        terms,
        user_basis,
        coefficients,
        off_resonance,
        sensitivities,
    }
}

/// How many random cases a randomized test runs: `HORECON_TEST_CASES`, or
/// `default` (kept small for CI; the GPU runs set more).
pub fn case_count(default: usize) -> usize {
    std::env::var("HORECON_TEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A random problem of a random kind: 2D or 3D, any axis from 1 to 24
/// (2D) or 11 (3D) voxels, odd and singleton sizes included, in half the
/// cases one axis's voxels 1 to 8 times longer than the others' (thick
/// slices, which a voxel's nearest neighbours do not reach), 1 to 5 coils, 20 to 900
/// samples, and a tolerance 10^−u with u uniform in [1, 5] (the whole range
/// `set_approximation` takes).
pub fn random_higher_order_problem(rng: &mut Rng) -> (Kind, Problem, f64) {
    let kinds = [
        Kind::Grid,
        Kind::Oblique,
        Kind::Masked,
        Kind::UserBasis,
        Kind::StrongB0,
    ];
    let kind = kinds[rng.int(0, kinds.len() - 1)];
    let dims = if rng.uniform() < 0.5 {
        [rng.int(1, 24), rng.int(1, 24), 1]
    } else {
        [rng.int(1, 11), rng.int(1, 11), rng.int(1, 11)]
    };
    let coils = rng.int(1, 5);
    let samples = rng.int(20, 900);
    let tolerance = 10f64.powf(-rng.range(1.0, 5.0));
    // Thick slices: the other axes' voxels shorter (the field of view along
    // them too, so the higher orders' phase does not grow).
    let mut aspect = [1.0; 3];
    if rng.uniform() < 0.5 {
        let (thick, ratio) = (rng.int(0, 2), rng.range(1.0, 8.0));
        for (a, s) in aspect.iter_mut().enumerate() {
            if a != thick {
                *s = 1.0 / ratio;
            }
        }
    }
    let problem = anisotropic_problem(rng, kind, dims, coils, samples, aspect);
    (kind, problem, tolerance)
}

/// `coils` maps of numerical rank about 4: random combinations of the four
/// maps of `p` plus `small` (relative) times a coil-dependent phase ramp
/// of them, so that the plan's coils compress with an error of that order.
pub fn redundant_coils(rng: &mut Rng, p: &Problem, coils: usize, small: f64) -> Problem {
    let n = p.voxels();
    let base = p.sensitivities.as_ref().expect("maps");
    let mut maps = Vec::with_capacity(n * coils);
    for c in 0..coils {
        let weights: Vec<Complex64> = (0..4)
            .map(|_| Complex64::new(rng.normal(), rng.normal()) * 0.5)
            .collect();
        let ramp = 40.0 * rng.normal();
        for v in 0..n {
            let s = |k: usize| {
                let z = base[k * n + v];
                Complex64::new(z.re as f64, z.im as f64)
            };
            let mixed: Complex64 = (0..4).map(|k| weights[k] * s(k)).sum();
            let x = p.positions[3 * v];
            let extra = s(c % 4) * Complex64::from_polar(small, ramp * x);
            let z = mixed + extra;
            maps.push(Complex32::new(z.re as f32, z.im as f32));
        }
    }
    Problem {
        coils,
        sensitivities: Some(maps),
        ..p.clone()
    }
}

/// [`random_higher_order_problem`]'s kind, size, samples and tolerance with
/// 6–16 [`redundant_coils`] whose small part lies 3–30× below the
/// tolerance (they compress), and its name for case `case`.
pub fn random_compressed_problem(rng: &mut Rng, case: usize) -> (Problem, f64, String) {
    let (kind, drawn, tolerance) = random_higher_order_problem(rng);
    let four = higher_order_problem(rng, kind, drawn.dims, 4, drawn.samples);
    let coils = rng.int(6, 16);
    let small = tolerance * 10f64.powf(-rng.range(0.5, 1.5));
    let p = redundant_coils(rng, &four, coils, small);
    let name = format!(
        "case {case}: {kind:?} {:?} L {coils} M {} tol {tolerance:.1e}",
        p.dims, p.samples
    );
    (p, tolerance, name)
}
