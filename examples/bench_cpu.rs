//! CPU benchmark on the cases of shared/bench (same sizes and phase
//! magnitudes as cases.py): Gpairs/s = N·M / seconds per operator and
//! precision mode, and the relative error against a float64 direct sum on
//! a random subset of outputs.
//!
//!   cargo run --release --example bench_cpu -- [case ...] [--modes accurate,fast,double] [--reps 3] [--no-reference]
//!
//! Cases: bieri-64, bieri-128 (default), bieri-256, fourier-256-1coil.

use horecon::{BackendKind, Complex32, Options, Precision};
use num_complex::Complex64;
use rayon::prelude::*;
use std::time::Instant;

#[path = "common/cases.rs"]
mod cases;
use cases::{make_case, rel, Reference, Rng};

/// CPU seconds used by this process so far (user + system).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cases = vec![];
    let mut modes = vec![Precision::Accurate, Precision::Fast, Precision::Double];
    let mut reps = 3;
    let mut reference = true;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--modes" => {
                i += 1;
                modes = args[i]
                    .split(',')
                    .map(|m| m.parse().unwrap_or_else(|e| panic!("{e}")))
                    .collect();
            }
            "--reps" => {
                i += 1;
                reps = args[i].parse().expect("--reps takes a number");
            }
            "--no-reference" => reference = false,
            c => cases.push(c.to_string()),
        }
        i += 1;
    }
    if cases.is_empty() {
        cases.push("bieri-128".into());
    }
    println!("threads: {}", rayon::current_num_threads());
    println!(
        "{:<18} {:<9} {:<8} {:>10} {:>10} {:>14} {:>10}",
        "case", "mode", "op", "ms", "Gpairs/s", "Gpairs/cpu-s", "rel.err"
    );
    for name in &cases {
        let case = make_case(name);
        let (n, m, coils) = (case.voxels(), case.samples, case.coils);
        let pairs = (n * m) as f64;
        let mut rng = Rng(99);
        let image = rng.complex(n);
        let data = rng.complex(m * coils);
        let checked = if reference { 64 } else { 0 };
        let voxel_rows: Vec<usize> = (0..checked)
            .map(|_| (rng.next() % n as u64) as usize)
            .collect();
        let sample_rows: Vec<usize> = (0..checked)
            .map(|_| (rng.next() % m as u64) as usize)
            .collect();
        let mut references: Option<(Vec<Complex64>, Vec<Complex64>)> = None;
        for &mode in &modes {
            let plan = case.plan(Options {
                backend: BackendKind::Cpu,
                precision: mode,
                ..Options::default()
            });
            if references.is_none() && reference {
                let features = plan.model().features().expect("features");
                let r = Reference {
                    plan: &plan,
                    voxel: features.voxel,
                    sample: features.sample,
                    terms: features.terms,
                };
                let forward: Vec<Complex64> = sample_rows
                    .iter()
                    .flat_map(|&j| r.forward_at(&image, j))
                    .collect();
                let adjoint: Vec<Complex64> = voxel_rows
                    .par_iter()
                    .map(|&v| r.adjoint_at(&data, v))
                    .collect();
                references = Some((forward, adjoint));
            }
            let mut d = vec![Complex32::default(); m * coils];
            let mut x = vec![Complex32::default(); n];
            plan.forward(&image, &mut d).expect("forward"); // warm-up builds the operator
            for (op, run) in [("forward", 0), ("adjoint", 1)] {
                let mut best = f64::INFINITY;
                let cpu0 = cpu_seconds();
                for _ in 0..reps {
                    let t = Instant::now();
                    if run == 0 {
                        plan.forward(&image, &mut d).expect("forward");
                    } else {
                        plan.adjoint(&data, &mut x).expect("adjoint");
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                let per_cpu = pairs * reps as f64 / (cpu_seconds() - cpu0);
                let err = match &references {
                    None => f64::NAN,
                    // the forward subset in (sample, coil) order
                    Some((f, _)) if run == 0 => rel(
                        &sample_rows
                            .iter()
                            .flat_map(|&j| {
                                let d = &d;
                                (0..coils).map(move |l| d[l * m + j])
                            })
                            .collect::<Vec<Complex32>>(),
                        f,
                    ),
                    Some((_, a)) => rel(&voxel_rows.iter().map(|&v| x[v]).collect::<Vec<_>>(), a),
                };
                println!(
                    "{:<18} {:<9} {:<8} {:>10.1} {:>10.3} {:>14.3} {:>10.2e}",
                    name,
                    format!("{mode:?}").to_lowercase(),
                    op,
                    best * 1e3,
                    pairs / best / 1e9,
                    per_cpu / 1e9,
                    err
                );
            }
        }
    }
}
