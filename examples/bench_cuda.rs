//! GPU benchmark of the CUDA backend on the cases of shared/bench/README.md
//! (sizes and formulas of cases.py; the random parts drawn from our own
//! generator). Prints, per case and precision mode, E and Eᴴ in ms and
//! Gpairs/s (device-resident kernel time and the C-API call with its
//! transfers), the relative RMS error against a float64 direct sum on a
//! random subset of outputs, and 50 CG iterations end to end on bieri-512.
//!
//! Run: cargo run --release --example bench_cuda [case ...]

use horecon::backend::cuda::{context, CudaOperator};
use horecon::{BackendKind, Complex32, Options, Plan, Precision};
use num_complex::Complex64;
use rayon::prelude::*;
use std::time::Instant;

#[path = "common/cases.rs"]
mod cases;
use cases::{make_case, rel, Case, Reference, Rng};

fn plan(case: &Case, precision: Precision) -> Plan {
    case.plan(Options {
        backend: BackendKind::Cuda,
        precision,
        ..Options::default()
    })
}

fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn bench_case(name: &str, modes: &[Precision]) {
    let case = make_case(name);
    let s = (
        case.dims.iter().product::<usize>(),
        case.samples,
        case.coils,
    );
    let pairs = (s.0 * s.1) as f64;
    let mut rng = Rng(11);
    let image = rng.complex(s.0);
    let data = rng.complex(s.1 * s.2);
    let subset = 32;
    let voxels: Vec<usize> = (0..subset)
        .map(|_| (rng.next() % s.0 as u64) as usize)
        .collect();
    let samples: Vec<usize> = (0..subset)
        .map(|_| (rng.next() % s.1 as u64) as usize)
        .collect();
    let mut references: Option<(Vec<Complex64>, Vec<Complex64>)> = None;
    for &precision in modes {
        let p = plan(&case, precision);
        let t = Instant::now();
        let features = p.model().features().expect("features");
        let device = context::device(0).expect("device 0");
        let op = CudaOperator::new(device, &features, p.sizes(), precision).expect("operator");
        let build = t.elapsed().as_secs_f64();
        let reps = if pairs > 2e11 { 2 } else { 5 };
        let kf = op.time_resident(true, reps).expect("forward");
        let ka = op.time_resident(false, reps).expect("adjoint");
        // The C-API path (plan's own operator; first call builds it).
        let mut d = vec![Complex32::default(); data.len()];
        let mut x = vec![Complex32::default(); image.len()];
        p.forward(&image, &mut d).expect("forward");
        let af = best_of(reps.min(3), || p.forward(&image, &mut d).expect("forward"));
        p.adjoint(&data, &mut x).expect("adjoint");
        let aa = best_of(reps.min(3), || p.adjoint(&data, &mut x).expect("adjoint"));
        if references.is_none() {
            let r = Reference {
                plan: &p,
                voxel: features.voxel.clone(),
                sample: features.sample.clone(),
                terms: features.terms,
            };
            let adj: Vec<Complex64> = voxels.par_iter().map(|&v| r.adjoint_at(&data, v)).collect();
            let fwd: Vec<Vec<Complex64>> =
                samples.iter().map(|&j| r.forward_at(&image, j)).collect();
            // forward subset in (sample, coil) order
            let fwd: Vec<Complex64> = fwd.into_iter().flatten().collect();
            references = Some((fwd, adj));
        }
        let (fref, aref) = references.as_ref().expect("references");
        let got_f: Vec<Complex32> = samples
            .iter()
            .flat_map(|&j| (0..s.2).map(move |l| (j, l)))
            .map(|(j, l)| d[l * s.1 + j])
            .collect();
        let got_a: Vec<Complex32> = voxels.iter().map(|&v| x[v]).collect();
        let (ef, ea) = (rel(&got_f, fref), rel(&got_a, aref));
        println!(
            "RESULT case={name} mode={precision:?} N={} M={} L={} build_s={build:.3}",
            s.0, s.1, s.2
        );
        println!(
            "RESULT   E : kernel {:9.3} ms {:7.1} Gpairs/s | api {:9.3} ms {:7.1} Gpairs/s | rel err {ef:.2e}",
            kf * 1e3,
            pairs / kf / 1e9,
            af * 1e3,
            pairs / af / 1e9
        );
        println!(
            "RESULT   EH: kernel {:9.3} ms {:7.1} Gpairs/s | api {:9.3} ms {:7.1} Gpairs/s | rel err {ea:.2e}",
            ka * 1e3,
            pairs / ka / 1e9,
            aa * 1e3,
            pairs / aa / 1e9
        );
        println!("RESULT   kernels: {}", op.describe());
    }
}

fn bench_cg() {
    let case = make_case("bieri-512");
    let p = plan(&case, Precision::Accurate);
    let n: usize = case.dims.iter().product();
    let mut rng = Rng(5);
    let data = rng.complex(case.samples * case.coils);
    let t = Instant::now();
    p.operator().expect("operator");
    let build = t.elapsed().as_secs_f64();
    let options = cases::cg50();
    let mut x = vec![Complex32::default(); n];
    let t = Instant::now();
    let info = p.cg(&data, &options, &mut x).expect("cg");
    let wall = t.elapsed().as_secs_f64();
    println!(
        "RESULT case=bieri-512 cg50 accurate: {} iterations, {:.3} s end to end (plan.cg reports {:.3} s; operator build before it {:.3} s), residual {:.3e}",
        info.iterations, wall, info.seconds, build, info.rel_residual
    );
}

/// Kernel shapes on bieri-512 (kernel time and error per shape) in accurate
/// ("sweep") and fast mode ("sweep-fast"); the first two shapes are the
/// default (tensor cores) and the FFMA kernel.
fn sweep(precision: Precision) {
    let accurate: &[&[(&str, &str)]] = &[
        &[],
        &[("HORECON_CUDA_TENSOR", "0")],
        &[("HORECON_CUDA_SEGMENT", "64")],
        &[("HORECON_CUDA_UNROLL", "1")],
        &[("HORECON_CUDA_THREADS", "128"), ("HORECON_CUDA_MINB", "3")],
        &[("HORECON_CUDA_MT", "2"), ("HORECON_CUDA_MINB", "4")],
        &[("HORECON_CUDA_TILE", "64")],
    ];
    let fast: &[&[(&str, &str)]] = &[
        &[],
        &[("HORECON_CUDA_TENSOR", "0")],
        &[("HORECON_CUDA_TILE", "128")],
        &[("HORECON_CUDA_UNROLL", "4")],
        &[("HORECON_CUDA_THREADS", "128"), ("HORECON_CUDA_MINB", "4")],
        &[("HORECON_CUDA_MT", "8"), ("HORECON_CUDA_THREADS", "128")],
        &[("HORECON_CUDA_MT", "6"), ("HORECON_CUDA_THREADS", "128")],
    ];
    let shapes = if precision == Precision::Fast {
        fast
    } else {
        accurate
    };
    for shape in shapes {
        for (k, v) in *shape {
            std::env::set_var(k, v);
        }
        println!("SWEEP shape {shape:?}");
        bench_case("bieri-512", &[precision]);
        for (k, _) in *shape {
            std::env::remove_var(k);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = [
        "bieri-256",
        "bieri-512",
        "fourier-256-1coil",
        "stone-fhd",
        "stone-fhd-3k",
        "cg",
    ];
    let chosen: Vec<&str> = if args.is_empty() {
        all.to_vec()
    } else {
        args.iter().map(|s| s.as_str()).collect()
    };
    match context::device(0) {
        Ok(d) => println!(
            "device: {} (sm_{}{}, {} SMs)",
            d.name, d.capability.0, d.capability.1, d.multiprocessors
        ),
        Err(reason) => {
            println!("skipped: no CUDA device ({reason})");
            return;
        }
    }
    use Precision::*;
    for c in chosen {
        match c {
            "cg" => bench_cg(),
            "sweep" => sweep(Accurate),
            "sweep-fast" => sweep(Fast),
            "bieri-512:A" => bench_case("bieri-512", &[Accurate]),
            "bieri-512:F" => bench_case("bieri-512", &[Fast]),
            "bieri-256" | "bieri-512" => bench_case(c, &[Accurate, Fast, Double]),
            other => bench_case(other, &[Accurate, Fast]),
        }
    }
}
