//! Delay between field-monitoring coefficients (or the nominal trajectory)
//! and the data (as HighOrderMRI.jl's synchronisation and MatMRI's
//! `findDelAuto`, Dubovan & Baron 2022).
//!
//! The monitored coefficients k_b(t) lag or lead the data by an unknown Δt.
//! For a candidate Δt the coefficients are resampled at t_j + Δt (cubic
//! Hermite interpolation on each readout's times, linear extrapolation past
//! its ends), a short reconstruction runs (`iterations` of CG from zero on the
//! plan's geometry, coils and off-resonance), and its data residual
//! ‖Eρ − d‖ is the cost. The search evaluates a coarse grid over
//! [−range, range] (`step` apart), then refines around the best point by
//! golden-section search until the bracket is below `tolerance`. Only the
//! coefficient columns of the selected orders (`groups`: bit o for order o
//! of the solid harmonics: 1 = k0, 2 = linear, 4 = second, 8 = third) move;
//! 0 selects all.

use crate::error::{try_vec, Error, Result, Status};
use crate::model::harmonics::ORDER;
use crate::model::{Basis, PhaseModel};
use crate::plan::{CgOptions, Plan};
use crate::progress;
use crate::solver::Regularizer;
use num_complex::Complex32;

/// Settings of [`estimate_delay`] (times in seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayOptions {
    /// Search over [−range, range] (20 µs).
    pub range: f64,
    /// Spacing of the coarse grid (4 µs: the golden section then brackets ±4 µs;
    /// delays recovered within 0.06 µs at 2 and 4 µs dwell, tests/calib.rs).
    pub step: f64,
    /// Width of the final bracket (0.05 µs).
    pub tolerance: f64,
    /// CG iterations of each short reconstruction (10).
    pub iterations: usize,
    /// Tikhonov λ of the short reconstructions (0).
    pub lambda: f64,
    /// Orders whose coefficients are delayed (bit o = order o; 0 = all).
    pub groups: u32,
}

impl Default for DelayOptions {
    fn default() -> Self {
        DelayOptions {
            range: 20e-6,
            step: 4e-6,
            tolerance: 0.05e-6,
            iterations: 10,
            lambda: 0.0,
            groups: 0,
        }
    }
}

/// The estimate and every evaluation (delay, residual), sorted by delay.
pub struct DelayResult {
    pub delay: f64,
    pub residual: f64,
    pub curve: Vec<(f64, f64)>,
}

/// values(t + shift) from samples at `times`, per readout (a readout ends
/// where the times stop increasing): cubic Hermite with finite-difference
/// slopes inside, linear extrapolation outside.
pub fn resample(values: &[f64], times: &[f64], shift: f64) -> Vec<f64> {
    let mut out = vec![0.0; values.len()];
    resample_into(values, times, shift, &mut out);
    out
}

/// [`resample`] into `out` (as long as `values`).
fn resample_into(values: &[f64], times: &[f64], shift: f64, out: &mut [f64]) {
    let m = values.len();
    let mut start = 0;
    while start < m {
        let mut end = start + 1;
        while end < m && times[end] > times[end - 1] {
            end += 1;
        }
        let t = &times[start..end];
        let v = &values[start..end];
        let len = end - start;
        let slope = |i: usize| -> f64 {
            if len < 2 {
                0.0
            } else if i == 0 {
                (v[1] - v[0]) / (t[1] - t[0])
            } else if i == len - 1 {
                (v[i] - v[i - 1]) / (t[i] - t[i - 1])
            } else {
                (v[i + 1] - v[i - 1]) / (t[i + 1] - t[i - 1])
            }
        };
        for j in 0..len {
            let x = t[j] + shift;
            out[start + j] = if len < 2 {
                v[0]
            } else if x <= t[0] {
                v[0] + slope(0) * (x - t[0])
            } else if x >= t[len - 1] {
                v[len - 1] + slope(len - 1) * (x - t[len - 1])
            } else {
                let i = t.partition_point(|&s| s <= x).clamp(1, len - 1) - 1;
                let h = t[i + 1] - t[i];
                let s = (x - t[i]) / h;
                let (s2, s3) = (s * s, s * s * s);
                v[i] * (2.0 * s3 - 3.0 * s2 + 1.0)
                    + slope(i) * h * (s3 - 2.0 * s2 + s)
                    + v[i + 1] * (-2.0 * s3 + 3.0 * s2)
                    + slope(i + 1) * h * (s3 - s2)
            };
        }
        start = end;
    }
}

/// Which coefficient columns move, for the plan's basis.
fn moving_columns(basis: &Basis, terms: usize, groups: u32) -> Result<Vec<bool>> {
    let all = groups == 0;
    let columns: Vec<bool> = match basis {
        Basis::SolidHarmonics(t) => (0..*t)
            .map(|b| all || groups & (1 << ORDER[b]) != 0)
            .collect(),
        Basis::Trajectory(d) => vec![all || groups & 2 != 0; *d],
        Basis::User(_) => vec![true; terms],
    };
    if !columns.iter().any(|&c| c) {
        return Err(Error::invalid(format!(
            "groups = {groups} selects no coefficient column of the plan's phase model"
        )));
    }
    Ok(columns)
}

/// Estimates the delay Δt of `coefficients` (M×B in the plan's phase model;
/// `None` = the plan's own) against `data` (M×L), with sample times `times` (M).
pub fn estimate_delay(
    plan: &Plan,
    data: &[Complex32],
    coefficients: Option<&[f64]>,
    times: &[f64],
    options: &DelayOptions,
) -> Result<DelayResult> {
    let sizes = plan.sizes();
    let model = plan.model();
    model.check_complete()?;
    let phase = model
        .phase
        .as_ref()
        .ok_or_else(|| Error::internal("phase model missing"))?;
    let m = sizes.samples;
    let coefficients = coefficients.unwrap_or(&phase.coefficients);
    if coefficients.len() != phase.terms * m {
        return Err(Error::size(format!(
            "coefficients has {} elements, expected M x B = {} (the plan's phase model)",
            coefficients.len(),
            phase.terms * m
        )));
    }
    if times.len() != m {
        return Err(Error::size(format!(
            "times has {} elements, expected M = {m}",
            times.len()
        )));
    }
    if data.len() != m * sizes.coils {
        return Err(Error::size(format!(
            "data has {} elements, expected M x L = {}",
            data.len(),
            m * sizes.coils
        )));
    }
    crate::model::check_finite("coefficients", coefficients)?;
    crate::model::check_finite("times", times)?;
    // A readout's samples are its increasing times; closer than 1 ns they are
    // no readout (dwell times are 1 µs and more) and its slopes overflow.
    if let Some(j) = (1..times.len()).find(|&j| {
        let step = times[j] - times[j - 1];
        step > 0.0 && step < 1e-9
    }) {
        return Err(Error::invalid(format!(
            "times[{j}] - times[{}] = {:e} s: the samples of a readout must be at least 1 ns apart",
            j - 1,
            times[j] - times[j - 1]
        )));
    }
    crate::model::check_finite("data", data)?;
    if data.iter().all(|d| d.re == 0.0 && d.im == 0.0) {
        return Err(Error::invalid(
            "data is all zero: no delay can be estimated",
        ));
    }
    for (name, v, positive) in [
        ("range", options.range, false),
        ("step", options.step, true),
        ("tolerance", options.tolerance, true),
        ("lambda", options.lambda, false),
    ] {
        if !(v.is_finite() && v >= 0.0 && (!positive || v > 0.0)) {
            return Err(Error::invalid(format!(
                "{name} must be finite and {}, got {v}",
                if positive { "> 0" } else { ">= 0" }
            )));
        }
    }
    if !(1..=1000).contains(&options.iterations) {
        return Err(Error::invalid(format!(
            "iterations must be 1..1000, got {}",
            options.iterations
        )));
    }
    if options.range / options.step > 10_000.0 {
        return Err(Error::invalid(format!(
            "range / step = {} evaluations is too many (at most 20000)",
            2.0 * options.range / options.step
        )));
    }
    let moving = moving_columns(&phase.basis, phase.terms, options.groups)?;
    // One long call of `plan`: its horecon_cancel and progress callback reach
    // the search, between evaluations and inside the private plan's CGs.
    plan.long_call("horecon_estimate_delay", || {
        search(plan, phase, (data, coefficients, times), options, &moving)
    })
}

/// The delay search of [`estimate_delay`] (arguments checked; `phase` the
/// plan's phase model), on a private plan that shares `plan`'s cancellation.
fn search(
    plan: &Plan,
    phase: &PhaseModel,
    (data, coefficients, times): (&[Complex32], &[f64], &[f64]),
    options: &DelayOptions,
    moving: &[bool],
) -> Result<DelayResult> {
    let (model, sizes) = (plan.model(), plan.sizes());
    let m = sizes.samples;
    // A private plan with the same geometry, coils and off-resonance.
    let d = sizes.dims;
    let mut work = Plan::new(
        *plan.options(),
        d[0] as i64,
        d[1] as i64,
        d[2] as i64,
        sizes.coils as i64,
        m as i64,
    )?;
    work.share_cancel(plan);
    if let Some(p) = &model.positions {
        work.set_positions(p)?;
    }
    if let Some(or) = &model.off_resonance {
        work.set_off_resonance(Some((&or.omega, &or.times)))?;
    }
    work.set_sensitivities(model.sensitivities.as_deref())?;
    if let Some(segments) = plan.toeplitz() {
        work.set_toeplitz(true, segments as i32)?;
    }
    // The phase model's basis, set once: each candidate then replaces only
    // the coefficients, which the built operator takes in place
    // (Plan::set_coefficients) instead of being rebuilt.
    match &phase.basis {
        Basis::SolidHarmonics(t) => work.set_solid_harmonics(*t as i32, coefficients)?,
        Basis::Trajectory(nd) => work.set_trajectory(*nd as i32, coefficients)?,
        Basis::User(h) => work.set_basis(phase.terms as i32, h, coefficients)?,
    }
    let mut shifted = try_vec(coefficients.len(), 0.0f64, "resampled coefficients")?;
    let mut image = try_vec(sizes.voxels, Complex32::default(), "image (N)")?;
    let mut predicted = try_vec(data.len(), Complex32::default(), "E image (M x L)")?;
    // Evaluations: the coarse grid, then about 1.44·log2(bracket / tolerance)
    // golden-section steps (the fraction done reported to the callback).
    let count = (options.range / options.step).floor() as i64;
    let golden = 1.44 * (2.0 * options.step / options.tolerance).max(1.0).log2() + 2.0;
    let expected = (2 * count + 1) as f64 + golden;
    let mut evaluated = 0.0f64;
    let mut evaluate = |delay: f64| -> Result<f64> {
        let done = (evaluated / expected).min(0.99);
        evaluated += 1.0;
        progress::check(done)?;
        // A cancel seen first by the private plan's call is this call's.
        let ours = |e: Error| -> Error {
            match progress::check(done) {
                Err(cancelled) => cancelled,
                Ok(()) => e,
            }
        };
        for (b, column) in coefficients.chunks_exact(m).enumerate() {
            let out = &mut shifted[b * m..(b + 1) * m];
            if moving[b] {
                resample_into(column, times, delay, out);
            } else {
                out.copy_from_slice(column);
            }
        }
        work.set_coefficients(&shifted).map_err(ours)?;
        let cg = CgOptions {
            max_iterations: options.iterations,
            tolerance: 0.0,
            regularizer: if options.lambda > 0.0 {
                Regularizer::Tikhonov
            } else {
                Regularizer::None
            },
            lambda: options.lambda,
            ..CgOptions::default()
        };
        image.fill(Complex32::default());
        work.cg(data, &cg, &mut image).map_err(ours)?;
        work.forward(&image, &mut predicted).map_err(ours)?;
        // in float64: the squares of float32 data beyond 1.8e19 overflow float32
        let residual = predicted
            .iter()
            .zip(data)
            .map(|(p, d)| {
                let (re, im) = (p.re as f64 - d.re as f64, p.im as f64 - d.im as f64);
                re * re + im * im
            })
            .sum::<f64>()
            .sqrt();
        if residual.is_finite() {
            Ok(residual)
        } else {
            Err(Error::new(
                Status::NotFinite,
                format!(
                    "the data residual at delay {delay:e} s is {residual} (the reconstruction \
                     overflowed float32's range, 3.4e38): scale the data down"
                ),
            ))
        }
    };

    let mut curve: Vec<(f64, f64)> = Vec::new();
    for i in -count..=count {
        let delay = i as f64 * options.step;
        curve.push((delay, evaluate(delay)?));
    }
    let best = curve
        .iter()
        .enumerate()
        .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(i, _)| i)
        .unwrap_or(0);
    // Golden-section search in the bracket around the best coarse point.
    let mut lo = curve[best.saturating_sub(1)].0;
    let mut hi = curve[(best + 1).min(curve.len() - 1)].0;
    let ratio = (5.0f64.sqrt() - 1.0) / 2.0;
    let mut x1 = hi - ratio * (hi - lo);
    let mut x2 = lo + ratio * (hi - lo);
    let (mut f1, mut f2) = (evaluate(x1)?, evaluate(x2)?);
    curve.push((x1, f1));
    curve.push((x2, f2));
    // Until the bracket is within the tolerance, or as narrow as float64
    // can resolve at these delays (a tolerance below that would never stop).
    let resolution = |lo: f64, hi: f64| 8.0 * f64::EPSILON * lo.abs().max(hi.abs());
    while hi - lo > options.tolerance.max(resolution(lo, hi)) {
        if f1 <= f2 {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - ratio * (hi - lo);
            f1 = evaluate(x1)?;
            curve.push((x1, f1));
        } else {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + ratio * (hi - lo);
            f2 = evaluate(x2)?;
            curve.push((x2, f2));
        }
    }
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (delay, residual) = curve
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0.0, f64::NAN));
    Ok(DelayResult {
        delay,
        residual,
        curve,
    })
}

#[cfg(test)]
mod tests {
    use super::resample;

    #[test]
    fn resampling_is_exact_for_cubics_and_restarts_per_readout() {
        let times: Vec<f64> = (0..20)
            .map(|j| {
                if j < 10 {
                    j as f64 * 1e-5
                } else {
                    (j - 10) as f64 * 1e-5
                }
            })
            .collect();
        let f = |t: f64| 2.0 + 3e5 * t - 1e9 * t * t;
        let values: Vec<f64> = times.iter().map(|&t| f(t)).collect();
        let out = resample(&values, &times, 0.3e-5);
        // Quadratics are reproduced inside (interior slopes are exact for them).
        for j in [2usize, 5, 12, 15] {
            assert!((out[j] - f(times[j] + 0.3e-5)).abs() < 1e-9, "{j}");
        }
    }
}
