//! The separable expansion of the residual phase (FAST-PATH.md §3):
//!
//! $$e^{i\psi(j,n)} \approx \sum_{l=1}^{K} a_l(t_j)\, b_l(r_n),\qquad
//!   \psi(j,n) = u(j)\cdot g(n)$$
//!
//! Method (a skeleton form of singular-vector separation, Wilm et al. IEEE
//! TMI 2012, and of time segmentation, Fessler et al. 2005):
//!
//! 1. The weighted matrix Z = D_t Ψ D_v of Ψ = exp(iψ) on a sample of times
//!    (all, or evenly spaced) and of voxels, with ‖Z‖_F = 1. The voxel
//!    sample represents the operator's error weights w_n = Σ_c |S_c(n)|²:
//!    all voxels when few, a histogram of g (clustering in the space of basis
//!    values) when one residual term remains, else voxels drawn ∝ w_n.
//! 2. Column-pivoted QR of Z picks skeleton voxels J until the part of Z
//!    outside their span is below a fraction of the target, run on a sparse
//!    random sketch Ω·Z of a few more rows than pivots (a randomized
//!    interpolative decomposition); column-pivoted QR of Cᵀ, C = Z(:, J),
//!    then picks the skeleton times I (segment times) among the rows of C
//!    (Voronin and Martinsson's CUR from an ID: Z ≈ C·X and C ≈ W·C(I, :),
//!    so Z ≈ W·Z(I, :)).
//! 3. Z ≈ C·G·R with C = Z(:, J), R = Z(I, :) and the best core of rank K:
//!    with C = Q_c T_c and Rᴴ = Q_r T_r, the SVD of Q_cᴴ Z Q_r = P Σ Qᴴ gives
//!    the relative Frobenius error ε(K)² = 1 − ‖Q_cᴴ Z Q_r‖² + Σ_{l>K} σ_l²,
//!    the error of the operator on random images (not of the factors).
//! 4. For any time and voxel, a(t) = e_J(t)ᵀ Y and b(n) = X e_I(n) with
//!    e_J(t) = exp(i u(t)·g_J), e_I(n) = exp(i u_I·g(n)),
//!    Y = D_J T_c⁻¹ P_K Σ_K and X = Q_Kᴴ T_r⁻ᴴ D_I.
//! 5. K is the smallest rank whose error is within the target both on the
//!    sample and on a second, independent sample of times and voxels.

use crate::backend::cpu::kernel::on_widest_isa;
use crate::backend::cpu::trig::unit_phasors;
use crate::error::{checked_len, try_vec, Error, Result, Status};
use crate::reduce::{lanes, LANES};
use faer::{c64, Mat, MatRef};
use num_complex::Complex64;
use rayon::prelude::*;
use std::f64::consts::TAU;

/// Times and voxels of the sampled matrix (at most).
const SAMPLE_TIMES: usize = 1024;
pub const SAMPLE_VOXELS: usize = 1024;
/// The drawn sample of a build whose check fails at every rank, as a
/// multiple of [`SAMPLE_VOXELS`] (also the plan's retry,
/// `plan::approximation`).
pub const WIDER_SAMPLE: usize = 4;
/// Times and voxels of the independent check. 1,024 voxels, not 256: on
/// rough models whose error sits on few voxels (16 harmonics of ~15 rad each
/// with a noisy 500 Hz map) 256 saw none of it and the plan erred 1.36× its
/// tolerance; 1,024 send the build to a wider sample and the certificate
/// then leaves it exact (ho3d-77k's expansion: +5 ms).
const CHECK_TIMES: usize = 256;
const CHECK_VOXELS: usize = 1024;
/// Voxels added to a drawn sample to cover the range of g ([`coverage`]).
const COVERAGE_FAR: usize = 128;
const COVERAGE_EVEN: usize = 256;
/// The phase change (radians) within one histogram bin where at most
/// [`HISTOGRAM_BINS`] bins of it span the basis values.
const BIN_PHASE: f64 = 0.05;
/// Bins of the one-term histogram beyond which they widen, up to
/// [`WIDE_BIN_PHASE`].
const HISTOGRAM_BINS: usize = 4096;
/// The widest bin (phase change, radians). b_l(g) = Σ_i X_{l,i} exp(i u_i g)
/// with |u_i| ≤ u_max is band-limited in g, so nodes whose phase steps stay
/// below π/2 sample it (and the error Ψ − Σ a_l b_l) at more than twice the
/// Nyquist rate: the fit on them holds between them. A drawn voxel sample
/// has no such bound in the tails of g (a rough off-resonance map, 485 rad
/// over the readout, took one when 0.05 rad bins were too many: the
/// operator erred 2.2× and 7.8× the tolerances 1e-2 and 1e-3).
const WIDE_BIN_PHASE: f64 = 0.5;
/// The most skeleton points per side, and so the largest rank.
pub const MAX_RANK: usize = 64;
/// The skeletons stop when the part of Z outside their span is below this
/// fraction of the target.
const SKELETON_FRACTION: f64 = 0.2;

/// The relative error an expansion is built for: the smallest rank within
/// `aim` where at most [`MAX_RANK`] terms reach it, else the expansion built
/// for `bound` alone (aim ≤ bound; a plain number is both).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    pub aim: f64,
    pub bound: f64,
    /// Voxels drawn for the sampled matrix where there are more
    /// ([`SAMPLE_VOXELS`] unless a retry asks for more).
    pub voxels: usize,
}

impl From<f64> for Target {
    fn from(target: f64) -> Target {
        Target {
            aim: target,
            bound: target,
            voxels: SAMPLE_VOXELS,
        }
    }
}

/// How the voxels were represented when the expansion was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// No residual phase: K = 1, a = b = 1 (a plain NUFFT).
    Linear,
    /// Every voxel.
    AllVoxels,
    /// A histogram of the single residual basis function.
    Histogram,
    /// Voxels drawn with probability ∝ w_n.
    SampledVoxels,
}

/// a_l(t) and b_l(r) as skeletons (step 4): evaluated at any time or voxel
/// by [`Skeleton::evaluate_all`] on the host, or on the GPU from the same
/// skeleton (src/backend/cuda/fast.rs).
#[derive(Clone, Debug)]
pub struct Expansion {
    pub rank: usize,
    /// a_l(t) = Σ_{j∈J} exp(i u(t)·g_j)·Y_{j,l}: the skeleton voxels J.
    pub temporal: Skeleton,
    /// b_l(n) = Σ_{i∈I} exp(i g(n)·u_i)·X_{l,i}: the skeleton times I.
    pub spatial: Skeleton,
    /// The larger of the sampled and the independently checked relative error.
    pub sampled_error: f64,
    pub method: Method,
}

/// Points (times or voxels) of a sample: their P features (point fastest within
/// each feature) and their weights (summing to 1).
struct Sample {
    features: Vec<f64>,
    weights: Vec<f64>,
}

impl Sample {
    fn len(&self) -> usize {
        self.weights.len()
    }

    fn feature(&self, p: usize, i: usize) -> f64 {
        self.features[p * self.len() + i]
    }

    /// exp(i Σ_p u_p(t) g_p) at every point t of this (time) sample for the
    /// point `v` of `voxels` (P terms), into `re` and `im`; `cycles` is
    /// scratch (each as long as this sample).
    fn phasors(&self, voxels: &Sample, v: usize, [cycles, re, im]: [&mut [f64]; 3]) {
        let st = self.len();
        cycles.fill(0.0);
        on_widest_isa(
            #[inline(always)]
            || {
                for p in 0..self.features.len() / st.max(1) {
                    let g = voxels.feature(p, v) / TAU;
                    let u = &self.features[p * st..(p + 1) * st];
                    cycles.iter_mut().zip(u).for_each(|(c, &u)| *c += u * g);
                }
            },
        );
        unit_phasors(cycles, re, im);
    }

    /// The points `indices` of P×count `values`, equally weighted.
    fn pick(values: &[f64], terms: usize, indices: &[usize]) -> Sample {
        let count = values.len() / terms.max(1);
        let s = indices.len();
        let mut features = vec![0.0; terms * s];
        for p in 0..terms {
            for (i, &k) in indices.iter().enumerate() {
                features[p * s + i] = values[p * count + k];
            }
        }
        Sample {
            features,
            weights: vec![1.0 / s as f64; s],
        }
    }
}

/// `count` indices evenly spread over 0..total, the first and last
/// included (all when total ≤ count).
pub(crate) fn even(total: usize, count: usize) -> Vec<usize> {
    if total <= count {
        (0..total).collect()
    } else {
        (0..count)
            .map(|i| (i * (total - 1)) / (count - 1).max(1))
            .collect()
    }
}

/// `count` indices drawn ∝ `weights` by systematic sampling with offset `phase` ∈ [0, 1).
fn weighted(weights: &[f64], count: usize, phase: f64) -> Vec<usize> {
    let total: f64 = weights.iter().sum();
    if total.is_nan() || total <= 0.0 {
        return even(weights.len(), count);
    }
    let step = total / count as f64;
    let mut out = Vec::with_capacity(count);
    let mut cumulative = 0.0;
    let mut next = phase * step;
    for (i, &w) in weights.iter().enumerate() {
        cumulative += w;
        while next < cumulative && out.len() < count {
            out.push(i);
            next += step;
        }
    }
    while out.len() < count {
        out.push(weights.len() - 1);
    }
    out
}

/// The voxel sample of the fit: all voxels, a histogram, or weighted draws.
fn voxel_sample(
    g: &[f64],
    terms: usize,
    weights: &[f64],
    (u_max, drawn): (f64, usize),
    lattice_cover: &[usize],
) -> (Sample, Method) {
    let n = weights.len();
    let total: f64 = weights.iter().sum();
    let normalised: Vec<f64> = if total > 0.0 {
        weights.iter().map(|w| w / total).collect()
    } else {
        vec![1.0 / n as f64; n]
    };
    if n <= drawn {
        let all: Vec<usize> = (0..n).collect();
        let mut s = Sample::pick(g, terms, &all);
        s.weights = normalised;
        return (s, Method::AllVoxels);
    }
    if terms == 1 {
        // Nodes at most BIN_PHASE apart (WIDE_BIN_PHASE where that takes more
        // than HISTOGRAM_BINS), the first and last at the extremes of g, each
        // carrying the weight of the voxels nearest to it: the fit sees every
        // voxel's weight, b_l is never extrapolated (the extreme voxel half a
        // bin beyond the last bin's centre erred by 2.5e-2 at rank 61), and
        // the check sample tests the real values.
        let (lo, hi) = g
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        let u_max = u_max.max(1e-300);
        let width = (BIN_PHASE / u_max).max((hi - lo) / HISTOGRAM_BINS as f64);
        if width * u_max <= WIDE_BIN_PHASE {
            let steps = ((hi - lo) / width).ceil().max(1.0) as usize;
            let spacing = (hi - lo) / steps as f64;
            let node = |x: f64| {
                if spacing > 0.0 {
                    (((x - lo) / spacing).round() as usize).min(steps)
                } else {
                    0
                }
            };
            let mut mass = vec![0.0; steps + 1];
            for (&x, &w) in g.iter().zip(&normalised) {
                mass[node(x)] += w;
            }
            let kept: Vec<usize> = (0..=steps).filter(|&b| mass[b] > 0.0).collect();
            return (
                Sample {
                    features: kept.iter().map(|&b| lo + b as f64 * spacing).collect(),
                    weights: kept.iter().map(|&b| mass[b]).collect(),
                },
                Method::Histogram,
            );
        }
    }
    let mut picked = weighted(&normalised, drawn, 0.5);
    picked.extend(coverage(g, terms, n));
    picked.extend(lattice_cover.iter().copied().filter(|&v| v < n));
    picked.sort_unstable();
    picked.dedup();
    (Sample::pick(g, terms, &picked), Method::SampledVoxels)
}

/// The first indices of the smallest and the largest value of `column`
/// ((0, 0) when it is empty).
pub fn extreme_indices(column: &[f64]) -> (usize, usize) {
    column.iter().enumerate().fold((0, 0), |(lo, hi), (v, &x)| {
        (
            if x < column[lo] { v } else { lo },
            if x > column[hi] { v } else { hi },
        )
    })
}

/// Voxels that cover the range of the basis values, so that b_l is never
/// extrapolated (a rare voxel with an extreme g, such as a corner of a 3D
/// field of view for third-order terms, would otherwise carry an error of
/// order 1): the extremes of each g_p, the [`COVERAGE_FAR`] voxels farthest
/// from the mean in standardised g, and [`COVERAGE_EVEN`] voxels evenly spread
/// over the index. They enter the sample with the same weight as the others.
fn coverage(g: &[f64], terms: usize, n: usize) -> Vec<usize> {
    // Per term: its extremes, mean and standard deviation.
    let stats: Vec<((usize, usize), f64, f64)> = (0..terms)
        .into_par_iter()
        .map(|p| {
            let column = &g[p * n..(p + 1) * n];
            let mean = column.iter().sum::<f64>() / n as f64;
            let var = column.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            (extreme_indices(column), mean, var.sqrt().max(1e-300))
        })
        .collect();
    let mut out: Vec<usize> = stats.iter().flat_map(|s| [s.0 .0, s.0 .1]).collect();
    let mean: Vec<f64> = stats.iter().map(|s| s.1).collect();
    let spread: Vec<f64> = stats.iter().map(|s| s.2).collect();
    let distance = |v: usize| -> f64 {
        (0..terms)
            .map(|p| ((g[p * n + v] - mean[p]) / spread[p]).powi(2))
            .sum()
    };
    let mut far: Vec<(f64, usize)> = (0..n).into_par_iter().map(|v| (distance(v), v)).collect();
    let keep = COVERAGE_FAR.min(n);
    if keep > 0 && keep < far.len() {
        far.select_nth_unstable_by(keep - 1, |a, b| b.0.total_cmp(&a.0));
    }
    out.extend(far[..keep].iter().map(|e| e.1));
    out.extend(even(n, COVERAGE_EVEN));
    out
}

/// Z = D_t Ψ D_v on the sample (times × voxels), column-major, its columns
/// in parallel, each column's phases (in cycles) summed over the terms and
/// turned into phasors at once ([`unit_phasors`]). Its memory comes from
/// [`try_vec`] (first touched in parallel, huge pages), not from a serial
/// zeroing pass, which took twice as long as the phasors.
fn weighted_matrix(times: &Sample, voxels: &Sample) -> Result<Vec<c64>> {
    let st = times.len();
    let root: Vec<f64> = times.weights.iter().map(|w| w.sqrt()).collect();
    let len = checked_len(st, voxels.len(), "sampled phase matrix")?;
    let mut z = try_vec(len, c64::new(0.0, 0.0), "sampled phase matrix")?;
    z.par_chunks_mut(st.max(1)).enumerate().for_each_init(
        || [vec![0.0; st], vec![0.0; st], vec![0.0; st]],
        |[cycles, re, im], (v, column)| {
            times.phasors(voxels, v, [cycles, re, im]);
            let w = voxels.weights[v].sqrt();
            on_widest_isa(
                #[inline(always)]
                || {
                    let values = column.iter_mut().zip(&root).zip(re.iter().zip(&*im));
                    for ((x, &root), (&re, &im)) in values {
                        *x = c64::new(re * root * w, im * root * w);
                    }
                },
            );
        },
    );
    Ok(z)
}

/// Rows of the first random sketch from which a skeleton is picked.
const SKETCH_ROWS: usize = 64;
/// Rows a sketch keeps beyond the pivots picked from it; fewer, and the
/// sketch is redone with twice the rows.
const SKETCH_MARGIN: usize = 12;

/// The first pivots ([`pivots`]) of the columns of A (column-major, one
/// slice), picked from the columns of Ω·A, Ω a sparse s × rows sketch with
/// one unit-modulus entry per column (CountSketch: row r of A is added with
/// a pseudo-random phase ζ_r to sketch row h(r)), so that forming Ω·A is one
/// pass over A, and E‖Ω a‖² = ‖a‖² keeps the relative stopping rule (a
/// randomized interpolative decomposition). s doubles from [`SKETCH_ROWS`]
/// until it exceeds the pivots by [`SKETCH_MARGIN`]; from A itself once s
/// would reach its rows. (A dense unit-modulus Ω of 32 rows picked the same
/// ranks for the benchmark cases at 1e-2 … 1e-4, at twice the time.)
fn sketched_pivots(a: &[c64], rows: usize, seed: u64, stop: f64) -> Vec<usize> {
    let mut s = SKETCH_ROWS;
    loop {
        if s >= rows {
            let columns = a.chunks_exact(rows.max(1));
            return pivots(
                columns
                    .map(|c| c.iter().map(|&x| to_c64(x)).collect())
                    .collect(),
                stop,
            );
        }
        let bucket: Vec<usize> = (0..rows)
            .map(|r| ((unit_hash(seed ^ 0xB0C7, r as u64) * s as f64) as usize).min(s - 1))
            .collect();
        let zeta: Vec<Complex64> = (0..rows)
            .map(|r| Complex64::from_polar(1.0, TAU * unit_hash(seed, r as u64)))
            .collect();
        let sketch: Vec<Vec<Complex64>> = a
            .par_chunks_exact(rows.max(1))
            .map(|column| {
                let mut out = vec![Complex64::new(0.0, 0.0); s];
                on_widest_isa(
                    #[inline(always)]
                    || {
                        for ((&h, z), &x) in bucket.iter().zip(&zeta).zip(column) {
                            out[h] += z * to_c64(x);
                        }
                    },
                );
                out
            })
            .collect();
        let picked = pivots(sketch, stop);
        if picked.len() + SKETCH_MARGIN <= s || picked.len() >= MAX_RANK {
            return picked;
        }
        s *= 2;
    }
}

/// A value in [0, 1) from `seed` and `index` (splitmix64).
fn unit_hash(seed: u64, index: u64) -> f64 {
    let mut x = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The first pivots of a column-pivoted QR (modified Gram–Schmidt with
/// deflation) of the columns `columns` (each of length `rows`), until the
/// remaining Frobenius norm² is ≤ `stop²`·(initial) or `MAX_RANK` pivots.
fn pivots(mut columns: Vec<Vec<Complex64>>, stop: f64) -> Vec<usize> {
    let total: f64 = columns
        .iter()
        .map(|c| c.iter().map(|x| x.norm_sqr()).sum::<f64>())
        .sum();
    let mut chosen = Vec::new();
    while chosen.len() < MAX_RANK.min(columns.len()) {
        let norms: Vec<f64> = columns
            .par_iter()
            .map(|c| on_widest_isa(|| lanes(c.len(), |i| c[i].norm_sqr())))
            .collect();
        let remaining: f64 = norms.iter().sum();
        if remaining <= stop * stop * total {
            break;
        }
        let (p, &largest) = norms
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        if largest <= 0.0 {
            break;
        }
        let scale = 1.0 / largest.sqrt();
        let q: Vec<Complex64> = columns[p].iter().map(|x| x * scale).collect();
        columns.par_iter_mut().for_each(|c| {
            on_widest_isa(
                #[inline(always)]
                || {
                    let c = &mut c[..q.len()];
                    let dot = Complex64::new(
                        lanes(q.len(), |i| q[i].re * c[i].re + q[i].im * c[i].im),
                        lanes(q.len(), |i| q[i].re * c[i].im - q[i].im * c[i].re),
                    );
                    c.iter_mut().zip(&q).for_each(|(x, a)| *x -= a * dot);
                },
            )
        });
        chosen.push(p);
    }
    chosen
}

/// Solves T·W = B for upper-triangular T (k×k) in place of B (k×cols).
fn upper_solve(t: &Mat<c64>, b: &mut Mat<c64>) {
    let k = t.nrows();
    for col in 0..b.ncols() {
        for row in (0..k).rev() {
            let mut s = b[(row, col)];
            for c in row + 1..k {
                s -= t[(row, c)] * b[(c, col)];
            }
            b[(row, col)] = s / t[(row, row)];
        }
    }
}

fn to_c64(x: c64) -> Complex64 {
    Complex64::new(x.re, x.im)
}

/// One side of the factors: skeleton points s with their features f_s (P
/// each) and coefficient rows c_s (K each), evaluated at a point x as
///
/// $$f(x)_l = \sum_s e^{i\,x\cdot f_s}\, c_{s,l}.$$
#[derive(Clone, Debug)]
pub struct Skeleton {
    /// f_s, P×|S| (point fastest).
    pub features: Vec<f64>,
    /// c_s, |S|×K (coefficient fastest).
    pub rows: Vec<Complex64>,
    /// K.
    pub rank: usize,
}

impl Skeleton {
    /// The constant 1 (K = 1, no features): the factors of a linear phase.
    fn one() -> Skeleton {
        Skeleton {
            features: Vec::new(),
            rows: vec![Complex64::new(1.0, 0.0)],
            rank: 1,
        }
    }

    /// |S|.
    pub fn points(&self) -> usize {
        self.rows.len() / self.rank.max(1)
    }

    /// Whether every coefficient is finite and so is their sum of moduli
    /// (then so is every value: each is a sum of |S| unit phasors times them).
    fn is_finite(&self) -> bool {
        self.rows.iter().map(|c| c.norm()).sum::<f64>().is_finite()
    }

    /// f_l(x_i)·exp(2πi·offset_i) at the `count` points of P×count
    /// `features` (point fastest), returned K×count (point fastest);
    /// `offset` (cycles) `None` = 0. In blocks of [`EVALUATE_BLOCK`] points
    /// in parallel: per skeleton point s, the block's phases x_i·f_s (in
    /// cycles) turned into phasors at once ([`unit_phasors`]) and added to
    /// the K sums with c_{s,l}. Each value is stored as `convert(value)`
    /// (float32 factors are written once, with no float64 copy).
    pub fn evaluate_all<O: Clone + Default + Send + Sync>(
        &self,
        count: usize,
        features: &[f64],
        offset: Option<&[f64]>,
        convert: impl Fn(Complex64) -> O + Sync,
        what: &str,
    ) -> Result<Vec<O>> {
        let (rank, skeleton) = (self.rank, self.points());
        let terms = features.len() / count.max(1);
        let mut out = try_vec(rank * count, O::default(), what)?;
        if rank == 0 || count == 0 {
            return Ok(out);
        }
        // The K rows' pieces of each block of points.
        let mut blocks: Vec<Vec<&mut [O]>> = Vec::new();
        for row in out.chunks_exact_mut(count) {
            for (b, piece) in row.chunks_mut(EVALUATE_BLOCK).enumerate() {
                if b == blocks.len() {
                    blocks.push(Vec::with_capacity(rank));
                }
                blocks[b].push(piece);
            }
        }
        let buffers = || [(); 5].map(|_| vec![0.0f64; EVALUATE_BLOCK]);
        let sums = || vec![0.0f64; 2 * rank * EVALUATE_BLOCK];
        blocks.into_par_iter().enumerate().for_each_init(
            || (buffers(), sums()),
            |([cycles, re, im, re2, im2], sums), (b, mut pieces)| {
                on_widest_isa(
                    #[inline(always)]
                    || {
                        let start = b * EVALUATE_BLOCK;
                        let len = pieces[0].len();
                        let (cycles, re, im) = (&mut cycles[..len], &mut re[..len], &mut im[..len]);
                        let (sum_re, sum_im) = sums.split_at_mut(rank * EVALUATE_BLOCK);
                        sum_re.fill(0.0);
                        sum_im.fill(0.0);
                        for s in 0..skeleton {
                            cycles.fill(0.0);
                            for p in 0..terms {
                                let f = self.features[p * skeleton + s] / TAU;
                                let x = &features[p * count + start..p * count + start + len];
                                cycles.iter_mut().zip(x).for_each(|(c, &x)| *c += x * f);
                            }
                            unit_phasors(cycles, re, im);
                            for (l, c) in self.rows[s * rank..(s + 1) * rank].iter().enumerate() {
                                let sr = &mut sum_re[l * EVALUATE_BLOCK..l * EVALUATE_BLOCK + len];
                                let si = &mut sum_im[l * EVALUATE_BLOCK..l * EVALUATE_BLOCK + len];
                                for (((sr, si), &r), &i) in
                                    sr.iter_mut().zip(si).zip(&*re).zip(&*im)
                                {
                                    *sr += c.re * r - c.im * i;
                                    *si += c.re * i + c.im * r;
                                }
                            }
                        }
                        let phase = match offset {
                            Some(k0) => {
                                let (re2, im2) = (&mut re2[..len], &mut im2[..len]);
                                unit_phasors(&k0[start..start + len], re2, im2);
                                Some((re2, im2))
                            }
                            None => None,
                        };
                        for (l, piece) in pieces.iter_mut().enumerate() {
                            let sr = &sum_re[l * EVALUATE_BLOCK..];
                            let si = &sum_im[l * EVALUATE_BLOCK..];
                            for (i, o) in piece.iter_mut().enumerate() {
                                let v = Complex64::new(sr[i], si[i]);
                                *o = convert(match &phase {
                                    Some((c, s)) => v * Complex64::new(c[i], s[i]),
                                    None => v,
                                });
                            }
                        }
                    },
                )
            },
        );
        Ok(out)
    }
}

/// The candidate factors of every rank up to r: a(t) = e_J(t)ᵀ Y, b(n) = X e_I(n).
struct Factors {
    /// Skeleton voxels J with the rows of Y (a(t) = Σ_j exp(i u(t)·g_j) Y_j).
    voxels: Skeleton,
    /// Skeleton times I with the columns of X (b(n) = Σ_i exp(i g(n)·u_i) X_i).
    times: Skeleton,
    /// ε(K)² on the sample for K = 1..=r (index K − 1).
    errors: Vec<f64>,
}

impl Factors {
    fn rank_limit(&self) -> usize {
        self.voxels.rank
    }

    /// The rank-k factors rebalanced so that the b_l are orthonormal on the
    /// voxel sample (weights included): with the QR factor R of the sampled
    /// b's, b' = R⁻ᵀ b and a' = R a leave Σ_l a_l b_l unchanged, while the
    /// terms no longer cancel each other (the operator runs in float32).
    fn balanced(self, k: usize, voxels: &Sample) -> Result<Factors> {
        let count = voxels.len();
        if count < k {
            return Ok(self.truncated(k));
        }
        let b = self
            .times
            .evaluate_all(count, &voxels.features, None, |v| v, "sampled b_l")?;
        let sampled = Mat::<c64>::from_fn(count, k, |v, l| {
            let (value, w) = (b[l * count + v], voxels.weights[v].sqrt());
            c64::new(value.re * w, value.im * w)
        });
        let r = sampled.qr().thin_R().to_owned();
        if (0..k).any(|l| {
            let d = r[(l, l)].norm();
            d.is_nan() || d <= 1e-300 || d.is_infinite()
        }) {
            return Ok(self.truncated(k));
        }
        let r = |i: usize, j: usize| to_c64(r[(i, j)]);
        let old = self.rank_limit();
        let a_rows = self
            .voxels
            .rows
            .chunks_exact(old)
            .flat_map(|y| {
                (0..k)
                    .map(|l| (l..k).map(|j| r(l, j) * y[j]).sum::<Complex64>())
                    .collect::<Vec<_>>()
            })
            .collect();
        let b_rows = self
            .times
            .rows
            .chunks_exact(old)
            .flat_map(|x| {
                let mut z = vec![Complex64::new(0.0, 0.0); k];
                for l in 0..k {
                    let s: Complex64 = (0..l).map(|j| r(j, l) * z[j]).sum();
                    z[l] = (x[l] - s) / r(l, l);
                }
                z
            })
            .collect();
        Ok(Factors {
            voxels: Skeleton {
                features: self.voxels.features,
                rows: a_rows,
                rank: k,
            },
            times: Skeleton {
                features: self.times.features,
                rows: b_rows,
                rank: k,
            },
            errors: self.errors,
        })
    }

    /// The first k terms only.
    fn truncated(self, k: usize) -> Factors {
        let cut = |side: Skeleton| Skeleton {
            rows: side
                .rows
                .chunks_exact(side.rank)
                .flat_map(|row| row[..k].to_vec())
                .collect(),
            rank: k,
            features: side.features,
        };
        Factors {
            voxels: cut(self.voxels),
            times: cut(self.times),
            errors: self.errors,
        }
    }
}

fn factors(times: &Sample, voxels: &Sample, terms: usize, target: f64) -> Result<Factors> {
    let (st, sv) = (times.len(), voxels.len());
    let columns = weighted_matrix(times, voxels)?;
    let z = MatRef::from_column_major_slice(&columns, st, sv);
    let stop = SKELETON_FRACTION * target;
    let voxel_pivots = sketched_pivots(&columns, st, 0x5EED_C015, stop);
    let c = Mat::<c64>::from_fn(st, voxel_pivots.len(), |t, k| z[(t, voxel_pivots[k])]);
    // The skeleton times from the rows of C (a row ID of the column skeleton:
    // Z ≈ C·X and C ≈ W·C(I, :) give Z ≈ W·Z(I, :)), not from a sketch of Zᵀ.
    let rows_of_c = (0..st)
        .map(|t| (0..voxel_pivots.len()).map(|k| to_c64(c[(t, k)])).collect())
        .collect();
    let time_pivots = pivots(rows_of_c, stop);
    if voxel_pivots.is_empty() || time_pivots.is_empty() {
        return Err(Error::internal("the sampled phase matrix is zero"));
    }
    let r_h = Mat::<c64>::from_fn(sv, time_pivots.len(), |v, k| z[(time_pivots[k], v)].conj());
    let qr_c = c.qr();
    let (q_c, t_c) = (qr_c.compute_thin_Q(), qr_c.thin_R().to_owned());
    let qr_r = r_h.qr();
    let (q_r, t_r) = (qr_r.compute_thin_Q(), qr_r.thin_R().to_owned());
    let core = q_c.adjoint() * z * &q_r;
    let svd = core
        .thin_svd()
        .map_err(|e| Error::internal(format!("SVD of the skeleton core failed: {e:?}")))?;
    let s_diag = svd.S().column_vector();
    let sigma: Vec<f64> = (0..s_diag.nrows()).map(|l| s_diag[l].re).collect();
    let captured: f64 = sigma.iter().map(|s| s * s).sum();
    let errors: Vec<f64> = (1..=sigma.len())
        .map(|k| (1.0 - captured + sigma[k..].iter().map(|s| s * s).sum::<f64>()).max(0.0))
        .collect();
    let r = sigma.len();
    // Y = D_J T_c⁻¹ P Σ, X = Qᴴ T_r⁻ᴴ D_I = (T_r⁻¹ Q)ᴴ D_I.
    let mut y = Mat::<c64>::from_fn(voxel_pivots.len(), r, |i, l| {
        svd.U()[(i, l)] * c64::new(sigma[l], 0.0)
    });
    upper_solve(&t_c, &mut y);
    for (i, &v) in voxel_pivots.iter().enumerate() {
        let d = c64::new(voxels.weights[v].sqrt(), 0.0);
        for l in 0..r {
            y[(i, l)] *= d;
        }
    }
    let mut w = Mat::<c64>::from_fn(time_pivots.len(), r, |i, l| svd.V()[(i, l)]);
    upper_solve(&t_r, &mut w);
    let x = Mat::<c64>::from_fn(r, time_pivots.len(), |l, i| {
        w[(i, l)].conj() * c64::new(times.weights[time_pivots[i]].sqrt(), 0.0)
    });
    let skeleton = |sample: &Sample, picked: &[usize]| -> Vec<f64> {
        let mut out = vec![0.0; terms * picked.len()];
        for p in 0..terms {
            for (k, &i) in picked.iter().enumerate() {
                out[p * picked.len() + k] = sample.feature(p, i);
            }
        }
        out
    };
    Ok(Factors {
        voxels: Skeleton {
            features: skeleton(voxels, &voxel_pivots),
            rows: (0..voxel_pivots.len())
                .flat_map(|i| (0..r).map(move |l| (i, l)))
                .map(|(i, l)| to_c64(y[(i, l)]))
                .collect(),
            rank: r,
        },
        times: Skeleton {
            features: skeleton(times, &time_pivots),
            rows: (0..time_pivots.len())
                .flat_map(|i| (0..r).map(move |l| (i, l)))
                .map(|(i, l)| to_c64(x[(l, i)]))
                .collect(),
            rank: r,
        },
        errors,
    })
}

/// Relative RMS error of the factors of each rank 1..=r on an independent
/// check sample (equal weights over its times, voxels as drawn): per voxel
/// (in parallel), the exact column's phasors at once ([`unit_phasors`]) and
/// the partial sums Σ_{l<k} a_l b_l grown one rank at a time over all times.
fn check_errors(f: &Factors, times: &Sample, voxels: &Sample) -> Result<Vec<f64>> {
    let (r, st, sv) = (f.rank_limit(), times.len(), voxels.len());
    // a_l(t), rank-major (each rank's times contiguous), split into re and im;
    // b_l(n) rank-major.
    let a = f
        .voxels
        .evaluate_all(st, &times.features, None, |v| v, "check a_l(t)")?;
    let (a_re, a_im): (Vec<f64>, Vec<f64>) = a.iter().map(|z| (z.re, z.im)).unzip();
    let b = f
        .times
        .evaluate_all(sv, &voxels.features, None, |v| v, "check b_l(n)")?;
    let sums: Vec<Vec<f64>> = (0..sv)
        .into_par_iter()
        .map_init(
            || [(); 5].map(|_| vec![0.0; st]),
            |[cycles, re, im, sum_re, sum_im], v| {
                times.phasors(voxels, v, [cycles, re, im]);
                sum_re.fill(0.0);
                sum_im.fill(0.0);
                let w = voxels.weights[v];
                let (re, im) = (&re[..st], &im[..st]);
                let (sum_re, sum_im) = (&mut sum_re[..st], &mut sum_im[..st]);
                on_widest_isa(
                    #[inline(always)]
                    || {
                        let mut errors = vec![0.0; r];
                        for (k, error) in errors.iter_mut().enumerate() {
                            let a = (&a_re[k * st..(k + 1) * st], &a_im[k * st..(k + 1) * st]);
                            let running = (&mut *sum_re, &mut *sum_im);
                            *error =
                                rank_step(a, b[k * sv + v], (re, im), running, &times.weights) * w;
                        }
                        errors
                    },
                )
            },
        )
        .collect();
    Ok((0..r)
        .map(|k| sums.iter().map(|e| e[k]).sum::<f64>())
        .collect())
}

/// One rank of [`check_errors`] at one voxel: s_t += a_t·b over the times,
/// and Σ_t w_t |z_t − s_t|² (the error with this rank) in [`LANES`] partial
/// sums, as [`lanes`] adds them.
#[inline(always)]
fn rank_step(
    (a_re, a_im): (&[f64], &[f64]),
    b: Complex64,
    (z_re, z_im): (&[f64], &[f64]),
    (s_re, s_im): (&mut [f64], &mut [f64]),
    weights: &[f64],
) -> f64 {
    let step = |ar: f64, ai: f64, zr: f64, zi: f64, sr: &mut f64, si: &mut f64, w: f64| {
        *sr += ar * b.re - ai * b.im;
        *si += ar * b.im + ai * b.re;
        let (dr, di) = (zr - *sr, zi - *si);
        (dr * dr + di * di) * w
    };
    let mut partial = [0.0f64; LANES];
    let chunks = a_re
        .chunks_exact(LANES)
        .zip(a_im.chunks_exact(LANES))
        .zip(z_re.chunks_exact(LANES).zip(z_im.chunks_exact(LANES)))
        .zip(
            s_re.chunks_exact_mut(LANES)
                .zip(s_im.chunks_exact_mut(LANES)),
        )
        .zip(weights.chunks_exact(LANES));
    for ((((ar, ai), (zr, zi)), (sr, si)), w) in chunks {
        for i in 0..LANES {
            partial[i] += step(ar[i], ai[i], zr[i], zi[i], &mut sr[i], &mut si[i], w[i]);
        }
    }
    let full = weights.len() - weights.len() % LANES;
    let mut tail = 0.0;
    for t in full..weights.len() {
        tail += step(
            a_re[t],
            a_im[t],
            z_re[t],
            z_im[t],
            &mut s_re[t],
            &mut s_im[t],
            weights[t],
        );
    }
    partial.iter().sum::<f64>() + tail
}

/// Points per block of [`Skeleton::evaluate_all`].
const EVALUATE_BLOCK: usize = 512;

impl Expansion {
    /// The expansion of exp(iψ), ψ(j,n) = Σ_p u_p(j) g_p(n) (`temporal` u: P×M,
    /// `spatial` g: P×N), with relative error ≤ `target` on the voxel weights
    /// `weights` (N, e.g. Σ_c |S_c|²): its aim where [`MAX_RANK`] terms reach
    /// that, else its bound ([`Target`]); `lattice_cover` lists voxels spread
    /// over the field of view (boundaries included) that join a drawn sample.
    /// `InvalidArgument` when more than [`MAX_RANK`] terms would be needed.
    pub fn new(
        terms: usize,
        samples: usize,
        temporal: &[f64],
        spatial: &[f64],
        weights: &[f64],
        target: impl Into<Target>,
        lattice_cover: &[usize],
    ) -> Result<Expansion> {
        let Target { aim, bound, voxels } = target.into();
        let build = |t| {
            Self::build(
                terms,
                samples,
                (temporal, spatial, weights),
                (t, voxels),
                lattice_cover,
            )
        };
        match build(aim) {
            // An aim that MAX_RANK terms cannot reach (its skeletons may also be
            // numerically singular): the bound's own expansion.
            Err(e) if e.status == Status::InvalidArgument && aim < bound => build(bound),
            built => built,
        }
    }

    /// [`Expansion::new`] for one target.
    fn build(
        terms: usize,
        samples: usize,
        (temporal, spatial, weights): (&[f64], &[f64], &[f64]),
        (target, drawn): (f64, usize),
        lattice_cover: &[usize],
    ) -> Result<Expansion> {
        let n = weights.len();
        let m = samples;
        if terms == 0 {
            return Ok(Expansion {
                rank: 1,
                temporal: Skeleton::one(),
                spatial: Skeleton::one(),
                sampled_error: 0.0,
                method: Method::Linear,
            });
        }
        let u_max = temporal.iter().fold(0.0f64, |s, u| s.max(u.abs()));
        let times = Sample::pick(temporal, terms, &even(m, SAMPLE_TIMES));
        let (voxels, method) = voxel_sample(spatial, terms, weights, (u_max, drawn), lattice_cover);
        let f = factors(&times, &voxels, terms, target)?;
        // The independent check: other times and other voxels.
        let check_times: Vec<usize> = if m <= CHECK_TIMES {
            (0..m).collect()
        } else {
            (0..CHECK_TIMES)
                .map(|i| ((2 * i + 1) * m) / (2 * CHECK_TIMES))
                .collect()
        };
        let check_t = Sample::pick(temporal, terms, &check_times);
        // Every voxel (then the fit's own sample) or fresh ones drawn ∝ w_n.
        let drawn_check;
        let check_v = if n <= drawn {
            &voxels
        } else {
            let total: f64 = weights.iter().sum();
            let w: Vec<f64> = if total > 0.0 {
                weights.to_vec()
            } else {
                vec![1.0; n]
            };
            drawn_check = Sample::pick(spatial, terms, &weighted(&w, CHECK_VOXELS, 0.137));
            &drawn_check
        };
        let checked = check_errors(&f, &check_t, check_v)?;
        let within = |k: usize| f.errors[k - 1].max(checked[k - 1]).sqrt();
        let Some(rank) = (1..=f.rank_limit()).find(|&k| within(k) <= target) else {
            // Drawn voxels that met the target while the check's fresh ones
            // did not are too thin a sample of the basis values (a rough
            // off-resonance map over higher orders: 4,096 drawn voxels met
            // it at rank 45): once more, wider.
            let sample_met = (1..=f.rank_limit()).any(|k| f.errors[k - 1].sqrt() <= target);
            if method == Method::SampledVoxels && drawn < WIDER_SAMPLE * SAMPLE_VOXELS && sample_met
            {
                return Self::build(
                    terms,
                    samples,
                    (temporal, spatial, weights),
                    (target, WIDER_SAMPLE * SAMPLE_VOXELS),
                    lattice_cover,
                );
            }
            return Err(Error::invalid(format!(
                "the residual phase needs more than {} separable terms for a relative error of \
                     {target:.1e} (best {:.2e})",
                f.rank_limit(),
                within(f.rank_limit())
            )));
        };
        let sampled_error = within(rank);
        let f = f.balanced(rank, &voxels)?;
        if !(f.voxels.is_finite() && f.times.is_finite()) {
            return Err(Error::invalid(
                "the separable expansion is numerically unstable for this phase (non-finite factors)",
            ));
        }
        Ok(Expansion {
            rank,
            temporal: f.voxels,
            spatial: f.times,
            sampled_error,
            method,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative weighted error of the expansion over every (t, n).
    fn full_error(e: &Expansion, terms: usize, u: &[f64], g: &[f64], w: &[f64]) -> f64 {
        let (m, n) = (u.len() / terms, g.len() / terms);
        let a = e.temporal.evaluate_all(m, u, None, |v| v, "a").unwrap();
        let b = e.spatial.evaluate_all(n, g, None, |v| v, "b").unwrap();
        let (mut num, mut den) = (0.0, 0.0);
        for j in 0..m {
            for v in 0..n {
                let phase: f64 = (0..terms).map(|p| u[p * m + j] * g[p * n + v]).sum();
                let exact = Complex64::from_polar(1.0, phase);
                let approx: Complex64 = (0..e.rank).map(|l| a[l * m + j] * b[l * n + v]).sum();
                num += w[v] * (exact - approx).norm_sqr();
                den += w[v];
            }
        }
        (num / den).sqrt()
    }

    fn problem(terms: usize, m: usize, n: usize, strength: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut state = 0x1234_5678u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let g: Vec<f64> = (0..terms * n).map(|_| next() - 0.5).collect();
        let u: Vec<f64> = (0..terms)
            .flat_map(|p| {
                let rate = 1.0 + p as f64;
                (0..m).map(move |j| strength * (1.0 - (-(j as f64) / (m as f64) * rate).exp()))
            })
            .collect();
        let w: Vec<f64> = (0..n).map(|_| 0.2 + next()).collect();
        (u, g, w)
    }

    #[test]
    fn the_error_meets_the_target_and_the_rank_grows_with_it() {
        let (u, g, w) = problem(3, 700, 900, 12.0);
        let mut last = 0;
        for target in [1e-2, 1e-3, 1e-4] {
            let e = Expansion::new(3, 700, &u, &g, &w, target, &[]).unwrap();
            let err = full_error(&e, 3, &u, &g, &w);
            assert!(
                err <= target,
                "target {target}: error {err}, rank {}",
                e.rank
            );
            assert!(e.rank >= last);
            assert!(e.sampled_error <= target && err <= 3.0 * e.sampled_error.max(target / 10.0));
            last = e.rank;
        }
        assert!(last > 3 && last < 40, "rank {last}");
    }

    /// An aim below what 64 terms reach falls back to the bound; a
    /// reachable aim gives at least the bound's rank, and meets the aim.
    #[test]
    fn an_unreachable_aim_falls_back_to_the_bound() {
        let (u, g, w) = problem(3, 700, 900, 12.0);
        let bound = Expansion::new(3, 700, &u, &g, &w, 1e-3, &[]).unwrap();
        let target = |aim| Target {
            aim,
            bound: 1e-3,
            voxels: SAMPLE_VOXELS,
        };
        let fallback = Expansion::new(3, 700, &u, &g, &w, target(1e-30), &[]).unwrap();
        assert_eq!(
            (fallback.rank, fallback.sampled_error),
            (bound.rank, bound.sampled_error)
        );
        assert!(
            full_error(&fallback, 3, &u, &g, &w) <= 1e-3,
            "rank {}",
            fallback.rank
        );
        let tighter = Expansion::new(3, 700, &u, &g, &w, target(1e-4), &[]).unwrap();
        assert!(tighter.rank >= bound.rank && tighter.sampled_error <= 1e-4);
        assert!(
            full_error(&tighter, 3, &u, &g, &w) <= 1e-4,
            "rank {}",
            tighter.rank
        );
        assert!(Expansion::new(
            3,
            700,
            &u,
            &g,
            &w,
            Target {
                aim: 1e-30,
                bound: 1e-30,
                voxels: SAMPLE_VOXELS
            },
            &[]
        )
        .is_err());
    }

    #[test]
    fn sampled_voxels_and_histograms_generalise() {
        for terms in [1, 2] {
            let (u, g, w) = problem(terms, 1500, 3000, 20.0);
            let e = Expansion::new(terms, 1500, &u, &g, &w, 1e-3, &[]).unwrap();
            assert_eq!(
                e.method,
                if terms == 1 {
                    Method::Histogram
                } else {
                    Method::SampledVoxels
                }
            );
            let err = full_error(&e, terms, &u, &g, &w);
            assert!(err <= 1.5e-3, "terms {terms}: error {err}, rank {}", e.rank);
        }
    }

    /// One residual term whose phase spans about 250 rad with Gaussian tails
    /// (a noisy off-resonance map): more than 4,096 bins of 0.05 rad, so the
    /// bins widen instead of voxels being drawn, the extreme voxels are
    /// nodes, and the expansion holds on every voxel (drawn voxels erred
    /// 2.2× the tolerance on such a map).
    #[test]
    fn a_wide_one_term_phase_keeps_the_histogram() {
        let (m, n) = (800, 3000);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let u: Vec<f64> = (0..m).map(|j| 0.04 * j as f64 / m as f64).collect();
        let g: Vec<f64> = (0..n)
            .map(|_| 900.0 * (-2.0 * uniform().ln()).sqrt() * (TAU * uniform()).cos())
            .collect();
        let w = vec![1.0; n];
        let span =
            g.iter().fold(f64::MIN, |a, &x| a.max(x)) - g.iter().fold(f64::MAX, |a, &x| a.min(x));
        assert!(
            span * 0.04 > BIN_PHASE * HISTOGRAM_BINS as f64,
            "span {span}"
        );
        let e = Expansion::new(1, m, &u, &g, &w, 1e-3, &[]).unwrap();
        assert_eq!(e.method, Method::Histogram);
        let err = full_error(&e, 1, &u, &g, &w);
        assert!(err <= 1.5e-3, "error {err}, rank {}", e.rank);
    }

    #[test]
    fn skeletons_evaluate_every_point_across_blocks() {
        // Two features, three skeleton points, rank 2, more points than a block.
        let skeleton = Skeleton {
            features: vec![0.3, -1.1, 2.0, 0.7, 0.05, -0.4],
            rows: [
                (1.0, 0.5),
                (-0.2, 0.1),
                (0.3, -0.7),
                (0.0, 1.0),
                (2.0, 0.0),
                (-1.0, -1.0),
            ]
            .map(|(re, im)| Complex64::new(re, im))
            .to_vec(),
            rank: 2,
        };
        let count = EVALUATE_BLOCK + 77;
        let x: Vec<f64> = (0..2 * count)
            .map(|i| ((i * 37) % 101) as f64 * 0.13 - 6.0)
            .collect();
        let offset: Vec<f64> = (0..count).map(|i| (i % 13) as f64 * 0.071 - 0.4).collect();
        let values = skeleton
            .evaluate_all(count, &x, Some(&offset), |v| v, "test")
            .unwrap();
        for i in [0, 1, EVALUATE_BLOCK - 1, EVALUATE_BLOCK, count - 1] {
            for l in 0..2 {
                let direct: Complex64 = (0..3)
                    .map(|s| {
                        let phase =
                            x[i] * skeleton.features[s] + x[count + i] * skeleton.features[3 + s];
                        skeleton.rows[s * 2 + l] * Complex64::from_polar(1.0, phase)
                    })
                    .sum::<Complex64>()
                    * Complex64::from_polar(1.0, TAU * offset[i]);
                assert!(
                    (values[l * count + i] - direct).norm() < 1e-12,
                    "point {i} term {l}"
                );
            }
        }
    }

    #[test]
    fn no_residual_is_rank_one() {
        let e = Expansion::new(0, 4, &[], &[], &[1.0; 5], 1e-3, &[]).unwrap();
        assert_eq!(e.rank, 1);
        let b = e.spatial.evaluate_all(5, &[], None, |v| v, "b").unwrap();
        assert_eq!(b, vec![Complex64::new(1.0, 0.0); 5]);
        let a = e
            .temporal
            .evaluate_all(4, &[], Some(&[0.25; 4]), |v| v, "a")
            .unwrap();
        assert!(a
            .iter()
            .all(|z| (z - Complex64::new(0.0, 1.0)).norm() < 1e-15));
    }
}
