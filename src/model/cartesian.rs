//! Cartesian sampling (issue 5 §3): the samples are the grid points where a
//! mask is non-zero, so E is an inverse DFT computed exactly with FFTs.
//!
//! The backend-neutral part: mask → sample grid points, their k-space
//! positions and the phase corrections that turn an uncentred FFT into
//! MODEL.md's E.
//!
//! # The formula
//!
//! The voxels lie on an axis-aligned grid r_i = c + (i − h)·Δ (per axis a:
//! h_a = ⌊n_a/2⌋, Δ_a = fov_a/n_a; singleton axes have k_a = 0), which is what
//! `set_grid_positions(fov, c)` makes. Sample m is the grid point p (the m-th
//! non-zero of the mask, column-major), with
//!
//! k_a = 2π (p_a − h_a) / fov_a   (rad/m),
//!
//! so that k·r_i = Σ_a 2π (p_a − h_a)(i_a − h_a)/n_a + k·c, and
//!
//! E[(m,c), i] = S_c(r_i)·exp(+i k_m·r_i)
//!             = e^{iθ_m} · [F⁻¹(S_c·x)](q_m),
//!
//! where F⁻¹ is the unnormalised inverse FFT (exp(+2πi Σ_a q_a j_a / n_a),
//! index 0 first), q_m = (p − h) mod n is the sample's FFT bin, and
//!
//! θ_m/2π = k_m·c/2π − Σ_a (p_a − h_a)·h_a / n_a   (cycles).
//!
//! This holds for odd and even n alike. Hence
//!
//! - forward: d_{m,c} = e^{iθ_m}·X_c(q_m), X_c = F⁻¹(S_c x);
//! - adjoint: x = Σ_c conj(S_c)·F(G_c), G_c(q_m) = e^{−iθ_m}·d_{m,c}, zero elsewhere;
//! - normal:  Eᴴ W E x = Σ_c conj(S_c)·F(W_q·F⁻¹(S_c x)) with W_q = Σ_{m: q_m = q} w_m
//!   (the phases cancel, so no ramps at all).
//!
//! F is the unnormalised forward FFT (exp(−2πi…)).

use crate::error::{try_vec, Error, Result};
use crate::model::Sizes;

/// Relative tolerance (of the largest grid step) of the axis-aligned grid check.
const GRID_TOLERANCE: f64 = 1e-9;

/// The axis-aligned grid the voxel positions form: per axis the field of
/// view fov_a = n_a·Δ_a (m; Δ_a may be negative for a descending axis, 0 for
/// singleton axes) and the centre c (the position of index h = ⌊n/2⌋).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridGeometry {
    pub dims: [usize; 3],
    pub fov: [f64; 3],
    pub center: [f64; 3],
}

impl GridGeometry {
    /// The geometry of voxel positions (N×3, x column then y then z), or
    /// `InvalidArgument` unless they form an axis-aligned regular grid
    /// r_i = c + (i − h)·Δ (as `set_grid_positions` makes).
    pub fn from_positions(dims: [usize; 3], positions: &[f64]) -> Result<GridGeometry> {
        let n: usize = dims.iter().product();
        if positions.len() != 3 * n {
            return Err(Error::size(format!(
                "positions have {} values, expected {} (N x 3 for the grid {dims:?})",
                positions.len(),
                3 * n
            )));
        }
        let strides = [1, dims[0], dims[0] * dims[1]];
        let at = |axis: usize, v: usize| positions[axis * n + v];
        let mut step = [0.0f64; 3];
        let mut center = [0.0f64; 3];
        for a in 0..3 {
            let h = dims[a] / 2;
            center[a] = at(a, h * strides[a]);
            if dims[a] > 1 {
                let last = at(a, (dims[a] - 1) * strides[a]);
                step[a] = (last - at(a, 0)) / (dims[a] - 1) as f64;
            }
        }
        let largest = step.iter().fold(0.0f64, |m, s| m.max(s.abs()));
        if dims.iter().any(|&d| d > 1) && largest == 0.0 {
            return Err(Error::invalid(
                "Cartesian mode needs voxel positions on a grid, but all voxels coincide",
            ));
        }
        if let Some(a) = (0..3).find(|&a| dims[a] > 1 && step[a] == 0.0) {
            return Err(Error::invalid(format!(
                "Cartesian mode needs voxel positions on a grid, but the voxels along axis {} \
                 do not move in {}",
                ["x", "y", "z"][a],
                ["x", "y", "z"][a]
            )));
        }
        let tolerance = GRID_TOLERANCE * largest;
        for v in 0..n {
            let index = [v % dims[0], (v / dims[0]) % dims[1], v / strides[2]];
            for a in 0..3 {
                let expect = center[a] + (index[a] as f64 - (dims[a] / 2) as f64) * step[a];
                let off = (at(a, v) - expect).abs();
                if off > tolerance {
                    return Err(Error::invalid(format!(
                        "Cartesian mode needs voxel positions on an axis-aligned regular grid \
                         (r = c + (i - floor(n/2))*fov/n per axis, as horecon_set_grid_positions \
                         makes): coordinate {} of voxel {v} is {off:.3e} m off it",
                        ["x", "y", "z"][a]
                    )));
                }
            }
        }
        Ok(GridGeometry {
            dims,
            fov: [0, 1, 2].map(|a| step[a] * dims[a] as f64),
            center,
        })
    }
}

/// A Cartesian sampling pattern on a plan's grid, ready for an FFT backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Cartesian {
    pub geometry: GridGeometry,
    /// Per sample m: the grid point p_m (column-major linear index).
    pub points: Vec<usize>,
    /// Per sample m: its FFT bin q_m = (p_m − h) mod n (column-major linear index).
    pub bins: Vec<usize>,
    /// Per sample m: θ_m/2π in cycles (see the module documentation).
    pub phase_cycles: Vec<f64>,
}

impl Cartesian {
    /// `SizeMismatch` unless this sampling is of a plan of `sizes` (its grid,
    /// its samples, every FFT bin inside the grid): what the backends assume.
    pub fn check_sizes(&self, sizes: Sizes) -> Result<()> {
        let m = sizes.samples;
        let consistent = self.points.len() == m
            && self.bins.len() == m
            && self.phase_cycles.len() == m
            && self
                .points
                .iter()
                .chain(&self.bins)
                .all(|&p| p < sizes.voxels);
        if self.geometry.dims != sizes.dims || !consistent {
            return Err(Error::size(format!(
                "cartesian: a sampling of the grid {:?} with {} samples, for a plan of {:?} \
                 with {m} samples (make it with Cartesian::new for these sizes)",
                self.geometry.dims,
                self.bins.len(),
                sizes.dims
            )));
        }
        Ok(())
    }

    /// The samples of `mask` (nx·ny·nz bytes, column-major, ≠ 0 = sampled)
    /// on the grid of `positions`. Checks the mask size and that the number
    /// of sampled points equals the plan's nsamples (`SizeMismatch`), and the
    /// grid (`InvalidArgument`).
    pub fn new(sizes: Sizes, positions: &[f64], mask: &[u8]) -> Result<Cartesian> {
        if mask.len() != sizes.voxels {
            return Err(Error::size(format!(
                "mask has {} elements, expected {} (N = nx*ny*nz)",
                mask.len(),
                sizes.voxels
            )));
        }
        let count = mask.iter().filter(|&&b| b != 0).count();
        if count != sizes.samples {
            return Err(Error::size(format!(
                "mask has {count} non-zero points but the plan has nsamples = {}: \
                 they must be equal",
                sizes.samples
            )));
        }
        let geometry = GridGeometry::from_positions(sizes.dims, positions)?;
        let dims = sizes.dims;
        let mut points = try_vec(count, 0usize, "Cartesian sample points (M)")?;
        let mut bins = try_vec(count, 0usize, "Cartesian FFT bins (M)")?;
        let mut phase_cycles = try_vec(count, 0.0f64, "Cartesian phases (M)")?;
        let sampled = mask.iter().enumerate().filter(|(_, &b)| b != 0);
        for (m, (p, _)) in sampled.enumerate() {
            let index = [
                p % dims[0],
                (p / dims[0]) % dims[1],
                p / (dims[0] * dims[1]),
            ];
            let mut bin = 0;
            let mut stride = 1;
            let mut cycles = 0.0;
            for a in 0..3 {
                let (n, h) = (dims[a], dims[a] / 2);
                // (p − h) mod n, and the integer (p − h)·h mod n for an exact fraction.
                let shifted = (index[a] + n - h) % n;
                bin += shifted * stride;
                stride *= n;
                let centred = index[a] as i64 - h as i64;
                if n > 1 {
                    cycles += centred as f64 * geometry.center[a] / geometry.fov[a];
                    let ramp = (centred * h as i64).rem_euclid(n as i64);
                    cycles -= ramp as f64 / n as f64;
                }
            }
            points[m] = p;
            bins[m] = bin;
            phase_cycles[m] = cycles - cycles.round();
        }
        Ok(Cartesian {
            geometry,
            points,
            bins,
            phase_cycles,
        })
    }

    /// The k-space positions (M×3 rad/m, k_x column first) of the samples:
    /// k_a = 2π(p_a − h_a)/fov_a, 0 on singleton axes. Setting this
    /// trajectory makes the exact (DFT) path compute the same E.
    pub fn trajectory(&self) -> Result<Vec<f64>> {
        let dims = self.geometry.dims;
        let m = self.points.len();
        let mut k = try_vec(3 * m, 0.0f64, "Cartesian trajectory (M x 3)")?;
        for (j, &p) in self.points.iter().enumerate() {
            let index = [
                p % dims[0],
                (p / dims[0]) % dims[1],
                p / (dims[0] * dims[1]),
            ];
            for a in 0..3 {
                if dims[a] > 1 {
                    let centred = index[a] as f64 - (dims[a] / 2) as f64;
                    k[a * m + j] = 2.0 * std::f64::consts::PI * centred / self.geometry.fov[a];
                }
            }
        }
        Ok(k)
    }

    /// The per-bin weights W_q of the normal operator (n0·n1·n2, FFT order):
    /// Σ of the sample weights w_m (1 when `None`) of the samples in bin q.
    pub fn bin_weights(&self, weights: Option<&[f32]>) -> Result<Vec<f64>> {
        let n: usize = self.geometry.dims.iter().product();
        let mut w = try_vec(n, 0.0f64, "Cartesian bin weights (N)")?;
        for (j, &q) in self.bins.iter().enumerate() {
            w[q] += weights.map_or(1.0, |w| w[j] as f64);
        }
        Ok(w)
    }
}
