//! The NUFFT executors of the fast path, per backend.

use crate::error::Result;
use crate::nufft::{direct, NufftExecutor, NufftSpec, NufftType};
use crate::plan::BackendKind;
use num_complex::{Complex32, Complex64};
use rayon::prelude::*;

/// An executor for `spec` with `points` (ndims×M radians, sample fastest),
/// on `backend`: the CPU's runs on `pool`; CUDA plans run it on device
/// `device` once the CUDA executor is merged (until then on the CPU):
/// `BackendKind::Cuda => crate::backend::cuda::nufft::build(spec, points, npoints, device)`.
pub fn build(
    _backend: BackendKind,
    _device: usize,
    spec: &NufftSpec,
    points: &[f64],
    npoints: usize,
    _pool: std::sync::Arc<rayon::ThreadPool>,
) -> Result<Box<dyn NufftExecutor>> {
    Ok(Box::new(DirectExecutor {
        spec: spec.clone(),
        points: crate::error::try_copy(points, "NUFFT points")?,
        npoints,
    }))
}

/// Float64 direct sums behind the executor trait (O(M·N) per transform).
pub struct DirectExecutor {
    spec: NufftSpec,
    points: Vec<f64>,
    npoints: usize,
}

impl DirectExecutor {
    fn run(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) {
        let g = self.spec.modes.total();
        let m = self.npoints;
        match self.spec.kind {
            NufftType::One => grid
                .par_chunks_mut(g)
                .zip(nonuniform.par_chunks(m))
                .for_each(|(out, c)| {
                    out.copy_from_slice(&direct::type1(
                        &self.spec.modes,
                        &self.points,
                        self.spec.sign,
                        c,
                    ));
                }),
            NufftType::Two => nonuniform
                .par_chunks_mut(m)
                .zip(grid.par_chunks(g))
                .for_each(|(out, f)| {
                    out.copy_from_slice(&direct::type2(
                        &self.spec.modes,
                        &self.points,
                        m,
                        self.spec.sign,
                        f,
                    ));
                }),
        }
    }
}

impl NufftExecutor for DirectExecutor {
    fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()> {
        let widen = |x: &[Complex32]| -> Vec<Complex64> {
            x.iter()
                .map(|c| Complex64::new(c.re as f64, c.im as f64))
                .collect()
        };
        let (mut a, mut b) = (widen(nonuniform), widen(grid));
        self.run(&mut a, &mut b);
        let narrow = |x: &[Complex64], out: &mut [Complex32]| {
            out.iter_mut()
                .zip(x)
                .for_each(|(o, v)| *o = Complex32::new(v.re as f32, v.im as f32))
        };
        narrow(&a, nonuniform);
        narrow(&b, grid);
        Ok(())
    }

    fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()> {
        self.run(nonuniform, grid);
        Ok(())
    }

    fn backend_name(&self) -> String {
        "cpu (direct sums)".into()
    }
}
