//! The grid positions helper (MODEL.md): FFT-centred, so index n/2 of each
//! axis sits on the centre, x_i = c_x + (i − ⌊nx/2⌋)·fov_x/nx.

/// Positions (N×3, metres, first index fastest) of an nx×ny×nz grid with
/// field of view `fov` and centre `center`. A singleton axis sits at its centre.
pub fn grid_positions(
    dims: [usize; 3],
    fov: [f64; 3],
    center: [f64; 3],
) -> crate::error::Result<Vec<f64>> {
    let n = dims[0] * dims[1] * dims[2];
    let mut out = crate::error::try_vec(3 * n, 0.0, "grid positions (N x 3)")?;
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let v = ix + dims[0] * (iy + dims[1] * iz);
                for (axis, i) in [ix, iy, iz].into_iter().enumerate() {
                    out[axis * n + v] = axis_position(i, dims[axis], fov[axis], center[axis]);
                }
            }
        }
    }
    Ok(out)
}

fn axis_position(i: usize, n: usize, fov: f64, center: f64) -> f64 {
    if n == 1 {
        center
    } else {
        center + (i as f64 - (n / 2) as f64) * fov / n as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centre_index_sits_on_centre() {
        let p = grid_positions([4, 5, 1], [0.2, 0.25, 0.01], [0.01, -0.02, 0.03]).unwrap();
        let n = 20;
        // voxel (2, 2, 0) = index 2 + 4*2 = 10
        assert!((p[10] - 0.01).abs() < 1e-15);
        assert!((p[n + 10] + 0.02).abs() < 1e-15);
        assert!((p[2 * n + 10] - 0.03).abs() < 1e-15);
        // x spacing 0.05, first voxel at centre - 2*0.05
        assert!((p[0] - (0.01 - 0.1)).abs() < 1e-15);
        // y: 5 voxels, floor(5/2) = 2, spacing 0.05
        assert!((p[n] - (-0.02 - 0.1)).abs() < 1e-15);
    }
}
