//! The plan as the target of the calibration chain: coil maps and B0 maps
//! are delivered at its positions (and coil count), computed in its thread pool.

use super::Plan;
use crate::calib::b0::{b0_map, B0Options, B0Result};
use crate::calib::espirit::{espirit, EspiritOptions, EspiritResult};
use crate::calib::reference::ReferenceGrid;
use crate::calib::walsh::walsh;
use crate::calib::Target;
use crate::error::{Error, Result};
use crate::finite::check_result;
use num_complex::Complex32;

/// Reference data far outside float32's comfortable range (beyond 2^±40)
/// scaled by a power of two (exact) so that its largest component is in
/// [1, 2): coil maps and off-resonance are independent of the data's scale,
/// and the products and sums of the calibration (coil correlations, the
/// calibration matrix's Gram) would leave float32's range around 1e19 and
/// fall below it around 1e-19. `None` where no scaling is needed.
fn unit_scaled(values: &[Complex32]) -> Option<Vec<Complex32>> {
    let largest = values
        .iter()
        .fold(0.0f32, |m, v| m.max(v.re.abs()).max(v.im.abs()));
    if largest == 0.0 || !largest.is_finite() || (2f32.powi(-40)..=2f32.powi(40)).contains(&largest)
    {
        return None;
    }
    // In float64: 2^126 and more (data below 2^-126, down to the subnormals)
    // would overflow a float32 factor.
    let factor = 2f64.powi(-(largest as f64).log2().floor() as i32);
    let scale = |x: f32| (x as f64 * factor) as f32;
    Some(
        values
            .iter()
            .map(|v| Complex32::new(scale(v.re), scale(v.im)))
            .collect(),
    )
}

impl Plan {
    /// `calibrate` on the plan's threads with the reference `data` as
    /// [`unit_scaled`] leaves it.
    fn on_unit_scale<R: Send>(
        &self,
        data: &[Complex32],
        calibrate: impl FnOnce(&[Complex32]) -> Result<R> + Send,
    ) -> Result<R> {
        let scaled = unit_scaled(data);
        let data = scaled.as_deref().unwrap_or(data);
        self.pool.install(|| calibrate(data))
    }

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
        let result = self.on_unit_scale(kspace, |k| espirit(grid, k, coils, options, &target))?;
        check_result("maps", &result.maps)?;
        check_result("eigenvalues", &result.eigenvalues)?;
        Ok(result)
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
        let maps = self.on_unit_scale(images, |m| walsh(grid, m, coils, window, &target))?;
        check_result("maps", &maps)?;
        Ok(maps)
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
        let result = self.on_unit_scale(kspace, |k| {
            b0_map(grid, k, coils, echo_times, options, &target)
        })?;
        check_result("omega", &result.omega)?;
        Ok(result)
    }

    /// Checks that reference coil counts match (ESPIRiT, Walsh).
    pub fn reference_coils(&self, coils: usize) -> Result<()> {
        self.check_reference_coils(coils)
    }
}
