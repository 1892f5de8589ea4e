"""horecon.sim: the simulation toolkit of libhorecon for Python (``horecon_sim_*``).

The same implementation the Rust demo and the MATLAB/Octave ``horecon.sim``
package use (src/sim): Shepp-Logan phantoms with their analytic Fourier
transform, trajectories in rad/m with sample times, coil sensitivities,
off-resonance maps, higher-order field coefficients (16 solid harmonics),
noise, a refined grid for simulating without the inverse crime, and metrics.

A small, mechanical ctypes layer: every function checks shapes, hands
Fortran-ordered (MODEL.md, first index fastest) float64 / complex64 arrays to
the library and raises :class:`SimError` with the library's message on any
failing status. ``horecon.sim`` is this module when both are importable.

The library is the one the package loads (:func:`horecon.library_path`).

Run ``python3 -m horecon.sim`` for a self-check.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from . import _declare_function, _grid_dims, _load, _progress

__all__ = [
    "SimError", "shepp_logan", "shepp_logan_kspace", "shepp_logan_band_limited",
    "spiral", "radial", "epi", "cartesian", "stack_of_spirals", "density_weights",
    "coil_sensitivities", "off_resonance", "field_coefficients", "add_noise",
    "refined_grid", "block_average", "nrmse", "psnr", "percent_error",
]

_STATUS_NAMES = {
    1: "HORECON_ERR_NULL_POINTER", 2: "HORECON_ERR_INVALID_ARGUMENT",
    3: "HORECON_ERR_SIZE_MISMATCH", 4: "HORECON_ERR_NOT_FINITE",
    5: "HORECON_ERR_INCOMPLETE_PLAN", 6: "HORECON_ERR_OUT_OF_MEMORY",
    7: "HORECON_ERR_BACKEND_UNAVAILABLE", 8: "HORECON_ERR_BACKEND",
    9: "HORECON_ERR_CANCELLED", 99: "HORECON_ERR_INTERNAL",
}


class SimError(RuntimeError):
    """A failing ``horecon_sim_*`` call: ``status`` (int), ``name`` and the library's message."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.name = _STATUS_NAMES.get(status, "unknown status")
        super().__init__(f"{self.name}: {message}")


# the library the package loaded (horecon.library_path(): $HORECON_LIB, the installed
# package, the repository build)
_lib = _load()
_D = ctypes.POINTER(ctypes.c_double)
_F = ctypes.POINTER(ctypes.c_float)
_I64 = ctypes.POINTER(ctypes.c_int64)
_C = ctypes.c_void_p  # horecon_c32 arrays: complex64 buffers
_i32, _i64, _f64, _u64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_double, ctypes.c_uint64

_SIGNATURES = {
    "horecon_sim_shepp_logan": [_i32, _D, _D, _i64, _D, _D],
    "horecon_sim_shepp_logan_kspace": [_i32, _D, _D, _i64, _i32, _D, _D, _D],
    "horecon_sim_shepp_logan_band_limited": [_D, _D, _i64, _D, _D, _f64, _C],
    "horecon_sim_density_weights": [_i64, _D, _F],
    "horecon_sim_spiral": [_i64, _f64, _f64, _f64, _f64, _I64, _D, _D],
    "horecon_sim_radial": [_i64, _f64, _i64, _f64, _f64, _I64, _D, _D],
    "horecon_sim_epi": [_i64, _f64, _i64, _f64, _f64, _I64, _D, _D],
    "horecon_sim_cartesian": [_i64, _i64, _f64, _f64, _f64, _f64, _I64, _D, _D],
    "horecon_sim_stack_of_spirals": [_i64, _i64, _f64, _f64, _f64, _f64, _f64, _I64, _D, _D],
    "horecon_sim_coil_sensitivities": [_i64, _D, _i32, _f64, _D, _C],
    "horecon_sim_off_resonance": [_i64, _D, _D, _D, _f64, _D],
    "horecon_sim_field_coefficients": [_i64, _i32, _D, _f64, _f64, _u64, _D],
    "horecon_sim_add_noise": [_i64, _C, _f64, _u64, _D],
    "horecon_sim_refined_grid": [_i64, _i64, _i64, _D, _D, _i32, _I64, _D],
    "horecon_sim_block_average": [_i64, _i64, _i64, _i32, _C, _C],
    "horecon_sim_nrmse": [_i64, _C, _C, _D],
    "horecon_sim_psnr": [_i64, _C, _C, _D],
    "horecon_sim_percent_error": [_i64, _C, _C, _D],
}
for _name, _args in _SIGNATURES.items():
    _declare_function(getattr(_lib, _name), ctypes.c_int32, _args)
_lib.horecon_last_error.restype = ctypes.c_char_p
_lib.horecon_last_error.argtypes = []
_lib.horecon_sim_set_progress.argtypes = [_progress.FractionFn, ctypes.c_void_p]
_lib.horecon_sim_set_progress.restype = ctypes.c_int32


def _call(name: str, *args, progress=None) -> None:
    """Calls the toolkit function ``name``; long calls show a tqdm bar (when
    tqdm is installed and the call lasts over a second) or call
    ``progress(fraction)`` (truthy stops it), and Ctrl-C cancels them
    (horecon._progress)."""
    function = getattr(_lib, name)

    def call():
        status = function(*args)
        return status, ((_lib.horecon_last_error() or b"").decode("utf-8", "replace") if status else "")

    status, message, interrupt, raised = _progress.run(name[len("horecon_sim_"):], call, None, progress, _lib)
    _progress.settle(status != 0, lambda: SimError(status, message), interrupt, raised)


def _real(a, name: str, ncols: int | None = None) -> np.ndarray:
    """float64, Fortran order; (N, ncols) when ncols is given (a 1-D array of ncols is one row)."""
    arr = np.asarray(a)
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real")
    arr = np.asfortranarray(arr, dtype=np.float64)
    if ncols is not None:
        if arr.ndim == 1 and arr.size == ncols:
            arr = arr.reshape(1, ncols, order="F")
        if arr.ndim != 2 or arr.shape[1] != ncols or arr.shape[0] == 0:
            raise ValueError(f"{name} must have shape (N, {ncols}), got {arr.shape}")
    return arr


def _vec3(a, name: str) -> np.ndarray:
    arr = _real(a, name).ravel()
    if arr.size != 3:
        raise ValueError(f"{name} must have 3 elements, got {arr.size}")
    return arr


def _complex(a, name: str) -> np.ndarray:
    arr = np.asfortranarray(np.asarray(a), dtype=np.complex64)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def _p(a: np.ndarray):
    return a.ctypes.data_as(_D) if a.dtype == np.float64 else a.ctypes.data_as(ctypes.c_void_p)


def shepp_logan(ndims: int, fov, center, positions, *, progress=None) -> np.ndarray:
    """Phantom values (N,) at positions (N, 3) m; ndims 2 (z ignored) or 3; spans fov around center."""
    p = _real(positions, "positions", 3)
    out = np.empty(p.shape[0])
    _call("horecon_sim_shepp_logan", ndims, _p(_vec3(fov, "fov")), _p(_vec3(center, "center")),
          p.shape[0], _p(p), _p(out), progress=progress)
    return out


def shepp_logan_kspace(ndims: int, fov, center, k, *, progress=None) -> np.ndarray:
    """Analytic F(k) = int rho(r) exp(+i k.r) dr at k (M, d) rad/m: complex128 (M,)."""
    k = _real(k, "k")
    if k.ndim == 1:
        k = k.reshape(-1, 1, order="F")
    m, d = k.shape
    re, im = np.empty(m), np.empty(m)
    _call("horecon_sim_shepp_logan_kspace", ndims, _p(_vec3(fov, "fov")), _p(_vec3(center, "center")),
          m, d, _p(k), _p(re), _p(im), progress=progress)
    return re + 1j * im


def shepp_logan_band_limited(fov, center, positions, grid_fov, kmax: float, *, progress=None) -> np.ndarray:
    """The 2D phantom seen through |k| <= kmax on a grid of field of view grid_fov (2,): complex64 (N,).
    ``progress`` (as for every toolkit call): None (a tqdm bar when installed, for calls over a
    second), True, False or callable(fraction) -> truthy to stop; Ctrl-C cancels."""
    p = _real(positions, "positions", 3)
    g = _real(grid_fov, "grid_fov").ravel()
    if g.size != 2:
        raise ValueError("grid_fov must have 2 elements")
    out = np.empty(p.shape[0], dtype=np.complex64)
    _call("horecon_sim_shepp_logan_band_limited", _p(_vec3(fov, "fov")), _p(_vec3(center, "center")),
          p.shape[0], _p(p), _p(g), kmax, _p(out), progress=progress)
    return out


def _trajectory(name: str, ndims: int, *args):
    m = ctypes.c_int64(0)
    _call(name, *args, ctypes.byref(m), None, None)
    k = np.empty((m.value, ndims), order="F")
    t = np.empty(m.value)
    _call(name, *args, ctypes.byref(m), _p(k), _p(t))
    return k, t


def spiral(n: int, fov: float, undersampling: float, dwell: float, t0: float = 0.0):
    """Single-shot Archimedean spiral: (k (M, 2) rad/m, t (M,) s); kmax = pi n / fov."""
    return _trajectory("horecon_sim_spiral", 2, n, fov, undersampling, dwell, t0)


def radial(n: int, fov: float, spokes: int, dwell: float, t0: float = 0.0):
    """spokes radial spokes of 2n samples: (k (M, 2), t (M,)); times restart per spoke."""
    return _trajectory("horecon_sim_radial", 2, n, fov, spokes, dwell, t0)


def epi(n: int, fov: float, undersampling: int, dwell: float, t0: float = 0.0):
    """Single-shot EPI with n/undersampling lines: (k (M, 2), t (M,))."""
    return _trajectory("horecon_sim_epi", 2, n, fov, undersampling, dwell, t0)


def cartesian(nx: int, ny: int, fov_x: float, fov_y: float, dwell: float, t0: float = 0.0):
    """The full Cartesian grid, one line per shot: (k (M, 2), t (M,))."""
    return _trajectory("horecon_sim_cartesian", 2, nx, ny, fov_x, fov_y, dwell, t0)


def stack_of_spirals(n: int, nz: int, fov: float, fov_z: float, undersampling: float, dwell: float,
                     t0: float = 0.0):
    """nz spiral partitions: (k (M, 3), t (M,))."""
    return _trajectory("horecon_sim_stack_of_spirals", 3, n, nz, fov, fov_z, undersampling, dwell, t0)


def density_weights(k) -> np.ndarray:
    """Density-compensation weights (M,) float32, mean 1, of a 2D readout k (M, 2)."""
    k = _real(k, "k", 2)
    out = np.empty(k.shape[0], dtype=np.float32)
    _call("horecon_sim_density_weights", k.shape[0], _p(k), out.ctypes.data_as(_F))
    return out


def coil_sensitivities(positions, ncoils: int, radius: float, center=(0.0, 0.0, 0.0)) -> np.ndarray:
    """(N, L) complex64 sensitivities of L coils on a circle of radius (m) around center."""
    p = _real(positions, "positions", 3)
    out = np.empty((p.shape[0], ncoils), dtype=np.complex64, order="F")
    _call("horecon_sim_coil_sensitivities", p.shape[0], _p(p), ncoils, radius,
          _p(_vec3(center, "center")), _p(out))
    return out


def off_resonance(positions, fov, center, max_hz: float) -> np.ndarray:
    """Smooth off-resonance map (N,) rad/s peaking at about max_hz."""
    p = _real(positions, "positions", 3)
    out = np.empty(p.shape[0])
    _call("horecon_sim_off_resonance", p.shape[0], _p(p), _p(_vec3(fov, "fov")),
          _p(_vec3(center, "center")), max_hz, _p(out))
    return out


def field_coefficients(k, dwell: float, strength: float = 1.0, seed: int = 2011) -> np.ndarray:
    """(M, 16) higher-order coefficients: nominal k (M, d) plus eddy-current-like deviations."""
    k = _real(k, "k")
    if k.ndim == 1:
        k = k.reshape(-1, 1, order="F")
    out = np.empty((k.shape[0], 16), order="F")
    _call("horecon_sim_field_coefficients", k.shape[0], k.shape[1], _p(k), dwell, strength, seed, _p(out))
    return out


def add_noise(data, snr: float, seed: int = 1):
    """(noisy complex64 copy of data, sigma): rms(|d|)/rms(|noise|) = snr."""
    d = _complex(data, "data").copy(order="F")
    sigma = ctypes.c_double(0.0)
    _call("horecon_sim_add_noise", d.size, _p(d), snr, seed, ctypes.byref(sigma))
    return d, sigma.value


def refined_grid(dims, fov, center, factor: int) -> np.ndarray:
    """Positions (N * factor^d, 3) of the grid dims refined by factor (sub-voxels symmetric)."""
    dims = _grid_dims(dims)
    f, c = _vec3(fov, "fov"), _vec3(center, "center")
    n = ctypes.c_int64(0)
    _call("horecon_sim_refined_grid", *dims, _p(f), _p(c), factor, ctypes.byref(n), None)
    out = np.empty((n.value, 3), order="F")
    _call("horecon_sim_refined_grid", *dims, _p(f), _p(c), factor, ctypes.byref(n), _p(out))
    return out


def block_average(fine, dims, factor: int) -> np.ndarray:
    """A refined-grid image (flattened x fastest) averaged back onto dims: complex64 (N,)."""
    dims = _grid_dims(dims)
    x = _complex(fine, "fine").ravel(order="F")
    expected = int(np.prod([d * factor if d > 1 else 1 for d in dims]))
    if x.size != expected:
        raise ValueError(f"fine has {x.size} elements, expected {expected}")
    out = np.empty(int(np.prod(dims)), dtype=np.complex64)
    _call("horecon_sim_block_average", *dims, factor, _p(x), _p(out))
    return out


def _metric(name: str, x, reference) -> float:
    a = _complex(x, "x").ravel(order="F")
    b = _complex(reference, "reference").ravel(order="F")
    if a.size != b.size:
        raise ValueError(f"x has {a.size} elements, reference {b.size}")
    out = ctypes.c_double(0.0)
    _call(name, a.size, _p(a), _p(b), ctypes.byref(out))
    return out.value


def nrmse(x, reference) -> float:
    """||x - ref|| / ||ref||."""
    return _metric("horecon_sim_nrmse", x, reference)


def psnr(x, reference) -> float:
    """20 log10(max|ref| / sqrt(mean|x - ref|^2)) dB (Kirk-Hwu fig. 14.18)."""
    return _metric("horecon_sim_psnr", x, reference)


def percent_error(x, reference) -> float:
    """100 ||x - ref|| / ||ref|| (Stone et al. 2008)."""
    return _metric("horecon_sim_percent_error", x, reference)


def _selftest() -> None:
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"horecon_sim self-check, seed {seed}")
    rng = np.random.default_rng(seed)
    fov, center = (0.2, 0.2, 0.0), (0.01, -0.005, 0.02)
    n = 256
    p = refined_grid((n, n, 1), (0.2, 0.2, 0.001), center, 1)
    rho = shepp_logan(2, fov, center, p)
    assert abs(rho.max() - 1) < 1e-12
    k = rng.uniform(-400, 400, size=(4, 2))
    f = shepp_logan_kspace(2, fov, center, k)
    f_sum = np.exp(1j * (k @ p[:, :2].T)) @ rho * (0.2 / n) ** 2
    err = np.abs(f - f_sum) / abs(shepp_logan_kspace(2, fov, center, np.zeros((1, 2)))[0])
    print("  analytic F(k) vs voxel sum:", " ".join(f"{e:.1e}" for e in err))
    assert np.all(err < 5e-3)
    k, t = spiral(64, 0.22, 3, 1e-5, 1e-3)
    assert k.shape[1] == 2 and t.shape == (k.shape[0],)
    assert abs(np.hypot(k[:, 0], k[:, 1]).max() - np.pi * 64 / 0.22) < 1e-3
    c = field_coefficients(k, 1e-5)
    assert c.shape == (k.shape[0], 16) and np.abs(c[:, 1] - k[:, 0]).max() < 0.02 * np.pi * 64 / 0.22
    s = coil_sensitivities(p[:50], 8, 0.15)
    assert s.shape == (50, 8) and s.dtype == np.complex64
    d = (rng.standard_normal(5000) + 1j * rng.standard_normal(5000)).astype(np.complex64)
    noisy, sigma = add_noise(d, 10.0, seed)
    snr = np.sqrt(np.mean(np.abs(d) ** 2) / np.mean(np.abs(noisy - d) ** 2))
    assert abs(snr - 10) < 0.5
    x = d * (1 + 0.1j)
    assert abs(nrmse(x, d) - 0.1) < 1e-5 and abs(percent_error(x, d) - 10) < 1e-3
    try:
        spiral(-1, 0.2, 3, 1e-5)
    except SimError as e:
        assert e.name == "HORECON_ERR_INVALID_ARGUMENT", e
    else:
        raise AssertionError("spiral(-1) must fail")
    print("  ok")


if __name__ == "__main__":
    _selftest()
