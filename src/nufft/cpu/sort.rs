//! Points placed on the fine grid and bin-sorted once per plan, and the
//! subproblems (bins, heavy bins split) that spreading and interpolation
//! run as rayon tasks.
//!
//! # Placement
//! A point x (radians, any finite value) sits at g = n_f·frac(x/2π) cells of
//! an axis with n_f cells; its kernel covers the cells i₀ … i₀ + w − 1,
//! i₀ = ⌈g − w/2⌉ (wrapped mod n_f), at the shared offset
//! z = 2(i₀ − g + w/2) − 1 ∈ [−1, 1) ([`super::horner`]).
//!
//! # Bins and colours
//! Each axis is cut into nb bins of nearly equal width (nb = ⌊n_f/B⌋, every
//! width ≥ B, or one bin of n_f cells); a point belongs to the bin holding
//! its first cell i₀. Its cells then lie in the bin's *tile*: the bin
//! widened by `reach` cells upwards (w − 1, or the padded vector width − 1
//! along x). Bins are coloured per axis b mod 2, with the last bin of an
//! odd count coloured 2; the colour of a bin is the tuple of its axes'
//! colours. Two distinct bins of one colour have disjoint tiles (modulo
//! n_f) when every bin is at least `reach` wide: along an axis where they
//! differ, a same-coloured bin lies between them or, around the periodic
//! end, bin 0 (≥ reach wide) does, and the last bin of an odd count is
//! alone in its colour. So the tiles of one colour can be added to the
//! grid in parallel without conflicts.
//!
//! # Order inside a bin
//! Within its bin, points are ordered by cells of [`SUB_CELL`] cells per axis
//! (z, then y, then x): consecutive points then share most of their kernel
//! footprint, which stays in L1 while a 3D tile (~100 KB) does not.

use super::super::NufftSpec;
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Error, Result};
use rayon::prelude::*;

/// Bin widths aimed at (cells) per axis, by the number of spread axes:
/// a tile of (B + reach)^d complex values stays in L1 (2D) or L2 (3D).
pub(super) fn target_width(spread_axes: usize) -> usize {
    match spread_axes {
        0 | 1 => 1024,
        2 => 32,
        _ => 16,
    }
}

/// The edge of the cells that order the points inside a bin.
pub const SUB_CELL: usize = 4;

/// Points per subproblem at most: heavier bins are split (their tiles are
/// then added one at a time, under the bin's lock).
pub const MAX_SUBPROBLEM: usize = 2048;

/// The bins of one axis.
#[derive(Clone, Debug)]
pub struct AxisBins {
    /// n_f.
    pub fine: usize,
    /// First cell of each bin, and n_f at the end (nb + 1 entries).
    pub starts: Vec<usize>,
    /// Bin of each cell (n_f entries).
    bin_of: Vec<u32>,
    /// Cells of the widest bin.
    pub max_width: usize,
}

impl AxisBins {
    pub fn new(fine: usize, target: usize) -> Result<AxisBins> {
        let count = (fine / target).max(1);
        if count > u32::MAX as usize {
            return Err(Error::invalid(format!(
                "a fine grid of {fine} cells per axis is too large"
            )));
        }
        let mut starts = try_vec(count + 1, 0usize, "NUFFT bin starts")?;
        for (b, s) in starts.iter_mut().enumerate() {
            *s = b * fine / count;
        }
        let mut bin_of = try_vec(fine, 0u32, "NUFFT bin of each cell")?;
        for b in 0..count {
            bin_of[starts[b]..starts[b + 1]].fill(b as u32);
        }
        let max_width = starts.windows(2).map(|s| s[1] - s[0]).max().unwrap_or(1);
        Ok(AxisBins {
            fine,
            starts,
            bin_of,
            max_width,
        })
    }

    /// nb.
    pub fn count(&self) -> usize {
        self.starts.len() - 1
    }

    /// The colour of bin b (module documentation) and the number of colours.
    fn color(&self, b: usize) -> (usize, usize) {
        let count = self.count();
        match count {
            1 => (0, 1),
            _ if count % 2 == 0 => (b % 2, 2),
            _ if b == count - 1 => (2, 3),
            _ => (b % 2, 3),
        }
    }
}

/// One point as the kernels read it: its first cell relative to its bin's
/// first cell, and z, per axis (0 on axes that are not spread).
#[derive(Clone, Copy, Debug, Default)]
pub struct Placed<T> {
    pub z: [T; 3],
    pub local: [u32; 3],
}

/// A contiguous range of sorted points inside one bin.
#[derive(Clone, Copy, Debug)]
pub struct Subproblem {
    /// Linear bin index (x fastest).
    pub bin: usize,
    /// Its first cell per axis.
    pub origin: [usize; 3],
    /// Sorted points start..end.
    pub start: usize,
    pub end: usize,
    /// Whether other subproblems share the bin (its tile is added under the bin's lock).
    pub shared: bool,
}

/// The bin-sorted points of a plan.
pub struct SortedPoints<T> {
    pub axes: [AxisBins; 3],
    /// Placed points in bin order.
    pub placed: Vec<Placed<T>>,
    /// order[s] = the caller's index of sorted point s.
    pub order: Vec<usize>,
    /// rank[j] = the sorted position of the caller's point j.
    pub rank: Vec<usize>,
    /// Subproblems, in sorted order of their points.
    pub subproblems: Vec<Subproblem>,
    /// Subproblem indices per colour (only non-empty bins).
    pub by_color: Vec<Vec<usize>>,
    /// Linear bins (x fastest).
    pub bins: usize,
}

/// i₀ (wrapped) and z of a point x on an axis of `fine` cells (module documentation).
pub fn place(x: f64, fine: usize, width: usize) -> (usize, f64) {
    let cycles = x * (0.5 / std::f64::consts::PI);
    let g = (cycles - cycles.floor()) * fine as f64;
    let lower = g - 0.5 * width as f64;
    let first = lower.ceil();
    let t = (first - lower).clamp(0.0, 1.0);
    // |first| ≤ n_f + w: the cast cannot overflow.
    let cell = (first as i64).rem_euclid(fine as i64) as usize;
    (cell, (2.0 * t - 1.0).min(1.0))
}

impl<T: Real> SortedPoints<T> {
    /// Points of the largest subproblem.
    pub fn largest_subproblem(&self) -> usize {
        self.subproblems
            .iter()
            .map(|s| s.end - s.start)
            .max()
            .unwrap_or(0)
    }

    /// Places and sorts `npoints` points (`points[a·npoints + j]`, a < ndims)
    /// for `spec`; `reach[a]` cells of the tile beyond its bin (see module docs).
    pub fn new(spec: &NufftSpec, points: &[f64], npoints: usize) -> Result<SortedPoints<T>> {
        let spread_axes = spec.fine.iter().filter(|&&f| f > 1).count();
        let target = target_width(spread_axes);
        let axes = [
            AxisBins::new(spec.fine[0], target)?,
            AxisBins::new(spec.fine[1], target)?,
            AxisBins::new(spec.fine[2], target)?,
        ];
        let counts = axes.each_ref().map(|a| a.count());
        let bins = counts.iter().product::<usize>();
        if bins > u32::MAX as usize {
            return Err(Error::invalid(format!(
                "{bins} bins of the fine grid are too many"
            )));
        }
        let w = spec.kernel.width;
        let d = spec.modes.ndims;
        // Bin and placement of every point, in the caller's order.
        let mut bin_of_point = try_vec(npoints, 0u32, "NUFFT point bins (npoints)")?;
        let mut placed_in_order =
            try_vec(npoints, Placed::<T>::default(), "NUFFT points (npoints)")?;
        bin_of_point
            .par_iter_mut()
            .zip(placed_in_order.par_iter_mut())
            .enumerate()
            .for_each(|(j, (bin, p))| {
                let mut index = [0usize; 3];
                for a in 0..3 {
                    if spec.fine[a] > 1 && a < d {
                        let (cell, z) = place(points[a * npoints + j], spec.fine[a], w);
                        let b = axes[a].bin_of[cell] as usize;
                        index[a] = b;
                        p.local[a] = (cell - axes[a].starts[b]) as u32;
                        p.z[a] = T::from_f64(z);
                    }
                }
                *bin = (index[0] + counts[0] * (index[1] + counts[1] * index[2])) as u32;
            });
        // Counting sort by bin.
        let mut offsets = try_vec(bins + 1, 0usize, "NUFFT bin offsets")?;
        for &b in &bin_of_point {
            offsets[b as usize + 1] += 1;
        }
        for b in 0..bins {
            offsets[b + 1] += offsets[b];
        }
        let mut order = try_vec(npoints, 0usize, "NUFFT point order (npoints)")?;
        let mut rank = try_vec(npoints, 0usize, "NUFFT point ranks (npoints)")?;
        let mut placed = try_vec(
            npoints,
            Placed::<T>::default(),
            "NUFFT sorted points (npoints)",
        )?;
        let mut fill = offsets.clone();
        for (j, &b) in bin_of_point.iter().enumerate() {
            order[fill[b as usize]] = j;
            fill[b as usize] += 1;
        }
        // Inside each bin: by sub-cell (module documentation).
        let sub_counts = axes.each_ref().map(|a| a.max_width.div_ceil(SUB_CELL));
        let sub_key = |p: &Placed<T>| -> usize {
            let [x, y, z] = p.local.map(|v| v as usize / SUB_CELL);
            x + sub_counts[0] * (y + sub_counts[1] * z)
        };
        let mut per_bin = Vec::new();
        per_bin
            .try_reserve_exact(bins)
            .map_err(|_| Error::out_of_memory("could not allocate the NUFFT bin list"))?;
        let mut rest = &mut order[..];
        for b in 0..bins {
            let (mine, tail) = rest.split_at_mut(offsets[b + 1] - offsets[b]);
            per_bin.push(mine);
            rest = tail;
        }
        per_bin
            .into_par_iter()
            .for_each(|slice| slice.sort_unstable_by_key(|&j| sub_key(&placed_in_order[j])));
        order
            .par_iter()
            .zip(placed.par_iter_mut())
            .for_each(|(&j, p)| *p = placed_in_order[j]);
        for (s, &j) in order.iter().enumerate() {
            rank[j] = s;
        }
        drop(placed_in_order);
        drop(bin_of_point);
        // Subproblems and colours.
        let colors: usize = axes.iter().map(|a| a.color(0).1).product();
        let color_of = |b: usize| -> usize {
            let index = [
                b % counts[0],
                (b / counts[0]) % counts[1],
                b / (counts[0] * counts[1]),
            ];
            (0..3).rev().fold(0, |acc, a| {
                let (c, n) = axes[a].color(index[a]);
                acc * n + c
            })
        };
        let parts_of = |b: usize| (offsets[b + 1] - offsets[b]).div_ceil(MAX_SUBPROBLEM);
        let mut per_color = vec![0usize; colors];
        for b in 0..bins {
            per_color[color_of(b)] += parts_of(b);
        }
        let oom = |_| Error::out_of_memory("could not allocate the NUFFT subproblems");
        let mut by_color = vec![Vec::new(); colors];
        for (list, &n) in by_color.iter_mut().zip(&per_color) {
            list.try_reserve_exact(n).map_err(oom)?;
        }
        let mut subproblems = Vec::new();
        subproblems
            .try_reserve_exact(per_color.iter().sum())
            .map_err(oom)?;
        for b in 0..bins {
            let (start, end) = (offsets[b], offsets[b + 1]);
            let parts = parts_of(b);
            let index = [
                b % counts[0],
                (b / counts[0]) % counts[1],
                b / (counts[0] * counts[1]),
            ];
            let origin = [0, 1, 2].map(|a| axes[a].starts[index[a]]);
            for p in 0..parts {
                by_color[color_of(b)].push(subproblems.len());
                subproblems.push(Subproblem {
                    bin: b,
                    origin,
                    start: start + p * (end - start) / parts,
                    end: start + (p + 1) * (end - start) / parts,
                    shared: parts > 1,
                });
            }
        }
        if subproblems.iter().map(|s| s.end - s.start).sum::<usize>() != npoints {
            return Err(Error::internal(
                "NUFFT sort: subproblems do not cover the points",
            ));
        }
        Ok(SortedPoints {
            axes,
            placed,
            order,
            rank,
            subproblems,
            by_color,
            bins,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_covers_the_kernel() {
        for &(x, fine, w) in &[
            (0.0, 16, 7),
            (std::f64::consts::PI, 16, 7),
            (-3.0 * std::f64::consts::PI, 30, 4),
            (2.9999 * std::f64::consts::PI, 30, 4),
            (1e-17, 64, 13),
            (-1e-17, 64, 13),
        ] {
            let (cell, z) = place(x, fine, w);
            assert!(
                cell < fine && (-1.0..1.0).contains(&z),
                "{x} {fine} {w}: {cell} {z}"
            );
            // g = i₀ + w/2 − t with t = (z + 1)/2, modulo n_f.
            let g = cell as f64 + 0.5 * w as f64 - 0.5 * (z + 1.0);
            let expect = (x / std::f64::consts::TAU).rem_euclid(1.0) * fine as f64;
            let diff = (g - expect).rem_euclid(fine as f64);
            assert!(diff.min(fine as f64 - diff) < 1e-9, "{x}: {g} vs {expect}");
        }
    }

    /// Same-coloured tiles never overlap modulo n_f (module documentation).
    #[test]
    fn same_colour_tiles_are_disjoint() {
        for fine in [1usize, 2, 16, 17, 20, 30, 32, 33, 48, 62, 64, 96, 100, 130] {
            for target in [16usize, 32] {
                let axis = AxisBins::new(fine, target).unwrap();
                let reach = 15.min(target - 1);
                let count = axis.count();
                for a in 0..count {
                    for b in a + 1..count {
                        if axis.color(a) != axis.color(b) {
                            continue;
                        }
                        let cells = |bin: usize| -> Vec<usize> {
                            (axis.starts[bin]..axis.starts[bin + 1] + reach)
                                .map(|c| c % fine)
                                .collect()
                        };
                        let (ca, cb) = (cells(a), cells(b));
                        assert!(
                            ca.iter().all(|c| !cb.contains(c)),
                            "n_f {fine} B {target}: bins {a} and {b} overlap"
                        );
                    }
                }
                assert!(count == 1 || axis.starts.windows(2).all(|s| s[1] - s[0] >= target));
            }
        }
    }
}
