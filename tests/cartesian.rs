//! Cartesian FFT mode (issue 5 §3): E, Eᴴ and EᴴWE against float64 direct
//! sums of MODEL.md's E for the mask's trajectory and against the exact
//! (DFT) path of a plan with that trajectory; 2D and 3D, odd and even
//! sizes, off-centre fields of view, coils, every precision; adjointness;
//! CG with Laplace and TV against the DFT path; the error paths.

#![allow(clippy::needless_range_loop)]
mod common;
use common::*;
use horecon::{BackendKind, CgOptions, Complex32, Options, Plan, Precision, Regularizer, Status};
use std::f64::consts::PI;

const SHAPES: [[usize; 3]; 7] = [
    [6, 5, 1],
    [7, 4, 1],
    [8, 8, 1],
    [4, 3, 5],
    [5, 6, 3],
    [3, 5, 2],
    [1, 6, 5],
];

const PRECISIONS: [(Precision, f64); 3] = [
    (Precision::Accurate, 1e-5),
    (Precision::Fast, 1e-3),
    (Precision::Double, 1e-7),
];

fn options(precision: Precision) -> Options {
    Options {
        backend: BackendKind::Cpu,
        precision,
        num_threads: 2,
        ..Options::default()
    }
}

fn new_plan(c: &Cart, precision: Precision) -> Plan {
    let p = &c.problem;
    let [nx, ny, nz] = p.dims;
    Plan::new(
        options(precision),
        nx as i64,
        ny as i64,
        nz as i64,
        p.coils as i64,
        p.samples as i64,
    )
    .expect("plan")
}

fn cartesian_plan(c: &Cart, precision: Precision) -> Plan {
    let mut plan = new_plan(c, precision);
    plan.set_grid_positions(c.fov, c.center).expect("grid");
    plan.set_cartesian(&c.mask).expect("cartesian");
    plan.set_sensitivities(c.problem.sensitivities.as_deref())
        .expect("sensitivities");
    plan
}

/// The same E through the exact phase-sum path: grid positions and the trajectory.
fn dft_plan(c: &Cart, precision: Precision) -> Plan {
    let mut plan = new_plan(c, precision);
    plan.set_grid_positions(c.fov, c.center).expect("grid");
    plan.set_trajectory(3, &c.problem.coefficients)
        .expect("trajectory");
    plan.set_sensitivities(c.problem.sensitivities.as_deref())
        .expect("sensitivities");
    plan
}

#[test]
fn operators_match_the_direct_sum_and_the_dft_path() {
    let mut rng = Rng::fresh("operators_match_the_direct_sum_and_the_dft_path");
    for (s, dims) in SHAPES.into_iter().enumerate() {
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
        for (precision, tolerance) in PRECISIONS {
            let plan = cartesian_plan(&c, precision);
            assert!(plan.cartesian().is_some());
            let dft = dft_plan(&c, precision);
            let mut d = vec![Complex32::default(); p.samples * coils];
            let mut d_dft = d.clone();
            plan.forward(&image, &mut d).unwrap();
            dft.forward(&image, &mut d_dft).unwrap();
            let mut x = vec![Complex32::default(); p.voxels()];
            let mut x_dft = x.clone();
            plan.adjoint(&data, &mut x).unwrap();
            dft.adjoint(&data, &mut x_dft).unwrap();
            let mut y = x.clone();
            let mut y_dft = x.clone();
            plan.normal(&image, &mut y).unwrap();
            dft.normal(&image, &mut y_dft).unwrap();
            let mut yw = x.clone();
            plan.operator()
                .unwrap()
                .normal(&image, &mut yw, Some(&weights))
                .unwrap();
            let errors = [
                ("E", rel_error(&d, &d_ref), rel_error(&d, &to_c64(&d_dft))),
                ("EH", rel_error(&x, &x_ref), rel_error(&x, &to_c64(&x_dft))),
                ("EHE", rel_error(&y, &n_ref), rel_error(&y, &to_c64(&y_dft))),
                ("EHWE", rel_error(&yw, &nw_ref), 0.0),
            ];
            for (what, direct, vs_dft) in errors {
                eprintln!("{dims:?} L={coils} {precision:?} {what}: vs f64 {direct:.2e}, vs DFT path {vs_dft:.2e}");
                assert!(
                    direct <= tolerance,
                    "{dims:?} {precision:?} {what}: {direct:e}"
                );
                assert!(
                    vs_dft <= 2.0 * tolerance,
                    "{dims:?} {precision:?} {what} vs DFT: {vs_dft:e}"
                );
            }
        }
    }
}

#[test]
fn the_phase_model_is_the_masks_trajectory() {
    let mut rng = Rng::fresh("the_phase_model_is_the_masks_trajectory");
    let c = random_cart(&mut rng, [5, 4, 3], 2);
    let plan = cartesian_plan(&c, Precision::Double);
    let features = plan.model().features().unwrap();
    let m = c.problem.samples;
    let cycles = 1.0 / (2.0 * PI);
    for (f, k) in features.sample.iter().zip(&c.problem.coefficients) {
        assert!((f - k * cycles).abs() <= 1e-12 * (1.0 + (k * cycles).abs()));
    }
    assert_eq!(features.sample.len(), 3 * m);
}

#[test]
fn forward_and_adjoint_are_adjoint() {
    let mut rng = Rng::fresh("forward_and_adjoint_are_adjoint");
    for dims in [[9, 6, 1], [6, 5, 4]] {
        let c = random_cart(&mut rng, dims, 3);
        for (precision, tolerance) in PRECISIONS {
            let plan = cartesian_plan(&c, precision);
            let x = rng.complex(c.problem.voxels());
            let d = rng.complex(c.problem.samples * 3);
            let mut ex = vec![Complex32::default(); d.len()];
            let mut ehd = vec![Complex32::default(); x.len()];
            plan.forward(&x, &mut ex).unwrap();
            plan.adjoint(&d, &mut ehd).unwrap();
            let (a, b) = (inner(&ex, &d), inner(&x, &ehd));
            let err = (a - b).norm() / a.norm();
            assert!(
                err <= tolerance.max(1e-6),
                "{dims:?} {precision:?}: {err:e}"
            );
        }
    }
}

#[test]
fn cg_with_laplace_and_tv_matches_the_dft_path() {
    let mut rng = Rng::fresh("cg_with_laplace_and_tv_matches_the_dft_path");
    for dims in [[8, 7, 1], [5, 4, 3]] {
        let c = random_cart(&mut rng, dims, 2);
        let data = rng.complex(c.problem.samples * 2);
        for regularizer in [Regularizer::Laplace, Regularizer::TotalVariation] {
            let cg = CgOptions {
                max_iterations: 15,
                tolerance: 0.0,
                regularizer,
                lambda: 0.05,
                reweightings: 3,
                epsilon: 1e-2,
                sigma: 0.5,
                ..CgOptions::default()
            };
            // Double: identical to float32 output rounding (the strict check). Accurate:
            // both paths in float32 CG, whose rounding the reweighting of these small,
            // ill-conditioned random problems amplifies: 1200 comparisons gave a median
            // of 1e-5, 15 above 1e-2 and a maximum of 5.2e-2; a wrong operator
            // differs by O(1).
            for (precision, tolerance) in [(Precision::Double, 1e-6), (Precision::Accurate, 0.25)] {
                let mut a = vec![Complex32::default(); c.problem.voxels()];
                let mut b = a.clone();
                cartesian_plan(&c, precision)
                    .cg(&data, &cg, &mut a)
                    .unwrap();
                dft_plan(&c, precision).cg(&data, &cg, &mut b).unwrap();
                let err = rel_error(&a, &to_c64(&b));
                let norm = inner(&b, &b).re.sqrt();
                eprintln!("{dims:?} {regularizer:?} {precision:?}: {err:.2e} (|x| = {norm:.3e})");
                assert!(norm > 0.0, "{dims:?} {regularizer:?}: zero solution");
                assert!(
                    err < tolerance,
                    "{dims:?} {regularizer:?} {precision:?}: {err:e}"
                );
            }
        }
    }
}

#[test]
fn set_positions_on_an_axis_aligned_grid_works_and_off_grid_is_refused() {
    let mut rng = Rng::fresh("set_positions_on_an_axis_aligned_grid");
    let c = random_cart(&mut rng, [6, 5, 3], 1);
    let reference = cartesian_plan(&c, Precision::Double);
    let mut plan = new_plan(&c, Precision::Double);
    plan.set_positions(&c.problem.positions).unwrap();
    plan.set_cartesian(&c.mask).unwrap();
    let x = rng.complex(c.problem.voxels());
    let mut a = vec![Complex32::default(); c.problem.samples];
    let mut b = a.clone();
    plan.forward(&x, &mut a).unwrap();
    reference.forward(&x, &mut b).unwrap();
    assert!(rel_error(&a, &to_c64(&b)) < 1e-7);
    // A rotated grid is a lattice but not axis-aligned.
    let n = c.problem.voxels();
    let mut rotated = c.problem.positions.clone();
    for v in 0..n {
        let (x, y) = (rotated[v], rotated[n + v]);
        rotated[v] = 0.8 * x - 0.6 * y;
        rotated[n + v] = 0.6 * x + 0.8 * y;
    }
    plan.set_positions(&rotated).unwrap();
    assert!(plan.cartesian().is_none());
    let e = plan.set_cartesian(&c.mask).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    assert!(e.message.contains("axis-aligned"), "{}", e.message);
    // A jittered grid.
    let mut jittered = c.problem.positions.clone();
    jittered[7] += 1e-4;
    plan.set_positions(&jittered).unwrap();
    let e = plan.set_cartesian(&c.mask).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
}

#[test]
fn bad_inputs_are_refused_with_their_reason() {
    let mut rng = Rng::fresh("bad_inputs_are_refused_with_their_reason");
    let c = random_cart(&mut rng, [6, 5, 1], 1);
    let m = c.problem.samples;
    // No grid yet.
    let mut plan = new_plan(&c, Precision::Accurate);
    let e = plan.set_cartesian(&c.mask).unwrap_err();
    assert_eq!(e.status, Status::IncompletePlan, "{}", e.message);
    plan.set_grid_positions(c.fov, c.center).unwrap();
    // Mask of the wrong size.
    let e = plan.set_cartesian(&c.mask[1..]).unwrap_err();
    assert_eq!(e.status, Status::SizeMismatch, "{}", e.message);
    assert!(e.message.contains("mask"), "{}", e.message);
    // Number of sampled points ≠ nsamples: the message names both.
    let mut more = c.mask.clone();
    let free = more.iter().position(|&b| b == 0).unwrap();
    more[free] = 3;
    let e = plan.set_cartesian(&more).unwrap_err();
    assert_eq!(e.status, Status::SizeMismatch, "{}", e.message);
    assert!(
        e.message.contains(&format!("{}", m + 1)) && e.message.contains(&format!("{m}")),
        "{}",
        e.message
    );
    // Off-resonance, before and after.
    let n = c.problem.voxels();
    let omega: Vec<f64> = (0..n).map(|_| rng.range(-50.0, 50.0)).collect();
    let times: Vec<f64> = (0..m).map(|_| rng.range(0.0, 0.01)).collect();
    plan.set_trajectory(3, &c.problem.coefficients).unwrap();
    plan.set_off_resonance(Some((&omega, &times))).unwrap();
    let e = plan.set_cartesian(&c.mask).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    assert!(e.message.contains("off-resonance"), "{}", e.message);
    plan.set_off_resonance(None).unwrap();
    plan.set_cartesian(&c.mask).unwrap();
    let e = plan.set_off_resonance(Some((&omega, &times))).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    assert!(plan.cartesian().is_some());
    // A later phase-model setter leaves Cartesian mode.
    plan.set_trajectory(3, &c.problem.coefficients).unwrap();
    assert!(plan.cartesian().is_none());
    // CUDA builds its own Cartesian operator (tests/cuda_fft.rs); without a
    // GPU the request is BACKEND_UNAVAILABLE, never a panic.
    plan.set_cartesian(&c.mask).unwrap();
    let cartesian = std::sync::Arc::new(plan.cartesian().unwrap().clone());
    let pool = std::sync::Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap(),
    );
    let built = horecon::backend::build_cartesian(
        BackendKind::Cuda,
        cartesian,
        None,
        plan.sizes(),
        &options(Precision::Accurate),
        pool,
    );
    match built {
        Ok(_) => assert!(horecon::backend::cuda_device_count() > 0),
        Err(e) => assert_eq!(e.status, Status::BackendUnavailable, "{}", e.message),
    }
}

/// float32 FFTs on larger grids stay in the accurate class: against the
/// float64 direct sum (2D) and against the float64 FFT path (3D, Kim-like shape).
#[test]
fn float32_ffts_are_accurate_on_larger_grids() {
    let mut rng = Rng::fresh("float32_ffts_are_accurate_on_larger_grids");
    let c = random_cart(&mut rng, [96, 81, 1], 2);
    let image = rng.complex(c.problem.voxels());
    let d_ref = c.problem.forward_f64(&image);
    let plan = cartesian_plan(&c, Precision::Accurate);
    let mut d = vec![Complex32::default(); d_ref.len()];
    plan.forward(&image, &mut d).unwrap();
    let mut x = vec![Complex32::default(); image.len()];
    plan.adjoint(&to_c32(&d_ref), &mut x).unwrap();
    let x_ref = c.problem.adjoint_f64(&to_c32(&d_ref));
    let (e1, e2) = (rel_error(&d, &d_ref), rel_error(&x, &x_ref));
    eprintln!("96x81 accurate: E {e1:.2e}, EH {e2:.2e}");
    assert!(e1 <= 1e-5 && e2 <= 1e-5, "{e1:e} {e2:e}");

    let c = random_cart(&mut rng, [64, 40, 20], 2);
    let image = rng.complex(c.problem.voxels());
    let (single, double) = (
        cartesian_plan(&c, Precision::Accurate),
        cartesian_plan(&c, Precision::Double),
    );
    let mut y = vec![Complex32::default(); image.len()];
    let mut y_ref = y.clone();
    single.normal(&image, &mut y).unwrap();
    double.normal(&image, &mut y_ref).unwrap();
    let e3 = rel_error(&y, &to_c64(&y_ref));
    eprintln!("64x40x20 accurate EHE vs double: {e3:.2e}");
    assert!(e3 <= 1e-5, "{e3:e}");
}

/// Masks of whole readout lines (x fully sampled, as Kim et al.'s) take the
/// normal operator's slab path (no x transforms): same values.
#[test]
fn readout_line_masks_match_the_direct_sum() {
    let mut rng = Rng::fresh("readout_line_masks_match_the_direct_sum");
    for (dims, coils) in [
        ([6, 5, 4], 2),
        ([7, 4, 3], 1),
        ([5, 6, 1], 3),
        ([19, 3, 4], 2),
    ] {
        let mut c = random_cart(&mut rng, dims, coils);
        // Rebuild the mask and trajectory from whole x lines.
        let [nx, ny, nz] = dims;
        let mut mask = vec![0u8; nx * ny * nz];
        for line in 0..ny * nz {
            if line == 0 || rng.uniform() < 0.5 {
                mask[nx * line..nx * (line + 1)].fill(1);
            }
        }
        let points: Vec<usize> = (0..mask.len()).filter(|&p| mask[p] != 0).collect();
        let m = points.len();
        let mut k = vec![0.0; 3 * m];
        for (j, &p) in points.iter().enumerate() {
            let i = [p % nx, (p / nx) % ny, p / (nx * ny)];
            for a in 0..3 {
                if dims[a] > 1 {
                    k[a * m + j] = 2.0 * PI * (i[a] as f64 - (dims[a] / 2) as f64) / c.fov[a];
                }
            }
        }
        c.mask = mask;
        c.problem.samples = m;
        c.problem.coefficients = k;
        let image = rng.complex(c.problem.voxels());
        let reference = c
            .problem
            .adjoint_f64(&to_c32(&c.problem.forward_f64(&image)));
        for (precision, tolerance) in PRECISIONS {
            let plan = cartesian_plan(&c, precision);
            let mut y = vec![Complex32::default(); image.len()];
            plan.normal(&image, &mut y).unwrap();
            let err = rel_error(&y, &reference);
            eprintln!("{dims:?} lines {precision:?}: {err:.2e}");
            assert!(
                err <= tolerance.min(1e-5),
                "{dims:?} {precision:?}: {err:e}"
            );
        }
    }
}

/// With Toeplitz enabled too, Cartesian mode's exact FFTs serve normal and cg.
#[test]
fn cartesian_mode_takes_precedence_over_toeplitz() {
    let mut rng = Rng::fresh("cartesian_mode_takes_precedence_over_toeplitz");
    let c = random_cart(&mut rng, [6, 5, 3], 2);
    let plain = cartesian_plan(&c, Precision::Accurate);
    let mut toeplitz = cartesian_plan(&c, Precision::Accurate);
    toeplitz.set_toeplitz(true, 0).unwrap();
    let x = rng.complex(c.problem.voxels());
    let mut a = vec![Complex32::default(); x.len()];
    let mut b = a.clone();
    plain.normal(&x, &mut a).unwrap();
    toeplitz.normal(&x, &mut b).unwrap();
    assert_eq!(a, b);
}
