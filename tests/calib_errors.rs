//! Bad input to the calibration chain's C API: each gives its code and a
//! message naming the problem, and leaves the outputs untouched.

use horecon::ffi::*;
use std::ffi::CStr;
use std::ptr::{null, null_mut};

fn last_error() -> String {
    unsafe { CStr::from_ptr(horecon_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn expect(status: horecon_status, code: horecon_status, words: &str) {
    let message = last_error();
    assert_eq!(status, code, "expected {code}, got {status}: {message}");
    assert!(
        message.contains(words),
        "message {message:?} does not mention {words:?}"
    );
}

/// A CPU plan on an 8×8 grid with `coils` coils.
fn plan(coils: i64) -> *mut horecon_plan {
    let mut o: horecon_options = unsafe { std::mem::zeroed() };
    let mut p = null_mut();
    unsafe {
        horecon_default_options(&mut o);
        o.backend = HORECON_BACKEND_CPU;
        assert_eq!(
            horecon_plan_create(&o, 8, 8, 1, coils, 16, &mut p),
            HORECON_OK
        );
        let fov = [0.2, 0.2, 0.01];
        assert_eq!(
            horecon_set_grid_positions(p, fov.as_ptr(), [0.0; 3].as_ptr()),
            HORECON_OK
        );
    }
    p
}

fn kspace(n: usize, value: f32) -> Vec<horecon_c32> {
    (0..n)
        .map(|i| horecon_c32 {
            re: value * ((i % 7) as f32 - 3.0),
            im: value * ((i % 5) as f32),
        })
        .collect()
}

#[test]
fn espirit_bad_input() {
    let p = plan(2);
    let dims = [16i64, 16, 1];
    let (fov, center) = ([0.2, 0.2, 0.01], [0.0; 3]);
    let y = kspace(16 * 16 * 2, 1.0);
    let sentinel = horecon_c32 { re: 7.0, im: 7.0 };
    let mut maps = vec![sentinel; 64 * 2];
    let mut o: horecon_espirit_options = unsafe { std::mem::zeroed() };
    let call = |dims: &[i64; 3],
                fov: &[f64; 3],
                k: *const horecon_c32,
                o: *const horecon_espirit_options,
                p: *const horecon_plan,
                maps: &mut Vec<horecon_c32>| unsafe {
        horecon_espirit(
            p,
            dims.as_ptr(),
            fov.as_ptr(),
            center.as_ptr(),
            k,
            o,
            maps.as_mut_ptr(),
            null_mut(),
        )
    };
    unsafe {
        horecon_default_espirit_options(&mut o);
        // Calibration region (4) smaller than the kernel (6).
        o.calibration = 4;
        expect(
            call(&dims, &fov, y.as_ptr(), &o, p, &mut maps),
            HORECON_ERR_INVALID_ARGUMENT,
            "smaller than the kernel",
        );
        // A reference grid smaller than the kernel.
        horecon_default_espirit_options(&mut o);
        expect(
            call(&[4, 4, 1], &fov, y.as_ptr(), &o, p, &mut maps),
            HORECON_ERR_INVALID_ARGUMENT,
            "smaller than the kernel",
        );
        // All-zero k-space, NaN.
        let zeros = kspace(16 * 16 * 2, 0.0);
        expect(
            call(&dims, &fov, zeros.as_ptr(), &o, p, &mut maps),
            HORECON_ERR_INVALID_ARGUMENT,
            "all zero",
        );
        let mut bad = y.clone();
        bad[5].re = f32::NAN;
        expect(
            call(&dims, &fov, bad.as_ptr(), &o, p, &mut maps),
            HORECON_ERR_NOT_FINITE,
            "kspace[5]",
        );
        // Options: struct_size, kernel, threshold.
        for (field, value) in [("struct_size", 3.0), ("kernel", 1.0), ("threshold", 1.5)] {
            horecon_default_espirit_options(&mut o);
            match field {
                "struct_size" => o.struct_size = value as u32,
                "kernel" => o.kernel = value as i32,
                _ => o.threshold = value,
            }
            expect(
                call(&dims, &fov, y.as_ptr(), &o, p, &mut maps),
                HORECON_ERR_INVALID_ARGUMENT,
                field,
            );
        }
        // Bad reference geometry and NULLs.
        expect(
            call(&dims, &[0.2, 0.0, 0.01], y.as_ptr(), null(), p, &mut maps),
            HORECON_ERR_INVALID_ARGUMENT,
            "fov[1]",
        );
        expect(
            call(&dims, &fov, null(), null(), p, &mut maps),
            HORECON_ERR_NULL_POINTER,
            "kspace",
        );
        expect(
            call(&dims, &fov, y.as_ptr(), null(), null(), &mut maps),
            HORECON_ERR_NULL_POINTER,
            "plan",
        );
        assert!(maps.iter().all(|m| *m == sentinel), "maps written on error");
        horecon_plan_destroy(p);
    }
}

#[test]
fn b0_walsh_whitening_and_delay_bad_input() {
    let p = plan(2);
    let dims = [8i64, 8, 1];
    let (fov, center) = ([0.2, 0.2, 0.01], [0.0; 3]);
    let mut omega = vec![7.0f64; 64];
    unsafe {
        // B0 map of 2 coils with `echoes` echoes at `te` from `y`.
        let mut b0_map = |echoes: i32, te: &[f64], y: &[horecon_c32]| {
            horecon_b0_map(
                p,
                dims.as_ptr(),
                fov.as_ptr(),
                center.as_ptr(),
                2,
                echoes,
                te.as_ptr(),
                y.as_ptr(),
                null(),
                omega.as_mut_ptr(),
            )
        };
        let s = b0_map(1, &[2e-3], &kspace(64 * 2, 1.0));
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "at least 2 echoes");
        let s = b0_map(2, &[3e-3, 2e-3], &kspace(64 * 2 * 2, 1.0));
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "increase");
        let s = b0_map(2, &[2e-3, 3e-3], &kspace(64 * 2 * 2, 0.0));
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "all zero");
        assert!(omega.iter().all(|&w| w == 7.0));

        // Walsh: window out of range; a reference with other coil counts is
        // a size the plan implies (the plan's L), so a short array cannot be
        // told apart: the plan has no positions → INCOMPLETE_PLAN.
        let mut maps = vec![horecon_c32::default(); 64 * 2];
        let images = kspace(64 * 2, 1.0);
        let s = horecon_walsh(
            p,
            dims.as_ptr(),
            fov.as_ptr(),
            center.as_ptr(),
            images.as_ptr(),
            0,
            maps.as_mut_ptr(),
        );
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "window");
        let mut o: horecon_options = std::mem::zeroed();
        horecon_default_options(&mut o);
        o.backend = HORECON_BACKEND_CPU;
        let mut bare = null_mut();
        assert_eq!(
            horecon_plan_create(&o, 8, 8, 1, 2, 16, &mut bare),
            HORECON_OK
        );
        let s = horecon_walsh(
            bare,
            dims.as_ptr(),
            fov.as_ptr(),
            center.as_ptr(),
            images.as_ptr(),
            3,
            maps.as_mut_ptr(),
        );
        expect(s, HORECON_ERR_INCOMPLETE_PLAN, "positions");
        horecon_plan_destroy(bare);

        // Whitening: not positive definite, not Hermitian, too few noise samples.
        let singular = [
            horecon_c32 { re: 1.0, im: 0.0 },
            horecon_c32 { re: 1.0, im: 0.0 },
            horecon_c32 { re: 1.0, im: 0.0 },
            horecon_c32 { re: 1.0, im: 0.0 },
        ];
        let mut values = kspace(10 * 2, 1.0);
        let before = values.clone();
        let s = horecon_whiten(singular.as_ptr(), 2, 10, values.as_mut_ptr());
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "positive definite");
        let skew = [
            horecon_c32 { re: 2.0, im: 0.0 },
            horecon_c32 { re: 0.0, im: 1.0 },
            horecon_c32 { re: 0.0, im: 1.0 },
            horecon_c32 { re: 2.0, im: 0.0 },
        ];
        let s = horecon_whiten(skew.as_ptr(), 2, 10, values.as_mut_ptr());
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "Hermitian");
        assert!(values == before, "values changed on error");
        let mut cov = [horecon_c32::default(); 4];
        let s = horecon_noise_covariance(values.as_ptr(), 1, 2, cov.as_mut_ptr());
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "noise samples");
        let s = horecon_noise_covariance(values.as_ptr(), 0, 2, cov.as_mut_ptr());
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "nsamples");
        // Finite noise whose covariance is beyond float32 (|n| ~ 1e20: Ψ ~ 1e40).
        let loud: Vec<horecon_c32> = (0..8)
            .map(|i| horecon_c32 {
                re: 1e20 * (i as f32 - 3.5),
                im: 1e20 * ((i * i) % 5) as f32,
            })
            .collect();
        let s = horecon_noise_covariance(loud.as_ptr(), 4, 2, cov.as_mut_ptr());
        expect(s, HORECON_ERR_NOT_FINITE, "covariance");
        assert!(
            cov.iter().all(|c| c.re == 0.0 && c.im == 0.0),
            "covariance written on error"
        );

        // Delay: no phase model yet; then all-zero data and bad options.
        let data = kspace(16 * 2, 1.0);
        let times: Vec<f64> = (0..16).map(|j| j as f64 * 4e-6).collect();
        let mut delay = 7.0;
        let s = horecon_estimate_delay(
            p,
            data.as_ptr(),
            null(),
            times.as_ptr(),
            null(),
            &mut delay,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            null_mut(),
        );
        expect(s, HORECON_ERR_INCOMPLETE_PLAN, "phase model");
        let k: Vec<f64> = (0..32).map(|j| j as f64).collect();
        assert_eq!(horecon_set_trajectory(p, 2, k.as_ptr()), HORECON_OK);
        let s2: Vec<horecon_c32> = kspace(64 * 2, 1.0);
        assert_eq!(horecon_set_sensitivities(p, s2.as_ptr()), HORECON_OK);
        let zero = kspace(16 * 2, 0.0);
        let s = horecon_estimate_delay(
            p,
            zero.as_ptr(),
            null(),
            times.as_ptr(),
            null(),
            &mut delay,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            null_mut(),
        );
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "all zero");
        let mut d: horecon_delay_options = std::mem::zeroed();
        horecon_default_delay_options(&mut d);
        d.step = 0.0;
        let s = horecon_estimate_delay(
            p,
            data.as_ptr(),
            null(),
            times.as_ptr(),
            &d,
            &mut delay,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            null_mut(),
        );
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "step");
        horecon_default_delay_options(&mut d);
        d.groups = 1; // k0 only: a trajectory has none
        let s = horecon_estimate_delay(
            p,
            data.as_ptr(),
            null(),
            times.as_ptr(),
            &d,
            &mut delay,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            null_mut(),
        );
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "groups");
        assert_eq!(delay, 7.0);

        // CG: preconditioner code, circulant without Toeplitz, discrepancy options.
        let mut c: horecon_cg_options = std::mem::zeroed();
        horecon_default_cg_options(&mut c);
        let mut image = vec![horecon_c32::default(); 64];
        let mut info: horecon_cg_info = std::mem::zeroed();
        c.preconditioner = 3;
        let s = horecon_cg(p, data.as_ptr(), &c, image.as_mut_ptr(), &mut info);
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "preconditioner");
        c.preconditioner = HORECON_PRECONDITIONER_CIRCULANT;
        let s = horecon_cg(p, data.as_ptr(), &c, image.as_mut_ptr(), &mut info);
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "Toeplitz");
        c.preconditioner = HORECON_PRECONDITIONER_NONE;
        c.discrepancy_tau = -1.0;
        let s = horecon_cg(p, data.as_ptr(), &c, image.as_mut_ptr(), &mut info);
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "discrepancy_tau");
        c.discrepancy_tau = 1.0;
        c.noise_sigma = 0.0;
        let s = horecon_cg(p, data.as_ptr(), &c, image.as_mut_ptr(), &mut info);
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "noise_sigma");
        c.noise_sigma = 1.0;
        c.regularizer = HORECON_REG_TOTAL_VARIATION;
        c.lambda = 0.1;
        let s = horecon_cg(p, data.as_ptr(), &c, image.as_mut_ptr(), &mut info);
        expect(s, HORECON_ERR_INVALID_ARGUMENT, "reweighted");
        // And a good call reports its stop reason.
        c.regularizer = HORECON_REG_NONE;
        c.lambda = 0.0;
        c.discrepancy_tau = 0.0;
        c.max_iterations = 2;
        c.tolerance = 0.0;
        c.preconditioner = HORECON_PRECONDITIONER_DIAGONAL;
        assert_eq!(
            horecon_cg(p, data.as_ptr(), &c, image.as_mut_ptr(), &mut info),
            HORECON_OK
        );
        assert_eq!(info.stop_reason, HORECON_STOP_MAX_ITERATIONS);
        assert_eq!(info.data_residual, -1.0);
        horecon_plan_destroy(p);
    }
}
