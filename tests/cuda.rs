//! The CUDA backend against the float64 direct sums of MODEL.md and against
//! the CPU backend, on fresh random problems (seed printed). Without a GPU
//! every GPU test prints one "skipped" line and returns; the fallback tests
//! (AUTO → CPU, CUDA → BACKEND_UNAVAILABLE without panic text) run everywhere.

mod common;
use common::*;
use horecon::backend::cuda::context::probe;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer, Status};
use num_complex::Complex64;
use std::sync::Mutex;

const CLASSES: [(Precision, f64); 3] = [
    (Precision::Accurate, 1e-5),
    (Precision::Fast, 1e-3),
    (Precision::Double, 1e-7),
];

/// Serialises the tests that set the chunking knobs in the environment.
static ENV: Mutex<()> = Mutex::new(());

/// True when a GPU is usable; otherwise prints one line saying why.
fn gpu(test: &str) -> bool {
    match probe() {
        Ok(_) => true,
        Err(reason) => {
            eprintln!("{test}: skipped: no CUDA device ({reason})");
            false
        }
    }
}

/// A fresh generator (seed printed) when a GPU is usable; otherwise one line saying why.
fn gpu_rng(test: &str) -> Option<Rng> {
    gpu(test).then(|| Rng::fresh(test))
}

/// E x and Eᴴ d of `plan` against `reference` (float64): relative errors.
fn errors(
    plan: &Plan,
    image: &[Complex32],
    data: &[Complex32],
    reference: &(Vec<Complex64>, Vec<Complex64>),
) -> (f64, f64) {
    let (d, x) = apply(plan, image, data);
    (rel_error(&d, &reference.0), rel_error(&x, &reference.1))
}

/// The float64 direct sums E x and Eᴴ d of MODEL.md.
fn f64_reference(
    problem: &Problem,
    image: &[Complex32],
    data: &[Complex32],
) -> (Vec<Complex64>, Vec<Complex64>) {
    (problem.forward_f64(image), problem.adjoint_f64(data))
}

/// The problem's plan on an explicit backend.
fn plan_on(problem: &Problem, precision: Precision, backend: BackendKind) -> Plan {
    problem.plan_with(Options {
        precision,
        backend,
        ..Options::default()
    })
}

/// A bieri-like 2D grid problem: spiral-like linear terms reaching `cycles`
/// cycles at the edge, higher orders and off-resonance, `coils` coils.
fn grid_problem(rng: &mut Rng, width: usize, samples: usize, coils: usize, cycles: f64) -> Problem {
    let n = width * width;
    let fov = 0.22;
    let positions = centred_grid([width, width, 1], fov);
    let terms = 16;
    let kmax = cycles * std::f64::consts::TAU / (fov / 2.0);
    let mut coefficients = vec![0.0; samples * terms];
    for j in 0..samples {
        let tau = j as f64 / samples as f64;
        let turn = std::f64::consts::TAU * (width as f64 / 8.0) * tau;
        coefficients[j] = 1.5 * (std::f64::consts::TAU * 3.0 * tau).sin();
        coefficients[samples + j] = kmax * tau * turn.cos();
        coefficients[2 * samples + j] = kmax * tau * turn.sin();
    }
    for b in 4..terms {
        let amp = if b < 9 { 300.0 } else { 3000.0 } * rng.range(-1.0, 1.0);
        let rate = rng.range(0.1, 0.5);
        for j in 0..samples {
            let tau = j as f64 / samples as f64;
            coefficients[b * samples + j] = amp * (1.0 - (-tau / rate).exp());
        }
    }
    let omega = (0..n)
        .map(|v| {
            let (x, y) = (positions[v], positions[n + v]);
            std::f64::consts::TAU
                * 60.0
                * (-((x - 0.03).powi(2) + (y + 0.02).powi(2)) / 0.003).exp()
        })
        .collect();
    let times = (0..samples)
        .map(|j| 0.03 * j as f64 / samples as f64)
        .collect();
    Problem {
        dims: [width, width, 1],
        coils,
        samples,
        positions,
        terms,
        user_basis: None,
        coefficients,
        off_resonance: Some((omega, times)),
        sensitivities: Some(rng.complex(n * coils)),
    }
}

#[test]
fn auto_falls_back_and_cuda_reports_unavailable_without_gpu() {
    let auto = Plan::new(Options::default(), 4, 4, 1, 1, 8).expect("AUTO plan");
    let cuda = Plan::new(
        Options {
            backend: BackendKind::Cuda,
            ..Options::default()
        },
        4,
        4,
        1,
        1,
        8,
    );
    match probe() {
        Err(reason) => {
            eprintln!("no CUDA device ({reason}): checking the fallbacks");
            assert_eq!(auto.backend(), BackendKind::Cpu);
            let e = cuda.err().expect("CUDA requested without a GPU must fail");
            assert_eq!(e.status, Status::BackendUnavailable);
            assert!(e.message.contains("unavailable"), "message: {}", e.message);
        }
        Ok(count) => {
            eprintln!("{count} CUDA device(s): AUTO must pick CUDA");
            assert_eq!(auto.backend(), BackendKind::Cuda);
            assert_eq!(cuda.expect("CUDA plan").backend(), BackendKind::Cuda);
            let far = Plan::new(
                Options {
                    backend: BackendKind::Cuda,
                    device: count as i32,
                    ..Options::default()
                },
                4,
                4,
                1,
                1,
                8,
            );
            assert_eq!(
                far.err().map(|e| e.status),
                Some(Status::BackendUnavailable)
            );
        }
    }
}

/// Runs in a child process (see below): requests CUDA through the C API.
#[test]
fn child_requests_cuda_through_the_c_api() {
    if std::env::var("HORECON_CUDA_TEST_CHILD").is_err() {
        return;
    }
    // SAFETY: zeroed plain-data struct filled by the library.
    let mut options: horecon::ffi::horecon_options = unsafe { std::mem::zeroed() };
    unsafe { horecon::ffi::horecon_default_options(&mut options) };
    options.backend = BackendKind::Cuda as i32;
    let mut plan: *mut horecon::ffi::horecon_plan = std::ptr::null_mut();
    // SAFETY: valid pointers to locals.
    let status = unsafe { horecon::ffi::horecon_plan_create(&options, 4, 4, 1, 1, 8, &mut plan) };
    eprintln!("child: status {status}");
    if !plan.is_null() {
        // SAFETY: created above.
        unsafe { horecon::ffi::horecon_plan_destroy(plan) };
    }
}

#[test]
fn requesting_cuda_prints_no_panic_text() {
    let exe = std::env::current_exe().expect("test executable");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "child_requests_cuda_through_the_c_api",
            "--nocapture",
        ])
        .env("HORECON_CUDA_TEST_CHILD", "1")
        .output()
        .expect("child test runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert!(
        stderr.contains("child: status"),
        "child did not run: {stderr}"
    );
    let expected = if probe().is_ok() {
        0
    } else {
        Status::BackendUnavailable as i32
    };
    assert!(
        stderr.contains(&format!("child: status {expected}")),
        "expected status {expected}: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "panic text on stderr: {stderr}"
    );
}

#[test]
fn cuda_matches_float64_direct_sum_in_each_mode() {
    let Some(mut rng) = gpu_rng("cuda_matches_float64_direct_sum_in_each_mode") else {
        return;
    };
    for round in 0..10 {
        let problem = Problem::random(&mut rng, 900, 700, 80.0);
        let (image, data) = random_inputs(&mut rng, &problem);
        let reference = f64_reference(&problem, &image, &data);
        for (precision, bound) in CLASSES {
            let plan = plan_on(&problem, precision, BackendKind::Cuda);
            let (ef, ea) = errors(&plan, &image, &data, &reference);
            eprintln!(
                "round {round} {precision:?} dims {:?} M {} L {} B {} user {} off-res {}: forward {ef:.2e} adjoint {ea:.2e}",
                problem.dims,
                problem.samples,
                problem.coils,
                problem.terms,
                problem.user_basis.is_some(),
                problem.off_resonance.is_some()
            );
            assert!(
                ef <= bound,
                "{precision:?} forward error {ef:e} > {bound:e}"
            );
            assert!(
                ea <= bound,
                "{precision:?} adjoint error {ea:e} > {bound:e}"
            );
        }
    }
}

#[test]
fn cuda_accuracy_holds_with_hundreds_of_radians_on_a_grid() {
    let Some(mut rng) = gpu_rng("cuda_accuracy_holds_with_hundreds_of_radians_on_a_grid") else {
        return;
    };
    // 96² grid, edge phase 100 cycles (628 rad), 8 coils.
    let problem = grid_problem(&mut rng, 96, 1152, 8, 100.0);
    let (image, data) = random_inputs(&mut rng, &problem);
    let reference = f64_reference(&problem, &image, &data);
    for (precision, bound) in CLASSES {
        let plan = plan_on(&problem, precision, BackendKind::Cuda);
        let (ef, ea) = errors(&plan, &image, &data, &reference);
        eprintln!("{precision:?}: forward {ef:.2e} adjoint {ea:.2e}");
        assert!(
            ef <= bound && ea <= bound,
            "{precision:?}: {ef:e} {ea:e} > {bound:e}"
        );
    }
}

#[test]
fn cuda_agrees_with_cpu_within_the_class() {
    let Some(mut rng) = gpu_rng("cuda_agrees_with_cpu_within_the_class") else {
        return;
    };
    for _ in 0..4 {
        let problem = Problem::random(&mut rng, 900, 600, 60.0);
        let (image, data) = random_inputs(&mut rng, &problem);
        for (precision, bound) in CLASSES {
            let (dc, xc) = apply(
                &plan_on(&problem, precision, BackendKind::Cpu),
                &image,
                &data,
            );
            let (ef, ea) = errors(
                &plan_on(&problem, precision, BackendKind::Cuda),
                &image,
                &data,
                &(to_c64(&dc), to_c64(&xc)),
            );
            eprintln!("{precision:?}: |cuda - cpu| forward {ef:.2e} adjoint {ea:.2e}");
            assert!(
                ef <= 2.0 * bound && ea <= 2.0 * bound,
                "{precision:?}: {ef:e} {ea:e}"
            );
        }
    }
}

#[test]
fn cuda_adjoint_is_the_adjoint_and_normal_is_their_product() {
    let Some(mut rng) = gpu_rng("cuda_adjoint_is_the_adjoint_and_normal_is_their_product") else {
        return;
    };
    for _ in 0..4 {
        let problem = Problem::random(&mut rng, 900, 600, 60.0);
        let (image, data) = random_inputs(&mut rng, &problem);
        let weights: Vec<f32> = (0..problem.samples)
            .map(|_| rng.range(0.1, 2.0) as f32)
            .collect();
        for (precision, bound) in [(Precision::Accurate, 1e-5), (Precision::Double, 3e-7)] {
            let plan = plan_on(&problem, precision, BackendKind::Cuda);
            let (d, x) = apply(&plan, &image, &data);
            let (lhs, rhs) = (inner(&d, &data), inner(&image, &x));
            // relative to ‖Ex‖‖d‖ (the inner products themselves may cancel)
            let scale = (inner(&d, &d).re * inner(&data, &data).re).sqrt();
            let gap = (lhs - rhs).norm() / scale;
            eprintln!("{precision:?}: <Ex,d> = {lhs:.6e}, <x,E^H d> = {rhs:.6e}, gap {gap:.2e}");
            assert!(gap <= bound, "{precision:?}: adjointness gap {gap:e}");
            // normal with weights = E^H (W (E x)) composed on the host.
            let op = plan.operator().expect("operator");
            let mut n = vec![Complex32::default(); image.len()];
            op.normal(&image, &mut n, Some(&weights)).expect("normal");
            let m = problem.samples;
            let wd: Vec<Complex32> = d
                .iter()
                .enumerate()
                .map(|(q, v)| v * weights[q % m])
                .collect();
            let mut composed = vec![Complex32::default(); image.len()];
            plan.adjoint(&wd, &mut composed).expect("adjoint");
            let e = rel_error(&n, &to_c64(&composed));
            eprintln!("{precision:?}: normal vs composed {e:.2e}");
            assert!(
                e <= bound.max(1e-6),
                "{precision:?}: normal differs by {e:e}"
            );
        }
    }
}

#[test]
fn cg_on_gpu_matches_cg_on_cpu() {
    let Some(mut rng) = gpu_rng("cg_on_gpu_matches_cg_on_cpu") else {
        return;
    };
    let problem = grid_problem(&mut rng, 24, 400, 3, 10.0);
    let truth = rng.complex(problem.voxels());
    let data: Vec<Complex32> = problem
        .forward_f64(&truth)
        .iter()
        .map(|c| Complex32::new(c.re as f32, c.im as f32))
        .collect();
    let weights: Vec<f32> = (0..problem.samples)
        .map(|_| rng.range(0.5, 1.5) as f32)
        .collect();
    for (precision, bound) in [(Precision::Accurate, 1e-4), (Precision::Double, 1e-6)] {
        let options = CgOptions {
            max_iterations: 40,
            tolerance: 0.0,
            regularizer: Regularizer::Tikhonov,
            lambda: 0.5 * (problem.samples * problem.coils) as f64,
            sample_weights: Some(&weights),
            ..CgOptions::default()
        };
        let mut solutions = Vec::new();
        for backend in [BackendKind::Cuda, BackendKind::Cpu] {
            let plan = plan_on(&problem, precision, backend);
            let mut x = vec![Complex32::default(); problem.voxels()];
            let info = plan.cg(&data, &options, &mut x).expect("cg");
            eprintln!(
                "{precision:?} {backend:?}: {} iterations, residual {:.2e}, {:.3} s",
                info.iterations, info.rel_residual, info.seconds
            );
            solutions.push(x);
        }
        let e = rel_error(&solutions[0], &to_c64(&solutions[1]));
        eprintln!("{precision:?}: |cg cuda - cg cpu| = {e:.2e}");
        assert!(e <= bound, "{precision:?}: CG solutions differ by {e:e}");
    }
}

/// The float32 modes sum the coils on the tensor cores (fast: 1xTF32,
/// accurate: 3xTF32) for groups of 3 to 8 coils, with FFMA for 1 or 2;
/// `HORECON_CUDA_TENSOR` forces either. Every combination stays within its
/// class against float64, with odd sizes (outer points not a multiple of 8,
/// inner not of the tile) and coil counts that make groups (9, 13, 20 coils).
#[test]
fn tensor_core_and_ffma_paths_match_float64() {
    let Some(mut rng) = gpu_rng("tensor_core_and_ffma_paths_match_float64") else {
        return;
    };
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    for (coils, tensor) in [
        (1, None),
        (1, Some("1")),
        (2, Some("1")),
        (3, None),
        (5, Some("0")),
        (7, None),
        (8, None),
        (9, None),
        (13, None),
        (20, Some("0")),
        (20, None),
    ] {
        let mut problem = Problem::random(&mut rng, 1500, 900, 80.0);
        problem.coils = coils;
        problem.sensitivities = Some(rng.complex(problem.voxels() * coils));
        let (image, data) = random_inputs(&mut rng, &problem);
        let reference = f64_reference(&problem, &image, &data);
        for (precision, bound) in [(Precision::Accurate, 1e-5), (Precision::Fast, 1e-3)] {
            match tensor {
                Some(v) => std::env::set_var("HORECON_CUDA_TENSOR", v),
                None => std::env::remove_var("HORECON_CUDA_TENSOR"),
            }
            // (the plan builds its operator, reading the setting, on first use)
            let plan = plan_on(&problem, precision, BackendKind::Cuda);
            let (ef, ea) = errors(&plan, &image, &data, &reference);
            std::env::remove_var("HORECON_CUDA_TENSOR");
            eprintln!(
                "{precision:?}, L {coils}, HORECON_CUDA_TENSOR {tensor:?}, dims {:?} M {} B {}: forward {ef:.2e} adjoint {ea:.2e}",
                problem.dims, problem.samples, problem.terms
            );
            assert!(
                ef <= bound && ea <= bound,
                "{precision:?} L {coils} tensor {tensor:?}: {ef:e} {ea:e}"
            );
        }
    }
}

#[test]
fn chunked_execution_equals_unchunked() {
    let Some(mut rng) = gpu_rng("chunked_execution_equals_unchunked") else {
        return;
    };
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    // Large enough for several thread blocks on both sides.
    let mut problem = loop {
        let p = Problem::random(&mut rng, 1800, 900, 40.0);
        if p.voxels() >= 600 && p.samples >= 300 {
            break p;
        }
    };
    problem.coils = 5;
    problem.sensitivities = Some(rng.complex(problem.voxels() * 5));
    let (image, data) = random_inputs(&mut rng, &problem);
    // The whole problem runs on the tensor cores (5 coils), the chunked one on
    // FFMA (groups of 2): in fast mode they differ by the tf32 rounding.
    for (precision, bound) in [
        (Precision::Accurate, 1e-5),
        (Precision::Double, 1e-12),
        (Precision::Fast, 2e-3),
    ] {
        let whole = apply(
            &plan_on(&problem, precision, BackendKind::Cuda),
            &image,
            &data,
        );
        std::env::set_var("HORECON_CUDA_CHUNK_BLOCKS", "1");
        std::env::set_var("HORECON_CUDA_SPLITS", "3");
        std::env::set_var("HORECON_CUDA_COIL_GROUP", "2");
        let chunked = apply(
            &plan_on(&problem, precision, BackendKind::Cuda),
            &image,
            &data,
        );
        for k in [
            "HORECON_CUDA_CHUNK_BLOCKS",
            "HORECON_CUDA_SPLITS",
            "HORECON_CUDA_COIL_GROUP",
        ] {
            std::env::remove_var(k);
        }
        let ef = rel_error(&chunked.0, &to_c64(&whole.0));
        let ea = rel_error(&chunked.1, &to_c64(&whole.1));
        eprintln!(
            "{precision:?} dims {:?} M {}: chunked vs whole forward {ef:.2e} adjoint {ea:.2e}",
            problem.dims, problem.samples
        );
        assert!(ef <= bound && ea <= bound, "{precision:?}: {ef:e} {ea:e}");
    }
}

#[test]
fn pinned_transfers_in_pieces_equal_pageable_ones() {
    let Some(mut rng) = gpu_rng("pinned_transfers_in_pieces_equal_pageable_ones") else {
        return;
    };
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let mut problem = Problem::random(&mut rng, 700, 500, 20.0);
    problem.coils = 3;
    problem.sensitivities = Some(rng.complex(problem.voxels() * 3));
    let (image, data) = random_inputs(&mut rng, &problem);
    let run = |knobs: &[(&str, &str)]| {
        for (k, v) in knobs {
            std::env::set_var(k, v);
        }
        let plan = plan_on(&problem, Precision::Accurate, BackendKind::Cuda);
        let (d, x) = apply(&plan, &image, &data);
        let mut n = vec![Complex32::new(0.0, 0.0); image.len()];
        plan.normal(&image, &mut n).unwrap();
        for (k, _) in knobs {
            std::env::remove_var(k);
        }
        (d, x, n)
    };
    let pageable = run(&[("HORECON_CUDA_PINNED", "0")]);
    // Whole vectors, then pieces of 1000 bytes (125 values: the last one short).
    for knobs in [vec![], vec![("HORECON_CUDA_PINNED_BYTES", "1000")]] {
        let pinned = run(&knobs);
        eprintln!(
            "pinned {knobs:?}: N {} M {} L 3",
            problem.voxels(),
            problem.samples
        );
        assert!(
            pinned == pageable,
            "{knobs:?}: results differ from pageable transfers"
        );
    }
}

#[test]
fn several_plans_and_threads_at_once() {
    let Some(mut rng) = gpu_rng("several_plans_and_threads_at_once") else {
        return;
    };
    let problems: Vec<Problem> = (0..3)
        .map(|_| Problem::random(&mut rng, 700, 500, 40.0))
        .collect();
    let inputs: Vec<(Vec<Complex32>, Vec<Complex32>)> = problems
        .iter()
        .map(|p| random_inputs(&mut rng, p))
        .collect();
    let plans: Vec<Plan> = problems
        .iter()
        .map(|p| plan_on(p, Precision::Accurate, BackendKind::Cuda))
        .collect();
    let alone: Vec<_> = plans
        .iter()
        .zip(&inputs)
        .map(|(plan, (x, d))| apply(plan, x, d))
        .collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            for ((plan, (x, d)), expected) in plans.iter().zip(&inputs).zip(&alone) {
                s.spawn(move || {
                    for _ in 0..3 {
                        let got = apply(plan, x, d);
                        assert_eq!(&got, expected, "results differ under concurrency");
                    }
                });
            }
        }
    });
    let devices = horecon::backend::cuda_device_count();
    eprintln!("{devices} device(s)");
    if devices > 1 {
        let p = &problems[0];
        let (x, d) = &inputs[0];
        let options = Options {
            backend: BackendKind::Cuda,
            device: 1,
            ..Options::default()
        };
        let plan = p.plan_with(options);
        let got = apply(&plan, x, d);
        let e = rel_error(&got.1, &to_c64(&alone[0].1));
        assert!(e <= 1e-6, "device 1 differs by {e:e}");
    }
}

#[test]
fn cuda_sign_convention_single_voxel() {
    if !gpu("cuda_sign_convention_single_voxel") {
        return;
    }
    // One voxel at r0, one sample with k: d = exp(+i k·r0).
    let r0 = [0.031, -0.017, 0.0];
    let k = [123.0, -45.0, 0.0];
    let mut plan = Plan::new(
        Options {
            backend: BackendKind::Cuda,
            ..Options::default()
        },
        1,
        1,
        1,
        1,
        1,
    )
    .expect("plan");
    plan.set_positions(&r0).expect("positions");
    plan.set_trajectory(3, &k).expect("trajectory");
    let mut d = [Complex32::default()];
    plan.forward(&[Complex32::new(1.0, 0.0)], &mut d)
        .expect("forward");
    let phi: f64 = k.iter().zip(&r0).map(|(a, b)| a * b).sum();
    let expected = Complex64::from_polar(1.0, phi);
    let e = (Complex64::new(d[0].re as f64, d[0].im as f64) - expected).norm();
    assert!(e < 1e-6, "d = {} expected {expected}", d[0]);
}

#[test]
fn operators_called_from_the_progress_callback_do_not_deadlock() {
    let Some(mut rng) = gpu_rng("operators_called_from_the_progress_callback_do_not_deadlock")
    else {
        return;
    };
    let problem = grid_problem(&mut rng, 16, 200, 2, 5.0);
    let plan = plan_on(&problem, Precision::Accurate, BackendKind::Cuda);
    let (image, data) = random_inputs(&mut rng, &problem);
    let mut expect = vec![Complex32::default(); data.len()];
    plan.forward(&image, &mut expect).expect("forward");
    let seen = std::sync::Mutex::new(Vec::new());
    let progress = |_iteration: usize, _rel: f64| {
        // the same plan, from inside its own CG solve (same thread)
        let mut d = vec![Complex32::default(); data.len()];
        plan.forward(&image, &mut d)
            .expect("forward inside the callback");
        seen.lock().unwrap().push(d);
        false
    };
    let options = CgOptions {
        max_iterations: 3,
        tolerance: 0.0,
        progress: Some(&progress),
        ..CgOptions::default()
    };
    let mut x = vec![Complex32::default(); problem.voxels()];
    let info = plan.cg(&data, &options, &mut x).expect("cg");
    assert_eq!(info.iterations, 3);
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 3);
    for d in &seen {
        assert_eq!(d, &expect, "forward inside the callback differs");
    }
}

/// FD, TV and Laplace CG on the GPU (kernels/fd.cu) ≡ CG on the CPU
/// (backend/cpu/fd.rs): odd 2D and 3D grids, axis and all-neighbour
/// differences, with and without fd_weights, double and accurate modes.
#[test]
fn fd_tv_laplace_cg_on_gpu_matches_cpu() {
    let Some(mut rng) = gpu_rng("fd_tv_laplace_cg_on_gpu_matches_cpu") else {
        return;
    };
    use horecon::solver::Neighbourhood;
    let mut worst = [0.0f64; 2];
    for dims in [[9, 7, 1], [5, 7, 3]] {
        let problem = Problem::fourier_grid(&mut rng, dims, dims.iter().product(), 2);
        let n = problem.voxels();
        let truth = rng.complex(n);
        let data: Vec<Complex32> = problem
            .forward_f64(&truth)
            .iter()
            .map(|c| Complex32::new(c.re as f32, c.im as f32))
            .collect();
        let lambda = 0.3 * (problem.samples * problem.coils) as f64;
        let u13: Vec<f32> = (0..13 * n).map(|_| rng.range(0.3, 2.0) as f32).collect();
        for (k, (precision, tolerance, bound)) in [
            (Precision::Double, 1e-10, 1e-5),
            (Precision::Accurate, 1e-6, 2e-3),
        ]
        .into_iter()
        .enumerate()
        {
            let plans = [
                plan_on(&problem, precision, BackendKind::Cuda),
                plan_on(&problem, precision, BackendKind::Cpu),
            ];
            for nb in [Neighbourhood::Axes, Neighbourhood::Full] {
                let ndims = horecon::backend::cpu::fd::Grid::with_neighbourhood(dims, nb).ndims();
                for weights in [None, Some(&u13[..n * ndims])] {
                    for regularizer in [
                        Regularizer::FiniteDifference,
                        Regularizer::TotalVariation,
                        Regularizer::Laplace,
                    ] {
                        let options = CgOptions {
                            max_iterations: 150,
                            tolerance,
                            regularizer,
                            lambda,
                            reweightings: 4,
                            epsilon: 0.1,
                            sigma: 1.0,
                            fd_weights: weights,
                            neighbourhood: nb,
                            ..CgOptions::default()
                        };
                        let mut solutions = Vec::new();
                        for plan in &plans {
                            let mut x = vec![Complex32::default(); n];
                            let info = plan.cg(&data, &options, &mut x).expect("cg");
                            solutions.push((x, info));
                        }
                        let e = rel_error(&solutions[0].0, &to_c64(&solutions[1].0));
                        worst[k] = worst[k].max(e);
                        eprintln!(
                            "{dims:?} {precision:?} {nb:?} {regularizer:?} weights {}: \
                             cuda {} it (res {:.1e}), cpu {} it (res {:.1e}), |cuda - cpu| = {e:.2e}",
                            weights.is_some(),
                            solutions[0].1.iterations,
                            solutions[0].1.rel_residual,
                            solutions[1].1.iterations,
                            solutions[1].1.rel_residual,
                        );
                        assert!(
                            e <= bound,
                            "{dims:?} {precision:?} {nb:?} {regularizer:?}: CG solutions differ by {e:e}"
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "largest |cuda - cpu|: double {:.2e}, accurate {:.2e}",
        worst[0], worst[1]
    );
}

/// kernels/fd.cu compiled for the host (C++ with the CUDA built-ins stubbed,
/// one thread doing every grid-stride iteration) against the CPU's fd.rs on
/// the tables the CUDA space uploads ([`Grid::device_tables`]): checks the
/// kernels' index arithmetic, edge existence and penalty formulas where no
/// GPU is present. Skipped when no C++ compiler (`c++`) is found.
#[test]
fn fd_kernels_run_on_the_host_match_the_cpu_differences() {
    use horecon::backend::cpu::fd::{self, Grid};
    use horecon::solver::{Neighbourhood, Penalty};
    use std::io::Write;
    let dir = std::env::temp_dir().join(format!("horecon-fd-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let source = dir.join("fd_host.cpp");
    let program = dir.join("fd_host");
    let stub = r#"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
struct double2 { double x, y; };
struct dim3s { unsigned x, y, z; };
static dim3s blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
using std::exp; using std::hypot; using std::sqrt;
"#;
    let driver = r#"
template <class T> static std::vector<T> take(FILE* f, size_t n) {
    std::vector<T> v(n);
    if (n && fread(v.data(), sizeof(T), n, f) != n) exit(3);
    return v;
}
int main(int argc, char** argv) {
    FILE* in = fopen(argv[1], "rb");
    FILE* out = fopen(argv[2], "wb");
    if (!in || !out) return 2;
    long long h[6];  // c0 c1 c2 ndirs has_u penalty
    if (fread(h, 8, 6, in) != 6) return 3;
    double p[3];  // eps sigma lambda
    if (fread(p, 8, 3, in) != 3) return 3;
    const long long n = h[0] * h[1] * h[2], nd = h[3];
    auto dirs = take<long long>(in, 4 * nd);
    auto cw = take<double>(in, nd);
    auto u = take<float>(in, h[4] ? nd * n : 0);
    auto x = take<double2>(in, n);
    auto y = take<double2>(in, n);
    auto y2 = y;
    std::vector<double> nu(n);
    const float* up = h[4] ? u.data() : nullptr;
    fd_reweight(x.data(), h[0], h[1], h[2], (int)nd, dirs.data(), cw.data(), up, (int)h[5], p[0], p[1], nu.data());
    fd_normal(x.data(), y.data(), h[0], h[1], h[2], (int)nd, dirs.data(), cw.data(), up, nu.data(), p[2]);
    fd_normal(x.data(), y2.data(), h[0], h[1], h[2], (int)nd, dirs.data(), cw.data(), up, nullptr, p[2]);
    fwrite(nu.data(), 8, n, out);
    fwrite(y.data(), 16, n, out);
    fwrite(y2.data(), 16, n, out);
    fclose(out);
    return 0;
}
"#;
    std::fs::write(
        &source,
        format!("{stub}\n{}\n{driver}", include_str!("../kernels/fd.cu")),
    )
    .expect("write source");
    let compiled = std::process::Command::new("c++")
        .arg("-O1")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .output();
    match compiled {
        Err(e) => {
            eprintln!("fd_kernels_run_on_the_host: skipped: no C++ compiler ({e})");
            return;
        }
        Ok(o) if !o.status.success() => panic!(
            "kernels/fd.cu does not compile as host C++:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
    let mut rng = Rng::fresh("fd_kernels_run_on_the_host_match_the_cpu_differences");
    let mut worst = 0.0f64;
    let grids = [
        [5, 1, 1],
        [1, 6, 1],
        [4, 5, 1],
        [5, 1, 3],
        [1, 4, 3],
        [3, 2, 3],
        [5, 4, 3],
        [1, 1, 1],
    ];
    for dims in grids {
        for nb in [Neighbourhood::Axes, Neighbourhood::Full] {
            for with_u in [false, true] {
                for penalty in [
                    Penalty::TotalVariation { epsilon: 0.2 },
                    Penalty::Laplace {
                        epsilon: 0.1,
                        sigma: 0.7,
                    },
                ] {
                    let grid = Grid::with_neighbourhood(dims, nb);
                    let n = grid.voxels();
                    let (table, weights) = grid.device_tables();
                    let u: Vec<f32> = (0..n * grid.ndims())
                        .map(|_| rng.range(0.1, 2.0) as f32)
                        .collect();
                    let x: Vec<Complex64> = (0..n)
                        .map(|_| Complex64::new(rng.normal(), rng.normal()))
                        .collect();
                    let y0: Vec<Complex64> = (0..n)
                        .map(|_| Complex64::new(rng.normal(), rng.normal()))
                        .collect();
                    let lambda = rng.range(0.5, 2.0);
                    let (code, epsilon, sigma) = match penalty {
                        Penalty::TotalVariation { epsilon } => (1i64, epsilon, 1.0),
                        Penalty::Laplace { epsilon, sigma } => (2, epsilon, sigma),
                        Penalty::Quadratic => unreachable!(),
                    };
                    let [c0, c1, c2] = grid.compact_dims();
                    let mut bytes = Vec::new();
                    for v in [
                        c0 as i64,
                        c1 as i64,
                        c2 as i64,
                        grid.ndims() as i64,
                        with_u as i64,
                        code,
                    ] {
                        bytes.extend_from_slice(&v.to_le_bytes());
                    }
                    for v in [epsilon, sigma, lambda] {
                        bytes.extend_from_slice(&v.to_le_bytes());
                    }
                    table
                        .iter()
                        .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
                    weights
                        .iter()
                        .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
                    if with_u {
                        u.iter()
                            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
                    }
                    for c in x.iter().chain(&y0) {
                        bytes.extend_from_slice(&c.re.to_le_bytes());
                        bytes.extend_from_slice(&c.im.to_le_bytes());
                    }
                    let (input, output) = (dir.join("in.bin"), dir.join("out.bin"));
                    std::fs::File::create(&input)
                        .and_then(|mut f| f.write_all(&bytes))
                        .expect("write input");
                    let status = std::process::Command::new(&program)
                        .arg(&input)
                        .arg(&output)
                        .status()
                        .expect("run the host kernels");
                    assert!(status.success(), "host kernels failed: {status}");
                    let raw = std::fs::read(&output).expect("read output");
                    let f: Vec<f64> = raw
                        .chunks_exact(8)
                        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                        .collect();
                    assert_eq!(f.len(), 5 * n);
                    let nu_host = &f[..n];
                    let c = |k: usize| -> Vec<Complex64> {
                        (0..n)
                            .map(|v| {
                                Complex64::new(f[n + 2 * (k * n + v)], f[n + 2 * (k * n + v) + 1])
                            })
                            .collect()
                    };
                    let (y_nu, y_plain) = (c(0), c(1));
                    // the CPU's differences, in float64
                    let fdw = with_u.then_some(&u[..]);
                    let mut g = vec![0.0; n];
                    fd::gradient_magnitude(&grid, fdw, &x, &mut g);
                    let nu: Vec<f64> = g.iter().map(|&g| penalty.weight(g)).collect();
                    let mut want_nu = y0.clone();
                    fd::add_fd_normal(&grid, lambda, fdw, Some(&nu), &x, &mut want_nu);
                    let mut want_plain = y0.clone();
                    fd::add_fd_normal::<f64>(&grid, lambda, fdw, None, &x, &mut want_plain);
                    let e_nu = nu_host
                        .iter()
                        .zip(&nu)
                        .map(|(a, b)| ((a - b) / b).abs())
                        .fold(0.0, f64::max);
                    let rel = |a: &[Complex64], b: &[Complex64]| {
                        let num: f64 = a.iter().zip(b).map(|(a, b)| (a - b).norm_sqr()).sum();
                        let den: f64 = b.iter().map(|b| b.norm_sqr()).sum();
                        (num / den).sqrt()
                    };
                    let e = e_nu
                        .max(rel(&y_nu, &want_nu))
                        .max(rel(&y_plain, &want_plain));
                    worst = worst.max(e);
                    assert!(
                        e <= 1e-13,
                        "{dims:?} {nb:?} u {with_u} {penalty:?}: host kernels vs fd.rs {e:e}"
                    );
                    // and the regularizer acted (not a no-op on both sides)
                    if n > 1 {
                        assert!(rel(&y_plain, &y0) > 1e-3, "{dims:?} {nb:?}");
                    }
                }
            }
        }
    }
    eprintln!(
        "kernels/fd.cu on the host vs backend/cpu/fd.rs: largest relative difference {worst:.1e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
