//! The plan as the target of the calibration chain: coil maps and B0 maps
//! are delivered at its positions (and coil count), computed in its thread pool.

use super::Plan;
use crate::calib::b0::{b0_map, B0Options, B0Result};
use crate::calib::espirit::{espirit, EspiritOptions, EspiritResult};
use crate::calib::reference::ReferenceGrid;
use crate::calib::walsh::walsh;
use crate::calib::Target;
use crate::error::{Error, Result};
use num_complex::Complex32;

impl Plan {
    fn check_reference_coils(&self, coils: usize) -> Result<()> {
        if coils != self.sizes().coils {
            return Err(Error::size(format!(
                "the reference has {coils} coils but the plan has {}: the maps are N x L for the plan",
                self.sizes().coils
            )));
        }
        Ok(())
    }

    /// ESPIRiT maps (N×L) at the plan's positions from reference k-space (N_ref×L).
    pub fn espirit(
        &self,
        grid: &ReferenceGrid,
        kspace: &[Complex32],
        options: &EspiritOptions,
    ) -> Result<EspiritResult> {
        let coils = self.sizes().coils;
        let target = Target::of(self)?;
        self.pool
            .install(|| espirit(grid, kspace, coils, options, &target))
    }

    /// Walsh maps (N×L) at the plan's positions from coil images (N_ref×L).
    pub fn walsh(
        &self,
        grid: &ReferenceGrid,
        images: &[Complex32],
        window: usize,
    ) -> Result<Vec<Complex32>> {
        let coils = self.sizes().coils;
        let target = Target::of(self)?;
        self.pool
            .install(|| walsh(grid, images, coils, window, &target))
    }

    /// ω (N, rad/s) at the plan's positions from multi-echo reference k-space
    /// (N_ref×`coils`×E; any coil count).
    pub fn b0_map(
        &self,
        grid: &ReferenceGrid,
        kspace: &[Complex32],
        coils: usize,
        echo_times: &[f64],
        options: &B0Options,
    ) -> Result<B0Result> {
        let target = Target::of(self)?;
        self.pool
            .install(|| b0_map(grid, kspace, coils, echo_times, options, &target))
    }

    /// Checks that reference coil counts match (ESPIRiT, Walsh).
    pub fn reference_coils(&self, coils: usize) -> Result<()> {
        self.check_reference_coils(coils)
    }
}
