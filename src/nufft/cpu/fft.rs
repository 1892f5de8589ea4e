//! The FFT of the fine grid, pruned to what the modes need.
//!
//! Only the n_a cells (k mod n_f) of the modes k are ever read (type 1) or
//! non-zero (type 2) on axis a: two contiguous runs, [0, ⌈n_a/2⌉) and
//! [n_f − ⌊n_a/2⌋, n_f). Type 1 (after spreading) transforms axis 0 on every
//! line, axis 1 only on the lines whose x is a mode, axis 2 only on those
//! whose x and y are, and writes back only the mode cells; type 2 (modes
//! placed on an otherwise unwritten grid) runs the axes in the opposite
//! order, filling each line's non-mode cells with zeros as it is gathered,
//! so the grid is never cleared. In 2D that is 3/4 of the full transform's
//! work, in 3D 7/12.
//!
//! Lines of axes 1 and 2 are gathered in blocks of [`LINES`] consecutive x
//! into a contiguous buffer, transformed, and scattered back, in parallel
//! over blocks, the block transposed in squares of [`BLOCK`] × [`BLOCK`]
//! cells (ho3d-77k's 84 type-2 transforms: 3–5 % faster than cell by cell,
//! BENCHMARKS.md session 20); axis 0 is transformed in place, in parallel
//! over rows.

use crate::backend::cpu::fft::{Direction, GridFft};
use crate::backend::cpu::real::Real;
use crate::error::{try_vec, Result};
use num_complex::Complex;
use rayon::prelude::*;
use rustfft::FftNum;

/// Lines per gathered block.
const LINES: usize = 16;

/// Which pass: type 1 reads a full grid and keeps the mode cells; type 2
/// starts from the mode cells only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pruning {
    KeepModes,
    FromModes,
}

/// FFT plans for a fine grid and the mode runs of each axis.
pub struct FineFft<T: FftNum> {
    fft: GridFft<T>,
    fine: [usize; 3],
    /// Per axis, the mode cells as runs (start, length).
    runs: [[(usize, usize); 2]; 3],
}

/// A raw view of the grid that tasks touching disjoint lines share.
#[derive(Clone, Copy)]
struct SharedLines<T> {
    ptr: *mut Complex<T>,
}

// SAFETY: each task reads and writes only the elements of its own lines,
// and the lines of different tasks are disjoint.
unsafe impl<T: Send> Send for SharedLines<T> {}
unsafe impl<T: Send> Sync for SharedLines<T> {}

impl<T> SharedLines<T> {
    /// # Safety
    /// `offset` must lie inside the grid, on one of the caller's own lines.
    unsafe fn at(&self, offset: usize) -> *mut Complex<T> {
        self.ptr.add(offset)
    }
}

/// Whether cell i of an axis is a mode cell.
fn in_runs(runs: &[(usize, usize); 2], i: usize) -> bool {
    runs.iter().any(|&(s, n)| i >= s && i < s + n)
}

impl<T: FftNum + Real> FineFft<T> {
    pub fn new(fine: [usize; 3], modes: [usize; 3]) -> FineFft<T> {
        let runs = [0, 1, 2].map(|a| {
            let (n, f) = (modes[a], fine[a]);
            if f == 1 {
                [(0, 1), (0, 0)]
            } else {
                [(0, n.div_ceil(2)), (f - n / 2, n / 2)]
            }
        });
        FineFft {
            fft: GridFft::new(fine),
            fine,
            runs,
        }
    }

    /// Transforms one grid (n_f cells) in `direction` with `pruning`.
    pub fn process(
        &self,
        grid: &mut [Complex<T>],
        direction: Direction,
        pruning: Pruning,
    ) -> Result<()> {
        let axes: Vec<usize> = (0..3).filter(|&a| self.fine[a] > 1).collect();
        let order: Vec<usize> = match pruning {
            Pruning::KeepModes => axes,
            Pruning::FromModes => axes.into_iter().rev().collect(),
        };
        for a in order {
            self.axis(grid, a, direction, pruning)?;
        }
        Ok(())
    }

    fn axis(
        &self,
        grid: &mut [Complex<T>],
        axis: usize,
        direction: Direction,
        pruning: Pruning,
    ) -> Result<()> {
        let plan = self.fft.line_plan(axis, direction).as_ref();
        let [f0, f1, f2] = self.fine;
        if axis == 0 {
            let runs = self.runs[0];
            grid.par_chunks_mut(f0 * (8192 / f0).max(1)).for_each_init(
                || vec![Complex::new(T::default(), T::default()); plan.get_inplace_scratch_len()],
                |scratch, rows| {
                    if pruning == Pruning::FromModes {
                        for row in rows.chunks_exact_mut(f0) {
                            zero_outside(row, &runs);
                        }
                    }
                    plan.process_with_scratch(rows, scratch);
                },
            );
            return Ok(());
        }
        // Blocks of lines: (offset of the first line, lines), consecutive x.
        let x_blocks: Vec<(usize, usize)> = self.runs[0]
            .iter()
            .flat_map(|&(s, n)| {
                (0..n.div_ceil(LINES)).map(move |b| (s + b * LINES, LINES.min(n - b * LINES)))
            })
            .collect();
        // The other axis's offsets: every z plane (axis 1), or the y of the mode rows (axis 2).
        let (stride, others): (usize, Vec<usize>) = if axis == 1 {
            (f0, (0..f2).map(|z| z * f0 * f1).collect())
        } else {
            let ys = (0..f1).filter(|&y| in_runs(&self.runs[1], y));
            (f0 * f1, ys.map(|y| y * f0).collect())
        };
        let mut blocks = try_vec(
            others.len() * x_blocks.len(),
            (0, 0),
            "NUFFT FFT line blocks",
        )?;
        for (block, (o, x)) in blocks.iter_mut().zip(
            others
                .iter()
                .flat_map(|o| x_blocks.iter().map(move |x| (o, x))),
        ) {
            *block = (o + x.0, x.1);
        }
        let n = self.fine[axis];
        let runs = self.runs[axis];
        let shared = SharedLines {
            ptr: grid.as_mut_ptr(),
        };
        let zero = Complex::new(T::default(), T::default());
        blocks.par_iter().for_each_init(
            || {
                (
                    vec![zero; LINES * n],
                    vec![zero; plan.get_inplace_scratch_len()],
                )
            },
            |(buffer, scratch), &(base, lines)| {
                let buffer = &mut buffer[..lines * n];
                let line = |k: usize| base + stride * k;
                let wanted = |k: usize| pruning == Pruning::KeepModes || in_runs(&runs, k);
                // SAFETY: line(k) + b (k < n_f of the axis, b < lines) indexes
                // this block's lines, inside the grid.
                unsafe { gather(shared, line, lines, &wanted, buffer) };
                plan.process_with_scratch(buffer, scratch);
                let kept = |k: usize| pruning == Pruning::FromModes || in_runs(&runs, k);
                // SAFETY: as above.
                unsafe { scatter(shared, line, lines, &kept, buffer) };
            },
        );
        Ok(())
    }
}

/// Side of the square blocks in which [`gather`] and [`scatter`] transpose.
const BLOCK: usize = 4;

/// `buffer[b·n + k]` = element b of grid line k (at `line(k)`, `lines`
/// consecutive elements), or zero where `wanted(k)` is false, for k < n =
/// buffer.len() / lines: in BLOCK × BLOCK squares (BLOCK elements of a
/// line read at once), the edges one by one.
///
/// # Safety
/// `line(k) + b` must index the grid for every k < n and b < `lines`, on
/// lines no other thread touches meanwhile.
unsafe fn gather<T: Copy + Default>(
    grid: SharedLines<T>,
    line: impl Fn(usize) -> usize,
    lines: usize,
    wanted: &impl Fn(usize) -> bool,
    buffer: &mut [Complex<T>],
) {
    let n = buffer.len() / lines.max(1);
    let zero = Complex::new(T::default(), T::default());
    let (whole_k, whole_b) = (n - n % BLOCK, lines - lines % BLOCK);
    for k0 in (0..whole_k).step_by(BLOCK) {
        let rows: [Option<usize>; BLOCK] =
            std::array::from_fn(|i| wanted(k0 + i).then(|| line(k0 + i)));
        for b0 in (0..whole_b).step_by(BLOCK) {
            let block: [[Complex<T>; BLOCK]; BLOCK] = std::array::from_fn(|i| match rows[i] {
                Some(at) => {
                    std::ptr::read_unaligned(grid.at(at + b0) as *const [Complex<T>; BLOCK])
                }
                None => [zero; BLOCK],
            });
            for (j, out) in buffer[b0 * n..].chunks_mut(n).take(BLOCK).enumerate() {
                let out: &mut [Complex<T>; BLOCK] = (&mut out[k0..k0 + BLOCK]).try_into().unwrap();
                *out = std::array::from_fn(|i| block[i][j]);
            }
        }
    }
    for k in 0..n {
        let row = wanted(k).then(|| line(k));
        let from = if k < whole_k { whole_b } else { 0 };
        for b in from..lines {
            buffer[b * n + k] = row.map_or(zero, |at| *grid.at(at + b));
        }
    }
}

/// The reverse of [`gather`]: element b of grid line k = `buffer[b·n + k]`
/// where `kept(k)`.
///
/// # Safety
/// As for [`gather`].
unsafe fn scatter<T: Copy>(
    grid: SharedLines<T>,
    line: impl Fn(usize) -> usize,
    lines: usize,
    kept: &impl Fn(usize) -> bool,
    buffer: &[Complex<T>],
) {
    let n = buffer.len() / lines.max(1);
    let (whole_k, whole_b) = (n - n % BLOCK, lines - lines % BLOCK);
    for k0 in (0..whole_k).step_by(BLOCK) {
        for b0 in (0..whole_b).step_by(BLOCK) {
            let block: [[Complex<T>; BLOCK]; BLOCK] =
                std::array::from_fn(|j| buffer[(b0 + j) * n + k0..][..BLOCK].try_into().unwrap());
            for i in (0..BLOCK).filter(|&i| kept(k0 + i)) {
                let row: [Complex<T>; BLOCK] = std::array::from_fn(|j| block[j][i]);
                std::ptr::write_unaligned(
                    grid.at(line(k0 + i) + b0) as *mut [Complex<T>; BLOCK],
                    row,
                );
            }
        }
    }
    for k in (0..n).filter(|&k| kept(k)) {
        let from = if k < whole_k { whole_b } else { 0 };
        for b in from..lines {
            *grid.at(line(k) + b) = buffer[b * n + k];
        }
    }
}

/// Zeros the cells of a line outside the mode runs.
fn zero_outside<T: Real>(line: &mut [Complex<T>], runs: &[(usize, usize); 2]) {
    let zero = Complex::new(T::default(), T::default());
    let end_first = runs[0].0 + runs[0].1;
    let start_second = if runs[1].1 > 0 { runs[1].0 } else { line.len() };
    if end_first < start_second {
        line[end_first..start_second].fill(zero);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gather` and `scatter` against the element-by-element definitions, on
    /// line counts and lengths around the block size, strided lines and
    /// random masks (float32 and float64 cells).
    fn check<T: Copy + Default + PartialEq + std::fmt::Debug + From<u16>>() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        for lines in 1..=2 * BLOCK + 1 {
            for n in 1..=3 * BLOCK + 2 {
                let stride = lines + next(3);
                let base = next(5);
                let cells = base + stride * n;
                let grid: Vec<Complex<T>> = (0..cells)
                    .map(|i| Complex::new(T::from(i as u16), T::from(1 + i as u16)))
                    .collect();
                let mask: Vec<bool> = (0..n).map(|_| next(3) > 0).collect();
                let line = |k: usize| base + stride * k;
                let zero = Complex::new(T::default(), T::default());
                let mut buffer = vec![zero; lines * n];
                let mut copy = grid.clone();
                let shared = SharedLines {
                    ptr: copy.as_mut_ptr(),
                };
                // SAFETY: line(k) + b < cells for k < n, b < lines ≤ stride.
                unsafe { gather(shared, line, lines, &|k| mask[k], &mut buffer) };
                for k in 0..n {
                    for b in 0..lines {
                        let want = if mask[k] { grid[line(k) + b] } else { zero };
                        assert_eq!(buffer[b * n + k], want, "gather {lines}×{n} k {k} b {b}");
                    }
                }
                let written: Vec<Complex<T>> = (0..lines * n)
                    .map(|i| Complex::new(T::from(7 * i as u16), T::from(3)))
                    .collect();
                // SAFETY: as above.
                unsafe { scatter(shared, line, lines, &|k| mask[k], &written) };
                let mut want = grid.clone();
                for k in (0..n).filter(|&k| mask[k]) {
                    for b in 0..lines {
                        want[line(k) + b] = written[b * n + k];
                    }
                }
                assert_eq!(copy, want, "scatter {lines}×{n}");
            }
        }
    }

    #[test]
    fn blocks_of_lines_move_like_single_cells() {
        check::<f32>();
        check::<f64>();
    }
}
