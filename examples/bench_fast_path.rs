//! Benchmark of the fast path (issue 17) against the exact operators on the
//! cases of shared/bench/cases.py, in one run: set-up (expansion, NUFFT
//! plans and the certificate), E, Eᴴ and EᴴE, and optionally CG, with the
//! rank K, the certificate and the error against float64 direct sums at 16
//! samples and 16 voxels.
//!
//! Run: cargo run --release --example bench_fast_path [case ...]
//! (default: ho3d-40 ho3d-64) with
//!   HORECON_BENCH_BACKEND=cpu|cuda|auto (default auto: CUDA when usable)
//!   HORECON_BENCH_TOLERANCE=1e-3          the approximation tolerance
//!   HORECON_BENCH_EXACT=full|estimate|none (default estimate: the exact E and
//!       Eᴴ timed on 1/S of the samples and scaled by S; exact EᴴE = E + Eᴴ)
//!   HORECON_BENCH_EXACT_SUBSET=16          S (the exact cost is ∝ M: a large S
//!       keeps the estimate of ho3d-1mm on a CPU to seconds)
//!   HORECON_BENCH_CG=N                     also N CG iterations, fast and
//!       (when HORECON_BENCH_EXACT=full) exact, set-up included (the fast
//!       one also on the prepared plan)
//!   HORECON_BENCH_CHECK=16                 samples and voxels checked against float64
//!       direct sums (0: none)
//!   HORECON_BENCH_DEVICES=D               D CUDA devices (`num_devices`, split by coils)
//!   HORECON_BENCH_VERBOSITY=2             the plans' verbosity (2: set-up times)
//!   HORECON_BENCH_REPS=3                   fast E, Eᴴ, EᴴE: the best of so many
//!       calls; exact (full): one warm-up call, then one timed
//! On a CUDA plan everything runs through the plan's backend; the lines
//! printed say where (`backend`).

#[path = "common/cases.rs"]
mod cases;

use cases::{make_case, rel, Case, Reference, Rng};
use horecon::{BackendKind, CgOptions, Complex32, Options};
use num_complex::Complex64;
use std::time::Instant;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seconds(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

/// The exact E and Eᴴ on the first `rows` samples (the cost is ∝ M).
fn exact_subset_times(
    case: &Case,
    options: Options,
    rows: usize,
    image: &[Complex32],
) -> (f64, f64) {
    let m = case.samples;
    let rows = rows.min(m);
    let firsts = |values: &[f64]| -> Vec<f64> {
        values
            .chunks_exact(m)
            .flat_map(|column| column[..rows].to_vec())
            .collect()
    };
    let sub = Case {
        dims: case.dims,
        coils: case.coils,
        samples: rows,
        terms: case.terms,
        trajectory: case.trajectory,
        positions: case.positions.clone(),
        coefficients: firsts(&case.coefficients),
        off_resonance: case
            .off_resonance
            .as_ref()
            .map(|(w, t)| (w.clone(), t[..rows].to_vec())),
        sensitivities: case.sensitivities.clone(),
    };
    let plan = sub.plan(options);
    let mut data = vec![Complex32::default(); sub.samples * case.coils];
    plan.forward(image, &mut data).expect("warm-up");
    let forward = seconds(|| plan.forward(image, &mut data).expect("exact forward"));
    let mut out = vec![Complex32::default(); case.voxels()];
    let adjoint = seconds(|| plan.adjoint(&data, &mut out).expect("exact adjoint"));
    (forward, adjoint)
}

fn main() {
    let cases: Vec<String> = {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.is_empty() {
            vec!["ho3d-40".into(), "ho3d-64".into()]
        } else {
            args
        }
    };
    let backend: BackendKind = env("HORECON_BENCH_BACKEND", BackendKind::Auto);
    let tolerance: f64 = env("HORECON_BENCH_TOLERANCE", 1e-3);
    let exact_mode: String = env("HORECON_BENCH_EXACT", "estimate".to_string());
    let cg_iterations: usize = env("HORECON_BENCH_CG", 0);
    let options = Options {
        backend,
        verbosity: env("HORECON_BENCH_VERBOSITY", 0),
        num_devices: env("HORECON_BENCH_DEVICES", 1),
        ..Options::default()
    };
    for name in &cases {
        let case = make_case(name);
        let (n, m, l) = (case.voxels(), case.samples, case.coils);
        let mut rng = Rng(99);
        let image = rng.complex(n);
        let data = rng.complex(m * l);

        // Fast path: set-up = building the expansion, the NUFFT plans and the certificate.
        let mut fast = case.plan(options);
        fast.set_approximation(tolerance)
            .expect("set_approximation");
        let mut info = None;
        let setup = seconds(|| info = Some(fast.approximation_info().expect("prepare")));
        let info = info.unwrap_or_default();
        // The best of `reps` calls (the first included), host transfers included.
        let reps: usize = env("HORECON_BENCH_REPS", 3);
        let best = |mut f: Box<dyn FnMut() + '_>| -> f64 {
            (0..reps.max(1))
                .map(|_| seconds(&mut f))
                .fold(f64::INFINITY, f64::min)
        };
        let mut y = vec![Complex32::default(); m * l];
        let forward = best(Box::new(|| {
            fast.forward(&image, &mut y).expect("fast forward")
        }));
        let mut x = vec![Complex32::default(); n];
        let adjoint = best(Box::new(|| {
            fast.adjoint(&data, &mut x).expect("fast adjoint")
        }));
        let mut z = vec![Complex32::default(); n];
        let normal = best(Box::new(|| {
            fast.normal(&image, &mut z).expect("fast normal")
        }));
        let backend_name = fast
            .operator()
            .map(|o| o.backend_name())
            .unwrap_or_default();

        // Error against float64 direct sums at 16 samples and 16 voxels.
        let features = fast.model().features().expect("features");
        let reference = Reference {
            plan: &fast,
            voxel: features.voxel,
            sample: features.sample,
            terms: features.terms,
        };
        let checks: usize = env("HORECON_BENCH_CHECK", 16);
        let rows: Vec<usize> = (0..checks).map(|i| (i * 7919 + 13) % m).collect();
        let voxels: Vec<usize> = (0..checks).map(|i| (i * 104729 + 7) % n).collect();
        let want_rows: Vec<Complex64> = rows
            .iter()
            .flat_map(|&j| reference.forward_at(&image, j))
            .collect();
        let got_rows: Vec<Complex32> = rows
            .iter()
            .flat_map(|&j| (0..l).map(move |c| (j, c)))
            .map(|(j, c)| y[c * m + j])
            .collect();
        let want_voxels: Vec<Complex64> = voxels
            .iter()
            .map(|&v| reference.adjoint_at(&data, v))
            .collect();
        let got_voxels: Vec<Complex32> = voxels.iter().map(|&v| x[v]).collect();
        let (error_e, error_eh) = (rel(&got_rows, &want_rows), rel(&got_voxels, &want_voxels));

        println!(
            "{name}: N {n} M {m} L {l} tolerance {tolerance:.0e} backend {backend_name}: K {} \
             estimated error {:.2e}, measured vs float64 E {error_e:.2e} EH {error_eh:.2e}{}",
            info.rank,
            info.estimated_error,
            if info.active {
                String::new()
            } else {
                format!(" (inactive: {})", info.reason)
            }
        );
        println!(
            "{name}: fast set-up {setup:.3} s, E {forward:.3} s, EH {adjoint:.3} s, EHE {normal:.3} s"
        );

        // The exact operators.
        let exact = case.plan(options);
        let (exact_forward, exact_adjoint) = match exact_mode.as_str() {
            "full" => {
                // One warm-up call each (kernel compilation), then timed.
                let mut d = vec![Complex32::default(); m * l];
                exact.forward(&image, &mut d).expect("exact forward");
                let f = seconds(|| exact.forward(&image, &mut d).expect("exact forward"));
                let mut o = vec![Complex32::default(); n];
                exact.adjoint(&data, &mut o).expect("exact adjoint");
                let a = seconds(|| exact.adjoint(&data, &mut o).expect("exact adjoint"));
                (f, a)
            }
            "none" => (f64::NAN, f64::NAN),
            _ => {
                let subset: usize = env("HORECON_BENCH_EXACT_SUBSET", 16);
                let rows = (m / subset.max(1)).max(1);
                let (f, a) = exact_subset_times(&case, options, rows, &image);
                let scale = m as f64 / rows as f64;
                (f * scale, a * scale)
            }
        };
        if exact_forward.is_finite() {
            let normal_exact = exact_forward + exact_adjoint;
            println!(
                "{name}: exact ({exact_mode}) E {exact_forward:.3} s, EH {exact_adjoint:.3} s, \
                 EHE {normal_exact:.3} s; speed-up E {:.1}x, EH {:.1}x, EHE {:.1}x; with set-up \
                 E {:.1}x, EH {:.1}x, E and EH (one set-up) {:.1}x",
                exact_forward / forward,
                exact_adjoint / adjoint,
                normal_exact / normal,
                exact_forward / (forward + setup),
                exact_adjoint / (adjoint + setup),
                normal_exact / (forward + adjoint + setup)
            );
        }

        if cg_iterations > 0 {
            let cg = CgOptions {
                max_iterations: cg_iterations,
                tolerance: 0.0,
                ..CgOptions::default()
            };
            let mut solution = vec![Complex32::default(); n];
            let fresh = seconds(|| {
                let mut plan = case.plan(options);
                plan.set_approximation(tolerance)
                    .expect("set_approximation");
                plan.cg(&y, &cg, &mut solution).expect("fast cg");
            });
            let mut again = vec![Complex32::default(); n];
            let prepared = seconds(|| {
                fast.cg(&y, &cg, &mut again).expect("fast cg");
            });
            println!(
                "{name}: fast CG {cg_iterations} iterations, set-up included: {fresh:.3} s; \
                 on the prepared plan: {prepared:.3} s"
            );
            if exact_mode == "full" {
                let mut reference_solution = vec![Complex32::default(); n];
                let t = seconds(|| {
                    exact
                        .cg(&y, &cg, &mut reference_solution)
                        .expect("exact cg");
                });
                let want: Vec<Complex64> = reference_solution
                    .iter()
                    .map(|c| Complex64::new(c.re as f64, c.im as f64))
                    .collect();
                println!(
                    "{name}: exact CG {cg_iterations} iterations: {t:.3} s ({:.1}x); images differ by {:.2e}",
                    t / fresh,
                    rel(&solution, &want)
                );
            }
        }
    }
}
