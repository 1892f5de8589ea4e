//! The operators against float64 direct sums of MODEL.md on fresh random
//! problems (seed printed), each precision mode against its accuracy class.

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
