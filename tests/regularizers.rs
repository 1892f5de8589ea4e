//! The finite-difference, total-variation and Laplace regularizers: D and
//! Dᴴ W D against a dense float64 construction, adjointness, the gradients of
//! the objectives by finite differences, FD-regularised CG against the dense
//! closed form, stationarity of the reweighted solutions, phantom recovery
//! against Tikhonov, and the option errors.

#![allow(clippy::needless_range_loop)]
mod common;
use common::*;
use horecon::backend::cpu::fd::{self, Grid};
use horecon::solver::{Neighbourhood, Penalty};
use horecon::{CgOptions, Complex32, Options, Plan, Precision, Regularizer, Status};
use num_complex::Complex64;

/// Grids of odd and even sizes, 1D, 2D and 3D (and singleton axes between).
const GRIDS: [[usize; 3]; 10] = [
    [5, 1, 1],
    [4, 1, 1],
    [1, 6, 1],
    [3, 4, 1],
    [4, 5, 1],
    [5, 1, 3],
    [3, 2, 3],
    [2, 3, 4],
    [1, 4, 3],
    [1, 1, 1],
];

/// The 26-neighbourhood's directions in the documented order (C API
/// `neighbours`), over the axes of more than one voxel.
const FULL_ORDER: [[isize; 3]; 13] = [
    [1, 0, 0],
    [0, 1, 0],
    [0, 0, 1],
    [1, 1, 0],
    [1, -1, 0],
    [1, 0, 1],
    [1, 0, -1],
    [0, 1, 1],
    [0, 1, -1],
    [1, 1, 1],
    [1, 1, -1],
    [1, -1, 1],
    [1, -1, -1],
];

const NEIGHBOURHOODS: [Neighbourhood; 2] = [Neighbourhood::Axes, Neighbourhood::Full];

/// The directions of D as offsets in x, y, z with their weights 1/|d|²,
/// built here from the documented order, independently of the library.
fn dense_directions(dims: [usize; 3], nb: Neighbourhood) -> Vec<([isize; 3], f64)> {
    let axes: Vec<usize> = (0..3).filter(|&a| dims[a] > 1).collect();
    let candidates = match nb {
        Neighbourhood::Axes => &FULL_ORDER[..3],
        Neighbourhood::Full => &FULL_ORDER[..],
    };
    let mut out = vec![];
    for o in candidates {
        if (0..3).any(|k| o[k] != 0 && k >= axes.len()) {
            continue;
        }
        let mut offset = [0isize; 3];
        for (k, &a) in axes.iter().enumerate() {
            offset[a] = o[k];
        }
        let length_sqr: isize = o.iter().map(|v| v * v).sum();
        out.push((offset, 1.0 / length_sqr as f64));
    }
    if out.is_empty() {
        out.push(([1, 0, 0], 1.0));
    }
    out
}

/// The edges of D built from coordinates, independently of the library:
/// (number of directions, edges (direction d, voxel n, neighbour n + d, weight 1/|d|²)).
fn dense_edges(dims: [usize; 3], nb: Neighbourhood) -> (usize, Vec<(usize, usize, usize, f64)>) {
    let directions = dense_directions(dims, nb);
    let mut edges = vec![];
    for (d, &(offset, c)) in directions.iter().enumerate() {
        for iz in 0..dims[2] {
            for iy in 0..dims[1] {
                for ix in 0..dims[0] {
                    let at = [ix, iy, iz];
                    let to: Vec<isize> = (0..3).map(|a| at[a] as isize + offset[a]).collect();
                    if (0..3).all(|a| to[a] >= 0 && (to[a] as usize) < dims[a]) {
                        let n = ix + dims[0] * (iy + dims[1] * iz);
                        let s =
                            to[0] as usize + dims[0] * (to[1] as usize + dims[1] * to[2] as usize);
                        edges.push((d, n, s, c));
                    }
                }
            }
        }
    }
    (directions.len(), edges)
}

fn c64(rng: &mut Rng, n: usize) -> Vec<Complex64> {
    (0..n)
        .map(|_| Complex64::new(rng.normal(), rng.normal()))
        .collect()
}

fn rel64(a: &[Complex64], b: &[Complex64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(a, b)| (a - b).norm_sqr()).sum();
    let den: f64 = b.iter().map(|b| b.norm_sqr()).sum();
    (num / den.max(1e-300)).sqrt()
}

#[test]
fn directions_follow_the_documented_order() {
    for dims in GRIDS.into_iter().chain([[3, 4, 5], [2, 2, 2]]) {
        for nb in NEIGHBOURHOODS {
            let grid = Grid::with_neighbourhood(dims, nb);
            let want = dense_directions(dims, nb);
            assert_eq!(grid.ndims(), want.len(), "{dims:?} {nb:?}");
            for (d, (offset, c)) in grid.directions().iter().zip(&want) {
                let stride = offset[0]
                    + dims[0] as isize * offset[1]
                    + (dims[0] * dims[1]) as isize * offset[2];
                assert_eq!(d.stride, stride, "{dims:?} {nb:?}");
                assert_eq!(d.weight, *c, "{dims:?} {nb:?}");
            }
        }
    }
    // 3D: 3 and 13 directions; 2D: 2 and 4 (the 8-neighbourhood); 1D: 1 and 1
    let count = |dims, nb| Grid::with_neighbourhood(dims, nb).ndims();
    assert_eq!(count([3, 4, 5], Neighbourhood::Full), 13);
    assert_eq!(count([3, 4, 5], Neighbourhood::Axes), 3);
    assert_eq!(count([3, 1, 5], Neighbourhood::Full), 4);
    assert_eq!(count([1, 7, 1], Neighbourhood::Full), 1);
    assert_eq!(count([1, 1, 1], Neighbourhood::Full), 1);
    assert_eq!(Neighbourhood::from_code(0).unwrap(), Neighbourhood::Axes);
    assert_eq!(Neighbourhood::from_code(6).unwrap(), Neighbourhood::Axes);
    assert_eq!(Neighbourhood::from_code(26).unwrap(), Neighbourhood::Full);
    for bad in [-1, 4, 8, 18, 27] {
        let e = Neighbourhood::from_code(bad).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert!(e.message.contains("neighbours"), "{}", e.message);
    }
}

#[test]
fn fd_normal_matches_a_dense_construction() {
    let mut rng = Rng::fresh("fd_normal_matches_a_dense_construction");
    for dims in GRIDS.into_iter().chain([[3, 4, 5], [4, 3, 3]]) {
        for nb in NEIGHBOURHOODS {
            let grid = Grid::with_neighbourhood(dims, nb);
            let n: usize = dims.iter().product();
            let (ndims, edges) = dense_edges(dims, nb);
            assert_eq!(grid.ndims(), ndims, "{dims:?} {nb:?}");
            let x = c64(&mut rng, n);
            let u: Vec<f32> = (0..n * ndims).map(|_| rng.range(0.1, 2.0) as f32).collect();
            let nu: Vec<f64> = (0..n).map(|_| rng.range(0.1, 3.0)).collect();
            let lambda = rng.range(0.5, 2.0);
            // D x (unweighted differences)
            let mut dx = vec![Complex64::default(); n * ndims];
            fd::differences(&grid, &x, &mut dx);
            let mut dx_dense = vec![Complex64::default(); n * ndims];
            for &(a, v, s, _) in &edges {
                dx_dense[a * n + v] = x[s] - x[v];
            }
            assert_eq!(dx, dx_dense, "D x on {dims:?} {nb:?}");
            // y0 + λ Dᴴ diag(c u ν) D x
            let y0 = c64(&mut rng, n);
            for (factors, weights) in [(Some(&nu[..]), Some(&u[..])), (None, None)] {
                let mut want = y0.clone();
                for &(a, v, s, c) in &edges {
                    let w = lambda
                        * c
                        * weights.map_or(1.0, |u| u[a * n + v] as f64)
                        * factors.map_or(1.0, |f| f[v]);
                    let e = w * (x[s] - x[v]);
                    want[s] += e;
                    want[v] -= e;
                }
                let mut y = y0.clone();
                fd::add_fd_normal(&grid, lambda, weights, factors, &x, &mut y);
                let err = rel64(&y, &want);
                assert!(err <= 1e-14, "Dᴴ W D on {dims:?} {nb:?}: {err:e}");
            }
            // weighted gradient magnitude
            let mut g = vec![0.0; n];
            fd::gradient_magnitude(&grid, Some(&u), &x, &mut g);
            let mut g2 = vec![0.0; n];
            for &(a, v, s, c) in &edges {
                g2[v] += c * u[a * n + v] as f64 * (x[s] - x[v]).norm_sqr();
            }
            for v in 0..n {
                assert!(
                    (g[v] - g2[v].sqrt()).abs() <= 1e-12 * (1.0 + g[v]),
                    "{dims:?} {nb:?}"
                );
            }
        }
    }
}

#[test]
fn differences_and_their_adjoint_are_adjoint() {
    let mut rng = Rng::fresh("differences_and_their_adjoint_are_adjoint");
    for dims in GRIDS.into_iter().chain([[3, 4, 5]]) {
        for nb in NEIGHBOURHOODS {
            let grid = Grid::with_neighbourhood(dims, nb);
            let n = grid.voxels();
            let x = c64(&mut rng, n);
            // random values on every entry, edgeless voxels included
            let e = c64(&mut rng, n * grid.ndims());
            let mut dx = vec![Complex64::default(); e.len()];
            fd::differences(&grid, &x, &mut dx);
            let mut dhe = vec![Complex64::default(); n];
            fd::differences_adjoint(&grid, &e, &mut dhe);
            let lhs: Complex64 = dx.iter().zip(&e).map(|(a, b)| a.conj() * b).sum();
            let rhs: Complex64 = x.iter().zip(&dhe).map(|(a, b)| a.conj() * b).sum();
            let scale = (lhs.norm() + rhs.norm()).max(1.0);
            assert!(
                (lhs - rhs).norm() <= 1e-12 * scale,
                "{dims:?} {nb:?}: <Dx,e> = {lhs}, <x,Dᴴe> = {rhs}"
            );
            if n > 1 {
                assert!(lhs.norm() > 1e-3, "{dims:?}: degenerate check");
            }
            // Dᴴ diag(c) D = add_fd_normal with unit weights
            let c: Vec<f64> = grid.directions().iter().map(|d| d.weight).collect();
            let cdx: Vec<Complex64> = dx.iter().enumerate().map(|(k, v)| v * c[k / n]).collect();
            let mut dhd = vec![Complex64::default(); n];
            fd::differences_adjoint(&grid, &cdx, &mut dhd);
            let mut y = vec![Complex64::default(); n];
            fd::add_fd_normal::<f64>(&grid, 1.0, None, None, &x, &mut y);
            assert!(rel64(&y, &dhd) <= 1e-14 || n == 1, "{dims:?} {nb:?}");
        }
    }
}

/// ψ of each penalty written out here, independently of the library.
fn psi(penalty: &str, g: f64, epsilon: f64, sigma: f64) -> f64 {
    match penalty {
        "quadratic" => 0.5 * g * g,
        "tv" => (g * g + epsilon * epsilon).sqrt(),
        "laplace" => 1.0 - (-(g * g + epsilon * epsilon).sqrt() / sigma).exp(),
        _ => unreachable!(),
    }
}

/// R(ρ) = 2·Σ_n ψ(g_n), g_n² = Σ_d c_d u_{d,n}|(Dρ)_{d,n}|², from the dense edges.
#[allow(clippy::too_many_arguments)]
fn penalty_value(
    dims: [usize; 3],
    nb: Neighbourhood,
    u: &[f32],
    x: &[Complex64],
    penalty: &str,
    epsilon: f64,
    sigma: f64,
) -> f64 {
    let n = x.len();
    let (_, edges) = dense_edges(dims, nb);
    let mut g2 = vec![0.0; n];
    for &(a, v, s, c) in &edges {
        g2[v] += c * u[a * n + v] as f64 * (x[s] - x[v]).norm_sqr();
    }
    g2.iter()
        .map(|&g2| 2.0 * psi(penalty, g2.sqrt(), epsilon, sigma))
        .sum()
}

#[test]
fn penalty_gradients_match_finite_differences() {
    let mut rng = Rng::fresh("penalty_gradients_match_finite_differences");
    for (dims, nb) in [
        ([4, 1, 1], Neighbourhood::Axes),
        ([3, 4, 1], Neighbourhood::Axes),
        ([3, 2, 3], Neighbourhood::Axes),
        ([3, 4, 1], Neighbourhood::Full),
        ([3, 2, 3], Neighbourhood::Full),
    ] {
        let grid = Grid::with_neighbourhood(dims, nb);
        let n = grid.voxels();
        let u: Vec<f32> = (0..n * grid.ndims())
            .map(|_| rng.range(0.2, 2.0) as f32)
            .collect();
        let (epsilon, sigma) = (rng.range(0.05, 0.3), rng.range(0.5, 2.0));
        for (name, penalty) in [
            ("quadratic", Penalty::Quadratic),
            ("tv", Penalty::TotalVariation { epsilon }),
            ("laplace", Penalty::Laplace { epsilon, sigma }),
        ] {
            let x = c64(&mut rng, n);
            // the library's value agrees with the formula
            for g in [0.0, 0.3, 2.0] {
                assert!((penalty.value(g) - psi(name, g, epsilon, sigma)).abs() <= 1e-14);
            }
            // gradient (∂/∂Re + i∂/∂Im) of R = 2Σψ(g_n): 2·Dᴴ diag(c·u·ν(g)) D ρ
            let mut g = vec![0.0; n];
            fd::gradient_magnitude(&grid, Some(&u), &x, &mut g);
            let nu: Vec<f64> = g.iter().map(|&g| penalty.weight(g)).collect();
            let mut gradient = vec![Complex64::default(); n];
            fd::add_fd_normal(&grid, 2.0, Some(&u), Some(&nu), &x, &mut gradient);
            let h = 1e-6;
            let mut numeric = vec![Complex64::default(); n];
            for v in 0..n {
                let mut part = [0.0; 2];
                for (k, step) in [Complex64::new(h, 0.0), Complex64::new(0.0, h)]
                    .into_iter()
                    .enumerate()
                {
                    let (mut plus, mut minus) = (x.clone(), x.clone());
                    plus[v] += step;
                    minus[v] -= step;
                    part[k] = (penalty_value(dims, nb, &u, &plus, name, epsilon, sigma)
                        - penalty_value(dims, nb, &u, &minus, name, epsilon, sigma))
                        / (2.0 * h);
                }
                numeric[v] = Complex64::new(part[0], part[1]);
            }
            let err = rel64(&gradient, &numeric);
            eprintln!("{dims:?} {nb:?} {name}: gradient vs finite differences {err:.1e}");
            assert!(err <= 1e-6, "{dims:?} {nb:?} {name}: {err:e}");
        }
    }
}

/// A tiny well-posed problem on a grid: random k inside the Nyquist box,
/// `oversampling`·N samples, `coils` coils.
fn grid_problem(rng: &mut Rng, dims: [usize; 3], oversampling: usize, coils: usize) -> Problem {
    let n: usize = dims.iter().product();
    Problem::fourier_grid(rng, dims, oversampling * n, coils)
}

/// The problem's plan on the default backend (CUDA on a GPU machine, else the CPU).
fn plan_on_default(problem: &Problem, precision: Precision) -> Plan {
    let plan = problem.plan_with(Options {
        precision,
        ..Options::default()
    });
    eprintln!("backend {:?} ({precision:?})", plan.backend());
    plan
}

/// Solves A x = b (dense, partial pivoting).
fn solve_dense(mut a: Vec<Vec<Complex64>>, mut b: Vec<Complex64>) -> Vec<Complex64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&x, &y| a[x][col].norm().total_cmp(&a[y][col].norm()))
            .unwrap();
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            for k in col..n {
                let v = a[col][k];
                a[row][k] -= f * v;
            }
            let v = b[col];
            b[row] -= f * v;
        }
    }
    let mut x = vec![Complex64::default(); n];
    for row in (0..n).rev() {
        let s: Complex64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x
}

/// EᴴE (N×N) and Eᴴd.
fn normal_equations(
    e: &[Vec<Complex64>],
    d: &[Complex32],
) -> (Vec<Vec<Complex64>>, Vec<Complex64>) {
    let n = e[0].len();
    let mut a = vec![vec![Complex64::default(); n]; n];
    let mut b = vec![Complex64::default(); n];
    for (r, row) in e.iter().enumerate() {
        let dr = Complex64::new(d[r].re as f64, d[r].im as f64);
        for p in 0..n {
            let cp = row[p].conj();
            b[p] += cp * dr;
            for q in 0..n {
                a[p][q] += cp * row[q];
            }
        }
    }
    (a, b)
}

#[test]
fn fd_regularised_cg_matches_the_closed_form() {
    let mut rng = Rng::fresh("fd_regularised_cg_matches_the_closed_form");
    // under-determined (M = N/2 per coil, one coil): D makes the system solvable
    for (dims, oversampling, coils, nb) in [
        ([5, 4, 1], 1, 2, Neighbourhood::Axes),
        ([4, 3, 2], 1, 1, Neighbourhood::Axes),
        ([7, 1, 1], 2, 1, Neighbourhood::Axes),
        ([5, 4, 1], 1, 2, Neighbourhood::Full),
        ([3, 4, 3], 1, 1, Neighbourhood::Full),
    ] {
        let problem = grid_problem(&mut rng, dims, oversampling, coils);
        let n = problem.voxels();
        let plan = plan_on_default(&problem, Precision::Double);
        let ndims = Grid::with_neighbourhood(dims, nb).ndims();
        let data = rng.complex(problem.samples * problem.coils);
        let u: Vec<f32> = (0..n * ndims).map(|_| rng.range(0.2, 2.0) as f32).collect();
        let e = problem.dense();
        let (mut a, b) = normal_equations(&e, &data);
        let lambda = 0.3 * (problem.samples * problem.coils) as f64;
        let (_, edges) = dense_edges(dims, nb);
        for &(ax, v, s, c) in &edges {
            let w = lambda * c * u[ax * n + v] as f64;
            a[v][v] += w;
            a[s][s] += w;
            a[v][s] -= w;
            a[s][v] -= w;
        }
        let expect = solve_dense(a, b);
        // CG on `plan` to `tolerance`, with the weights `weights` (None: 1).
        let solve = |plan: &Plan, tolerance: f64, weights: Option<&[f32]>| {
            let mut x = vec![Complex32::default(); n];
            let options = CgOptions {
                max_iterations: 500,
                tolerance,
                regularizer: Regularizer::FiniteDifference,
                lambda,
                fd_weights: weights,
                neighbourhood: nb,
                ..Default::default()
            };
            let info = plan.cg(&data, &options, &mut x).unwrap();
            (x, info)
        };
        let (x, info) = solve(&plan, 1e-9, Some(&u));
        let err = rel_error(&x, &expect);
        eprintln!(
            "{dims:?} {nb:?}: {} iterations, residual {:.1e}, vs closed form {err:.1e}",
            info.iterations, info.rel_residual
        );
        assert!(info.converged && err <= 1e-5, "{dims:?} {nb:?}: {err:e}");
        // accurate (float32) precision too, and unit weights differ from u
        let (x32, _) = solve(
            &plan_on_default(&problem, Precision::Accurate),
            1e-6,
            Some(&u),
        );
        let err32 = rel_error(&x32, &expect);
        assert!(err32 <= 1e-4, "{dims:?} {nb:?} accurate: {err32:e}");
        let (unit, _) = solve(&plan, 1e-9, None);
        assert!(rel_error(&unit, &expect) > 1e-3, "fd_weights had no effect");
    }
}

/// J(ρ) = ‖Eρ − d‖² + λ·R(ρ) in float64 from the dense E.
fn objective(
    e: &[Vec<Complex64>],
    d: &[Complex32],
    lambda: f64,
    reg: &dyn Fn(&[Complex64]) -> f64,
    x: &[Complex64],
) -> f64 {
    let data: f64 = e
        .iter()
        .zip(d)
        .map(|(row, d)| {
            let ex: Complex64 = row.iter().zip(x).map(|(a, b)| a * b).sum();
            (ex - Complex64::new(d.re as f64, d.im as f64)).norm_sqr()
        })
        .sum();
    data + lambda * reg(x)
}

/// ∇J by central differences (∂/∂Re + i∂/∂Im).
fn numeric_gradient(j: &dyn Fn(&[Complex64]) -> f64, x: &[Complex64], h: f64) -> Vec<Complex64> {
    (0..x.len())
        .map(|v| {
            let mut part = [0.0; 2];
            for (k, step) in [Complex64::new(h, 0.0), Complex64::new(0.0, h)]
                .into_iter()
                .enumerate()
            {
                let (mut plus, mut minus) = (x.to_vec(), x.to_vec());
                plus[v] += step;
                minus[v] -= step;
                part[k] = (j(&plus) - j(&minus)) / (2.0 * h);
            }
            Complex64::new(part[0], part[1])
        })
        .collect()
}

/// The steepest one-sided descent max(−J'(x; v), −J'(x; −v)) over unit
/// directions v (every coordinate, real and imaginary, and 16 random ones),
/// by forward differences of step h.
fn steepest_descent(
    j: &dyn Fn(&[Complex64]) -> f64,
    x: &[Complex64],
    h: f64,
    rng: &mut Rng,
) -> f64 {
    let n = x.len();
    let mut directions: Vec<Vec<Complex64>> = (0..2 * n)
        .map(|k| {
            let mut v = vec![Complex64::default(); n];
            v[k / 2] = if k % 2 == 0 {
                Complex64::new(1.0, 0.0)
            } else {
                Complex64::new(0.0, 1.0)
            };
            v
        })
        .collect();
    for _ in 0..16 {
        let v = c64(rng, n);
        let length = norm(&v);
        directions.push(v.iter().map(|v| v / length).collect());
    }
    let at_x = j(x);
    directions
        .iter()
        .flat_map(|v| {
            [1.0, -1.0].map(|sign| {
                let moved: Vec<Complex64> =
                    x.iter().zip(v).map(|(x, v)| x + sign * h * v).collect();
                (at_x - j(&moved)) / h
            })
        })
        .fold(f64::NEG_INFINITY, f64::max)
}

fn norm(v: &[Complex64]) -> f64 {
    v.iter().map(|v| v.norm_sqr()).sum::<f64>().sqrt()
}

#[test]
fn reweighted_solutions_are_stationary_points() {
    let mut rng = Rng::fresh("reweighted_solutions_are_stationary_points");
    let dims = [5, 4, 1];
    let problem = grid_problem(&mut rng, dims, 2, 2);
    let n = problem.voxels();
    let plan = plan_on_default(&problem, Precision::Double);
    let truth = rng.complex(n);
    let mut data = vec![Complex32::default(); problem.samples * problem.coils];
    plan.forward(&truth, &mut data).unwrap();
    for v in data.iter_mut() {
        *v += Complex32::new(0.3 * rng.normal() as f32, 0.3 * rng.normal() as f32);
    }
    let e = problem.dense();
    // 4 columns: the 8-neighbourhood's directions (the axes use the first 2)
    let u_all: Vec<f32> = (0..4 * n).map(|_| rng.range(0.5, 1.5) as f32).collect();
    let lambda = 0.05 * (problem.samples * problem.coils) as f64;
    for (name, regularizer, epsilon, sigma, steps, nb) in [
        (
            "tv",
            Regularizer::TotalVariation,
            0.1,
            1.0,
            60,
            Neighbourhood::Axes,
        ),
        (
            "laplace",
            Regularizer::Laplace,
            0.1,
            2.0,
            60,
            Neighbourhood::Axes,
        ),
        (
            "tv",
            Regularizer::TotalVariation,
            0.1,
            1.0,
            60,
            Neighbourhood::Full,
        ),
        (
            "laplace",
            Regularizer::Laplace,
            0.1,
            2.0,
            40,
            Neighbourhood::Full,
        ),
    ] {
        let u = &u_all[..n * Grid::with_neighbourhood(dims, nb).ndims()];
        let solve = |reweightings: usize| {
            let mut x = vec![Complex32::default(); n];
            let info = plan
                .cg(
                    &data,
                    &CgOptions {
                        max_iterations: 100,
                        tolerance: 1e-10,
                        regularizer,
                        lambda,
                        reweightings,
                        epsilon,
                        sigma,
                        fd_weights: Some(u),
                        neighbourhood: nb,
                        ..Default::default()
                    },
                    &mut x,
                )
                .unwrap();
            (info, to_c64(&x))
        };
        // The reweighting converges linearly, and with Laplace's ε continued
        // towards 0 an edge that is collapsing (g → 0, where ψ has a kink)
        // can take hundreds of steps (seen in about 1 of 300 random
        // problems): double the steps until the solution is stationary.
        let mut reweightings = steps;
        loop {
            let (info, x64) = solve(reweightings);
            if reweightings == steps {
                assert!(info.iterations > steps);
            }
            // Laplace's ε has been continued to ε·0.1^(reweightings − 2) by the last step
            let final_epsilon = if name == "laplace" {
                epsilon * 0.1f64.powi(reweightings as i32 - 2)
            } else {
                epsilon
            };
            let reg = |x: &[Complex64]| penalty_value(dims, nb, u, x, name, final_epsilon, sigma);
            let j = |x: &[Complex64]| objective(&e, &data, lambda, &reg, x);
            let scale = norm(&numeric_gradient(&j, &to_c64(&truth), 1e-6));
            // ψ may have a kink where an edge has collapsed: test stationarity
            // as "no descent direction", max over directions v of −J'(x; ±v),
            // which for a smooth J is |∇J·v|.
            let descent = steepest_descent(&j, &x64, 1e-6, &mut rng) / scale;
            eprintln!(
                "{name} {nb:?}: {} iterations in {reweightings} steps; steepest descent at the solution / |∇J| at the truth = {descent:.1e}",
                info.iterations
            );
            if descent <= 1e-3 {
                // and its objective is below the truth's
                assert!(j(&x64) < j(&to_c64(&truth)));
                break;
            }
            assert!(
                reweightings < 16 * steps,
                "{name} {nb:?}: not stationary after {reweightings} steps ({descent:e})"
            );
            reweightings *= 2;
        }
    }
}

/// A piecewise-constant 2D phantom: background, an ellipse, two rectangles.
fn phantom(nx: usize, ny: usize) -> Vec<Complex32> {
    let mut x = vec![Complex32::default(); nx * ny];
    for iy in 0..ny {
        for ix in 0..nx {
            let (fx, fy) = (
                (ix as f64 + 0.5) / nx as f64 - 0.5,
                (iy as f64 + 0.5) / ny as f64 - 0.5,
            );
            let mut v = 0.0;
            if (fx / 0.42).powi(2) + (fy / 0.36).powi(2) <= 1.0 {
                v = 1.0;
            }
            if (-0.25..-0.05).contains(&fx) && (-0.2..0.15).contains(&fy) {
                v = 0.4;
            }
            if (0.08..0.28).contains(&fx) && (-0.1..0.05).contains(&fy) {
                v = 1.6;
            }
            if (0.05..0.2).contains(&fx) && (0.15..0.25).contains(&fy) {
                v = 0.0;
            }
            x[ix + nx * iy] = Complex32::new(v as f32, 0.0);
        }
    }
    x
}

/// Undersampled radial spokes through the Nyquist square.
fn radial(nx: usize, spokes: usize, fov: f64) -> Vec<f64> {
    let per_spoke = nx;
    let m = spokes * per_spoke;
    let kmax = std::f64::consts::PI * nx as f64 / fov;
    let mut k = vec![0.0; 2 * m];
    for s in 0..spokes {
        let angle = std::f64::consts::PI * s as f64 / spokes as f64;
        for r in 0..per_spoke {
            let radius = kmax * (r as f64 - (per_spoke / 2) as f64) / (per_spoke / 2) as f64;
            k[s * per_spoke + r] = radius * angle.cos();
            k[m + s * per_spoke + r] = radius * angle.sin();
        }
    }
    k
}

#[test]
fn tv_and_laplace_recover_a_piecewise_constant_phantom_better_than_tikhonov() {
    let mut rng = Rng::fresh("tv_and_laplace_recover_a_piecewise_constant_phantom");
    let (nx, ny) = (32, 32);
    let fov = 0.2;
    let spokes = 12; // N = 1024 unknowns, M = 384 samples: 2.7× undersampled
    let k = radial(nx, spokes, fov);
    let m = k.len() / 2;
    // the default backend: CUDA on a GPU machine, else the CPU
    let mut plan = Plan::new(Options::default(), nx as i64, ny as i64, 1, 1, m as i64).unwrap();
    plan.set_grid_positions([fov, fov, 0.005], [0.0; 3])
        .unwrap();
    plan.set_trajectory(2, &k).unwrap();
    let truth = phantom(nx, ny);
    let mut data = vec![Complex32::default(); m];
    plan.forward(&truth, &mut data).unwrap();
    let rms = (data.iter().map(|d| d.norm_sqr() as f64).sum::<f64>() / m as f64).sqrt();
    for d in data.iter_mut() {
        let s = (0.01 * rms) as f32;
        *d += Complex32::new(s * rng.normal() as f32, s * rng.normal() as f32);
    }
    let truth64 = to_c64(&truth);
    let scale = m as f64;
    eprintln!("backend {:?}", plan.backend());
    let run = |regularizer, lambda: f64, sigma: f64, epsilon: f64, nb: Neighbourhood| {
        let mut x = vec![Complex32::default(); nx * ny];
        let info = plan
            .cg(
                &data,
                &CgOptions {
                    max_iterations: 40,
                    tolerance: 1e-6,
                    regularizer,
                    lambda,
                    reweightings: 10,
                    epsilon,
                    sigma,
                    neighbourhood: nb,
                    ..Default::default()
                },
                &mut x,
            )
            .unwrap();
        (rel_error(&x, &truth64), info.iterations)
    };
    let best = |regularizer, lambdas: &[f64], sigma: f64, epsilon: f64, nb: Neighbourhood| {
        lambdas
            .iter()
            .map(|&l| {
                let (e, it) = run(regularizer, l * scale, sigma, epsilon, nb);
                eprintln!("  {regularizer:?} {nb:?} λ = {l:.0e}·M: NRMSE {e:.3} ({it} iterations)");
                (e, l)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap()
    };
    let (tikhonov, lt) = best(
        Regularizer::Tikhonov,
        &[1e-4, 1e-3, 1e-2, 1e-1, 3e-1],
        1.0,
        1e-2,
        Neighbourhood::Axes,
    );
    let (tv, ltv) = best(
        Regularizer::TotalVariation,
        &[1e-3, 1e-2, 3e-2, 1e-1],
        1.0,
        1e-2,
        Neighbourhood::Axes,
    );
    let (laplace, ll) = best(
        Regularizer::Laplace,
        &[1e-3, 3e-3, 1e-2, 3e-2],
        0.2,
        0.1,
        Neighbourhood::Axes,
    );
    // the 8-neighbourhood (neighbours = 26 on this 2D grid)
    let (tv8, ltv8) = best(
        Regularizer::TotalVariation,
        &[1e-3, 1e-2, 3e-2, 1e-1],
        1.0,
        1e-2,
        Neighbourhood::Full,
    );
    eprintln!(
        "NRMSE: Tikhonov {tikhonov:.3} (λ = {lt:.0e}·M), TV {tv:.3} (λ = {ltv:.0e}·M), \
         Laplace {laplace:.3} (λ = {ll:.0e}·M), TV with 8 neighbours {tv8:.3} (λ = {ltv8:.0e}·M)"
    );
    assert!(
        tv8 < 0.7 * tikhonov,
        "TV (8 neighbours) {tv8} vs Tikhonov {tikhonov}"
    );
    assert!(tv < 0.7 * tikhonov, "TV {tv} vs Tikhonov {tikhonov}");
    assert!(
        laplace < 0.7 * tikhonov,
        "Laplace {laplace} vs Tikhonov {tikhonov}"
    );
}

#[test]
fn reweighting_counts_iterations_over_all_steps() {
    let mut rng = Rng::fresh("reweighting_counts_iterations_over_all_steps");
    let problem = grid_problem(&mut rng, [6, 5, 1], 1, 1);
    let plan = plan_on_default(&problem, Precision::Accurate);
    let data = rng.complex(problem.samples);
    let seen = std::sync::Mutex::new(vec![]);
    let record = |iteration: usize, _rel: f64| {
        seen.lock().unwrap().push(iteration);
        false
    };
    let mut x = vec![Complex32::default(); problem.voxels()];
    let info = plan
        .cg(
            &data,
            &CgOptions {
                max_iterations: 7,
                tolerance: 0.0,
                regularizer: Regularizer::TotalVariation,
                lambda: 0.1 * problem.samples as f64,
                reweightings: 4,
                epsilon: 0.05,
                progress: Some(&record),
                ..Default::default()
            },
            &mut x,
        )
        .unwrap();
    assert_eq!(info.iterations, 28, "{info:?}");
    assert_eq!(*seen.lock().unwrap(), (1..=28).collect::<Vec<_>>());
    // cancellation inside a later outer step
    let stop = |iteration: usize, _rel: f64| iteration == 10;
    let mut image = rng.complex(problem.voxels());
    let before = image.clone();
    let err = plan
        .cg(
            &data,
            &CgOptions {
                max_iterations: 7,
                tolerance: 0.0,
                regularizer: Regularizer::Laplace,
                lambda: 0.1 * problem.samples as f64,
                reweightings: 4,
                epsilon: 0.05,
                progress: Some(&stop),
                ..Default::default()
            },
            &mut image,
        )
        .unwrap_err();
    assert_eq!(err.status, Status::Cancelled);
    assert_eq!(image, before);
}

#[test]
fn bad_regularizer_options_are_rejected() {
    let mut rng = Rng::fresh("bad_regularizer_options_are_rejected");
    let problem = grid_problem(&mut rng, [4, 3, 2], 1, 1);
    let plan = plan_on_default(&problem, Precision::Accurate);
    let n = problem.voxels();
    let data = rng.complex(problem.samples);
    let good = vec![1.0f32; 3 * n];
    let short = vec![1.0f32; 2 * n];
    let mut negative = good.clone();
    negative[5] = -0.5;
    let mut nan = good.clone();
    nan[7] = f32::NAN;
    let base = CgOptions {
        regularizer: Regularizer::FiniteDifference,
        lambda: 1.0,
        ..Default::default()
    };
    let cases: Vec<(CgOptions<'_>, Status, &str)> = vec![
        (
            CgOptions {
                fd_weights: Some(&short),
                ..base
            },
            Status::SizeMismatch,
            "fd_weights",
        ),
        (
            CgOptions {
                fd_weights: Some(&negative),
                ..base
            },
            Status::InvalidArgument,
            "fd_weights[5]",
        ),
        (
            CgOptions {
                fd_weights: Some(&nan),
                ..base
            },
            Status::NotFinite,
            "fd_weights[7]",
        ),
        (
            CgOptions {
                fd_weights: Some(&good),
                regularizer: Regularizer::Tikhonov,
                ..base
            },
            Status::InvalidArgument,
            "fd_weights",
        ),
        (
            CgOptions {
                regularizer: Regularizer::TotalVariation,
                epsilon: 0.0,
                ..base
            },
            Status::InvalidArgument,
            "epsilon",
        ),
        (
            CgOptions {
                regularizer: Regularizer::Laplace,
                epsilon: f64::NAN,
                ..base
            },
            Status::InvalidArgument,
            "epsilon",
        ),
        (
            CgOptions {
                regularizer: Regularizer::Laplace,
                sigma: -1.0,
                ..base
            },
            Status::InvalidArgument,
            "sigma",
        ),
        (
            CgOptions {
                regularizer: Regularizer::TotalVariation,
                reweightings: 0,
                ..base
            },
            Status::InvalidArgument,
            "reweightings",
        ),
        (
            // the 26-neighbourhood of this 3D grid has 13 directions, not 3
            CgOptions {
                fd_weights: Some(&good),
                neighbourhood: Neighbourhood::Full,
                ..base
            },
            Status::SizeMismatch,
            "ndims = 13 neighbour directions",
        ),
    ];
    for (options, status, needle) in cases {
        let mut x = vec![Complex32::default(); n];
        let err = plan.cg(&data, &options, &mut x).unwrap_err();
        assert_eq!(err.status, status, "{}", err.message);
        assert!(err.message.contains(needle), "{}", err.message);
    }
    // the regularizer codes are accepted; beyond them, an error
    for code in 0..=4 {
        assert!(Regularizer::from_code(code).is_ok());
    }
    assert_eq!(
        Regularizer::from_code(5).unwrap_err().status,
        Status::InvalidArgument
    );
    // N×13 weights with the 26-neighbourhood are accepted
    let thirteen = vec![0.5f32; 13 * n];
    let mut x = vec![Complex32::default(); n];
    plan.cg(
        &data,
        &CgOptions {
            fd_weights: Some(&thirteen),
            neighbourhood: Neighbourhood::Full,
            max_iterations: 3,
            ..base
        },
        &mut x,
    )
    .unwrap();
    // irrelevant options are not checked (σ for TV)
    let mut x = vec![Complex32::default(); n];
    plan.cg(
        &data,
        &CgOptions {
            regularizer: Regularizer::TotalVariation,
            sigma: -1.0,
            epsilon: 0.1,
            reweightings: 2,
            max_iterations: 3,
            ..base
        },
        &mut x,
    )
    .unwrap();
}

#[test]
fn laplace_continues_epsilon_by_a_tenth_per_weight_update() {
    let data = [Complex32::new(1.0, 0.0)];
    let mut problem = horecon::solver::CgProblem {
        data: &data,
        sample_weights: None,
        regularizer: Regularizer::Laplace,
        lambda: 1.0,
        fd_weights: None,
        neighbourhood: Neighbourhood::Axes,
        reweightings: 5,
        epsilon: 0.3,
        sigma: 2.0,
        max_iterations: 10,
        tolerance: 0.0,
        residual_floor: 0.0,
        warm_start: false,
        progress: None,
        preconditioner: None,
        discrepancy: None,
    };
    for update in 0..4 {
        match Penalty::for_update(&problem, update).unwrap() {
            Penalty::Laplace { epsilon, sigma } => {
                let want = 0.3 * 0.1f64.powi(update as i32);
                assert!(
                    (epsilon - want).abs() <= 1e-15 * want,
                    "{update}: {epsilon}"
                );
                assert_eq!(sigma, 2.0);
            }
            other => panic!("{other:?}"),
        }
    }
    problem.regularizer = Regularizer::TotalVariation;
    assert_eq!(
        Penalty::for_update(&problem, 3).unwrap(),
        Penalty::TotalVariation { epsilon: 0.3 }
    );
    problem.regularizer = Regularizer::FiniteDifference;
    assert_eq!(
        Penalty::for_update(&problem, 2).unwrap(),
        Penalty::Quadratic
    );
}
