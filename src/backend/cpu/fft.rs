//! Multi-dimensional FFTs of column-major grids (first index fastest) with
//! rustfft plans, parallel over lines on the current rayon pool.
//!
//! For an n0×n1×n2 array x, [`Direction::Forward`] computes
//!
//! $$X_{k} = \sum_{j} x_{j}\, \exp\!\Big(-2\pi i \sum_a \frac{k_a j_a}{n_a}\Big)$$
//!
//! and [`Direction::Inverse`] the same sum with +2πi; neither normalises
//! (a forward then an inverse transform multiplies by n0·n1·n2). Indices run
//! from 0 (no fftshift): centring is the caller's business. Axes of length 1
//! are skipped, so a 2D grid is an n0×n1×1 array.

use num_complex::Complex;
use rayon::prelude::*;
use rustfft::num_traits::Zero;
use rustfft::{Fft, FftDirection, FftNum, FftPlanner};
use std::sync::Arc;

/// The sign of the exponent: forward exp(−2πi…), inverse exp(+2πi…).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Inverse,
}

/// Lines of a strided axis gathered per task into a contiguous buffer.
const LINES_PER_BLOCK: usize = 16;

/// Work per task of the contiguous axis, in elements (a few tens of KiB).
const ELEMENTS_PER_TASK: usize = 8192;

/// FFT plans for one grid size; immutable and shareable between threads.
pub struct GridFft<T: FftNum> {
    dims: [usize; 3],
    /// Per axis: the forward and inverse 1D plans.
    plans: [[Arc<dyn Fft<T>>; 2]; 3],
}

impl<T: FftNum> GridFft<T> {
    /// Plans for an n0×n1×n2 grid (every n ≥ 1).
    pub fn new(dims: [usize; 3]) -> Self {
        let mut planner = FftPlanner::<T>::new();
        let plans = dims.map(|n| {
            let n = n.max(1);
            [
                planner.plan_fft(n, FftDirection::Forward),
                planner.plan_fft(n, FftDirection::Inverse),
            ]
        });
        GridFft { dims, plans }
    }

    /// The 1D plan of `axis` (length n_axis) in `direction`, for callers
    /// that transform lines they hold in their own buffers.
    pub fn line_plan(&self, axis: usize, direction: Direction) -> &Arc<dyn Fft<T>> {
        &self.plans[axis][match direction {
            Direction::Forward => 0,
            Direction::Inverse => 1,
        }]
    }

    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    /// Points of the grid, n0·n1·n2.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Transforms `data` (n0·n1·n2, first index fastest) in place.
    ///
    /// # Panics
    /// If `data.len()` is not n0·n1·n2 (a caller's bug, never user input).
    pub fn process(&self, data: &mut [Complex<T>], direction: Direction) {
        self.process_axes(data, direction, [true; 3]);
    }

    /// As [`GridFft::process`], transforming only the axes with `axes[a]`
    /// (the sum runs over those axes' indices only).
    ///
    /// # Panics
    /// If `data.len()` is not n0·n1·n2 (a caller's bug, never user input).
    pub fn process_axes(&self, data: &mut [Complex<T>], direction: Direction, axes: [bool; 3]) {
        assert_eq!(data.len(), self.len(), "grid FFT of a wrongly sized array");
        let which = match direction {
            Direction::Forward => 0,
            Direction::Inverse => 1,
        };
        let mut stride = 1;
        for ((&n, plans), &wanted) in self.dims.iter().zip(&self.plans).zip(&axes) {
            let plan = &plans[which];
            if n > 1 && wanted {
                if stride == 1 {
                    transform_contiguous(plan.as_ref(), data, n);
                } else {
                    transform_strided(plan.as_ref(), data, n, stride);
                }
            }
            stride *= n;
        }
    }
}

impl<T: FftNum> GridFft<T> {
    /// As [`GridFft::process`] on a zero-padded grid: the region
    /// [0, s_0)×[0, s_1)×[0, s_2) (`support`; s_0 is not used: axis 0 is
    /// transformed whole) is the only one that matters.
    /// Forward: the input is zero outside it, so the lines along axis 0
    /// outside it and the planes along axis 1 beyond s_2 stay zero and are
    /// skipped. Inverse: only the output inside it is wanted; axes run
    /// 2, 1, 0 and skip the same lines, leaving the rest of the grid
    /// partly transformed. In 2D with s = n/2 per axis: 3/4 of the work of
    /// [`GridFft::process`].
    ///
    /// # Panics
    /// If `data.len()` is not n0·n1·n2 (a caller's bug, never user input).
    pub fn process_padded(
        &self,
        data: &mut [Complex<T>],
        direction: Direction,
        support: [usize; 3],
    ) {
        assert_eq!(data.len(), self.len(), "grid FFT of a wrongly sized array");
        let [k0, k1, k2] = self.dims;
        let [s1, s2] = [1, 2].map(|a| support[a].clamp(1, self.dims[a]));
        let plane = k0 * k1;
        let axis0 = |data: &mut [Complex<T>], plan: &dyn Fft<T>| {
            if k0 > 1 {
                for z in 0..s2 {
                    transform_contiguous(plan, &mut data[z * plane..][..s1 * k0], k0);
                }
            }
        };
        match direction {
            Direction::Forward => {
                axis0(data, self.plans[0][0].as_ref());
                if k1 > 1 {
                    transform_strided(self.plans[1][0].as_ref(), &mut data[..s2 * plane], k1, k0);
                }
                if k2 > 1 {
                    transform_strided(self.plans[2][0].as_ref(), data, k2, plane);
                }
            }
            Direction::Inverse => {
                if k2 > 1 {
                    transform_strided(self.plans[2][1].as_ref(), data, k2, plane);
                }
                if k1 > 1 {
                    transform_strided(self.plans[1][1].as_ref(), &mut data[..s2 * plane], k1, k0);
                }
                axis0(data, self.plans[0][1].as_ref());
            }
        }
    }
}

/// Elements of the buffers [`GridFft::process`] allocates on a grid of
/// `dims` with `threads` threads, at most (for memory estimates): per task in
/// flight (one per thread), a block of lines and the FFT scratch (at most a
/// line).
pub fn working_len(dims: [usize; 3], threads: usize) -> usize {
    let longest = dims.iter().copied().max().unwrap_or(1);
    (LINES_PER_BLOCK + 1)
        .saturating_mul(longest)
        .saturating_mul(threads.max(1))
}

/// Lines of length n stored one after another.
fn transform_contiguous<T: FftNum>(plan: &dyn Fft<T>, data: &mut [Complex<T>], n: usize) {
    let lines_per_task = (ELEMENTS_PER_TASK / n).max(1);
    data.par_chunks_mut(n * lines_per_task).for_each_init(
        || vec![Complex::<T>::zero(); plan.get_inplace_scratch_len()],
        |scratch, chunk| plan.process_with_scratch(chunk, scratch),
    );
}

/// A raw view of the array that tasks touching disjoint elements share.
#[derive(Clone, Copy)]
struct SharedGrid<T> {
    ptr: *mut Complex<T>,
}

// SAFETY: every task of `transform_strided` reads and writes only the
// elements of its own lines, and the lines of different tasks are disjoint.
unsafe impl<T: Send> Send for SharedGrid<T> {}
unsafe impl<T: Send> Sync for SharedGrid<T> {}

impl<T> SharedGrid<T> {
    /// # Safety
    /// `offset` must lie inside the array this view was made from.
    unsafe fn at(&self, offset: usize) -> *mut Complex<T> {
        self.ptr.add(offset)
    }
}

/// Lines of length n with element stride `stride`: line (o, i) holds the
/// elements o·stride·n + i + stride·k, k = 0…n−1, for i < stride. Blocks of
/// consecutive i are gathered into a buffer, transformed, and scattered back.
fn transform_strided<T: FftNum>(
    plan: &dyn Fft<T>,
    data: &mut [Complex<T>],
    n: usize,
    stride: usize,
) {
    let outer = data.len() / (n * stride);
    let blocks_per_outer = stride.div_ceil(LINES_PER_BLOCK);
    let grid = SharedGrid {
        ptr: data.as_mut_ptr(),
    };
    (0..outer * blocks_per_outer).into_par_iter().for_each_init(
        || {
            (
                vec![Complex::<T>::zero(); LINES_PER_BLOCK * n],
                vec![Complex::<T>::zero(); plan.get_inplace_scratch_len()],
            )
        },
        |(buffer, scratch), task| {
            let (o, block) = (task / blocks_per_outer, task % blocks_per_outer);
            let first = block * LINES_PER_BLOCK;
            let lines = LINES_PER_BLOCK.min(stride - first);
            let base = o * stride * n + first;
            let buffer = &mut buffer[..lines * n];
            for k in 0..n {
                // SAFETY: base + stride·k + b < (o + 1)·stride·n ≤ data.len(), and
                // these elements belong to this task's lines only.
                let row = unsafe { std::slice::from_raw_parts(grid.at(base + stride * k), lines) };
                for (b, &v) in row.iter().enumerate() {
                    buffer[b * n + k] = v;
                }
            }
            plan.process_with_scratch(buffer, scratch);
            for k in 0..n {
                // SAFETY: as above.
                let row =
                    unsafe { std::slice::from_raw_parts_mut(grid.at(base + stride * k), lines) };
                for (b, v) in row.iter_mut().enumerate() {
                    *v = buffer[b * n + k];
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    /// The direct sum of the module's formula in float64.
    fn dft(x: &[Complex64], dims: [usize; 3], sign: f64) -> Vec<Complex64> {
        let n = x.len();
        let index = |v: usize| {
            [
                v % dims[0],
                (v / dims[0]) % dims[1],
                v / (dims[0] * dims[1]),
            ]
        };
        (0..n)
            .map(|k| {
                let kk = index(k);
                (0..n)
                    .map(|j| {
                        let jj = index(j);
                        let cycles: f64 = (0..3)
                            .map(|a| (kk[a] * jj[a]) as f64 / dims[a] as f64)
                            .sum();
                        x[j] * Complex64::from_polar(
                            1.0,
                            sign * 2.0 * std::f64::consts::PI * cycles,
                        )
                    })
                    .sum()
            })
            .collect()
    }

    /// Values uniform in [−0.5, 0.5) from xorshift64 seeded with `state`.
    fn uniform_values(mut state: u64) -> impl FnMut() -> f64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        }
    }

    #[test]
    fn padded_transforms_match_the_full_ones_where_they_matter() {
        let mut uniform = uniform_values(0x2545_f491_4f6c_dd1d);
        for (dims, support) in [
            ([8, 6, 1], [4, 3, 1]),
            ([10, 1, 1], [5, 1, 1]),
            ([1, 8, 1], [1, 4, 1]),
            ([6, 4, 8], [3, 2, 4]),
            ([2, 10, 6], [1, 5, 3]),
        ] {
            let fft = GridFft::<f64>::new(dims);
            let n: usize = dims.iter().product();
            let inside = |v: usize| {
                v % dims[0] < support[0]
                    && (v / dims[0]) % dims[1] < support[1]
                    && v / (dims[0] * dims[1]) < support[2]
            };
            let random: Vec<Complex64> = (0..n)
                .map(|_| Complex64::new(uniform(), uniform()))
                .collect();
            let padded: Vec<Complex64> = random
                .iter()
                .enumerate()
                .map(|(v, &x)| if inside(v) { x } else { Complex64::default() })
                .collect();
            let (mut full, mut pruned) = (padded.clone(), padded);
            fft.process(&mut full, Direction::Forward);
            fft.process_padded(&mut pruned, Direction::Forward, support);
            for (a, b) in full.iter().zip(&pruned) {
                assert!((a - b).norm() < 1e-12, "{dims:?} forward");
            }
            let (mut full, mut pruned) = (random.clone(), random);
            fft.process(&mut full, Direction::Inverse);
            fft.process_padded(&mut pruned, Direction::Inverse, support);
            for v in (0..n).filter(|&v| inside(v)) {
                assert!(
                    (full[v] - pruned[v]).norm() < 1e-12,
                    "{dims:?} inverse at {v}"
                );
            }
        }
    }

    #[test]
    fn matches_the_direct_sum_on_odd_and_even_grids() {
        let mut uniform = uniform_values(0x9e37_79b9_7f4a_7c15);
        for dims in [
            [7, 1, 1],
            [6, 5, 1],
            [1, 9, 1],
            [4, 3, 5],
            [17, 2, 3],
            [33, 20, 1],
        ] {
            let n: usize = dims.iter().product();
            let x: Vec<Complex64> = (0..n)
                .map(|_| Complex64::new(uniform(), uniform()))
                .collect();
            let fft = GridFft::<f64>::new(dims);
            for (direction, sign) in [(Direction::Forward, -1.0), (Direction::Inverse, 1.0)] {
                let mut y = x.clone();
                fft.process(&mut y, direction);
                let expect = dft(&x, dims, sign);
                let err = y
                    .iter()
                    .zip(&expect)
                    .map(|(a, b)| (a - b).norm_sqr())
                    .sum::<f64>()
                    .sqrt()
                    / expect.iter().map(|v| v.norm_sqr()).sum::<f64>().sqrt();
                assert!(err < 1e-13, "{dims:?} {direction:?}: {err:e}");
            }
        }
    }
}
