//! The B0 (off-resonance) map from a multi-echo gradient-echo reference.
//!
//! Echo e (time TE_e) images the object as m_{c,e}(r) = S_c(r)ρ(r)·e^{iω(r)TE_e}.
//!
//! 1. **Coil-combined phase differences**: z_{e}(r) = Σ_c m_{c,e}(r)·conj(m_{c,0}(r))
//!    has phase ω(TE_e − TE_0) without the coils' phases and magnitude ∝ |ρ|².
//! 2. **Unwrapping across space**: the pair of echoes closest in time gives
//!    ω₀ = arg(z)/ΔTE, unwrapped by quality-guided region growing over the mask
//!    (neighbours joined in order of |z|, each shifted by the 2π multiple
//!    closest to its joined neighbour).
//! 3. **Across echoes**: each arg z_e is unwrapped to the 2π multiple closest to
//!    ω₀(TE_e − TE_0), and ω is the least-squares slope through the origin,
//!    ω_meas = Σ_e Δ_e φ_e / Σ_e Δ_e², Δ_e = TE_e − TE_0.
//! 4. **Mask**: voxels whose combined magnitude (Σ_c|m_{c,0}|²)^½ is at least
//!    `mask_threshold` times its 99th percentile.
//! 5. **Regularised smooth fit**, extending the map beyond the object's edge,
//!    min over ω of Σ_mask w·(ω − ω_meas)² + μ·w̄·‖Δω‖², with
//!    w = |z_last| (∝ the precision of ω_meas), w̄ its mean over the mask, Δ the
//!    discrete Laplacian (voxel units, mirrored edges), μ = `smoothness`:
//!    second differences make the map continue linearly outside the mask.
//!    Solved by CG (Jacobi-preconditioned) on the reference grid.
//! 6. ω (rad/s) interpolated (trilinearly) onto the reconstruction's positions.

use super::reference::{check_reference_array, ReferenceGrid};
use super::Target;
use crate::error::{try_vec, Error, Result};
use num_complex::{Complex32, Complex64};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::f64::consts::TAU;

/// Settings of [`b0_map`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct B0Options {
    /// Mask: combined magnitude ≥ this × its 99th percentile.
    pub mask_threshold: f64,
    /// μ of the smooth fit (0 = no smoothing: the mask keeps ω_meas, the rest is filled smoothly).
    pub smoothness: f64,
    /// CG iterations of the fit.
    pub max_iterations: usize,
}

impl Default for B0Options {
    fn default() -> Self {
        B0Options {
            mask_threshold: 0.1,
            smoothness: 1.0,
            max_iterations: 2000,
        }
    }
}

/// ω at the targets (rad/s), and on the reference grid the measured map,
/// the fitted map and the mask.
pub struct B0Result {
    pub omega: Vec<f64>,
    pub reference_omega: Vec<f64>,
    pub mask: Vec<bool>,
}

/// Quality-guided unwrapping of `phase` over `mask` (6-neighbourhood), in place.
fn unwrap(phase: &mut [f64], quality: &[f64], mask: &[bool], dims: [usize; 3]) {
    #[derive(PartialEq)]
    struct Entry(f64, usize);
    impl Eq for Entry {}
    impl PartialOrd for Entry {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Entry {
        fn cmp(&self, other: &Self) -> Ordering {
            self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
        }
    }
    let n = phase.len();
    let mut done = vec![false; n];
    let mut order: Vec<usize> = (0..n).filter(|&v| mask[v]).collect();
    order.sort_by(|&a, &b| quality[b].total_cmp(&quality[a]));
    let strides = [1, dims[0], dims[0] * dims[1]];
    let mut heap = BinaryHeap::new();
    for seed in order {
        if done[seed] {
            continue;
        }
        done[seed] = true;
        heap.push(Entry(quality[seed], seed));
        while let Some(Entry(_, v)) = heap.pop() {
            let index = [v % dims[0], (v / dims[0]) % dims[1], v / strides[2]];
            for a in 0..3 {
                for forward in [false, true] {
                    let neighbour = if forward {
                        (index[a] + 1 < dims[a]).then(|| v + strides[a])
                    } else {
                        (index[a] > 0).then(|| v - strides[a])
                    };
                    let Some(u) = neighbour else { continue };
                    if done[u] || !mask[u] {
                        continue;
                    }
                    phase[u] += TAU * ((phase[v] - phase[u]) / TAU).round();
                    done[u] = true;
                    heap.push(Entry(quality[u], u));
                }
            }
        }
    }
}

/// y = Δx (second differences over the axes of more than one voxel, mirrored edges).
fn laplacian(x: &[f64], y: &mut [f64], dims: [usize; 3]) {
    let strides = [1, dims[0], dims[0] * dims[1]];
    for (v, out) in y.iter_mut().enumerate() {
        let index = [v % dims[0], (v / dims[0]) % dims[1], v / strides[2]];
        let mut s = 0.0;
        for a in 0..3 {
            if dims[a] == 1 {
                continue;
            }
            let lo = if index[a] > 0 {
                v - strides[a]
            } else {
                v + strides[a]
            };
            let hi = if index[a] + 1 < dims[a] {
                v + strides[a]
            } else {
                v - strides[a]
            };
            s += x[lo] + x[hi] - 2.0 * x[v];
        }
        *out = s;
    }
}

/// Solves (W + μw̄ ΔᵀΔ)ω = W ω_meas by Jacobi-preconditioned CG.
fn smooth_fit(
    measured: &[f64],
    weights: &[f64],
    mu: f64,
    dims: [usize; 3],
    max_iterations: usize,
) -> Result<Vec<f64>> {
    let n = measured.len();
    let axes = dims.iter().filter(|&&d| d > 1).count() as f64;
    // Δ's stencil: centre −2·axes, 2·axes neighbours of 1: diag(ΔᵀΔ) ≈ 4axes² + 2axes.
    let diag_reg = mu * (4.0 * axes * axes + 2.0 * axes);
    let apply = |x: &[f64], y: &mut [f64], t: &mut [f64]| {
        laplacian(x, t, dims);
        laplacian(t, y, dims);
        for v in 0..n {
            y[v] = mu * y[v] + weights[v] * x[v];
        }
    };
    let mean = {
        let (s, w) = (0..n).fold((0.0, 0.0), |(s, w), v| {
            (s + weights[v] * measured[v], w + weights[v])
        });
        if w > 0.0 {
            s / w
        } else {
            0.0
        }
    };
    let mut x = try_vec(n, 0.0f64, "B0 fit (N)")?;
    for v in 0..n {
        x[v] = if weights[v] > 0.0 { measured[v] } else { mean };
    }
    let mut t = vec![0.0; n];
    let mut ax = vec![0.0; n];
    apply(&x, &mut ax, &mut t);
    let mut r: Vec<f64> = (0..n).map(|v| weights[v] * measured[v] - ax[v]).collect();
    let b_norm = (0..n)
        .map(|v| (weights[v] * measured[v]).powi(2))
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    let inverse: Vec<f64> = (0..n)
        .map(|v| 1.0 / (weights[v] + diag_reg).max(1e-300))
        .collect();
    let mut z: Vec<f64> = r.iter().zip(&inverse).map(|(r, d)| r * d).collect();
    let mut p = z.clone();
    let mut rz: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
    let mut ap = vec![0.0; n];
    for _ in 0..max_iterations {
        if r.iter().map(|v| v * v).sum::<f64>().sqrt() <= 1e-8 * b_norm {
            break;
        }
        apply(&p, &mut ap, &mut t);
        let pap: f64 = p.iter().zip(&ap).map(|(a, b)| a * b).sum();
        if pap.is_nan() || pap <= 0.0 {
            break;
        }
        let alpha = rz / pap;
        for v in 0..n {
            x[v] += alpha * p[v];
            r[v] -= alpha * ap[v];
            z[v] = r[v] * inverse[v];
        }
        let rz_next: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
        let beta = rz_next / rz;
        for v in 0..n {
            p[v] = z[v] + beta * p[v];
        }
        rz = rz_next;
    }
    Ok(x)
}

/// At least 2 echo times, finite and strictly increasing (checked before a
/// caller reads the N_ref×L×E k-space their count sizes).
pub fn check_echo_times(echo_times: &[f64]) -> Result<()> {
    let echoes = echo_times.len();
    if echoes < 2 {
        return Err(Error::invalid(format!(
            "a B0 map needs at least 2 echoes, got {echoes}"
        )));
    }
    crate::model::check_finite("echo_times", echo_times)?;
    if let Some(e) = (1..echoes).find(|&e| echo_times[e] <= echo_times[e - 1]) {
        return Err(Error::invalid(format!(
            "echo_times must increase strictly: echo_times[{e}] = {} <= echo_times[{}] = {}",
            echo_times[e],
            e - 1,
            echo_times[e - 1]
        )));
    }
    // ω = Δφ/Δt: echoes closer than 1 ns (echo spacings are µs to ms) or a
    // span beyond float64's range give no frequency
    let span = echo_times[echoes - 1] - echo_times[0];
    if let Some(e) = (1..echoes).find(|&e| echo_times[e] - echo_times[e - 1] < 1e-9) {
        return Err(Error::invalid(format!(
            "echo_times must be at least 1 ns apart: echo_times[{e}] - echo_times[{}] = {:e} s",
            e - 1,
            echo_times[e] - echo_times[e - 1]
        )));
    }
    if !span.is_finite() {
        return Err(Error::invalid(format!(
            "echo_times span {} to {} s, beyond float64's range",
            echo_times[0],
            echo_times[echoes - 1]
        )));
    }
    Ok(())
}

/// ω from the multi-echo reference k-space (N_ref×L×E: echo slowest) with
/// echo times `echo_times` (E ≥ 2, s, strictly increasing), at `target`.
pub fn b0_map(
    grid: &ReferenceGrid,
    kspace: &[Complex32],
    coils: usize,
    echo_times: &[f64],
    options: &B0Options,
    target: &Target<'_>,
) -> Result<B0Result> {
    check_echo_times(echo_times)?;
    let echoes = echo_times.len();
    if !(options.mask_threshold.is_finite() && (0.0..1.0).contains(&options.mask_threshold)) {
        return Err(Error::invalid(format!(
            "mask_threshold must be in [0, 1), got {}",
            options.mask_threshold
        )));
    }
    if !(options.smoothness.is_finite() && options.smoothness >= 0.0) {
        return Err(Error::invalid(format!(
            "smoothness must be finite and >= 0, got {}",
            options.smoothness
        )));
    }
    check_reference_array(
        "kspace",
        kspace,
        grid,
        coils * echoes,
        "reference nx*ny*nz x ncoils x nechoes",
    )?;
    let n = grid.voxels();
    let per_echo = n * coils;
    let images: Vec<Vec<Complex64>> = (0..echoes)
        .map(|e| grid.images(&kspace[e * per_echo..(e + 1) * per_echo], coils))
        .collect::<Result<_>>()?;
    let combine = |e: usize, f: usize| -> Vec<Complex64> {
        (0..n)
            .map(|v| {
                (0..coils)
                    .map(|c| images[e][c * n + v] * images[f][c * n + v].conj())
                    .sum()
            })
            .collect()
    };
    let magnitude: Vec<f64> = combine(0, 0).iter().map(|z| z.re.max(0.0).sqrt()).collect();
    let mut sorted = magnitude.clone();
    sorted.sort_by(f64::total_cmp);
    let reference_level = sorted[((n - 1) as f64 * 0.99).round() as usize];
    if reference_level <= 0.0 {
        return Err(Error::invalid("the first echo's images are all zero"));
    }
    let mask: Vec<bool> = magnitude
        .iter()
        .map(|&m| m > 0.0 && m >= options.mask_threshold * reference_level)
        .collect();
    // 2. ω₀ from the closest pair, unwrapped in space.
    let closest = (1..echoes)
        .min_by(|&a, &b| {
            (echo_times[a] - echo_times[a - 1]).total_cmp(&(echo_times[b] - echo_times[b - 1]))
        })
        .unwrap_or(1);
    let gap = echo_times[closest] - echo_times[closest - 1];
    let z_closest = combine(closest, closest - 1);
    let mut phase: Vec<f64> = z_closest.iter().map(|z| z.arg()).collect();
    let quality: Vec<f64> = z_closest.iter().map(|z| z.norm()).collect();
    unwrap(&mut phase, &quality, &mask, grid.dims);
    // 3. Across echoes: LS slope through TE_0.
    let mut numerator = vec![0.0f64; n];
    let mut denominator = 0.0f64;
    let mut weights = vec![0.0f64; n];
    for e in 1..echoes {
        let delta = echo_times[e] - echo_times[0];
        let z = combine(e, 0);
        for v in 0..n {
            let predicted = phase[v] / gap * delta;
            let measured = z[v].arg();
            let unwrapped = measured + TAU * ((predicted - measured) / TAU).round();
            numerator[v] += delta * unwrapped;
            if e == echoes - 1 {
                weights[v] = if mask[v] { z[v].norm() } else { 0.0 };
            }
        }
        denominator += delta * delta;
    }
    let measured: Vec<f64> = numerator.iter().map(|s| s / denominator).collect();
    let masked = mask.iter().filter(|&&m| m).count().max(1);
    let mean_weight = weights.iter().sum::<f64>() / masked as f64;
    if mean_weight.is_nan() || mean_weight <= 0.0 {
        return Err(Error::invalid("the mask is empty: lower mask_threshold"));
    }
    weights.iter_mut().for_each(|w| *w /= mean_weight);
    let fitted = smooth_fit(
        &measured,
        &weights,
        options.smoothness.max(1e-9),
        grid.dims,
        options.max_iterations,
    )?;
    let omega = grid.interpolate(&fitted, 1, target.positions)?;
    Ok(B0Result {
        omega,
        reference_omega: fitted,
        mask,
    })
}
