//! Lattice detection for the NUFFT-based paths (FAST-PATH.md §1): voxels
//! r_n = c + A·m_n with integer m_n, so that a phase linear in position,
//! k·r_n = k·c + (Aᵀk)·m_n, is a type-2 NUFFT over the modes m.
//!
//! Two ways to find one:
//! - the plan's own index order (n = ix + nx·(iy + ny·iz)), any orientation
//!   (oblique grids): m_n is the grid index centred like the grid helper,
//!   m = i − ⌊n/2⌋ per axis, accepted when the positions are exactly such a
//!   grid ([`super::grid::lattice_steps`]) or every voxel lies within 1e-3 of
//!   the shortest step of the least-squares lattice through them ([`Fit`]);
//! - any order or a masked subset: lattice vectors from the shortest
//!   independent differences between nearby voxels, m_n = round(A⁻¹(r_n − r_0)),
//!   accepted when every voxel lies within 1e-3 of a voxel size of its lattice
//!   point and no two voxels share one. Where voxels lie between the points
//!   those vectors span (spacings that are all multiples of a shorter one,
//!   which no two voxels show), the lattice is refined by the fraction they
//!   sit at. The modes are then the bounding box of the m_n, made as small
//!   as integer shears of the m_n make it, each voxel at its own grid index.
//!   Where that fails and the positions carry noise (positions rounded to
//!   float32 0.3 m off centre: 3e-5 of a 0.5 mm voxel, which the spacings'
//!   error multiplies by the steps from voxel 0), the lattice vectors are
//!   fitted to the voxels first ([`noisy_placed`]), and each voxel must lie
//!   within 1e-3 of a step of the least-squares lattice through them.
//!
//! The bound of 1e-3 of a step cannot give a wrong m_n (off by 1/2 step);
//! what the voxels' offsets δ from their lattice points do to the phase
//! (k·δ, at most π·1e-3 rad within the Nyquist box) is part of the
//! non-linear phase ψ that the expansion approximates and the certificate
//! measures, since both take the basis at the voxels' own positions.
//!
//! The phase split ([`super::separation`]) fits everything against m
//! directly, so A and c themselves are never needed.

use super::grid::lattice_steps;
use crate::error::{try_vec, Error, Result};
use rayon::prelude::*;

/// Residual (fraction of the shortest lattice vector) within which a voxel
/// is on its lattice point (module documentation).
const ON_LATTICE: f64 = 1e-3;
/// Where a voxel may sit from its lattice point while [`noisy_placed`]
/// places the voxels (fraction of the shortest step); the fit then holds
/// them to [`ON_LATTICE`].
const NOISY_SLACK: f64 = 0.05;
/// The sine of the angle beyond which a voxel spacing is off the span of the
/// lattice vectors found so far ([`off_span`]): for positions as given, and
/// for [`noisy_placed`] (well above the angle that noise of [`ON_LATTICE`] of
/// a step on each voxel gives a spacing of a few steps, ≤ 2e-3, well below
/// the angles between a lattice's shortest independent vectors; a voxel
/// farther than 1/`NOISY_SPAN` steps along a line from every probe voxel and
/// one step off it is then taken as on it).
const OFF_SPAN: f64 = 1e-3;
const NOISY_SPAN: f64 = 1e-2;
/// Voxels whose neighbourhoods give the candidate lattice vectors.
const PROBE_VOXELS: usize = 48;
/// Nearest neighbours kept per probe voxel.
const NEIGHBOURS: usize = 8;
/// The bounding box of a masked lattice may hold at most this many grid
/// points per voxel (plus [`SPARSE_SLACK`]): sparser sets are refused.
const SPARSE_FACTOR: usize = 16;
const SPARSE_SLACK: usize = 4096;
/// Refinements of the lattice at most, and the largest q of one
/// ([`refined`]: a lattice 1/q as fine).
const MAX_REFINEMENTS: usize = 8;
const MAX_DENOMINATOR: i64 = 64;

/// Voxels on a lattice: the NUFFT's modes and where each voxel sits among them.
#[derive(Clone, Debug, PartialEq)]
pub struct Lattice {
    /// Modes per lattice axis (1 on unused axes), grid index i0 + n0·(i1 + n1·i2).
    pub modes: [usize; 3],
    /// The grid index of each voxel; `None` when it is the voxel index itself
    /// (the plan's grid order).
    pub index: Option<Vec<usize>>,
}

impl Lattice {
    /// Finds the lattice of `positions` (N×3, first index fastest) for a plan
    /// of `dims`; `InvalidArgument` with the reason when there is none.
    pub fn detect(dims: [usize; 3], positions: &[f64]) -> Result<Lattice> {
        let grid_index = |v: usize| split_index(v, dims).map(|x| x as i64);
        if lattice_steps(dims, positions, "the fast path").is_ok()
            || fitted_offset(positions, grid_index).is_some_and(|off| off <= ON_LATTICE)
        {
            return Ok(Lattice {
                modes: dims,
                index: None,
            });
        }
        Self::from_points(positions)
    }

    /// Number of grid points, Π modes.
    pub fn grid_points(&self) -> usize {
        self.modes.iter().product()
    }

    /// NUFFT dimensions: the last axis with more than one mode (at least 1).
    pub fn ndims(&self) -> usize {
        (0..3)
            .rev()
            .find(|&a| self.modes[a] > 1)
            .map_or(1, |a| a + 1)
    }

    /// m_n along each axis (index − ⌊n/2⌋) of voxel `v`.
    pub fn coordinates(&self, v: usize) -> [f64; 3] {
        let g = self.index.as_ref().map_or(v, |index| index[v]);
        let i = split_index(g, self.modes);
        std::array::from_fn(|a| i[a] as f64 - (self.modes[a] / 2) as f64)
    }

    /// A lattice through any list of points (masked subsets, any order).
    fn from_points(positions: &[f64]) -> Result<Lattice> {
        let n = positions.len() / 3;
        let basis = lattice_basis(positions, OFF_SPAN)?;
        if basis.is_empty() {
            // A single voxel (or all at one place, refused below as coincident).
            return if n == 1 {
                Ok(Lattice {
                    modes: [1, 1, 1],
                    index: None,
                })
            } else {
                Err(not_a_lattice("all voxels are at the same position"))
            };
        }
        let (mut coords, k) = match placed(positions, basis.clone(), ON_LATTICE) {
            Ok(coords) => (coords, basis.len()),
            Err(e) => noisy_placed(positions)?.ok_or(e)?,
        };
        compact_box(&mut coords, k);
        let mut low = [i64::MAX; 3];
        let mut high = [i64::MIN; 3];
        for m in coords.chunks_exact(3) {
            for a in 0..3 {
                low[a] = low[a].min(m[a]);
                high[a] = high[a].max(m[a]);
            }
        }
        let modes: [usize; 3] = std::array::from_fn(|a| (high[a] - low[a] + 1) as usize);
        let points = modes
            .iter()
            .try_fold(1usize, |acc, &m| acc.checked_mul(m))
            .filter(|&p| p <= SPARSE_FACTOR * n + SPARSE_SLACK)
            .ok_or_else(|| {
                not_a_lattice(&format!(
                    "the voxels' lattice box {modes:?} is too sparse for {n} voxels (over \
                     {SPARSE_FACTOR} grid points per voxel)"
                ))
            })?;
        let mut index = try_vec(n, 0usize, "lattice grid index (N)")?;
        let mut taken = try_vec(points, u32::MAX, "lattice occupancy")?;
        for (v, m) in coords.chunks_exact(3).enumerate() {
            let i: [usize; 3] = std::array::from_fn(|a| (m[a] - low[a]) as usize);
            let g = i[0] + modes[0] * (i[1] + modes[1] * i[2]);
            if taken[g] != u32::MAX {
                return Err(not_a_lattice(&format!(
                    "voxels {} and {v} sit on the same lattice point",
                    taken[g]
                )));
            }
            taken[g] = v.min(u32::MAX as usize - 1) as u32;
            index[v] = g;
        }
        Ok(Lattice {
            modes,
            index: Some(index),
        })
    }
}

fn not_a_lattice(reason: &str) -> Error {
    Error::invalid(format!("voxels are not on a lattice: {reason}"))
}

/// The voxels' integer coordinates (3 per voxel) in `basis`, refined while
/// voxels sit between its points ([`place`], [`refined`]; within `slack`
/// of a step).
fn placed(positions: &[f64], mut basis: Vec<[f64; 3]>, slack: f64) -> Result<Vec<i64>> {
    // Each refinement divides the lattice's cell by 2 or more.
    let mut refinements = 0;
    loop {
        match place(positions, &basis, slack)? {
            Placement::OnLattice(coords) => return Ok(coords),
            Placement::Between { voxel, fraction } => {
                refinements += 1;
                if refinements > MAX_REFINEMENTS {
                    return Err(not_a_lattice(&format!(
                        "voxel {voxel} still lies between the lattice points after \
                         {MAX_REFINEMENTS} refinements"
                    )));
                }
                basis = refined(&basis, fraction, slack).ok_or_else(|| {
                    not_a_lattice(&format!(
                        "voxel {voxel} lies between the lattice points spanned by the \
                         shortest voxel spacings, at no fraction 1/q of them (q up to \
                         {MAX_DENOMINATOR})"
                    ))
                })?;
            }
        }
    }
}

/// The voxels' integer coordinates where their positions carry noise of up
/// to [`ON_LATTICE`] of a step (float32 rounding: 3e-5 of a 0.5 mm voxel
/// 0.3 m off centre), which [`placed`] does not admit: it measures offsets
/// from voxel 0 against single voxel spacings, whose error grows with the
/// steps from voxel 0. Here the basis is fitted to the voxels first
/// ([`denoised`]; the vectors chosen with [`NOISY_SPAN`]), the voxels are
/// placed within [`NOISY_SLACK`], and every
/// voxel must lie within [`ON_LATTICE`] of the least-squares lattice through
/// them ([`Fit`]; else an error saying how far). `None` where this placement
/// fails too.
fn noisy_placed(positions: &[f64]) -> Result<Option<(Vec<i64>, usize)>> {
    let basis = lattice_basis(positions, NOISY_SPAN)?;
    let k = basis.len();
    let Some(coords) =
        denoised(positions, &basis).and_then(|basis| placed(positions, basis, NOISY_SLACK).ok())
    else {
        return Ok(None);
    };
    let at = |v: usize| [coords[3 * v], coords[3 * v + 1], coords[3 * v + 2]];
    match fitted_offset(positions, at) {
        Some(off) if off <= ON_LATTICE => Ok(Some((coords, k))),
        Some(off) => Err(not_a_lattice(&format!(
            "the voxels lie up to {off:.1e} of a lattice step off the least-squares lattice \
             through them (at most {ON_LATTICE:.0e})"
        ))),
        None => Ok(None),
    }
}

/// `basis` fitted by least squares ([`Fit`]) to the voxels whose
/// coordinates in it are within 0.1 of integers, over neighbourhoods of
/// voxel 0 of 16, 128, 1024, … steps until all voxels are in: each fit's
/// error, times the steps to the next neighbourhood, stays far below a
/// step. `None` where a fit is degenerate.
fn denoised(positions: &[f64], basis: &[[f64; 3]]) -> Option<Vec<[f64; 3]>> {
    let n = positions.len() / 3;
    let r = |v: usize| position(positions, v);
    let origin = r(0);
    let mut basis = basis.to_vec();
    let mut radius = 16.0;
    // 16·8¹⁰ steps is beyond what `place` accepts (1e9).
    for _ in 0..=10 {
        let inverse = pseudo_inverse(&basis);
        let u = |v: usize| -> [f64; 3] {
            let p = r(v);
            let d: [f64; 3] = std::array::from_fn(|c| p[c] - origin[c]);
            std::array::from_fn(|a| {
                inverse
                    .get(a)
                    .map_or(0.0, |row| row[0] * d[0] + row[1] * d[1] + row[2] * d[2])
            })
        };
        let extent = (0..n)
            .into_par_iter()
            .map(|v| u(v).iter().fold(0.0f64, |e, x| e.max(x.abs())))
            .reduce(|| 0.0, f64::max);
        let near: Vec<usize> = (0..n)
            .into_par_iter()
            .filter(|&v| {
                u(v).iter()
                    .all(|x| x.abs() <= radius && (x - x.round()).abs() <= 0.1)
            })
            .collect();
        let at = |v: usize| u(v).map(|x| x.round() as i64);
        let fit = Fit::new(positions, Some(&near), at)?;
        for (&a, step) in fit.axes.iter().zip(&fit.steps) {
            basis[a] = *step;
        }
        if radius >= extent || !extent.is_finite() {
            break;
        }
        radius *= 8.0;
    }
    Some(basis)
}

/// The least-squares lattice r_v ≈ c + Σ_a m_{v,a}·b_a through voxels at
/// integer coordinates m_v, over the axes a along which the m_{v,a} vary.
struct Fit {
    /// The axes that vary.
    axes: Vec<usize>,
    /// b_a for each of `axes`.
    steps: Vec<[f64; 3]>,
    /// The mean coordinates and position of the voxels fitted.
    mean: ([f64; 3], [f64; 3]),
}

/// Σ f(v) over `voxels` (all N when `None`), on the pool.
fn sum_over<T: Send>(
    n: usize,
    voxels: Option<&[usize]>,
    f: impl Fn(usize) -> T + Sync + Send,
    add: impl Fn(T, T) -> T + Sync + Send,
    zero: impl Fn() -> T + Sync + Send,
) -> T {
    match voxels {
        Some(list) => list.par_iter().map(|&v| f(v)).reduce(zero, add),
        None => (0..n).into_par_iter().map(f).reduce(zero, add),
    }
}

impl Fit {
    /// The fit through `voxels` (all when `None`) at `coords(v)`; `None`
    /// when degenerate (no voxels, no axis varies, or coincident steps).
    fn new(
        positions: &[f64],
        voxels: Option<&[usize]>,
        coords: impl Fn(usize) -> [i64; 3] + Sync,
    ) -> Option<Fit> {
        let n = positions.len() / 3;
        let r = |v: usize| position(positions, v);
        let count = voxels.map_or(n, <[usize]>::len);
        let first = voxels.map_or(Some(0), |l| l.first().copied())?;
        let m = |v: usize| coords(v).map(|x| x as f64);
        let add3 = |a: [f64; 3], b: [f64; 3]| -> [f64; 3] { std::array::from_fn(|c| a[c] + b[c]) };
        let mean = |f: &(dyn Fn(usize) -> [f64; 3] + Sync)| {
            sum_over(n, voxels, f, add3, || [0.0; 3]).map(|x| x / count as f64)
        };
        let mean = (mean(&m), mean(&r));
        let varies = sum_over(
            n,
            voxels,
            |v| std::array::from_fn::<bool, 3, _>(|a| m(v)[a] != m(first)[a]),
            |a, b| std::array::from_fn(|i| a[i] || b[i]),
            || [false; 3],
        );
        let axes: Vec<usize> = (0..3).filter(|&a| varies[a]).collect();
        let k = axes.len();
        if k == 0 {
            return None;
        }
        let mut fit = Fit {
            axes,
            steps: Vec::new(),
            mean,
        };
        // B = (Σ y xᵀ)(Σ x xᵀ)⁻¹ with x, y the centred coordinates and positions.
        let add = |a: [[f64; 3]; 3], b: [[f64; 3]; 3]| -> [[f64; 3]; 3] {
            std::array::from_fn(|i| add3(a[i], b[i]))
        };
        let (gram, cross) = sum_over(
            n,
            voxels,
            |v| {
                let (x, y) = fit.centred(positions, v, &coords);
                let outer = |a: [f64; 3]| -> [[f64; 3]; 3] {
                    std::array::from_fn(|i| std::array::from_fn(|j| a[i] * x[j]))
                };
                (outer(x), outer(y))
            },
            |a, b| (add(a.0, b.0), add(a.1, b.1)),
            || ([[0.0; 3]; 3], [[0.0; 3]; 3]),
        );
        let inverse = invert_small(&gram, k);
        fit.steps = (0..k)
            .map(|a| std::array::from_fn(|c| (0..k).map(|j| cross[c][j] * inverse[j][a]).sum()))
            .collect();
        let step = shortest(&fit.steps);
        (step.is_finite() && step > 0.0).then_some(fit)
    }

    /// Voxel v's coordinates along the fit's axes and its position, both
    /// less the fit's means.
    fn centred(
        &self,
        positions: &[f64],
        v: usize,
        coords: &impl Fn(usize) -> [i64; 3],
    ) -> ([f64; 3], [f64; 3]) {
        let (m, r) = (coords(v), position(positions, v));
        let x = std::array::from_fn(|i| {
            self.axes
                .get(i)
                .map_or(0.0, |&a| m[a] as f64 - self.mean.0[a])
        });
        (x, std::array::from_fn(|c| r[c] - self.mean.1[c]))
    }

    /// The largest distance of a voxel from its fitted point, in units of
    /// the shortest fitted step.
    fn largest_offset(&self, positions: &[f64], coords: impl Fn(usize) -> [i64; 3] + Sync) -> f64 {
        let largest = sum_over(
            positions.len() / 3,
            None,
            |v| {
                let (x, y) = self.centred(positions, v, &coords);
                norm(std::array::from_fn(|c| {
                    y[c] - (0..self.steps.len())
                        .map(|a| x[a] * self.steps[a][c])
                        .sum::<f64>()
                }))
            },
            f64::max,
            || 0.0,
        );
        largest / shortest(&self.steps)
    }
}

/// The largest distance of a voxel from the least-squares lattice through
/// all voxels at the integer coordinates `coords(v)` ([`Fit`]), in units of
/// its shortest step; `None` where that fit is degenerate.
fn fitted_offset(positions: &[f64], coords: impl Fn(usize) -> [i64; 3] + Sync) -> Option<f64> {
    Fit::new(positions, None, &coords).map(|fit| fit.largest_offset(positions, &coords))
}

/// Where the voxels lie against a basis: each on a lattice point (its
/// integer coordinates, 3 per voxel), or some voxel in the basis's span but
/// between its points (the fractional part of its coordinates).
enum Placement {
    OnLattice(Vec<i64>),
    Between { voxel: usize, fraction: [f64; 3] },
}

/// The voxels' coordinates u_n = B⁺(r_n − r_0) in `basis`; `InvalidArgument`
/// when a voxel lies off the span by more than `slack` of the shortest
/// vector (a voxel within `slack` of a lattice point is on it).
fn place(positions: &[f64], basis: &[[f64; 3]], slack: f64) -> Result<Placement> {
    let n = positions.len() / 3;
    let r = |v: usize| position(positions, v);
    let shortest = shortest(basis);
    let inverse = pseudo_inverse(basis);
    let origin = r(0);
    let mut coords = try_vec(3 * n, 0i64, "lattice coordinates (N x 3)")?;
    for v in 0..n {
        let p = r(v);
        let d: [f64; 3] = std::array::from_fn(|c| p[c] - origin[c]);
        let u: [f64; 3] = std::array::from_fn(|a| {
            inverse
                .get(a)
                .map_or(0.0, |row| row[0] * d[0] + row[1] * d[1] + row[2] * d[2])
        });
        if u.iter().any(|x| x.abs() > 1e9) {
            return Err(not_a_lattice("the voxels span more than 1e9 lattice steps"));
        }
        let off = norm(std::array::from_fn(|c| d[c] - combine(basis, u, c)));
        if off > slack * shortest {
            return Err(not_a_lattice(&format!(
                "voxel {v} is {off:.3e} m off the lattice through voxel 0 spanned by the \
                 shortest voxel spacings ({shortest:.3e} m)"
            )));
        }
        let fraction: [f64; 3] = std::array::from_fn(|a| u[a] - u[a].round());
        let between = norm(std::array::from_fn(|c| combine(basis, fraction, c)));
        if between > slack * shortest {
            return Ok(Placement::Between { voxel: v, fraction });
        }
        for a in 0..3 {
            coords[3 * v + a] = u[a].round() as i64;
        }
    }
    Ok(Placement::OnLattice(coords))
}

/// Component c of Σ_a u_a b_a.
fn combine(basis: &[[f64; 3]], u: [f64; 3], c: usize) -> f64 {
    basis.iter().zip(u).map(|(b, x)| x * b[c]).sum()
}

/// The lattice spanned by `basis` and a voxel at coordinates `fraction`
/// between its points (voxel spacings that are all multiples of a shorter
/// one: 0, 2 and 5 steps on a line): for the smallest q with q·fraction = p
/// integral, the basis (1/q)·B·H of the integer lattice H generated by
/// q·e_a and p, reduced to short vectors. `None` when no q up to
/// [`MAX_DENOMINATOR`] fits within `slack` of the shortest vector.
fn refined(basis: &[[f64; 3]], fraction: [f64; 3], slack: f64) -> Option<Vec<[f64; 3]>> {
    let k = basis.len();
    let shortest = shortest(basis);
    let q = (2..=MAX_DENOMINATOR).find(|&q| {
        let miss: [f64; 3] = std::array::from_fn(|a| {
            let x = q as f64 * fraction[a];
            x - x.round()
        });
        norm(std::array::from_fn(|c| combine(basis, miss, c))) <= slack * shortest
    })?;
    let mut generators: Vec<[i64; 3]> = (0..k)
        .map(|a| std::array::from_fn(|b| if a == b { q } else { 0 }))
        .collect();
    generators.push(std::array::from_fn(|a| {
        (q as f64 * fraction[a]).round() as i64
    }));
    let rows = integer_basis(generators, k);
    let mut finer: Vec<[f64; 3]> = rows
        .iter()
        .map(|h| {
            let u: [f64; 3] = std::array::from_fn(|a| h[a] as f64 / q as f64);
            std::array::from_fn(|c| combine(basis, u, c))
        })
        .collect();
    reduce_pairwise(&mut finer);
    Some(finer)
}

/// A basis (k triangular rows) of the integer lattice the rows of
/// `generators` span in k dimensions, by Euclid's algorithm on each column.
fn integer_basis(mut generators: Vec<[i64; 3]>, k: usize) -> Vec<[i64; 3]> {
    let mut rows = Vec::with_capacity(k);
    for col in 0..k {
        loop {
            let live: Vec<usize> = (0..generators.len())
                .filter(|&i| generators[i][col] != 0)
                .collect();
            let Some(&pivot) = live.iter().min_by_key(|&&i| generators[i][col].abs()) else {
                break;
            };
            if live.len() == 1 {
                rows.push(generators.swap_remove(pivot));
                break;
            }
            let p = generators[pivot];
            for &i in &live {
                if i != pivot {
                    let f = generators[i][col] / p[col];
                    for c in 0..3 {
                        generators[i][c] -= f * p[c];
                    }
                }
            }
        }
    }
    rows
}

/// Shortens the vectors of a basis by subtracting integer multiples of
/// each other (pairwise Gauss reduction) until none gets shorter, shortest first.
fn reduce_pairwise(basis: &mut [[f64; 3]]) {
    let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    for _ in 0..64 {
        let mut changed = false;
        for i in 0..basis.len() {
            for j in 0..basis.len() {
                if i == j {
                    continue;
                }
                let (bi, bj) = (basis[i], basis[j]);
                let f = (dot(bj, bi) / dot(bi, bi)).round();
                if f != 0.0 {
                    let shorter: [f64; 3] = std::array::from_fn(|c| bj[c] - f * bi[c]);
                    if dot(shorter, shorter) < dot(bj, bj) * (1.0 - 1e-12) {
                        basis[j] = shorter;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    basis.sort_by(|a, b| norm(*a).total_cmp(&norm(*b)));
}

/// Makes the box of the integer coordinates (3 per voxel, the first k used)
/// as small as integer shears m_a ← m_a ± m_b make it, one at a time while
/// one shortens an axis. The basis of shortest vectors is not the one whose
/// box is smallest for a set of voxels: thick oblique slices whose in-plane
/// offset spans several voxel widths give a skewed box many times larger
/// than the voxels' own (a masked such set was refused as too sparse).
/// Shears are unimodular, so the coordinates stay those of the same lattice
/// points and the phase split, which fits against them, is unchanged.
fn compact_box(coords: &mut [i64], k: usize) {
    let pairs: Vec<(usize, usize, i64)> = (0..k)
        .flat_map(|a| (0..k).filter(move |&b| b != a).map(move |b| (a, b)))
        .flat_map(|(a, b)| [(a, b, 1), (a, b, -1)])
        .collect();
    if pairs.is_empty() {
        return;
    }
    for _ in 0..256 {
        // The extent of axis a as it is (index 0) and after each shear.
        let extent = |coords: &[i64]| -> Vec<(i64, i64)> {
            let mut span = vec![(i64::MAX, i64::MIN); 3 + pairs.len()];
            for m in coords.chunks_exact(3) {
                for a in 0..k {
                    span[a] = (span[a].0.min(m[a]), span[a].1.max(m[a]));
                }
                for (s, &(a, b, f)) in span[3..].iter_mut().zip(&pairs) {
                    let x = m[a] + f * m[b];
                    *s = (s.0.min(x), s.1.max(x));
                }
            }
            span
        };
        let span = extent(coords);
        let best = pairs
            .iter()
            .enumerate()
            .map(|(i, &(a, ..))| (i, (span[a].1 - span[a].0) - (span[3 + i].1 - span[3 + i].0)))
            .filter(|&(_, gain)| gain > 0)
            .max_by_key(|&(_, gain)| gain);
        let Some((i, _)) = best else {
            return;
        };
        let (a, b, f) = pairs[i];
        for m in coords.chunks_exact_mut(3) {
            m[a] += f * m[b];
        }
    }
}

/// The length of the shortest of `vectors` (∞ for none).
fn shortest(vectors: &[[f64; 3]]) -> f64 {
    vectors
        .iter()
        .map(|b| norm(*b))
        .fold(f64::INFINITY, f64::min)
}

/// Voxel `v`'s position in `positions` (N×3, first index fastest).
fn position(positions: &[f64], v: usize) -> [f64; 3] {
    let n = positions.len() / 3;
    [positions[v], positions[n + v], positions[2 * n + v]]
}

/// The per-axis indices of grid index `g` on a grid of `dims`, g = i0 + n0·(i1 + n1·i2).
fn split_index(g: usize, dims: [usize; 3]) -> [usize; 3] {
    [
        g % dims[0],
        (g / dims[0]) % dims[1],
        g / (dims[0] * dims[1]),
    ]
}

fn norm(v: [f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Up to three lattice vectors: the shortest non-zero difference between a
/// probe voxel and its nearest neighbours, then the shortest not parallel to
/// it, then the shortest off their plane (successive minima: a basis of the
/// lattice in up to three dimensions). Where the nearest neighbours span
/// fewer dimensions than the voxels (anisotropic voxels: with slices 3 or
/// more voxel widths apart, a voxel's [`NEIGHBOURS`] nearest all lie in its
/// slice), the next vector is the shortest difference off their span
/// ([`shortest_off_span`]).
fn lattice_basis(positions: &[f64], sine: f64) -> Result<Vec<[f64; 3]>> {
    let n = positions.len() / 3;
    let r = |v: usize| position(positions, v);
    let probes = n.min(PROBE_VOXELS);
    let mut candidates: Vec<[f64; 3]> = Vec::with_capacity(probes * NEIGHBOURS);
    for p in 0..probes {
        let centre = r(p * n / probes);
        // The NEIGHBOURS nearest distinct voxels, by insertion into a short sorted list.
        let mut nearest: Vec<(f64, [f64; 3])> = Vec::with_capacity(NEIGHBOURS + 1);
        for v in 0..n {
            let q = r(v);
            let d: [f64; 3] = std::array::from_fn(|c| q[c] - centre[c]);
            let length = norm(d);
            if length == 0.0 {
                continue;
            }
            if nearest.len() == NEIGHBOURS && length >= nearest[NEIGHBOURS - 1].0 {
                continue;
            }
            let at = nearest.partition_point(|e| e.0 < length);
            nearest.insert(at, (length, d));
            nearest.truncate(NEIGHBOURS);
        }
        candidates.extend(nearest.into_iter().map(|e| e.1));
    }
    candidates.sort_by(|a, b| norm(*a).total_cmp(&norm(*b)));
    let mut basis: Vec<[f64; 3]> = Vec::with_capacity(3);
    for d in candidates {
        if basis.len() == 3 {
            break;
        }
        if off_span(&basis, d, sine) {
            basis.push(d);
        }
    }
    while basis.len() < 3 {
        match shortest_off_span(positions, &basis, sine) {
            Some(d) => basis.push(d),
            None => break,
        }
    }
    Ok(basis)
}

/// Whether `d` lies off the span of the 0–2 vectors `basis`, at an angle
/// whose sine exceeds `sine` ([`OFF_SPAN`], [`NOISY_SPAN`]; the test
/// [`lattice_basis`] applies to its candidates).
fn off_span(basis: &[[f64; 3]], d: [f64; 3], sine: f64) -> bool {
    let length = norm(d);
    match basis.len() {
        0 => length > 0.0,
        1 => norm(cross(basis[0], d)) > sine * norm(basis[0]) * length,
        2 => {
            let normal = cross(basis[0], basis[1]);
            let volume = (normal[0] * d[0] + normal[1] * d[1] + normal[2] * d[2]).abs();
            volume > sine * norm(normal) * length
        }
        _ => false,
    }
}

/// The shortest difference from a probe voxel to any voxel off the span of
/// `basis`, or `None` when every voxel lies in the span through the probes
/// (all voxels are scanned for each of [`PROBE_VOXELS`] probes).
fn shortest_off_span(positions: &[f64], basis: &[[f64; 3]], sine: f64) -> Option<[f64; 3]> {
    let n = positions.len() / 3;
    let r = |v: usize| position(positions, v);
    let probes = n.min(PROBE_VOXELS);
    (0..probes)
        .into_par_iter()
        .filter_map(|p| {
            let centre = r(p * n / probes);
            (0..n)
                .map(|v| {
                    let q = r(v);
                    std::array::from_fn::<f64, 3, _>(|c| q[c] - centre[c])
                })
                .filter(|&d| off_span(basis, d, sine))
                .map(|d| (d[0] * d[0] + d[1] * d[1] + d[2] * d[2], d))
                .min_by(|a, b| a.0.total_cmp(&b.0))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, d)| d)
}

/// The rows of (BᵀB)⁻¹Bᵀ for the 1–3 vectors B (coordinates of a point in the basis).
fn pseudo_inverse(basis: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let k = basis.len();
    let mut gram = [[0.0f64; 3]; 3];
    for a in 0..k {
        for b in 0..k {
            gram[a][b] = (0..3).map(|c| basis[a][c] * basis[b][c]).sum();
        }
    }
    let inverse = invert_small(&gram, k);
    (0..k)
        .map(|a| std::array::from_fn(|c| (0..k).map(|b| inverse[a][b] * basis[b][c]).sum()))
        .collect()
}

/// Inverse of the leading k×k block (k ≤ 3, symmetric positive definite) by Gauss–Jordan.
fn invert_small(m: &[[f64; 3]; 3], k: usize) -> [[f64; 3]; 3] {
    let mut a = *m;
    let mut inv = [[0.0; 3]; 3];
    for (i, row) in inv.iter_mut().enumerate().take(k) {
        row[i] = 1.0;
    }
    for col in 0..k {
        let pivot = (col..k)
            .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let p = a[col][col];
        for c in 0..k {
            a[col][c] /= p;
            inv[col][c] /= p;
        }
        for row in 0..k {
            if row != col {
                let f = a[row][col];
                for c in 0..k {
                    a[row][c] -= f * a[col][c];
                    inv[row][c] -= f * inv[col][c];
                }
            }
        }
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oblique(dims: [usize; 3], mask: impl Fn(usize) -> bool) -> (Vec<f64>, Vec<usize>) {
        let steps = [
            [0.013, 0.002, 0.0],
            [-0.001, 0.012, 0.003],
            [0.0, 0.001, 0.02],
        ];
        lattice(dims, steps, mask)
    }

    /// Positions (N×3) of the voxels of a `dims` grid with lattice vectors
    /// `steps` that `mask` keeps, and their grid indices.
    fn lattice(
        dims: [usize; 3],
        steps: [[f64; 3]; 3],
        mask: impl Fn(usize) -> bool,
    ) -> (Vec<f64>, Vec<usize>) {
        let mut kept = Vec::new();
        for iz in 0..dims[2] {
            for iy in 0..dims[1] {
                for ix in 0..dims[0] {
                    let v = ix + dims[0] * (iy + dims[1] * iz);
                    if mask(v) {
                        kept.push(v);
                    }
                }
            }
        }
        let n = kept.len();
        let mut p = vec![0.0; 3 * n];
        for (k, &v) in kept.iter().enumerate() {
            let i = [
                v % dims[0],
                (v / dims[0]) % dims[1],
                v / (dims[0] * dims[1]),
            ];
            for c in 0..3 {
                p[c * n + k] = 0.01 + (0..3).map(|a| i[a] as f64 * steps[a][c]).sum::<f64>();
            }
        }
        (p, kept)
    }

    /// The N×3 positions `p` of `n` voxels listed last to first (not the plan's grid order).
    fn last_to_first(p: &[f64], n: usize) -> Vec<f64> {
        p.chunks_exact(n)
            .flat_map(|axis| axis.iter().rev().copied())
            .collect()
    }

    #[test]
    fn plan_order_grid_is_the_identity() {
        let (p, _) = oblique([5, 4, 3], |_| true);
        let l = Lattice::detect([5, 4, 3], &p).unwrap();
        assert_eq!(l.modes, [5, 4, 3]);
        assert!(l.index.is_none());
        assert_eq!(l.coordinates(0), [-2.0, -2.0, -1.0]);
    }

    #[test]
    fn masked_subset_keeps_distinct_grid_points() {
        let (p, kept) = oblique([7, 6, 5], |v| (v * 7919) % 5 != 0);
        let n = kept.len();
        let l = Lattice::detect([n, 1, 1], &p).unwrap();
        let index = l.index.as_ref().unwrap();
        let mut seen = index.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n);
        assert!(l.grid_points() <= 3 * 7 * 6 * 5);
        // Differences of lattice coordinates are integer combinations of the steps.
        let (c0, c1) = (l.coordinates(0), l.coordinates(1));
        assert!(c0.iter().zip(&c1).all(|(a, b)| (a - b).fract() == 0.0));
    }

    #[test]
    fn planar_masks_and_single_voxels() {
        let (p, kept) = oblique([9, 8, 1], |v| v % 3 != 1);
        let l = Lattice::detect([kept.len(), 1, 1], &p).unwrap();
        assert_eq!(l.ndims(), 2);
        let l = Lattice::detect([1, 1, 1], &[0.1, 0.2, 0.3]).unwrap();
        assert_eq!(l.grid_points(), 1);
    }

    /// Slices (or lines) several voxel widths apart: a voxel's nearest
    /// neighbours all lie in its slice (or line), and the lattice's last
    /// vector is the shortest difference off their span. Axis-aligned and
    /// oblique, all voxels or a mask, listed last to first.
    #[test]
    fn anisotropic_voxels_in_any_order() {
        for ratio in [3.0, 10.0, 100.0, 500.0] {
            let mm = 1e-3;
            let aligned = [[mm, 0.0, 0.0], [0.0, mm, 0.0], [0.0, 0.0, ratio * mm]];
            // An oblique acquisition: the axes rotated (orthogonal, as scanners' are).
            let z = |t: f64| {
                [
                    [t.cos(), -t.sin(), 0.0],
                    [t.sin(), t.cos(), 0.0],
                    [0.0, 0.0, 1.0],
                ]
            };
            let x = |t: f64| {
                [
                    [1.0, 0.0, 0.0],
                    [0.0, t.cos(), -t.sin()],
                    [0.0, t.sin(), t.cos()],
                ]
            };
            let times = |p: [[f64; 3]; 3], q: [[f64; 3]; 3]| -> [[f64; 3]; 3] {
                std::array::from_fn(|i| {
                    std::array::from_fn(|j| (0..3).map(|k| p[i][k] * q[k][j]).sum())
                })
            };
            let rotation = times(times(z(0.35), x(0.6)), z(-0.2));
            let size = [mm, 0.7 * mm, ratio * mm];
            let tilted: [[f64; 3]; 3] =
                std::array::from_fn(|k| std::array::from_fn(|j| size[k] * rotation[j][k]));
            let in_plane = [[mm, 0.0, 0.0], [0.0, ratio * mm, 0.0], [0.0, 0.0, mm]];
            for (steps, dims) in [
                (aligned, [9, 8, 5]),
                (tilted, [9, 8, 5]),
                (in_plane, [12, 7, 1]),
            ] {
                for masked in [false, true] {
                    let (p, kept) = lattice(dims, steps, |v| !masked || (v * 7919) % 10 >= 3);
                    let n = kept.len();
                    // Last to first: not the plan's grid order.
                    let reversed = last_to_first(&p, n);
                    let l = Lattice::detect([n, 1, 1], &reversed).unwrap_or_else(|e| {
                        panic!("ratio {ratio} {steps:?} masked {masked}: {}", e.message)
                    });
                    let total: usize = dims.iter().product();
                    if !masked {
                        // The same box, its axes in the order of their steps' lengths.
                        let (mut got, mut want) = (l.modes, dims);
                        got.sort();
                        want.sort();
                        assert_eq!(got, want, "ratio {ratio} {steps:?}");
                    }
                    assert_eq!(l.ndims(), if dims[2] > 1 { 3 } else { 2 });
                    assert!(l.grid_points() <= 3 * total, "ratio {ratio}: {:?}", l.modes);
                    let mut seen = l.index.clone().unwrap();
                    seen.sort();
                    seen.dedup();
                    assert_eq!(seen.len(), n);
                }
            }
        }
    }

    /// Positions (N×3) of the points Σ_a t_a·steps[a] (t integer) listed in `points`.
    fn at(points: &[[i64; 3]], steps: [[f64; 3]; 3]) -> Vec<f64> {
        let n = points.len();
        let mut p = vec![0.0; 3 * n];
        for (v, t) in points.iter().enumerate() {
            for c in 0..3 {
                p[c * n + v] = 0.02 + (0..3).map(|a| t[a] as f64 * steps[a][c]).sum::<f64>();
            }
        }
        p
    }

    /// Voxels whose spacings are all multiples of a shorter one (0, 2 and
    /// 5 steps on a line; in 2D 2 and 5 steps along both axes): the
    /// shortest spacings span a coarser lattice, and the voxels between
    /// its points refine it (before, they were refused as off the lattice).
    #[test]
    fn spacings_with_a_common_divisor() {
        let mm = 1e-3;
        let steps = [
            [0.7 * mm, 0.3 * mm, 0.2 * mm],
            [-0.2 * mm, 0.9 * mm, 0.1 * mm],
            [0.0, 0.1 * mm, 2.0 * mm],
        ];
        let line = [[5, 0, 0], [0, 0, 0], [2, 0, 0]];
        #[rustfmt::skip]
        let plane = [[0, 0, 0], [2, 0, 0], [5, 0, 0], [0, 2, 0], [0, 5, 0], [5, 5, 0]];
        #[rustfmt::skip]
        let space = [[0, 0, 0], [2, 0, 0], [5, 0, 0], [0, 3, 0], [0, 5, 0], [0, 0, 2], [0, 0, 5]];
        for (points, box_points, ndims) in
            [(&line[..], 6, 1), (&plane[..], 36, 2), (&space[..], 216, 3)]
        {
            let l = Lattice::detect([points.len(), 1, 1], &at(points, steps))
                .unwrap_or_else(|e| panic!("{points:?}: {}", e.message));
            assert_eq!(l.grid_points(), box_points, "{points:?}: {:?}", l.modes);
            assert_eq!(l.ndims(), ndims);
            // The voxels' lattice coordinates differ as their index vectors do
            // (up to a unimodular map): pairwise distances in steps agree.
            for v in 0..points.len() {
                for w in 0..points.len() {
                    let (cv, cw) = (l.coordinates(v), l.coordinates(w));
                    assert_eq!(cv == cw, v == w, "{points:?}");
                }
            }
        }
    }

    /// Thick oblique slices whose in-plane offset is several voxel widths
    /// (a3 = 3.4·a1 + 3.4·a2 + 8·e_z): the shortest lattice vectors are a1,
    /// a2 and a3 − 3a1 − 3a2, whose box around a masked 6×6×11 set is
    /// 36×36×11, over 16 grid points per voxel (refused before); shears of
    /// the coordinates bring it back to the voxels' own 6×6×11.
    #[test]
    fn sheared_thick_slices_get_a_compact_box() {
        let mm = 1e-3;
        let steps = [
            [mm, 0.0, 0.0],
            [0.0, mm, 0.0],
            [3.4 * mm, 3.4 * mm, 8.0 * mm],
        ];
        let dims = [6, 6, 11];
        let (p, kept) = lattice(dims, steps, |v| (v * 7919) % 10 >= 3);
        let n = kept.len();
        let reversed = last_to_first(&p, n);
        let l = Lattice::detect([n, 1, 1], &reversed).unwrap_or_else(|e| panic!("{}", e.message));
        let mut modes = l.modes;
        modes.sort();
        assert_eq!(modes, [6, 6, 11]);
        let mut seen = l.index.clone().unwrap();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n);
    }

    /// `p` with each coordinate moved by up to `amount` of `step` (a
    /// deterministic pattern, as of rounding).
    fn jittered(p: &[f64], amount: f64, step: f64) -> Vec<f64> {
        p.iter()
            .enumerate()
            .map(|(i, x)| x + amount * step * (((i * 7919 + 13) % 1000) as f64 / 500.0 - 1.0))
            .collect()
    }

    #[test]
    fn noisy_positions_are_a_lattice_within_its_bound() {
        let step = 0.012;
        for amount in [3e-5, 4e-4] {
            // The plan's order, far off centre.
            let (p, _) = oblique([40, 36, 5], |_| true);
            let p: Vec<f64> = p.iter().map(|x| x + 0.3).collect();
            let l = Lattice::detect([40, 36, 5], &jittered(&p, amount, step)).unwrap();
            assert_eq!((l.modes, l.index.is_none()), ([40, 36, 5], true));
            // Masked, last to first.
            let (p, kept) = oblique([40, 36, 5], |v| (v * 7919) % 5 != 0);
            let n = kept.len();
            let q = last_to_first(&jittered(&p, amount, step), n);
            let l = Lattice::detect([n, 1, 1], &q).unwrap_or_else(|e| panic!("{amount}: {e:?}"));
            let mut seen = l.index.clone().unwrap();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), n);
            assert!(l.grid_points() <= 3 * 40 * 36 * 5);
        }
        // Long enough for the fit to grow its neighbourhood four times.
        let (p, kept) = oblique([2000, 2, 1], |v| v % 3 != 1);
        let n = kept.len();
        let l = Lattice::detect([n, 1, 1], &last_to_first(&jittered(&p, 4e-4, step), n)).unwrap();
        assert!(l.grid_points() <= 3 * 2000 * 2);
        let (p, kept) = oblique([20, 16, 3], |v| v % 7 != 3);
        let e = Lattice::detect([kept.len(), 1, 1], &jittered(&p, 1e-2, 0.012)).unwrap_err();
        assert!(e.message.contains("not on a lattice"), "{}", e.message);
    }

    /// A long row and one voxel of the next row far from every probe voxel
    /// (104 steps along): its spacing from them is 1 step off the row's line,
    /// at an angle of 1/104 only.
    #[test]
    fn a_far_voxel_off_a_long_row_spans_the_second_axis() {
        let n = 10_000;
        let mut p = vec![0.0; 3 * (n + 1)];
        for (v, x) in p.iter_mut().take(n).enumerate() {
            *x = v as f64 * 1e-3;
        }
        p[n] = 104e-3;
        p[(n + 1) + n] = 1e-3;
        let l = Lattice::detect([n + 1, 1, 1], &p).unwrap();
        assert_eq!(l.grid_points(), 2 * n, "{:?}", l.modes);
    }

    #[test]
    fn random_points_are_refused() {
        let p: Vec<f64> = (0..60)
            .map(|i| ((i * 7919) % 101) as f64 * 1e-3 + (i as f64).sqrt() * 1e-4)
            .collect();
        let e = Lattice::detect([20, 1, 1], &p).unwrap_err();
        assert!(e.message.contains("not on a lattice"), "{}", e.message);
        let e = Lattice::detect([2, 1, 1], &[0.1, 0.1, 0.0, 0.0, 0.0, 0.0]).unwrap_err();
        assert!(e.message.contains("same"), "{}", e.message);
    }
}
