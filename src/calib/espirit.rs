//! ESPIRiT coil sensitivities (Uecker et al., MRM 71:990, 2014).
//!
//! 1. **Calibration matrix** A: every k^d patch of the central calibration
//!    region (c^d samples of the reference k-space, d = 2 or 3) across all
//!    L coils is a row, columns (o, c) with o the offset in the patch.
//! 2. **SVD with a threshold**: the right singular vectors V_∥ with
//!    σ_i ≥ threshold·σ_1 span the signal subspace (from the eigen-decomposition
//!    of AᴴA by faer); the patches (rows of A) lie in conj(span V_∥), whose
//!    projector is P = conj(V_∥V_∥ᴴ).
//! 3. **Image space**: averaging the patch projection over all shifts,
//!    W = (1/k^d) Σ_x R_xᴴ P R_x, is a convolution in k-space,
//!    (Wy)_a(u) = Σ_{b,δ} K_ab(δ) y_b(u + δ), K_ab(δ) = (1/k^d) Σ_o P[(o,a),(o+δ,b)],
//!    and with y(p) = Σ_n m(r_n)·e^{+ik_p·r} (MODEL.md's sign) a pointwise
//!    L×L matrix in image space,
//!    $$G_{ab}(\mathbf r) = \sum_\delta K_{ab}(\delta)\, e^{+2\pi i \sum_a \delta_a r_a / \mathrm{fov}_a},$$
//!    a trigonometric polynomial of r: it is evaluated exactly at the
//!    reconstruction's positions (any field of view, centre or resolution;
//!    separably when they form an axis-aligned grid).
//! 4. **Eigen-decomposition**: the coil maps satisfy G(r)s(r) = s(r); the
//!    dominant eigenvector of G(r) is the map (unit norm, Σ_c|s_c|² = 1),
//!    set to zero where the eigenvalue is below `crop` (outside the object),
//!    its phase fixed so that wᴴs(r) is real positive for the dominant coil
//!    combination w of the calibration data (a virtual body coil).

use super::linalg::{
    coil_pair, dominant_eigenpair, fix_phase, gram_lower, hermitian_eigen_descending, pair_index,
};
use super::reference::{check_reference_array, ReferenceGrid};
use super::Target;
use crate::error::{try_vec, Error, Result};
use faer::{Accum, Mat, MatRef, Par};
use num_complex::Complex32;
use rayon::prelude::*;
use std::f64::consts::TAU;

/// ESPIRiT settings (the defaults of BART's `ecalib`, kernel 6, calibration 24).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EspiritOptions {
    /// Kernel width k along every axis of more than one voxel.
    pub kernel: usize,
    /// Calibration region width c (the central c samples per axis, at most the grid).
    pub calibration: usize,
    /// Singular values σ_i ≥ threshold·σ_1 span the signal subspace.
    pub threshold: f64,
    /// Maps are zero where G's largest eigenvalue is below this.
    pub crop: f64,
}

impl Default for EspiritOptions {
    fn default() -> Self {
        EspiritOptions {
            kernel: 6,
            calibration: 24,
            threshold: 0.02,
            crop: 0.8,
        }
    }
}

/// Maps N×L at the target positions, the largest eigenvalue N, and the
/// dimension of the signal subspace.
pub struct EspiritResult {
    pub maps: Vec<Complex32>,
    pub eigenvalues: Vec<f32>,
    pub rank: usize,
}

/// Columns of the calibration matrix above which we refuse (memory, time).
const MAX_COLUMNS: usize = 16384;

/// The image-space kernel K_ab(δ) for the coil pairs a ≤ b: pairs×offsets,
/// offsets δ_a ∈ [−(k_a−1), k_a−1] with δ_0 fastest.
struct ImageKernel {
    coils: usize,
    /// 2k_a − 1 per axis.
    widths: [usize; 3],
    /// Per pair (a ≤ b, a fastest within b… see `pair`), `offsets` values.
    values: Vec<Complex32>,
}

fn check_options(options: &EspiritOptions) -> Result<()> {
    if !(2..=16).contains(&options.kernel) {
        return Err(Error::invalid(format!(
            "kernel must be 2..16, got {}",
            options.kernel
        )));
    }
    if !(options.threshold.is_finite() && options.threshold > 0.0 && options.threshold < 1.0) {
        return Err(Error::invalid(format!(
            "threshold must be in (0, 1), got {}",
            options.threshold
        )));
    }
    if !(options.crop.is_finite() && (0.0..1.0).contains(&options.crop)) {
        return Err(Error::invalid(format!(
            "crop must be in [0, 1), got {}",
            options.crop
        )));
    }
    Ok(())
}

/// ESPIRiT maps at `target` from the reference k-space (N_ref×L).
pub fn espirit(
    grid: &ReferenceGrid,
    kspace: &[Complex32],
    coils: usize,
    options: &EspiritOptions,
    target: &Target<'_>,
) -> Result<EspiritResult> {
    check_options(options)?;
    check_reference_array("kspace", kspace, grid, coils, "reference nx*ny*nz x ncoils")?;
    // The calibration region and kernel per axis.
    let mut region = [1usize; 3];
    let mut kernel = [1usize; 3];
    let mut start = [0usize; 3];
    for a in 0..3 {
        let n = grid.dims[a];
        if n > 1 {
            region[a] = options.calibration.min(n);
            kernel[a] = options.kernel;
            if region[a] < kernel[a] {
                return Err(Error::invalid(format!(
                    "the calibration region ({} samples along axis {a}: calibration {} within a \
                     reference of {n}) is smaller than the kernel ({})",
                    region[a], options.calibration, options.kernel
                )));
            }
            start[a] = n / 2 - region[a] / 2;
        }
    }
    let patch: usize = kernel.iter().product();
    let columns = patch * coils;
    if columns > MAX_COLUMNS {
        return Err(Error::invalid(format!(
            "kernel^d x ncoils = {columns} columns of the calibration matrix exceed {MAX_COLUMNS}: \
             use a smaller kernel or compress the coils"
        )));
    }
    let positions = [0, 1, 2].map(|a| region[a] - kernel[a] + 1);
    let rows: usize = positions.iter().product();
    let n = grid.voxels();
    let at = |c: usize, p: [usize; 3]| {
        kspace[c * n + p[0] + grid.dims[0] * (p[1] + grid.dims[1] * p[2])]
    };
    if (0..coils).all(|c| {
        (0..region[2]).all(|z| {
            (0..region[1]).all(|y| {
                (0..region[0]).all(|x| {
                    at(c, [start[0] + x, start[1] + y, start[2] + z]) == Complex32::default()
                })
            })
        })
    }) {
        return Err(Error::invalid(
            "the calibration region of kspace is all zero: there is nothing to calibrate from",
        ));
    }
    // 1. The calibration matrix (rows × columns, column major).
    let mut storage = try_vec(rows * columns, Complex32::default(), "calibration matrix")?;
    storage
        .par_chunks_mut(rows)
        .enumerate()
        .for_each(|(column, out)| {
            let (o, c) = (column % patch, column / patch);
            let o = [
                o % kernel[0],
                (o / kernel[0]) % kernel[1],
                o / (kernel[0] * kernel[1]),
            ];
            for (row, v) in out.iter_mut().enumerate() {
                let x = [
                    row % positions[0],
                    (row / positions[0]) % positions[1],
                    row / (positions[0] * positions[1]),
                ];
                *v = at(c, [0, 1, 2].map(|a| start[a] + x[a] + o[a]));
            }
        });
    let a = MatRef::from_column_major_slice(&storage, rows, columns);
    // 2. The signal subspace from AᴴA = V Σ² Vᴴ.
    let gram = gram_lower(a)?;
    drop(storage);
    let (values, vectors) = hermitian_eigen_descending(gram.as_ref())?;
    drop(gram);
    let top = values[0].max(0.0) as f64;
    let rank = values
        .iter()
        .take_while(|&&s| s as f64 >= options.threshold * options.threshold * top)
        .count()
        .max(1);
    let projector = projector(vectors.as_ref(), rank)?;
    // 3. K_ab(δ) from P.
    let kernel_image = image_kernel(&projector, kernel, coils)?;
    drop(projector);
    // The virtual body coil: dominant direction of the calibration data's coil covariance.
    let mut covariance = vec![Complex32::default(); coils * coils];
    for z in 0..region[2] {
        for y in 0..region[1] {
            for x in 0..region[0] {
                let p = [start[0] + x, start[1] + y, start[2] + z];
                for b in 0..coils {
                    let yb = at(b, p).conj();
                    for c in 0..coils {
                        covariance[c + coils * b] += at(c, p) * yb;
                    }
                }
            }
        }
    }
    let body = super::linalg::principal_direction(&covariance, coils);
    // 4. G(r) at the targets and its dominant eigenpairs.
    let (maps, eigenvalues) = evaluate(grid, &kernel_image, target, options.crop, &body)?;
    Ok(EspiritResult {
        maps,
        eigenvalues,
        rank,
    })
}

/// P = V_r V_rᴴ (or I − V_⊥V_⊥ᴴ when that is cheaper), full.
fn projector(vectors: MatRef<'_, Complex32>, rank: usize) -> Result<Mat<Complex32>> {
    let n = vectors.nrows();
    let (basis, complement) = if rank <= n / 2 {
        (vectors.subcols(0, rank), false)
    } else {
        (vectors.subcols(rank, n - rank), true)
    };
    let mut storage = try_vec(n * n, Complex32::default(), "signal-subspace projector")?;
    let mut p = faer::MatMut::from_column_major_slice_mut(&mut storage, n, n);
    faer::linalg::matmul::matmul(
        p.as_mut(),
        Accum::Replace,
        basis,
        basis.adjoint(),
        Complex32::new(if complement { -1.0 } else { 1.0 }, 0.0),
        Par::rayon(0),
    );
    if complement {
        for i in 0..n {
            p[(i, i)] += Complex32::new(1.0, 0.0);
        }
    }
    Ok(p.to_owned())
}

/// K_ab(δ) = (1/k^d) Σ_o P[(o,a),(o+δ,b)] for a ≤ b, with P the projector
/// onto the span of the patches themselves: the rows of A are patches, so
/// that span is conj(span V_∥) and the projector conj(V_∥V_∥ᴴ).
fn image_kernel(p: &Mat<Complex32>, kernel: [usize; 3], coils: usize) -> Result<ImageKernel> {
    let patch: usize = kernel.iter().product();
    let widths = kernel.map(|k| 2 * k - 1);
    let offsets: usize = widths.iter().product();
    let pairs = coils * (coils + 1) / 2;
    let mut values = try_vec(
        pairs * offsets,
        Complex32::default(),
        "ESPIRiT image kernel",
    )?;
    let scale = 1.0 / patch as f32;
    let split = |o: usize| {
        [
            o % kernel[0],
            (o / kernel[0]) % kernel[1],
            o / (kernel[0] * kernel[1]),
        ]
    };
    values
        .par_chunks_mut(offsets)
        .enumerate()
        .for_each(|(e, out)| {
            let (a, b) = coil_pair(e);
            for o in 0..patch {
                let oi = split(o);
                for o2 in 0..patch {
                    let oj = split(o2);
                    let d = [0, 1, 2].map(|x| oj[x] + kernel[x] - 1 - oi[x]);
                    let index = d[0] + widths[0] * (d[1] + widths[1] * d[2]);
                    out[index] += p[(o + patch * a, o2 + patch * b)].conj() * scale;
                }
            }
        });
    Ok(ImageKernel {
        coils,
        widths,
        values,
    })
}

/// e^{+2πiδ·x/fov} for δ ∈ [−(k−1), k−1] (rows) at the coordinates `xs` (columns, fastest).
fn axis_factors(width: usize, fov: f64, xs: &[f64]) -> Vec<Complex32> {
    let half = (width / 2) as f64;
    let mut out = Vec::with_capacity(width * xs.len());
    for d in 0..width {
        let delta = d as f64 - half;
        for &x in xs {
            let (s, c) = (TAU * delta * x / fov).sin_cos();
            out.push(Complex32::new(c as f32, s as f32));
        }
    }
    out
}

/// A block of target voxels: coordinates per axis (a grid block, or one point).
struct Block {
    xs: [Vec<f64>; 3],
    /// The target voxel index of each block point (x fastest).
    voxels: Vec<usize>,
}

/// The blocks of the target: rows of an axis-aligned lattice (≤ 64 rows per
/// block), or single points.
fn blocks(target: &Target<'_>) -> Vec<Block> {
    let n = target.voxels();
    match target.axis_grid() {
        Some((dims, coordinates)) => {
            let rows_per_block = 64usize;
            let mut out = Vec::new();
            for z in 0..dims[2] {
                let mut y0 = 0;
                while y0 < dims[1] {
                    let y1 = (y0 + rows_per_block).min(dims[1]);
                    let voxels = (y0..y1)
                        .flat_map(|y| (0..dims[0]).map(move |x| x + dims[0] * (y + dims[1] * z)))
                        .collect();
                    out.push(Block {
                        xs: [
                            coordinates[0].clone(),
                            coordinates[1][y0..y1].to_vec(),
                            vec![coordinates[2][z]],
                        ],
                        voxels,
                    });
                    y0 = y1;
                }
            }
            out
        }
        None => (0..n)
            .map(|v| Block {
                xs: [0, 1, 2].map(|a| vec![target.positions[a * n + v]]),
                voxels: vec![v],
            })
            .collect(),
    }
}

/// One voxel's result: its index, the largest eigenvalue and the map (L).
type VoxelMap = (usize, f32, Vec<Complex32>);

/// G(r) at every target voxel (separable contraction per block), its
/// dominant eigenpairs, the crop and the phase fix.
fn evaluate(
    grid: &ReferenceGrid,
    k: &ImageKernel,
    target: &Target<'_>,
    crop: f64,
    body: &[Complex32],
) -> Result<(Vec<Complex32>, Vec<f32>)> {
    let n = target.voxels();
    let coils = k.coils;
    let pairs = coils * (coils + 1) / 2;
    let [w0, w1, w2] = k.widths;
    let mut maps = try_vec(n * coils, Complex32::default(), "coil maps (N x L)")?;
    let mut eigenvalues = try_vec(n, 0.0f32, "eigenvalues (N)")?;
    let results: Vec<Result<Vec<VoxelMap>>> = blocks(target)
        .into_par_iter()
        .map(|block| {
            let [nx, ny, nz] = [0, 1, 2].map(|a| block.xs[a].len());
            debug_assert_eq!(nz, 1);
            let ex = axis_factors(w0, grid.fov[0], &block.xs[0]);
            let ey = axis_factors(w1, grid.fov[1], &block.xs[1]);
            let ez = axis_factors(w2, grid.fov[2], &block.xs[2]);
            let points = nx * ny;
            // G as separate real and imaginary planes: pairs × points.
            let mut g_re = try_vec(pairs * points, 0.0f32, "ESPIRiT G (block)")?;
            let mut g_im = try_vec(pairs * points, 0.0f32, "ESPIRiT G (block)")?;
            let mut hz = vec![Complex32::default(); w0 * w1];
            let mut hy = vec![Complex32::default(); w0 * ny];
            let (ex_re, ex_im): (Vec<f32>, Vec<f32>) = ex.iter().map(|c| (c.re, c.im)).unzip();
            for e in 0..pairs {
                let kv = &k.values[e * w0 * w1 * w2..(e + 1) * w0 * w1 * w2];
                // z: hz[δx, δy] = Σ_δz K[δx, δy, δz]·ez[δz].
                for (i, h) in hz.iter_mut().enumerate() {
                    *h = (0..w2).map(|dz| kv[i + w0 * w1 * dz] * ez[dz]).sum();
                }
                // y: hy[δx, y] = Σ_δy hz[δx, δy]·ey[δy, y].
                for y in 0..ny {
                    for dx in 0..w0 {
                        hy[dx + w0 * y] =
                            (0..w1).map(|dy| hz[dx + w0 * dy] * ey[dy * ny + y]).sum();
                    }
                }
                // x: G[x, y] = Σ_δx hy[δx, y]·ex[δx, x].
                let out_re = &mut g_re[e * points..(e + 1) * points];
                let out_im = &mut g_im[e * points..(e + 1) * points];
                for y in 0..ny {
                    let row_re = &mut out_re[y * nx..(y + 1) * nx];
                    let row_im = &mut out_im[y * nx..(y + 1) * nx];
                    for dx in 0..w0 {
                        let c = hy[dx + w0 * y];
                        let fr = &ex_re[dx * nx..(dx + 1) * nx];
                        let fi = &ex_im[dx * nx..(dx + 1) * nx];
                        for x in 0..nx {
                            row_re[x] += c.re * fr[x] - c.im * fi[x];
                            row_im[x] += c.re * fi[x] + c.im * fr[x];
                        }
                    }
                }
            }
            let mut matrix = vec![Complex32::default(); coils * coils];
            let mut v = vec![Complex32::default(); coils];
            let mut w = vec![Complex32::default(); coils];
            let mut out = Vec::with_capacity(points);
            for (q, &voxel) in block.voxels.iter().enumerate() {
                for b in 0..coils {
                    for a in 0..=b {
                        let e = pair_index(a, b);
                        let value = Complex32::new(g_re[e * points + q], g_im[e * points + q]);
                        matrix[a + coils * b] = value;
                        matrix[b + coils * a] = value.conj();
                    }
                }
                let lambda = dominant_eigenpair(&matrix, &mut v, &mut w);
                let mut s = v.clone();
                if (lambda as f64) < crop {
                    s.fill(Complex32::default());
                } else {
                    fix_phase(&mut s, body);
                }
                out.push((voxel, lambda, s));
            }
            Ok(out)
        })
        .collect();
    for block in results {
        for (voxel, lambda, s) in block? {
            eigenvalues[voxel] = lambda;
            for (c, value) in s.into_iter().enumerate() {
                maps[c * n + voxel] = value;
            }
        }
    }
    Ok((maps, eigenvalues))
}
