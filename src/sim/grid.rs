//! A refined grid for simulating data without the inverse crime, and the
//! block average that brings a refined image back to the reconstruction grid.
//!
//! Coarse voxel I of an axis with n voxels sits at c + (I − ⌊n/2⌋)·Δ
//! (MODEL.md's grid); its f sub-voxels sit symmetrically around it at
//! c + (I − ⌊n/2⌋)·Δ + ((s + ½)/f − ½)·Δ, s = 0..f, fine index I·f + s.
//! Singleton axes are not refined.

use crate::error::{Error, Result};
use num_complex::Complex32;

fn refined_dims(dims: [usize; 3], factor: usize) -> [usize; 3] {
    dims.map(|d| if d > 1 { d * factor } else { 1 })
}

/// Checks `dims` and `factor`; the refined grid's dimensions (at most 2^30 points).
pub fn refined_dims_checked(dims: [usize; 3], factor: usize) -> Result<[usize; 3]> {
    if !(1..=16).contains(&factor) {
        return Err(Error::invalid(format!(
            "factor must be 1..16, got {factor}"
        )));
    }
    if dims.contains(&0) {
        return Err(Error::invalid(format!("dims must be >= 1, got {dims:?}")));
    }
    let fine = refined_dims(dims, factor);
    fine.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&v| v <= 1 << 30)
        .ok_or_else(|| Error::invalid(format!("the refined grid {fine:?} is too large")))?;
    Ok(fine)
}

/// The refined grid's dimensions and positions (N_fine×3, first index fastest).
pub fn refined_grid(
    dims: [usize; 3],
    fov: [f64; 3],
    center: [f64; 3],
    factor: usize,
) -> Result<([usize; 3], Vec<f64>)> {
    let fine = refined_dims_checked(dims, factor)?;
    crate::model::check_finite("fov", &fov)?;
    crate::model::check_finite("center", &center)?;
    let n: usize = fine.iter().product();
    let mut positions = crate::error::try_vec(3 * n, 0.0, "refined positions")?;
    let axis = |a: usize, i: usize| -> f64 {
        if dims[a] == 1 {
            return center[a];
        }
        let delta = fov[a] / dims[a] as f64;
        let (coarse, sub) = (i / factor, i % factor);
        center[a]
            + (coarse as f64 - (dims[a] / 2) as f64) * delta
            + ((sub as f64 + 0.5) / factor as f64 - 0.5) * delta
    };
    let progress = crate::progress::Progress::current();
    for iz in 0..fine[2] {
        progress.check(iz as f64 / fine[2] as f64)?;
        for iy in 0..fine[1] {
            for ix in 0..fine[0] {
                let v = ix + fine[0] * (iy + fine[1] * iz);
                positions[v] = axis(0, ix);
                positions[n + v] = axis(1, iy);
                positions[2 * n + v] = axis(2, iz);
            }
        }
    }
    Ok((fine, positions))
}

/// Averages each block of sub-voxels of a refined image onto the coarse grid `dims`.
pub fn block_average(
    fine: &[Complex32],
    dims: [usize; 3],
    factor: usize,
) -> Result<Vec<Complex32>> {
    let fd = refined_dims_checked(dims, factor)?;
    let expected: usize = fd.iter().product();
    if fine.len() != expected {
        return Err(Error::size(format!(
            "the refined image has {} elements, expected {expected} ({fd:?})",
            fine.len()
        )));
    }
    let n: usize = dims.iter().product();
    let mut out = crate::error::try_vec(n, Complex32::default(), "block average (N)")?;
    let per_block = (expected / n) as f32;
    let progress = crate::progress::Progress::current();
    for iz in 0..fd[2] {
        progress.check(iz as f64 / fd[2] as f64)?;
        for iy in 0..fd[1] {
            for ix in 0..fd[0] {
                let coarse = |a: usize, i: usize| if dims[a] > 1 { i / factor } else { 0 };
                let (cx, cy, cz) = (coarse(0, ix), coarse(1, iy), coarse(2, iz));
                out[cx + dims[0] * (cy + dims[1] * cz)] +=
                    fine[ix + fd[0] * (iy + fd[1] * iz)] / per_block;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refined_grid_averages_back_to_the_coarse_grid() {
        let (dims, fov, center) = ([4, 5, 1], [0.2, 0.25, 0.005], [0.01, -0.02, 0.03]);
        let (fine, p) = refined_grid(dims, fov, center, 2).unwrap();
        assert_eq!(fine, [8, 10, 1]);
        let nf = 80;
        let coarse = crate::model::grid::grid_positions(dims, fov, center).unwrap();
        // The mean of each block's positions is the coarse position.
        for a in 0..3 {
            let values: Vec<Complex32> = p[a * nf..(a + 1) * nf]
                .iter()
                .map(|&v| Complex32::new(v as f32, 0.0))
                .collect();
            let avg = block_average(&values, dims, 2).unwrap();
            for (i, v) in avg.iter().enumerate() {
                assert!(
                    (v.re as f64 - coarse[a * 20 + i]).abs() < 1e-7,
                    "axis {a} voxel {i}"
                );
            }
        }
        // Sub-voxel spacing is Δ/2.
        assert!((p[1] - p[0] - 0.025).abs() < 1e-12);
        assert!(block_average(&[Complex32::default(); 7], dims, 2).is_err());
        assert!(refined_grid(dims, fov, center, 0).is_err());
    }
}
