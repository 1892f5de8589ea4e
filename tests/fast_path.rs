//! The fast path (issue 17, and issue 14's NUFFT-backed linear-phase plans):
//! fast E, Eᴴ and EᴴE against float64 direct sums of the exact model on
//! random 2D and 3D higher-order problems (odd sizes, oblique lattices,
//! masked voxels in any order, a user basis, strong off-resonance) for
//! tolerances 1e-2, 1e-3 and 1e-4; the certificate against the true error;
//! adjointness; CG against the exact path; bad input and model changes.

mod common;

use common::{inner, normal_f64, rel_error, Problem, Rng};
use horecon::model::harmonics::ORDER;
use horecon::{CgOptions, Complex32, Precision, Regularizer, Status};
use num_complex::Complex64;
use std::f64::consts::{PI, TAU};

const FOV: f64 = 0.22;

/// The kinds of problem the fast path must serve.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Solid harmonics (16 terms) with off-resonance on an axis-aligned grid.
    Grid,
    /// 9 solid harmonics on an oblique lattice.
    Oblique,
    /// A masked subset of an oblique lattice, listed in random order.
    Masked,
    /// A user basis: x, y, z plus non-linear functions of position.
    UserBasis,
    /// Strong off-resonance (±300 Hz over 30 ms) with linear terms only.
    StrongB0,
}

/// Lattice positions c + A·i for the index vectors of `dims`, A oblique when asked.
fn lattice_positions(rng: &mut Rng, dims: [usize; 3], oblique: bool) -> Vec<[f64; 3]> {
    let step: [f64; 3] = std::array::from_fn(|a| FOV / dims[a].max(8) as f64);
    let axes: Vec<[f64; 3]> = (0..3)
        .map(|a| {
            std::array::from_fn(|c| {
                if c == a {
                    step[a]
                } else if oblique {
                    step[a] * rng.range(-0.3, 0.3)
                } else {
                    0.0
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let i = [ix, iy, iz];
                out.push(std::array::from_fn(|c| {
                    (0..3)
                        .map(|a| (i[a] as f64 - (dims[a] / 2) as f64) * axes[a][c])
                        .sum::<f64>()
                        + 0.004 * (c as f64 - 1.0)
                }));
            }
        }
    }
    out
}

/// A smooth eddy-current-like coefficient curve over M samples.
fn curve(rng: &mut Rng, m: usize, amplitude: f64) -> Vec<f64> {
    let rate = rng.range(0.1, 0.6);
    let wiggle = rng.range(0.0, 0.3);
    let a = amplitude * rng.range(0.5, 1.0) * if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
    (0..m)
        .map(|j| {
            let tau = j as f64 / m as f64;
            a * ((1.0 - (-tau / rate).exp()) + wiggle * (TAU * 2.0 * tau).sin())
        })
        .collect()
}

/// A random problem of `kind` with `samples` samples and `coils` coils.
fn problem(rng: &mut Rng, kind: Kind, dims: [usize; 3], coils: usize, samples: usize) -> Problem {
    let oblique = matches!(kind, Kind::Oblique | Kind::Masked);
    let mut points = lattice_positions(rng, dims, oblique);
    let mut dims = dims;
    if let Kind::Masked = kind {
        // Keep about 70 % of the voxels, in random order.
        points.retain(|_| rng.uniform() < 0.7);
        for i in (1..points.len()).rev() {
            let j = rng.int(0, i);
            points.swap(i, j);
        }
        dims = [points.len(), 1, 1];
    }
    let n = points.len();
    let m = samples;
    let positions: Vec<f64> = (0..3)
        .flat_map(|c| points.iter().map(move |p| p[c]))
        .collect();
    let ndims = (0..3).filter(|&a| dims[a] > 1).count().max(1);
    let step = FOV / 8.0_f64.max(dims.iter().copied().max().unwrap_or(1) as f64);
    let kmax = PI / step;
    // Trajectory: a spiral in x-y, a sweep in z for 3D lattices.
    let sweep = ndims == 3 || oblique;
    let linear: Vec<Vec<f64>> = (0..3)
        .map(|axis| {
            (0..m)
                .map(|j| {
                    let tau = j as f64 / m as f64;
                    match axis {
                        0 => kmax * tau * (TAU * 4.0 * tau).cos(),
                        1 => kmax * tau * (TAU * 4.0 * tau).sin(),
                        _ if sweep => kmax * (2.0 * ((tau * 3.0) % 1.0) - 1.0) * 0.5,
                        _ => 0.0,
                    }
                })
                .collect()
        })
        .collect();
    let times: Vec<f64> = (0..m).map(|j| 0.03 * j as f64 / m as f64).collect();
    let (terms, user_basis, coefficients) = match kind {
        Kind::Grid | Kind::Oblique | Kind::Masked => {
            let terms = if matches!(kind, Kind::Grid) { 16 } else { 9 };
            let mut c = vec![0.0; terms * m];
            for b in 0..terms {
                let column = match ORDER[b] {
                    0 => curve(rng, m, 2.0),
                    1 => {
                        let eddy = curve(rng, m, 5.0);
                        linear[b - 1]
                            .iter()
                            .zip(&eddy)
                            .map(|(k, e)| k + e)
                            .collect()
                    }
                    2 => curve(rng, m, 300.0),
                    _ => curve(rng, m, 3000.0),
                };
                c[b * m..(b + 1) * m].copy_from_slice(&column);
            }
            (terms, None, c)
        }
        Kind::UserBasis => {
            let terms = 5;
            let mut h = vec![0.0; terms * n];
            for (v, p) in points.iter().enumerate() {
                let (x, y, z) = (p[0], p[1], p[2]);
                h[v] = x;
                h[n + v] = y;
                h[2 * n + v] = z;
                h[3 * n + v] = (x * 20.0).sin() * 0.05 + x * x;
                h[4 * n + v] = (x * y).exp() - 1.0 + z * z * 3.0;
            }
            let mut c = vec![0.0; terms * m];
            for b in 0..3 {
                c[b * m..(b + 1) * m].copy_from_slice(&linear[b]);
            }
            let c3 = curve(rng, m, 150.0);
            let c4 = curve(rng, m, 400.0);
            c[3 * m..4 * m].copy_from_slice(&c3);
            c[4 * m..].copy_from_slice(&c4);
            (terms, Some(h), c)
        }
        Kind::StrongB0 => {
            let mut c = vec![0.0; 4 * m];
            c[..m].copy_from_slice(&curve(rng, m, 1.0));
            for b in 1..4 {
                c[b * m..(b + 1) * m].copy_from_slice(&linear[b - 1]);
            }
            (4, None, c)
        }
    };
    let hz = match kind {
        Kind::StrongB0 => 300.0,
        Kind::UserBasis => 0.0,
        _ => 60.0,
    };
    let off_resonance = (hz > 0.0).then(|| {
        let omega = points
            .iter()
            .map(|p| {
                let r2 = (p[0] - 0.02).powi(2) + (p[1] + 0.01).powi(2) + p[2].powi(2);
                TAU * hz * ((-r2 / (2.0 * 0.05f64.powi(2))).exp() - 0.3)
            })
            .collect();
        (omega, times.clone())
    });
    let sensitivities = (coils > 1).then(|| {
        let mut s = Vec::with_capacity(n * coils);
        for c in 0..coils {
            let a = TAU * c as f64 / coils as f64;
            for p in &points {
                let d2 = (p[0] - 0.15 * a.cos()).powi(2) + (p[1] - 0.15 * a.sin()).powi(2);
                let mag = (-d2 / (2.0 * 0.12f64.powi(2))).exp();
                let ph = a + 5.0 * (p[0] * a.cos() + p[1] * a.sin());
                s.push(Complex32::new(
                    (mag * ph.cos()) as f32,
                    (mag * ph.sin()) as f32,
                ));
            }
        }
        s
    });
    Problem {
        dims,
        coils,
        samples: m,
        positions,
        terms,
        user_basis,
        coefficients,
        off_resonance,
        sensitivities,
    }
}

/// The fast plan of `p` at `tolerance`.
fn fast_plan(p: &Problem, tolerance: f64) -> horecon::Plan {
    let mut plan = p.plan(Precision::Accurate);
    plan.set_approximation(tolerance)
        .expect("set_approximation");
    plan
}

/// The true relative errors of the fast E, Eᴴ and EᴴE of `plan` for `p`.
fn true_errors(rng: &mut Rng, p: &Problem, plan: &horecon::Plan) -> [f64; 3] {
    let (n, m, l) = (p.voxels(), p.samples, p.coils);
    let x = rng.complex(n);
    let d = rng.complex(m * l);
    let mut y = vec![Complex32::default(); m * l];
    plan.forward(&x, &mut y).unwrap();
    let mut z = vec![Complex32::default(); n];
    plan.adjoint(&d, &mut z).unwrap();
    let mut w = vec![Complex32::default(); n];
    plan.normal(&x, &mut w).unwrap();
    [
        rel_error(&y, &p.forward_f64(&x)),
        rel_error(&z, &p.adjoint_f64(&d)),
        rel_error(&w, &normal_f64(p, &x, None)),
    ]
}

#[test]
fn fast_operators_meet_the_tolerance_and_the_certificate_is_honest() {
    let mut rng = Rng::fresh("fast_operators_meet_the_tolerance");
    let cases: [(Kind, [usize; 3], usize); 5] = [
        (Kind::Grid, [17, 15, 1], 3),
        (Kind::Oblique, [9, 7, 5], 2),
        (Kind::Masked, [9, 8, 6], 2),
        (Kind::UserBasis, [13, 11, 3], 1),
        (Kind::StrongB0, [15, 14, 1], 2),
    ];
    for (kind, dims, coils) in cases {
        let samples = rng.int(500, 900);
        let p = problem(&mut rng, kind, dims, coils, samples);
        for tolerance in [1e-2, 1e-3, 1e-4] {
            let plan = fast_plan(&p, tolerance);
            let info = plan.approximation_info().unwrap();
            assert!(info.active, "{kind:?}: inactive: {}", info.reason);
            let errors = true_errors(&mut rng, &p, &plan);
            eprintln!(
                "{kind:?} {dims:?} N {} M {samples} L {coils} tol {tolerance:.0e}: K {} \
                 estimated {:.2e}, E {:.2e}, EH {:.2e}, EHE {:.2e}",
                p.voxels(),
                info.rank,
                info.estimated_error,
                errors[0],
                errors[1],
                errors[2]
            );
            for (what, e) in ["E", "EH", "EHE"].iter().zip(errors) {
                assert!(
                    e <= tolerance,
                    "{kind:?} tol {tolerance}: {what} error {e:.3e}"
                );
            }
            let truth = errors[0].max(errors[1]);
            assert!(
                info.estimated_error <= 3.0 * truth && truth <= 3.0 * info.estimated_error,
                "{kind:?} tol {tolerance}: estimated {:.3e} vs true {truth:.3e}",
                info.estimated_error
            );
        }
    }
}

#[test]
fn the_fast_pair_is_adjoint() {
    let mut rng = Rng::fresh("the_fast_pair_is_adjoint");
    for kind in [Kind::Grid, Kind::Masked] {
        let p = problem(&mut rng, kind, [11, 9, 3], 3, 400);
        let plan = fast_plan(&p, 1e-3);
        let x = rng.complex(p.voxels());
        let d = rng.complex(p.samples * p.coils);
        let mut ex = vec![Complex32::default(); d.len()];
        plan.forward(&x, &mut ex).unwrap();
        let mut ehd = vec![Complex32::default(); x.len()];
        plan.adjoint(&d, &mut ehd).unwrap();
        let (a, b) = (inner(&ex, &d), inner(&x, &ehd));
        let scale = (a.norm() + b.norm()) / 2.0;
        assert!(
            (a - b).norm() <= 1e-5 * scale,
            "{kind:?}: <Ex,d> {a} vs <x,EHd> {b}"
        );
    }
}

#[test]
fn linear_phase_plans_are_a_single_nufft() {
    // Issue 14: a trajectory with a k0 term on a lattice: K = 1, E, Eᴴ and Fᴴd by NUFFT.
    let mut rng = Rng::fresh("linear_phase_plans_are_a_single_nufft");
    let mut p = problem(&mut rng, Kind::StrongB0, [16, 13, 1], 1, 700);
    p.off_resonance = None;
    p.sensitivities = None;
    for tolerance in [1e-2, 1e-4] {
        let plan = fast_plan(&p, tolerance);
        let info = plan.approximation_info().unwrap();
        assert!(info.active && info.rank == 1, "{info:?}");
        let errors = true_errors(&mut rng, &p, &plan);
        assert!(errors.iter().all(|&e| e <= tolerance), "{errors:?}");
        // Fᴴd (Stone) needs a trajectory plan: the same E as set_trajectory.
        let m = p.samples;
        let mut traj = horecon::Plan::new(Default::default(), 16, 13, 1, 1, m as i64).unwrap();
        traj.set_positions(&p.positions).unwrap();
        traj.set_trajectory(3, &p.coefficients[m..]).unwrap();
        traj.set_approximation(tolerance).unwrap();
        let d = rng.complex(m);
        let phi = rng.complex(m);
        let mut fhd = vec![Complex32::default(); p.voxels()];
        traj.fhd(&d, Some(&phi), &mut fhd).unwrap();
        let mut q = p.clone();
        q.coefficients[..m].iter_mut().for_each(|c| *c = 0.0);
        let weighted: Vec<Complex32> = d.iter().zip(&phi).map(|(d, f)| f.conj() * d).collect();
        let e = rel_error(&fhd, &q.adjoint_f64(&weighted));
        assert!(e <= tolerance, "Fhd error {e:.3e} at tolerance {tolerance}");
    }
}

#[test]
fn cg_with_the_fast_path_reaches_the_exact_image() {
    let mut rng = Rng::fresh("cg_with_the_fast_path_reaches_the_exact_image");
    let p = problem(&mut rng, Kind::Grid, [13, 12, 1], 4, 600);
    let truth = rng.complex(p.voxels());
    let data: Vec<Complex32> = p
        .forward_f64(&truth)
        .iter()
        .map(|c| Complex32::new(c.re as f32, c.im as f32))
        .collect();
    // Tikhonov at a tenth of ‖E‖² ~ M·L keeps the system well conditioned, so
    // both solves converge and differ only by the operators' difference.
    let options = CgOptions {
        max_iterations: 60,
        tolerance: 1e-7,
        regularizer: Regularizer::Tikhonov,
        lambda: 0.1 * (p.samples * p.coils) as f64,
        ..CgOptions::default()
    };
    let exact = p.plan(Precision::Accurate);
    let mut reference = vec![Complex32::default(); p.voxels()];
    exact.cg(&data, &options, &mut reference).unwrap();
    let reference64: Vec<Complex64> = reference
        .iter()
        .map(|c| Complex64::new(c.re as f64, c.im as f64))
        .collect();
    for tolerance in [1e-2, 1e-3, 1e-4] {
        let plan = fast_plan(&p, tolerance);
        let mut image = vec![Complex32::default(); p.voxels()];
        plan.cg(&data, &options, &mut image).unwrap();
        let e = rel_error(&image, &reference64);
        eprintln!("CG tol {tolerance:.0e}: image difference {e:.2e}");
        assert!(
            e <= 10.0 * tolerance,
            "tol {tolerance}: CG image differs by {e:.3e}"
        );
    }
}

#[test]
fn bad_tolerances_are_refused_and_leave_the_plan_as_it_was() {
    let mut rng = Rng::fresh("bad_tolerances_are_refused");
    let p = problem(&mut rng, Kind::Grid, [7, 6, 1], 1, 50);
    let mut plan = p.plan(Precision::Accurate);
    plan.set_approximation(1e-3).unwrap();
    for bad in [-1e-3, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.5, 1e-7] {
        let e = plan.set_approximation(bad).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{bad}");
        assert!(e.message.contains("tolerance"), "{}", e.message);
        assert_eq!(plan.approximation(), 1e-3);
    }
    plan.set_approximation(0.0).unwrap();
    let info = plan.approximation_info().unwrap();
    assert!(
        !info.active && info.rank == 0 && info.reason.contains("0"),
        "{info:?}"
    );
    // An incomplete plan cannot be prepared.
    let mut empty = horecon::Plan::new(Default::default(), 4, 4, 1, 1, 10).unwrap();
    empty.set_approximation(1e-3).unwrap();
    assert_eq!(
        empty.approximation_info().unwrap_err().status,
        Status::IncompletePlan
    );
}

#[test]
fn model_changes_rebuild_the_expansion() {
    let mut rng = Rng::fresh("model_changes_rebuild_the_expansion");
    let mut p = problem(&mut rng, Kind::Grid, [12, 11, 1], 2, 500);
    let mut plan = fast_plan(&p, 1e-3);
    let before = plan.approximation_info().unwrap();
    // Stronger higher orders: a new expansion, never the stale one.
    for c in p.coefficients[4 * p.samples..].iter_mut() {
        *c *= 3.0;
    }
    plan.set_solid_harmonics(16, &p.coefficients).unwrap();
    let after = plan.approximation_info().unwrap();
    assert!(
        after.active && after.rank > before.rank,
        "{before:?} then {after:?}"
    );
    let errors = true_errors(&mut rng, &p, &plan);
    assert!(errors.iter().all(|&e| e <= 1e-3), "{errors:?}");
    // New sensitivities and off-resonance are taken too.
    p.sensitivities = Some(rng.complex(p.voxels() * p.coils));
    plan.set_sensitivities(p.sensitivities.as_deref()).unwrap();
    p.off_resonance = None;
    plan.set_off_resonance(None).unwrap();
    let errors = true_errors(&mut rng, &p, &plan);
    assert!(errors.iter().all(|&e| e <= 1e-3), "{errors:?}");
    // Voxels off any lattice: the exact path, with the reason.
    for x in p.positions.iter_mut() {
        *x += rng.range(-1e-3, 1e-3);
    }
    plan.set_positions(&p.positions).unwrap();
    plan.set_solid_harmonics(16, &p.coefficients).unwrap();
    let info = plan.approximation_info().unwrap();
    assert!(!info.active && info.reason.contains("lattice"), "{info:?}");
    let errors = true_errors(&mut rng, &p, &plan);
    assert!(
        errors.iter().all(|&e| e <= 1e-4),
        "exact path expected: {errors:?}"
    );
}

#[test]
fn singleton_sizes_and_single_samples() {
    let mut rng = Rng::fresh("singleton_sizes_and_single_samples");
    for (dims, samples) in [
        ([1, 1, 1], 7),
        ([1, 6, 1], 1),
        ([5, 1, 3], 40),
        ([2, 2, 2], 2),
    ] {
        let p = problem(&mut rng, Kind::Grid, dims, 2, samples);
        let plan = fast_plan(&p, 1e-3);
        let info = plan.approximation_info().unwrap();
        assert!(info.active, "{dims:?}: {}", info.reason);
        let errors = true_errors(&mut rng, &p, &plan);
        assert!(
            errors.iter().all(|&e| e <= 1e-3),
            "{dims:?} M {samples}: {errors:?}"
        );
    }
}

#[test]
fn a_phase_without_structure_falls_back_to_the_exact_path() {
    // A user basis of random values per voxel with large coefficients: exp(iψ)
    // has no low-rank form, so the plan stays exact and says why.
    let mut rng = Rng::fresh("a_phase_without_structure_falls_back");
    let mut p = problem(&mut rng, Kind::UserBasis, [10, 9, 1], 1, 300);
    let n = p.voxels();
    let h = p.user_basis.as_mut().unwrap();
    for v in 0..n {
        h[3 * n + v] = rng.range(-1.0, 1.0);
    }
    for j in 0..p.samples {
        p.coefficients[3 * p.samples + j] = rng.range(-40.0, 40.0);
    }
    let plan = fast_plan(&p, 1e-4);
    let info = plan.approximation_info().unwrap();
    assert!(
        !info.active && info.reason.contains("separable terms"),
        "{info:?}"
    );
    let errors = true_errors(&mut rng, &p, &plan);
    assert!(
        errors.iter().all(|&e| e <= 1e-4),
        "exact path expected: {errors:?}"
    );
}
