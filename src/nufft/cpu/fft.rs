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
//! over blocks; axis 0 is transformed in place, in parallel over rows.

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
                for k in 0..n {
                    let wanted = pruning == Pruning::KeepModes || in_runs(&runs, k);
                    for b in 0..lines {
                        buffer[b * n + k] = if wanted {
                            // SAFETY: base + stride·k + b indexes this block's lines
                            // (inside the grid: k < n_f of the axis, b < lines).
                            unsafe { *shared.at(base + stride * k + b) }
                        } else {
                            zero
                        };
                    }
                }
                plan.process_with_scratch(buffer, scratch);
                for k in 0..n {
                    if pruning == Pruning::KeepModes && !in_runs(&runs, k) {
                        continue;
                    }
                    for b in 0..lines {
                        // SAFETY: as above.
                        unsafe { *shared.at(base + stride * k + b) = buffer[b * n + k] };
                    }
                }
            },
        );
        Ok(())
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
