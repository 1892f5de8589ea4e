//! The FFT-based operators on CUDA (cuFFT): the Toeplitz normal operator and
//! Cartesian mode against float64 direct sums, against the same operators on
//! the CPU and against the exact (phase-sum) CUDA path; CG on both; the
//! chunked-coil path. Fresh random problems, seed printed (HORECON_TEST_SEED
//! replays). Without a GPU (or without cuFFT) every test prints one
//! "skipped" line and returns.

#![allow(clippy::needless_range_loop)]
mod common;
use common::*;
use horecon::backend::cuda::context::probe;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer, Status};
use std::sync::Mutex;

const PRECISIONS: [(Precision, f64); 3] = [
    (Precision::Accurate, 1e-5),
    (Precision::Fast, 1e-3),
    (Precision::Double, 1e-7),
];

/// Serialises the tests that set HORECON_CUDA_FFT_BATCH.
static ENV: Mutex<()> = Mutex::new(());

/// True when a GPU and cuFFT are usable; otherwise prints one line saying why.
fn gpu(test: &str) -> bool {
    if let Err(reason) = probe() {
        eprintln!("{test}: skipped: no CUDA device ({reason})");
        return false;
    }
    if let Err(reason) = horecon::backend::cuda::fft::available() {
        eprintln!("{test}: skipped: {reason}");
        return false;
    }
    true
}

fn options(precision: Precision, backend: BackendKind) -> Options {
    Options {
        backend,
        precision,
        num_threads: 2,
        ..Options::default()
    }
}

// ------------------------------------------------------------------ Toeplitz

fn toeplitz_plan(p: &Problem, precision: Precision, backend: BackendKind, segments: i32) -> Plan {
    let mut plan = p.plan_with(options(precision, backend));
    plan.set_toeplitz(true, segments).expect("set_toeplitz");
    plan
}

const TOEPLITZ_SIZES: [[usize; 3]; 6] = [
    [6, 5, 1],
    [7, 8, 1],
    [1, 9, 1],
    [4, 3, 5],
    [5, 4, 2],
    [3, 1, 4],
];

#[test]
fn cuda_toeplitz_normal_matches_dense_cpu_and_exact() {
    let test = "cuda_toeplitz_normal_matches_dense_cpu_and_exact";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    for (s, dims) in TOEPLITZ_SIZES.into_iter().enumerate() {
        let coils = 1 + s % 3;
        let m = rng.int(40, 160);
        let p = lattice_problem(&mut rng, dims, coils, m, 4, None);
        let x = rng.complex(p.voxels());
        let reference = normal_f64(&p, &x, None);
        for (precision, bound) in PRECISIONS {
            let mut got = vec![Complex32::default(); p.voxels()];
            toeplitz_plan(&p, precision, BackendKind::Cuda, 0)
                .normal(&x, &mut got)
                .expect("CUDA Toeplitz normal");
            let mut cpu = got.clone();
            toeplitz_plan(&p, precision, BackendKind::Cpu, 0)
                .normal(&x, &mut cpu)
                .expect("CPU Toeplitz normal");
            let mut exact = got.clone();
            p.plan_with(options(precision, BackendKind::Cuda))
                .normal(&x, &mut exact)
                .expect("CUDA exact normal");
            let (e_dense, e_cpu, e_exact) = (
                rel_error(&got, &reference),
                rel_error(&got, &to_c64(&cpu)),
                rel_error(&got, &to_c64(&exact)),
            );
            eprintln!(
                "{dims:?} L={coils} M={m} {precision:?}: vs dense {e_dense:.2e}, vs CPU Toeplitz {e_cpu:.2e}, vs CUDA exact {e_exact:.2e}"
            );
            assert!(
                e_dense <= bound,
                "{dims:?} {precision:?}: {e_dense:e} > {bound:e}"
            );
            assert!(
                e_cpu <= 2.0 * bound,
                "{dims:?} {precision:?}: vs CPU {e_cpu:e}"
            );
            assert!(
                e_exact <= 2.0 * bound,
                "{dims:?} {precision:?}: vs exact {e_exact:e}"
            );
        }
    }
}

#[test]
fn cuda_toeplitz_time_segmentation_matches_cpu() {
    let test = "cuda_toeplitz_time_segmentation_matches_cpu";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    for (dims, hz, duration, segments) in [
        ([8, 7, 1], 100.0, 0.01, 0),
        ([5, 4, 3], 150.0, 0.02, 0),
        ([9, 6, 1], 60.0, 0.01, 3),
    ] {
        let m = rng.int(80, 200);
        let p = lattice_problem(&mut rng, dims, 2, m, 4, Some((hz, duration)));
        let x = rng.complex(p.voxels());
        let reference = normal_f64(&p, &x, None);
        for (precision, bound) in [(Precision::Accurate, 1e-5), (Precision::Double, 1e-7)] {
            let mut got = vec![Complex32::default(); p.voxels()];
            let plan = toeplitz_plan(&p, precision, BackendKind::Cuda, segments);
            plan.normal(&x, &mut got).expect("CUDA Toeplitz normal");
            let mut cpu = got.clone();
            toeplitz_plan(&p, precision, BackendKind::Cpu, segments)
                .normal(&x, &mut cpu)
                .expect("CPU Toeplitz normal");
            let spec = plan.toeplitz_spec(segments as usize).expect("spec");
            let seg = spec.segmentation.as_ref().expect("segmentation");
            let (e_dense, e_cpu) = (rel_error(&got, &reference), rel_error(&got, &to_c64(&cpu)));
            eprintln!(
                "{dims:?} {hz} Hz {precision:?} time_segments={segments}: L={} eps={:.2e}; vs dense {e_dense:.2e}, vs CPU Toeplitz {e_cpu:.2e}",
                seg.segments, seg.error
            );
            // Same segmentation on both backends: they agree to the precision class.
            assert!(
                e_cpu <= 2.0 * bound,
                "{dims:?} {precision:?}: vs CPU {e_cpu:e}"
            );
            // The stated approximation bound.
            assert!(e_dense <= 3.0 * seg.error + 1e-5, "{dims:?}: {e_dense:e}");
            if segments == 0 {
                assert!(e_dense <= 1e-3, "{dims:?}: {e_dense:e}");
            }
        }
    }
}

#[test]
fn cuda_toeplitz_cg_matches_cpu_and_exact() {
    let test = "cuda_toeplitz_cg_matches_cpu_and_exact";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    for (dims, off) in [([9, 8, 1], None), ([5, 4, 3], Some((60.0, 0.01)))] {
        let m = 200;
        let p = lattice_problem(&mut rng, dims, 3, m, 4, off);
        let truth = rng.complex(p.voxels());
        let data = to_c32(&p.forward_f64(&truth));
        let weights: Vec<f32> = (0..m).map(|_| rng.range(0.5, 1.5) as f32).collect();
        let cg = CgOptions {
            max_iterations: 30,
            tolerance: 0.0,
            regularizer: Regularizer::Tikhonov,
            lambda: 0.3 * (m * p.coils) as f64,
            sample_weights: Some(&weights),
            ..CgOptions::default()
        };
        let solve = |plan: &Plan| {
            let mut x = vec![Complex32::default(); p.voxels()];
            let info = plan.cg(&data, &cg, &mut x).expect("cg");
            (x, info)
        };
        let (gpu_x, info) = solve(&toeplitz_plan(
            &p,
            Precision::Accurate,
            BackendKind::Cuda,
            0,
        ));
        let (cpu_x, _) = solve(&toeplitz_plan(&p, Precision::Accurate, BackendKind::Cpu, 0));
        let (exact_x, _) = solve(&p.plan_with(options(Precision::Accurate, BackendKind::Cuda)));
        let e_cpu = rel_error(&gpu_x, &to_c64(&cpu_x));
        let e_exact = rel_error(&gpu_x, &to_c64(&exact_x));
        eprintln!(
            "{dims:?} off-resonance {off:?}: {} iterations, residual {:.2e}; vs CPU Toeplitz {e_cpu:.2e}, vs CUDA exact {e_exact:.2e}",
            info.iterations, info.rel_residual
        );
        assert!(e_cpu <= 1e-4, "{dims:?}: CUDA vs CPU Toeplitz CG {e_cpu:e}");
        let bound = if off.is_some() { 3e-3 } else { 1e-4 };
        assert!(
            e_exact <= bound,
            "{dims:?}: Toeplitz vs exact CG {e_exact:e}"
        );
    }
}

#[test]
fn cuda_fft_regularized_cg_matches_cpu() {
    let test = "cuda_fft_regularized_cg_matches_cpu";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    let p = lattice_problem(&mut rng, [10, 9, 1], 2, 150, 4, None);
    let truth = rng.complex(p.voxels());
    let data = to_c32(&p.forward_f64(&truth));
    let c = random_cart(&mut rng, [9, 8, 3], 2);
    let cart_data = to_c32(&c.problem.forward_f64(&rng.complex(c.problem.voxels())));
    for regularizer in [Regularizer::TotalVariation, Regularizer::Laplace] {
        let cg = CgOptions {
            max_iterations: 10,
            tolerance: 0.0,
            regularizer,
            lambda: 0.05 * (150 * 2) as f64,
            reweightings: 3,
            epsilon: 1e-2,
            sigma: 0.5,
            ..CgOptions::default()
        };
        for (name, cuda, cpu, data) in [
            (
                "Toeplitz",
                toeplitz_plan(&p, Precision::Double, BackendKind::Cuda, 0),
                toeplitz_plan(&p, Precision::Double, BackendKind::Cpu, 0),
                &data,
            ),
            (
                "Cartesian",
                cartesian_plan(&c, Precision::Double, BackendKind::Cuda),
                cartesian_plan(&c, Precision::Double, BackendKind::Cpu),
                &cart_data,
            ),
        ] {
            let n = cuda.sizes().voxels;
            let mut x = vec![Complex32::default(); n];
            if let Err(e) = cuda.cg(data, &cg, &mut x) {
                panic!("{name} {regularizer:?}: {e}");
            }
            let mut y = vec![Complex32::default(); n];
            cpu.cg(data, &cg, &mut y).expect("CPU cg");
            let e = rel_error(&x, &to_c64(&y));
            // The reweighted CGs may amplify float64 rounding strongly (seed
            // 1795588535561065701: Laplace 2.4e-6 between the backends): the
            // bound is also 10x how far one ulp of one datum moves the CPU's.
            let mut nudged = data.to_vec();
            nudged[0].re = f32::from_bits(nudged[0].re.to_bits() + 1);
            let mut moved = vec![Complex32::default(); n];
            cpu.cg(&nudged, &cg, &mut moved).expect("CPU cg");
            let class = 10.0 * rel_error(&moved, &to_c64(&y));
            eprintln!("{name} {regularizer:?}: CUDA vs CPU {e:.2e} (class {class:.2e})");
            assert!(
                e <= class.max(1e-6),
                "{name} {regularizer:?}: {e:e}, class {class:e}"
            );
        }
    }
}

#[test]
fn cuda_fft_chunked_coils_equal_unchunked() {
    let test = "cuda_fft_chunked_coils_equal_unchunked";
    if !gpu(test) {
        return;
    }
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng::fresh(test);
    let p = lattice_problem(&mut rng, [7, 6, 3], 5, 120, 4, Some((60.0, 0.01)));
    let c = random_cart(&mut rng, [8, 7, 3], 5);
    let x = rng.complex(p.voxels());
    let xc = rng.complex(c.problem.voxels());
    let dc = rng.complex(c.problem.samples * 5);
    let run = || {
        let mut t = vec![Complex32::default(); p.voxels()];
        toeplitz_plan(&p, Precision::Double, BackendKind::Cuda, 3)
            .normal(&x, &mut t)
            .expect("Toeplitz normal");
        let plan = cartesian_plan(&c, Precision::Double, BackendKind::Cuda);
        let mut d = vec![Complex32::default(); c.problem.samples * 5];
        plan.forward(&xc, &mut d).expect("forward");
        let mut a = vec![Complex32::default(); c.problem.voxels()];
        plan.adjoint(&dc, &mut a).expect("adjoint");
        let mut nn = a.clone();
        plan.normal(&xc, &mut nn).expect("normal");
        (t, d, a, nn)
    };
    let whole = run();
    std::env::set_var("HORECON_CUDA_FFT_BATCH", "2");
    let chunked = run();
    std::env::remove_var("HORECON_CUDA_FFT_BATCH");
    for (what, a, b) in [
        ("Toeplitz normal", &whole.0, &chunked.0),
        ("Cartesian E", &whole.1, &chunked.1),
        ("Cartesian EH", &whole.2, &chunked.2),
        ("Cartesian EHE", &whole.3, &chunked.3),
    ] {
        let e = rel_error(b, &to_c64(a));
        eprintln!("{what}: chunked (2 coils or kernel pairs per batch) vs whole {e:.2e}");
        // Only the order of the coil sums differs (float64), then the float32 output rounding.
        assert!(e <= 1e-6, "{what}: {e:e}");
    }
}

// ----------------------------------------------------------------- Cartesian

fn cartesian_plan(c: &Cart, precision: Precision, backend: BackendKind) -> Plan {
    let p = &c.problem;
    let [nx, ny, nz] = p.dims;
    let mut plan = Plan::new(
        options(precision, backend),
        nx as i64,
        ny as i64,
        nz as i64,
        p.coils as i64,
        p.samples as i64,
    )
    .expect("plan");
    plan.set_grid_positions(c.fov, c.center).expect("grid");
    plan.set_cartesian(&c.mask).expect("cartesian");
    plan.set_sensitivities(p.sensitivities.as_deref())
        .expect("sensitivities");
    plan
}

const CARTESIAN_SHAPES: [[usize; 3]; 7] = [
    [6, 5, 1],
    [7, 4, 1],
    [8, 8, 1],
    [4, 3, 5],
    [5, 6, 3],
    [3, 5, 2],
    [1, 6, 5],
];

#[test]
fn cuda_cartesian_matches_direct_sum_and_cpu() {
    let test = "cuda_cartesian_matches_direct_sum_and_cpu";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    for (s, dims) in CARTESIAN_SHAPES.into_iter().enumerate() {
        let coils = 1 + s % 3;
        let c = random_cart(&mut rng, dims, coils);
        let p = &c.problem;
        let image = rng.complex(p.voxels());
        let data = rng.complex(p.samples * coils);
        let weights: Vec<f32> = (0..p.samples).map(|_| rng.range(0.2, 2.0) as f32).collect();
        let d_ref = p.forward_f64(&image);
        let x_ref = p.adjoint_f64(&data);
        let n_ref = normal_f64(p, &image, None);
        let nw_ref = normal_f64(p, &image, Some(&weights));
        for (precision, bound) in PRECISIONS {
            let mut results = Vec::new();
            for backend in [BackendKind::Cuda, BackendKind::Cpu] {
                let plan = cartesian_plan(&c, precision, backend);
                let mut d = vec![Complex32::default(); p.samples * coils];
                plan.forward(&image, &mut d).expect("forward");
                let mut x = vec![Complex32::default(); p.voxels()];
                plan.adjoint(&data, &mut x).expect("adjoint");
                let mut y = x.clone();
                plan.normal(&image, &mut y).expect("normal");
                let mut yw = x.clone();
                plan.operator()
                    .expect("operator")
                    .normal(&image, &mut yw, Some(&weights))
                    .expect("weighted normal");
                results.push([d, x, y, yw]);
            }
            let [gpu, cpu] = [&results[0], &results[1]];
            for (i, (what, reference)) in [
                ("E", &d_ref),
                ("EH", &x_ref),
                ("EHE", &n_ref),
                ("EHWE", &nw_ref),
            ]
            .into_iter()
            .enumerate()
            {
                let direct = rel_error(&gpu[i], reference);
                let vs_cpu = rel_error(&gpu[i], &to_c64(&cpu[i]));
                eprintln!(
                    "{dims:?} L={coils} M={} {precision:?} {what}: vs f64 {direct:.2e}, vs CPU Cartesian {vs_cpu:.2e}",
                    p.samples
                );
                assert!(
                    direct <= bound,
                    "{dims:?} {precision:?} {what}: {direct:e} > {bound:e}"
                );
                assert!(
                    vs_cpu <= 2.0 * bound,
                    "{dims:?} {precision:?} {what}: vs CPU {vs_cpu:e}"
                );
            }
        }
    }
}

#[test]
fn cuda_cartesian_larger_grid_stays_accurate() {
    let test = "cuda_cartesian_larger_grid_stays_accurate";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    // 3D, Kim-like proportions: float32 cuFFT against the float64 cuFFT path.
    let c = random_cart(&mut rng, [64, 40, 20], 4);
    let p = &c.problem;
    let image = rng.complex(p.voxels());
    let mut out = Vec::new();
    for precision in [Precision::Accurate, Precision::Double] {
        let plan = cartesian_plan(&c, precision, BackendKind::Cuda);
        let mut y = vec![Complex32::default(); p.voxels()];
        plan.normal(&image, &mut y).expect("normal");
        let mut d = vec![Complex32::default(); p.samples * p.coils];
        plan.forward(&image, &mut d).expect("forward");
        out.push((y, d));
    }
    let e_normal = rel_error(&out[0].0, &to_c64(&out[1].0));
    let e_forward = rel_error(&out[0].1, &to_c64(&out[1].1));
    eprintln!("64x40x20, 4 coils: accurate vs double: E {e_forward:.2e}, EHE {e_normal:.2e}");
    assert!(e_forward <= 1e-5 && e_normal <= 1e-5);
}

#[test]
fn cuda_cartesian_cg_matches_cpu() {
    let test = "cuda_cartesian_cg_matches_cpu";
    if !gpu(test) {
        return;
    }
    let mut rng = Rng::fresh(test);
    let c = random_cart(&mut rng, [12, 10, 4], 3);
    let p = &c.problem;
    let truth = rng.complex(p.voxels());
    let data = to_c32(&p.forward_f64(&truth));
    let weights: Vec<f32> = (0..p.samples).map(|_| rng.range(0.5, 1.5) as f32).collect();
    // DOUBLE runs to convergence: CG's intermediate iterates are not a
    // function of the operator alone (seed 1795680290823929130: the CPU's
    // exact and Cartesian operators, both float64, agree to 1e-9 at 20
    // iterations and at convergence, but their residuals part from iteration
    // 28 on and the iterates differ by 2.4e-6 at 30: rounding differences
    // grow once the Krylov basis loses orthogonality).
    for (precision, bound, iterations) in [
        (Precision::Accurate, 1e-4, 30),
        (Precision::Double, 1e-7, 300),
    ] {
        let cg = CgOptions {
            max_iterations: iterations,
            tolerance: 0.0,
            regularizer: Regularizer::Tikhonov,
            lambda: 0.2 * (p.samples * p.coils) as f64,
            sample_weights: Some(&weights),
            ..CgOptions::default()
        };
        let mut solutions = Vec::new();
        for backend in [BackendKind::Cuda, BackendKind::Cpu] {
            let plan = cartesian_plan(&c, precision, backend);
            let mut x = vec![Complex32::default(); p.voxels()];
            let info = plan.cg(&data, &cg, &mut x).expect("cg");
            eprintln!(
                "{precision:?} {backend:?}: {} iterations, residual {:.2e}, {:.4} s",
                info.iterations, info.rel_residual, info.seconds
            );
            solutions.push(x);
        }
        let e = rel_error(&solutions[0], &to_c64(&solutions[1]));
        eprintln!("{precision:?}: CG CUDA Cartesian vs CPU Cartesian {e:.2e}");
        assert!(e <= bound, "{precision:?}: {e:e}");
    }
}

#[test]
fn cuda_fft_refusals_do_not_panic() {
    // Runs everywhere: without a GPU a CUDA request is BACKEND_UNAVAILABLE.
    let mut rng = Rng::fresh("cuda_fft_refusals_do_not_panic");
    let c = random_cart(&mut rng, [6, 5, 1], 1);
    let p = &c.problem;
    let [nx, ny, nz] = p.dims;
    let made = Plan::new(
        options(Precision::Accurate, BackendKind::Cuda),
        nx as i64,
        ny as i64,
        nz as i64,
        1,
        p.samples as i64,
    );
    let mut plan = match made {
        Err(e) => {
            assert_eq!(e.status, Status::BackendUnavailable, "{}", e.message);
            eprintln!("no GPU: {}", e.message);
            return;
        }
        Ok(plan) => plan,
    };
    // With a GPU: a Toeplitz plan whose model is not linear is refused with the reason.
    plan.set_grid_positions(c.fov, c.center).expect("grid");
    let m = p.samples;
    let mut coefficients = vec![0.0; 9 * m];
    coefficients[5 * m] = 40.0;
    plan.set_solid_harmonics(9, &coefficients)
        .expect("harmonics");
    plan.set_toeplitz(true, 0).expect("toeplitz");
    let x = rng.complex(p.voxels());
    let mut out = vec![Complex32::default(); p.voxels()];
    let e = plan.normal(&x, &mut out).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    assert!(e.message.contains("order 2"), "{}", e.message);
}

/// Runs in a child process with HORECON_CUDA_NO_CUFFT=1 (see below): an AUTO
/// plan on a GPU without cuFFT computes Toeplitz and Cartesian mode on the
/// CPU; a CUDA plan gets BACKEND_UNAVAILABLE naming the reason.
#[test]
fn child_fft_modes_without_cufft() {
    if std::env::var("HORECON_CUDA_NO_CUFFT").is_err() {
        return;
    }
    let mut rng = Rng::fresh("child_fft_modes_without_cufft");
    let c = random_cart(&mut rng, [6, 5, 3], 2);
    let p = &c.problem;
    let x = rng.complex(p.voxels());
    let mut d = vec![Complex32::default(); p.samples * p.coils];
    let auto = cartesian_plan(&c, Precision::Accurate, BackendKind::Auto);
    auto.forward(&x, &mut d).expect("AUTO Cartesian forward");
    let name = auto.operator().expect("operator").backend_name();
    assert!(name.starts_with("cpu"), "AUTO Cartesian ran on {name}");
    let forward = rel_error(&d, &p.forward_f64(&x));
    assert!(forward <= 1e-5, "AUTO Cartesian forward: {forward:e}");
    let cuda = cartesian_plan(&c, Precision::Accurate, BackendKind::Cuda);
    match cuda.forward(&x, &mut d) {
        Ok(()) => panic!("a CUDA Cartesian plan ran without cuFFT"),
        Err(e) => {
            assert_eq!(e.status, Status::BackendUnavailable, "{}", e.message);
            assert!(e.message.contains("HORECON_CUDA_NO_CUFFT"), "{}", e.message);
        }
    }

    let q = lattice_problem(&mut rng, [7, 6, 1], 2, 90, 4, None);
    let x = rng.complex(q.voxels());
    let mut y = vec![Complex32::default(); q.voxels()];
    toeplitz_plan(&q, Precision::Accurate, BackendKind::Auto, 0)
        .normal(&x, &mut y)
        .expect("AUTO Toeplitz normal");
    let normal = rel_error(&y, &normal_f64(&q, &x, None));
    assert!(normal <= 1e-5, "AUTO Toeplitz normal: {normal:e}");
    match toeplitz_plan(&q, Precision::Accurate, BackendKind::Cuda, 0).normal(&x, &mut y) {
        Ok(()) => panic!("a CUDA Toeplitz plan ran without cuFFT"),
        Err(e) => assert_eq!(e.status, Status::BackendUnavailable, "{}", e.message),
    }
    eprintln!(
        "child: Cartesian on {name}, forward {forward:.1e}; Toeplitz normal {normal:.1e}; CUDA plans refused"
    );
}

#[test]
fn auto_plans_without_cufft_use_the_cpu() {
    let test = "auto_plans_without_cufft_use_the_cpu";
    if let Err(reason) = probe() {
        eprintln!("{test}: skipped: no CUDA device ({reason})");
        return;
    }
    let exe = std::env::current_exe().expect("test executable");
    let out = std::process::Command::new(exe)
        .args(["--exact", "child_fft_modes_without_cufft", "--nocapture"])
        .env("HORECON_CUDA_NO_CUFFT", "1")
        .output()
        .expect("child test runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "child failed: {stderr}");
    assert!(
        stderr.contains("child: Cartesian on cpu"),
        "child did not run: {stderr}"
    );
}
