//! Adaptive coil combination (Walsh, Gmitro & Marcellin, MRM 43:682, 2000):
//! the quick estimate of coil sensitivities from coil images.
//!
//! At each reference voxel the signal correlation over a window,
//!
//! $$R_{ab}(\mathbf r) = \sum_{\mathbf r' \in \mathrm{window}(\mathbf r)} m_a(\mathbf r')\,\overline{m_b(\mathbf r')},$$
//!
//! has the (relative) sensitivities as its dominant eigenvector; the map is
//! that unit vector with its phase fixed by the virtual body coil (the
//! dominant eigenvector of Σ_r R(r)), then interpolated (trilinearly) onto
//! the reconstruction's positions and renormalised to unit norm.

use super::linalg::{coil_pair, dominant_eigenpair, fix_phase, pair_index, principal_direction};
use super::reference::{check_reference_array, ReferenceGrid};
use super::Target;
use crate::error::{try_vec, Error, Result};
use num_complex::Complex32;
use rayon::prelude::*;

/// Box sums of width `window` (clipped at the edges) along every axis of
/// more than one voxel, in place on an n0×n1×n2 array.
fn box_filter(values: &mut [Complex32], dims: [usize; 3], window: usize) {
    let half = window / 2;
    let strides = [1, dims[0], dims[0] * dims[1]];
    let mut line = Vec::new();
    for a in 0..3 {
        let len = dims[a];
        if len == 1 {
            continue;
        }
        let lines = values.len() / len;
        for l in 0..lines {
            // The start of line l along axis a.
            let outer = l / strides[a];
            let inner = l % strides[a];
            let base = outer * strides[a] * len + inner;
            line.clear();
            line.extend((0..len).map(|i| values[base + i * strides[a]]));
            let mut prefix = Vec::with_capacity(len + 1);
            prefix.push(Complex32::default());
            for v in &line {
                let last = *prefix.last().unwrap_or(&Complex32::default());
                prefix.push(last + v);
            }
            for i in 0..len {
                let lo = i.saturating_sub(half);
                let hi = (i + half + 1).min(len);
                values[base + i * strides[a]] = prefix[hi] - prefix[lo];
            }
        }
    }
}

/// Walsh maps at `target` from coil images (N_ref×L) on the reference grid.
pub fn walsh(
    grid: &ReferenceGrid,
    images: &[Complex32],
    coils: usize,
    window: usize,
    target: &Target<'_>,
) -> Result<Vec<Complex32>> {
    if !(1..=64).contains(&window) {
        return Err(Error::invalid(format!(
            "window must be 1..64, got {window}"
        )));
    }
    check_reference_array("images", images, grid, coils, "reference nx*ny*nz x ncoils")?;
    let n = grid.voxels();
    let pairs = coils * (coils + 1) / 2;
    let mut correlation = try_vec(n * pairs, Complex32::default(), "signal correlations")?;
    correlation
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(e, out)| {
            let (a, b) = coil_pair(e);
            for (v, o) in out.iter_mut().enumerate() {
                *o = images[a * n + v] * images[b * n + v].conj();
            }
            box_filter(out, grid.dims, window);
        });
    let entry = |a: usize, b: usize, v: usize| {
        if a <= b {
            correlation[pair_index(a, b) * n + v]
        } else {
            correlation[pair_index(b, a) * n + v].conj()
        }
    };
    let mut total = vec![Complex32::default(); coils * coils];
    for b in 0..coils {
        for a in 0..coils {
            total[a + coils * b] = (0..n).map(|v| entry(a, b, v)).sum();
        }
    }
    let body = principal_direction(&total, coils);
    // Dominant eigenvectors per x-line (warm-started along the line).
    let mut maps = try_vec(n * coils, Complex32::default(), "reference maps")?;
    let lines: Vec<Vec<Complex32>> = (0..n / grid.dims[0])
        .into_par_iter()
        .map(|line| {
            let mut matrix = vec![Complex32::default(); coils * coils];
            let mut v = vec![Complex32::default(); coils];
            let mut w = vec![Complex32::default(); coils];
            let mut out = Vec::with_capacity(grid.dims[0] * coils);
            for x in 0..grid.dims[0] {
                let voxel = line * grid.dims[0] + x;
                for b in 0..coils {
                    for a in 0..coils {
                        matrix[a + coils * b] = entry(a, b, voxel);
                    }
                }
                dominant_eigenpair(&matrix, &mut v, &mut w);
                let mut s = v.clone();
                fix_phase(&mut s, &body);
                out.extend(s);
            }
            out
        })
        .collect();
    for (line, values) in lines.iter().enumerate() {
        for x in 0..grid.dims[0] {
            for c in 0..coils {
                maps[c * n + line * grid.dims[0] + x] = values[x * coils + c];
            }
        }
    }
    let mut out = grid.interpolate(&maps, coils, target.positions)?;
    let points = target.voxels();
    for v in 0..points {
        let norm = (0..coils)
            .map(|c| out[c * points + v].norm_sqr())
            .sum::<f32>()
            .sqrt();
        if norm > 0.0 {
            (0..coils).for_each(|c| out[c * points + v] /= norm);
        }
    }
    Ok(out)
}
