//! Fᴴd and Q of Stone et al. 2008 against direct float64 sums of their
//! eqs. 4 and 3, Q as the Toeplitz kernel of FᴴF, and the accepted plans.

#![allow(clippy::needless_range_loop)]
mod common;
use common::*;
use horecon::{BackendKind, Complex32, Options, Plan, Precision, Status};
use num_complex::Complex64;
use std::f64::consts::PI;

/// MODEL.md's grid positions, written out here.
fn grid(dims: [usize; 3], fov: [f64; 3], center: [f64; 3]) -> Vec<[f64; 3]> {
    let mut r = vec![];
    for iz in 0..dims[2] {
        for iy in 0..dims[1] {
            for ix in 0..dims[0] {
                let i = [ix, iy, iz];
                r.push(std::array::from_fn(|a| {
                    if dims[a] == 1 {
                        center[a]
                    } else {
                        center[a] + (i[a] as f64 - (dims[a] / 2) as f64) * fov[a] / dims[a] as f64
                    }
                }));
            }
        }
    }
    r
}

struct Case {
    dims: [usize; 3],
    fov: [f64; 3],
    center: [f64; 3],
    ndims: usize,
    /// Stone's k, cycles/m, M×3 (unused dimensions zero).
    k: Vec<[f64; 3]>,
}

impl Case {
    fn random(rng: &mut Rng, dims: [usize; 3], ndims: usize, m: usize) -> Case {
        let fov = [0.24, 0.2, 0.16];
        let center = [
            rng.range(-0.02, 0.02),
            rng.range(-0.02, 0.02),
            rng.range(-0.02, 0.02),
        ];
        let k = (0..m)
            .map(|_| {
                std::array::from_fn(|a| {
                    if a < ndims {
                        // up to the Nyquist edge, in cycles/m
                        rng.range(-0.5, 0.5) * dims[a] as f64 / fov[a]
                    } else {
                        0.0
                    }
                })
            })
            .collect();
        Case {
            dims,
            fov,
            center,
            ndims,
            k,
        }
    }

    /// A plan with the trajectory k̃ = −2π·k (rad/m), on the default backend
    /// (CUDA on a GPU machine, else the CPU: Fᴴd and Q run on either).
    fn plan(&self, precision: Precision) -> Plan {
        let m = self.k.len();
        let [nx, ny, nz] = self.dims;
        let mut plan = Plan::new(
            Options {
                backend: BackendKind::Auto,
                precision,
                ..Options::default()
            },
            nx as i64,
            ny as i64,
            nz as i64,
            1,
            m as i64,
        )
        .unwrap();
        plan.set_grid_positions(self.fov, self.center).unwrap();
        let mut k = vec![0.0; m * self.ndims];
        for a in 0..self.ndims {
            for j in 0..m {
                k[a * m + j] = -2.0 * PI * self.k[j][a];
            }
        }
        plan.set_trajectory(self.ndims as i32, &k).unwrap();
        plan
    }

    fn dot(&self, j: usize, x: [f64; 3]) -> f64 {
        (0..3).map(|a| self.k[j][a] * x[a]).sum()
    }
}

fn c64(c: Complex32) -> Complex64 {
    Complex64::new(c.re as f64, c.im as f64)
}

const SHAPES: [([usize; 3], usize); 6] = [
    ([8, 6, 1], 2),
    ([7, 5, 1], 2),
    ([6, 1, 1], 1),
    ([4, 5, 3], 3),
    ([5, 4, 4], 3),
    ([6, 5, 1], 3),
];

#[test]
fn fhd_matches_stones_eq4() {
    let mut rng = Rng::fresh("fhd_matches_stones_eq4");
    for (dims, ndims) in SHAPES {
        let m = rng.int(20, 120);
        let case = Case::random(&mut rng, dims, ndims, m);
        let data = rng.complex(m);
        let phi = rng.complex(m);
        let x = grid(dims, case.fov, case.center);
        for with_phi in [true, false] {
            let expect: Vec<Complex64> = x
                .iter()
                .map(|&xn| {
                    (0..m)
                        .map(|j| {
                            let p = if with_phi {
                                c64(phi[j]).conj()
                            } else {
                                Complex64::new(1.0, 0.0)
                            };
                            p * c64(data[j])
                                * Complex64::from_polar(1.0, 2.0 * PI * case.dot(j, xn))
                        })
                        .sum()
                })
                .collect();
            for (precision, tolerance) in [(Precision::Accurate, 1e-5), (Precision::Double, 2e-7)] {
                let plan = case.plan(precision);
                let mut out = vec![Complex32::default(); x.len()];
                plan.fhd(&data, with_phi.then_some(&phi[..]), &mut out)
                    .unwrap();
                let err = rel_error(&out, &expect);
                eprintln!("{dims:?} ndims {ndims} M {m} φ {with_phi} {precision:?}: {err:.1e}");
                assert!(err <= tolerance, "{dims:?} {precision:?}: {err:e}");
            }
        }
    }
}

#[test]
fn q_matches_stones_eq3_and_is_the_toeplitz_kernel() {
    let mut rng = Rng::fresh("q_matches_stones_eq3_and_is_the_toeplitz_kernel");
    for (dims, ndims) in SHAPES {
        let m = rng.int(20, 120);
        let case = Case::random(&mut rng, dims, ndims, m);
        let phi_mag2: Vec<f32> = (0..m).map(|_| rng.range(0.1, 2.0) as f32).collect();
        let plan = case.plan(Precision::Accurate);
        let q_dims = plan.q_dims();
        let expect_dims = dims.map(|d| if d > 1 { 2 * d } else { 1 });
        assert_eq!(q_dims, expect_dims);
        let q_count: usize = q_dims.iter().product();
        let step: [f64; 3] = std::array::from_fn(|a| case.fov[a] / dims[a] as f64);
        for with_phi in [true, false] {
            let w = |j: usize| {
                if with_phi {
                    phi_mag2[j] as f64
                } else {
                    1.0
                }
            };
            let mut expect = vec![Complex64::default(); q_count];
            for l in 0..q_dims[2] {
                for jj in 0..q_dims[1] {
                    for i in 0..q_dims[0] {
                        let index = [i, jj, l];
                        let r: [f64; 3] = std::array::from_fn(|a| {
                            if dims[a] > 1 {
                                (index[a] as f64 - dims[a] as f64) * step[a]
                            } else {
                                0.0
                            }
                        });
                        expect[i + q_dims[0] * (jj + q_dims[1] * l)] = (0..m)
                            .map(|j| w(j) * Complex64::from_polar(1.0, 2.0 * PI * case.dot(j, r)))
                            .sum();
                    }
                }
            }
            let mut q = vec![Complex32::default(); q_count];
            plan.q(with_phi.then_some(&phi_mag2[..]), &mut q).unwrap();
            let err = rel_error(&q, &expect);
            eprintln!("{dims:?} ndims {ndims} M {m} φ {with_phi}: Q vs eq. 3 {err:.1e}");
            assert!(err <= 1e-5, "{dims:?}: {err:e}");
            // FᴴF ρ = EᴴWE ρ (W = |φ|²) equals the convolution with Q
            let n: usize = dims.iter().product();
            let rho = rng.complex(n);
            let weights: Vec<f32> = (0..m).map(|j| w(j) as f32).collect();
            let mut normal = vec![Complex32::default(); n];
            plan.operator()
                .unwrap()
                .normal(&rho, &mut normal, Some(&weights))
                .unwrap();
            let coords = |v: usize| {
                [
                    v % dims[0],
                    (v / dims[0]) % dims[1],
                    v / (dims[0] * dims[1]),
                ]
            };
            let toeplitz: Vec<Complex64> = (0..n)
                .map(|v| {
                    let a = coords(v);
                    (0..n)
                        .map(|u| {
                            let b = coords(u);
                            let idx: [usize; 3] = std::array::from_fn(|ax| {
                                if dims[ax] > 1 {
                                    a[ax] + dims[ax] - b[ax]
                                } else {
                                    0
                                }
                            });
                            c64(q[idx[0] + q_dims[0] * (idx[1] + q_dims[1] * idx[2])]) * c64(rho[u])
                        })
                        .sum()
                })
                .collect();
            let err = rel_error(&normal, &toeplitz);
            assert!(err <= 2e-5, "{dims:?}: FᴴF vs Q convolution {err:e}");
        }
    }
}

#[test]
fn only_single_coil_trajectory_plans_are_accepted() {
    let mut rng = Rng::fresh("only_single_coil_trajectory_plans_are_accepted");
    let case = Case::random(&mut rng, [4, 3, 1], 2, 10);
    let data = rng.complex(10);
    let mut out = vec![Complex32::default(); 12];
    let mut q = vec![Complex32::default(); 48];
    let invalid = |plan: &Plan, needle: &str| {
        let mut out = vec![Complex32::default(); 12];
        let mut q = vec![Complex32::default(); 48];
        for err in [
            plan.fhd(&data, None, &mut out).unwrap_err(),
            plan.q(None, &mut q).unwrap_err(),
        ] {
            assert_eq!(err.status, Status::InvalidArgument, "{}", err.message);
            assert!(err.message.contains(needle), "{}", err.message);
        }
    };
    // incomplete
    let bare = Plan::new(Options::default(), 4, 3, 1, 1, 10).unwrap();
    assert_eq!(
        bare.fhd(&data, None, &mut out).unwrap_err().status,
        Status::IncompletePlan
    );
    assert_eq!(
        bare.q(None, &mut q).unwrap_err().status,
        Status::IncompletePlan
    );
    // solid harmonics
    let mut plan = case.plan(Precision::Accurate);
    plan.set_solid_harmonics(4, &[1.0; 40]).unwrap();
    invalid(&plan, "set_trajectory");
    // off-resonance
    let mut plan = case.plan(Precision::Accurate);
    plan.set_off_resonance(Some((&[10.0; 12], &[1e-3; 10])))
        .unwrap();
    invalid(&plan, "off-resonance");
    // sensitivities on one coil
    let mut plan = case.plan(Precision::Accurate);
    plan.set_sensitivities(Some(&rng.complex(12))).unwrap();
    invalid(&plan, "sensitivities");
    // several coils
    let mut plan = Plan::new(Options::default(), 4, 3, 1, 2, 10).unwrap();
    plan.set_grid_positions([0.2; 3], [0.0; 3]).unwrap();
    plan.set_trajectory(2, &[1.0; 20]).unwrap();
    plan.set_sensitivities(Some(&rng.complex(24))).unwrap();
    invalid(&plan, "single-coil");
    // Q needs a grid; Fᴴd does not
    let mut plan = case.plan(Precision::Accurate);
    let positions: Vec<f64> = (0..36).map(|_| rng.range(-0.1, 0.1)).collect();
    plan.set_positions(&positions).unwrap();
    plan.fhd(&data, None, &mut out).unwrap();
    let err = plan.q(None, &mut q).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("regular grid"), "{}", err.message);
    // sizes and values
    let plan = case.plan(Precision::Accurate);
    assert_eq!(
        plan.fhd(&data[..9], None, &mut out).unwrap_err().status,
        Status::SizeMismatch
    );
    assert_eq!(
        plan.q(None, &mut q[..47]).unwrap_err().status,
        Status::SizeMismatch
    );
    let mut phi = rng.complex(10);
    phi[3].re = f32::NAN;
    assert_eq!(
        plan.fhd(&data, Some(&phi), &mut out).unwrap_err().status,
        Status::NotFinite
    );
    let mut w = vec![1.0f32; 10];
    w[4] = -1.0;
    let err = plan.q(Some(&w), &mut q).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("phi_mag2[4]"), "{}", err.message);
}

/// The estimate of Fᴴd, Q and gridding needs what the call needs: on plans
/// those calls refuse (no model, no phase, a user basis, several coils,
/// voxels off a grid) `Plan::memory` gives the call's own status, and on
/// a plan they accept, an estimate. Fᴴd on a plan of several coils is an
/// argument error, whatever else is set (it never qualifies).
#[test]
fn the_estimate_of_a_call_needs_what_the_call_needs() {
    use horecon::plan::Call;
    let status = |r: horecon::Result<()>| r.err().map(|e| e.status);
    let m = 12;
    let k: Vec<f64> = (0..2 * m)
        .map(|j| 20.0 * ((j * 37 % 11) as f64 - 5.0))
        .collect();
    let plan = |coils: i64, setup: &dyn Fn(&mut Plan)| {
        let mut p = Plan::new(Options::default(), 4, 3, 1, coils, m as i64).unwrap();
        setup(&mut p);
        p
    };
    let on_grid = |p: &mut Plan| p.set_grid_positions([0.2, 0.2, 0.01], [0.0; 3]).unwrap();
    let cases: Vec<(&str, Plan)> = vec![
        ("no model", plan(1, &|_| {})),
        ("positions only", plan(1, &|p| on_grid(p))),
        (
            "a user basis",
            plan(1, &|p| {
                on_grid(p);
                p.set_basis(1, &[0.1; 12], &[1.0; 12]).unwrap();
            }),
        ),
        (
            "two coils",
            plan(2, &|p| {
                on_grid(p);
                p.set_trajectory(2, &k).unwrap();
            }),
        ),
        (
            "voxels off a grid",
            plan(1, &|p| {
                let positions: Vec<f64> = (0..36).map(|i| ((i * i) % 7) as f64 * 0.01).collect();
                p.set_positions(&positions).unwrap();
                p.set_trajectory(2, &k).unwrap();
            }),
        ),
        (
            "a grid and a trajectory",
            plan(1, &|p| {
                on_grid(p);
                p.set_trajectory(2, &k).unwrap();
            }),
        ),
    ];
    for (what, p) in &cases {
        let (n, l) = (12, p.sizes().coils);
        let data = vec![Complex32::new(1.0, 0.0); m * l];
        let mut image = vec![Complex32::default(); n];
        let mut q = vec![Complex32::default(); p.q_dims().iter().product()];
        let calls: [(Call, Option<Status>); 3] = [
            (Call::Fhd, status(p.fhd(&data[..m], None, &mut image))),
            (Call::Q, status(p.q(None, &mut q))),
            (Call::Gridding, status(p.gridding(&data, None, &mut image))),
        ];
        for (call, expected) in calls {
            let estimated = status(p.memory(call).map(|_| ()));
            eprintln!("{what}: {call:?} call {expected:?}, estimate {estimated:?}");
            assert_eq!(estimated, expected, "{what}: {call:?}");
        }
    }
    let two_coils = &cases[3].1;
    let e = two_coils
        .fhd(
            &[Complex32::default(); 12],
            None,
            &mut [Complex32::default(); 12],
        )
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    let bare = plan(2, &|_| {});
    let e = bare.memory(Call::Fhd).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
}
