"""horecon.nufft: the standalone non-uniform FFT of libhorecon (``horecon_nufft_*``).

FINUFFT's conventions and, as far as they go, its Python API (``finufft.Plan``,
``finufft.nufft2d1`` ...)::

    type 1 (non-uniform -> modes):  f[k] = sum_j c[j] exp(isign * i k.x_j)
    type 2 (modes -> non-uniform):  c[j] = sum_k f[k] exp(isign * i k.x_j)

with modes k = -N//2 ... (N-1)//2 per axis (FINUFFT's default ``modeord=0``)
and points in radians (any finite value, used modulo 2 pi). Shapes:

=======  ======================  =====================================
type     input                   output
=======  ======================  =====================================
1        c: (M,) or (T, M)       f: n_modes or (T, *n_modes)
2        f: n_modes or (T, ...)  c: (M,) or (T, M)
=======  ======================  =====================================

where T = n_trans (> 1: the transforms share the points) and ``f[k1, k2, k3]``
holds mode (k1, k2, k3) with k1 along x (the first point coordinate), as
in FINUFFT. The memory order of inputs does not matter; outputs are views
with the library's layout (x fastest).

``dtype`` 'complex128' (the default, as in FINUFFT) computes in float64
(``eps`` down to 1e-12), 'complex64' in float32 (``eps`` >= 1e-6; smaller
values raise, where FINUFFT would warn). The achieved relative l2 error is
at or below ``eps`` (the kernel is one or two cells wider than FINUFFT's),
except in float32 on CUDA at ``eps`` = 1e-6 itself, where rounding is the
whole error and about as large (measured up to 1.1e-6; use 'complex128');
the CPU computes float32 plans below 1e-5 in float64.
Errors raise :class:`horecon.HoreconError` with the library's status and
message; shape problems :class:`horecon.HoreconValueError`.

The library call releases the GIL; one plan may execute from several
threads at once.
"""

from __future__ import annotations

import ctypes
import operator
import threading

import numpy as np

from . import (
    HORECON_ERR_INVALID_ARGUMENT,
    HORECON_ERR_NULL_POINTER,
    HORECON_ERR_SIZE_MISMATCH,
    HORECON_PRECISION_ACCURATE,
    HORECON_PRECISION_DOUBLE,
    BACKENDS,
    HoreconError,
    _Options,
    _check,
    _enum,
    _declare_function,
    _load,
    _numeric,
    _shape_str,
    _value_error,
)

__all__ = ["Plan", "nufft1", "nufft2"]

_lib = _load()
_Handle = ctypes.c_void_p
_SIGNATURES = {
    "horecon_nufft_create": (
        ctypes.c_int32,
        [ctypes.POINTER(_Handle), ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
         ctypes.c_int64, ctypes.POINTER(ctypes.c_double), ctypes.c_int32, ctypes.c_double,
         ctypes.c_int32, ctypes.POINTER(_Options)],
    ),
    "horecon_nufft_execute": (ctypes.c_int32, [_Handle, ctypes.c_void_p, ctypes.c_void_p]),
    "horecon_nufft_execute_c64": (ctypes.c_int32, [_Handle, ctypes.c_void_p, ctypes.c_void_p]),
    "horecon_nufft_destroy": (None, [_Handle]),
}
for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _declare_function(getattr(_lib, _name), _restype, _argtypes)

_DTYPES = {
    np.dtype(np.complex64): (HORECON_PRECISION_ACCURATE, "horecon_nufft_execute"),
    np.dtype(np.complex128): (HORECON_PRECISION_DOUBLE, "horecon_nufft_execute_c64"),
}


class Plan:
    """A non-uniform FFT plan (``horecon_nufft``), used like ``finufft.Plan``::

        plan = horecon.nufft.Plan(1, (256, 256), n_trans=8, eps=1e-6, dtype="complex64")
        plan.setpts(x, y)           # sorts the points once
        f = plan.execute(c)         # c: (8, M) -> f: (8, 256, 256)

    Parameters
    ----------
    nufft_type : 1 or 2
    n_modes : int or tuple of 1..3 ints
        Modes per axis (N1[, N2[, N3]]).
    n_trans : int
        Transforms per execute, sharing the points.
    eps : float
        Relative tolerance (see the module docs for the ranges).
    isign : +1, -1 or None
        Sign of the exponent; None = +1 for type 1, -1 for type 2 (FINUFFT's defaults).
    dtype : 'complex128' or 'complex64'
        Data type and arithmetic.
    backend : 'auto' | 'cpu' | 'cuda'; threads : CPU threads (0 = all); device : CUDA device.
    """

    def __init__(self, nufft_type, n_modes, n_trans=1, eps=1e-6, isign=None, dtype="complex128", *,
                 backend="auto", threads=0, device=0):
        self._handle = None
        self._lock = threading.Condition()
        self._calls = 0
        self._pending = None
        if nufft_type not in (1, 2):
            raise _value_error(HORECON_ERR_INVALID_ARGUMENT,
                               f"nufft_type must be 1 or 2, got {nufft_type!r}")
        modes = (operator.index(n_modes),) if np.isscalar(n_modes) else tuple(
            operator.index(n) for n in n_modes)
        if not 1 <= len(modes) <= 3:
            raise _value_error(HORECON_ERR_INVALID_ARGUMENT,
                               f"n_modes must have 1 to 3 entries, got {n_modes!r}")
        self.type = int(nufft_type)
        self.n_modes = modes
        self.ndims = len(modes)
        self.n_trans = operator.index(n_trans)
        self.eps = float(eps)
        self.isign = (1 if self.type == 1 else -1) if isign is None else (1 if isign >= 0 else -1)
        self.dtype = np.dtype(dtype)
        if self.dtype not in _DTYPES:
            raise TypeError(f"dtype must be complex64 or complex128, got {self.dtype}")
        self._opts = _Options()
        _lib.horecon_default_options(ctypes.byref(self._opts))
        self._opts.precision, self._execute_name = _DTYPES[self.dtype]
        self._opts.backend = _enum("backend", backend, BACKENDS)
        self._opts.num_threads = int(threads)
        self._opts.device = int(device)
        self.npoints = None

    # ---------------------------------------------------------- life cycle
    def setpts(self, x, y=None, z=None) -> None:
        """Sets the points (one coordinate array of length M per dimension,
        radians) and sorts them: the plan is (re)made in the library."""
        coords = [c for c in (x, y, z) if c is not None]
        if len(coords) != self.ndims:
            raise _value_error(HORECON_ERR_INVALID_ARGUMENT,
                               f"setpts: {self.ndims} coordinate arrays expected (x, y, z up to "
                               f"ndims = {self.ndims}), got {len(coords)}")
        arrays = [_numeric(name, c, np.float64).ravel() for name, c in zip("xyz", coords)]
        m = arrays[0].size
        for name, a in zip("xyz", arrays):
            if a.size != m:
                raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                                   f"setpts: {name} has {a.size} points, x has {m}")
        points = np.ascontiguousarray(np.concatenate(arrays) if arrays else np.zeros(0))
        modes = (ctypes.c_int64 * self.ndims)(*self.n_modes)
        handle = _Handle()
        _check(_lib.horecon_nufft_create(
            ctypes.byref(handle), self.type, self.ndims, modes, m,
            points.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), self.isign, self.eps,
            self.n_trans, ctypes.byref(self._opts)))
        self._replace(handle.value, m)

    def _replace(self, handle, npoints=None) -> None:
        """Swaps in a new library plan and its point count together (an
        execute takes both under the same lock: buffers sized for the plan)."""
        with self._lock:
            old, self._handle = self._handle, handle
            if handle is not None:
                self.npoints = npoints
            if old is not None and self._calls:
                self._pending, old = old, None
        if old is not None:
            _lib.horecon_nufft_destroy(old)

    def close(self) -> None:
        """Frees the plan (idempotent; safe while another thread executes it)."""
        if getattr(self, "_lock", None) is not None:
            self._replace(None)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"horecon.nufft.Plan(type {self.type}, modes {self.n_modes}, n_trans {self.n_trans}, "
                f"eps {self.eps:g}, isign {self.isign:+d}, {self.dtype}, "
                f"{'M = %d' % self.npoints if self.npoints is not None else 'no points'})")

    # ----------------------------------------------------------- execute
    def _grid_shape(self):
        return self.n_modes if self.n_trans == 1 else (self.n_trans,) + self.n_modes

    def _points_shape(self, npoints=None):
        npoints = self.npoints if npoints is None else npoints
        return (npoints,) if self.n_trans == 1 else (self.n_trans, npoints)

    def _to_library(self, name, data, shape, grid):
        """`data` as a contiguous array in the library's layout (x fastest)."""
        arr = _numeric(name, data, self.dtype)
        if arr.shape != shape and not (self.n_trans == 1 and arr.shape == (1,) + shape):
            raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                               f"execute: {name} has shape {_shape_str(arr.shape)}, expected "
                               f"{_shape_str(shape)}")
        arr = arr.reshape(shape)
        if grid:
            # the mode axes reversed (x last = fastest in C order), transforms first
            lead = 0 if self.n_trans == 1 else 1
            axes = tuple(range(lead)) + tuple(range(arr.ndim - 1, lead - 1, -1))
            arr = arr.transpose(axes)
        return np.ascontiguousarray(arr)

    def _from_library(self, flat, grid, npoints=None):
        """The library's output as an array of FINUFFT's shape (a view)."""
        if not grid:
            return flat.reshape(self._points_shape(npoints))
        lead = () if self.n_trans == 1 else (self.n_trans,)
        arr = flat.reshape(lead + self.n_modes[::-1])
        k = len(lead)
        return arr.transpose(tuple(range(k)) + tuple(range(arr.ndim - 1, k - 1, -1)))

    def execute(self, data, out=None):
        """Runs the n_trans transforms: type 1 takes c (M,) or (T, M) and
        returns f, type 2 takes f and returns c (module docs). ``out``, if
        given, receives the result (right shape; cast to its dtype)."""
        with self._lock:  # the plan and its point count together (setpts may swap both)
            handle, npoints = self._handle, self.npoints
            if npoints is None:
                raise _value_error(HORECON_ERR_INVALID_ARGUMENT, "execute: call setpts first")
            if handle is None:
                raise HoreconError(HORECON_ERR_NULL_POINTER, "HORECON_ERR_NULL_POINTER",
                                   "execute: the plan is closed")
            self._calls += 1
        try:
            m, n = npoints * self.n_trans, int(np.prod(self.n_modes)) * self.n_trans
            if self.type == 1:
                source = self._to_library("c", data, self._points_shape(npoints), grid=False)
                result = np.empty(n, dtype=self.dtype)
                args = (source, result)
            else:
                source = self._to_library("f", data, self._grid_shape(), grid=True)
                result = np.empty(m, dtype=self.dtype)
                args = (result, source)
            status = getattr(_lib, self._execute_name)(handle, args[0].ctypes.data, args[1].ctypes.data)
            _check(status)
        finally:
            pending = None
            with self._lock:
                self._calls -= 1
                if not self._calls and self._pending is not None:
                    pending, self._pending = self._pending, None
            if pending is not None:
                _lib.horecon_nufft_destroy(pending)
        value = self._from_library(result, grid=self.type == 1, npoints=npoints)
        if out is None:
            return value
        if tuple(out.shape) != tuple(value.shape):
            raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                               f"execute: out has shape {_shape_str(out.shape)}, expected "
                               f"{_shape_str(value.shape)}")
        out[...] = value
        return out


def _coordinates(points):
    """x | (x, y) | (x, y, z) | an (ndims, M) array -> a list of coordinate arrays."""
    if isinstance(points, (list, tuple)):
        coords = list(points)
    else:
        arr = np.asarray(points)
        coords = [arr] if arr.ndim <= 1 else list(arr)
    if not 1 <= len(coords) <= 3:
        raise _value_error(HORECON_ERR_INVALID_ARGUMENT,
                           f"points: 1 to 3 coordinate arrays expected, got {len(coords)}")
    return coords


def _simple(nufft_type, points, data, n_modes, eps, isign, dtype, kwargs):
    """One plan, one execute (the ``nufft1`` / ``nufft2`` functions)."""
    coords = _coordinates(points)
    nd = len(coords)
    arr = np.asarray(data)
    if dtype is None:
        dtype = np.complex64 if arr.dtype in (np.complex64, np.float32) else np.complex128
    if nufft_type == 1:
        modes = (operator.index(n_modes),) if np.isscalar(n_modes) else tuple(n_modes)
        if len(modes) != nd:
            raise _value_error(HORECON_ERR_INVALID_ARGUMENT,
                               f"nufft1: {len(modes)} mode counts for {nd} coordinate arrays")
        lead = arr.shape[:-1]
    else:
        if arr.ndim < nd:
            raise _value_error(HORECON_ERR_SIZE_MISMATCH,
                               f"nufft2: f has shape {_shape_str(arr.shape)}, expected {nd} mode axes")
        modes = arr.shape[arr.ndim - nd:]
        lead = arr.shape[:arr.ndim - nd]
    n_trans = int(np.prod(lead, dtype=np.int64)) if lead else 1
    with Plan(nufft_type, modes, n_trans=n_trans, eps=eps, isign=isign, dtype=dtype, **kwargs) as plan:
        plan.setpts(*coords)
        if nufft_type == 1:
            source = arr.reshape((n_trans, -1) if lead else (-1,))
            return plan.execute(source).reshape(lead + plan.n_modes)
        source = arr.reshape(((n_trans,) if lead else ()) + plan.n_modes)
        return plan.execute(source).reshape(lead + (-1,))


def nufft1(points, c, n_modes, *, eps=1e-6, isign=1, dtype=None, **kwargs):
    """Type 1: f[k] = sum_j c[j] exp(isign i k.x_j). ``points``: x, (x, y),
    (x, y, z) or an (ndims, M) array (radians); ``n_modes``: one count per
    coordinate; ``c``: (M,) or (..., M) (several transforms); returns
    n_modes or (..., *n_modes). dtype None: complex64 for complex64 / float32
    data, else complex128. kwargs: backend, threads, device."""
    return _simple(1, points, c, n_modes, eps, isign, dtype, kwargs)


def nufft2(points, f, *, eps=1e-6, isign=-1, dtype=None, **kwargs):
    """Type 2: c[j] = sum_k f[k] exp(isign i k.x_j); ``f``: (N1[, N2[, N3]])
    or (..., N1, ...) for several transforms; returns (M,) or (..., M). As
    :func:`nufft1` otherwise."""
    return _simple(2, points, f, None, eps, isign, dtype, kwargs)
