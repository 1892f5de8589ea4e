//! The operators against float64 direct sums of MODEL.md on fresh random
//! problems (seed printed), each precision mode against its accuracy class.

#![allow(clippy::needless_range_loop)]
mod common;
use common::*;
use horecon::{Complex32, Precision};

const CLASSES: [(Precision, f64); 3] = [
    (Precision::Accurate, 1e-5),
    (Precision::Fast, 1e-3),
    (Precision::Double, 1e-7),
];

#[test]
fn forward_and_adjoint_match_float64_direct_sum() {
    let mut rng = Rng::fresh("forward_and_adjoint_match_float64_direct_sum");
    for round in 0..12 {
        let problem = Problem::random(&mut rng, 600, 300, 60.0);
        let image = rng.complex(problem.voxels());
        let data = rng.complex(problem.samples * problem.coils);
        let forward_ref = problem.forward_f64(&image);
        let adjoint_ref = problem.adjoint_f64(&data);
        for (precision, bound) in CLASSES {
            let plan = problem.plan(precision);
            let mut d = vec![Complex32::default(); data.len()];
            plan.forward(&image, &mut d).unwrap();
            let mut x = vec![Complex32::default(); image.len()];
            plan.adjoint(&data, &mut x).unwrap();
            let (ef, ea) = (rel_error(&d, &forward_ref), rel_error(&x, &adjoint_ref));
            eprintln!(
                "round {round} {:?} dims {:?} M {} L {} B {} off-res {}: forward {ef:.2e} adjoint {ea:.2e}",
                precision,
                problem.dims,
                problem.samples,
                problem.coils,
                problem.terms,
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
fn adjointness_and_normal() {
    let mut rng = Rng::fresh("adjointness_and_normal");
    for _ in 0..8 {
        let problem = Problem::random(&mut rng, 500, 250, 40.0);
        let x = rng.complex(problem.voxels());
        let d = rng.complex(problem.samples * problem.coils);
        for (precision, bound) in CLASSES {
            let plan = problem.plan(precision);
            let mut ex = vec![Complex32::default(); d.len()];
            let mut ehd = vec![Complex32::default(); x.len()];
            plan.forward(&x, &mut ex).unwrap();
            plan.adjoint(&d, &mut ehd).unwrap();
            // ⟨Ex, d⟩ = ⟨x, Eᴴd⟩, relative to ‖Ex‖·‖d‖.
            let (lhs, rhs) = (inner(&ex, &d), inner(&x, &ehd));
            let scale = inner(&ex, &ex).re.sqrt() * inner(&d, &d).re.sqrt();
            let gap = (lhs - rhs).norm() / scale;
            assert!(gap <= bound, "{precision:?}: adjointness gap {gap:e}");
            // normal = Eᴴ(E x)
            let mut normal = vec![Complex32::default(); x.len()];
            plan.normal(&x, &mut normal).unwrap();
            let mut composed = vec![Complex32::default(); x.len()];
            plan.adjoint(&ex, &mut composed).unwrap();
            let err = rel_error(&normal, &to_c64(&composed));
            assert!(
                err <= 2.0 * bound,
                "{precision:?}: normal vs adjoint(forward) {err:e}"
            );
        }
    }
}

#[test]
fn sign_convention_single_voxel() {
    // One voxel at r0, one sample with k: d = exp(+i k·r0) (MODEL.md).
    let mut rng = Rng::fresh("sign_convention_single_voxel");
    let r0 = [
        rng.range(-0.1, 0.1),
        rng.range(-0.1, 0.1),
        rng.range(-0.1, 0.1),
    ];
    let k = [
        rng.range(-500.0, 500.0),
        rng.range(-500.0, 500.0),
        rng.range(-500.0, 500.0),
    ];
    for (precision, bound) in CLASSES {
        let mut plan = horecon::Plan::new(
            horecon::Options {
                precision,
                ..Default::default()
            },
            1,
            1,
            1,
            1,
            1,
        )
        .unwrap();
        plan.set_positions(&r0).unwrap();
        plan.set_trajectory(3, &k).unwrap();
        let mut d = [Complex32::default()];
        plan.forward(&[Complex32::new(1.0, 0.0)], &mut d).unwrap();
        let phase: f64 = (0..3).map(|i| k[i] * r0[i]).sum();
        let expect = num_complex::Complex64::from_polar(1.0, phase);
        let err = rel_error(&d, &[expect]);
        assert!(
            err <= bound,
            "{precision:?}: d = {:?}, expected exp(+i·{phase}) = {expect:?}",
            d[0]
        );
        // and the adjoint conjugates it
        let mut x = [Complex32::default()];
        plan.adjoint(&[Complex32::new(1.0, 0.0)], &mut x).unwrap();
        assert!(rel_error(&x, &[expect.conj()]) <= bound);
    }
}

#[test]
fn accurate_mode_holds_with_phases_of_hundreds_of_radians() {
    // bieri-512-like linear phase (kmax = π·512/0.22 rad/m at |r| ≤ 0.11 m: ~800 rad)
    // plus higher orders and off-resonance, on a random subset-sized problem.
    let mut rng = Rng::fresh("accurate_mode_holds_with_phases_of_hundreds_of_radians");
    let (n, m, coils) = (900, 700, 2);
    let kmax = std::f64::consts::PI * 512.0 / 0.22;
    let mut problem = Problem::random(&mut rng, 1, 1, 1.0);
    problem.dims = [30, 30, 1];
    problem.samples = m;
    problem.coils = coils;
    problem.positions = (0..3 * n)
        .map(|i| {
            if i < 2 * n {
                rng.range(-0.11, 0.11)
            } else {
                0.02
            }
        })
        .collect();
    problem.terms = 16;
    problem.user_basis = None;
    problem.coefficients = (0..16 * m)
        .map(|i| match i / m {
            0 => rng.range(-3.0, 3.0),
            1..=3 => rng.range(-kmax, kmax),
            4..=8 => rng.range(-300.0, 300.0),
            _ => rng.range(-3000.0, 3000.0),
        })
        .collect();
    problem.off_resonance = Some((
        (0..n).map(|_| rng.range(-400.0, 400.0)).collect(),
        (0..m).map(|j| 0.03 * j as f64 / m as f64).collect(),
    ));
    problem.sensitivities = Some(rng.complex(n * coils));
    let max_phase = (0..m)
        .map(|j| problem.phase(j, 0).abs())
        .fold(0.0, f64::max);
    eprintln!("max |phase| at voxel 0: {max_phase:.0} rad");
    let x = rng.complex(n);
    let d = rng.complex(m * coils);
    let plan = problem.plan(Precision::Accurate);
    let mut out_d = vec![Complex32::default(); m * coils];
    let mut out_x = vec![Complex32::default(); n];
    plan.forward(&x, &mut out_d).unwrap();
    plan.adjoint(&d, &mut out_x).unwrap();
    let (ef, ea) = (
        rel_error(&out_d, &problem.forward_f64(&x)),
        rel_error(&out_x, &problem.adjoint_f64(&d)),
    );
    eprintln!("accurate, phases to ~{max_phase:.0} rad: forward {ef:.2e}, adjoint {ea:.2e}");
    assert!(ef <= 1e-5 && ea <= 1e-5, "forward {ef:e} adjoint {ea:e}");
}

#[test]
fn degenerate_sizes() {
    // 1×1×1 with one sample; many voxels with one sample (the inner sum is split
    // across threads); one voxel with many samples.
    let mut rng = Rng::fresh("degenerate_sizes");
    for (dims, m) in [
        ([1, 1, 1], 1),
        ([40, 30, 2], 1),
        ([1, 1, 1], 3000),
        ([7, 1, 1], 2),
    ] {
        let mut problem = Problem::random(&mut rng, 1, 1, 20.0);
        problem.dims = dims;
        let n = problem.voxels();
        let fresh = Problem::random(&mut rng, 1, 1, 20.0);
        problem.samples = m;
        problem.coils = fresh.coils;
        problem.positions = (0..3 * n).map(|_| rng.range(-0.11, 0.11)).collect();
        problem.terms = 4;
        problem.user_basis = None;
        problem.coefficients = (0..4 * m).map(|_| rng.range(-2000.0, 2000.0)).collect();
        problem.off_resonance = None;
        problem.sensitivities = (problem.coils > 1).then(|| rng.complex(n * problem.coils));
        let x = rng.complex(n);
        let d = rng.complex(m * problem.coils);
        let plan = problem.plan(Precision::Accurate);
        let mut out_d = vec![Complex32::default(); d.len()];
        let mut out_x = vec![Complex32::default(); n];
        plan.forward(&x, &mut out_d).unwrap();
        plan.adjoint(&d, &mut out_x).unwrap();
        let (ef, ea) = (
            rel_error(&out_d, &problem.forward_f64(&x)),
            rel_error(&out_x, &problem.adjoint_f64(&d)),
        );
        eprintln!(
            "{dims:?} M={m} coils {}: forward {ef:.2e} adjoint {ea:.2e}",
            problem.coils
        );
        assert!(
            ef <= 1e-5 && ea <= 1e-5,
            "{dims:?} M={m}: forward {ef:e} adjoint {ea:e}"
        );
    }
}

#[test]
fn trajectories_of_one_two_and_three_dimensions() {
    let mut rng = Rng::fresh("trajectories_of_one_two_and_three_dimensions");
    for ndims in 1..=3usize {
        let (n, m) = (60, 50);
        let positions: Vec<f64> = (0..3 * n).map(|_| rng.range(-0.1, 0.1)).collect();
        let k: Vec<f64> = (0..ndims * m).map(|_| rng.range(-1500.0, 1500.0)).collect();
        let mut plan = horecon::Plan::new(Default::default(), n as i64, 1, 1, 1, m as i64).unwrap();
        plan.set_positions(&positions).unwrap();
        plan.set_trajectory(ndims as i32, &k).unwrap();
        let x = rng.complex(n);
        let mut d = vec![Complex32::default(); m];
        plan.forward(&x, &mut d).unwrap();
        let expect: Vec<num_complex::Complex64> = (0..m)
            .map(|j| {
                (0..n)
                    .map(|v| {
                        let phase: f64 = (0..ndims)
                            .map(|a| k[a * m + j] * positions[a * n + v])
                            .sum();
                        num_complex::Complex64::from_polar(1.0, phase) * to_c64(&x[v..v + 1])[0]
                    })
                    .sum()
            })
            .collect();
        let err = rel_error(&d, &expect);
        assert!(err <= 1e-5, "ndims {ndims}: {err:e}");
    }
}

#[test]
fn grid_helper_equals_explicit_positions() {
    let mut rng = Rng::fresh("grid_helper_equals_explicit_positions");
    let dims = [rng.int(1, 9), rng.int(1, 9), rng.int(1, 4)];
    let n: usize = dims.iter().product();
    let fov = [0.2, 0.24, 0.05];
    let center = [
        rng.range(-0.02, 0.02),
        rng.range(-0.02, 0.02),
        rng.range(-0.02, 0.02),
    ];
    let m = 40;
    let coef: Vec<f64> = (0..9 * m).map(|_| rng.range(-400.0, 400.0)).collect();
    let make = |explicit: bool| {
        let mut plan = horecon::Plan::new(
            Default::default(),
            dims[0] as i64,
            dims[1] as i64,
            dims[2] as i64,
            1,
            m as i64,
        )
        .unwrap();
        if explicit {
            let mut p = vec![0.0; 3 * n];
            for iz in 0..dims[2] {
                for iy in 0..dims[1] {
                    for ix in 0..dims[0] {
                        let v = ix + dims[0] * (iy + dims[1] * iz);
                        for (a, i) in [ix, iy, iz].into_iter().enumerate() {
                            p[a * n + v] = if dims[a] == 1 {
                                center[a]
                            } else {
                                center[a]
                                    + (i as f64 - (dims[a] / 2) as f64) * fov[a] / dims[a] as f64
                            };
                        }
                    }
                }
            }
            plan.set_positions(&p).unwrap();
        } else {
            plan.set_grid_positions(fov, center).unwrap();
        }
        plan.set_solid_harmonics(9, &coef).unwrap();
        plan
    };
    let x = rng.complex(n);
    let (mut a, mut b) = (vec![Complex32::default(); m], vec![Complex32::default(); m]);
    make(true).forward(&x, &mut a).unwrap();
    make(false).forward(&x, &mut b).unwrap();
    assert_eq!(a, b);
}

#[test]
fn concurrent_calls_on_one_plan_are_identical() {
    let mut rng = Rng::fresh("concurrent_calls_on_one_plan_are_identical");
    let problem = Problem::random(&mut rng, 400, 200, 30.0);
    let plan = problem.plan(Precision::Accurate);
    let x = rng.complex(problem.voxels());
    let d = rng.complex(problem.samples * problem.coils);
    let run = || {
        let mut fd = vec![Complex32::default(); d.len()];
        let mut ad = vec![Complex32::default(); x.len()];
        let mut nd = vec![Complex32::default(); x.len()];
        plan.forward(&x, &mut fd).unwrap();
        plan.adjoint(&d, &mut ad).unwrap();
        plan.normal(&x, &mut nd).unwrap();
        (fd, ad, nd)
    };
    let reference = run();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(run)).collect();
        for h in handles {
            assert!(h.join().unwrap() == reference, "a concurrent call differs");
        }
    });
}

#[test]
fn bad_inputs_are_refused_with_their_codes() {
    use horecon::{Plan, Status};
    let mut rng = Rng::fresh("bad_inputs_are_refused_with_their_codes");
    let (n, m) = (12usize, 10usize);
    let mut plan = Plan::new(Default::default(), 4, 3, 1, 2, m as i64).unwrap();
    let status = |r: horecon::Result<()>| r.err().map(|e| e.status);
    // operators before the model
    let x = rng.complex(n);
    let mut d = vec![Complex32::default(); 2 * m];
    assert_eq!(
        status(plan.forward(&x, &mut d)),
        Some(Status::IncompletePlan)
    );
    assert_eq!(
        status(plan.set_solid_harmonics(4, &vec![0.5; 4 * m])),
        Some(Status::IncompletePlan)
    );
    // sizes
    assert_eq!(
        status(plan.set_positions(&vec![0.0; 3 * n - 1])),
        Some(Status::SizeMismatch)
    );
    let positions: Vec<f64> = (0..3 * n).map(|_| rng.range(-0.1, 0.1)).collect();
    plan.set_positions(&positions).unwrap();
    assert_eq!(
        status(plan.set_solid_harmonics(5, &vec![0.5; 5 * m])),
        Some(Status::InvalidArgument)
    );
    assert_eq!(
        status(plan.set_trajectory(4, &vec![0.5; 4 * m])),
        Some(Status::InvalidArgument)
    );
    // finiteness
    let mut bad = vec![0.5; 4 * m];
    bad[7] = f64::NAN;
    let e = plan.set_solid_harmonics(4, &bad).unwrap_err();
    assert_eq!(e.status, Status::NotFinite);
    assert!(e.message.contains("coefficients[7]"), "{}", e.message);
    plan.set_solid_harmonics(4, &vec![0.5; 4 * m]).unwrap();
    // two coils need sensitivities
    assert_eq!(
        status(plan.forward(&x, &mut d)),
        Some(Status::IncompletePlan)
    );
    assert_eq!(
        status(plan.set_sensitivities(None)),
        Some(Status::InvalidArgument)
    );
    plan.set_sensitivities(Some(&rng.complex(2 * n))).unwrap();
    let before = d.clone();
    let mut x_bad = x.clone();
    x_bad[3].im = f32::INFINITY;
    assert_eq!(
        status(plan.forward(&x_bad, &mut d)),
        Some(Status::NotFinite)
    );
    assert_eq!(d, before, "output written on failure");
    assert_eq!(
        status(plan.forward(&x[1..], &mut d)),
        Some(Status::SizeMismatch)
    );
    plan.forward(&x, &mut d).unwrap();
    // options
    let bad_options = horecon::Options {
        verbosity: 7,
        ..Default::default()
    };
    assert_eq!(
        Plan::new(bad_options, 1, 1, 1, 1, 1)
            .err()
            .map(|e| e.status),
        Some(Status::InvalidArgument)
    );
    assert_eq!(
        Plan::new(Default::default(), 0, 1, 1, 1, 1)
            .err()
            .map(|e| e.status),
        Some(Status::InvalidArgument)
    );
    assert_eq!(
        Plan::new(Default::default(), 1 << 40, 1 << 40, 1, 1, 1)
            .err()
            .map(|e| e.status),
        Some(Status::InvalidArgument)
    );
}

/// Finite inputs whose result leaves float32's range (values near 3.4e38
/// summed over voxels or samples): `NotFinite` naming the output, never an
/// Inf or NaN handed back as a result; CG leaves its image untouched.
#[test]
fn results_beyond_float32_are_refused() {
    use horecon::{CgOptions, Plan, Status};
    let mut rng = Rng::fresh("results_beyond_float32_are_refused");
    let (n, m) = (12usize, 10usize);
    let mut plan = Plan::new(Default::default(), 4, 3, 1, 2, m as i64).unwrap();
    let positions: Vec<f64> = (0..3 * n).map(|_| rng.range(-0.1, 0.1)).collect();
    plan.set_positions(&positions).unwrap();
    plan.set_solid_harmonics(4, &vec![0.5; 4 * m]).unwrap();
    plan.set_sensitivities(Some(&rng.complex(2 * n))).unwrap();
    let huge = |len: usize| vec![Complex32::new(3e38, -3e38); len];
    let mut d = vec![Complex32::default(); 2 * m];
    let e = plan.forward(&huge(n), &mut d).unwrap_err();
    assert_eq!(e.status, Status::NotFinite);
    assert!(
        e.message.contains("data[") && e.message.contains("overflowed"),
        "{}",
        e.message
    );
    let mut x = vec![Complex32::default(); n];
    let e = plan.adjoint(&huge(2 * m), &mut x).unwrap_err();
    assert_eq!(e.status, Status::NotFinite);
    assert!(e.message.contains("image["), "{}", e.message);
    let e = plan.normal(&huge(n), &mut x).unwrap_err();
    assert_eq!(e.status, Status::NotFinite);
    assert!(e.message.contains("out["), "{}", e.message);
    let mut image = vec![Complex32::new(0.25, 0.5); n];
    let before = image.clone();
    let e = plan
        .cg(&huge(2 * m), &CgOptions::default(), &mut image)
        .unwrap_err();
    assert_eq!(e.status, Status::NotFinite, "{}", e.message);
    assert_eq!(image, before, "cg wrote its image on failure");
    // Large but representable results still pass.
    plan.forward(&vec![Complex32::new(1e30, 1e30); n], &mut d)
        .unwrap();
}
