//! The fast path's set-up (issue 17) step by step on the CPU: the model's
//! features, the lattice, the phase split, the separation (expansion
//! included), the operator (NUFFT plans, factors narrowed to float32) and
//! the certificate, each timed once, then the whole set-up through the plan
//! (`approximation_info`), on the cases of examples/common/cases.rs.
//!
//! Run: cargo run --release --example profile_fast_setup [case ...]
//! (default: ho3d-64) with HORECON_BENCH_TOLERANCE=1e-3 (the approximation
//! tolerance; the expansion is asked for 0.45 of it, as the plan does) and
//! HORECON_PROFILE_ALL=0 to stop after the operator (no certificate, no plan
//! set-up: for the largest cases on small machines). The certificate step
//! here probes all coils twice: through the full operator, as CUDA plans
//! do, and through its entries at the probed points, as CPU plans do (the
//! same estimate but for float32 rounding).

#[path = "common/cases.rs"]
mod cases;

use horecon::backend::fast::{certificate, nufft_tolerance, FastOperator};
use horecon::model::lattice::Lattice;
use horecon::model::separation::{split::Split, Separation};
use horecon::{BackendKind, Options};
use std::sync::Arc;
use std::time::Instant;

/// `f`'s value and its time in seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

fn main() {
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names.push("ho3d-64".into());
    }
    let tolerance: f64 = std::env::var("HORECON_BENCH_TOLERANCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1e-3);
    let options = Options {
        backend: BackendKind::Cpu,
        ..Options::default()
    };
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .build()
            .expect("thread pool"),
    );
    for name in &names {
        let case = cases::make_case(name);
        let plan = case.plan(options);
        let model = plan.model();
        let sizes = plan.sizes();
        let positions = model.positions.as_deref().expect("positions");
        let (features, t_features) = timed(|| model.features().expect("features"));
        let (lattice, t_lattice) =
            timed(|| Lattice::detect(sizes.dims, positions).expect("lattice"));
        let (_, t_split) = timed(|| Split::new(&features, &lattice, sizes.voxels).expect("split"));
        let (separation, t_separation) =
            timed(|| Separation::new(model, &features, 0.45 * tolerance).expect("separation"));
        let (operator, t_operator) = timed(|| {
            FastOperator::new(
                &separation,
                (model.sensitivities.clone(), None),
                sizes,
                nufft_tolerance(tolerance, options.precision),
                (BackendKind::Cpu, 0),
                pool.clone(),
            )
            .expect("operator")
        });
        let all = std::env::var("HORECON_PROFILE_ALL").map_or(true, |v| v != "0");
        println!(
            "{name}: N = {}, M = {}, L = {}, K = {}, {} threads\n  features {t_features:.3} s, \
             lattice {t_lattice:.3} s, split {t_split:.3} s, separation {t_separation:.3} s \
             (expansion {:.3} s), operator {t_operator:.3} s",
            sizes.voxels,
            sizes.samples,
            sizes.coils,
            separation.rank,
            pool.current_num_threads(),
            t_separation - t_lattice - t_split,
        );
        if !all {
            continue;
        }
        let certify = |probe: &(dyn certificate::Probe + Sync)| {
            timed(|| {
                certificate::estimate(
                    probe,
                    (&features, sizes),
                    &certificate::suspects(&separation, None, model.sensitivities.as_deref())
                        .expect("suspects"),
                    certificate::probe_count(
                        separation.rank,
                        separation.lattice.grid_points(),
                        sizes,
                    ),
                    &options,
                    pool.clone(),
                )
                .expect("certificate")
            })
        };
        let (estimate, t_certificate) = certify(&certificate::Whole(&operator, sizes));
        let (entries_estimate, t_entries) = certify(&certificate::Entries {
            operator: &operator,
            points: &separation.points,
            sensitivities: None,
        });
        drop(operator);
        let mut fresh = case.plan(options);
        fresh.set_approximation(tolerance).expect("tolerance");
        let (info, t_plan) = timed(|| fresh.approximation_info().expect("set-up"));
        println!(
            "  certificate through the whole operator {t_certificate:.3} s (estimate {estimate:.2e}), \
             through its entries {t_entries:.3} s (estimate {entries_estimate:.2e}); plan set-up \
             {t_plan:.3} s \
             (K = {}, estimate {:.2e})",
            info.rank, info.estimated_error,
        );
    }
}
