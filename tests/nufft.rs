//! The NUFFT (issue 14) against float64 direct sums on fresh random points:
//! types 1 and 2, 1D/2D/3D, odd/even/singleton sizes, tolerances 1e-1 …
//! 1e-12 (float64) and … 1e-6 (float32), σ = 2 and 1.25, points at ±π,
//! −3π, just below 3π and clustered into one bin; adjointness (type 1 with
//! sign s against type 2 with −s), batches against single transforms, and
//! every bad argument.

mod common;
use common::Rng;
use horecon::nufft::direct;
use horecon::nufft::{Modes, Nufft, NufftSpec, NufftType, Upsampling};
use horecon::{BackendKind, Options, Precision, Status};
use num_complex::{Complex32, Complex64};
use std::f64::consts::PI;

fn options(double: bool) -> Options {
    Options {
        backend: BackendKind::Cpu,
        precision: if double {
            Precision::Double
        } else {
            Precision::Accurate
        },
        num_threads: 2,
        ..Options::default()
    }
}

/// npoints points per axis a < ndims (`points[a·npoints + j]`): uniform in
/// [−3π, 3π), with the edge values and a cluster mixed in.
fn random_points(rng: &mut Rng, ndims: usize, npoints: usize) -> Vec<f64> {
    let mut points = vec![0.0; ndims * npoints];
    let centre: Vec<f64> = (0..ndims).map(|_| rng.range(-PI, PI)).collect();
    for j in 0..npoints {
        for a in 0..ndims {
            points[a * npoints + j] = match j % 7 {
                0 => [-PI, PI, -3.0 * PI, 3.0 * PI * (1.0 - 1e-15), 0.0][(j / 7 + a) % 5],
                1 | 2 => centre[a] + rng.range(-1e-3, 1e-3),
                _ => rng.range(-3.0 * PI, 3.0 * PI),
            };
        }
    }
    points
}

fn random_c64(rng: &mut Rng, n: usize) -> Vec<Complex64> {
    (0..n)
        .map(|_| Complex64::new(rng.normal(), rng.normal()))
        .collect()
}

fn rel_error(got: &[Complex64], reference: &[Complex64]) -> f64 {
    let num: f64 = got
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b).norm_sqr())
        .sum();
    let den: f64 = reference.iter().map(|b| b.norm_sqr()).sum();
    (num / den.max(1e-300)).sqrt()
}

#[allow(clippy::too_many_arguments)]
fn plan(
    kind: NufftType,
    sizes: &[i64],
    points: &[f64],
    npoints: usize,
    sign: i32,
    tolerance: f64,
    transforms: i32,
    double: bool,
    upsampling: Upsampling,
) -> Nufft {
    let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
    let spec = NufftSpec::new(
        kind,
        modes,
        sign,
        tolerance,
        transforms,
        double,
        Some(upsampling),
    )
    .unwrap();
    Nufft::with_spec(spec, points, npoints, &options(double), None).unwrap()
}

/// Runs one transform of `plan` on float64 inputs (through the float32 or
/// float64 entry point) and returns its float64 output.
fn run(plan: &Nufft, input: &[Complex64], via_c32: bool) -> Vec<Complex64> {
    let (m, n) = plan.lengths();
    let kind = plan.spec().kind;
    if via_c32 {
        let narrow = |v: &[Complex64]| -> Vec<Complex32> {
            v.iter()
                .map(|c| Complex32::new(c.re as f32, c.im as f32))
                .collect()
        };
        let (mut c, mut f) = match kind {
            NufftType::One => (narrow(input), vec![Complex32::default(); n]),
            NufftType::Two => (vec![Complex32::default(); m], narrow(input)),
        };
        plan.execute(&mut c, &mut f).unwrap();
        let out = if kind == NufftType::One { f } else { c };
        out.iter()
            .map(|c| Complex64::new(c.re as f64, c.im as f64))
            .collect()
    } else {
        let (mut c, mut f) = match kind {
            NufftType::One => (input.to_vec(), vec![Complex64::default(); n]),
            NufftType::Two => (vec![Complex64::default(); m], input.to_vec()),
        };
        plan.execute_c64(&mut c, &mut f).unwrap();
        if kind == NufftType::One {
            f
        } else {
            c
        }
    }
}

const SHAPES: [&[i64]; 10] = [
    &[1],
    &[17],
    &[32],
    &[6, 5],
    &[1, 9],
    &[13, 1],
    &[5, 4, 3],
    &[1, 6, 7],
    &[4, 1, 1],
    &[7, 8, 1],
];

/// Both types, every tolerance decade, both σ, float32 and float64, against
/// the float64 direct sums: achieved relative l2 error ≤ tolerance.
#[test]
fn transforms_meet_the_tolerance() {
    let mut rng = Rng::fresh("transforms_meet_the_tolerance");
    for double in [false, true] {
        let decades = if double { 12 } else { 6 };
        for exponent in 1..=decades {
            let tolerance = 10f64.powi(-exponent);
            for upsampling in [Upsampling::Two, Upsampling::OneQuarter] {
                for (s, sizes) in SHAPES.iter().enumerate() {
                    let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
                    let npoints = rng.int(1, 120);
                    let points = random_points(&mut rng, modes.ndims, npoints);
                    let sign = if (s + exponent as usize) % 2 == 0 {
                        1
                    } else {
                        -1
                    };
                    for kind in [NufftType::One, NufftType::Two] {
                        let nufft = plan(
                            kind, sizes, &points, npoints, sign, tolerance, 1, double, upsampling,
                        );
                        // float64 arithmetic through the float32 entry point too, where
                        // the data's own rounding (~6e-8) is far below ε.
                        let via_c32 = !double || (s % 2 == 0 && tolerance >= 1e-5);
                        // Inputs as the transform sees them (rounded to float32 on
                        // that path); type 1's strengths have mean 1 + i so that the
                        // sums of few-mode grids do not cancel by chance.
                        let input = match kind {
                            NufftType::One => random_c64(&mut rng, npoints)
                                .into_iter()
                                .map(|c| c + Complex64::new(1.0, 1.0))
                                .collect(),
                            NufftType::Two => random_c64(&mut rng, modes.total()),
                        };
                        let input: Vec<Complex64> = if via_c32 {
                            input
                                .iter()
                                .map(|c| Complex64::new(c.re as f32 as f64, c.im as f32 as f64))
                                .collect()
                        } else {
                            input
                        };
                        let reference = match kind {
                            NufftType::One => direct::type1(&modes, &points, sign, &input),
                            NufftType::Two => direct::type2(&modes, &points, npoints, sign, &input),
                        };
                        let got = run(&nufft, &input, via_c32);
                        let err = rel_error(&got, &reference);
                        assert!(
                            err <= tolerance,
                            "{kind:?} {sizes:?} M={npoints} sign {sign} ε={tolerance:e} \
                             {upsampling:?} double={double}: error {err:e}"
                        );
                    }
                }
            }
        }
    }
}

/// Larger grids (several bins and colours per axis, a split heavy bin):
/// both types in 2D and 3D, float32 at 1e-6 and float64 at 1e-9.
#[test]
fn larger_grids_with_many_bins() {
    let mut rng = Rng::fresh("larger_grids_with_many_bins");
    for (sizes, npoints) in [
        (&[100i64, 90][..], 6000usize),
        (&[24, 20, 18][..], 3000),
        (&[257][..], 3000),
    ] {
        let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
        let mut points = random_points(&mut rng, modes.ndims, npoints);
        // 2500 points into one bin: more than one subproblem there.
        for j in 0..2500 {
            for a in 0..modes.ndims {
                points[a * npoints + j] = 0.3 + 1e-3 * rng.uniform();
            }
        }
        for (double, tolerance) in [(false, 1e-6), (true, 1e-9)] {
            for upsampling in [Upsampling::Two, Upsampling::OneQuarter] {
                let c = random_c64(&mut rng, npoints);
                let f = random_c64(&mut rng, modes.total());
                let one = plan(
                    NufftType::One,
                    sizes,
                    &points,
                    npoints,
                    -1,
                    tolerance,
                    1,
                    double,
                    upsampling,
                );
                let err1 = rel_error(
                    &run(&one, &c, !double),
                    &direct::type1(&modes, &points, -1, &c),
                );
                let two = plan(
                    NufftType::Two,
                    sizes,
                    &points,
                    npoints,
                    1,
                    tolerance,
                    1,
                    double,
                    upsampling,
                );
                let err2 = rel_error(
                    &run(&two, &f, !double),
                    &direct::type2(&modes, &points, npoints, 1, &f),
                );
                eprintln!(
                    "{sizes:?} M={npoints} double={double} {upsampling:?}: type 1 {err1:.2e}, type 2 {err2:.2e}"
                );
                assert!(
                    err1 <= tolerance && err2 <= tolerance,
                    "{sizes:?}: {err1:e} {err2:e}"
                );
            }
        }
    }
}

/// ⟨A c, f⟩ = ⟨c, Aᴴ f⟩ with A = type 1 (sign s) and Aᴴ = type 2 (sign −s),
/// to rounding (the two are exact adjoints of each other, kernel and all).
#[test]
fn type1_and_type2_are_adjoint() {
    let mut rng = Rng::fresh("type1_and_type2_are_adjoint");
    for double in [false, true] {
        for sizes in [&[33i64][..], &[12, 9], &[6, 7, 5], &[1, 10, 1]] {
            let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
            let npoints = rng.int(50, 300);
            let points = random_points(&mut rng, modes.ndims, npoints);
            let tolerance = if double { 1e-10 } else { 1e-5 };
            for sign in [1, -1] {
                let a = plan(
                    NufftType::One,
                    sizes,
                    &points,
                    npoints,
                    sign,
                    tolerance,
                    1,
                    double,
                    Upsampling::Two,
                );
                let ah = plan(
                    NufftType::Two,
                    sizes,
                    &points,
                    npoints,
                    -sign,
                    tolerance,
                    1,
                    double,
                    Upsampling::Two,
                );
                let c = random_c64(&mut rng, npoints);
                let f = random_c64(&mut rng, modes.total());
                let ac = run(&a, &c, false);
                let ahf = run(&ah, &f, false);
                let left: Complex64 = ac.iter().zip(&f).map(|(x, y)| x * y.conj()).sum();
                let right: Complex64 = c.iter().zip(&ahf).map(|(x, y)| x * y.conj()).sum();
                let scale = rel_norm(&ac) * rel_norm(&f);
                let err = (left - right).norm() / scale;
                let bound = if double { 1e-12 } else { 1e-5 };
                assert!(
                    err <= bound,
                    "{sizes:?} sign {sign} double={double}: {err:e}"
                );
            }
        }
    }
}

fn rel_norm(v: &[Complex64]) -> f64 {
    v.iter().map(|x| x.norm_sqr()).sum::<f64>().sqrt()
}

/// Several transforms in one call equal the same transforms one at a time.
#[test]
fn batched_equals_one_at_a_time() {
    let mut rng = Rng::fresh("batched_equals_one_at_a_time");
    // (modes, float64, transforms): the last three have a heavy, split bin
    // (points clustered below); 26×25×24 has 3 bins per axis at σ = 2
    // (colours of a single bin) and one transform per group; 40³ has 5 bins
    // per axis (colours of up to 8 bins), one transform per group and up to
    // 5 groups per batch, so spreading and interpolation tasks keep their
    // points' kernel weights across groups (tile::PointWeights).
    for (sizes, double, (lo, hi)) in [
        (&[40i64, 30][..], false, (2, 5)),
        (&[9, 8, 7][..], true, (2, 5)),
        (&[50][..], false, (2, 5)),
        (&[50, 48][..], false, (30, 40)),
        (&[26, 25, 24][..], true, (3, 6)),
        (&[40, 40, 40][..], true, (3, 6)),
    ] {
        let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
        let npoints = rng.int(100, 800) + if hi > 5 { 2500 } else { 0 };
        let mut points = random_points(&mut rng, modes.ndims, npoints);
        if hi > 5 {
            for j in 0..2500 {
                for a in 0..modes.ndims {
                    points[a * npoints + j] = -1.1 + 1e-3 * rng.uniform();
                }
            }
        }
        let transforms = rng.int(lo, hi);
        for kind in [NufftType::One, NufftType::Two] {
            let per = match kind {
                NufftType::One => npoints,
                NufftType::Two => modes.total(),
            };
            let input = random_c64(&mut rng, transforms * per);
            let batched = plan(
                kind,
                sizes,
                &points,
                npoints,
                1,
                1e-6,
                transforms as i32,
                double,
                Upsampling::Two,
            );
            let all = run(&batched, &input, true);
            let single = plan(
                kind,
                sizes,
                &points,
                npoints,
                1,
                1e-6,
                1,
                double,
                Upsampling::Two,
            );
            let out_per = all.len() / transforms;
            for t in 0..transforms {
                let one = run(&single, &input[t * per..(t + 1) * per], true);
                let err = rel_error(&all[t * out_per..(t + 1) * out_per], &one);
                assert!(err <= 1e-7, "{kind:?} {sizes:?} transform {t}: {err:e}");
            }
        }
    }
}

/// The CPU and CUDA executors agree within the tolerance (both types,
/// 2D and 3D, float32 and float64); skipped without a usable GPU.
#[test]
fn cpu_and_cuda_agree() {
    if horecon::backend::cuda_device_count() == 0 || !horecon::backend::cuda_fft_available() {
        eprintln!("cpu_and_cuda_agree: skipped: no usable CUDA device with cuFFT");
        return;
    }
    let mut rng = Rng::fresh("cpu_and_cuda_agree");
    for (sizes, double, tolerance) in [
        (&[40i64, 33][..], false, 1e-6),
        (&[12, 10, 9][..], true, 1e-9),
        (&[64][..], false, 1e-3),
    ] {
        let modes = Modes::new(sizes.len() as i32, sizes).unwrap();
        let npoints = rng.int(500, 3000);
        let points = random_points(&mut rng, modes.ndims, npoints);
        for kind in [NufftType::One, NufftType::Two] {
            let spec = NufftSpec::new(kind, modes, 1, tolerance, 2, double, Some(Upsampling::Two))
                .unwrap();
            let run_on = |backend: BackendKind| {
                let o = Options {
                    backend,
                    ..options(double)
                };
                Nufft::with_spec(spec.clone(), &points, npoints, &o, None).unwrap()
            };
            let (cpu, cuda) = (run_on(BackendKind::Cpu), run_on(BackendKind::Cuda));
            assert_eq!(cuda.backend(), BackendKind::Cuda);
            let per = if kind == NufftType::One {
                npoints
            } else {
                modes.total()
            };
            let input = random_c64(&mut rng, 2 * per);
            let (a, b) = (run(&cpu, &input, !double), run(&cuda, &input, !double));
            let err = rel_error(&b, &a);
            eprintln!("{kind:?} {sizes:?} double={double}: CPU vs CUDA {err:.2e}");
            assert!(err <= 2.0 * tolerance, "{kind:?} {sizes:?}: {err:e}");
        }
    }
}

/// No points: type 1 gives zeros, type 2 nothing.
#[test]
fn zero_points() {
    let sizes = [6i64, 5];
    let one = plan(
        NufftType::One,
        &sizes,
        &[],
        0,
        1,
        1e-6,
        2,
        false,
        Upsampling::Two,
    );
    let mut c: Vec<Complex32> = vec![];
    let mut f = vec![Complex32::new(1.0, 1.0); 60];
    one.execute(&mut c, &mut f).unwrap();
    assert!(f.iter().all(|v| *v == Complex32::default()));
    let two = plan(
        NufftType::Two,
        &sizes,
        &[],
        0,
        1,
        1e-6,
        2,
        false,
        Upsampling::Two,
    );
    two.execute(&mut c, &mut f).unwrap();
}

fn status_of<T>(r: horecon::Result<T>) -> Status {
    match r {
        Ok(_) => Status::Ok,
        Err(e) => {
            eprintln!("  {:?}: {}", e.status, e.message);
            e.status
        }
    }
}

/// Every bad argument of the plan and of execute gives its status; outputs
/// of a failing execute are untouched.
#[test]
fn bad_arguments() {
    let o = options(false);
    let points = [0.1, -0.2, 0.3, 0.5, 1.0, -1.0];
    let new = |ndims: i32,
               modes: &[i64],
               npoints: i64,
               points: &[f64],
               sign: i32,
               tol: f64,
               t: i32,
               o: &Options| {
        Nufft::new(
            NufftType::One,
            ndims,
            modes,
            npoints,
            points,
            sign,
            tol,
            t,
            o,
        )
    };
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 1, 1e-6, 1, &o)),
        Status::Ok
    );
    assert_eq!(
        status_of(new(0, &[4], 3, &points[..3], 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(4, &[4; 4], 1, &points[..4], 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(2, &[4, 0], 3, &points, 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(2, &[4, -3], 3, &points, 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(2, &[4], 3, &points, 1, 1e-6, 1, &o)),
        Status::SizeMismatch
    );
    assert_eq!(
        status_of(new(2, &[4, 4], -1, &points, 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(2, &[4, 4], 2, &points, 1, 1e-6, 1, &o)),
        Status::SizeMismatch
    );
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 0, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 2, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    for tol in [1e-7, 0.2, 0.0, -1e-3, f64::NAN, f64::INFINITY] {
        assert_eq!(
            status_of(new(2, &[4, 4], 3, &points, 1, tol, 1, &o)),
            Status::InvalidArgument,
            "{tol}"
        );
    }
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 1, 1e-12, 1, &options(true))),
        Status::Ok
    );
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 1, 1e-6, 0, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 1, 1e-6, -2, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(3, &[1 << 22, 1 << 22, 1 << 22], 0, &[], 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    assert_eq!(
        status_of(new(1, &[4], i64::MAX, &points, 1, 1e-6, 1, &o)),
        Status::InvalidArgument
    );
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut p = points;
        p[4] = bad;
        assert_eq!(
            status_of(new(2, &[4, 4], 3, &p, 1, 1e-6, 1, &o)),
            Status::NotFinite
        );
    }
    let bad_options = [
        Options { device: -1, ..o },
        Options {
            num_devices: 0,
            ..o
        },
        Options { verbosity: 3, ..o },
    ];
    for bad in &bad_options {
        assert_eq!(
            status_of(new(2, &[4, 4], 3, &points, 1, 1e-6, 1, bad)),
            Status::InvalidArgument
        );
    }
    let cuda = Options {
        backend: BackendKind::Cuda,
        ..o
    };
    let status = status_of(new(2, &[4, 4], 3, &points, 1, 1e-6, 1, &cuda));
    assert!(
        matches!(status, Status::BackendUnavailable | Status::Ok),
        "CUDA gives {status:?}"
    );
    let auto = Options {
        backend: BackendKind::Auto,
        ..o
    };
    assert_eq!(
        status_of(new(2, &[4, 4], 3, &points, 1, 1e-6, 1, &auto)),
        Status::Ok
    );

    // execute: lengths and non-finite inputs, outputs untouched.
    for kind in [NufftType::One, NufftType::Two] {
        let nufft = Nufft::new(kind, 2, &[4, 4], 3, &points, 1, 1e-6, 2, &o).unwrap();
        let poison = Complex32::new(1234.5, -6789.25);
        let mut c = vec![Complex32::new(0.5, 0.25); 6];
        let mut f = vec![Complex32::new(0.5, 0.25); 32];
        assert_eq!(
            status_of(nufft.execute(&mut c[..5], &mut f)),
            Status::SizeMismatch
        );
        assert_eq!(
            status_of(nufft.execute(&mut c, &mut f[..31])),
            Status::SizeMismatch
        );
        let mut c64 = vec![Complex64::new(0.5, 0.25); 7];
        let mut f64_ = vec![Complex64::new(0.5, 0.25); 32];
        assert_eq!(
            status_of(nufft.execute_c64(&mut c64, &mut f64_)),
            Status::SizeMismatch
        );
        match kind {
            NufftType::One => {
                c[3].im = f32::NAN;
                f.fill(poison);
                assert_eq!(status_of(nufft.execute(&mut c, &mut f)), Status::NotFinite);
                assert!(f.iter().all(|v| *v == poison));
            }
            NufftType::Two => {
                f[17].re = f32::INFINITY;
                c.fill(poison);
                assert_eq!(status_of(nufft.execute(&mut c, &mut f)), Status::NotFinite);
                assert!(c.iter().all(|v| *v == poison));
            }
        }
        // Finite inputs whose sums leave float32's range: NotFinite naming the output.
        let mut c = vec![Complex32::new(3e38, 3e38); 6];
        let mut f = vec![Complex32::new(3e38, -3e38); 32];
        let e = nufft.execute(&mut c, &mut f).unwrap_err();
        assert_eq!(e.status, Status::NotFinite);
        let output = if kind == NufftType::One {
            "grid["
        } else {
            "nonuniform["
        };
        assert!(
            e.message.contains(output) && e.message.contains("overflowed"),
            "{}",
            e.message
        );
    }
}
