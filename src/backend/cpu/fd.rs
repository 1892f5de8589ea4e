//! Forward differences over the image grid, the operator D of the
//! finite-difference, total-variation and Laplace regularizers.
//!
//! The grid axes are those with more than one voxel (x, y, z in that order;
//! a 1×1×1 grid keeps x as its one, edgeless, axis). D takes differences
//! along a list of directions d (integer voxel offsets), one row block per
//! direction:
//!
//! $$(D\rho)_{d,n} = \rho_{n+d} - \rho_n$$
//!
//! for every voxel n whose neighbour n + d lies inside the grid; elsewhere
//! (the last voxel along d) there is no edge: (Dρ)_{d,n} = 0, no periodic
//! wrap, and its edge weight is ignored. Differences are taken between grid
//! neighbours in index order, not scaled by the voxel spacing. Arrays over
//! edges are N×ndims, voxel fastest (entry d·N + n), like `fd_weights`.
//!
//! The directions ([`Neighbourhood`]), over the axes e₀, e₁, e₂ of more
//! than one voxel (in x, y, z order; directions along a singleton axis are
//! dropped, the order of the rest kept):
//!
//! - `Axes` (6-neighbourhood in 3D, the default): e₀, e₁, e₂; ndims =
//!   [`Sizes::grid_axes`](crate::model::Sizes::grid_axes).
//! - `Full` (26-neighbourhood in 3D, 8 in 2D): every neighbour of a voxel,
//!   each edge once (the 13 directions whose first nonzero component is +1),
//!   in the order e₀, e₁, e₂, e₀+e₁, e₀−e₁, e₀+e₂, e₀−e₂, e₁+e₂, e₁−e₂,
//!   e₀+e₁+e₂, e₀+e₁−e₂, e₀−e₁+e₂, e₀−e₁−e₂: 13 directions in 3D, 4 in 2D
//!   (e₀, e₁, e₀+e₁, e₀−e₁), 1 in 1D.
//!
//! Each direction carries the geometric weight c_d = 1/|d|² (1 along the
//! axes, 1/2 across a face diagonal, 1/3 along a body diagonal), applied in
//! every weighted sum over edges, so |ρ_{n+d} − ρ_n|²/|d|² is the squared
//! directional derivative along d in voxel units and the 26-neighbour
//! ‖Dρ‖² sums squared directional derivatives over all 13 directions, a
//! more isotropic |∇ρ|² than the axes alone. The neighbour differences are
//! those of the 26-neighbourhood used with the homotopic ℓ0 / Laplace prior
//! (Trzasko & Manduca); the 1/|d|² weighting is this library's choice (the
//! inverse squared distance of neighbourhood priors), not taken from them.
//! The weighted sums are
//!
//! $$g_n^2 = \sum_d c_d\,u_{d,n}\,|(D\rho)_{d,n}|^2, \qquad
//!   \|D\rho\|_u^2 = \sum_n g_n^2.$$

use super::real::Real;
use crate::solver::Neighbourhood;
use num_complex::Complex;
use rayon::prelude::*;

/// Voxels handed to one rayon task at a time.
const MIN_CHUNK: usize = 4096;

/// Most directions of any neighbourhood (the 26-neighbourhood's 13).
const MAX_DIRECTIONS: usize = 13;

/// One difference direction: its offset along the compact axes (those of
/// more than one voxel, then ones), its voxel stride and its weight 1/|d|².
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Direction {
    pub offset: [isize; 3],
    pub stride: isize,
    pub weight: f64,
}

/// The difference directions of an nx×ny×nz grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// The axes of more than one voxel in x, y, z order, padded with ones
    /// (same voxel numbering as the original dims).
    compact: [usize; 3],
    directions: [Direction; MAX_DIRECTIONS],
    ndims: usize,
    voxels: usize,
}

/// The 13 directions of the 26-neighbourhood in the documented order.
const FULL_ORDER: [[isize; 3]; MAX_DIRECTIONS] = [
    [1, 0, 0],
    [0, 1, 0],
    [0, 0, 1],
    [1, 1, 0],
    [1, -1, 0],
    [1, 0, 1],
    [1, 0, -1],
    [0, 1, 1],
    [0, 1, -1],
    [1, 1, 1],
    [1, 1, -1],
    [1, -1, 1],
    [1, -1, -1],
];

impl Grid {
    /// Differences along the axes (the 6-neighbourhood).
    pub fn new(dims: [usize; 3]) -> Grid {
        Grid::with_neighbourhood(dims, Neighbourhood::Axes)
    }

    pub fn with_neighbourhood(dims: [usize; 3], neighbourhood: Neighbourhood) -> Grid {
        let mut compact = [1; 3];
        let mut axes = 0;
        for &d in &dims {
            if d > 1 {
                compact[axes] = d;
                axes += 1;
            }
        }
        let candidates = match neighbourhood {
            Neighbourhood::Axes => &FULL_ORDER[..3],
            Neighbourhood::Full => &FULL_ORDER[..],
        };
        let strides = [1, compact[0] as isize, (compact[0] * compact[1]) as isize];
        let mut directions = [Direction {
            offset: [1, 0, 0],
            stride: 1,
            weight: 1.0,
        }; MAX_DIRECTIONS];
        let mut ndims = 0;
        for offset in candidates {
            if (0..3).any(|a| offset[a] != 0 && a >= axes) {
                continue;
            }
            let length_sqr: isize = offset.iter().map(|o| o * o).sum();
            directions[ndims] = Direction {
                offset: *offset,
                stride: (0..3).map(|a| offset[a] * strides[a]).sum(),
                weight: 1.0 / length_sqr as f64,
            };
            ndims += 1;
        }
        // A 1×1×1 grid keeps one edgeless direction (x).
        let ndims = ndims.max(1);
        Grid {
            compact,
            directions,
            ndims,
            voxels: dims.iter().product(),
        }
    }

    /// Number of difference directions (the second dimension of `fd_weights`).
    pub fn ndims(&self) -> usize {
        self.ndims
    }

    pub fn voxels(&self) -> usize {
        self.voxels
    }

    /// The directions in `fd_weights` order.
    pub fn directions(&self) -> &[Direction] {
        &self.directions[..self.ndims]
    }

    /// The axes of more than one voxel (x, y, z order), padded with ones.
    pub fn compact_dims(&self) -> [usize; 3] {
        self.compact
    }

    /// The direction tables of kernels/fd.cu: per direction its offset along
    /// the three compact axes and its voxel stride (4 × i64), and its weight
    /// 1/|d|² (f64).
    pub fn device_tables(&self) -> (Vec<i64>, Vec<f64>) {
        let mut table = Vec::with_capacity(4 * self.ndims);
        for d in self.directions() {
            table.extend(d.offset.iter().map(|&o| o as i64));
            table.push(d.stride as i64);
        }
        (table, self.directions().iter().map(|d| d.weight).collect())
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

/// Rows of voxels along the first compact axis: for a row, whether each
/// direction's successor n + d and predecessor n − d exist as far as the
/// other two axes are concerned (the first axis is checked per voxel).
struct Rows<'g> {
    grid: &'g Grid,
}

#[derive(Clone, Copy)]
struct Flags {
    next: bool,
    previous: bool,
}

impl Rows<'_> {
    fn length(&self) -> usize {
        self.grid.compact[0]
    }

    /// Row flags of every direction for the row starting at voxel `base`.
    fn flags(&self, base: usize) -> [Flags; MAX_DIRECTIONS] {
        let [c0, c1, c2] = self.grid.compact;
        let row = base / c0;
        let at = [(row % c1) as isize, (row / c1) as isize];
        let inside = |i: isize, len: usize| i >= 0 && (i as usize) < len;
        let mut out = [Flags {
            next: false,
            previous: false,
        }; MAX_DIRECTIONS];
        for (f, d) in out.iter_mut().zip(self.grid.directions()) {
            let (o1, o2) = (d.offset[1], d.offset[2]);
            f.next = inside(at[0] + o1, c1) && inside(at[1] + o2, c2);
            f.previous = inside(at[0] - o1, c1) && inside(at[1] - o2, c2);
        }
        out
    }

    /// Calls `f(v, k, flags, out_v)` for every voxel v (k: its index in its
    /// row, flags: its row's [`Rows::flags`]), rows in parallel.
    fn for_each_voxel<O: Send>(
        &self,
        out: &mut [O],
        f: impl Fn(usize, usize, &[Flags; MAX_DIRECTIONS], &mut O) + Sync,
    ) {
        let length = self.length();
        out.par_chunks_mut(length)
            .with_min_len(rows_per_task(length))
            .enumerate()
            .for_each(|(row, out)| {
                let base = row * length;
                let flags = self.flags(base);
                for (k, o) in out.iter_mut().enumerate() {
                    f(base + k, k, &flags, o);
                }
            });
    }
}

/// (successor exists, predecessor exists) for voxel k of a row of `length`
/// along direction `d`, given the row's flags.
#[inline(always)]
fn exists(d: &Direction, f: Flags, k: usize, length: usize) -> (bool, bool) {
    let k = k as isize;
    let inside = |i: isize| i >= 0 && (i as usize) < length;
    (
        f.next && inside(k + d.offset[0]),
        f.previous && inside(k - d.offset[0]),
    )
}

#[inline(always)]
fn at<T: Copy>(v: &[T], n: usize, stride: isize) -> T {
    v[(n as isize + stride) as usize]
}

/// Rows handed to one rayon task at a time.
fn rows_per_task(length: usize) -> usize {
    MIN_CHUNK.div_ceil(length.max(1))
}

/// out = D x (N×ndims edges; zero where an edge does not exist).
pub fn differences<T: Real>(grid: &Grid, x: &[Complex<T>], out: &mut [Complex<T>]) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    for (a, d) in grid.directions().iter().enumerate() {
        rows.for_each_voxel(&mut out[a * n..(a + 1) * n], |v, k, flags, o| {
            *o = if exists(d, flags[a], k, length).0 {
                sub(at(x, v, d.stride), x[v])
            } else {
                Complex::new(T::default(), T::default())
            };
        });
    }
}

/// y = Dᴴ e: y_n = Σ_d (e_{d,n−d} − e_{d,n}), each term present only where
/// its edge exists (entries of `e` on edgeless voxels are ignored).
pub fn differences_adjoint<T: Real>(grid: &Grid, e: &[Complex<T>], y: &mut [Complex<T>]) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    let directions = grid.directions();
    rows.for_each_voxel(y, |v, k, flags, y| {
        let mut sum = Complex::new(T::default(), T::default());
        for (a, d) in directions.iter().enumerate() {
            let edges = &e[a * n..(a + 1) * n];
            let (next, previous) = exists(d, flags[a], k, length);
            if next {
                sum = sub(sum, edges[v]);
            }
            if previous {
                let p = at(edges, v, -d.stride);
                sum = Complex::new(sum.re + p.re, sum.im + p.im);
            }
        }
        *y = sum;
    });
}

/// The (weighted) gradient magnitude of every voxel,
///
/// $$g_n = \Big(\sum_d c_d\,u_{d,n}\,|(Dx)_{d,n}|^2\Big)^{1/2},$$
///
/// with the direction weights c_d = 1/|d|² and the static edge weights u
/// (`fd_weights`, 1 when `None`), in float64.
pub fn gradient_magnitude<T: Real>(
    grid: &Grid,
    fd_weights: Option<&[f32]>,
    x: &[Complex<T>],
    g: &mut [f64],
) {
    let n = grid.voxels;
    let rows = Rows { grid };
    let length = rows.length();
    let directions = grid.directions();
    rows.for_each_voxel(g, |v, k, flags, g| {
        let mut sum = 0.0;
        for (a, d) in directions.iter().enumerate() {
            if exists(d, flags[a], k, length).0 {
                let u = fd_weights.map_or(1.0, |u| u[a * n + v] as f64);
                sum += d.weight * u * norm_sqr(sub(at(x, v, d.stride), x[v]));
            }
        }
        *g = sum.sqrt();
    });
}

/// y ← y + λ·Dᴴ diag(w) D x with edge weights w_{d,n} = c_d·u_{d,n}·ν_n: the
/// direction weights c_d = 1/|d|², the static weights u (`fd_weights`, 1
/// when `None`) and per-voxel factors ν (the reweighting of TV and Laplace,
/// 1 when `None`). Computed voxel by voxel without forming Dx:
///
/// $$y_n \mathrel{+}= \lambda \sum_d \big[w_{d,n}(x_n - x_{n+d}) + w_{d,n-d}(x_n - x_{n-d})\big].$$
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
    let directions = grid.directions();
    let lambda = T::from_f64(lambda);
    let weight = |a: usize, c: T, v: usize| -> T {
        let u = fd_weights.map_or(T::from_f64(1.0), |u| T::from_f64(u[a * n + v] as f64));
        let nu = voxel_factors.map_or(T::from_f64(1.0), |f| f[v]);
        lambda * c * u * nu
    };
    rows.for_each_voxel(y, |v, k, flags, y| {
        let (mut re, mut im) = (T::default(), T::default());
        let xv = x[v];
        for (a, d) in directions.iter().enumerate() {
            let (next, previous) = exists(d, flags[a], k, length);
            let c = T::from_f64(d.weight);
            if next {
                let w = weight(a, c, v);
                let diff = sub(xv, at(x, v, d.stride));
                re = w.madd::<false>(diff.re, re);
                im = w.madd::<false>(diff.im, im);
            }
            if previous {
                let w = weight(a, c, (v as isize - d.stride) as usize);
                let diff = sub(xv, at(x, v, -d.stride));
                re = w.madd::<false>(diff.re, re);
                im = w.madd::<false>(diff.im, im);
            }
        }
        *y = Complex::new(y.re + re, y.im + im);
    });
}
