//! The calibration chain for real scans (issue 12): what a reconstruction
//! needs besides the data, computed from reference scans.
//!
//! - [`noise`]: the coil noise covariance from noise-only samples and the
//!   whitening of data and sensitivities (Pruessmann et al. 2001);
//! - [`espirit`]: ESPIRiT coil maps (Uecker et al. 2014) from a Cartesian
//!   reference (or the fully sampled centre of Cartesian data), 2D and 3D;
//! - [`walsh`]: the adaptive combination of Walsh et al. 2000, the quick option;
//! - [`b0`]: the off-resonance map from a multi-echo gradient-echo reference;
//! - [`delay`]: the delay between field-monitoring coefficients and the data.
//!
//! Every result is delivered at a reconstruction's positions ([`Target`]):
//! ESPIRiT evaluates its image-space matrices exactly there, the others
//! interpolate from the reference grid ([`reference`]).

pub mod b0;
pub mod delay;
pub mod espirit;
pub mod linalg;
pub mod noise;
pub mod reference;
pub mod walsh;

use crate::error::{Error, Result};

/// Where results are wanted: a plan's voxel positions (N×3) and grid dims.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub dims: [usize; 3],
    pub positions: &'a [f64],
}

impl<'a> Target<'a> {
    /// The positions of `plan` (which must have them).
    pub fn of(plan: &'a crate::plan::Plan) -> Result<Target<'a>> {
        let positions = plan.model().positions.as_deref().ok_or_else(|| {
            Error::incomplete(
                "the plan has no positions: set them first (horecon_set_grid_positions or \
                 horecon_set_positions): calibration results are delivered there",
            )
        })?;
        Ok(Target {
            dims: plan.sizes().dims,
            positions,
        })
    }

    /// N.
    pub fn voxels(&self) -> usize {
        self.positions.len() / 3
    }

    /// The coordinates along each axis when the positions form an
    /// axis-aligned grid (x_a = origin_a + i_a·step_a), else `None`.
    pub fn axis_grid(&self) -> Option<([usize; 3], [Vec<f64>; 3])> {
        let steps = crate::model::grid::lattice_steps(self.dims, self.positions, "").ok()?;
        for (a, step) in steps.iter().enumerate() {
            let along = step[a].abs();
            for (b, &s) in step.iter().enumerate() {
                if b != a && s.abs() > 1e-9 * along.max(f64::MIN_POSITIVE) {
                    return None;
                }
            }
        }
        let n = self.voxels();
        let origin = [self.positions[0], self.positions[n], self.positions[2 * n]];
        Some((
            self.dims,
            [0, 1, 2].map(|a| {
                (0..self.dims[a])
                    .map(|i| origin[a] + i as f64 * steps[a][a])
                    .collect()
            }),
        ))
    }
}
