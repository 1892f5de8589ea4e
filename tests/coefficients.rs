//! `Plan::set_coefficients`: new coefficients taken in place by a built
//! operator (EncodingOperator::update_samples) give what a plan built from
//! them gives: identically on the CPU, within the precision class on the GPU
//! (skipped without one), through forward, adjoint, normal and CG; the
//! Toeplitz operator is rebuilt; bad coefficients leave the plan unchanged.
//! Every test prints its seed (HORECON_TEST_SEED replays it).

mod common;

use common::*;
use horecon::backend::cuda::context::probe;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Status};

/// E x, Eᴴ d, EᴴE x and 5 CG iterations of `plan`.
fn outputs(plan: &Plan, x: &[Complex32], d: &[Complex32]) -> Vec<Vec<Complex32>> {
    let (n, md) = (x.len(), d.len());
    let mut fwd = vec![Complex32::default(); md];
    plan.forward(x, &mut fwd).unwrap();
    let mut adj = vec![Complex32::default(); n];
    plan.adjoint(d, &mut adj).unwrap();
    let mut normal = vec![Complex32::default(); n];
    plan.normal(x, &mut normal).unwrap();
    let mut image = vec![Complex32::default(); n];
    let cg = CgOptions {
        max_iterations: 5,
        tolerance: 0.0,
        ..CgOptions::default()
    };
    plan.cg(d, &cg, &mut image).unwrap();
    vec![fwd, adj, normal, image]
}

/// The largest relative difference between `a` and `b`, output by output.
fn difference(a: &[Vec<Complex32>], b: &[Vec<Complex32>]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| rel_error(a, &to_c64(b)))
        .fold(0.0, f64::max)
}

/// New coefficients for `problem`, round `round`: random ones, then one
/// column constant, then one column zero (the phase sums' rotation and
/// effective terms change with them).
fn new_coefficients(rng: &mut Rng, problem: &Problem, round: usize) -> Vec<f64> {
    let m = problem.samples;
    let mut c: Vec<f64> = problem
        .coefficients
        .iter()
        .map(|&k| k * rng.range(0.5, 1.5) + rng.range(-1.0, 1.0))
        .collect();
    let b = rng.int(0, problem.terms - 1);
    match round {
        1 => c[b * m..(b + 1) * m].fill(rng.range(-3.0, 3.0)),
        2 => c[b * m..(b + 1) * m].fill(0.0),
        _ => {}
    }
    c
}

/// Updates a built plan three times and compares each with a fresh plan,
/// on `problems` random problems; returns the largest difference.
fn updated_against_fresh(rng: &mut Rng, options: Options, problems: usize) -> f64 {
    let mut worst = 0.0f64;
    for _ in 0..problems {
        let mut problem = Problem::random(rng, 200, 120, 4.0);
        let (x, d) = random_inputs(rng, &problem);
        let mut plan = problem.plan_with(options);
        outputs(&plan, &x, &d);
        for round in 0..3 {
            problem.coefficients = new_coefficients(rng, &problem, round);
            plan.set_coefficients(&problem.coefficients).unwrap();
            let fresh = problem.plan_with(options);
            worst = worst.max(difference(
                &outputs(&plan, &x, &d),
                &outputs(&fresh, &x, &d),
            ));
        }
    }
    worst
}

#[test]
fn cpu_update_in_place_equals_a_fresh_plan() {
    let mut rng = Rng::fresh("cpu_update_in_place_equals_a_fresh_plan");
    for precision in [Precision::Accurate, Precision::Fast, Precision::Double] {
        let options = Options {
            backend: BackendKind::Cpu,
            precision,
            ..Options::default()
        };
        let worst = updated_against_fresh(&mut rng, options, 4);
        assert_eq!(worst, 0.0, "{precision:?}: updated and fresh plans differ");
    }
}

#[test]
fn cuda_update_in_place_matches_a_fresh_plan() {
    if let Err(reason) = probe() {
        eprintln!("cuda_update_in_place_matches_a_fresh_plan: skipped: no CUDA device ({reason})");
        return;
    }
    let mut rng = Rng::fresh("cuda_update_in_place_matches_a_fresh_plan");
    for (precision, class) in [
        (Precision::Accurate, 1e-5),
        (Precision::Fast, 1e-3),
        (Precision::Double, 1e-7),
    ] {
        let options = Options {
            backend: BackendKind::Cuda,
            precision,
            ..Options::default()
        };
        // Fewer problems: each new kernel shape is compiled once (NVRTC).
        let worst = updated_against_fresh(&mut rng, options, 2);
        assert!(
            worst <= class,
            "{precision:?}: updated vs fresh {worst:.2e} > {class:.0e}"
        );
    }
}

/// The operators report the update in place (true) and then compute what a
/// fresh build computes; features of another size are refused (false).
#[test]
fn operators_update_in_place() {
    let mut rng = Rng::fresh("operators_update_in_place");
    let pool = std::sync::Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    );
    let mut backends = vec![BackendKind::Cpu];
    match probe() {
        Ok(_) => backends.push(BackendKind::Cuda),
        Err(reason) => eprintln!("operators_update_in_place: CUDA skipped ({reason})"),
    }
    for backend in backends {
        let mut problem = Problem::random(&mut rng, 200, 120, 4.0);
        let options = Options {
            backend,
            ..Options::default()
        };
        let (x, d) = random_inputs(&mut rng, &problem);
        let build = |problem: &Problem| {
            let plan = problem.plan_with(options);
            let features = plan.model().features().unwrap();
            let op =
                horecon::backend::build(backend, &features, plan.sizes(), &options, pool.clone())
                    .unwrap();
            (op, features)
        };
        let (mut op, old) = build(&problem);
        problem.coefficients = new_coefficients(&mut rng, &problem, 0);
        let (fresh, new) = build(&problem);
        assert!(!op.update_samples(&new.voxel, &new.sample[1..]).unwrap());
        assert!(op.update_samples(&new.voxel, &new.sample).unwrap());
        assert_ne!(old.sample, new.sample);
        let apply = |op: &dyn horecon::op::EncodingOperator| {
            let mut fwd = vec![Complex32::default(); d.len()];
            op.forward(&x, &mut fwd).unwrap();
            let mut adj = vec![Complex32::default(); x.len()];
            op.adjoint(&d, &mut adj).unwrap();
            vec![fwd, adj]
        };
        let worst = difference(&apply(op.as_ref()), &apply(fresh.as_ref()));
        let limit = if backend == BackendKind::Cpu {
            0.0
        } else {
            1e-5
        };
        assert!(worst <= limit, "{backend:?}: updated vs fresh {worst:.2e}");
    }
}

/// A shared operator is not updated under its holder: the plan rebuilds.
#[test]
fn a_shared_operator_is_left_alone() {
    let mut rng = Rng::fresh("a_shared_operator_is_left_alone");
    let mut problem = Problem::random(&mut rng, 100, 80, 3.0);
    let options = Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    };
    let (x, _) = random_inputs(&mut rng, &problem);
    let mut plan = problem.plan_with(options);
    let held = plan.operator().unwrap();
    let mut before = vec![Complex32::default(); problem.samples * problem.coils];
    held.forward(&x, &mut before).unwrap();
    problem.coefficients = new_coefficients(&mut rng, &problem, 0);
    plan.set_coefficients(&problem.coefficients).unwrap();
    let mut after = before.clone();
    held.forward(&x, &mut after).unwrap();
    assert_eq!(before, after, "the held operator changed");
    let mut new = before.clone();
    plan.forward(&x, &mut new).unwrap();
    let mut fresh = before.clone();
    problem.plan_with(options).forward(&x, &mut fresh).unwrap();
    assert_eq!(new, fresh);
}

/// With Toeplitz on, EᴴE after new coefficients is a fresh plan's.
#[test]
fn toeplitz_is_rebuilt_for_new_coefficients() {
    let mut rng = Rng::fresh("toeplitz_is_rebuilt_for_new_coefficients");
    let mut problem = lattice_problem(&mut rng, [8, 6, 1], 2, 90, 4, Some((150.0, 0.02)));
    let options = Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    };
    let (x, d) = random_inputs(&mut rng, &problem);
    let mut plan = problem.plan_with(options);
    plan.set_toeplitz(true, 0).unwrap();
    outputs(&plan, &x, &d);
    problem.coefficients.iter_mut().for_each(|k| *k *= 0.8);
    plan.set_coefficients(&problem.coefficients).unwrap();
    let mut fresh = problem.plan_with(options);
    fresh.set_toeplitz(true, 0).unwrap();
    assert_eq!(outputs(&plan, &x, &d), outputs(&fresh, &x, &d));
}

#[test]
fn bad_coefficients_leave_the_plan_unchanged() {
    let mut rng = Rng::fresh("bad_coefficients_leave_the_plan_unchanged");
    let problem = Problem::random(&mut rng, 100, 80, 3.0);
    let options = Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    };
    let (x, _) = random_inputs(&mut rng, &problem);
    let mut plan = problem.plan_with(options);
    let mut before = vec![Complex32::default(); problem.samples * problem.coils];
    plan.forward(&x, &mut before).unwrap();
    let short = &problem.coefficients[1..];
    let e = plan.set_coefficients(short).unwrap_err();
    assert_eq!(e.status, Status::SizeMismatch, "{}", e.message);
    assert!(e.message.contains("coefficients"), "{}", e.message);
    let mut nan = problem.coefficients.clone();
    nan[0] = f64::NAN;
    let e = plan.set_coefficients(&nan).unwrap_err();
    assert_eq!(e.status, Status::NotFinite, "{}", e.message);
    let mut after = before.clone();
    plan.forward(&x, &mut after).unwrap();
    assert_eq!(before, after);
    let mut empty = Plan::new(options, 4, 4, 1, 1, 10).unwrap();
    let e = empty.set_coefficients(&[0.0; 10]).unwrap_err();
    assert_eq!(e.status, Status::IncompletePlan, "{}", e.message);
}
