//! The Toeplitz normal operator on the CPU (issue 5 §2): EᴴWE through FFTs
//! of the kernel grid (g ≥ 2n cells per axis, `ToeplitzSpec::kernel_dims`)
//! with precomputed kernels,
//!
//!   EᴴWE x ≈ Σ_c conj(S_c) Σ_l conj(P_l)·crop(IFFT(Σ_l' K_{l,l'}·FFT(pad(P_l'·S_c·x)))),
//!
//! K_{l,l'} = FFT(T_{l,l'})/Π g_a, P_l = exp(iδ·τ_l) and one segment (P ≡ 1)
//! without off-resonance ([`crate::model::toeplitz`] for T, the segments and
//! the accuracy). Forward, adjoint and CG's right-hand side stay the exact
//! phase sums of [`CpuOperator`].
//!
//! The kernels T_{l,l'}(Δ) = Σ_j γ_j e^{−2πi κ_j·Δ} of all pairs are one
//! batched type-1 NUFFT ([`crate::nufft`]: sign −1, points 2π κ_j, modes
//! Δ = −n … n − 1 of every doubled axis, γ = `ToeplitzSpec::kernel_weights`)
//! at the tolerance and arithmetic of
//! [`crate::model::toeplitz::kernel_nufft_tolerance`] (the CUDA backend's
//! too), moved onto the kernel grid (index Δ mod g; the unused indices
//! are zero) and transformed. The NUFFT plan (its sorted points) is made once;
//! the kernels are kept for W = 1 and for the sample weights W of the last
//! weighted call; other weights recompute them.

use super::fft::{Direction, GridFft};
use super::kernel::{on_widest_isa, Accurate, Double, Fast, Mode};
use super::real::Real;
use super::{apply_widened, complex_zeros, space, Acc, CpuNormal, CpuOperator};
use crate::error::Result;
use crate::model::kernel_basis::KernelBasis;
use crate::model::toeplitz::{kernel_nufft_spec, ToeplitzSpec};
use crate::model::{Features, Sizes};
use crate::nufft::Nufft;
use crate::op::{CgReport, EncodingOperator, Precision};
use crate::options::{BackendKind, Options};
use crate::progress::Progress;
use crate::solver::CgProblem;
use num_complex::{Complex, Complex32};
use rayon::prelude::*;
use rustfft::FftNum;
use std::sync::{Arc, Mutex};

/// Builds the CPU Toeplitz operator of `features` (the exact model) and `spec`.
pub fn build(
    features: &Features,
    spec: ToeplitzSpec,
    sizes: Sizes,
    precision: Precision,
    pool: Arc<rayon::ThreadPool>,
) -> Result<Box<dyn EncodingOperator>> {
    Ok(match precision {
        Precision::Accurate => Box::new(ToeplitzOperator::<Accurate>::new(
            features, spec, sizes, precision, pool,
        )?),
        Precision::Fast => Box::new(ToeplitzOperator::<Fast>::new(
            features, spec, sizes, precision, pool,
        )?),
        Precision::Double => Box::new(ToeplitzOperator::<Double>::new(
            features, spec, sizes, precision, pool,
        )?),
    })
}

/// The kernel spectra for one set of sample weights.
struct Kernels<T> {
    /// The weights they were computed for (`None` = 1).
    weights: Option<Vec<f32>>,
    /// K_p for the pairs of [`ToeplitzSpec::kernel_pairs`], pairs × kernel grid.
    spectra: Vec<Complex<T>>,
}

type CachedKernels<T> = Option<Arc<Kernels<T>>>;

/// EᴴWE by FFT convolutions; E, Eᴴ exact.
pub struct ToeplitzOperator<Mo: Mode>
where
    Mo::Acc: FftNum,
{
    exact: CpuOperator<Mo>,
    spec: ToeplitzSpec,
    fft: GridFft<Mo::Acc>,
    /// P_l(n) = exp(iδ_n τ_l), L×N; `None` without segmentation.
    segment_phases: Option<Vec<Acc<Mo>>>,
    /// Cached kernels: [0] for W = 1, [1] for the last weights given.
    kernels: Mutex<[CachedKernels<Mo::Acc>; 2]>,
    /// The mode the kernels' NUFFT tolerance follows.
    precision: Precision,
    /// The kernels' NUFFT plan, made on first use.
    nufft: Mutex<Option<Arc<Nufft>>>,
    /// Fewer transforms than segment pairs (`model::kernel_basis`), or `None`.
    basis: Option<KernelBasis>,
}

impl<Mo: Mode> ToeplitzOperator<Mo>
where
    Mo::Acc: FftNum,
{
    pub fn new(
        features: &Features,
        spec: ToeplitzSpec,
        sizes: Sizes,
        precision: Precision,
        pool: Arc<rayon::ThreadPool>,
    ) -> Result<Self> {
        let exact = CpuOperator::<Mo>::new(features, sizes, pool)?;
        let segment_phases = match &spec.segmentation {
            None => None,
            Some(s) => {
                let n = sizes.voxels;
                let mut p = complex_zeros(s.segments * n, "segment phases (N x L)")?;
                segment_phases(&s.tau, &s.delta, &mut p);
                Some(p)
            }
        };
        let basis = KernelBasis::new(&spec, spec.kernel_tolerance(precision).0 / 10.0);
        Ok(ToeplitzOperator {
            basis,
            fft: GridFft::new(spec.kernel_dims),
            exact,
            spec,
            segment_phases,
            kernels: Mutex::new([None, None]),
            precision,
            nufft: Mutex::new(None),
        })
    }

    /// The kernels' type-1 transforms: r of the pair basis, else one per pair.
    fn transforms(&self) -> usize {
        self.basis
            .as_ref()
            .map_or(self.spec.kernel_pairs().len(), |b| b.rank)
    }

    /// The type-1 NUFFT of the kernels (module documentation), made once.
    fn kernel_nufft(&self) -> Result<Arc<Nufft>> {
        let mut slot = self.nufft.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = slot.as_ref() {
            return Ok(n.clone());
        }
        let spec = &self.spec;
        let m = spec.samples;
        let nufft_spec = kernel_nufft_spec(
            spec.mode_dims(),
            m,
            self.transforms(),
            spec.kernel_tolerance(self.precision),
        )?;
        let mut points = crate::error::try_copy(&spec.cycles, "Toeplitz NUFFT points (M x 3)")?;
        points.iter_mut().for_each(|x| *x *= std::f64::consts::TAU);
        let options = Options {
            backend: BackendKind::Cpu,
            ..Options::default()
        };
        let nufft = Arc::new(Nufft::with_spec(
            nufft_spec,
            &points,
            m,
            &options,
            Some(self.exact.pool.clone()),
        )?);
        *slot = Some(nufft.clone());
        Ok(nufft)
    }

    /// The kernel spectra for `weights`, computed on first use and whenever
    /// the weights differ from the last weighted call's (W = 1 is kept apart,
    /// so CG with weights and `normal` without do not evict each other).
    fn kernels(&self, weights: Option<&[f32]>) -> Result<Arc<Kernels<Mo::Acc>>> {
        let mut cache = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut cache[usize::from(weights.is_some())];
        if let Some(k) = slot.as_ref() {
            if k.weights.as_deref() == weights {
                return Ok(k.clone());
            }
        }
        *slot = None;
        let spec = &self.spec;
        let points = spec.kernel_points();
        let pairs = spec.kernel_pairs().len();
        // The kernels, the NUFFT's modes and its data, before allocating any of it.
        let acc = std::mem::size_of::<Acc<Mo>>() as u64;
        let mode_dims = spec.mode_dims();
        let nufft_spec = kernel_nufft_spec(
            mode_dims,
            spec.samples,
            pairs,
            spec.kernel_tolerance(self.precision),
        )?;
        let setup_bytes = (points as u64)
            .saturating_mul(pairs as u64)
            .saturating_mul(acc + 16)
            .saturating_add((spec.samples as u64).saturating_mul(pairs as u64 * 16))
            .saturating_add(crate::nufft::cpu::memory_bytes(
                &nufft_spec,
                spec.samples,
                self.exact.pool.current_num_threads(),
            ));
        crate::error::check_available(setup_bytes, "the Toeplitz kernels")?;
        let nufft = self.kernel_nufft()?;
        let transforms = self.transforms();
        let mut data = match &self.basis {
            Some(basis) => basis.compressed_weights(spec, weights)?,
            None => spec.kernel_weights(weights)?,
        };
        let mode_points: usize = mode_dims.iter().product();
        let mut modes = crate::error::try_vec(
            mode_points * transforms,
            num_complex::Complex64::default(),
            "Toeplitz kernel modes (2^d N x transforms)",
        )?;
        nufft.execute_c64(&mut data, &mut modes)?;
        drop(data);
        let mut spectra = complex_zeros(
            points * transforms,
            "Toeplitz kernels (kernel grid x transforms)",
        )?;
        // T(Δ) at kernel-grid index Δ mod g comes from mode index Δ + n; the
        // unused indices are zero; 1/Π g_a of the inverse FFT is applied here.
        let kd = spec.kernel_dims;
        let scale = 1.0 / points as f64;
        let zero = Complex::new(Mo::Acc::default(), Mo::Acc::default());
        spectra
            .par_chunks_mut(kd[0])
            .enumerate()
            .for_each(|(row, out)| {
                let (p1, p2, pair) = (row % kd[1], (row / kd[1]) % kd[2], row / (kd[1] * kd[2]));
                let (Some(m1), Some(m2)) = (spec.mode_index(1, p1), spec.mode_index(2, p2)) else {
                    out.fill(zero);
                    return;
                };
                let base = pair * mode_points + mode_dims[0] * (m1 + mode_dims[1] * m2);
                for (p0, t) in out.iter_mut().enumerate() {
                    *t = match spec.mode_index(0, p0) {
                        Some(m0) => {
                            let v = modes[base + m0] * scale;
                            Complex::new(Mo::Acc::from_f64(v.re), Mo::Acc::from_f64(v.im))
                        }
                        None => zero,
                    };
                }
            });
        drop(modes);
        let progress = Progress::current();
        for (p, kernel) in spectra.chunks_exact_mut(points).enumerate() {
            progress.check(p as f64 / transforms as f64)?;
            self.fft.process(kernel, Direction::Forward);
        }
        if let Some(basis) = &self.basis {
            spectra = basis.expand(&spectra, points)?;
        }
        let k = Arc::new(Kernels {
            weights: weights
                .map(|w| crate::error::try_copy(w, "Toeplitz kernel weights (M)"))
                .transpose()?,
            spectra,
        });
        *slot = Some(k.clone());
        Ok(k)
    }

    /// buffer ← pad(f·x) on the kernel grid, f(v) = S_c(v)·P_l(v) (either may be absent).
    fn pad(
        &self,
        x: &[Acc<Mo>],
        sensitivity: Option<&[Acc<Mo>]>,
        phase: Option<&[Acc<Mo>]>,
        buffer: &mut [Acc<Mo>],
    ) {
        let [n0, n1, _] = self.spec.dims;
        let [k0, k1, _] = self.spec.kernel_dims;
        let zero = Complex::new(Mo::Acc::default(), Mo::Acc::default());
        buffer
            .par_chunks_mut(k0)
            .enumerate()
            .for_each(|(row, out)| {
                let (ky, kz) = (row % k1, row / k1);
                if ky >= n1 || kz >= self.spec.dims[2] {
                    out.fill(zero);
                    return;
                }
                let start = n0 * (ky + n1 * kz);
                let (image, rest) = out.split_at_mut(n0);
                rest.fill(zero);
                for (i, o) in image.iter_mut().enumerate() {
                    let v = start + i;
                    let mut value = x[v];
                    if let Some(s) = sensitivity {
                        value = super::mul(s[v], value);
                    }
                    if let Some(p) = phase {
                        value = super::mul(p[v], value);
                    }
                    *o = value;
                }
            });
    }

    /// y += conj(f)·crop(buffer), f as in [`Self::pad`].
    fn crop_add(
        &self,
        buffer: &[Acc<Mo>],
        sensitivity: Option<&[Acc<Mo>]>,
        phase: Option<&[Acc<Mo>]>,
        y: &mut [Acc<Mo>],
    ) {
        let [n0, n1, _] = self.spec.dims;
        let [k0, k1, _] = self.spec.kernel_dims;
        y.par_chunks_mut(n0).enumerate().for_each(|(row, out)| {
            let (iy, iz) = (row % n1, row / n1);
            let start = k0 * (iy + k1 * iz);
            for (i, o) in out.iter_mut().enumerate() {
                let v = row * n0 + i;
                let mut value = buffer[start + i];
                if let Some(p) = phase {
                    value = conj_mul(p[v], value);
                }
                if let Some(s) = sensitivity {
                    value = conj_mul(s[v], value);
                }
                *o = *o + value;
            }
        });
    }

    /// sums_l = Σ_l' K_{l,l'}·spectra_l' for every l (L×points each), block
    /// by block of points: each pair's kernel block is read once and serves
    /// (l, l') and, conjugated, (l', l) (FFT(T_{l',l}) = conj(FFT(T_{l,l'}))).
    fn segment_sums(&self, kernels: &[Acc<Mo>], spectra: &[Acc<Mo>], sums: &mut [Acc<Mo>]) {
        let points = self.spec.kernel_points();
        let pairs = self.spec.kernel_pairs();
        let tasks = super::column_blocks(sums, points, PRODUCT_BLOCK);
        let zero = Complex::new(Mo::Acc::default(), Mo::Acc::default());
        tasks.into_par_iter().enumerate().for_each(|(b, mut out)| {
            let start = b * PRODUCT_BLOCK;
            let len = out[0].len();
            out.iter_mut().for_each(|o| o.fill(zero));
            for (p, &(l, lp)) in pairs.iter().enumerate() {
                let kernel = &kernels[p * points + start..][..len];
                let input = &spectra[lp * points + start..][..len];
                on_widest_isa(
                    #[inline(always)]
                    || multiply_add(out[l], kernel, input, false),
                );
                if l != lp {
                    let input = &spectra[l * points + start..][..len];
                    on_widest_isa(
                        #[inline(always)]
                        || multiply_add(out[lp], kernel, input, true),
                    );
                }
            }
        });
    }

    /// y = EᴴWE x by the convolutions of the module documentation.
    fn normal_acc(&self, x: &[Acc<Mo>], y: &mut [Acc<Mo>], weights: Option<&[f32]>) -> Result<()> {
        let progress = Progress::current();
        let kernels = self.kernels(weights)?;
        let Sizes {
            voxels: n, coils, ..
        } = self.exact.sizes;
        let points = self.spec.kernel_points();
        let segments = self.spec.segments();
        let zero = Complex::new(Mo::Acc::default(), Mo::Acc::default());
        y.par_iter_mut().for_each(|v| *v = zero);
        let mut spectra = complex_zeros::<Mo::Acc>(segments * points, "Toeplitz FFT buffers")?;
        let mut work = if segments > 1 {
            complex_zeros::<Mo::Acc>(segments * points, "Toeplitz FFT buffers (sums)")?
        } else {
            Vec::new()
        };
        let phase = |l: usize| self.segment_phases.as_ref().map(|p| &p[l * n..(l + 1) * n]);
        for c in 0..coils {
            progress.check(c as f64 / coils as f64)?;
            let sensitivity = self
                .exact
                .sensitivities
                .as_ref()
                .map(|s| &s[c * n..(c + 1) * n]);
            for (lp, buffer) in spectra.chunks_exact_mut(points).enumerate() {
                self.pad(x, sensitivity, phase(lp), buffer);
                self.fft
                    .process_padded(buffer, Direction::Forward, self.spec.dims);
            }
            if segments == 1 {
                let kernel = &kernels.spectra[..points];
                spectra
                    .par_iter_mut()
                    .zip(kernel)
                    .for_each(|(b, k)| *b = super::mul(*k, *b));
                self.fft
                    .process_padded(&mut spectra, Direction::Inverse, self.spec.dims);
                self.crop_add(&spectra, sensitivity, None, y);
                continue;
            }
            self.segment_sums(&kernels.spectra, &spectra, &mut work);
            for (l, sum) in work.chunks_exact_mut(points).enumerate() {
                self.fft
                    .process_padded(sum, Direction::Inverse, self.spec.dims);
                self.crop_add(sum, sensitivity, phase(l), y);
            }
        }
        Ok(())
    }
}

/// P_l(n) = exp(iδ_n τ_l) into `out` (L×N), by
/// [`crate::model::toeplitz::segment_phases_of`], voxel blocks in parallel.
fn segment_phases<T: Real>(tau: &[f64], delta: &[f64], out: &mut [Complex<T>]) {
    const VOXELS: usize = 1024;
    super::column_blocks(out, delta.len(), VOXELS)
        .into_par_iter()
        .enumerate()
        .for_each(|(b, mut rows)| {
            for (i, &d) in delta[b * VOXELS..].iter().take(VOXELS).enumerate() {
                let first = num_complex::Complex64::from_polar(1.0, d * tau[0]);
                crate::model::toeplitz::segment_phases_of(d, tau, first, |l, v| {
                    rows[l][i] = Complex::new(T::from_f64(v.re), T::from_f64(v.im));
                });
            }
        });
}

/// Kernel-grid points per task of the segment sums in `normal_acc`.
const PRODUCT_BLOCK: usize = 2048;

/// out += k·b, or conj(k)·b when `conjugate`, elementwise.
#[inline(always)]
fn multiply_add<T: Real>(
    out: &mut [Complex<T>],
    k: &[Complex<T>],
    b: &[Complex<T>],
    conjugate: bool,
) {
    let sign = T::from_f64(if conjugate { -1.0 } else { 1.0 });
    for ((o, k), b) in out.iter_mut().zip(k).zip(b) {
        let ki = sign * k.im;
        *o = Complex::new(
            o.re + k.re * b.re - ki * b.im,
            o.im + k.re * b.im + ki * b.re,
        );
    }
}

/// conj(a)·b.
fn conj_mul<T: Real>(a: Complex<T>, b: Complex<T>) -> Complex<T> {
    Complex::new(a.re * b.re + a.im * b.im, a.re * b.im - a.im * b.re)
}

impl<Mo: Mode> CpuNormal<Mo::Acc> for ToeplitzOperator<Mo>
where
    Mo::Acc: FftNum,
{
    fn sizes(&self) -> Sizes {
        self.exact.sizes
    }

    fn pool(&self) -> &rayon::ThreadPool {
        &self.exact.pool
    }

    fn rhs(&self, data: &[Complex32], weights: Option<&[f32]>, b: &mut [Acc<Mo>]) -> Result<()> {
        self.exact.rhs(data, weights, b)
    }

    fn normal(&self, x: &[Acc<Mo>], y: &mut [Acc<Mo>], weights: Option<&[f32]>) -> Result<()> {
        self.normal_acc(x, y, weights)
    }
}

impl<Mo: Mode> EncodingOperator for ToeplitzOperator<Mo>
where
    Mo::Acc: FftNum,
{
    fn forward(&self, image: &[Complex32], data: &mut [Complex32]) -> Result<()> {
        self.exact.forward(image, data)
    }

    fn adjoint(&self, data: &[Complex32], image: &mut [Complex32]) -> Result<()> {
        self.exact.adjoint(data, image)
    }

    fn normal(
        &self,
        image: &[Complex32],
        out: &mut [Complex32],
        weights: Option<&[f32]>,
    ) -> Result<()> {
        apply_widened(&self.exact.pool, image, "image", out, "image", |x, y| {
            self.normal_acc(x, y, weights)
        })
    }

    fn solve(&self, problem: &CgProblem<'_>, image: &mut [Complex32]) -> Result<CgReport> {
        space::solve(self, problem, image)
    }

    fn backend_name(&self) -> String {
        "cpu (Toeplitz)".into()
    }

    fn toeplitz_kernel(
        &self,
        weights: Option<&[f32]>,
    ) -> Result<Option<(Vec<num_complex::Complex64>, [usize; 3])>> {
        let kernels = self.kernels(weights)?;
        let points = self.spec.kernel_points();
        let total = crate::solver::precondition::sum_kernel_pairs(&self.spec, |p, v| {
            let k = kernels.spectra[p * points + v];
            num_complex::Complex64::new(k.re.to_f64(), k.im.to_f64())
        })?;
        Ok(Some((total, self.spec.kernel_dims)))
    }
}
