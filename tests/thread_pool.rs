//! Every parallel loop of a plan runs on the plan's own threads: a plan of
//! `num_threads` never starts rayon's global pool (one thread per core, kept
//! for the life of the process; where its threads cannot be created it fails
//! once and then panics on every later use, and its allocations were not in
//! the plans' memory estimates: tests/memory.rs failed on a 16-core host).
//! Checked by the process's thread count (Linux): after the calls below on
//! one-thread plans, with the plans dropped, it is back where it started.
//! One test in this file: no other test may start threads beside it.

mod common;
use common::*;
use horecon::plan::Call;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan};

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn one_thread() -> Options {
    Options {
        backend: BackendKind::Cpu,
        num_threads: 1,
        ..Options::default()
    }
}

/// Forward, adjoint, normal, CG and the memory estimates of `plan`.
fn exercise(plan: &Plan, p: &Problem, rng: &mut Rng) {
    let (n, m) = (p.voxels(), p.samples * p.coils);
    let x = rng.complex(n);
    let mut data = vec![Complex32::default(); m];
    plan.forward(&x, &mut data).unwrap();
    let mut y = vec![Complex32::default(); n];
    plan.adjoint(&data, &mut y).unwrap();
    plan.normal(&x, &mut y).unwrap();
    let cg = CgOptions {
        max_iterations: 3,
        ..CgOptions::default()
    };
    plan.cg(&data, &cg, &mut y).unwrap();
    for call in [Call::Forward, Call::Adjoint, Call::Normal, Call::Cg] {
        plan.memory(call).unwrap();
    }
}

#[test]
fn plans_never_start_the_global_thread_pool() {
    if !std::path::Path::new("/proc/self/task").exists() {
        eprintln!("skipped: no /proc/self/task to count threads (Linux only)");
        return;
    }
    let mut rng = Rng::fresh("plans_never_start_the_global_thread_pool");
    let before = threads();
    {
        // Exact operators, then Toeplitz with off-resonance (segmentation,
        // pair basis, kernel NUFFT) on a higher-order-free lattice problem.
        let p = lattice_problem(&mut rng, [9, 8, 1], 2, 150, 4, Some((150.0, 0.02)));
        let mut plan = p.plan_with(one_thread());
        exercise(&plan, &p, &mut rng);
        plan.set_toeplitz(true, 0).unwrap();
        plan.toeplitz_spec(0).unwrap();
        exercise(&plan, &p, &mut rng);
        // A trajectory plan: gridding.
        let m = p.samples;
        let k: Vec<f64> = p.coefficients[m..3 * m].to_vec();
        let [nx, ny, nz] = p.dims;
        let mut plan =
            Plan::new(one_thread(), nx as i64, ny as i64, nz as i64, 2, m as i64).unwrap();
        plan.set_positions(&p.positions).unwrap();
        plan.set_trajectory(2, &k).unwrap();
        let data = rng.complex(2 * m);
        let mut image = vec![Complex32::default(); p.voxels()];
        plan.gridding(&data, None, &mut image).unwrap();
    }
    // Dropped pools' threads exit asynchronously.
    let start = std::time::Instant::now();
    while threads() > before && start.elapsed().as_secs_f64() < 10.0 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        threads(),
        before,
        "threads left running after the plans were dropped: rayon's global pool was started"
    );
}
