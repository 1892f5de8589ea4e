//! Conjugate gradient against dense float64 solutions of the normal equations.

#![allow(clippy::needless_range_loop)]
mod common;
use common::*;
use horecon::{CgOptions, Complex32, Precision, Regularizer, Status};
use num_complex::Complex64;

/// Solves (EᴴWE + λI) x = EᴴWd by Gaussian elimination with partial pivoting.
fn direct_solution(
    e: &[Vec<Complex64>],
    d: &[Complex32],
    weights: Option<&[f32]>,
    m: usize,
    lambda: f64,
) -> Vec<Complex64> {
    let n = e[0].len();
    let w = |row: usize| weights.map_or(1.0, |w| w[row % m] as f64);
    let mut a = vec![vec![Complex64::default(); n + 1]; n];
    for (p, arow) in a.iter_mut().enumerate() {
        for q in 0..n {
            arow[q] = (0..e.len())
                .map(|r| e[r][p].conj() * w(r) * e[r][q])
                .sum::<Complex64>();
        }
        arow[p] += lambda;
        arow[n] = (0..e.len())
            .map(|r| e[r][p].conj() * w(r) * Complex64::new(d[r].re as f64, d[r].im as f64))
            .sum();
    }
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&x, &y| a[x][col].norm().total_cmp(&a[y][col].norm()))
            .unwrap();
        a.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            for k in col..=n {
                let v = a[col][k];
                a[row][k] -= f * v;
            }
        }
    }
    let mut x = vec![Complex64::default(); n];
    for row in (0..n).rev() {
        let s: Complex64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][n] - s) / a[row][row];
    }
    x
}

/// An overdetermined, well-conditioned problem: 2D grid, several coils, random k.
fn well_posed(rng: &mut Rng) -> Problem {
    let dims = [rng.int(3, 6), rng.int(3, 5), 1];
    let n = dims[0] * dims[1];
    let coils = rng.int(2, 3);
    let m = 3 * n;
    let mut problem = Problem::fourier_grid(rng, dims, m, coils);
    problem.off_resonance = Some((
        (0..n).map(|_| rng.range(-300.0, 300.0)).collect(),
        (0..m).map(|j| 0.02 * j as f64 / m as f64).collect(),
    ));
    problem
}

fn solve(
    problem: &Problem,
    data: &[Complex32],
    options: &CgOptions<'_>,
) -> (Vec<Complex32>, horecon::CgInfo) {
    let plan = problem.plan(Precision::Accurate);
    let mut x = vec![Complex32::default(); problem.voxels()];
    let info = plan.cg(data, options, &mut x).unwrap();
    (x, info)
}

#[test]
fn converges_to_the_direct_solution() {
    let mut rng = Rng::fresh("converges_to_the_direct_solution");
    for _ in 0..3 {
        let problem = well_posed(&mut rng);
        let data = rng.complex(problem.samples * problem.coils);
        let expect = direct_solution(&problem.dense(), &data, None, problem.samples, 0.0);
        let options = CgOptions {
            max_iterations: 200,
            tolerance: 1e-7,
            ..Default::default()
        };
        let (x, info) = solve(&problem, &data, &options);
        let err = rel_error(&x, &expect);
        eprintln!(
            "N {} iterations {} residual {:.1e} error {err:.1e}",
            problem.voxels(),
            info.iterations,
            info.rel_residual
        );
        assert!(info.converged, "{info:?}");
        assert!(err <= 1e-4, "CG vs direct: {err:e}");
    }
}

#[test]
fn tikhonov_matches_the_closed_form() {
    let mut rng = Rng::fresh("tikhonov_matches_the_closed_form");
    let problem = well_posed(&mut rng);
    let e = problem.dense();
    let data = rng.complex(problem.samples * problem.coils);
    // λ comparable to the spectrum of EᴴE so that it matters.
    let trace: f64 = (0..problem.voxels())
        .map(|v| e.iter().map(|r| r[v].norm_sqr()).sum::<f64>())
        .sum();
    let lambda = 0.5 * trace / problem.voxels() as f64;
    let expect = direct_solution(&e, &data, None, problem.samples, lambda);
    let plain = direct_solution(&e, &data, None, problem.samples, 0.0);
    let options = CgOptions {
        max_iterations: 200,
        tolerance: 1e-7,
        regularizer: Regularizer::Tikhonov,
        lambda,
        ..Default::default()
    };
    let (x, _) = solve(&problem, &data, &options);
    let err = rel_error(&x, &expect);
    let x64 = to_c64(&x);
    let moved: f64 = x64
        .iter()
        .zip(&plain)
        .map(|(a, b)| (a - b).norm_sqr())
        .sum::<f64>()
        .sqrt()
        / plain.iter().map(|b| b.norm_sqr()).sum::<f64>().sqrt();
    assert!(err <= 1e-4, "Tikhonov CG vs closed form: {err:e}");
    assert!(
        moved > 1e-2,
        "λ = {lambda} had no visible effect ({moved:e})"
    );
}

#[test]
fn sample_weights_act_as_weighted_least_squares() {
    let mut rng = Rng::fresh("sample_weights_act_as_weighted_least_squares");
    let problem = well_posed(&mut rng);
    let e = problem.dense();
    let m = problem.samples;
    let truth = rng.complex(problem.voxels());
    let plan = problem.plan(Precision::Double);
    let mut data = vec![Complex32::default(); m * problem.coils];
    plan.forward(&truth, &mut data).unwrap();
    // corrupt a third of the samples in every coil, then weight them to zero
    let mut weights = vec![1.0f32; m];
    for j in (0..m).step_by(3) {
        weights[j] = 0.0;
        for c in 0..problem.coils {
            data[c * m + j] += Complex32::new(5.0, -3.0);
        }
    }
    let expect = direct_solution(&e, &data, Some(&weights), m, 0.0);
    let options = CgOptions {
        max_iterations: 300,
        tolerance: 1e-7,
        sample_weights: Some(&weights),
        ..Default::default()
    };
    let (weighted, _) = solve(&problem, &data, &options);
    assert!(
        rel_error(&weighted, &expect) <= 1e-4,
        "weighted CG vs closed form"
    );
    let truth64 = to_c64(&truth);
    let unweighted = solve(
        &problem,
        &data,
        &CgOptions {
            max_iterations: 300,
            tolerance: 1e-7,
            ..Default::default()
        },
    )
    .0;
    let (ew, eu) = (
        rel_error(&weighted, &truth64),
        rel_error(&unweighted, &truth64),
    );
    eprintln!("error vs truth: weighted {ew:.2e}, unweighted {eu:.2e}");
    // (the corrupted third moves the unweighted solution by 0.1 or so, the
    // weighted one stays at the float32 level)
    assert!(
        ew < 1e-3 && eu > 1e-2 && eu > 1e3 * ew,
        "zero weights must remove the corrupted samples"
    );
}

#[test]
fn warm_start_cancellation_and_iteration_limit() {
    let mut rng = Rng::fresh("warm_start_cancellation_and_iteration_limit");
    let problem = well_posed(&mut rng);
    let data = rng.complex(problem.samples * problem.coils);
    let plan = problem.plan(Precision::Accurate);
    let options = CgOptions {
        max_iterations: 200,
        tolerance: 1e-6,
        ..Default::default()
    };
    let mut solution = vec![Complex32::default(); problem.voxels()];
    let info = plan.cg(&data, &options, &mut solution).unwrap();
    assert!(info.converged && info.iterations > 2);
    // warm start at the solution: (almost) no work
    let mut again = solution.clone();
    let warm = plan
        .cg(
            &data,
            &CgOptions {
                warm_start: true,
                ..options
            },
            &mut again,
        )
        .unwrap();
    eprintln!(
        "cold start {} iterations, warm start at its solution {}",
        info.iterations, warm.iterations
    );
    // The float32 solution's true residual sits near the tolerance: 300 seeds
    // gave 0 iterations 292 times, 1 seven times, 2 once.
    assert!(
        warm.iterations <= 3 && warm.iterations < info.iterations,
        "warm start took {} iterations",
        warm.iterations
    );
    // iteration limit: not an error, converged = false
    let mut limited = vec![Complex32::default(); problem.voxels()];
    let few = plan
        .cg(
            &data,
            &CgOptions {
                max_iterations: 2,
                tolerance: 1e-12,
                ..options
            },
            &mut limited,
        )
        .unwrap();
    assert_eq!((few.iterations, few.converged), (2, false));
    // cancellation: error, image untouched, callback saw iterations 1..=3
    let seen = std::sync::Mutex::new(vec![]);
    let stop = |iteration: usize, _rel: f64| {
        seen.lock().unwrap().push(iteration);
        iteration == 3
    };
    let mut image = rng.complex(problem.voxels());
    let before = image.clone();
    let err = plan
        .cg(
            &data,
            &CgOptions {
                progress: Some(&stop),
                ..options
            },
            &mut image,
        )
        .unwrap_err();
    assert_eq!(err.status, Status::Cancelled);
    assert_eq!(image, before, "cancelled CG wrote the image");
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]);
}

/// A problem of rank ≤ `coils`: one user basis function that is the same
/// at every voxel, so each coil sees one phase per sample.
fn rank_deficient(rng: &mut Rng) -> Problem {
    let (nx, ny) = (rng.int(4, 9), rng.int(3, 7));
    let n = nx * ny;
    let coils = rng.int(1, 3);
    let m = rng.int(10, 60);
    Problem {
        dims: [nx, ny, 1],
        coils,
        samples: m,
        positions: (0..3 * n).map(|_| rng.range(-0.1, 0.1)).collect(),
        terms: 1,
        user_basis: Some(vec![1.0; n]),
        coefficients: (0..m).map(|_| rng.range(-3.0, 3.0)).collect(),
        off_resonance: None,
        sensitivities: Some(rng.complex(n * coils)),
    }
}

/// Once a singular system is solved to the rounding level, CG stops
/// (tolerance 0 included) instead of dividing rounding noise by a vanishing
/// pᴴAp: the image after many iterations is the one at convergence, and its
/// normal-equation residual is at rounding level (it went 9e-16 → 5 in
/// three more iterations before the floor, and differed between runs).
#[test]
fn cg_stops_at_the_rounding_level_of_a_singular_system() {
    let mut rng = Rng::fresh("cg_stops_at_the_rounding_level_of_a_singular_system");
    let mut backends = vec![horecon::BackendKind::Cpu];
    match horecon::backend::cuda::context::probe() {
        Ok(_) => backends.push(horecon::BackendKind::Cuda),
        Err(reason) => eprintln!("CUDA skipped ({reason})"),
    }
    for _ in 0..4 {
        let problem = rank_deficient(&mut rng);
        let data = rng.complex(problem.samples * problem.coils);
        for &backend in &backends {
            for precision in [Precision::Double, Precision::Accurate, Precision::Fast] {
                let plan = problem.plan_with(horecon::Options {
                    backend,
                    precision,
                    ..Default::default()
                });
                let run = |iterations: usize| {
                    let history = std::sync::Mutex::new(Vec::new());
                    let record = |_: usize, r: f64| {
                        history.lock().unwrap().push(r);
                        false
                    };
                    let options = CgOptions {
                        max_iterations: iterations,
                        tolerance: 0.0,
                        progress: Some(&record),
                        ..Default::default()
                    };
                    let mut x = vec![Complex32::default(); problem.voxels()];
                    let info = plan.cg(&data, &options, &mut x).unwrap();
                    (x, info, history.into_inner().unwrap())
                };
                let (x, info, history) = run(40);
                let floor = horecon::solver::residual_floor(precision);
                eprintln!(
                    "{backend:?} {precision:?} coils {}: {info:?} history {:.1e}",
                    problem.coils,
                    Floats(&history)
                );
                assert!(info.iterations < 40, "{info:?}");
                assert!(info.rel_residual <= floor, "{info:?} floor {floor:.1e}");
                assert!(
                    history.iter().all(|&r| r <= 1.0),
                    "the residual grew: {history:?}"
                );
                // The same image as a solve told to stop there.
                let (again, _, _) = run(info.iterations);
                assert_eq!(rel_error(&x, &to_c64(&again)), 0.0);
                let expect = direct_minimum_norm_check(&problem, &data, &x);
                assert!(expect <= 1e-3, "normal-equation residual {expect:.1e}");
            }
        }
    }
}

/// ‖Eᴴ(E x − d)‖ / ‖Eᴴ d‖ in float64 with the dense E.
fn direct_minimum_norm_check(problem: &Problem, d: &[Complex32], x: &[Complex32]) -> f64 {
    let e = problem.dense();
    let n = problem.voxels();
    let r: Vec<Complex64> = e
        .iter()
        .zip(d)
        .map(|(row, d)| {
            (0..n)
                .map(|v| row[v] * Complex64::new(x[v].re as f64, x[v].im as f64))
                .sum::<Complex64>()
                - Complex64::new(d.re as f64, d.im as f64)
        })
        .collect();
    let adjoint = |y: &[Complex64]| -> Vec<Complex64> {
        (0..n)
            .map(|v| e.iter().zip(y).map(|(row, y)| row[v].conj() * y).sum())
            .collect()
    };
    let norm = |v: &[Complex64]| v.iter().map(|c| c.norm_sqr()).sum::<f64>().sqrt();
    let dd: Vec<Complex64> = d
        .iter()
        .map(|d| Complex64::new(d.re as f64, d.im as f64))
        .collect();
    norm(&adjoint(&r)) / norm(&adjoint(&dd))
}

/// Residuals printed in scientific notation.
struct Floats<'a>(&'a [f64]);
impl std::fmt::LowerExp for Floats<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for r in self.0 {
            write!(f, " {r:.1e}")?;
        }
        Ok(())
    }
}
