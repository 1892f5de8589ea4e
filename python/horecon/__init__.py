"""horecon: exact MRI reconstruction with higher-order field models (Python binding).

A thin ctypes + numpy layer over the C API of ``libhorecon`` (include/horecon.h,
design/C-API.md). The model (design/MODEL.md)::

    phi(j, n)    = sum_b k_b(t_j) h_b(r_n) + omega_n t_j                 [rad]
    E[(j,c), n]  = S_c(r_n) exp(+i phi(j, n))
    forward:  d  = E rho          adjoint:  rho = E^H d          normal:  E^H E rho

The sign is +i: a user whose convention is exp(-i k.r) passes -k. No
normalisation factor, no implicit density compensation.

Array conventions
-----------------
MODEL.md writes matrices with the first index fastest ([N x 3] = all x, then
all y, then all z). In numpy this binding uses the *semantic* shape with the
sample/voxel index first, in any memory order; the binding converts with
``np.asfortranarray`` so the bytes handed to the library are always the
MODEL.md layout. Because the memory of a C-ordered array of the *reversed*
shape is also that layout (the convention of shared/bench/cases.py), the
reversed shape is accepted too, but only where it cannot be confused with the
semantic one:

=================  ==================================  ===========================
argument           semantic shape (any memory order)   also accepted
=================  ==================================  ===========================
positions          (N, 3), metres                      (3, N) when N != 3
coefficients, k    (M, B), rad/m^order                 (B, M) when B != M; (M,) if B = 1
basis              (N, B)                              (B, N) when B != N; (N,) if B = 1
off_resonance      (N,) rad/s, or the image shape      --
times              (M,) s                              --
sensitivities      (N, L) or image shape + (L,)        (L, N) when L != N; image shape if L = 1
data               (M, L)                              (L, M) when L != M; (M,) if L = 1
image              (N,) or the image shape             --
sample_weights     (M,)                                --
=================  ==================================  ===========================

"The image shape" is ``(nx, ny, nz)``, or ``(nx, ny)`` when nz = 1, indexed
``img[ix, iy, iz]`` (voxel n = ix + nx*(iy + ny*iz), x fastest). A numpy array
indexed that way may be stored in C or Fortran order; what matters is the
index meaning, not the memory order. Returned images have the plan's image
shape (the ``shape`` given to :class:`Plan`, with a trailing nz = 1 dropped)
and are Fortran-ordered, so ``img.ravel(order='F')`` is the MODEL.md vector.
Returned data have shape (M, L), Fortran-ordered.

Complex inputs (image, data, sensitivities) are cast to complex64; real
arrays are accepted. Real inputs (positions, coefficients, basis, omega,
times) are cast to float64; complex values there raise ``TypeError``.

Errors
------
Every failing library call raises :class:`HoreconError` carrying the status
code, its name (``"HORECON_ERR_NOT_FINITE"`` ...) and the library's
``horecon_last_error()`` text. The C API receives bare pointers and cannot see
an array's length, so shape problems are found on the Python side; they raise
:class:`HoreconValueError`, which is both a ``HoreconError`` (status
``HORECON_ERR_SIZE_MISMATCH`` or ``HORECON_ERR_INVALID_ARGUMENT``) and a
``ValueError``; arrays of a non-numeric dtype raise ``TypeError``. An exception
raised inside a CG progress callback stops the solve and is re-raised from
:meth:`Plan.cg`.

Library lookup
--------------
``$HORECON_LIB`` (full path) first, then ``libhorecon.so`` in this package's folder
(where ``pip install`` puts it), then ``<repo>/target/release/libhorecon.so`` two
folders above this file (a checkout: python/horecon/), then
``ctypes.util.find_library("horecon")``. :func:`library_path` says which one loaded.

Threads
-------
ctypes drops the GIL during each library call, and the operators (forward,
adjoint, normal, cg) run concurrently on one plan from several Python threads.
A setter waits until the operators in flight on its plan have finished (and
holds off new ones meanwhile), so threads cannot corrupt a plan. close() while
calls are in flight marks the plan closed at once and frees it when they end.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import operator
import os
import sys
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_float,
    c_int32,
    c_int64,
    c_uint32,
    c_uint64,
    c_uint8,
    c_void_p,
)
from pathlib import Path

import numpy as np

from . import _progress

__all__ = [
    "Plan",
    "HoreconError",
    "HoreconValueError",
    "version",
    "cuda_device_count",
    "status_string",
    "library_path",
]

# ---------------------------------------------------------------- constants
# Status codes (fixed values, never renumbered: design/C-API.md).
HORECON_OK = 0
HORECON_ERR_NULL_POINTER = 1
HORECON_ERR_INVALID_ARGUMENT = 2
HORECON_ERR_SIZE_MISMATCH = 3
HORECON_ERR_NOT_FINITE = 4
HORECON_ERR_INCOMPLETE_PLAN = 5
HORECON_ERR_OUT_OF_MEMORY = 6
HORECON_ERR_BACKEND_UNAVAILABLE = 7
HORECON_ERR_BACKEND = 8
HORECON_ERR_CANCELLED = 9
HORECON_ERR_INTERNAL = 99

STATUS_NAMES = {
    HORECON_OK: "HORECON_OK",
    HORECON_ERR_NULL_POINTER: "HORECON_ERR_NULL_POINTER",
    HORECON_ERR_INVALID_ARGUMENT: "HORECON_ERR_INVALID_ARGUMENT",
    HORECON_ERR_SIZE_MISMATCH: "HORECON_ERR_SIZE_MISMATCH",
    HORECON_ERR_NOT_FINITE: "HORECON_ERR_NOT_FINITE",
    HORECON_ERR_INCOMPLETE_PLAN: "HORECON_ERR_INCOMPLETE_PLAN",
    HORECON_ERR_OUT_OF_MEMORY: "HORECON_ERR_OUT_OF_MEMORY",
    HORECON_ERR_BACKEND_UNAVAILABLE: "HORECON_ERR_BACKEND_UNAVAILABLE",
    HORECON_ERR_BACKEND: "HORECON_ERR_BACKEND",
    HORECON_ERR_CANCELLED: "HORECON_ERR_CANCELLED",
    HORECON_ERR_INTERNAL: "HORECON_ERR_INTERNAL",
}

HORECON_BACKEND_AUTO = 0
HORECON_BACKEND_CPU = 1
HORECON_BACKEND_CUDA = 2
HORECON_PRECISION_ACCURATE = 0
HORECON_PRECISION_FAST = 1
HORECON_PRECISION_DOUBLE = 2
HORECON_REG_NONE = 0
HORECON_REG_TIKHONOV = 1
HORECON_REG_FINITE_DIFFERENCE = 2
HORECON_REG_TOTAL_VARIATION = 3
HORECON_REG_LAPLACE = 4

BACKENDS = {"auto": HORECON_BACKEND_AUTO, "cpu": HORECON_BACKEND_CPU, "cuda": HORECON_BACKEND_CUDA}
PRECISIONS = {
    "accurate": HORECON_PRECISION_ACCURATE,
    "fast": HORECON_PRECISION_FAST,
    "double": HORECON_PRECISION_DOUBLE,
}
PRECONDITIONERS = {"none": 0, "diagonal": 1, "circulant": 2}
STOP_REASONS = {1: "tolerance", 2: "max_iterations", 3: "discrepancy", 4: "breakdown"}
REGULARIZERS = {
    "none": HORECON_REG_NONE,
    "tikhonov": HORECON_REG_TIKHONOV,
    "finite_difference": HORECON_REG_FINITE_DIFFERENCE,
    "total_variation": HORECON_REG_TOTAL_VARIATION,
    "laplace": HORECON_REG_LAPLACE,
}


# ------------------------------------------------------------------ errors
class HoreconError(Exception):
    """A failing horecon call: ``status`` (int), ``name`` (``"HORECON_ERR_..."``)
    and ``message`` (the library's ``horecon_last_error()`` text, or the
    binding's own explanation)."""

    def __init__(self, status: int, name: str, message: str):
        super().__init__(status, name, message)
        self.status = int(status)
        self.name = name
        self.message = message

    def __str__(self) -> str:
        return f"{self.name} ({self.status}): {self.message}"


class HoreconValueError(HoreconError, ValueError):
    """A shape or option problem found by the binding before calling the
    library (status ``HORECON_ERR_SIZE_MISMATCH`` or ``HORECON_ERR_INVALID_ARGUMENT``)."""


def _value_error(status: int, message: str) -> HoreconValueError:
    return HoreconValueError(status, STATUS_NAMES[status], message)


# ------------------------------------------------------------ C integers
# ctypes wraps a Python int silently into a C integer (2**32 + 2 becomes 2 in
# an int32): every integer the binding hands the C API goes through _fits.
_INT_RANGES = {
    c_int32: (-(2**31), 2**31 - 1),
    c_uint32: (0, 2**32 - 1),
    c_int64: (-(2**63), 2**63 - 1),
    c_uint64: (0, 2**64 - 1),
    c_uint8: (0, 255),
}


def _fits(what: str, ctype, value):
    """``value`` unchanged where it fits the C integer type ``ctype`` (other
    values and types pass through); ValueError naming ``what`` otherwise."""
    bounds = _INT_RANGES.get(ctype)
    if bounds is not None and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if not bounds[0] <= value <= bounds[1]:
            raise ValueError(f"{what} = {value} is out of range ({bounds[0]} to {bounds[1]} in the C API)")
    return value


def _checked_int(ctype):
    """``ctype`` as an argument type that refuses the ints it would wrap."""

    class Checked(ctype):
        @classmethod
        def from_param(cls, value):
            return ctype.from_param(_fits("an integer argument", ctype, value))

    Checked.__name__ = ctype.__name__
    return Checked


_CHECKED_INTS = {ctype: _checked_int(ctype) for ctype in _INT_RANGES}


def _declare_function(f, restype, argtypes):
    """Declares the C function ``f`` with its integer arguments range-checked."""
    f.restype = restype
    f.argtypes = [_CHECKED_INTS.get(t, t) for t in argtypes]


# ------------------------------------------------------------ C structures
class _CStruct(Structure):
    """A C structure whose integer fields refuse the values ctypes would wrap."""

    def __setattr__(self, name, value):
        for field, ctype in type(self)._fields_:
            if field == name:
                _fits(name, ctype, value)
        super().__setattr__(name, value)


class _Options(_CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("backend", c_int32),
        ("device", c_int32),
        ("num_devices", c_int32),
        ("num_threads", c_int32),
        ("precision", c_int32),
        ("verbosity", c_int32),
    ]


_ProgressFn = CFUNCTYPE(c_int32, c_void_p, c_int32, c_double)


class _CgOptions(_CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_iterations", c_int32),
        ("tolerance", c_double),
        ("regularizer", c_int32),
        ("lambda_", c_double),
        ("reweightings", c_int32),
        ("epsilon", c_double),
        ("sigma", c_double),
        ("sample_weights", POINTER(c_float)),
        ("fd_weights", POINTER(c_float)),
        ("warm_start", c_int32),
        ("progress", _ProgressFn),
        ("progress_user", c_void_p),
        ("neighbours", c_int32),
        ("preconditioner", c_int32),
        ("discrepancy_tau", c_double),
        ("noise_sigma", c_double),
    ]


class _CgInfo(_CStruct):
    _fields_ = [
        ("iterations", c_int32),
        ("converged", c_int32),
        ("rel_residual", c_double),
        ("seconds", c_double),
        ("stop_reason", c_int32),
        ("data_residual", c_double),
    ]


class _ApproximationInfo(_CStruct):
    """horecon_approximation_info."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("active", c_int32),
        ("rank", c_int32),
        ("estimated_error", c_double),
        ("reason", ctypes.c_char * 160),
    ]


class _C32(Structure):
    """horecon_c32: same layout as numpy complex64."""

    _fields_ = [("re", c_float), ("im", c_float)]


_PlanPtr = c_void_p  # opaque horecon_plan*
_F64P = POINTER(c_double)
_C32P = POINTER(_C32)

_SIGNATURES = {
    "horecon_default_options": (None, [POINTER(_Options)]),
    "horecon_default_cg_options": (None, [POINTER(_CgOptions)]),
    "horecon_plan_create": (
        c_int32,
        [POINTER(_Options), c_int64, c_int64, c_int64, c_int64, c_int64, POINTER(_PlanPtr)],
    ),
    "horecon_plan_destroy": (c_int32, [_PlanPtr]),
    "horecon_set_positions": (c_int32, [_PlanPtr, _F64P]),
    "horecon_set_grid_positions": (c_int32, [_PlanPtr, _F64P, _F64P]),
    "horecon_set_solid_harmonics": (c_int32, [_PlanPtr, c_int32, _F64P]),
    "horecon_set_basis": (c_int32, [_PlanPtr, c_int32, _F64P, _F64P]),
    "horecon_set_trajectory": (c_int32, [_PlanPtr, c_int32, _F64P]),
    "horecon_set_off_resonance": (c_int32, [_PlanPtr, _F64P, _F64P]),
    "horecon_set_sensitivities": (c_int32, [_PlanPtr, _C32P]),
    "horecon_forward": (c_int32, [_PlanPtr, _C32P, _C32P]),
    "horecon_adjoint": (c_int32, [_PlanPtr, _C32P, _C32P]),
    "horecon_normal": (c_int32, [_PlanPtr, _C32P, _C32P]),
    "horecon_cg": (c_int32, [_PlanPtr, _C32P, POINTER(_CgOptions), _C32P, POINTER(_CgInfo)]),
    "horecon_last_error": (c_char_p, []),
    "horecon_status_string": (c_char_p, [c_int32]),
    "horecon_version": (c_char_p, []),
    "horecon_cuda_device_count": (c_int32, [POINTER(c_int32)]),
    "horecon_plan_backend": (c_int32, [_PlanPtr, POINTER(c_int32)]),
    "horecon_fhd": (c_int32, [_PlanPtr, _C32P, _C32P, _C32P]),
    "horecon_set_cartesian": (c_int32, [_PlanPtr, POINTER(c_uint8)]),
    "horecon_q_dims": (c_int32, [_PlanPtr, POINTER(c_int64)]),
    "horecon_q": (c_int32, [_PlanPtr, POINTER(c_float), _C32P]),
    "horecon_set_toeplitz": (c_int32, [_PlanPtr, c_int32, c_int32]),
    "horecon_gridding": (c_int32, [_PlanPtr, _C32P, POINTER(c_float), _C32P]),
    # issue 11: progress, cancellation, memory
    "horecon_set_progress": (c_int32, [_PlanPtr, _progress.FractionFn, c_void_p]),
    "horecon_cancel": (c_int32, [_PlanPtr]),
    "horecon_sim_set_progress": (c_int32, [_progress.FractionFn, c_void_p]),
    "horecon_plan_memory": (c_int32, [_PlanPtr, c_int32, POINTER(c_int64), POINTER(c_int64)]),
    "horecon_set_approximation": (c_int32, [_PlanPtr, c_double]),
    "horecon_get_approximation_info": (c_int32, [_PlanPtr, POINTER(_ApproximationInfo)]),
    "horecon_plan_phase_terms": (c_int32, [_PlanPtr, POINTER(c_int32)]),
}

#: the calls of :meth:`Plan.memory` (HORECON_CALL_*)
CALLS = {"forward": 0, "adjoint": 1, "normal": 2, "cg": 3, "fhd": 4, "q": 5, "gridding": 6}


# --------------------------------------------------------- library loading
_LIB = None
_LIB_PATH = None
_LIB_LOCK = threading.Lock()
_IN_PROGRESS = threading.local()  # plans whose cg progress callback runs on this thread


def _library_names():
    if sys.platform == "darwin":
        return ["libhorecon.dylib"]
    if sys.platform == "win32":
        return ["horecon.dll"]
    return ["libhorecon.so"]


def _candidates():
    """(description, path or None) in lookup order."""
    out = []
    env = os.environ.get("HORECON_LIB")
    out.append(("$HORECON_LIB", env if env else None))
    package = Path(__file__).resolve().parent
    for name in _library_names():
        out.append(("installed package", str(package / name)))
    repo = package.parents[1]
    for name in _library_names():
        out.append(("repository build", str(repo / "target" / "release" / name)))
    found = ctypes.util.find_library("horecon")
    out.append(('ctypes.util.find_library("horecon")', found))
    return out


def _load():
    global _LIB, _LIB_PATH
    if _LIB is not None:
        return _LIB
    with _LIB_LOCK:
        if _LIB is not None:
            return _LIB
        tried = []
        env = os.environ.get("HORECON_LIB")
        for what, path in _candidates():
            if path is None:
                tried.append(f"{what}: not set" if what.startswith("$") else f"{what}: nothing found")
                continue
            if what == "$HORECON_LIB" or what.startswith("ctypes") or os.path.exists(path):
                try:
                    lib = ctypes.CDLL(path)
                except OSError as e:
                    tried.append(f"{what} = {path}: {e}")
                    if what == "$HORECON_LIB":
                        # an explicit choice that fails must not silently fall back
                        break
                    continue
                _declare(lib)
                _LIB, _LIB_PATH = lib, path
                return lib
            tried.append(f"{what}: {path} does not exist")
        hint = (
            ""
            if env
            else " Install the package (`pip install .` in the repository), build the library"
            " (`cargo build --release`) or set HORECON_LIB."
        )
        raise OSError("horecon: could not load libhorecon; tried:\n  " + "\n  ".join(tried) + "\n" + hint)


def _declare(lib):
    for name, (restype, argtypes) in _SIGNATURES.items():
        _declare_function(getattr(lib, name), restype, argtypes)


def library_path() -> str:
    """The path of the loaded libhorecon (loading it if needed)."""
    _load()
    return _LIB_PATH


def _last_error() -> str:
    """The library's message for the last failing call on *this* thread."""
    raw = _load().horecon_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def _error(status: int, message: str, context: str = "") -> HoreconError:
    if context:
        message = f"{message} ({context})" if message else context
    return HoreconError(status, STATUS_NAMES.get(status, f"HORECON_STATUS_{status}"), message)


def _check(status: int, context: str = "") -> None:
    """Raises HoreconError for a failing status (call on the thread that made the call)."""
    if status != HORECON_OK:
        raise _error(status, _last_error(), context)


# ---------------------------------------------------------- module functions
def version() -> str:
    """The library version, "MAJOR.MINOR.PATCH"."""
    return _load().horecon_version().decode()


def cuda_device_count() -> int:
    """Usable CUDA devices (0 without driver or GPU; never an error)."""
    n = c_int32(0)
    _check(_load().horecon_cuda_device_count(ctypes.byref(n)))
    return n.value


def status_string(status: int) -> str:
    """The library's static description of a status code."""
    return _load().horecon_status_string(int(status)).decode()


# ------------------------------------------------------------ array helpers
def _numeric(name: str, a, dtype):
    """``a`` as an ndarray of a numeric dtype cast to ``dtype`` (no copy if it already is)."""
    arr = np.asarray(a)
    kind = arr.dtype.kind
    if kind not in "biufc":
        raise TypeError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
    if kind == "c" and np.dtype(dtype).kind != "c":
        raise TypeError(f"{name}: expected real values, got complex dtype {arr.dtype}")
    return arr.astype(dtype, copy=False)


def _f(arr):
    """Fortran-contiguous, aligned, native byte order."""
    return np.require(arr, requirements=["F_CONTIGUOUS", "ALIGNED"])


def _ptr(arr, ctype):
    return None if arr is None else arr.ctypes.data_as(POINTER(ctype))


def _shape_str(shape):
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


class Plan:
    """A reconstruction plan (``horecon_plan``): geometry, phase model and
    coils of one acquisition, with the operators and CG built on them.

    Parameters
    ----------
    shape : int or tuple of 1..3 ints
        Image size (nx[, ny[, nz]]); N = nx*ny*nz, voxel n = ix + nx*(iy + ny*iz).
    ncoils : int
        Receive coils L (1 = no sensitivities needed).
    nsamples : int
        Readout samples M per coil (required).
    backend : 'auto' | 'cpu' | 'cuda'
        'auto' takes CUDA when usable, else the CPU; 'cuda' without a GPU
        raises HoreconError(HORECON_ERR_BACKEND_UNAVAILABLE).
    precision : 'accurate' | 'fast' | 'double'
        Accuracy class (relative RMS vs float64: 1e-5, 1e-3, 1e-7).
    device, num_devices, threads, verbosity
        First CUDA device, CUDA devices to use, CPU threads (0 = all),
        0 silent / 1 a line per solve / 2 a line per CG iteration (stderr).

    The plan is freed by :meth:`close`, on leaving a ``with`` block, or when
    garbage-collected. Any use after close raises HoreconError
    (HORECON_ERR_NULL_POINTER).
    """

    def __init__(
        self,
        shape,
        ncoils: int = 1,
        nsamples: int | None = None,
        *,
        backend: str = "auto",
        precision: str = "accurate",
        device: int = 0,
        num_devices: int = 1,
        threads: int = 0,
        verbosity: int = 0,
    ):
        # set first: close() and __del__ must work even if creation fails
        self._handle = None
        # A reader-writer lock over the handle: operators (const plan in C)
        # share it, setters (mutable plan) hold it alone, so Python threads
        # can never race a setter against an operator inside the library.
        self._lock = threading.Condition()
        self._readers = 0  # operator calls in flight
        self._writer = False  # a setter in flight
        self._pending = None  # a handle closed while calls were in flight
        lib = _load()
        dims = (operator.index(shape),) if np.isscalar(shape) else tuple(operator.index(s) for s in shape)
        if not 1 <= len(dims) <= 3:
            raise _value_error(
                HORECON_ERR_INVALID_ARGUMENT, f"Plan: shape must have 1 to 3 entries, got {shape!r}"
            )
        if nsamples is None:
            raise TypeError("Plan: nsamples (samples per coil, M) is required")
        self.dims = dims + (1,) * (3 - len(dims))
        nx, ny, nz = self.dims
        self.shape = dims if len(dims) < 3 or nz != 1 else dims[:2]
        """The shape of images this plan takes and returns."""
        self.nvoxels = nx * ny * nz
        self.ncoils = operator.index(ncoils)
        self.nsamples = operator.index(nsamples)
        opts = _Options()
        lib.horecon_default_options(ctypes.byref(opts))
        opts.backend = _enum("backend", backend, BACKENDS)
        opts.precision = _enum("precision", precision, PRECISIONS)
        opts.device = int(device)
        opts.num_devices = int(num_devices)
        opts.num_threads = int(threads)
        opts.verbosity = int(verbosity)
        handle = _PlanPtr()
        _check(
            lib.horecon_plan_create(
                ctypes.byref(opts), nx, ny, nz, self.ncoils, self.nsamples, ctypes.byref(handle)
            )
        )
        self._handle = handle.value
        # progress bars, callbacks and Ctrl-C of the long calls (horecon._progress)
        _check(lib.horecon_set_progress(self._handle, _progress.TRAMPOLINE, None))

    # ---------------------------------------------------------- life cycle
    def close(self) -> None:
        """Frees the plan (idempotent). Later calls raise HoreconError
        (HORECON_ERR_NULL_POINTER). Closing while another thread is inside an
        operator or CG on this plan is safe: the plan is freed when that ends."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            handle, self._handle = self._handle, None
            if handle is not None and (self._readers or self._writer):
                self._pending, handle = handle, None
        if handle is not None and _LIB is not None:
            _check(_LIB.horecon_plan_destroy(handle))

    def _begin(self, exclusive: bool):
        """The handle for one library call (None once closed), registered as
        in flight: shared for operators, exclusive for setters."""
        with self._lock:
            if exclusive:
                if self in getattr(_IN_PROGRESS, "plans", ()):
                    raise _value_error(
                        HORECON_ERR_INVALID_ARGUMENT,
                        "a plan cannot be changed from the progress callback of its own cg",
                    )
                self._lock.wait_for(lambda: not self._writer and not self._readers)
            else:
                self._lock.wait_for(lambda: not self._writer)
            if self._handle is not None:
                if exclusive:
                    self._writer = True
                else:
                    self._readers += 1
            return self._handle

    def _end(self, handle, exclusive: bool) -> None:
        if handle is None:
            return
        pending = None
        with self._lock:
            if exclusive:
                self._writer = False
            else:
                self._readers -= 1
            if not self._readers and not self._writer and self._pending is not None:
                pending, self._pending = self._pending, None
            self._lock.notify_all()
        if pending is not None:
            _LIB.horecon_plan_destroy(pending)

    def __del__(self):
        try:
            self.close()
        except Exception:  # never raise from a finaliser (e.g. at interpreter exit)
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _call(self, name: str, *args):
        """Calls ``name(handle, *args)``; raises HoreconError on failure.
        The setters (``horecon_set_*``) hold the plan exclusively."""
        function = getattr(_load(), name)
        exclusive = name.startswith("horecon_set_")
        handle = self._begin(exclusive)
        try:
            status = function(handle, *args)
            error = None
            if status != HORECON_OK:  # read the message before anything else calls the library
                error = _error(status, _last_error(), "this Plan was closed" if handle is None else "")
        finally:
            self._end(handle, exclusive)
        if error is not None:
            raise error

    def _long_call(self, label: str, name: str, progress, *args):
        """``_call`` for a long call: a progress bar or callback, and Ctrl-C
        cancelling it (horecon._progress)."""
        function = getattr(_load(), name)
        handle = self._begin(False)
        try:

            def call():
                status = function(handle, *args)
                return status, (_last_error() if status != HORECON_OK else "")

            def cancel():
                if handle is not None:
                    _LIB.horecon_cancel(handle)

            status, message, interrupt, raised = _progress.run(label, call, cancel, progress)
        finally:
            self._end(handle, False)
        _progress.settle(
            status != HORECON_OK,
            lambda: _error(status, message, "this Plan was closed" if handle is None else ""),
            interrupt,
            raised,
        )

    def _phase_terms(self) -> int:
        """B, the columns of the phase model's coefficients (0: none set), as the
        library holds it: the shape of arrays "shaped like the phase model"."""
        terms = c_int32()
        self._call("horecon_plan_phase_terms", ctypes.byref(terms))
        return terms.value

    def cancel(self) -> None:
        """Cancels the calls running on this plan now (from any thread): they
        raise HoreconError(HORECON_ERR_CANCELLED); the plan stays usable.
        Raises on a closed plan, like every other use after ``close()``."""
        handle = self._handle
        status = _load().horecon_cancel(handle)
        if status != HORECON_OK:
            raise _error(status, _last_error(), "this Plan was closed" if handle is None else "")

    def memory(self, call: str = "cg"):
        """(host_bytes, device_bytes) the call ('forward', 'adjoint', 'normal',
        'cg', 'fhd', 'q' or 'gridding') needs at most, asked before running it."""
        if call not in CALLS:
            raise _value_error(
                HORECON_ERR_INVALID_ARGUMENT,
                f"memory: call must be one of {', '.join(repr(c) for c in CALLS)}, got {call!r}",
            )
        host, device = c_int64(0), c_int64(0)
        self._call("horecon_plan_memory", CALLS[call], ctypes.byref(host), ctypes.byref(device))
        return int(host.value), int(device.value)

    def __repr__(self):
        state = "closed" if self.closed else self.backend
        return f"Plan(shape={self.shape}, ncoils={self.ncoils}, nsamples={self.nsamples}, {state})"

    @property
    def backend(self) -> str:
        """'cpu' or 'cuda': where the operators run (never 'auto')."""
        code = c_int32(-1)
        self._call("horecon_plan_backend", ctypes.byref(code))
        return {HORECON_BACKEND_CPU: "cpu", HORECON_BACKEND_CUDA: "cuda"}.get(code.value, str(code.value))

    # -------------------------------------------------------------- shapes
    def _image_shapes(self):
        """Accepted shapes of one image: (N,), the plan's shape, (nx, ny, nz)
        and (nx, ny) when nz = 1."""
        nx, ny, nz = self.dims
        shapes = [(self.nvoxels,), tuple(self.shape), (nx, ny, nz)]
        if nz == 1:
            shapes.append((nx, ny))
        return list(dict.fromkeys(shapes))

    def _check_image_shape(self, name, shape):
        """SIZE_MISMATCH naming ``name`` unless ``shape`` is one of the image's."""
        if shape not in self._image_shapes():
            raise _value_error(
                HORECON_ERR_SIZE_MISMATCH,
                f"{name} has shape {_shape_str(shape)}, expected one of "
                + ", ".join(_shape_str(s) for s in self._image_shapes())
                + " (indexed [ix, iy, iz])",
            )

    def _image_in(self, name, x, dtype=np.complex64):
        arr = _numeric(name, x, dtype)
        self._check_image_shape(name, arr.shape)
        # Fortran ravel: voxel n = ix + nx*(iy + ny*iz), whatever the memory order
        return _f(arr.reshape(-1, order="F"))

    def _image_out(self, flat):
        return flat.reshape(self.shape, order="F")

    def _matrix_in(self, name, a, rows, cols, dtype, row_name, col_name, extra=()):
        """An array meaning the MODEL.md matrix [rows x cols] (first index
        fastest), as Fortran-ordered (rows, cols). Accepts (rows, cols) in any
        memory order, (cols, rows) when rows != cols, (rows,) when cols = 1,
        and the shapes in ``extra``, whose Fortran ravel is the [rows x cols] matrix."""
        arr = _numeric(name, a, dtype)
        s = arr.shape
        if s == (rows, cols):
            out = arr
        elif s == (cols, rows) and rows != cols:
            out = arr.T
        elif cols == 1 and s == (rows,):
            out = arr.reshape(rows, 1)
        elif any(s == e for e in extra):
            out = arr.reshape((rows, cols), order="F")
        else:
            expected = [(rows, cols)]
            if rows != cols:
                expected.append((cols, rows))
            if cols == 1:
                expected.append((rows,))
            expected += [e for e in extra if e not in expected]
            raise _value_error(
                HORECON_ERR_SIZE_MISMATCH,
                f"{name} has shape {_shape_str(s)}, expected ({row_name}, {col_name}) = "
                + " or ".join(_shape_str(e) for e in expected),
            )
        return _f(out)

    def _terms_from(self, name, a, length, length_name):
        """B from an (length, B) or (B, length) or (length,) array."""
        s = np.shape(a)
        if len(s) == 1 and s[0] == length:
            return 1
        if len(s) == 2 and s[0] == length:
            return s[1]
        if len(s) == 2 and s[1] == length:
            return s[0]
        raise _value_error(
            HORECON_ERR_SIZE_MISMATCH,
            f"{name} has shape {_shape_str(s)}, expected ({length_name}, B) = ({length}, B) or (B, {length})",
        )

    def _vector_in(self, name, a, length, length_name, dtype=np.float64):
        arr = _numeric(name, a, dtype)
        if arr.shape != (length,):
            raise _value_error(
                HORECON_ERR_SIZE_MISMATCH,
                f"{name} has shape {_shape_str(arr.shape)}, expected ({length_name},) = ({length},)",
            )
        return _f(arr)

    def _data_in(self, name, d):
        return self._matrix_in(name, d, self.nsamples, self.ncoils, np.complex64, "M", "L")

    # ------------------------------------------------------------- model
    def set_positions(self, positions) -> None:
        """Voxel positions r_n in metres: (N, 3) in any memory order, or (3, N) when N != 3."""
        p = self._matrix_in("positions", positions, self.nvoxels, 3, np.float64, "N", "3")
        self._call("horecon_set_positions", _ptr(p, c_double))

    def set_grid_positions(self, fov, center=(0.0, 0.0, 0.0)) -> None:
        """Axis-aligned grid: x_i = center_x + (i - nx//2)*fov_x/nx, likewise y, z
        (metres; a scalar fov applies to all three axes)."""
        f, c = (_three(name, v) for name, v in (("fov", fov), ("center", center)))
        self._call("horecon_set_grid_positions", _ptr(f, c_double), _ptr(c, c_double))

    def set_cartesian(self, mask) -> None:
        """Cartesian FFT mode: the samples are the grid points where ``mask``
        (the image shape, indexed [ix, iy, iz], any memory order; bool or
        numbers, != 0 = sampled) is set, in Fortran (x fastest) order, so
        nsamples must equal their count. Needs grid positions
        (set_grid_positions, or set_positions on an axis-aligned grid). Sets
        the phase model to their trajectory k_a = 2 pi (p_a - n_a//2)/fov_a and
        computes E, E^H, E^H E and cg exactly with FFTs. A later positions or
        phase-model setter leaves Cartesian mode; off-resonance is refused."""
        arr = np.asarray(mask)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"mask: expected a bool or real numeric array, got dtype {arr.dtype}")
        self._check_image_shape("mask", arr.shape)
        m = np.ascontiguousarray((arr != 0).reshape(-1, order="F").astype(np.uint8))
        self._call("horecon_set_cartesian", _ptr(m, c_uint8))

    def set_solid_harmonics(self, coefficients) -> None:
        """Built-in real solid harmonics (MODEL.md table); coefficients (M, B)
        rad/m^order with B in {1, 4, 9, 16}, or (B, M) when B != M. Needs positions."""
        b = self._terms_from("coefficients", coefficients, self.nsamples, "M")
        c = self._matrix_in("coefficients", coefficients, self.nsamples, b, np.float64, "M", "B")
        self._call("horecon_set_solid_harmonics", int(b), _ptr(c, c_double))

    def set_basis(self, basis, coefficients) -> None:
        """A user basis h_b(r_n), (N, B) (or (B, N) when B != N), with
        coefficients (M, B) (or (B, M) when B != M)."""
        b = self._terms_from("basis", basis, self.nvoxels, "N")
        h = self._matrix_in("basis", basis, self.nvoxels, b, np.float64, "N", "B")
        c = self._matrix_in("coefficients", coefficients, self.nsamples, b, np.float64, "M", "B")
        self._call("horecon_set_basis", int(b), _ptr(h, c_double), _ptr(c, c_double))

    def set_trajectory(self, k) -> None:
        """A k-space trajectory k(t_j) in rad/m: (M, ndims) (or (ndims, M) when
        ndims != M, or (M,) for ndims = 1); h = (x, y, z)[:ndims]. Needs positions."""
        b = self._terms_from("k", k, self.nsamples, "M")
        kk = self._matrix_in("k", k, self.nsamples, b, np.float64, "M", "ndims")
        self._call("horecon_set_trajectory", int(b), _ptr(kk, c_double))

    def set_off_resonance(self, omega, times=None) -> None:
        """Off-resonance omega (rad/s; (N,) or the image shape) with sample times
        (M,) in seconds; ``omega=None`` clears it. ``times=None`` with an omega is
        passed to the library as NULL (HORECON_ERR_NULL_POINTER)."""
        if omega is None:
            self._call("horecon_set_off_resonance", None, None)
            return
        w = self._image_in("omega", omega, np.float64)
        t = None if times is None else self._vector_in("times", times, self.nsamples, "M")
        self._call("horecon_set_off_resonance", _ptr(w, c_double), _ptr(t, c_double))

    def set_sensitivities(self, sensitivities) -> None:
        """Coil sensitivities S_c(r_n): (N, L), (L, N) when L != N, the image
        shape + (L,) (indexed [ix, iy, iz, c]), or the image shape when L = 1.
        ``None`` means S = 1 (only with one coil)."""
        if sensitivities is None:
            self._call("horecon_set_sensitivities", None)
            return
        L = self.ncoils
        extra = [s + (L,) for s in self._image_shapes() if len(s) > 1]
        if L == 1:
            extra += [s for s in self._image_shapes()]
        s = self._matrix_in("sensitivities", sensitivities, self.nvoxels, L, np.complex64, "N", "L", extra)
        self._call("horecon_set_sensitivities", _ptr(s, _C32))

    def set_toeplitz(self, enable: bool = True, time_segments: int = 0) -> None:
        """Use the Toeplitz normal operator in :meth:`normal` and :meth:`cg`:
        E^H W E through FFTs of the 2x-oversampled grid with exact precomputed
        kernels (forward and adjoint stay exact). Needs a phase linear in
        position (set_trajectory, or solid harmonics with the terms above order
        1 zero) on a voxel lattice; checked at the next normal/cg
        (HorEconError with HORECON_ERR_INVALID_ARGUMENT naming the reason).
        With off-resonance, time segmentation with ``time_segments`` segments
        (0 = automatic, normal operator within 1e-3 relative); ignored without
        off-resonance. ``enable=False`` restores the exact normal operator."""
        self._call("horecon_set_toeplitz", 1 if enable else 0, int(time_segments))

    def set_approximation(self, tolerance: float) -> None:
        """The fast path: ``tolerance`` in [1e-5, 0.1] makes forward, adjoint,
        fhd, normal and cg use a separable expansion of the higher-order and
        off-resonance phase on top of a NUFFT, with relative RMS error vs the
        exact operator <= tolerance (measured: see :attr:`approximation_info`);
        0 (the default) = exact direct sums. Needs voxels on a lattice (any
        orientation, a masked subset of one); otherwise the operators stay
        exact and ``approximation_info["reason"]`` says why. Negative, NaN or
        out-of-range tolerances raise HoreconError (HORECON_ERR_INVALID_ARGUMENT)."""
        self._call("horecon_set_approximation", float(tolerance))

    @property
    def approximation_info(self) -> dict:
        """What the plan made of its approximation tolerance: ``active`` (bool),
        ``rank`` (K terms), ``estimated_error`` (the larger relative RMS error
        of E x and E^H d against the exact operator on random probes, measured
        when the plan is prepared) and ``reason`` (why inactive, "" otherwise).
        Prepares the plan if needed (the model must be complete)."""
        info = _ApproximationInfo()
        info.struct_size = ctypes.sizeof(_ApproximationInfo)
        self._call("horecon_get_approximation_info", ctypes.byref(info))
        return {
            "active": bool(info.active),
            "rank": int(info.rank),
            "estimated_error": float(info.estimated_error),
            "reason": info.reason.decode("utf-8", "replace"),
        }

    # ---------------------------------------------------------- operators
    def forward(self, image, *, progress=None) -> np.ndarray:
        """d = E rho: image ((N,) or the image shape) -> data (M, L) complex64, Fortran order.
        ``progress``: None (a tqdm bar for calls over a second, when tqdm is
        installed), True, False, or callable(fraction) -> truthy to stop (as for
        every long call; Ctrl-C cancels it)."""
        x = self._image_in("image", image)
        d = np.empty((self.nsamples, self.ncoils), dtype=np.complex64, order="F")
        self._long_call("forward", "horecon_forward", progress, _ptr(x, _C32), _ptr(d, _C32))
        return d

    def adjoint(self, data, *, progress=None) -> np.ndarray:
        """rho = E^H d: data (M, L) (or (L, M) when L != M, (M,) when L = 1) ->
        image of the plan's shape, complex64, Fortran order."""
        d = self._data_in("data", data)
        x = np.empty(self.nvoxels, dtype=np.complex64)
        self._long_call("adjoint", "horecon_adjoint", progress, _ptr(d, _C32), _ptr(x, _C32))
        return self._image_out(x)

    def normal(self, image, *, progress=None) -> np.ndarray:
        """E^H E rho: image -> image of the plan's shape."""
        x = self._image_in("image", image)
        y = np.empty(self.nvoxels, dtype=np.complex64)
        self._long_call("normal", "horecon_normal", progress, _ptr(x, _C32), _ptr(y, _C32))
        return self._image_out(y)

    def fhd(self, data, phi=None, *, progress=None) -> np.ndarray:
        """Stone et al.'s F^H d (eq. 4): sum_m conj(phi_m) d_m exp(+i 2 pi k_m . x_n)
        for Stone's k (cycles/m) = -k_plan / (2 pi), i.e. E^H (conj(phi) * d).
        Needs a single-coil trajectory plan (set_trajectory; no sensitivities,
        no off-resonance). data (M,), phi (M,) complex or None (1). Returns an image."""
        d = self._vector_in("data", data, self.nsamples, "M", np.complex64)
        p = None if phi is None else self._vector_in("phi", phi, self.nsamples, "M", np.complex64)
        out = np.empty(self.nvoxels, dtype=np.complex64)
        self._long_call(
            "fhd", "horecon_fhd", progress, _ptr(d, _C32), None if p is None else _ptr(p, _C32), _ptr(out, _C32)
        )
        return self._image_out(out)

    def q_dims(self):
        """The shape of :meth:`q`: 2n along each axis of more than one voxel, 1 otherwise."""
        dims = (c_int64 * 3)()
        self._call("horecon_q_dims", dims)
        return tuple(int(v) for v in dims)

    def q(self, phi_mag2=None, *, progress=None) -> np.ndarray:
        """Stone et al.'s Q (eq. 3), the Toeplitz kernel of F^H F, on the
        2x-oversampled grid: q[i, j, l] = sum_m |phi_m|^2 exp(+i 2 pi k_m . r_ijl)
        with r_ijl = (i - nx) a + (j - ny) b + (l - nz) c (a, b, c the voxel grid
        steps; index (nx, ny, nz) is offset 0). Same plans as :meth:`fhd`, voxels
        on a regular grid. phi_mag2 (M,) >= 0 or None (1). Returns an array of
        shape q_dims() cut to the plan's number of image dimensions (Fortran
        order, indexed [i, j, l])."""
        w = None if phi_mag2 is None else self._vector_in("phi_mag2", phi_mag2, self.nsamples, "M", np.float32)
        dims = self.q_dims()
        out = np.empty(int(np.prod(dims)), dtype=np.complex64)
        self._long_call("q", "horecon_q", progress, None if w is None else _ptr(w, c_float), _ptr(out, _C32))
        return out.reshape(dims[: len(self.shape)], order="F")

    def gridding(self, data, dcf=None, *, progress=None) -> np.ndarray:
        """The gridding reconstruction (the seeds' comparison method): Kaiser-Bessel
        gridding (width 6, 2x oversampling), FFT, deapodization, coil combination.
        Approximates (relative error ~1e-5) rho_c(r_n) = sum_j w_j d_jc exp(-i (k0_j + k_j . r_n)),
        combined as sum_c conj(S_c) rho_c / sum_c |S_c|^2 with sensitivities, and as the
        root-sum-of-squares for several coils without them. Voxels on a regular grid;
        phase model set_trajectory or solid harmonics (orders 0 and 1 used; higher
        orders and off-resonance ignored); a user basis is refused. data (M,) or
        (M, L); dcf (M,) >= 0 or None (Pipe-Menon weights, scaled so that the uniform
        object's centre voxel comes out as 1). Returns an image."""
        d = self._data_in("data", data)
        w = None if dcf is None else self._vector_in("dcf", dcf, self.nsamples, "M", np.float32)
        out = np.empty(self.nvoxels, dtype=np.complex64)
        self._long_call(
            "gridding", "horecon_gridding", progress, _ptr(d, _C32), None if w is None else _ptr(w, c_float),
            _ptr(out, _C32),
        )
        return self._image_out(out)

    def cg(
        self,
        data,
        max_iterations: int = 50,
        tolerance: float = 1e-6,
        regularizer="none",
        lambda_: float = 0.0,
        sample_weights=None,
        x0=None,
        progress=None,
        *,
        reweightings: int | None = None,
        epsilon: float | None = None,
        sigma: float | None = None,
        fd_weights=None,
        neighbours: int | None = None,
        bar=None,
        preconditioner="none",
        discrepancy_tau: float = 0.0,
        noise_sigma: float = 1.0,
    ):
        """Conjugate gradient on (E^H W E + lambda R) rho = E^H W d.

        Parameters
        ----------
        data : (M, L) complex (or (L, M) when L != M, (M,) when L = 1)
        max_iterations, tolerance : stop after this many iterations or when
            the relative residual of the normal equations is <= tolerance.
        regularizer : 'none' | 'tikhonov' (lambda*||rho||^2)
            | 'finite_difference' (lambda*||D rho||^2_u)
            | 'total_variation' (2*lambda*sum_n sqrt(g_n^2 + epsilon^2))
            | 'laplace' (2*lambda*sum_n (1 - exp(-sqrt(g_n^2 + epsilon^2)/sigma)))
            | int code. D: forward differences along the grid axes of more than
            one voxel (none from the last voxel of an axis), g_n: the gradient
            magnitude at voxel n weighted by fd_weights. TV and Laplace run
            `reweightings` CG solves of up to max_iterations each (half-quadratic
            reweighting; Laplace multiplies epsilon by 0.1 at each weight update);
            info['iterations'] is then their total.
        lambda_ : regularisation weight >= 0.
        reweightings, epsilon, sigma : TV / Laplace options (library defaults
            5, 1e-3, 1; epsilon and sigma in image units).
        fd_weights : per-edge weights u >= 0 of the finite-difference priors:
            (N, ndims), (ndims, N), or the image shape + (ndims,), with ndims the
            number of grid axes of more than one voxel (x before y before z;
            entry [n, a] weighs the edge from voxel n to its successor along a),
            or None (= 1). With neighbours=26, ndims is the number of neighbour
            directions (13 in 3D, 4 in 2D, 1 in 1D) in the order given there.
        neighbours : 6 (default: differences along the grid axes) or 26 (to
            every neighbour, each edge once, the difference along offset d
            weighted 1/|d|^2 in g_n^2): over the axes e0, e1, e2 of more than one
            voxel the directions are e0, e1, e2, e0+e1, e0-e1, e0+e2, e0-e2,
            e1+e2, e1-e2, e0+e1+e2, e0+e1-e2, e0-e1+e2, e0-e1-e2, keeping those
            within the grid's axes (2D: e0, e1, e0+e1, e0-e1, the 8-neighbourhood).
        sample_weights : (M,) non-negative weights W shared by all coils, or None.
        x0 : start image (warm start), or None for zero.
        progress : callable(iteration, rel_residual) -> truthy to stop, or None.
            Stopping raises HoreconError(HORECON_ERR_CANCELLED); an exception
            raised by the callback stops the solve and is re-raised. The
            callback runs on a library thread, not the caller's.

        preconditioner : 'none' | 'diagonal' (1/diag(E^H W E + lambda R)) |
            'circulant' (T. Chan's circulant of the Toeplitz kernel; needs
            set_toeplitz) | int code.
        discrepancy_tau, noise_sigma : the discrepancy rule: stop at the first
            iterate with ||W^1/2 (E rho - d)|| <= tau * sigma * sqrt(L * sum(W))
            (tau = 0: off; sigma = 1 for whitened data, see horecon.calib).
        bar : the plan-level progress of the whole solve: None (a tqdm bar for
            solves over a second, when tqdm is installed), True, False, or
            callable(fraction) -> truthy to stop.

        Ctrl-C (KeyboardInterrupt) during the solve stops it (within the
        current operator application) and is then re-raised (chained to the
        CANCELLED error).

        Returns
        -------
        (image, info): the solution in the plan's image shape, and a dict with
        iterations, converged (bool), rel_residual, seconds, stop_reason
        ("tolerance", "max_iterations", "discrepancy" or "breakdown") and
        data_residual (with the discrepancy rule, else None). Not converging
        within max_iterations is not an error.
        """
        lib = _load()
        d = self._data_in("data", data)
        opts = _CgOptions()
        lib.horecon_default_cg_options(ctypes.byref(opts))
        opts.max_iterations = int(max_iterations)
        opts.tolerance = float(tolerance)
        opts.regularizer = _enum("regularizer", regularizer, REGULARIZERS)
        opts.lambda_ = float(lambda_)
        if reweightings is not None:
            opts.reweightings = int(reweightings)
        if epsilon is not None:
            opts.epsilon = float(epsilon)
        if sigma is not None:
            opts.sigma = float(sigma)
        if neighbours is not None:
            opts.neighbours = int(neighbours)
        opts.preconditioner = _enum("preconditioner", preconditioner, PRECONDITIONERS)
        opts.discrepancy_tau = float(discrepancy_tau)
        opts.noise_sigma = float(noise_sigma)
        u = None
        if fd_weights is not None:
            axes = sum(1 for d in self.dims if d > 1)
            ndims = {0: 1, 1: 1, 2: 4, 3: 13}[axes] if opts.neighbours == 26 else max(1, axes)
            extra = [sh + (ndims,) for sh in self._image_shapes() if len(sh) > 1]
            u = self._matrix_in("fd_weights", fd_weights, self.nvoxels, ndims, np.float32, "N", "ndims", extra)
            opts.fd_weights = _ptr(u, c_float)
        w = None
        if sample_weights is not None:
            w = self._vector_in("sample_weights", sample_weights, self.nsamples, "M", np.float32)
            opts.sample_weights = _ptr(w, c_float)
        if x0 is not None:
            x = self._image_in("x0", x0).copy()  # the library writes the solution here
            opts.warm_start = 1
        else:
            x = np.zeros(self.nvoxels, dtype=np.complex64)
        # The solve runs on a worker thread so that this thread stays responsive
        # to Ctrl-C (KeyboardInterrupt): it then asks the progress trampoline
        # to stop the solve at the next iteration and re-raises once it has.
        if progress is not None and not callable(progress):
            raise TypeError("cg: progress must be callable(iteration, rel_residual) or None")
        raised = []
        stop = threading.Event()

        def trampoline(_user, iteration, rel_residual):
            if stop.is_set():
                return 1
            if progress is None:
                return 0
            plans = _IN_PROGRESS.__dict__.setdefault("plans", [])
            plans.append(self)
            try:
                return 1 if progress(int(iteration), float(rel_residual)) else 0
            except BaseException as e:  # noqa: BLE001 - re-raised after the call
                raised.append(e)
                return 1
            finally:
                plans.pop()

        callback = _ProgressFn(trampoline)  # referenced by this frame until the solve ends
        opts.progress = callback
        info = _CgInfo()
        outcome = {}
        bar_handler = _progress._Handler(bar, "cg")
        handle = self._begin(False)

        def solve():
            _progress._TLS.handler = bar_handler
            try:
                status = lib.horecon_cg(
                    handle, _ptr(d, _C32), ctypes.byref(opts), _ptr(x, _C32), ctypes.byref(info)
                )
                outcome["status"] = status
                if status != HORECON_OK:
                    outcome["message"] = _last_error()  # thread-local: read it here
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                outcome["exception"] = e
            finally:
                _progress._TLS.handler = None
                self._end(handle, False)  # the worker holds the plan until the solve ends
                done.set()

        done = threading.Event()
        worker = threading.Thread(target=solve, name="horecon-cg", daemon=True)
        worker.start()
        interrupt = None
        # an Event, not Thread.join: an interrupted join can mark a live thread stopped
        while not done.is_set():
            try:
                done.wait(0.05)
            except KeyboardInterrupt as e:
                interrupt = e
                stop.set()
                bar_handler.stop.set()
                if handle is not None:
                    lib.horecon_cancel(handle)  # stops the current operator application too
        bar_handler.close()
        del callback
        if "exception" in outcome:
            raise outcome["exception"]
        status = outcome["status"]
        _progress.settle(
            status != HORECON_OK,
            lambda: _error(status, outcome.get("message", ""), "this Plan was closed" if handle is None else ""),
            interrupt,
            raised or bar_handler.raised,
        )
        return self._image_out(x), {
            "iterations": info.iterations,
            "converged": bool(info.converged),
            "rel_residual": info.rel_residual,
            "seconds": info.seconds,
            "stop_reason": STOP_REASONS.get(info.stop_reason, str(info.stop_reason)),
            "data_residual": None if info.data_residual < 0 else info.data_residual,
        }


def _three(name, value):
    """A scalar or 3-vector as a contiguous float64 3-vector."""
    arr = _numeric(name, value, np.float64)
    if arr.shape not in ((), (1,), (3,)):
        raise _value_error(
            HORECON_ERR_SIZE_MISMATCH, f"{name} has shape {_shape_str(arr.shape)}, expected a scalar or (3,)"
        )
    return np.ascontiguousarray(np.broadcast_to(arr, (3,)))


def _grid_dims(dims, what="dims") -> list:
    """A grid's 1 to 3 axis lengths as [nx, ny, nz] (the C calls read three:
    a fourth would shift every argument after them)."""
    dims = [int(v) for v in np.atleast_1d(dims)]
    if not 1 <= len(dims) <= 3:
        raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                           f"{what} has {len(dims)} axes {tuple(dims)}, expected 1 to 3 entries (nx[, ny[, nz]])")
    return dims + [1] * (3 - len(dims))


def _enum(name, value, table):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    key = str(value).lower()
    if key not in table:
        raise _value_error(
            HORECON_ERR_INVALID_ARGUMENT,
            f"{name} must be one of {', '.join(repr(k) for k in table)}, got {value!r}",
        )
    return table[key]


# The package's modules, imported on first use: ``horecon.sim`` (the simulation
# toolkit: phantoms, trajectories, coils, field models, noise, metrics),
# ``horecon.io`` (ISMRMRD, NIfTI), ``horecon.plot``, ``horecon.batch`` and any other python/horecon/*.py.
def __getattr__(name):
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'horecon' has no attribute {name!r}")
