//! The fast path on the GPU, device-resident (issue 17 §3, `backend::cuda::fast`):
//! the CUDA plan's fast E, Eᴴ, EᴴE and EᴴWE against the CPU plan's fast
//! operators (the same expansion: they differ by the NUFFTs' errors only)
//! and against float64 direct sums of the exact model (within the
//! approximation tolerance); 2D and 3D, odd and singleton sizes, masked
//! voxels of an oblique lattice in random order, several coils, float32 and
//! float64; chunked coils ≡ unchunked (forced by `HORECON_CUDA_FAST_COILS`);
//! adjointness; CG on the device against the CPU fast CG. Fresh random
//! inputs, seed printed (HORECON_TEST_SEED replays). Without a GPU every
//! test prints one "skipped" line.

mod common;

use common::{
    assert_honest, case_count, higher_order_problem, inner, normal_f64, random_compressed_problem,
    random_higher_order_problem, redundant_coils, rel_error, to_c64, Kind, PooledError, Problem,
    Rng,
};
use horecon::{BackendKind, CgOptions, Complex32, Options, Precision, Regularizer};
use std::sync::{Mutex, MutexGuard};

/// Serialises the tests: some set the operator's environment knobs.
static ENV: Mutex<()> = Mutex::new(());

/// A test's start: the environment lock and its random generator (seed
/// printed), or `None` after one "skipped" line without a usable GPU.
fn on_the_device(test: &str) -> Option<(MutexGuard<'static, ()>, Rng)> {
    let env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(reason) = horecon::backend::cuda::context::probe() {
        eprintln!("{test}: skipped: no CUDA device ({reason})");
        return None;
    }
    if let Err(reason) = horecon::backend::cuda::fft::available() {
        eprintln!("{test}: skipped: {reason}");
        return None;
    }
    Some((env, Rng::fresh(test)))
}

/// A random higher-order problem (common::higher_order): 16 solid harmonics
/// with off-resonance on the grid of `dims`, or 9 on a masked oblique lattice
/// (about 70 % of its voxels, in random order).
fn problem(rng: &mut Rng, dims: [usize; 3], coils: usize, samples: usize, masked: bool) -> Problem {
    let kind = if masked { Kind::Masked } else { Kind::Grid };
    higher_order_problem(rng, kind, dims, coils, samples)
}

fn fast_plan(p: &Problem, backend: BackendKind, precision: Precision, tol: f64) -> horecon::Plan {
    let mut plan = p.plan_with(Options {
        backend,
        precision,
        ..Options::default()
    });
    plan.set_approximation(tol).expect("set_approximation");
    plan
}

/// E x, Eᴴ d, EᴴE x and EᴴWE x of `plan`.
fn apply_all(
    plan: &horecon::Plan,
    x: &[Complex32],
    d: &[Complex32],
    w: &[f32],
) -> [Vec<Complex32>; 4] {
    let mut y = vec![Complex32::default(); d.len()];
    plan.forward(x, &mut y).unwrap();
    let mut z = vec![Complex32::default(); x.len()];
    plan.adjoint(d, &mut z).unwrap();
    let mut e = vec![Complex32::default(); x.len()];
    plan.normal(x, &mut e).unwrap();
    let mut ew = vec![Complex32::default(); x.len()];
    plan.operator()
        .unwrap()
        .normal(x, &mut ew, Some(w))
        .unwrap();
    [y, z, e, ew]
}

/// Random images and data per comparison in [`device_matches_cpu`] (one
/// image of a plan with very few voxels can land far in its error's tail).
const IMAGES: usize = 4;

/// The device and CPU fast plans of `p` at `tol` in `precision` compared
/// (`name` names the case): active on both or on neither (`None`, the reason
/// printed), device-resident, the same rank; the device plan's E, Eᴴ, EᴴE
/// and EᴴWE within tol/2 of the CPU plan's on every image (both carry NUFFT
/// errors of at most a quarter of the tolerance) and, by their relative RMS
/// error over [`IMAGES`] images, within tol of float64 direct sums, with the
/// certificate within 3× of that error. The rank where active.
fn device_matches_cpu(
    rng: &mut Rng,
    p: &Problem,
    precision: Precision,
    tol: f64,
    name: &str,
) -> Option<usize> {
    let cpu = fast_plan(p, BackendKind::Cpu, precision, tol);
    let gpu = fast_plan(p, BackendKind::Cuda, precision, tol);
    let (on_cpu, info) = (
        cpu.approximation_info().unwrap(),
        gpu.approximation_info().unwrap(),
    );
    assert_eq!(
        info.active, on_cpu.active,
        "{name}: {} / {}",
        info.reason, on_cpu.reason
    );
    if !info.active {
        eprintln!("{name}: inactive on both: {}", info.reason);
        // The tests' problems all lie on a lattice.
        assert!(
            !info.reason.contains("lattice"),
            "{name}: inactive: {}",
            info.reason
        );
        return None;
    }
    let backend = gpu.operator().unwrap().backend_name();
    assert!(backend.contains("on the device"), "{name}: {backend}");
    assert_eq!(info.rank, on_cpu.rank, "{name}");
    let (n, m, l) = (p.voxels(), p.samples, p.coils);
    let whats = ["E", "EH", "EHE", "EHWE"];
    // Per operator: the largest difference from the CPU plan and the error
    // against float64 pooled over the images.
    let mut vs_cpu = [0.0f64; 4];
    let mut pooled = [PooledError::default(); 4];
    for _ in 0..IMAGES {
        let x = rng.complex(n);
        let d = rng.complex(m * l);
        let w: Vec<f32> = (0..m).map(|_| rng.range(0.0, 2.0) as f32).collect();
        let on_gpu = apply_all(&gpu, &x, &d, &w);
        let from_cpu = apply_all(&cpu, &x, &d, &w);
        let exact = [
            p.forward_f64(&x),
            p.adjoint_f64(&d),
            normal_f64(p, &x, None),
            normal_f64(p, &x, Some(&w)),
        ];
        for i in 0..4 {
            let e = rel_error(&on_gpu[i], &to_c64(&from_cpu[i]));
            assert!(e <= tol / 2.0, "{name} {}: vs CPU {e:.3e}", whats[i]);
            vs_cpu[i] = vs_cpu[i].max(e);
            pooled[i].add(&on_gpu[i], &exact[i]);
        }
    }
    let vs_exact = pooled.map(|e| e.relative());
    let mut line = format!(
        "{name}: K {} certificate {:.2e} (CPU plan {:.2e})",
        info.rank, info.estimated_error, on_cpu.estimated_error
    );
    for (i, what) in whats.iter().enumerate() {
        line += &format!(", {what} {:.1e} / {:.1e}", vs_cpu[i], vs_exact[i]);
    }
    eprintln!("{line} (vs CPU / vs exact)");
    for (i, what) in whats.iter().enumerate() {
        assert!(
            vs_exact[i] <= tol,
            "{name} {what}: vs exact {:.3e}",
            vs_exact[i]
        );
    }
    // The device plan's certificate against its own error (not the CPU
    // plan's: a one-voxel plan's CPU NUFFT is exact to rounding, its device
    // NUFFT errs within its share of the tolerance).
    assert_honest(info.estimated_error, vs_exact[0].max(vs_exact[1]), name);
    Some(info.rank)
}

#[test]
fn the_device_fast_path_equals_the_cpu_one_and_meets_the_tolerance() {
    let Some((_env, mut rng)) = on_the_device("the_device_fast_path_equals_the_cpu_one") else {
        return;
    };
    // (dims, coils, masked, precision, tolerance)
    let cases = [
        ([17, 15, 1], 3, false, Precision::Accurate, 1e-3),
        ([9, 7, 5], 2, false, Precision::Accurate, 1e-3),
        ([9, 8, 6], 4, true, Precision::Accurate, 1e-2),
        ([5, 1, 3], 1, false, Precision::Accurate, 1e-3),
        ([11, 9, 3], 3, false, Precision::Double, 1e-4),
    ];
    for (dims, coils, masked, precision, tol) in cases {
        let samples = rng.int(300, 700);
        let p = problem(&mut rng, dims, coils, samples, masked);
        let name =
            format!("{dims:?} L {coils} M {samples} masked {masked} {precision:?} tol {tol:.0e}");
        let rank = device_matches_cpu(&mut rng, &p, precision, tol, &name);
        assert!(rank.is_some(), "{name}: inactive");
    }
}

/// Redundant coils (12 of numerical rank ~4): both backends run the NUFFTs
/// on the same virtual coils and agree as [`device_matches_cpu`] asks (E,
/// Eᴴ, EᴴE and EᴴWE, where the device keeps the virtual coils); then
/// `HORECON_TEST_CASES` (3 by default) random kinds, sizes, tolerances and
/// 6–16 such coils.
#[test]
fn compressed_coils_on_the_device_match_the_cpu() {
    let Some((_env, mut rng)) = on_the_device("compressed_coils_on_the_device_match_the_cpu")
    else {
        return;
    };
    for (dims, masked, precision, tol, small) in [
        ([17, 15, 1], false, Precision::Accurate, 1e-3, 1e-4),
        ([9, 8, 6], true, Precision::Accurate, 1e-2, 1e-3),
        ([11, 9, 3], false, Precision::Double, 1e-4, 1e-5),
    ] {
        let samples = rng.int(300, 700);
        let four = problem(&mut rng, dims, 4, samples, masked);
        let p = redundant_coils(&mut rng, &four, 12, small);
        let name = format!("{dims:?} L 12 M {samples} masked {masked} {precision:?} tol {tol:.0e}");
        let gpu = fast_plan(&p, BackendKind::Cuda, precision, tol);
        let backend = gpu.operator().unwrap().backend_name();
        assert!(backend.contains("virtual coils of 12"), "{name}: {backend}");
        let rank = device_matches_cpu(&mut rng, &p, precision, tol, &name);
        assert!(rank.is_some(), "{name}: inactive");
        // Split by coils over two parts (on this GPU), the parts keep the
        // plan's coils: no compression, and E within the tolerance of the
        // compressed plan's.
        std::env::set_var("HORECON_CUDA_TEST_PARTS", "2");
        let split = fast_plan(&p, BackendKind::Cuda, precision, tol);
        let split_name = split.operator().unwrap().backend_name();
        std::env::remove_var("HORECON_CUDA_TEST_PARTS");
        assert!(
            split_name.contains("by coils") && !split_name.contains("virtual"),
            "{name}: {split_name}"
        );
        let x = rng.complex(p.voxels());
        let mut compressed = vec![Complex32::default(); p.samples * p.coils];
        let mut kept = compressed.clone();
        gpu.forward(&x, &mut compressed).unwrap();
        split.forward(&x, &mut kept).unwrap();
        let e = rel_error(&kept, &to_c64(&compressed));
        assert!(e <= tol, "{name}: split E vs compressed {e:.3e}");
    }
    for case in 0..case_count(3) {
        let (p, tol, name) = random_compressed_problem(&mut rng, case);
        device_matches_cpu(&mut rng, &p, Precision::Accurate, tol, &name);
    }
}

/// Random kinds, sizes (odd and singleton axes), coil and sample counts,
/// tolerances and precisions (`common::random_higher_order_problem`;
/// `HORECON_TEST_CASES` of them, 12 by default), compared as
/// [`device_matches_cpu`] does; plans the fast path cannot serve must be
/// inactive on both backends.
#[test]
fn random_plans_on_the_device_match_the_cpu_ones() {
    let Some((_env, mut rng)) = on_the_device("random_plans_on_the_device_match_the_cpu_ones")
    else {
        return;
    };
    for case in 0..case_count(12) {
        let (kind, p, tol) = random_higher_order_problem(&mut rng);
        let precision = if rng.uniform() < 0.25 {
            Precision::Double
        } else {
            Precision::Accurate
        };
        let name = format!(
            "case {case}: {kind:?} {:?} L {} M {} {precision:?} tol {tol:.1e}",
            p.dims, p.coils, p.samples
        );
        device_matches_cpu(&mut rng, &p, precision, tol, &name);
    }
}

/// Plans of one voxel (and one voxel row): K = 1, and the device plan's
/// certificate must still measure its own error.
#[test]
fn single_voxel_plans_on_the_device() {
    let Some((_env, mut rng)) = on_the_device("single_voxel_plans_on_the_device") else {
        return;
    };
    for (kind, dims, coils) in [
        (Kind::Oblique, [1, 1, 1], 2),
        (Kind::Grid, [1, 1, 1], 1),
        (Kind::Grid, [1, 1, 1], 3),
        (Kind::Oblique, [1, 5, 1], 2),
    ] {
        for tol in [5.7e-3, 1e-3, 1e-4] {
            let samples = rng.int(100, 400);
            let p = higher_order_problem(&mut rng, kind, dims, coils, samples);
            let name = format!("{kind:?} {dims:?} L {coils} M {samples} tol {tol:.1e}");
            device_matches_cpu(&mut rng, &p, Precision::Accurate, tol, &name);
        }
    }
}

#[test]
fn chunked_coils_equal_unchunked_and_the_host_path_switch_works() {
    let Some((_env, mut rng)) = on_the_device("chunked_coils_equal_unchunked") else {
        return;
    };
    for masked in [false, true] {
        let p = problem(&mut rng, [10, 9, 4], 5, 400, masked);
        let whole = fast_plan(&p, BackendKind::Cuda, Precision::Accurate, 1e-3);
        let x = rng.complex(p.voxels());
        let d = rng.complex(p.samples * p.coils);
        let w: Vec<f32> = (0..p.samples).map(|_| rng.range(0.0, 2.0) as f32).collect();
        let reference = apply_all(&whole, &x, &d, &w);
        assert!(whole
            .operator()
            .unwrap()
            .backend_name()
            .contains("1 chunk(s) of 5 coil(s)"));
        // 5 coils by at most 2: chunks of 2, 2 and 1 (a second NUFFT pair).
        std::env::set_var("HORECON_CUDA_FAST_COILS", "2");
        let chunked = fast_plan(&p, BackendKind::Cuda, Precision::Accurate, 1e-3);
        let got = apply_all(&chunked, &x, &d, &w);
        std::env::remove_var("HORECON_CUDA_FAST_COILS");
        let name = chunked.operator().unwrap().backend_name();
        assert!(name.contains("3 chunk(s) of 2 coil(s)"), "{name}");
        // The earlier path (CPU-side products, NUFFTs through the host interface).
        std::env::set_var("HORECON_CUDA_FAST_DEVICE", "0");
        let host = fast_plan(&p, BackendKind::Cuda, Precision::Accurate, 1e-3);
        let via_host = apply_all(&host, &x, &d, &w);
        std::env::remove_var("HORECON_CUDA_FAST_DEVICE");
        let host_name = host.operator().unwrap().backend_name();
        assert!(!host_name.contains("on the device"), "{host_name}");
        for (i, what) in ["E", "EH", "EHE", "EHWE"].iter().enumerate() {
            let chunks = rel_error(&got[i], &to_c64(&reference[i]));
            let paths = rel_error(&via_host[i], &to_c64(&reference[i]));
            eprintln!("masked {masked} {what}: chunked vs whole {chunks:.2e}, host path vs device {paths:.2e}");
            // The same transforms in other batches: float32 rounding only.
            assert!(
                chunks <= 1e-5,
                "masked {masked} {what}: chunked {chunks:.3e}"
            );
            assert!(
                paths <= 1e-5,
                "masked {masked} {what}: host path {paths:.3e}"
            );
        }
    }
}

#[test]
fn the_device_pair_is_adjoint() {
    let Some((_env, mut rng)) = on_the_device("the_device_pair_is_adjoint") else {
        return;
    };
    for (dims, masked) in [([11, 9, 3], false), ([8, 7, 6], true), ([1, 6, 1], false)] {
        let p = problem(&mut rng, dims, 3, 400, masked);
        let plan = fast_plan(&p, BackendKind::Cuda, Precision::Accurate, 1e-3);
        let x = rng.complex(p.voxels());
        let d = rng.complex(p.samples * p.coils);
        let mut ex = vec![Complex32::default(); d.len()];
        plan.forward(&x, &mut ex).unwrap();
        let mut ehd = vec![Complex32::default(); x.len()];
        plan.adjoint(&d, &mut ehd).unwrap();
        let (a, b) = (inner(&ex, &d), inner(&x, &ehd));
        // Relative to ‖Ex‖·‖d‖ (Cauchy–Schwarz): <Ex, d> of random vectors
        // is ~1/√(ML) of it and may cancel further, which float32 rounding
        // of the two sums does not; a wrong adjoint is off by O(1/√(ML)).
        let scale = (inner(&ex, &ex).re * inner(&d, &d).re).sqrt();
        eprintln!("{dims:?} masked {masked}: <Ex,d> {a:.6e} <x,EHd> {b:.6e}, ‖Ex‖‖d‖ {scale:.3e}");
        assert!(
            (a - b).norm() <= 1e-5 * scale,
            "{dims:?}: <Ex,d> {a} vs <x,EHd> {b}"
        );
    }
}

#[test]
fn cg_on_the_device_matches_the_cpu_fast_cg() {
    let Some((_env, mut rng)) = on_the_device("cg_on_the_device_matches_the_cpu_fast_cg") else {
        return;
    };
    let p = problem(&mut rng, [13, 12, 3], 4, 800, false);
    let truth = rng.complex(p.voxels());
    let data: Vec<Complex32> = p
        .forward_f64(&truth)
        .iter()
        .map(|c| Complex32::new(c.re as f32, c.im as f32))
        .collect();
    let w: Vec<f32> = (0..p.samples).map(|_| rng.range(0.5, 1.5) as f32).collect();
    let options = CgOptions {
        max_iterations: 40,
        tolerance: 1e-7,
        regularizer: Regularizer::Tikhonov,
        lambda: 0.1 * (p.samples * p.coils) as f64,
        sample_weights: Some(&w),
        ..CgOptions::default()
    };
    let mut on_cpu = vec![Complex32::default(); p.voxels()];
    fast_plan(&p, BackendKind::Cpu, Precision::Accurate, 1e-3)
        .cg(&data, &options, &mut on_cpu)
        .unwrap();
    let mut on_gpu = vec![Complex32::default(); p.voxels()];
    fast_plan(&p, BackendKind::Cuda, Precision::Accurate, 1e-3)
        .cg(&data, &options, &mut on_gpu)
        .unwrap();
    let e = rel_error(&on_gpu, &to_c64(&on_cpu));
    eprintln!("CG fast on the GPU vs on the CPU: {e:.2e}");
    assert!(e <= 1e-3, "CG images differ by {e:.3e}");
}
