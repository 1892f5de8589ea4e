//! A NUFFT plan over several GPUs (`num_devices` > 1): its transforms
//! shared out by part. Part p runs the transforms [t_p, t_p + T_p) (sizes
//! differing by at most one) as a one-GPU plan of its own on its device,
//! the points sorted there; a call runs the parts concurrently, each on its
//! slices of the caller's arrays and its own stream and host thread. The
//! transforms are independent, so nothing is summed or moved between the
//! GPUs, and every transform gives what a one-GPU plan gives. With fewer
//! transforms than devices, one part per transform.
//!
//! `HORECON_CUDA_TEST_PARTS=P` places P parts on the first GPU
//! ([`crate::backend::cuda::placement`]), as for the exact operator.

use super::CudaNufft;
use crate::backend::cuda::multi::part_ranges;
use crate::backend::cuda::placement;
use crate::error::{Error, Result};
use crate::nufft::{NufftExecutor, NufftSpec};
use crate::options::Options;
use num_complex::{Complex32, Complex64};

/// The CUDA executor of `spec` for `options`: on one device, or shared out
/// over the devices of [`placement`] by transforms ([`SplitNufft`]).
pub fn build(
    spec: &NufftSpec,
    points: &[f64],
    npoints: usize,
    options: &Options,
) -> Result<Box<dyn NufftExecutor>> {
    let devices = placement(options)?;
    let parts = devices.len().min(spec.transforms).max(1);
    if parts == 1 {
        return super::build(spec, points, npoints, devices[0].ordinal);
    }
    let arithmetic = super::host_arithmetic(spec, npoints);
    let mut built = Vec::with_capacity(parts);
    for (device, (first, count)) in devices.iter().zip(part_ranges(spec.transforms, parts)) {
        let part_spec = NufftSpec {
            transforms: count,
            ..arithmetic.clone()
        };
        let nufft = CudaNufft::new(&part_spec, points, npoints, device.ordinal)?;
        built.push(Part {
            first,
            count,
            nufft,
        });
    }
    Ok(Box::new(SplitNufft {
        parts: built,
        points: npoints,
        modes: spec.modes.total(),
    }))
}

/// One part: transforms [first, first + count) on its own plan.
struct Part {
    first: usize,
    count: usize,
    nufft: CudaNufft,
}

/// A NUFFT's transforms shared out over several one-GPU plans (module documentation).
pub struct SplitNufft {
    parts: Vec<Part>,
    /// M.
    points: usize,
    /// Π n_a.
    modes: usize,
}

impl SplitNufft {
    /// Runs `each` on every part's slices of `nonuniform` (transforms × M)
    /// and `grid` (transforms × Π n_a), the first part on the calling
    /// thread; the first error (in part order) is returned.
    fn on_parts<T: Send>(
        &self,
        nonuniform: &mut [T],
        grid: &mut [T],
        each: impl Fn(&CudaNufft, &mut [T], &mut [T]) -> Result<()> + Sync,
    ) -> Result<()> {
        let mut slices = Vec::with_capacity(self.parts.len());
        let (mut rest_c, mut rest_g) = (nonuniform, grid);
        for part in &self.parts {
            let (c, tail_c) = rest_c.split_at_mut(part.count * self.points);
            let (g, tail_g) = rest_g.split_at_mut(part.count * self.modes);
            slices.push((part, c, g));
            (rest_c, rest_g) = (tail_c, tail_g);
        }
        let each = &each;
        std::thread::scope(|s| {
            let mut slices = slices.into_iter();
            let first = slices.next();
            let others: Vec<_> = slices
                .map(|(part, c, g)| s.spawn(move || each(&part.nufft, c, g)))
                .collect();
            let mut result = first.map_or(Ok(()), |(part, c, g)| each(&part.nufft, c, g));
            for handle in others {
                let outcome = handle
                    .join()
                    .unwrap_or_else(|_| Err(Error::internal("a NUFFT part's thread panicked")));
                if result.is_ok() {
                    result = outcome;
                }
            }
            result
        })
    }
}

impl NufftExecutor for SplitNufft {
    fn execute(&self, nonuniform: &mut [Complex32], grid: &mut [Complex32]) -> Result<()> {
        self.on_parts(nonuniform, grid, |nufft, c, g| nufft.execute(c, g))
    }

    fn execute_c64(&self, nonuniform: &mut [Complex64], grid: &mut [Complex64]) -> Result<()> {
        self.on_parts(nonuniform, grid, |nufft, c, g| nufft.execute_c64(c, g))
    }

    /// "cuda:0+1" (the parts' devices), with the transforms of each part.
    fn backend_name(&self) -> String {
        let devices: Vec<String> = self
            .parts
            .iter()
            .map(|p| p.nufft.device_ordinal().to_string())
            .collect();
        let shares: Vec<String> = self
            .parts
            .iter()
            .map(|p| format!("{}..{}", p.first, p.first + p.count))
            .collect();
        format!(
            "cuda:{} (transforms {} by part)",
            devices.join("+"),
            shares.join(", ")
        )
    }
}
