//! The gridding reconstruction, the seeds' comparison method (issue 5 §5):
//! density-compensated data transformed onto the voxels by a type-1
//! non-uniform FFT per coil ([`crate::nufft`], on the plan's backend), and
//! coil combination.
//!
//! # What it approximates
//!
//! For the plan's voxels r_n, data d_{j,c}, density compensation w_j and the
//! phase model's k-space position k_j (rad/m) and zeroth-order term k0_j (rad):
//!
//! $$\hat\rho_{c,n} = \sum_j w_j\, d_{j,c}\, e^{-i(k0_j + \mathbf k_j\cdot\mathbf r_n)}$$
//!
//! (that is Eᴴ W d of MODEL.md for one coil without sensitivities), combined
//! over the coils as
//!
//! - one coil, no sensitivities: ρ̂_n = ρ̂_{1,n};
//! - with sensitivities S (N×L): ρ̂_n = Σ_c conj(S_c(r_n))·ρ̂_{c,n} / Σ_c |S_c(r_n)|²
//!   (0 where Σ_c |S_c(r_n)|² = 0), the "Sᴴ, normalised" combination;
//! - several coils without sensitivities: the root-sum-of-squares
//!   ρ̂_n = (Σ_c |ρ̂_{c,n}|²)^{1/2} (real, ≥ 0).
//!
//! Gridding is the *uncorrected* baseline: of a solid-harmonic phase model
//! only the terms of order 0 (k0) and 1 (k = (kx, ky, kz)) are used; higher
//! orders and the off-resonance are ignored. A user basis has no k-space
//! position and is refused. The voxels must lie on a lattice
//! r_n = r_0 + ix·a + iy·b + iz·c (any grid of `set_grid_positions`).
//!
//! # Algorithm
//!
//! With the centre voxel r_c (index ⌊n/2⌋ along every axis) and i' = i − ⌊n/2⌋,
//! k·r_n = k·r_c + Σ_a 2π u_a i'_a where u_a = k·step_a/2π (cycles per voxel).
//! The sum is 1-periodic in u, so every u is reduced to [−½, ½). Then
//!
//! $$\hat\rho_{c,i'} = \sum_j \big[w_j d_{j,c} e^{-i(k0_j + \mathbf k_j\cdot\mathbf r_c)}\big]\,
//!   e^{-i\,i'\cdot 2\pi\mathbf u_j},$$
//!
//! a type-1 NUFFT with sign −1 at the points 2π·u_j and the voxels' index
//! offsets as modes (FINUFFT's order, which is the plan's voxel order): one
//! plan for all coils, relative error ≤ [`NUFFT_TOLERANCE`] against the
//! float64 direct sum (tests/gridding.rs checks it), float64 arithmetic for
//! DOUBLE plans and float32 otherwise. It runs where the plan runs (CUDA
//! plans on the GPU). The Pipe–Menon density compensation below still grids
//! with its own Kaiser–Bessel kernel on the CPU.
//!
//! # Density compensation when none is given (Pipe & Menon 1999)
//!
//! w ← w / (C Cᵀ w), from w = 1, [`PIPE_MENON_ITERATIONS`] times, where Cᵀ
//! spreads with the separable Kaiser–Bessel kernel
//! ψ(x) = I0(β·√(1 − (2x/W)²)) (|x| ≤ W/2 cells, W = [`KERNEL_WIDTH`],
//! β = π·√(W²/α²·(α − ½)² − 0.8), Beatty et al. 2005) onto the grid of
//! α·n_a cells (α = [`OVERSAMPLING`]) and C interpolates back. The result is scaled so that the gridding formula above, applied to
//! the exact data of the uniform object ρ ≡ 1 on the plan's grid
//! (d_j = Σ_n e^{+i(k0_j + k_j·r_n)}), gives exactly 1 at the centre voxel:
//! w ← w / Re Σ_j w_j Π_a D_a(u_{j,a}), with the Dirichlet kernels
//! D_a(u) = Σ_{i'} e^{2πi u i'} over the voxel offsets i' of axis a.

use super::{expect_len, Plan};
use crate::error::{try_vec, Error, Result};
use crate::model::{check_finite, Basis};
use crate::nufft::plan::choose_upsampling;
use crate::nufft::{Modes, Nufft, NufftSpec, NufftType};
use crate::op::Precision;
use crate::progress::Progress;
use num_complex::{Complex32, Complex64};
use rayon::prelude::*;
use std::f64::consts::PI;

/// Kernel width W in cells of the oversampled grid.
pub const KERNEL_WIDTH: usize = 6;

/// Grid oversampling α.
pub const OVERSAMPLING: f64 = 2.0;

/// Iterations of the Pipe–Menon density compensation.
pub const PIPE_MENON_ITERATIONS: usize = 20;

/// The relative tolerance of the gridding NUFFT.
pub(crate) const NUFFT_TOLERANCE: f64 = 1e-6;

/// The modified Bessel function I0 by its power series Σ (x²/4)^k/(k!)²
/// (all terms positive; converges to full precision for the x ≤ ~30 used here).
fn bessel_i0(x: f64) -> f64 {
    let q = x * x / 4.0;
    let (mut term, mut sum) = (1.0, 1.0);
    for k in 1..200 {
        term *= q / (k * k) as f64;
        sum += term;
        if term < 1e-17 * sum {
            break;
        }
    }
    sum
}

/// Table points per grid cell of the kernel (linear interpolation between
/// them: relative error ≤ h²/8·max|ψ''|/ψ(0) ≈ 5e-8).
const TABLE_POINTS_PER_CELL: usize = 2048;

/// The separable Kaiser–Bessel kernel, tabulated, and its Fourier transform.
#[derive(Clone, Debug)]
struct Kernel {
    width: usize,
    beta: f64,
    /// ψ(i/TABLE_POINTS_PER_CELL) for i = 0 … W/2·TABLE_POINTS_PER_CELL.
    table: Vec<f64>,
}

impl Kernel {
    /// Beatty et al. 2005's β for width W and oversampling α.
    fn new(width: usize, alpha: f64) -> Kernel {
        let w = width as f64;
        let beta = PI * ((w * w / (alpha * alpha)) * (alpha - 0.5).powi(2) - 0.8).sqrt();
        let mut kernel = Kernel {
            width,
            beta,
            table: Vec::new(),
        };
        let last = width * TABLE_POINTS_PER_CELL / 2;
        kernel.table = (0..=last)
            .map(|i| kernel.exact(i as f64 / TABLE_POINTS_PER_CELL as f64))
            .collect();
        kernel
    }

    /// ψ(x) = I0(β√(1 − (2x/W)²)), 0 outside |x| ≤ W/2.
    fn exact(&self, x: f64) -> f64 {
        let t = 2.0 * x / self.width as f64;
        let s = 1.0 - t * t;
        if s < 0.0 {
            0.0
        } else {
            bessel_i0(self.beta * s.sqrt())
        }
    }

    /// ψ(x) from the table (linear interpolation).
    fn value(&self, x: f64) -> f64 {
        let position = x.abs() * TABLE_POINTS_PER_CELL as f64;
        let i = position as usize;
        let last = self.table.len() - 1;
        if i >= last {
            return if position == last as f64 {
                self.table[last]
            } else {
                0.0
            };
        }
        let f = position - i as f64;
        self.table[i] + f * (self.table[i + 1] - self.table[i])
    }
}

/// The gridding geometry of a plan: voxel lattice, oversampled grid, kernel.
struct Geometry {
    dims: [usize; 3],
    /// Oversampled grid size per axis (1 for axes of one voxel).
    grid: [usize; 3],
    kernel: Kernel,
}

impl Geometry {
    fn new(dims: [usize; 3], kernel: Kernel, alpha: f64) -> Geometry {
        let grid = dims.map(|n| {
            if n > 1 {
                ((alpha * n as f64).ceil() as usize).max(n + 1)
            } else {
                1
            }
        });
        Geometry { dims, grid, kernel }
    }

    /// Footprint of a sample at u (cycles per voxel, reduced) along `axis`:
    /// the first grid index (may be negative; wrapped by the caller) and the
    /// kernel weights of the W (or, for an axis of one voxel, 1) cells.
    fn footprint(&self, axis: usize, u: f64, weights: &mut [f64; KERNEL_WIDTH]) -> (i64, usize) {
        let g = self.grid[axis];
        if g == 1 {
            weights[0] = 1.0;
            return (0, 1);
        }
        let width = self.kernel.width;
        let position = u * g as f64;
        let first = self.first_cell(axis, u);
        for (t, w) in weights.iter_mut().enumerate().take(width) {
            *w = self.kernel.value((first + t as i64) as f64 - position);
        }
        (first, width)
    }

    fn grid_len(&self) -> usize {
        self.grid.iter().product()
    }

    /// Spreads `values` (one per sample at `u`) onto the periodic grid:
    /// grid[p] = Σ_j values_j Π_a ψ(p_a − G_a u_{j,a}) (p_a wrapped mod G_a).
    fn spread(&self, u: &[[f64; 3]], values: &[Complex64]) -> Result<Vec<Complex64>> {
        let g = self.grid;
        let len = self.grid_len();
        // The last axis with more than one cell carries the slabs.
        let axis = (0..3).rev().find(|&a| g[a] > 1).unwrap_or(0);
        let planes = g[axis];
        let plane: usize = g[..axis].iter().product();
        let reach = if planes > 1 { self.kernel.width } else { 1 };
        let threads = rayon::current_num_threads().max(1);
        let slabs = (2 * threads).min(planes / reach).max(1);
        let thickness = planes.div_ceil(slabs);
        let slabs = planes.div_ceil(thickness);
        // Counting sort of the samples by the slab of their first plane.
        let slab_of = |uj: &[f64; 3]| -> usize {
            self.first_cell(axis, uj[axis]).rem_euclid(planes as i64) as usize / thickness
        };
        let mut owner = try_vec(u.len(), 0usize, "gridding sample slabs (M)")?;
        owner
            .par_iter_mut()
            .zip(u)
            .for_each(|(o, uj)| *o = slab_of(uj));
        let mut starts = vec![0usize; slabs + 1];
        for &s in &owner {
            starts[s + 1] += 1;
        }
        for s in 0..slabs {
            starts[s + 1] += starts[s];
        }
        let mut order = try_vec(u.len(), 0usize, "gridding sample order (M)")?;
        let mut fill = starts.clone();
        for (j, &s) in owner.iter().enumerate() {
            order[fill[s]] = j;
            fill[s] += 1;
        }
        drop(owner);
        let buffers: Vec<Vec<Complex64>> = (0..slabs)
            .into_par_iter()
            .map(|s| -> Result<Vec<Complex64>> {
                let first_plane = s * thickness;
                let own = thickness.min(planes - first_plane);
                let mut buffer = try_vec(
                    (own + reach) * plane,
                    Complex64::default(),
                    "gridding slab buffer",
                )?;
                let mut w = [[0.0; KERNEL_WIDTH]; 3];
                for &j in &order[starts[s]..starts[s + 1]] {
                    let v = values[j];
                    if v == Complex64::default() {
                        continue;
                    }
                    let mut first = [0i64; 3];
                    let mut count = [1usize; 3];
                    for a in 0..3 {
                        let (f, c) = self.footprint(a, u[j][a], &mut w[a]);
                        first[a] = f;
                        count[a] = c;
                    }
                    // Plane offset inside the buffer: the first plane lies in this slab.
                    let local = (first[axis].rem_euclid(planes as i64) as usize) - first_plane;
                    let lower: [usize; 2] = [
                        first[0].rem_euclid(g[0] as i64) as usize,
                        first[1].rem_euclid(g[1] as i64) as usize,
                    ];
                    spread_one(&mut buffer, axis, g, plane, local, lower, count, &w, v);
                }
                Ok(buffer)
            })
            .collect::<Result<_>>()?;
        let mut grid = try_vec(len, Complex64::default(), "gridding grid (oversampled)")?;
        grid.par_chunks_mut(thickness * plane)
            .zip(buffers.par_iter())
            .for_each(|(target, buffer)| target.copy_from_slice(&buffer[..target.len()]));
        for (s, buffer) in buffers.iter().enumerate() {
            let first_plane = s * thickness;
            let own = thickness.min(planes - first_plane);
            for t in 0..reach {
                let p = (first_plane + own + t) % planes;
                let src = &buffer[(own + t) * plane..(own + t + 1) * plane];
                let dst = &mut grid[p * plane..(p + 1) * plane];
                for (d, v) in dst.iter_mut().zip(src) {
                    *d += v;
                }
            }
        }
        Ok(grid)
    }

    /// The first grid index of a footprint along `axis` (as [`Geometry::footprint`]).
    fn first_cell(&self, axis: usize, u: f64) -> i64 {
        if self.grid[axis] == 1 {
            return 0;
        }
        let position = u * self.grid[axis] as f64;
        (position - self.kernel.width as f64 / 2.0).floor() as i64 + 1
    }

    /// Interpolates the grid at every sample: out_j = Σ_p grid[p] Π_a ψ(p_a − G_a u_{j,a}).
    fn interpolate(&self, u: &[[f64; 3]], grid: &[f64]) -> Result<Vec<f64>> {
        let g = self.grid;
        let mut out = try_vec(u.len(), 0.0f64, "density compensation convolution (M)")?;
        out.par_iter_mut().zip(u).for_each(|(out, uj)| {
            *out = {
                let mut w = [[0.0; KERNEL_WIDTH]; 3];
                let mut first = [0i64; 3];
                let mut count = [1usize; 3];
                for a in 0..3 {
                    let (f, c) = self.footprint(a, uj[a], &mut w[a]);
                    first[a] = f;
                    count[a] = c;
                }
                // Grid offset of footprint cell t along each axis (wrapped).
                let mut offsets = [[0usize; KERNEL_WIDTH]; 3];
                let mut stride = 1;
                for a in 0..3 {
                    for (t, o) in offsets[a][..count[a]].iter_mut().enumerate() {
                        *o = (first[a] + t as i64).rem_euclid(g[a] as i64) as usize * stride;
                    }
                    stride *= g[a];
                }
                let mut sum = 0.0;
                for tz in 0..count[2] {
                    for ty in 0..count[1] {
                        let wyz = w[2][tz] * w[1][ty];
                        let row = offsets[2][tz] + offsets[1][ty];
                        for (o, wx) in offsets[0][..count[0]].iter().zip(&w[0]) {
                            sum += wyz * wx * grid[row + o];
                        }
                    }
                }
                sum
            }
        });
        Ok(out)
    }
}

/// Adds v·w_z·w_y·w_x to the footprint of one sample in a slab buffer whose
/// slab axis is `axis` (planes of `plane` elements), starting at plane `local`;
/// the lower axes wrap periodically (start indices `lower`).
#[allow(clippy::too_many_arguments)]
fn spread_one(
    buffer: &mut [Complex64],
    axis: usize,
    g: [usize; 3],
    plane: usize,
    local: usize,
    lower: [usize; 2],
    count: [usize; 3],
    w: &[[f64; KERNEL_WIDTH]; 3],
    v: Complex64,
) {
    // Buffer offset of footprint cell t along each axis: the lower axes wrap,
    // the slab axis is local to the buffer, higher axes have one cell.
    let mut offsets = [[0usize; KERNEL_WIDTH]; 3];
    let mut stride = 1;
    for a in 0..3 {
        for (t, o) in offsets[a][..count[a]].iter_mut().enumerate() {
            *o = match a.cmp(&axis) {
                std::cmp::Ordering::Less => ((lower[a] + t) % g[a]) * stride,
                std::cmp::Ordering::Equal => (local + t) * plane,
                std::cmp::Ordering::Greater => 0,
            };
        }
        stride *= g[a];
    }
    for t2 in 0..count[2] {
        for t1 in 0..count[1] {
            let w21 = v * (w[2][t2] * w[1][t1]);
            let row = offsets[2][t2] + offsets[1][t1];
            for (o, wx) in offsets[0][..count[0]].iter().zip(&w[0]) {
                buffer[row + o] += w21 * wx;
            }
        }
    }
}

/// The model of a plan as gridding sees it ([`Plan::gridding_model`]).
pub(super) struct GriddingModel<'a> {
    /// The phase model's coefficients (M per column).
    coefficients: &'a [f64],
    /// The dimensions of k, the column of k0 if any, the first column of k.
    columns: (usize, Option<usize>, usize),
    /// The voxel positions (N×3) and their lattice steps.
    positions: &'a [f64],
    steps: [[f64; 3]; 3],
}

/// The samples of a plan as gridding sees them.
struct GriddingSamples {
    /// u_{j,a} = k_j·step_a/2π reduced to [−½, ½) (0 for axes of one voxel).
    u: Vec<[f64; 3]>,
    /// e^{−i(k0_j + k_j·r_c)}.
    phase: Vec<Complex64>,
}

impl Plan {
    /// What gridding takes from a plan it accepts (see the module docs):
    /// the k-space coefficients, the dimensions of k, the column of k0 if
    /// any and the first column of k, the positions and their lattice steps;
    /// else the error naming what is missing or wrong.
    pub(super) fn gridding_model(&self) -> Result<GriddingModel<'_>> {
        let model = &self.model;
        let s = model.sizes;
        let phase = model.phase.as_ref().ok_or_else(|| {
            Error::incomplete(
                "gridding needs a phase model (horecon_set_trajectory or horecon_set_solid_harmonics)",
            )
        })?;
        // (ndims of k, column of k0 if any, first column of k)
        let (kdims, k0_column, k_column) = match &phase.basis {
            Basis::Trajectory(d) => (*d, None, 0),
            Basis::SolidHarmonics(t) => (if *t >= 4 { 3 } else { 0 }, Some(0), 1),
            Basis::User(_) => return Err(Error::invalid(
                "gridding needs a k-space trajectory (horecon_set_trajectory) or solid harmonics \
                     (their orders 0 and 1 are used); a user basis has no k-space positions",
            )),
        };
        let positions = model.require_positions("gridding")?;
        let steps = crate::model::grid::lattice_steps(s.dims, positions, "gridding")?;
        Ok(GriddingModel {
            coefficients: &phase.coefficients,
            columns: (kdims, k0_column, k_column),
            positions,
            steps,
        })
    }

    /// The geometry and samples of a plan gridding accepts (see the module docs).
    fn gridding_setup(&self) -> Result<(Geometry, GriddingSamples)> {
        let GriddingModel {
            coefficients,
            columns: (kdims, k0_column, k_column),
            positions,
            steps,
        } = self.gridding_model()?;
        let s = self.model.sizes;
        let m = s.samples;
        let n = s.voxels;
        let centre = s.dims[0] / 2 + s.dims[0] * (s.dims[1] / 2 + s.dims[1] * (s.dims[2] / 2));
        let r_c = [
            positions[centre],
            positions[n + centre],
            positions[2 * n + centre],
        ];
        let mut u = try_vec(m, [0.0f64; 3], "gridding sample positions (M x 3)")?;
        let mut phases = try_vec(m, Complex64::default(), "gridding sample phases (M)")?;
        u.par_iter_mut()
            .zip(phases.par_iter_mut())
            .enumerate()
            .for_each(|(j, (uj, pj))| {
                let mut k = [0.0; 3];
                for (d, kd) in k.iter_mut().enumerate().take(kdims) {
                    *kd = coefficients[(k_column + d) * m + j];
                }
                let k0 = k0_column.map_or(0.0, |c| coefficients[c * m + j]);
                let phi = k0 + k[0] * r_c[0] + k[1] * r_c[1] + k[2] * r_c[2];
                *pj = Complex64::from_polar(1.0, -phi);
                for a in 0..3 {
                    if s.dims[a] > 1 {
                        let cycles = (k[0] * steps[a][0] + k[1] * steps[a][1] + k[2] * steps[a][2])
                            / (2.0 * PI);
                        uj[a] = cycles - cycles.round();
                    }
                }
            });
        let geometry = Geometry::new(
            s.dims,
            Kernel::new(KERNEL_WIDTH, OVERSAMPLING),
            OVERSAMPLING,
        );
        Ok((geometry, GriddingSamples { u, phase: phases }))
    }

    /// The type-1 NUFFT of the module docs for the samples at `u` (cycles
    /// per voxel), one transform per coil, on the plan's backend and threads.
    fn gridding_nufft(&self, u: &[[f64; 3]]) -> Result<Nufft> {
        let s = self.sizes();
        let m = s.samples;
        let modes = Modes::new(3, &s.dims.map(|d| d as i64))?;
        let double = self.options.precision == Precision::Double;
        let spec = NufftSpec::new(
            NufftType::One,
            modes,
            -1,
            NUFFT_TOLERANCE,
            i32::try_from(s.coils).map_err(|_| {
                Error::invalid(format!("{} coils are too many for gridding", s.coils))
            })?,
            double,
            Some(choose_upsampling(&modes, m, NUFFT_TOLERANCE, double)),
        )?;
        let mut points = try_vec(3 * m, 0.0f64, "gridding NUFFT points (M x 3)")?;
        for (j, uj) in u.iter().enumerate() {
            for a in 0..3 {
                points[a * m + j] = 2.0 * PI * uj[a];
            }
        }
        Nufft::with_spec(spec, &points, m, &self.options, Some(self.pool.clone()))
    }

    /// Pipe–Menon density compensation (M weights, see the module docs) for
    /// this plan's trajectory, scaled so that gridding the exact data of the
    /// uniform object gives 1 at the centre voxel.
    pub fn pipe_menon_dcf(&self) -> Result<Vec<f32>> {
        self.run(super::Call::Gridding, || {
            let (geometry, samples) = self.on_pool(|| self.gridding_setup())?;
            let w = Progress::current().install(&self.pool, || {
                pipe_menon(&geometry, &samples.u, PIPE_MENON_ITERATIONS)
            })?;
            let mut out = try_vec(w.len(), 0.0f32, "density compensation (M)")?;
            out.iter_mut().zip(&w).for_each(|(o, &v)| *o = v as f32);
            Ok(out)
        })
    }

    /// The gridding reconstruction (module docs): Kaiser–Bessel gridding of
    /// w ⊙ d, FFT, deapodization, coil combination with Sᴴ (normalised by
    /// Σ_c|S_c|²) or root-sum-of-squares without sensitivities. `dcf` M
    /// non-negative weights or `None` for [`Plan::pipe_menon_dcf`]; `data` M×L;
    /// `image` N, written only on success.
    pub fn gridding(
        &self,
        data: &[Complex32],
        dcf: Option<&[f32]>,
        image: &mut [Complex32],
    ) -> Result<()> {
        let s = self.sizes();
        expect_len("data", data.len(), s.samples * s.coils, "M x L")?;
        expect_len("image", image.len(), s.voxels, "N = nx*ny*nz")?;
        check_finite("data", data)?;
        if let Some(w) = dcf {
            expect_len("dcf", w.len(), s.samples, "M")?;
            check_finite("dcf", w)?;
            if let Some(i) = w.iter().position(|&v| v < 0.0) {
                return Err(Error::invalid(format!("dcf[{i}] = {} is negative", w[i])));
            }
        }
        self.run(super::Call::Gridding, || {
            self.gridding_inner(data, dcf, image)
        })
    }

    fn gridding_inner(
        &self,
        data: &[Complex32],
        dcf: Option<&[f32]>,
        image: &mut [Complex32],
    ) -> Result<()> {
        let s = self.sizes();
        let (geometry, samples) = self.on_pool(|| self.gridding_setup())?;
        let sensitivities = self.model.sensitivities.as_deref();
        // Progress: Pipe–Menon's weights (when computed) the first half, then one share per coil.
        let progress = Progress::current();
        let (weights_part, coils_part) = match dcf {
            Some(_) => (progress.part(0.0, 0.0), progress.clone()),
            None => (progress.part(0.0, 0.5), progress.part(0.5, 1.0)),
        };
        let out = Progress::current().install(&self.pool, || -> Result<Vec<Complex32>> {
            let weights: Vec<f64> = match dcf {
                Some(w) => {
                    let mut out = try_vec(w.len(), 0.0f64, "density compensation (M)")?;
                    out.iter_mut().zip(w).for_each(|(o, &v)| *o = v as f64);
                    out
                }
                None => weights_part
                    .enter(|| pipe_menon(&geometry, &samples.u, PIPE_MENON_ITERATIONS))?,
            };
            let (m, n, coils) = (s.samples, s.voxels, s.coils);
            // ρ̂_c for every coil: one type-1 NUFFT (module documentation).
            let nufft = self.gridding_nufft(&samples.u)?;
            let mut values = try_vec(m * coils, Complex64::default(), "gridding values (M x L)")?;
            values
                .par_chunks_mut(m.max(1))
                .enumerate()
                .for_each(|(c, row)| {
                    for (j, v) in row.iter_mut().enumerate() {
                        let d = data[c * m + j];
                        *v = Complex64::new(d.re as f64, d.im as f64)
                            * samples.phase[j]
                            * weights[j];
                    }
                });
            let mut images = try_vec(
                n * coils,
                Complex64::default(),
                "gridding coil images (N x L)",
            )?;
            coils_part.check(0.0)?;
            nufft.execute_c64(&mut values, &mut images)?;
            drop(values);
            let mut numerator = try_vec(n, Complex64::default(), "gridding image (N)")?;
            let mut denominator = try_vec(n, 0.0f64, "gridding coil normalisation (N)")?;
            for (c, coil_image) in images.chunks_exact(n.max(1)).enumerate() {
                coils_part.check(c as f64 / coils as f64)?;
                match sensitivities {
                    Some(sens) => numerator
                        .par_iter_mut()
                        .zip(denominator.par_iter_mut())
                        .enumerate()
                        .for_each(|(v, (num, den))| {
                            let sc = sens[c * n + v];
                            let sc = Complex64::new(sc.re as f64, sc.im as f64);
                            *num += sc.conj() * coil_image[v];
                            *den += sc.norm_sqr();
                        }),
                    None => numerator
                        .par_iter_mut()
                        .zip(coil_image)
                        .for_each(|(num, x)| {
                            if coils == 1 {
                                *num = *x;
                            } else {
                                num.re += x.norm_sqr();
                            }
                        }),
                }
            }
            let mut out = try_vec(n, Complex32::default(), "gridding image (N)")?;
            out.par_iter_mut()
                .zip(numerator.par_iter().zip(&denominator))
                .for_each(|(o, (num, &den))| {
                    let v = match sensitivities {
                        Some(_) if den > 0.0 => num / den,
                        Some(_) => Complex64::default(),
                        None if s.coils > 1 => Complex64::new(num.re.sqrt(), 0.0),
                        None => *num,
                    };
                    *o = Complex32::new(v.re as f32, v.im as f32);
                });
            Ok(out)
        })?;
        image.copy_from_slice(&out);
        Ok(())
    }
}

/// Pipe–Menon iterations w ← w / (C Cᵀ w) from w = 1, then the scale of the
/// module docs (centre voxel of the uniform object = 1).
fn pipe_menon(geometry: &Geometry, u: &[[f64; 3]], iterations: usize) -> Result<Vec<f64>> {
    let m = u.len();
    let mut w = try_vec(m, 1.0f64, "density compensation (M)")?;
    let mut values = try_vec(m, Complex64::default(), "density compensation values (M)")?;
    let mut real = try_vec(
        geometry.grid_len(),
        0.0f64,
        "density compensation grid (oversampled)",
    )?;
    let progress = Progress::current();
    for i in 0..iterations {
        progress.check(i as f64 / iterations as f64)?;
        values
            .par_iter_mut()
            .zip(&w)
            .for_each(|(v, &wj)| *v = Complex64::new(wj, 0.0));
        let grid = geometry.spread(u, &values)?;
        real.par_iter_mut().zip(&grid).for_each(|(r, g)| *r = g.re);
        drop(grid);
        let convolved = geometry.interpolate(u, &real)?;
        w.par_iter_mut().zip(&convolved).for_each(|(wj, &c)| {
            *wj = if c > 0.0 { *wj / c } else { 0.0 };
        });
    }
    // Scale: Re Σ_j w_j Π_a D_a(u_{j,a}) = 1 (the uniform object's centre voxel).
    let d = geometry.dims;
    let centre_value: f64 = u
        .par_iter()
        .zip(&w)
        .map(|(uj, &wj)| {
            let mut product = Complex64::new(wj, 0.0);
            for a in 0..3 {
                if d[a] > 1 {
                    product *= dirichlet(d[a], uj[a]);
                }
            }
            product.re
        })
        .sum();
    if !(centre_value.is_finite() && centre_value > 0.0) {
        return Err(Error::invalid(
            "the Pipe-Menon density compensation failed: the trajectory does not sample the \
             centre of k-space (pass a dcf)",
        ));
    }
    w.par_iter_mut().for_each(|wj| *wj /= centre_value);
    Ok(w)
}

/// D(u) = Σ_{i'} e^{2πi u i'} over the offsets i' = −⌊n/2⌋ … n − 1 − ⌊n/2⌋.
fn dirichlet(n: usize, u: f64) -> Complex64 {
    let first = -((n / 2) as i64);
    (0..n as i64)
        .map(|i| Complex64::from_polar(1.0, 2.0 * PI * u * (first + i) as f64))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_table_matches_the_kernel() {
        let kernel = Kernel::new(KERNEL_WIDTH, OVERSAMPLING);
        for x in [0.0, 0.3, 1.7, 2.9, 2.9999] {
            let err = (kernel.value(x) - kernel.exact(x)).abs() / kernel.exact(0.0);
            assert!(err < 1e-7, "table at {x}: {err:e}");
        }
        assert_eq!(kernel.value(3.0001), 0.0);
    }

    #[test]
    fn bessel_i0_values() {
        // Abramowitz & Stegun table 9.8: I0(1) = 1.2660658778, I0(10)·e^-10 = 0.1278333372.
        assert!((bessel_i0(1.0) - 1.266_065_877_752_008_4).abs() < 1e-14);
        assert!((bessel_i0(10.0) * (-10.0f64).exp() - 0.127_833_337_163).abs() < 1e-11);
    }
}
