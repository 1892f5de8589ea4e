//! The higher-order reconstruction workflow of Bieri et al. 2011 / Wilm et
//! al. 2011 on simulated data (the demo's engine; matlab/examples/
//! higher_order_workflow.m is its twin with the same settings and seeds).
//!
//! An off-centre axial slice of the 2D Shepp–Logan phantom, L coils, an
//! undersampled single-shot spiral, 16-term higher-order field coefficients
//! (nominal trajectory + eddy-current-like deviations of orders 0–3) and a
//! B0 map. The data are simulated on a finer grid (voxel weight 1/f², so f²
//! sub-voxels add up to one voxel) with noise, i.e. without the inverse
//! crime, then reconstructed on the grid by CG with
//! (a) the full model, (b) the nominal trajectory only, (c) higher orders
//! without B0 and (d) B0 without higher orders. The truth is the phantom
//! averaged over each voxel.

use crate::error::Result;
use crate::plan::{BackendKind, CgOptions, Options, Plan};
use crate::progress::Callback;
use crate::sim;
use num_complex::Complex32;
use std::ffi::c_void;
use std::time::Instant;

/// The acquisition and its simulation (defaults: the demo's settings).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkflowSettings {
    /// Grid n×n.
    pub n: usize,
    /// Field of view (m), x and y.
    pub fov: f64,
    /// Slice centre (m); z ≠ 0 makes the z-dependent terms matter.
    pub center: [f64; 3],
    pub coils: usize,
    pub undersampling: f64,
    /// Readout dwell time (s): one Nyquist step per dwell along the spiral.
    pub dwell: f64,
    /// Start of the readout after excitation (s).
    pub t0: f64,
    /// Peak of the off-resonance map (Hz).
    pub max_hz: f64,
    /// Eddy-current strength of the field model (1 = typical).
    pub strength: f64,
    pub snr: f64,
    pub iterations: usize,
    /// Refinement of the simulation grid.
    pub refinement: usize,
    /// Spiral density compensation as CG sample weights.
    pub density_compensation: bool,
    pub backend: BackendKind,
}

impl Default for WorkflowSettings {
    fn default() -> Self {
        WorkflowSettings {
            n: 128,
            fov: 0.22,
            center: [0.0, 0.0, 0.02],
            coils: 8,
            undersampling: 3.0,
            dwell: 1e-5,
            t0: 2e-3,
            max_hz: 120.0,
            strength: 1.0,
            snr: 100.0,
            iterations: 20,
            refinement: 2,
            density_compensation: false,
            backend: BackendKind::Auto,
        }
    }
}

/// Seeds of the field model and the noise (shared with the .m twin).
pub const FIELD_SEED: u64 = 2011;
pub const NOISE_SEED: u64 = 7;
/// Extent of the phantom (m) and radius of the coil ring (m).
pub const PHANTOM_FOV: [f64; 3] = [0.2, 0.2, 0.0];
pub const COIL_RADIUS: f64 = 0.15;

/// One reconstruction: which model terms it used and how well it did.
#[derive(Clone, Debug)]
pub struct Reconstruction {
    pub label: &'static str,
    pub higher_order: bool,
    pub b0: bool,
    pub image: Vec<Complex32>,
    pub nrmse: f64,
    pub psnr: f64,
    pub seconds: f64,
    pub iterations: usize,
}

/// Everything the workflow produced.
#[derive(Clone, Debug)]
pub struct WorkflowResult {
    pub samples: usize,
    pub fine_dims: [usize; 3],
    pub simulation_seconds: f64,
    pub backend: String,
    /// The phantom averaged over each voxel (N).
    pub truth: Vec<Complex32>,
    /// The B0 map on the grid (rad/s, N).
    pub off_resonance: Vec<f64>,
    /// (a) full model, (b) nominal, (c) higher order without B0, (d) B0 without higher order.
    pub reconstructions: Vec<Reconstruction>,
}

impl WorkflowResult {
    /// NRMSE of (b) over NRMSE of (a).
    pub fn gain(&self) -> f64 {
        self.reconstructions[1].nrmse / self.reconstructions[0].nrmse
    }
}

/// The four reconstructions: (label, higher order, B0).
pub const SCENARIOS: [(&str, bool, bool); 4] = [
    ("(a) full model: 16 terms + B0", true, true),
    ("(b) nominal trajectory only", false, false),
    ("(c) higher order, no B0", true, false),
    ("(d) B0, no higher order", false, true),
];

/// What the workflow is doing, for a progress display.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// The fraction of the simulation's forward operator done (its plan's
    /// progress callback).
    Simulating(f64),
    /// Data simulated on the refined grid.
    Simulated,
    /// A reconstruction starts (index into [`SCENARIOS`]).
    Reconstructing(usize),
    /// One CG iteration finished.
    Iteration,
}

/// Hands the simulation plan's progress to the workflow's `progress`.
unsafe extern "C" fn simulating(user: *mut c_void, fraction: f64) -> i32 {
    // SAFETY: `user` is the `&&dyn Fn(Step)` of `higher_order_workflow`,
    // alive while its simulation plan runs.
    let progress = unsafe { &*(user as *const &(dyn Fn(Step) + Sync)) };
    progress(Step::Simulating(fraction));
    0
}

/// Runs the workflow; `progress` hears every step (from the solver's thread).
pub fn higher_order_workflow(
    s: &WorkflowSettings,
    progress: &(dyn Fn(Step) + Sync),
) -> Result<WorkflowResult> {
    let n = s.n;
    let dims = [n, n, 1];
    let fov = [s.fov, s.fov, s.fov / n as f64];
    let options = Options {
        backend: s.backend,
        ..Options::default()
    };
    let spiral = sim::spiral(n as i64, s.fov, s.undersampling, s.dwell, s.t0)?;
    let m = spiral.samples();
    let coefficients = sim::field_coefficients(&spiral.k, 2, s.dwell, s.strength, FIELD_SEED)?;

    let started = Instant::now();
    let (fine_dims, fine_positions) = sim::refined_grid(dims, fov, s.center, s.refinement)?;
    let fine_phantom = sim::shepp_logan(2, PHANTOM_FOV, s.center, &fine_positions)?;
    let weight = 1.0 / (s.refinement * s.refinement) as f64;
    let fine_image: Vec<Complex32> = fine_phantom
        .iter()
        .map(|&v| Complex32::new((v * weight) as f32, 0.0))
        .collect();
    let mut data = vec![Complex32::default(); m * s.coils];
    {
        let mut plan = Plan::new(
            options,
            fine_dims[0] as i64,
            fine_dims[1] as i64,
            1,
            s.coils as i64,
            m as i64,
        )?;
        plan.set_positions(&fine_positions)?;
        plan.set_solid_harmonics(16, &coefficients)?;
        let omega = sim::off_resonance_map(&fine_positions, PHANTOM_FOV, s.center, s.max_hz)?;
        plan.set_off_resonance(Some((&omega, &spiral.times)))?;
        let coils = sim::coil_sensitivities(&fine_positions, s.coils, COIL_RADIUS, [0.0; 3])?;
        plan.set_sensitivities(Some(&coils))?;
        plan.set_progress(Some(Callback {
            function: simulating,
            user: &progress as *const &(dyn Fn(Step) + Sync) as *mut c_void,
        }));
        plan.forward(&fine_image, &mut data)?;
    }
    sim::add_noise(&mut data, s.snr, NOISE_SEED)?;
    let fine_truth: Vec<Complex32> = fine_phantom
        .iter()
        .map(|&v| Complex32::new(v as f32, 0.0))
        .collect();
    let truth = sim::block_average(&fine_truth, dims, s.refinement)?;
    let simulation_seconds = started.elapsed().as_secs_f64();
    progress(Step::Simulated);

    let positions = crate::model::grid::grid_positions(dims, fov, s.center)?;
    let omega = sim::off_resonance_map(&positions, PHANTOM_FOV, s.center, s.max_hz)?;
    let coils = sim::coil_sensitivities(&positions, s.coils, COIL_RADIUS, [0.0; 3])?;
    let mut plan = Plan::new(options, n as i64, n as i64, 1, s.coils as i64, m as i64)?;
    plan.set_grid_positions(fov, s.center)?;
    plan.set_sensitivities(Some(&coils))?;
    let weights = if s.density_compensation {
        Some(sim::density_weights_2d(&spiral.k)?)
    } else {
        None
    };
    let tick = |_iteration: usize, _residual: f64| {
        progress(Step::Iteration);
        false
    };
    let mut reconstructions = Vec::new();
    for (index, &(label, higher_order, b0)) in SCENARIOS.iter().enumerate() {
        progress(Step::Reconstructing(index));
        if higher_order {
            plan.set_solid_harmonics(16, &coefficients)?;
        } else {
            plan.set_trajectory(2, &spiral.k)?;
        }
        plan.set_off_resonance(if b0 {
            Some((&omega, &spiral.times))
        } else {
            None
        })?;
        let cg = CgOptions {
            max_iterations: s.iterations,
            tolerance: 1e-9,
            sample_weights: weights.as_deref(),
            progress: Some(&tick),
            ..CgOptions::default()
        };
        let mut image = vec![Complex32::default(); n * n];
        let info = plan.cg(&data, &cg, &mut image)?;
        reconstructions.push(Reconstruction {
            label,
            higher_order,
            b0,
            nrmse: sim::nrmse(&image, &truth)?,
            psnr: sim::psnr(&image, &truth)?,
            image,
            seconds: info.seconds,
            iterations: info.iterations,
        });
    }
    Ok(WorkflowResult {
        samples: m,
        fine_dims,
        simulation_seconds,
        backend: plan.operator()?.backend_name(),
        truth,
        off_resonance: omega,
        reconstructions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The acceptance of the issue at a reduced size (the .m test's settings):
    /// the full model lowers the NRMSE at least 3× against the nominal
    /// trajectory and beats every partial model.
    #[test]
    fn full_model_beats_nominal_threefold() {
        let settings = WorkflowSettings {
            n: 80,
            dwell: 2e-5,
            backend: BackendKind::Cpu,
            ..WorkflowSettings::default()
        };
        let r = higher_order_workflow(&settings, &|_| {}).unwrap();
        for x in &r.reconstructions {
            eprintln!("{:<34} NRMSE {:.4} PSNR {:.2}", x.label, x.nrmse, x.psnr);
        }
        assert!(r.gain() >= 3.0, "gain {}", r.gain());
        let best_partial = r.reconstructions[1..]
            .iter()
            .map(|x| x.nrmse)
            .fold(f64::INFINITY, f64::min);
        assert!(r.reconstructions[0].nrmse < best_partial);
        assert_eq!(r.truth.len(), 80 * 80);
    }
}
