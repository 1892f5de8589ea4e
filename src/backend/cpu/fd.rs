//! Forward differences over the image grid, the operator D of the
//! finite-difference, total-variation and Laplace regularizers.
//!
//! The grid axes are those with more than one voxel (x, y, z in that order;
//! a 1×1×1 grid keeps x as its one, edgeless, axis), so `ndims` =
//! [`Sizes::grid_axes`](crate::model::Sizes::grid_axes). Along axis a with
//! voxel stride s_a (1, nx, nx·ny):
//!
//! $$(D\rho)_{a,n} = \rho_{n+s_a} - \rho_n$$
//!
//! for every voxel n that is not the last one along a; the last voxel of each
//! axis has no edge ((Dρ)_{a,n} = 0 there, no periodic wrap, and its edge
//! weight is ignored). Differences are taken between grid neighbours in index
//! order, not scaled by the voxel spacing. Arrays over edges are N×ndims,
//! voxel fastest (entry a·N + n), like `fd_weights`.

use super::real::Real;
use num_complex::Complex;
use rayon::prelude::*;

/// Voxels handed to one rayon task at a time.
const MIN_CHUNK: usize = 4096;

/// The difference axes of an nx×ny×nz grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// (stride, length) of each axis with more than one voxel.
    axes: [(usize, usize); 3],
    ndims: usize,
    voxels: usize,
}

impl Grid {
    pub fn new(dims: [usize; 3]) -> Grid {
        let strides = [1, dims[0], dims[0] * dims[1]];
        let mut axes = [(0, 0); 3];
        let mut ndims = 0;
        for a in 0..3 {
            if dims[a] > 1 {
                axes[ndims] = (strides[a], dims[a]);
                ndims += 1;
            }
        }
        if ndims == 0 {
            axes[0] = (1, 1);
            ndims = 1;
        }
        Grid {
            axes,
            ndims,
            voxels: dims.iter().product(),
        }
    }

    /// Number of difference axes (the second dimension of `fd_weights`).
    pub fn ndims(&self) -> usize {
        self.ndims
    }

    pub fn voxels(&self) -> usize {
        self.voxels
    }

    fn axes(&self) -> &[(usize, usize)] {
        &self.axes[..self.ndims]
    }
}

#[inline(always)]
fn sub<T: Real>(a: Complex<T>, b: Complex<T>) -> Complex<T> {
    Complex::new(a.re - b.re, a.im - b.im)
}

#[inline(always)]
fn norm_sqr<T: Real>(a: Complex<T>) -> f64 {
    let (re, im) = (a.re.to_f64(), a.im.to_f64());
    re * re + im * im
}

/// Rows of voxels along the first difference axis (its stride is always 1):
/// (row length, for each axis a ≥ 1 of the row: whether voxels have a
/// successor and a predecessor along a).
struct Rows<'g> {
    grid: &'g Grid,
}

impl Rows<'_> {
    fn length(&self) -> usize {
        self.grid.axes[0].1
    }

    /// (has successor, has predecessor) along every axis a ≥ 1 for the row starting at voxel `base`.
    fn neighbours(&self, base: usize) -> [(bool, bool); 3] {
        let mut out = [(false, false); 3];
        for (a, &(stride, len)) in self.grid.axes().iter().enumerate().skip(1) {
            let i = (base / stride) % len;
            out[a] = (i + 1 < len, i > 0);
        }
        out
    }
}

/// Rows handed to one rayon task at a time.
fn rows_per_task(length: usize) -> usize {
    MIN_CHUNK.div_ceil(length.max(1))
}

/// out = D x (N×ndims edges; zero on the last voxel of each axis).
pub fn differences<T: Real>(grid: &Grid, x: &[Complex<T>], out: &mut [Complex<T>]) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    for (a, &(stride, _)) in grid.axes().iter().enumerate() {
        out[a * n..(a + 1) * n]
            .par_chunks_mut(length)
            .with_min_len(rows_per_task(length))
            .enumerate()
            .for_each(|(row, o)| {
                let base = row * length;
                let next = if a == 0 {
                    true
                } else {
                    rows.neighbours(base)[a].0
                };
                for (k, o) in o.iter_mut().enumerate() {
                    let v = base + k;
                    let exists = if a == 0 { k + 1 < length } else { next };
                    *o = if exists {
                        sub(x[v + stride], x[v])
                    } else {
                        Complex::new(T::default(), T::default())
                    };
                }
            });
    }
}

/// y = Dᴴ e: y_n = Σ_a (e_{a,n−s_a} − e_{a,n}), each term present only where
/// its edge exists (entries of `e` on edgeless voxels are ignored).
pub fn differences_adjoint<T: Real>(grid: &Grid, e: &[Complex<T>], y: &mut [Complex<T>]) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    let axes = grid.axes();
    y.par_chunks_mut(length)
        .with_min_len(rows_per_task(length))
        .enumerate()
        .for_each(|(row, y)| {
            let base = row * length;
            let mut flags = rows.neighbours(base);
            for (k, y) in y.iter_mut().enumerate() {
                let v = base + k;
                flags[0] = (k + 1 < length, k > 0);
                let mut sum = Complex::new(T::default(), T::default());
                for (a, &(stride, _)) in axes.iter().enumerate() {
                    let edges = &e[a * n..(a + 1) * n];
                    let (next, previous) = flags[a];
                    if next {
                        sum = sub(sum, edges[v]);
                    }
                    if previous {
                        let p = edges[v - stride];
                        sum = Complex::new(sum.re + p.re, sum.im + p.im);
                    }
                }
                *y = sum;
            }
        });
}

/// The (weighted) gradient magnitude of every voxel,
///
/// $$g_n = \Big(\sum_a u_{a,n}\,|(Dx)_{a,n}|^2\Big)^{1/2},$$
///
/// with the static edge weights u (`fd_weights`, 1 when `None`), in float64.
pub fn gradient_magnitude<T: Real>(
    grid: &Grid,
    fd_weights: Option<&[f32]>,
    x: &[Complex<T>],
    g: &mut [f64],
) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    let axes = grid.axes();
    g.par_chunks_mut(length)
        .with_min_len(rows_per_task(length))
        .enumerate()
        .for_each(|(row, g)| {
            let base = row * length;
            let mut flags = rows.neighbours(base);
            for (k, g) in g.iter_mut().enumerate() {
                let v = base + k;
                flags[0] = (k + 1 < length, k > 0);
                let mut sum = 0.0;
                for (a, &(stride, _)) in axes.iter().enumerate() {
                    if flags[a].0 {
                        let u = fd_weights.map_or(1.0, |u| u[a * n + v] as f64);
                        sum += u * norm_sqr(sub(x[v + stride], x[v]));
                    }
                }
                *g = sum.sqrt();
            }
        });
}

/// y ← y + λ·Dᴴ diag(w) D x with edge weights w_{a,n} = u_{a,n}·ν_n: the
/// static weights u (`fd_weights`, 1 when `None`) times per-voxel factors ν
/// (the reweighting of TV and Laplace, 1 when `None`). Computed voxel by
/// voxel without forming Dx:
///
/// $$y_n \mathrel{+}= \lambda \sum_a \big[w_{a,n}(x_n - x_{n+s_a}) + w_{a,n-s_a}(x_n - x_{n-s_a})\big].$$
pub fn add_fd_normal<T: Real>(
    grid: &Grid,
    lambda: f64,
    fd_weights: Option<&[f32]>,
    voxel_factors: Option<&[T]>,
    x: &[Complex<T>],
    y: &mut [Complex<T>],
) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    let axes = grid.axes();
    let lambda = T::from_f64(lambda);
    let weight = |a: usize, v: usize| -> T {
        let u = fd_weights.map_or(T::from_f64(1.0), |u| T::from_f64(u[a * n + v] as f64));
        let nu = voxel_factors.map_or(T::from_f64(1.0), |f| f[v]);
        lambda * u * nu
    };
    y.par_chunks_mut(length)
        .with_min_len(rows_per_task(length))
        .enumerate()
        .for_each(|(row, y)| {
            let base = row * length;
            let mut flags = rows.neighbours(base);
            for (k, y) in y.iter_mut().enumerate() {
                let v = base + k;
                flags[0] = (k + 1 < length, k > 0);
                let (mut re, mut im) = (T::default(), T::default());
                let xv = x[v];
                for (a, &(stride, _)) in axes.iter().enumerate() {
                    let (next, previous) = flags[a];
                    if next {
                        let w = weight(a, v);
                        let d = sub(xv, x[v + stride]);
                        re = w.madd::<false>(d.re, re);
                        im = w.madd::<false>(d.im, im);
                    }
                    if previous {
                        let w = weight(a, v - stride);
                        let d = sub(xv, x[v - stride]);
                        re = w.madd::<false>(d.re, re);
                        im = w.madd::<false>(d.im, im);
                    }
                }
                *y = Complex::new(y.re + re, y.im + im);
            }
        });
}
