//! Problems on grids shared by the Toeplitz, Cartesian and CUDA FFT tests:
//! lattice problems with a linear phase, random Cartesian masks with the
//! same problem as an explicit trajectory, and the dense float64 EᴴWE.

use super::{to_c64, Problem, Rng};
use horecon::Complex32;
use num_complex::Complex64;
use std::f64::consts::PI;

/// A linear-phase problem on a random (skewed) lattice: solid harmonics with
/// `terms` (4, 9 or 16) of which only k0, x, y, z are non-zero, k up to
/// `cycles_per_step` cycles per lattice step along every axis.
pub fn lattice_problem(
    rng: &mut Rng,
    dims: [usize; 3],
    coils: usize,
    samples: usize,
    terms: usize,
    off_resonance: Option<(f64, f64)>,
) -> Problem {
    let n: usize = dims.iter().product();
    let step = 0.22 / 16.0;
    // Lattice vectors: mostly along the axes, a little skewed.
    let vectors: Vec<[f64; 3]> = (0..3)
        .map(|a| {
            std::array::from_fn(|c| {
                if c == a {
                    step * rng.range(0.8, 1.2)
                } else {
                    step * rng.range(-0.2, 0.2)
                }
            })
        })
        .collect();
    let origin: [f64; 3] = std::array::from_fn(|_| rng.range(-0.1, 0.0));
    let mut positions = vec![0.0; 3 * n];
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let v = ix + dims[0] * (iy + dims[1] * iz);
                for c in 0..3 {
                    positions[c * n + v] = origin[c]
                        + ix as f64 * vectors[0][c]
                        + iy as f64 * vectors[1][c]
                        + iz as f64 * vectors[2][c];
                }
            }
        }
    }
    let kmax = PI / step; // about half a cycle per step
    let mut coefficients = vec![0.0; samples * terms];
    for j in 0..samples {
        coefficients[j] = rng.range(-3.0, 3.0); // k0, rad
        for b in 1..4 {
            coefficients[b * samples + j] = kmax * rng.range(-1.0, 1.0);
        }
    }
    let off_resonance = off_resonance.map(|(hz, duration)| {
        let omega = (0..n)
            .map(|_| 2.0 * PI * hz * rng.range(-1.0, 1.0))
            .collect();
        let times = (0..samples)
            .map(|j| 1e-3 + duration * j as f64 / samples as f64)
            .collect();
        (omega, times)
    });
    let sensitivities = (coils > 1 || rng.uniform() < 0.5).then(|| rng.complex(n * coils));
    Problem {
        dims,
        coils,
        samples,
        positions,
        terms,
        user_basis: None,
        coefficients,
        off_resonance,
        sensitivities,
    }
}

/// Dense float64 EᴴWE x.
pub fn normal_f64(p: &Problem, x: &[Complex32], w: Option<&[f32]>) -> Vec<Complex64> {
    let e = p.dense();
    let n = p.voxels();
    let xs = to_c64(x);
    let mut out = vec![Complex64::default(); n];
    for (row_index, row) in e.iter().enumerate() {
        let j = row_index % p.samples;
        let weight = w.map_or(1.0, |w| w[j] as f64);
        let d: Complex64 = row.iter().zip(&xs).map(|(a, b)| a * b).sum::<Complex64>() * weight;
        for v in 0..n {
            out[v] += row[v].conj() * d;
        }
    }
    out
}

/// A random Cartesian problem: grid, mask, and the same problem as an
/// explicit trajectory (user basis h = (x, y, z), coefficients k), built
/// from MODEL.md's formulas independently of the library.
pub struct Cart {
    pub fov: [f64; 3],
    pub center: [f64; 3],
    pub mask: Vec<u8>,
    pub problem: Problem,
}

pub fn random_cart(rng: &mut Rng, dims: [usize; 3], coils: usize) -> Cart {
    let n: usize = dims.iter().product();
    let fov = [0; 3].map(|_| rng.range(0.1, 0.3));
    let center = [0; 3].map(|_| rng.range(-0.05, 0.05));
    let mut mask: Vec<u8> = (0..n)
        .map(|_| {
            if rng.uniform() < 0.4 {
                1 + rng.int(0, 254) as u8
            } else {
                0
            }
        })
        .collect();
    mask[rng.int(0, n - 1)] = 1;
    let mut positions = vec![0.0; 3 * n];
    for v in 0..n {
        let i = [
            v % dims[0],
            (v / dims[0]) % dims[1],
            v / (dims[0] * dims[1]),
        ];
        for a in 0..3 {
            positions[a * n + v] = if dims[a] == 1 {
                center[a]
            } else {
                center[a] + (i[a] as f64 - (dims[a] / 2) as f64) * fov[a] / dims[a] as f64
            };
        }
    }
    let points: Vec<usize> = (0..n).filter(|&p| mask[p] != 0).collect();
    let m = points.len();
    let mut k = vec![0.0; 3 * m];
    for (j, &p) in points.iter().enumerate() {
        let i = [
            p % dims[0],
            (p / dims[0]) % dims[1],
            p / (dims[0] * dims[1]),
        ];
        for a in 0..3 {
            if dims[a] > 1 {
                k[a * m + j] = 2.0 * PI * (i[a] as f64 - (dims[a] / 2) as f64) / fov[a];
            }
        }
    }
    let sensitivities = (coils > 1).then(|| rng.complex(n * coils));
    Cart {
        fov,
        center,
        mask,
        problem: Problem {
            dims,
            coils,
            samples: m,
            positions: positions.clone(),
            terms: 3,
            user_basis: Some(positions),
            coefficients: k,
            off_resonance: None,
            sensitivities,
        },
    }
}

/// float64 to float32, element-wise.
pub fn to_c32(a: &[Complex64]) -> Vec<Complex32> {
    a.iter()
        .map(|v| Complex32::new(v.re as f32, v.im as f32))
        .collect()
}
