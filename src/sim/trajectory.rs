//! k-space trajectories in rad/m with sample times in s (after excitation).
//!
//! An n-point grid with field of view `fov` has Nyquist spacing
//! Δk = 2π/fov and reaches k_max = π·n/fov (the FFT-centred grid of MODEL.md).

use crate::error::{Error, Result};
use std::f64::consts::PI;

/// Gradient ramp (s) at the start of a spiral: the slew-limited part.
pub const SPIRAL_RAMP_TIME: f64 = 2e-4;

/// M samples: k (M×ndims, rad/m, sample index fastest) and times (M, s).
#[derive(Clone, Debug, PartialEq)]
pub struct Trajectory {
    pub ndims: usize,
    pub k: Vec<f64>,
    pub times: Vec<f64>,
}

impl Trajectory {
    pub fn samples(&self) -> usize {
        self.times.len()
    }

    /// M samples: `sample(j)` gives the point (k, first `ndims` used) and time of sample j.
    fn tabulate(
        ndims: usize,
        m: usize,
        mut sample: impl FnMut(usize) -> ([f64; 3], f64),
    ) -> Result<Trajectory> {
        let mut k = crate::error::try_vec(ndims * m, 0.0, "k (M x ndims)")?;
        let times = super::tabulate(m, "times (M)", |j| {
            let (p, t) = sample(j);
            for d in 0..ndims {
                k[d * m + j] = p[d];
            }
            t
        })?;
        Ok(Trajectory { ndims, k, times })
    }
}

fn check_grid(n: i64, fov: f64, dwell: f64, t0: f64) -> Result<usize> {
    if !(1..=1 << 16).contains(&n) {
        return Err(Error::invalid(format!("n must be 1..65536, got {n}")));
    }
    if !(fov.is_finite() && fov > 0.0) {
        return Err(Error::invalid(format!("fov must be > 0 metres, got {fov}")));
    }
    if !(dwell.is_finite() && dwell > 0.0) {
        return Err(Error::invalid(format!(
            "dwell must be > 0 seconds, got {dwell}"
        )));
    }
    if !t0.is_finite() {
        return Err(Error::invalid(format!("t0 must be finite, got {t0}")));
    }
    Ok(n as usize)
}

/// Arc length of the Archimedean spiral r = b·θ from 0 to θ.
fn arc_length(b: f64, theta: f64) -> f64 {
    0.5 * b * (theta * (1.0 + theta * theta).sqrt() + theta.asinh())
}

/// Points (kx, ky) of a single-shot Archimedean spiral out to k_max = π·n/fov
/// with n/(2R) turns (R = undersampling: radial spacing R·Δk), read with constant
/// k-space speed Δk/dwell after a linear ramp of [`SPIRAL_RAMP_TIME`].
fn spiral_points(n: usize, fov: f64, undersampling: f64, dwell: f64) -> Result<Vec<[f64; 2]>> {
    if !(undersampling.is_finite() && undersampling >= 0.1) {
        return Err(Error::invalid(format!(
            "undersampling must be >= 0.1, got {undersampling}"
        )));
    }
    let kmax = PI * n as f64 / fov;
    let turns = (n as f64 / (2.0 * undersampling)).max(0.5);
    let theta_max = 2.0 * PI * turns;
    let b = kmax / theta_max;
    let total = arc_length(b, theta_max);
    let speed = 2.0 * PI / fov / dwell; // one Nyquist step per dwell along the readout
    let ramp = SPIRAL_RAMP_TIME;
    let s_of_t = |t: f64| {
        if t < ramp {
            speed * t * t / (2.0 * ramp)
        } else {
            speed * (t - ramp / 2.0)
        }
    };
    let duration = if total < speed * ramp / 2.0 {
        (2.0 * ramp * total / speed).sqrt()
    } else {
        total / speed + ramp / 2.0
    };
    let samples = (duration / dwell).ceil() + 1.0;
    if samples.is_nan() || samples > (1u64 << 26) as f64 {
        return Err(Error::invalid(format!(
            "the spiral would have {samples} samples (at most 2^26): use a larger dwell or \
             undersampling, or a smaller n"
        )));
    }
    let m = samples as usize;
    let mut points = crate::error::try_vec(m, [0.0; 2], "spiral points (M x 2)")?;
    let mut theta = 0.0f64;
    let progress = crate::progress::Progress::current();
    for (j, point) in points.iter_mut().enumerate() {
        if j % (1 << 14) == 0 {
            progress.check(j as f64 / m as f64)?;
        }
        let s = s_of_t(j as f64 * dwell).min(total);
        // Newton on arc_length(θ) = s, ds/dθ = b·√(1+θ²), from the previous θ.
        for _ in 0..50 {
            let f = arc_length(b, theta) - s;
            let step = f / (b * (1.0 + theta * theta).sqrt());
            theta = (theta - step).clamp(0.0, theta_max);
            if step.abs() < 1e-13 * (1.0 + theta) {
                break;
            }
        }
        let r = b * theta;
        *point = [r * theta.cos(), r * theta.sin()];
    }
    Ok(points)
}

/// A single-shot 2D spiral (see `spiral_points`), times t0 + j·dwell.
pub fn spiral(n: i64, fov: f64, undersampling: f64, dwell: f64, t0: f64) -> Result<Trajectory> {
    let n = check_grid(n, fov, dwell, t0)?;
    let points = spiral_points(n, fov, undersampling, dwell)?;
    Trajectory::tabulate(2, points.len(), |j| {
        ([points[j][0], points[j][1], 0.0], t0 + j as f64 * dwell)
    })
}

/// `spokes` radial spokes through the centre at angles π·p/spokes, 2n samples
/// each from −k_max in steps Δk/2; every spoke is its own shot (times restart).
pub fn radial(n: i64, fov: f64, spokes: i64, dwell: f64, t0: f64) -> Result<Trajectory> {
    let n = check_grid(n, fov, dwell, t0)?;
    if !(1..=1 << 20).contains(&spokes) {
        return Err(Error::invalid(format!(
            "spokes must be 1..2^20, got {spokes}"
        )));
    }
    let dk = 2.0 * PI / fov;
    let per_spoke = 2 * n;
    let m = super::sim_count("spokes x 2n", &[spokes as usize, per_spoke])?;
    Trajectory::tabulate(2, m, |j| {
        let (p, i) = (j / per_spoke, j % per_spoke);
        let (s, c) = (PI * p as f64 / spokes as f64).sin_cos();
        let radius = (i as f64 - n as f64) * dk / 2.0;
        ([radius * c, radius * s, 0.0], t0 + i as f64 * dwell)
    })
}

/// Single-shot EPI: n/R lines ky = (l·R − n/2)·Δk, n samples per line in
/// alternating directions, times continuous (blips take no time).
pub fn epi(n: i64, fov: f64, undersampling: i64, dwell: f64, t0: f64) -> Result<Trajectory> {
    let n = check_grid(n, fov, dwell, t0)?;
    if !(1..=n as i64).contains(&undersampling) {
        return Err(Error::invalid(format!(
            "undersampling must be 1..n, got {undersampling}"
        )));
    }
    let r = undersampling as usize;
    let dk = 2.0 * PI / fov;
    let half = (n / 2) as f64;
    let m = super::sim_count("n x n/undersampling", &[n.div_ceil(r), n])?;
    Trajectory::tabulate(2, m, |j| {
        let (l, i) = (j / n, j % n);
        let ky = ((l * r) as f64 - half) * dk;
        let ix = if l % 2 == 0 { i } else { n - 1 - i };
        ([(ix as f64 - half) * dk, ky, 0.0], t0 + j as f64 * dwell)
    })
}

/// The full Cartesian grid, one line per shot: k = ((ix − nx/2)·2π/fov_x,
/// (iy − ny/2)·2π/fov_y), times t0 + ix·dwell.
pub fn cartesian(
    nx: i64,
    ny: i64,
    fov_x: f64,
    fov_y: f64,
    dwell: f64,
    t0: f64,
) -> Result<Trajectory> {
    let nx = check_grid(nx, fov_x, dwell, t0)?;
    let ny = check_grid(ny, fov_y, dwell, t0)?;
    let m = super::sim_count("nx x ny", &[nx, ny])?;
    Trajectory::tabulate(2, m, |j| {
        let (ix, iy) = (j % nx, j / nx);
        let k = [
            (ix as f64 - (nx / 2) as f64) * 2.0 * PI / fov_x,
            (iy as f64 - (ny / 2) as f64) * 2.0 * PI / fov_y,
            0.0,
        ];
        (k, t0 + ix as f64 * dwell)
    })
}

/// A stack of spirals: the 2D spiral on nz partitions kz = (p − nz/2)·2π/fov_z,
/// one shot each (times restart).
pub fn stack_of_spirals(
    n: i64,
    nz: i64,
    fov: f64,
    fov_z: f64,
    undersampling: f64,
    dwell: f64,
    t0: f64,
) -> Result<Trajectory> {
    let n = check_grid(n, fov, dwell, t0)?;
    let nz = check_grid(nz, fov_z, dwell, t0)?;
    let spiral = spiral_points(n, fov, undersampling, dwell)?;
    let per = spiral.len();
    let m = super::sim_count("spiral samples x nz", &[per, nz])?;
    Trajectory::tabulate(3, m, |i| {
        let (p, j) = (i / per, i % per);
        let kz = (p as f64 - (nz / 2) as f64) * 2.0 * PI / fov_z;
        ([spiral[j][0], spiral[j][1], kz], t0 + j as f64 * dwell)
    })
}

/// Density-compensation weights of a continuous 2D readout (Hoge et al. 1997):
/// w_j = |k_j × (k_{j+1} − k_{j−1})/2|, the area a sample covers on a spiral,
/// normalised to mean 1 (float32, for `sample_weights` of the CG).
pub fn density_weights_2d(k: &[f64]) -> Result<Vec<f32>> {
    if k.len() % 2 != 0 || k.len() < 4 {
        return Err(Error::size(format!(
            "k has {} elements, not M x 2 with M >= 2",
            k.len()
        )));
    }
    crate::model::check_finite("k", k)?;
    let m = k.len() / 2;
    let (kx, ky) = k.split_at(m);
    let raw = super::tabulate(m, "density weights (M)", |j| {
        let (a, b) = (j.saturating_sub(1), (j + 1).min(m - 1));
        let (dx, dy) = ((kx[b] - kx[a]) / 2.0, (ky[b] - ky[a]) / 2.0);
        (kx[j] * dy - ky[j] * dx).abs()
    })?;
    let mean = raw.iter().sum::<f64>() / m as f64;
    if mean <= 0.0 {
        return Err(Error::invalid(
            "the trajectory covers no area (all weights are zero)",
        ));
    }
    if !mean.is_finite() {
        return Err(Error::invalid(
            "k is too large: the density weights overflow (k in rad/m, |k| well below 1e150)",
        ));
    }
    // A floor keeps the k-space centre in the fit.
    super::tabulate(m, "density weights (M)", |j| {
        (raw[j] / mean).max(1e-3) as f32
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn radius(t: &Trajectory, j: usize) -> f64 {
        let m = t.samples();
        (0..t.ndims.min(2))
            .map(|d| t.k[d * m + j].powi(2))
            .sum::<f64>()
            .sqrt()
    }

    #[test]
    fn spiral_reaches_kmax_with_the_requested_turns_and_speed() {
        let (n, fov, dwell) = (160, 0.22, 4e-6);
        for r in [1.0, 3.0] {
            let t = spiral(n, fov, r, dwell, 1e-3).unwrap();
            let m = t.samples();
            let kmax = PI * n as f64 / fov;
            assert!(radius(&t, 0) < 1e-9);
            assert!((radius(&t, m - 1) - kmax).abs() < 1e-6 * kmax);
            // Steps along the readout never exceed one Nyquist step Δk = 2π/fov.
            let dk = 2.0 * PI / fov;
            let max_step = (1..m)
                .map(|j| {
                    ((t.k[j] - t.k[j - 1]).powi(2) + (t.k[m + j] - t.k[m + j - 1]).powi(2)).sqrt()
                })
                .fold(0.0, f64::max);
            assert!(max_step <= dk * 1.0001, "step {max_step} > {dk}");
            // Turns: count the angle wraps.
            let wraps = (1..m)
                .filter(|&j| t.k[m + j - 1] < 0.0 && t.k[m + j] >= 0.0 && t.k[j] > 0.0)
                .count() as f64;
            let turns = n as f64 / (2.0 * r);
            assert!(
                (wraps - turns).abs() <= 1.0,
                "{wraps} turns, expected {turns}"
            );
            assert!((t.times[1] - t.times[0] - dwell).abs() < 1e-15 && t.times[0] == 1e-3);
            // Peak gradient |dk/dt|/γ = Δk/dwell/γ for this setup is ~27 mT/m.
            let g = max_step / dwell / crate::sim::GAMMA;
            assert!(g < 0.04, "peak gradient {g} T/m");
            eprintln!(
                "R = {r}: {m} samples, {:.1} ms, peak gradient {:.1} mT/m",
                m as f64 * dwell * 1e3,
                g * 1e3
            );
        }
    }

    #[test]
    fn cartesian_radial_epi_and_stack_shapes() {
        let (fov, dwell) = (0.2, 5e-6);
        let c = cartesian(8, 6, fov, 0.3, dwell, 0.0).unwrap();
        assert_eq!((c.samples(), c.ndims), (48, 2));
        assert!((c.k[0] + 4.0 * 2.0 * PI / fov).abs() < 1e-12); // kx = −nx/2·Δk
        assert!((c.k[48] + 3.0 * 2.0 * PI / 0.3).abs() < 1e-12); // ky = −ny/2·Δk_y
        assert!((c.times[7] - 7.0 * dwell).abs() < 1e-18 && c.times[8] == 0.0);

        let r = radial(16, fov, 10, dwell, 0.0).unwrap();
        assert_eq!(r.samples(), 10 * 32);
        assert!((radius(&r, 0) - PI * 16.0 / fov).abs() < 1e-9);
        assert!(radius(&r, 16) < 1e-9); // the centre of every spoke

        let e = epi(16, fov, 2, dwell, 0.0).unwrap();
        assert_eq!(e.samples(), 8 * 16);
        let m = e.samples();
        assert!((e.k[m + 16] - e.k[m] - 2.0 * 2.0 * PI / fov).abs() < 1e-9); // ky step R·Δk
        assert_eq!(e.k[15], e.k[16]); // the second line runs backwards

        let s = stack_of_spirals(32, 4, fov, 0.05, 2.0, dwell, 0.0).unwrap();
        let per = spiral(32, fov, 2.0, dwell, 0.0).unwrap().samples();
        assert_eq!((s.samples(), s.ndims), (4 * per, 3));
        assert!((s.k[2 * s.samples()] + 2.0 * 2.0 * PI / 0.05).abs() < 1e-9);

        // Spiral weights grow with |k| (constant speed: w ∝ |k|·Δk·sin).
        let sp = spiral(64, fov, 2.0, dwell, 0.0).unwrap();
        let w = density_weights_2d(&sp.k).unwrap();
        let (m, last) = (sp.samples(), sp.samples() - 2);
        let mean: f64 = w.iter().map(|&v| v as f64).sum::<f64>() / m as f64;
        assert!((mean - 1.0).abs() < 1e-3);
        assert!(w[last] > 10.0 * w[m / 50]);
        assert!(density_weights_2d(&sp.k[..3]).is_err());

        assert!(spiral(0, fov, 3.0, dwell, 0.0).is_err());
        assert!(spiral(16, -1.0, 3.0, dwell, 0.0).is_err());
        assert!(epi(16, fov, 0, dwell, 0.0).is_err());
    }
}
