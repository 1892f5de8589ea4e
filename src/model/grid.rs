//! The grid positions helper (MODEL.md): FFT-centred, so index n/2 of each
//! axis sits on the centre, x_i = c_x + (i − ⌊nx/2⌋)·fov_x/nx.
//! Also the lattice check of the FFT-based paths (Q, Toeplitz, gridding).

use crate::error::{Error, Result, Status};

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

/// Positions off the lattice by more than this fraction of the largest
/// lattice step are not a grid.
const LATTICE_TOLERANCE: f64 = 1e-6;

/// The lattice steps a, b, c (m) of grid positions r_n = r_0 + ix·a + iy·b +
/// iz·c (zero for singleton axes), or `InvalidArgument` if the positions are
/// not such a lattice; `what` names the caller in the message.
pub fn lattice_steps(dims: [usize; 3], positions: &[f64], what: &str) -> Result<[[f64; 3]; 3]> {
    let n: usize = dims.iter().product();
    let r = |v: usize| [positions[v], positions[n + v], positions[2 * n + v]];
    let strides = [1, dims[0], dims[0] * dims[1]];
    let origin = r(0);
    let mut steps = [[0.0; 3]; 3];
    let mut largest: f64 = 0.0;
    for axis in 0..3 {
        if dims[axis] > 1 {
            let p = r(strides[axis]);
            for c in 0..3 {
                steps[axis][c] = p[c] - origin[c];
            }
            let length = steps[axis].iter().map(|x| x * x).sum::<f64>().sqrt();
            if length == 0.0 {
                return Err(Error::invalid(format!(
                    "{what} needs voxel positions on a grid: the first two voxels along axis {} coincide",
                    ["x", "y", "z"][axis]
                )));
            }
            largest = largest.max(length);
        }
    }
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let v = ix + dims[0] * (iy + dims[1] * iz);
                let p = r(v);
                let deviation = (0..3)
                    .map(|c| {
                        let expect = origin[c]
                            + ix as f64 * steps[0][c]
                            + iy as f64 * steps[1][c]
                            + iz as f64 * steps[2][c];
                        (p[c] - expect).powi(2)
                    })
                    .sum::<f64>()
                    .sqrt();
                if deviation > LATTICE_TOLERANCE * largest {
                    return Err(Error::new(
                        Status::InvalidArgument,
                        format!(
                            "{what} needs voxel positions on a regular grid (r_n = r_0 + ix*a + iy*b + iz*c, \
                             as set_grid_positions makes): voxel {v} is {deviation:.3e} m off it (at most \
                             {LATTICE_TOLERANCE:.0e} of the largest step; positions rounded to float32 are off by up to \
                             6e-8 of their distance from the origin: compute them in double precision)"
                        ),
                    ));
                }
            }
        }
    }
    Ok(steps)
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
