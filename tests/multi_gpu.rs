//! Several GPUs (`num_devices` > 1): the exact operator split by samples
//! (backend/cuda/multi.rs). On one GPU, `HORECON_CUDA_TEST_PARTS=P` places
//! the P parts on that GPU with the same copies and sums, so every path is
//! checked here against the float64 direct sums and against one part; the
//! tests for real devices skip with fewer than two GPUs, the GPU tests skip
//! without one (one line saying why). The refusals and the device-count
//! check run everywhere.

mod common;
use common::*;
use horecon::backend::cuda::context::probe;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer, Status};
use std::sync::{Mutex, MutexGuard};

const CLASSES: [(Precision, f64); 3] = [
    (Precision::Accurate, 1e-5),
    (Precision::Fast, 1e-3),
    (Precision::Double, 1e-7),
];

/// Serialises the tests: `HORECON_CUDA_TEST_PARTS` is read whenever a plan
/// is made or its operator built.
static ENV: Mutex<()> = Mutex::new(());

/// The environment lock, with `HORECON_CUDA_TEST_PARTS` set to `parts` (or
/// removed) and `HORECON_NCCL` removed.
fn parts_setting(parts: Option<usize>) -> MutexGuard<'static, ()> {
    let guard = ENV.lock().unwrap_or_else(|e| e.into_inner());
    std::env::remove_var("HORECON_NCCL");
    match parts {
        Some(p) => std::env::set_var("HORECON_CUDA_TEST_PARTS", p.to_string()),
        None => std::env::remove_var("HORECON_CUDA_TEST_PARTS"),
    }
    guard
}

/// The environment lock for real devices: no test parts, NCCL on (the
/// default) or off (`HORECON_NCCL=0`: device-to-device copies).
fn nccl_setting(nccl: bool) -> MutexGuard<'static, ()> {
    let guard = parts_setting(None);
    if !nccl {
        std::env::set_var("HORECON_NCCL", "0");
    }
    guard
}

/// CUDA devices present, or 0 after printing one line saying why `test` is skipped.
fn gpus(test: &str, needed: usize) -> usize {
    match probe() {
        Ok(n) if n >= needed => n,
        Ok(n) => {
            eprintln!("{test}: skipped: {n} CUDA device(s), {needed} needed");
            0
        }
        Err(reason) => {
            eprintln!("{test}: skipped: no CUDA device ({reason})");
            0
        }
    }
}

fn cuda(precision: Precision, num_devices: i32) -> Options {
    Options {
        backend: BackendKind::Cuda,
        precision,
        num_devices,
        ..Options::default()
    }
}

fn plan_error(options: Options) -> horecon::Error {
    match Plan::new(options, 4, 4, 1, 1, 8) {
        Ok(_) => panic!("a plan with {options:?} must fail"),
        Err(e) => e,
    }
}

#[test]
fn num_devices_is_refused_on_the_cpu_and_checked_against_the_devices_present() {
    let _env = parts_setting(None);
    let present = probe().unwrap_or(0);
    let e = plan_error(Options {
        backend: BackendKind::Cpu,
        num_devices: 2,
        ..Options::default()
    });
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    assert!(e.message.contains("num_devices = 2"), "{}", e.message);
    let too_many = (present as i32 + 1).max(2);
    for backend in [BackendKind::Cuda, BackendKind::Auto] {
        let e = plan_error(Options {
            backend,
            num_devices: too_many,
            ..Options::default()
        });
        eprintln!(
            "{backend:?}, num_devices {too_many} with {present} device(s): {}",
            e.message
        );
        assert_eq!(e.status, Status::BackendUnavailable, "{}", e.message);
        assert!(
            e.message.contains(&format!("num_devices = {too_many}")),
            "{}",
            e.message
        );
    }
    // a later first device counts too: devices 1..=count do not all exist
    if present >= 1 {
        let e = plan_error(Options {
            device: 1,
            ..cuda(Precision::Accurate, present as i32)
        });
        assert_eq!(e.status, Status::BackendUnavailable, "{}", e.message);
        assert!(
            e.message.contains(&format!("{present} CUDA device(s)")),
            "{}",
            e.message
        );
    }
}

/// E and Eᴴ of 2 and 3 parts on one GPU against float64 and against one
/// part, in every mode; EᴴWE against the composition of the two halves.
#[test]
fn parts_on_one_gpu_match_float64_and_one_part() {
    if gpus("parts_on_one_gpu_match_float64_and_one_part", 1) == 0 {
        return;
    }
    let mut rng = Rng::fresh("parts_on_one_gpu_match_float64_and_one_part");
    for round in 0..4 {
        let problem = Problem::random(&mut rng, 900, 700, 60.0);
        let (image, data) = random_inputs(&mut rng, &problem);
        let reference = (problem.forward_f64(&image), problem.adjoint_f64(&data));
        let weights: Vec<f32> = (0..problem.samples)
            .map(|_| rng.range(0.1, 2.0) as f32)
            .collect();
        for (precision, bound) in CLASSES {
            let one = {
                let _env = parts_setting(None);
                apply(&problem.plan_with(cuda(precision, 1)), &image, &data)
            };
            for parts in [2, 3] {
                let _env = parts_setting(Some(parts));
                let plan = problem.plan_with(cuda(precision, 1));
                let (d, x) = apply(&plan, &image, &data);
                let op = plan.operator().expect("operator");
                let mut n = vec![Complex32::default(); image.len()];
                op.normal(&image, &mut n, Some(&weights)).expect("normal");
                let name = op.backend_name();
                let (ef, ea) = (rel_error(&d, &reference.0), rel_error(&x, &reference.1));
                let (sf, sa) = (
                    rel_error(&d, &to_c64(&one.0)),
                    rel_error(&x, &to_c64(&one.1)),
                );
                // EᴴWE against Eᴴ(W·(E x)) composed from the split's own halves
                let m = problem.samples;
                let wd: Vec<Complex32> = d
                    .iter()
                    .enumerate()
                    .map(|(q, v)| v * weights[q % m])
                    .collect();
                let mut composed = vec![Complex32::default(); image.len()];
                plan.adjoint(&wd, &mut composed).expect("adjoint");
                let en = rel_error(&n, &to_c64(&composed));
                eprintln!(
                    "round {round} {precision:?} {parts} parts ({name}) dims {:?} M {} L {}: \
                     vs float64 forward {ef:.2e} adjoint {ea:.2e}; vs one part {sf:.2e} {sa:.2e}; \
                     normal vs composed {en:.2e}",
                    problem.dims, problem.samples, problem.coils
                );
                let devices = format!("cuda:{}", vec!["0"; parts.min(m)].join("+"));
                assert_eq!(name.split(' ').next(), Some(devices.as_str()), "{name}");
                if parts.min(m) > 1 {
                    assert!(name.contains("no NCCL: parts share a GPU"), "{name}");
                }
                assert!(
                    ef <= bound && ea <= bound,
                    "{precision:?} {parts} parts: {ef:e} {ea:e}"
                );
                assert!(
                    sf <= 2.0 * bound && sa <= 2.0 * bound,
                    "{precision:?} {parts} parts: {sf:e} {sa:e}"
                );
                assert!(
                    en <= 2.0 * bound.max(1e-6),
                    "{precision:?} {parts} parts: normal {en:e}"
                );
            }
        }
    }
}

/// CG (Tikhonov with sample weights; TV through the device FD state) with
/// 2 parts on one GPU equals CG on one part within the accuracy class: the
/// bound, or twice the distance of one part's float32 solution from the
/// float64 one where an unconverged TV CG amplifies float32 rounding
/// (seed 1795552586226365847: 1.8e-4 between the parts after 60 iterations).
#[test]
fn cg_with_parts_on_one_gpu_matches_one_part() {
    if gpus("cg_with_parts_on_one_gpu_matches_one_part", 1) == 0 {
        return;
    }
    let mut rng = Rng::fresh("cg_with_parts_on_one_gpu_matches_one_part");
    let problem = Problem::random(&mut rng, 400, 500, 10.0);
    let truth = rng.complex(problem.voxels());
    let data = to_c32(&problem.forward_f64(&truth));
    let weights: Vec<f32> = (0..problem.samples)
        .map(|_| rng.range(0.5, 1.5) as f32)
        .collect();
    let lambda = 0.5 * (problem.samples * problem.coils) as f64;
    for regularizer in [Regularizer::Tikhonov, Regularizer::TotalVariation] {
        let options = CgOptions {
            max_iterations: 30,
            tolerance: 0.0,
            regularizer,
            lambda,
            reweightings: 2,
            epsilon: 0.1,
            sample_weights: Some(&weights),
            ..CgOptions::default()
        };
        let solve_data = |precision, parts, data: &[Complex32]| {
            let _env = parts_setting(parts);
            let plan = problem.plan_with(cuda(precision, 1));
            let mut x = vec![Complex32::default(); problem.voxels()];
            let info = plan.cg(data, &options, &mut x).expect("cg");
            eprintln!(
                "{precision:?} {regularizer:?} parts {parts:?}: {} iterations, residual {:.2e}",
                info.iterations, info.rel_residual
            );
            x
        };
        let solve = |precision, parts| solve_data(precision, parts, &data);
        // The accuracy class of a float32 CG: how far one part's solution is
        // from the float64 one (an unconverged TV CG amplifies rounding).
        // In float64 the class is 0 by definition; the float32 class says how
        // strongly this problem amplifies rounding (0.53 for seed
        // 1795559043576139936, a reweighted TV CG far from converged, whose
        // float64 parts then differed by 9.2e-6): float64 parts may differ by
        // 1e-4 of it (rounding 1e-9 of float32's, grown non-linearly).
        let double = to_c64(&solve(Precision::Double, None));
        let mut float32_class = 0.0f64;
        for (precision, bound) in [(Precision::Accurate, 1e-4f64), (Precision::Double, 1e-6)] {
            let one = solve(precision, None);
            let two = solve(precision, Some(2));
            let e = rel_error(&two, &to_c64(&one));
            let class = if precision == Precision::Double {
                // Some TV problems' CG amplifies float64 rounding explosively
                // (seed 1795564598653419571: ~1000x per iteration from
                // iteration 21, on the CPU as well): then the class is how far
                // one datum changed by one float32 ulp moves the one-part
                // solution, whichever is larger.
                let mut nudged = data.clone();
                nudged[0].re = f32::from_bits(nudged[0].re.to_bits() + 1);
                let moved = rel_error(&solve_data(precision, None, &nudged), &to_c64(&one));
                (1e-4 * float32_class).max(10.0 * moved)
            } else {
                rel_error(&one, &double)
            };
            float32_class = class;
            eprintln!(
                "{precision:?} {regularizer:?}: |2 parts - 1 part| = {e:.2e}, accuracy class {class:.2e}"
            );
            assert!(
                e <= bound.max(2.0 * class),
                "{precision:?} {regularizer:?}: CG differs by {e:e} (1 part vs float64 {class:e})"
            );
        }
    }
}

/// A trajectory plan (Stone et al.) on a grid: Fᴴd and Q with 2 parts on
/// one GPU equal one part's within the class.
#[test]
fn fhd_and_q_with_parts_on_one_gpu_match_one_part() {
    if gpus("fhd_and_q_with_parts_on_one_gpu_match_one_part", 1) == 0 {
        return;
    }
    let mut rng = Rng::fresh("fhd_and_q_with_parts_on_one_gpu_match_one_part");
    let dims = [9usize, 7, 4];
    let m = 700;
    let fov = [0.2, 0.18, 0.1];
    let k: Vec<f64> = (0..3)
        .flat_map(|a| {
            let kmax = std::f64::consts::PI * dims[a] as f64 / fov[a];
            (0..m).map(|_| rng.range(-kmax, kmax)).collect::<Vec<_>>()
        })
        .collect();
    let data = rng.complex(m);
    let phi = rng.complex(m);
    let phi_mag2: Vec<f32> = phi.iter().map(|p| p.norm_sqr()).collect();
    for (precision, bound) in CLASSES {
        let mut results = Vec::new();
        for parts in [None, Some(2)] {
            let _env = parts_setting(parts);
            let mut plan = Plan::new(cuda(precision, 1), 9, 7, 4, 1, m as i64).expect("plan");
            plan.set_grid_positions(fov, [0.01, -0.02, 0.0])
                .expect("grid");
            plan.set_trajectory(3, &k).expect("trajectory");
            let mut fhd = vec![Complex32::default(); dims.iter().product()];
            plan.fhd(&data, Some(&phi), &mut fhd).expect("fhd");
            let mut q = vec![Complex32::default(); plan.q_dims().iter().product()];
            plan.q(Some(&phi_mag2), &mut q).expect("q");
            results.push((fhd, q));
        }
        let ef = rel_error(&results[1].0, &to_c64(&results[0].0));
        let eq = rel_error(&results[1].1, &to_c64(&results[0].1));
        eprintln!("{precision:?}: |2 parts - 1 part| FHd {ef:.2e}, Q {eq:.2e}");
        assert!(
            ef <= 2.0 * bound && eq <= 2.0 * bound,
            "{precision:?}: {ef:e} {eq:e}"
        );
    }
}

/// With one coil, the Toeplitz and Cartesian operators asked for two parts
/// run on one (nothing to split); more parts than samples fall back to one
/// part per sample; concurrent calls on one split plan agree.
#[test]
fn splits_with_few_coils_or_samples_and_concurrent_calls_stay_consistent() {
    if gpus(
        "splits_with_few_coils_or_samples_and_concurrent_calls_stay_consistent",
        1,
    ) == 0
    {
        return;
    }
    let mut rng =
        Rng::fresh("splits_with_few_coils_or_samples_and_concurrent_calls_stay_consistent");
    let _env = parts_setting(Some(2));
    let mut plan = Plan::new(cuda(Precision::Accurate, 2), 8, 8, 1, 1, 64).expect("plan");
    plan.set_grid_positions([0.2, 0.2, 0.01], [0.0; 3])
        .expect("grid");
    let k: Vec<f64> = (0..2 * 64).map(|_| rng.range(-40.0, 40.0)).collect();
    plan.set_trajectory(2, &k).expect("trajectory");
    let image = rng.complex(64);
    let mut out = vec![Complex32::default(); 64];
    plan.normal(&image, &mut out)
        .expect("the exact normal runs on the parts");
    plan.set_toeplitz(true, 0).expect("toeplitz");
    let toeplitz = plan
        .normal_operator()
        .expect("Toeplitz with num_devices = 2");
    toeplitz
        .normal(&image, &mut out, None)
        .expect("Toeplitz normal");
    assert!(
        !toeplitz.backend_name().contains("by coils"),
        "{}",
        toeplitz.backend_name()
    );
    let mask: Vec<u8> = (0..64).map(|i| u8::from(i % 2 == 0 || i < 8)).collect();
    let mut cart = Plan::new(
        cuda(Precision::Accurate, 2),
        8,
        8,
        1,
        1,
        mask.iter().filter(|&&v| v != 0).count() as i64,
    )
    .expect("plan");
    cart.set_grid_positions([0.2, 0.2, 0.01], [0.0; 3])
        .expect("grid");
    cart.set_cartesian(&mask).expect("cartesian");
    let mut d = vec![Complex32::default(); cart.sizes().samples];
    cart.forward(&image, &mut d)
        .expect("Cartesian with num_devices = 2");
    let name = cart.operator().expect("operator").backend_name();
    assert!(!name.contains("by coils"), "{name}");
    drop(_env);

    // three parts for two samples: two parts of one sample each
    let _env = parts_setting(Some(3));
    let mut tiny = Plan::new(cuda(Precision::Double, 1), 3, 2, 1, 1, 2).expect("plan");
    tiny.set_grid_positions([0.1, 0.1, 0.01], [0.0; 3])
        .expect("grid");
    tiny.set_trajectory(2, &[10.0, -20.0, 5.0, 30.0])
        .expect("trajectory");
    let x = rng.complex(6);
    let mut d = vec![Complex32::default(); 2];
    tiny.forward(&x, &mut d).expect("forward");
    let name = tiny.operator().expect("operator").backend_name();
    assert_eq!(name.split(' ').next(), Some("cuda:0+0"), "{name}");
    drop(_env);
    let mut want = vec![Complex32::default(); 2];
    let _env = parts_setting(None);
    let mut single = Plan::new(cuda(Precision::Double, 1), 3, 2, 1, 1, 2).expect("plan");
    single
        .set_grid_positions([0.1, 0.1, 0.01], [0.0; 3])
        .expect("grid");
    single
        .set_trajectory(2, &[10.0, -20.0, 5.0, 30.0])
        .expect("trajectory");
    single.forward(&x, &mut want).expect("forward");
    let e = rel_error(&d, &to_c64(&want));
    assert!(e <= 1e-7, "one-sample parts differ by {e:e}");
    drop(_env);

    // threads on one split plan, and the plan used from its own CG's progress callback
    let _env = parts_setting(Some(2));
    let problem = Problem::random(&mut rng, 500, 400, 20.0);
    let split = problem.plan_with(cuda(Precision::Accurate, 1));
    let (image, data) = random_inputs(&mut rng, &problem);
    let alone = apply(&split, &image, &data);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..3 {
                    assert_eq!(
                        apply(&split, &image, &data),
                        alone,
                        "results differ under concurrency"
                    );
                }
            });
        }
    });
    let inside = Mutex::new(Vec::new());
    let progress = |_iteration: usize, _rel: f64| {
        inside.lock().unwrap().push(apply(&split, &image, &data));
        false
    };
    let options = CgOptions {
        max_iterations: 3,
        tolerance: 0.0,
        progress: Some(&progress),
        ..CgOptions::default()
    };
    let mut x = vec![Complex32::default(); problem.voxels()];
    let info = split.cg(&data, &options, &mut x).expect("cg");
    let inside = inside.into_inner().unwrap();
    // one callback per iteration (fewer than 3 where a tiny problem's CG
    // reaches the rounding level first: seed 1795592670959874520)
    assert!(
        info.iterations >= 1 && inside.len() == info.iterations,
        "{info:?}"
    );
    assert!(
        inside.iter().all(|r| *r == alone),
        "operators inside the callback differ"
    );
}

/// Two real devices: E, Eᴴ and CG with num_devices = 2 equal num_devices = 1
/// within the class, the images moved by NCCL (where libnccl loads) and by
/// device-to-device copies (`HORECON_NCCL=0`), and the two ways agree
/// (skipped with fewer than two GPUs).
#[test]
fn two_devices_match_one() {
    if gpus("two_devices_match_one", 2) == 0 {
        return;
    }
    let mut rng = Rng::fresh("two_devices_match_one");
    for _ in 0..3 {
        let problem = Problem::random(&mut rng, 900, 700, 60.0);
        let (image, data) = random_inputs(&mut rng, &problem);
        let reference = (problem.forward_f64(&image), problem.adjoint_f64(&data));
        for (precision, bound) in CLASSES {
            let one = {
                let _env = nccl_setting(true);
                problem.plan_with(cuda(precision, 1))
            };
            let single = apply(&one, &image, &data);
            let options = CgOptions {
                max_iterations: 20,
                tolerance: 0.0,
                regularizer: Regularizer::Tikhonov,
                lambda: (problem.samples * problem.coils) as f64,
                ..CgOptions::default()
            };
            let mut x1 = vec![Complex32::default(); problem.voxels()];
            one.cg(&data, &options, &mut x1).expect("cg");
            let mut ways = Vec::new();
            for nccl in [true, false] {
                let two = {
                    let _env = nccl_setting(nccl);
                    problem.plan_with(cuda(precision, 2))
                };
                let name = two.operator().expect("operator").backend_name();
                let (d, x) = apply(&two, &image, &data);
                let (ef, ea) = (rel_error(&d, &reference.0), rel_error(&x, &reference.1));
                let (sf, sa) = (
                    rel_error(&d, &to_c64(&single.0)),
                    rel_error(&x, &to_c64(&single.1)),
                );
                let mut x2 = vec![Complex32::default(); problem.voxels()];
                two.cg(&data, &options, &mut x2).expect("cg");
                let ec = rel_error(&x2, &to_c64(&x1));
                eprintln!(
                    "{precision:?} {name}: vs float64 {ef:.2e} {ea:.2e}; vs one device {sf:.2e} {sa:.2e}; CG {ec:.2e}"
                );
                assert!(name.starts_with("cuda:0+1 "), "{name}");
                assert_eq!(name.contains("no NCCL"), !nccl || !name.contains("NCCL 2"));
                assert!(ef <= bound && ea <= bound, "{precision:?}: {ef:e} {ea:e}");
                assert!(
                    sf <= 2.0 * bound && sa <= 2.0 * bound,
                    "{precision:?}: {sf:e} {sa:e}"
                );
                assert!(
                    ec <= 10.0 * bound.max(1e-5),
                    "{precision:?}: CG differs by {ec:e}"
                );
                ways.push([d, x, x2]);
            }
            let apart: Vec<f64> = (0..3)
                .map(|i| rel_error(&ways[0][i], &to_c64(&ways[1][i])))
                .collect();
            eprintln!("{precision:?}: NCCL against copies E, Eᴴ, CG {apart:?}");
            assert!(apart.iter().all(|&e| e <= 2.0 * bound), "{apart:?}");
        }
    }
}

/// Two real devices, NCCL where it loads: three plans (two exact, one
/// Toeplitz) applied from six threads at once give what each gives alone
/// (the collectives of different operators on the same GPUs do not
/// interleave; skipped with fewer than two GPUs).
#[test]
fn two_devices_with_several_plans_at_once_stay_consistent() {
    if gpus("two_devices_with_several_plans_at_once_stay_consistent", 2) == 0 {
        return;
    }
    let _env = nccl_setting(true);
    let mut rng = Rng::fresh("two_devices_with_several_plans_at_once_stay_consistent");
    let mut plans = Vec::new();
    for _ in 0..2 {
        let problem = Problem::random(&mut rng, 700, 500, 40.0);
        let (image, data) = random_inputs(&mut rng, &problem);
        plans.push((problem.plan_with(cuda(Precision::Accurate, 2)), image, data));
    }
    let dims = [rng.int(6, 14), rng.int(5, 12), 1];
    let samples = rng.int(60, 300);
    let lattice = lattice_problem(&mut rng, dims, 3, samples, 4, Some((80.0, 0.02)));
    let mut toeplitz = lattice.plan_with(cuda(Precision::Accurate, 2));
    toeplitz.set_toeplitz(true, 0).expect("toeplitz");
    let (image, data) = random_inputs(&mut rng, &lattice);
    plans.push((toeplitz, image, data));
    let alone: Vec<_> = plans.iter().map(|(p, x, d)| apply(p, x, d)).collect();
    for (plan, ..) in &plans {
        let name = plan.operator().expect("operator").backend_name();
        eprintln!("{name}");
    }
    std::thread::scope(|s| {
        for round in 0..6 {
            let (plans, alone) = (&plans, &alone);
            s.spawn(move || {
                for i in 0..4 {
                    let k = (round + i) % plans.len();
                    let (plan, x, d) = &plans[k];
                    assert_eq!(
                        apply(plan, x, d),
                        alone[k],
                        "plan {k} differs under concurrency"
                    );
                }
            });
        }
    });
}

/// The Toeplitz, Cartesian and fast-path operators on two real devices,
/// split by coils, with NCCL (where libnccl loads) and with device-to-device
/// copies: E, Eᴴ, EᴴWE and a weighted CG equal one device's (skipped with
/// fewer than two GPUs).
#[test]
fn fft_paths_on_two_devices_match_one() {
    if gpus("fft_paths_on_two_devices_match_one", 2) == 0 {
        return;
    }
    let mut rng = Rng::fresh("fft_paths_on_two_devices_match_one");
    let coils = rng.int(2, 6);
    let case = FftCase::random(&mut rng, coils);
    let pool = rng.complex(4096);
    let weight_pool: Vec<f32> = (0..1024).map(|_| rng.range(0.2, 2.0) as f32).collect();
    for path in ["Toeplitz", "Cartesian", "fast path"] {
        for (precision, bound, cg_bound) in [
            (Precision::Accurate, 1e-5, 1e-3f64),
            (Precision::Double, 1e-10, 1e-7),
        ] {
            let run = |devices: i32, nccl: bool| {
                let _env = nccl_setting(nccl);
                fft_path_results(
                    path,
                    &case,
                    precision,
                    devices,
                    false,
                    (&pool, &weight_pool),
                )
            };
            let one = run(1, true).1;
            for nccl in [true, false] {
                let (name, two) = run(2, nccl);
                let errors: Vec<f64> = one
                    .iter()
                    .zip(&two)
                    .map(|(a, b)| rel_error(b, &to_c64(a)))
                    .collect();
                eprintln!(
                    "{path} {precision:?}, {coils} coils ({name}): E {:.1e}, Eᴴ {:.1e}, \
                     EᴴWE {:.1e}, CG {:.1e} against one device",
                    errors[0], errors[1], errors[2], errors[3]
                );
                assert!(name.starts_with("cuda:0+1 by coils"), "{name}");
                assert_eq!(name.contains("no NCCL"), !nccl || !name.contains("NCCL 2"));
                assert!(
                    errors[..3].iter().all(|&e| e <= bound) && errors[3] <= cg_bound,
                    "{path} {precision:?} NCCL {nccl}: {errors:?}"
                );
            }
        }
    }
}

/// One plan of each FFT-based path (backend/cuda/coil_split.rs): Toeplitz
/// with off-resonance, Cartesian, and the fast path of a higher-order model.
fn fft_path_plan(
    path: &str,
    rng_case: &FftCase,
    precision: Precision,
    num_devices: i32,
) -> (Plan, std::sync::Arc<dyn horecon::op::EncodingOperator>) {
    let options = cuda(precision, num_devices);
    let plan = match path {
        "Toeplitz" => {
            let mut plan = rng_case.lattice.plan_with(options);
            plan.set_toeplitz(true, 0).expect("toeplitz");
            plan
        }
        "Cartesian" => {
            let c = &rng_case.cart;
            let [nx, ny, nz] = c.problem.dims;
            let mut plan = Plan::new(
                options,
                nx as i64,
                ny as i64,
                nz as i64,
                c.problem.coils as i64,
                c.problem.samples as i64,
            )
            .expect("plan");
            plan.set_grid_positions(c.fov, c.center).expect("grid");
            plan.set_cartesian(&c.mask).expect("cartesian");
            plan.set_sensitivities(c.problem.sensitivities.as_deref())
                .expect("sensitivities");
            plan
        }
        _ => {
            let mut plan = rng_case.higher.plan_with(options);
            plan.set_approximation(1e-3).expect("approximation");
            plan
        }
    };
    let op = plan.normal_operator().expect("operator");
    (plan, op)
}

/// The operator's name and E x, Eᴴ d, EᴴWE x and the CG solution of the
/// data E x (its first value one float32 ulp larger when `nudged`) of the
/// `path` plan on `num_devices` devices, the inputs the first values of
/// `pool` and the sample weights of `weight_pool`.
fn fft_path_results(
    path: &str,
    case: &FftCase,
    precision: Precision,
    num_devices: i32,
    nudged: bool,
    (pool, weight_pool): (&[Complex32], &[f32]),
) -> (String, [Vec<Complex32>; 4]) {
    let (plan, op) = fft_path_plan(path, case, precision, num_devices);
    let s = plan.sizes();
    let (n, m, l) = (s.voxels, s.samples, s.coils);
    let (x, d, weights) = (&pool[..n], &pool[..m * l], &weight_pool[..m]);
    let mut y = vec![Complex32::default(); m * l];
    op.forward(x, &mut y).expect("forward");
    let mut z = vec![Complex32::default(); n];
    op.adjoint(d, &mut z).expect("adjoint");
    let mut nw = vec![Complex32::default(); n];
    op.normal(x, &mut nw, Some(weights)).expect("normal");
    let options = CgOptions {
        max_iterations: 12,
        tolerance: 0.0,
        regularizer: Regularizer::Tikhonov,
        lambda: (m * l) as f64,
        sample_weights: Some(weights),
        ..CgOptions::default()
    };
    let mut data = y.clone();
    if nudged {
        data[0].re = f32::from_bits(data[0].re.to_bits() + 1);
    }
    let mut image = vec![Complex32::default(); n];
    plan.cg(&data, &options, &mut image).expect("cg");
    (op.backend_name(), [y, z, nw, image])
}

/// The problems of one round of the FFT-path tests.
struct FftCase {
    lattice: Problem,
    cart: Cart,
    higher: Problem,
}

impl FftCase {
    /// Random problems of `coils` coils on small 2D/3D lattices.
    fn random(rng: &mut Rng, coils: usize) -> FftCase {
        let dims = [rng.int(3, 14), rng.int(2, 11), rng.int(1, 4)];
        let samples = rng.int(40, 400);
        FftCase {
            lattice: lattice_problem(rng, dims, coils, samples, 4, Some((100.0, 0.02))),
            cart: random_cart(rng, dims, coils),
            higher: higher_order_problem(
                rng,
                Kind::Grid,
                [dims[0] + 4, dims[1] + 3, dims[2]],
                coils,
                samples,
            ),
        }
    }
}

/// The Toeplitz, Cartesian and fast-path operators split by coils over 2 and
/// 3 parts on one GPU: E, Eᴴ, EᴴWE with sample weights and a weighted CG
/// equal one part's (the parts compute the same per-coil arithmetic; only
/// the order of the coil sum differs, and the fast path's NUFFT batches) in
/// float32 and float64 modes, with as many parts as coils at most; the CG
/// within its bound or its accuracy class, whichever is larger.
#[test]
fn fft_paths_split_by_coils_match_one_part() {
    if gpus("fft_paths_split_by_coils_match_one_part", 1) == 0 {
        return;
    }
    let mut rng = Rng::fresh("fft_paths_split_by_coils_match_one_part");
    for round in 0..3 {
        let coils = [2, 3, rng.int(4, 6)][round];
        let case = FftCase::random(&mut rng, coils);
        // inputs of every plan: the first values of one random pool
        let pool = rng.complex(4096);
        let weight_pool: Vec<f32> = (0..1024).map(|_| rng.range(0.2, 2.0) as f32).collect();
        for path in ["Toeplitz", "Cartesian", "fast path"] {
            let run = |precision, parts: Option<usize>, nudged: bool| {
                let _env = parts_setting(parts);
                fft_path_results(path, &case, precision, 1, nudged, (&pool, &weight_pool))
            };
            // How strongly this CG amplifies rounding (its accuracy class): the
            // float32 mode's distance from float64 (two float32 solutions may
            // lie on opposite sides: 4x; seed 1795592055527056554 with
            // lambda = 0.1·M·L: the fast path's parts 3.6e-4 apart, 1.0e-4 from
            // float64), and 10x how far one ulp of one datum moves the float64
            // solution.
            let double = run(Precision::Double, None, false).1;
            let nudged = run(Precision::Double, None, true).1;
            let moved = rel_error(&nudged[3], &to_c64(&double[3]));
            for (precision, bound, cg_bound) in [
                (Precision::Accurate, 1e-5, 1e-4f64),
                (Precision::Double, 1e-10, 1e-8),
            ] {
                let one = if precision == Precision::Double {
                    double.clone()
                } else {
                    run(precision, None, false).1
                };
                let class = if precision == Precision::Double {
                    10.0 * moved
                } else {
                    4.0 * rel_error(&one[3], &to_c64(&double[3]))
                };
                for parts in [2, 3] {
                    let (name, split) = run(precision, Some(parts), false);
                    let errors: Vec<f64> = one
                        .iter()
                        .zip(&split)
                        .map(|(a, b)| rel_error(b, &to_c64(a)))
                        .collect();
                    eprintln!(
                        "round {round} {path} {precision:?} {parts} parts, {coils} coils ({name}): \
                         E {:.1e}, Eᴴ {:.1e}, EᴴWE {:.1e}, CG {:.1e} (class {class:.1e}) against one part",
                        errors[0], errors[1], errors[2], errors[3]
                    );
                    assert!(
                        name.starts_with(&format!(
                            "cuda:{} by coils",
                            vec!["0"; parts.min(coils)].join("+")
                        )),
                        "{name}"
                    );
                    assert!(
                        errors[..3].iter().all(|&e| e <= bound) && errors[3] <= cg_bound.max(class),
                        "{path} {precision:?} {parts} parts: {errors:?}, class {class:e}"
                    );
                }
            }
        }
    }
}

/// The standalone NUFFT with its transforms shared out over parts
/// (backend/cuda/nufft/split.rs): every transform as on one device, types 1
/// and 2, 1D to 3D, float32 and float64, more parts than transforms.
#[test]
fn nufft_transforms_shared_out_over_parts_match_one_device() {
    use horecon::nufft::plan::Nufft;
    use horecon::nufft::NufftType;
    use num_complex::Complex64;
    if gpus("nufft_transforms_shared_out_over_parts_match_one_device", 1) == 0 {
        return;
    }
    let mut rng = Rng::fresh("nufft_transforms_shared_out_over_parts_match_one_device");
    for case in 0..8 {
        let ndims = 1 + case % 3;
        let modes: Vec<i64> = (0..ndims).map(|_| rng.int(1, 24) as i64).collect();
        let m = rng.int(1, 600);
        let transforms = rng.int(1, 7);
        let parts = rng.int(2, 4);
        let double = case % 2 == 1;
        let kind = if case % 4 < 2 {
            NufftType::One
        } else {
            NufftType::Two
        };
        let points: Vec<f64> = (0..ndims * m).map(|_| rng.range(-9.0, 9.0)).collect();
        let total: usize = modes.iter().map(|&n| n as usize).product();
        let input_c = rng.complex(transforms * m);
        let input_g = rng.complex(transforms * total);
        let options = cuda(
            if double {
                Precision::Double
            } else {
                Precision::Accurate
            },
            1,
        );
        let run = |parts: Option<usize>| -> (Vec<Complex64>, String) {
            let _env = parts_setting(parts);
            let plan = Nufft::new(
                kind,
                ndims as i32,
                &modes,
                m as i64,
                &points,
                if kind == NufftType::One { -1 } else { 1 },
                if double { 1e-9 } else { 1e-5 },
                transforms as i32,
                &options,
            )
            .expect("plan");
            let widen = |v: &[Complex32]| -> Vec<Complex64> {
                v.iter()
                    .map(|c| Complex64::new(c.re as f64, c.im as f64))
                    .collect()
            };
            let (mut c, mut g) = (widen(&input_c), widen(&input_g));
            plan.execute_c64(&mut c, &mut g).expect("execute");
            (
                if kind == NufftType::One { g } else { c },
                plan.backend_name(),
            )
        };
        let (split, name) = run(Some(parts));
        let (alone, _) = run(None);
        let used = parts.min(transforms);
        assert_eq!(
            name.matches('+').count(),
            used - 1,
            "{name}: {used} parts expected"
        );
        let norm = |v: &[Complex64]| v.iter().map(|c| c.norm_sqr()).sum::<f64>().sqrt();
        let diff: Vec<Complex64> = split.iter().zip(&alone).map(|(a, b)| a - b).collect();
        let e = norm(&diff) / norm(&alone).max(f64::MIN_POSITIVE);
        eprintln!(
            "{kind:?} {ndims}D modes {modes:?} M {m} T {transforms} parts {used} double {double}: {e:.1e} ({name})"
        );
        assert!(
            e <= if double { 1e-12 } else { 1e-6 },
            "split vs one device {e:e}"
        );
    }
}

/// Gridding's type-1 NUFFT (one transform per coil) shared out over parts
/// gives the one-device image.
#[test]
fn gridding_with_parts_on_one_gpu_matches_one_part() {
    if gpus("gridding_with_parts_on_one_gpu_matches_one_part", 1) == 0 {
        return;
    }
    let mut rng = Rng::fresh("gridding_with_parts_on_one_gpu_matches_one_part");
    let (nx, ny, coils, m) = (
        rng.int(4, 20),
        rng.int(4, 20),
        rng.int(2, 5),
        rng.int(50, 400),
    );
    let k: Vec<f64> = (0..2 * m).map(|_| rng.range(-60.0, 60.0)).collect();
    let sensitivities = rng.complex(nx * ny * coils);
    let data = rng.complex(m * coils);
    let dcf: Vec<f32> = (0..m).map(|_| rng.range(0.5, 1.5) as f32).collect();
    let image = |parts: Option<usize>| {
        let _env = parts_setting(parts);
        let mut plan = Plan::new(
            cuda(Precision::Accurate, 1),
            nx as i64,
            ny as i64,
            1,
            coils as i64,
            m as i64,
        )
        .expect("plan");
        plan.set_grid_positions([0.2, 0.2, 0.01], [0.0; 3])
            .expect("grid");
        plan.set_trajectory(2, &k).expect("trajectory");
        plan.set_sensitivities(Some(&sensitivities))
            .expect("sensitivities");
        let mut out = vec![Complex32::default(); nx * ny];
        plan.gridding(&data, Some(&dcf), &mut out)
            .expect("gridding");
        out
    };
    let split = image(Some(3));
    let alone = image(None);
    let e = rel_error(&split, &to_c64(&alone));
    eprintln!("gridding {nx}x{ny}, {coils} coils, M {m}: parts vs one {e:.1e}");
    assert!(e <= 1e-6, "gridding with parts differs by {e:e}");
}
