//! Several GPUs side by side in one run (issues 15 and 16): for each count
//! of parts D (default 1 and every count up to the devices present; the
//! parts on devices 0..D−1, or with `--test-parts` all on device 0, the
//! split's overhead on one GPU):
//!
//! - bieri-512 accurate E and Eᴴ: device-resident time (the parts' copies
//!   and sums included) and through the plan (host transfers included), with
//!   the relative RMS error against float64 on 32 random outputs;
//! - 50 CG iterations on bieri-512 (Tikhonov), end to end;
//! - stone-fhd Fᴴd through the plan.
//!
//! Every figure is followed by its speed-up over D = 1 from the same run.
//!
//! Run: cargo run --release --example bench_multi_gpu [--parts 1,2] [--test-parts]

use horecon::backend::cuda::{context, CudaMulti, CudaOperator};
use horecon::{BackendKind, Complex32, Options, Plan, Precision};
use num_complex::Complex64;
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

#[path = "common/cases.rs"]
mod cases;
use cases::{make_case, rel, Case, Reference, Rng};

const REPS: usize = 5;

fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Options for D parts: devices 0..D−1, or (test parts) D parts on device 0.
fn options(parts: usize, test_parts: bool) -> Options {
    if test_parts && parts > 1 {
        std::env::set_var("HORECON_CUDA_TEST_PARTS", parts.to_string());
    } else {
        std::env::remove_var("HORECON_CUDA_TEST_PARTS");
    }
    Options {
        backend: BackendKind::Cuda,
        precision: Precision::Accurate,
        num_devices: if test_parts { 1 } else { parts as i32 },
        verbosity: 1,
        ..Options::default()
    }
}

/// Device-resident seconds of E and Eᴴ for D parts.
fn resident(plan: &Plan, parts: usize, test_parts: bool) -> (f64, f64) {
    let features = plan.model().features().expect("features");
    let devices: Vec<Arc<context::Device>> = (0..parts)
        .map(|d| context::device(if test_parts { 0 } else { d }).expect("device"))
        .collect();
    if parts == 1 {
        let op = CudaOperator::new(
            devices[0].clone(),
            &features,
            plan.sizes(),
            Precision::Accurate,
        )
        .expect("operator");
        (
            op.time_resident(true, REPS).expect("forward"),
            op.time_resident(false, REPS).expect("adjoint"),
        )
    } else {
        let op = CudaMulti::new(&devices, &features, plan.sizes(), Precision::Accurate)
            .expect("operator");
        println!("RESULT   parts: {}", op.describe());
        println!("RESULT   links: {}", op.links());
        let ms = |times: Vec<f64>| -> String {
            let ms: Vec<String> = times.iter().map(|t| format!("{:.3}", t * 1e3)).collect();
            ms.join(" / ")
        };
        println!(
            "RESULT   parts alone (ms): E {} | EH {}",
            ms(op.time_parts(true, REPS).expect("forward parts")),
            ms(op.time_parts(false, REPS).expect("adjoint parts"))
        );
        (
            op.time_resident(true, REPS).expect("forward"),
            op.time_resident(false, REPS).expect("adjoint"),
        )
    }
}

struct Figures {
    e: f64,
    eh: f64,
    e_api: f64,
    eh_api: f64,
    cg: f64,
    fhd: f64,
}

fn run(parts: usize, test_parts: bool, bieri: &Case, stone: &Case) -> Figures {
    let opts = options(parts, test_parts);
    let (n, m, l) = (bieri.voxels(), bieri.samples, bieri.coils);
    let pairs = (n * m) as f64;
    let plan = bieri.plan(opts);
    let (e, eh) = resident(&plan, parts, test_parts);
    let mut rng = Rng(11);
    let image = rng.complex(n);
    let data = rng.complex(m * l);
    let mut d = vec![Complex32::default(); data.len()];
    let mut x = vec![Complex32::default(); n];
    plan.forward(&image, &mut d).expect("forward");
    let e_api = best_of(REPS, || plan.forward(&image, &mut d).expect("forward"));
    plan.adjoint(&data, &mut x).expect("adjoint");
    let eh_api = best_of(REPS, || plan.adjoint(&data, &mut x).expect("adjoint"));
    let features = plan.model().features().expect("features");
    let r = Reference {
        plan: &plan,
        voxel: features.voxel.clone(),
        sample: features.sample.clone(),
        terms: features.terms,
    };
    let voxels: Vec<usize> = (0..32).map(|_| (rng.next() % n as u64) as usize).collect();
    let samples: Vec<usize> = (0..32).map(|_| (rng.next() % m as u64) as usize).collect();
    let aref: Vec<Complex64> = voxels.par_iter().map(|&v| r.adjoint_at(&data, v)).collect();
    let fref: Vec<Complex64> = samples
        .iter()
        .flat_map(|&j| r.forward_at(&image, j))
        .collect();
    let got_f: Vec<Complex32> = samples
        .iter()
        .flat_map(|&j| (0..l).map(move |c| (j, c)))
        .map(|(j, c)| d[c * m + j])
        .collect();
    let got_a: Vec<Complex32> = voxels.iter().map(|&v| x[v]).collect();
    let (ef, ea) = (rel(&got_f, &fref), rel(&got_a, &aref));
    println!(
        "RESULT parts={parts}{} bieri-512 accurate ({}):",
        if test_parts { " (on GPU 0)" } else { "" },
        plan.operator().expect("operator").backend_name()
    );
    println!(
        "RESULT   E : kernel {:8.3} ms {:7.1} Gpairs/s | api {:8.3} ms | rel err {ef:.2e}",
        e * 1e3,
        pairs / e / 1e9,
        e_api * 1e3
    );
    println!(
        "RESULT   EH: kernel {:8.3} ms {:7.1} Gpairs/s | api {:8.3} ms | rel err {ea:.2e}",
        eh * 1e3,
        pairs / eh / 1e9,
        eh_api * 1e3
    );
    let cg_options = cases::cg50();
    let mut solution = vec![Complex32::default(); n];
    let t = Instant::now();
    let info = plan.cg(&data, &cg_options, &mut solution).expect("cg");
    let cg = t.elapsed().as_secs_f64();
    println!(
        "RESULT   CG 50: {:.3} s end to end ({} iterations, residual {:.3e})",
        cg, info.iterations, info.rel_residual
    );
    let stone_plan = stone.plan(options(parts, test_parts));
    let stone_data = Rng(3).complex(stone.samples);
    let mut fhd_out = vec![Complex32::default(); stone.voxels()];
    stone_plan
        .fhd(&stone_data, None, &mut fhd_out)
        .expect("fhd");
    let fhd = best_of(3, || {
        stone_plan
            .fhd(&stone_data, None, &mut fhd_out)
            .expect("fhd")
    });
    println!("RESULT   stone-fhd FHd: {:.3} s", fhd);
    Figures {
        e,
        eh,
        e_api,
        eh_api,
        cg,
        fhd,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let test_parts = args.iter().any(|a| a == "--test-parts");
    let present = match context::probe() {
        Ok(n) => n,
        Err(reason) => {
            println!("skipped: no CUDA device ({reason})");
            return;
        }
    };
    let counts: Vec<usize> = match args.iter().position(|a| a == "--parts") {
        Some(i) => args
            .get(i + 1)
            .expect("--parts 1,2")
            .split(',')
            .map(|s| s.parse().expect("--parts: counts"))
            .collect(),
        None if test_parts => vec![1, 2],
        None => (1..=present).collect(),
    };
    for d in 0..present {
        let dev = context::device(d).expect("device");
        println!(
            "device {d}: {} (sm_{}{}, {} SMs)",
            dev.name, dev.capability.0, dev.capability.1, dev.multiprocessors
        );
    }
    let bieri = make_case("bieri-512");
    let stone = make_case("stone-fhd");
    let mut base: Option<Figures> = None;
    for &parts in &counts {
        if !test_parts && parts > present {
            println!("RESULT parts={parts}: skipped ({present} device(s) present)");
            continue;
        }
        let f = run(parts, test_parts, &bieri, &stone);
        let b = base.get_or_insert(Figures { ..f });
        println!(
            "RESULT   speed-up over 1 part: E {:.2}x EH {:.2}x (api {:.2}x {:.2}x) CG {:.2}x FHd {:.2}x",
            b.e / f.e,
            b.eh / f.eh,
            b.e_api / f.e_api,
            b.eh_api / f.eh_api,
            b.cg / f.cg,
            b.fhd / f.fhd
        );
    }
    std::env::remove_var("HORECON_CUDA_TEST_PARTS");
}
