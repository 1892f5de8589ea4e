"""horecon.calib: the calibration chain for real scans (C API of src/ffi/calib.rs).

Noise whitening (Pruessmann et al. 2001), coil sensitivities by ESPIRiT
(Uecker et al. 2014) or Walsh's adaptive combine (2000), the B0 map from a
multi-echo gradient-echo reference, the delay between field-monitoring
coefficients and the data, and simulated reference scans / correlated noise.

Reference scans are Cartesian k-space arrays indexed ``[ix, iy, (iz,) coil
(, echo)]`` on MODEL.md's grid: voxel i at ``center + (i - n//2)*fov/n``,
k-space sample p at ``k = 2*pi*(p - n//2)/fov`` (the samples of
``Plan.set_cartesian``), data ``y_c(p) = sum_n m_c(r_n) exp(+i k_p.r_n)``.
Maps and B0 maps are delivered at the ``plan``'s positions (any grid, field of
view or centre), as (N, L) and (N,) arrays: ``plan.set_sensitivities(maps)``,
``plan.set_off_resonance(omega, times)``.

Example (the whole chain): python/examples/calibration_workflow.py.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_double, c_float, c_int32, c_int64, c_uint32, c_uint64

import numpy as np

from . import (
    _C32,
    _check,
    _CStruct,
    _declare_function,
    _grid_dims,
    _load,
    _numeric,
    _three,
    _value_error,
    HORECON_ERR_SIZE_MISMATCH,
)

__all__ = [
    "noise_covariance", "whiten", "cartesian_images", "espirit", "walsh", "b0_map",
    "estimate_delay", "sim_reference", "sim_noise_covariance", "sim_correlated_noise",
]


class _EspiritOptions(_CStruct):
    _fields_ = [("struct_size", c_uint32), ("kernel", c_int32), ("calibration", c_int32),
                ("threshold", c_double), ("crop", c_double)]


class _B0Options(_CStruct):
    _fields_ = [("struct_size", c_uint32), ("max_iterations", c_int32),
                ("mask_threshold", c_double), ("smoothness", c_double)]


class _DelayOptions(_CStruct):
    _fields_ = [("struct_size", c_uint32), ("iterations", c_int32), ("range", c_double),
                ("step", c_double), ("tolerance", c_double), ("lambda_", c_double),
                ("groups", c_uint32)]


_D, _F, _I64, _I32 = POINTER(c_double), POINTER(c_float), POINTER(c_int64), POINTER(c_int32)
_CP = POINTER(_C32)
_P = ctypes.c_void_p
_SIGNATURES = {
    "horecon_noise_covariance": [_CP, c_int64, c_int64, _CP],
    "horecon_whiten": [_CP, c_int64, c_int64, _CP],
    "horecon_cartesian_images": [_I64, _D, _D, c_int64, _CP, _CP],
    "horecon_default_espirit_options": [POINTER(_EspiritOptions)],
    "horecon_espirit": [_P, _I64, _D, _D, _CP, POINTER(_EspiritOptions), _CP, _F],
    "horecon_walsh": [_P, _I64, _D, _D, _CP, c_int32, _CP],
    "horecon_default_b0_options": [POINTER(_B0Options)],
    "horecon_b0_map": [_P, _I64, _D, _D, c_int64, c_int32, _D, _CP, POINTER(_B0Options), _D],
    "horecon_default_delay_options": [POINTER(_DelayOptions)],
    "horecon_estimate_delay": [_P, _CP, _D, _D, POINTER(_DelayOptions), _D, _D, c_int32, _D, _D, _I32],
    "horecon_sim_reference": [_I64, _D, _D, c_int64, _D, _CP, c_int64, _CP, _D, c_int32, _D,
                              c_double, _CP],
    "horecon_sim_noise_covariance": [c_int64, c_double, c_double, c_uint64, _CP],
    "horecon_sim_correlated_noise": [_CP, c_int64, c_int64, c_uint64, _CP],
}
# Declared at import, as horecon.sim and horecon.nufft do: Plan._call reaches
# these functions too (a lazy declaration left horecon_walsh undeclared when it
# came first, and the 64-bit plan handle went through as an int).
_LIB = _load()
for _name, _args in _SIGNATURES.items():
    _declare_function(getattr(_LIB, _name), None if _name.startswith("horecon_default_") else c_int32, _args)


def _lib():
    return _LIB


def _whole(name, value):
    """``value`` as an int; ValueError naming ``name`` where it is not a whole number
    (``int()`` would drop a fraction without a word)."""
    try:
        whole = int(value)
        exact = whole == value
    except (TypeError, ValueError, OverflowError):
        exact = False
    if isinstance(value, bool) or not exact:
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return whole


def _c(a):
    """complex64, Fortran order, flattened (x fastest)."""
    return np.ascontiguousarray(_numeric("array", a, np.complex64).reshape(-1, order="F"))


def _cp(a):
    return a.ctypes.data_as(_CP)


def _dp(a):
    return a.ctypes.data_as(_D)


def _grid(dims, fov, center, what="the reference grid"):
    """(dims as 3 int64, fov, center) of a reference grid of 1 to 3 axes."""
    return np.array(_grid_dims(dims, what), dtype=np.int64), _three("fov", fov), _three("center", center)


def _coil_array(name, a, plan, trailing=0):
    """A reference-grid array [ix, (iy, (iz,)) coil, (trailing axes)] of the
    plan's coil count, as complex64 (not yet flattened)."""
    arr = _numeric(name, a, np.complex64)
    if arr.ndim < 2 + trailing or arr.shape[arr.ndim - 1 - trailing] != plan.ncoils:
        expected = "(nx[, ny[, nz]], ncoils" + ", ..." * trailing + f") with ncoils = {plan.ncoils}"
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"{name} has shape {arr.shape}, expected {expected}")
    return arr


def _matrix(name, a, columns):
    """(points, columns) complex64 in Fortran order from (points, columns) or (..., columns)."""
    arr = _numeric(name, a, np.complex64)
    if arr.ndim < 1 or arr.shape[-1] != columns:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"{name} has shape {arr.shape}, expected (..., {columns})")
    return np.ascontiguousarray(arr.reshape(-1, columns, order="F").reshape(-1, order="F")), arr.shape


def noise_covariance(noise):
    """Coil noise covariance Psi (L, L) from noise-only samples (nsamples, L):
    Psi_ab = mean_j n_ja conj(n_jb)."""
    arr = _numeric("noise", noise, np.complex64)
    if arr.ndim != 2:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"noise has shape {arr.shape}, expected (nsamples, ncoils)")
    m, l = arr.shape
    flat = np.ascontiguousarray(arr.reshape(-1, order="F"))
    out = np.empty(l * l, dtype=np.complex64)
    _check(_lib().horecon_noise_covariance(_cp(flat), m, l, _cp(out)))
    return out.reshape(l, l, order="F")


def whiten(covariance, values):
    """Whitened copy of ``values`` (..., L): every coil vector x becomes C^-1 x
    with Psi = C C^H. Apply to data (M, L) and sensitivities (N, L) alike."""
    psi = _numeric("covariance", covariance, np.complex64)
    l = psi.shape[0]
    if psi.shape != (l, l):
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"covariance has shape {psi.shape}, expected (L, L)")
    flat, shape = _matrix("values", values, l)
    flat = flat.copy()  # whitened in place: never the caller's array
    p = _c(psi)
    _check(_lib().horecon_whiten(_cp(p), l, flat.size // l, _cp(flat)))
    return flat.reshape(shape, order="F")


def cartesian_images(kspace, fov, center=0.0):
    """Coil images (same shape) from Cartesian k-space [ix, iy, (iz,) coil]."""
    arr = _numeric("kspace", kspace, np.complex64)
    dims, f, c = _grid(arr.shape[:-1], fov, center, "kspace")
    y = _c(arr)
    out = np.empty_like(y)
    _check(_lib().horecon_cartesian_images(dims.ctypes.data_as(_I64), _dp(f), _dp(c), arr.shape[-1], _cp(y), _cp(out)))
    return out.reshape(arr.shape, order="F")


def espirit(plan, kspace, fov, center=0.0, kernel=6, calibration=24, threshold=0.02, crop=0.8):
    """ESPIRiT maps at the plan's positions from reference k-space
    [ix, iy, (iz,) coil] (ncoils = plan.ncoils). Returns (maps (N, L),
    eigenvalues (N,)); maps have sum_c |S_c|^2 = 1 and are 0 where the
    eigenvalue is below ``crop``."""
    arr = _coil_array("kspace", kspace, plan)
    dims, f, c = _grid(arr.shape[:-1], fov, center, "kspace")
    o = _EspiritOptions()
    lib = _lib()
    lib.horecon_default_espirit_options(ctypes.byref(o))
    o.kernel, o.calibration = _whole("kernel", kernel), _whole("calibration", calibration)
    o.threshold, o.crop = float(threshold), float(crop)
    y = _c(arr)
    maps = np.empty(plan.nvoxels * plan.ncoils, dtype=np.complex64)
    eig = np.empty(plan.nvoxels, dtype=np.float32)
    plan._call("horecon_espirit", dims.ctypes.data_as(_I64), _dp(f), _dp(c), _cp(y), ctypes.byref(o),
               _cp(maps), eig.ctypes.data_as(_F))
    return maps.reshape(plan.nvoxels, plan.ncoils, order="F"), eig


def walsh(plan, images, fov, center=0.0, window=5):
    """Walsh adaptive-combine maps (N, L) at the plan's positions from coil
    images [ix, iy, (iz,) coil] on the reference grid (ncoils = plan.ncoils)."""
    arr = _coil_array("images", images, plan)
    dims, f, c = _grid(arr.shape[:-1], fov, center, "images")
    m = _c(arr)
    maps = np.empty(plan.nvoxels * plan.ncoils, dtype=np.complex64)
    plan._call("horecon_walsh", dims.ctypes.data_as(_I64), _dp(f), _dp(c), _cp(m), _whole("window", window), _cp(maps))
    return maps.reshape(plan.nvoxels, plan.ncoils, order="F")


def b0_map(plan, kspace, echo_times, fov, center=0.0, mask_threshold=0.1, smoothness=1.0,
           max_iterations=2000):
    """Off-resonance omega (N,) in rad/s at the plan's positions from
    multi-echo k-space [ix, iy, (iz,) coil, echo] and echo times (s)."""
    arr = _numeric("kspace", kspace, np.complex64)
    te = np.ascontiguousarray(_numeric("echo_times", echo_times, np.float64).reshape(-1))
    if arr.ndim < 3 or arr.shape[-1] != te.size:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                           f"kspace has shape {arr.shape}, expected (nx, ny[, nz], ncoils, {te.size} echoes)")
    dims, f, c = _grid(arr.shape[:-2], fov, center, "kspace")
    o = _B0Options()
    lib = _lib()
    lib.horecon_default_b0_options(ctypes.byref(o))
    o.mask_threshold, o.smoothness = float(mask_threshold), float(smoothness)
    o.max_iterations = _whole("max_iterations", max_iterations)
    y = _c(arr)
    omega = np.empty(plan.nvoxels, dtype=np.float64)
    plan._call("horecon_b0_map", dims.ctypes.data_as(_I64), _dp(f), _dp(c), arr.shape[-2], te.size, _dp(te),
               _cp(y), ctypes.byref(o), _dp(omega))
    return omega


def estimate_delay(plan, data, times, coefficients=None, range=20e-6, step=4e-6, tolerance=0.05e-6,
                   iterations=10, lambda_=0.0, groups=0):
    """Delay (s) between the coefficients (the shape of the plan's phase
    model, (M, B); None = the plan's own) and the data (M, L), by short
    reconstructions over a coarse grid then golden-section refinement.
    Returns (delay, residual, curve) with curve (K, 2) = (delay, residual) rows."""
    d = plan._data_in("data", data)
    t = plan._vector_in("times", times, plan.nsamples, "M")
    k = None
    if coefficients is not None:
        terms = plan._phase_terms()
        if terms == 0:
            raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                               "coefficients are shaped like the plan's phase model, and this plan has none: "
                               "set_solid_harmonics, set_trajectory or set_basis first")
        k = plan._matrix_in("coefficients", coefficients, plan.nsamples, terms, np.float64, "M", "B")
    o = _DelayOptions()
    lib = _lib()
    lib.horecon_default_delay_options(ctypes.byref(o))
    o.range, o.step, o.tolerance = float(range), float(step), float(tolerance)
    o.iterations, o.lambda_ = _whole("iterations", iterations), float(lambda_)
    o.groups = _whole("groups", groups)
    capacity = 4096
    xs, rs = np.empty(capacity), np.empty(capacity)
    delay, residual, length = c_double(), c_double(), c_int32()
    plan._call("horecon_estimate_delay", _cp(d), None if k is None else _dp(k), _dp(t), ctypes.byref(o),
               ctypes.byref(delay), ctypes.byref(residual), capacity, _dp(xs), _dp(rs), ctypes.byref(length))
    n = min(length.value, capacity)
    return delay.value, residual.value, np.stack([xs[:n], rs[:n]], axis=1)


def sim_reference(dims, fov, center, positions, image, sensitivities, omega=None, echo_times=(0.0,),
                  weight=1.0):
    """Simulated Cartesian reference k-space [ix, iy, iz, coil, echo] of an
    object ``image`` (npoints,) at ``positions`` (npoints, 3) with
    ``sensitivities`` (npoints, L), off-resonance ``omega`` (npoints,) rad/s or
    None, at the echo times (s): the exact sum times ``weight``, no noise."""
    d, f, c = _grid(dims, fov, center)
    r = np.ascontiguousarray(_numeric("positions", positions, np.float64).reshape(-1, 3).reshape(-1, order="F"))
    n = r.size // 3
    x = _c(image)
    if x.size != n:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"image has {x.size} values, positions {n} points")
    sens = _numeric("sensitivities", sensitivities, np.complex64)
    if sens.ndim not in (1, 2) or sens.shape[0] != n:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                           f"sensitivities has shape {sens.shape}, expected ({n}, ncoils) (one row per point)")
    s, shape = _matrix("sensitivities", sens.reshape(n, -1), sens.reshape(n, -1).shape[-1])
    l = shape[-1]
    w = None if omega is None else np.ascontiguousarray(_numeric("omega", omega, np.float64).reshape(-1))
    if w is not None and w.size != n:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"omega has {w.size} values, positions {n} points")
    te = np.ascontiguousarray(_numeric("echo_times", echo_times, np.float64).reshape(-1))
    out = np.empty(int(np.prod(d)) * l * te.size, dtype=np.complex64)
    _check(_lib().horecon_sim_reference(d.ctypes.data_as(_I64), _dp(f), _dp(c), n, _dp(r), _cp(x), l, _cp(s),
                                        None if w is None else _dp(w), te.size, _dp(te), float(weight), _cp(out)))
    return out.reshape(tuple(d) + (l, te.size), order="F")


def sim_noise_covariance(ncoils, correlation=0.5, spread=1.0, seed=1):
    """A plausible coil noise covariance (L, L): standard deviations in
    [1, 1 + spread], correlation**|a - b|, random phases."""
    out = np.empty(int(ncoils) ** 2, dtype=np.complex64)
    _check(_lib().horecon_sim_noise_covariance(int(ncoils), float(correlation), float(spread), int(seed), _cp(out)))
    return out.reshape(int(ncoils), int(ncoils), order="F")


def sim_correlated_noise(covariance, values, seed=1):
    """``values`` (..., L) plus complex Gaussian noise with covariance Psi (L, L)."""
    cov = _numeric("covariance", covariance, np.complex64)
    l = cov.shape[0] if cov.ndim == 2 else -1
    if cov.shape != (l, l):
        raise _value_error(HORECON_ERR_SIZE_MISMATCH, f"covariance has shape {cov.shape}, expected (L, L)")
    psi = _c(cov)
    flat, shape = _matrix("values", values, l)
    flat = flat.copy()  # noise added in place: never to the caller's array
    _check(_lib().horecon_sim_correlated_noise(_cp(psi), l, flat.size // l, int(seed), _cp(flat)))
    return flat.reshape(shape, order="F")
