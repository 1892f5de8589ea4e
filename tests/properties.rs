//! Property tests of the Rust core (issue 11, proptest): for random sizes
//! (odd, even, singleton axes), phase models and inputs, E is linear,
//! ⟨Ex, y⟩ = ⟨x, Eᴴy⟩, the normal operator is EᴴE, and the N×L layout of
//! the sensitivities means coil c's data are those of a one-coil plan with
//! S_c. Failing cases are shrunk and printed by proptest (its seed with them).

mod common;

use common::inner;
use horecon::{BackendKind, Complex32, Options, Plan, Precision};
use proptest::prelude::*;

fn c32() -> impl Strategy<Value = Complex32> {
    (-1.0f32..1.0, -1.0f32..1.0).prop_map(|(re, im)| Complex32::new(re, im))
}

/// (dims, coils, samples, terms, positions, coefficients, sensitivities, image x, data y, a, b)
#[derive(Debug, Clone)]
struct Case {
    dims: [usize; 3],
    coils: usize,
    samples: usize,
    terms: i32,
    positions: Vec<f64>,
    coefficients: Vec<f64>,
    sensitivities: Vec<Complex32>,
    x: Vec<Complex32>,
    x2: Vec<Complex32>,
    y: Vec<Complex32>,
    a: Complex32,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..6,
        1usize..5,
        1usize..3,
        1usize..4,
        1usize..40,
        prop::sample::select(vec![1i32, 4, 9, 16]),
    )
        .prop_flat_map(|(nx, ny, nz, coils, samples, terms)| {
            let n = nx * ny * nz;
            (
                Just(([nx, ny, nz], coils, samples, terms)),
                prop::collection::vec(-0.1f64..0.1, 3 * n),
                prop::collection::vec(-300.0f64..300.0, samples * terms as usize),
                prop::collection::vec(c32(), n * coils),
                prop::collection::vec(c32(), n),
                prop::collection::vec(c32(), n),
                prop::collection::vec(c32(), samples * coils),
                c32(),
            )
        })
        .prop_map(
            |(
                (dims, coils, samples, terms),
                positions,
                coefficients,
                sensitivities,
                x,
                x2,
                y,
                a,
            )| Case {
                dims,
                coils,
                samples,
                terms,
                positions,
                coefficients,
                sensitivities,
                x,
                x2,
                y,
                a,
            },
        )
}

fn plan(c: &Case, coils: usize, sensitivities: &[Complex32]) -> Plan {
    let options = Options {
        backend: BackendKind::Cpu,
        precision: Precision::Double,
        num_threads: 1,
        ..Options::default()
    };
    let [nx, ny, nz] = c.dims;
    let mut p = Plan::new(
        options,
        nx as i64,
        ny as i64,
        nz as i64,
        coils as i64,
        c.samples as i64,
    )
    .unwrap();
    p.set_positions(&c.positions).unwrap();
    p.set_solid_harmonics(c.terms, &c.coefficients).unwrap();
    p.set_sensitivities(Some(sensitivities)).unwrap();
    p
}

fn close(a: num_complex::Complex64, b: num_complex::Complex64, scale: f64) -> bool {
    (a - b).norm() <= 1e-5 * scale.max(1e-12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn linear_and_adjoint(c in case()) {
        let p = plan(&c, c.coils, &c.sensitivities);
        let (n, ml) = (c.x.len(), c.samples * c.coils);
        let mut ex = vec![Complex32::default(); ml];
        let mut ex2 = vec![Complex32::default(); ml];
        let mut ecomb = vec![Complex32::default(); ml];
        p.forward(&c.x, &mut ex).unwrap();
        p.forward(&c.x2, &mut ex2).unwrap();
        let comb: Vec<Complex32> = c.x.iter().zip(&c.x2).map(|(u, v)| c.a * u + v).collect();
        p.forward(&comb, &mut ecomb).unwrap();
        let scale: f64 = ex.iter().chain(&ex2).map(|v| v.norm() as f64).sum::<f64>() + 1.0;
        for j in 0..ml {
            let expect = c.a * ex[j] + ex2[j];
            prop_assert!((ecomb[j] - expect).norm() as f64 <= 1e-5 * scale, "E(ax + x2)[{j}]");
        }
        let mut ehy = vec![Complex32::default(); n];
        p.adjoint(&c.y, &mut ehy).unwrap();
        let (lhs, rhs) = (inner(&ex, &c.y), inner(&c.x, &ehy));
        prop_assert!(close(lhs, rhs, lhs.norm() + rhs.norm() + 1.0), "{lhs} vs {rhs}");
        // normal = Eᴴ E
        let mut normal = vec![Complex32::default(); n];
        p.normal(&c.x, &mut normal).unwrap();
        let mut ehex = vec![Complex32::default(); n];
        p.adjoint(&ex, &mut ehex).unwrap();
        let s: f64 = ehex.iter().map(|v| v.norm() as f64).sum::<f64>() + 1.0;
        for v in 0..n {
            prop_assert!(((normal[v] - ehex[v]).norm() as f64) <= 1e-5 * s);
        }
    }

    #[test]
    fn sensitivities_are_n_by_l(c in case()) {
        let p = plan(&c, c.coils, &c.sensitivities);
        let (n, m) = (c.x.len(), c.samples);
        let mut all = vec![Complex32::default(); m * c.coils];
        p.forward(&c.x, &mut all).unwrap();
        for coil in 0..c.coils {
            let single = plan(&c, 1, &c.sensitivities[coil * n..(coil + 1) * n]);
            let mut d = vec![Complex32::default(); m];
            single.forward(&c.x, &mut d).unwrap();
            prop_assert_eq!(&all[coil * m..(coil + 1) * m], &d[..], "coil {}", coil);
        }
    }
}
