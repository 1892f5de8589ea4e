"""horecon.io: ISMRMRD raw data in, NIfTI and ISMRMRD images out.

Needs the ``[io]`` extra (``pip install horecon[io]``: ismrmrd, h5py, nibabel).

Reading (:func:`read_ismrmrd`) returns a :class:`Scan`: the imaging samples of every readout one
after another (M, L), their trajectory or field-camera coefficients (M, D), the sample times, the
noise acquisitions, the geometry, and :meth:`Scan.plan` makes a :class:`horecon.Plan` from it.
:func:`write_ismrmrd` writes simulated data in the same convention (it writes through the
``ismrmrd`` package's own API). :func:`write_nifti` and :func:`write_ismrmrd_image` write images
with their position in the scanner.

The convention (also in the top-level README, "ISMRMRD")
--------------------------------------------------------
- **Trajectory units** are declared in the XML header, ``encoding.trajectoryDescription``:
  ``userParameterString`` ``horecon.model`` = ``k`` or ``solid_harmonics`` and
  ``horecon.units`` = ``rad/m``, ``1/m`` (cycles per metre) or ``normalized`` (cycles per
  pixel, -0.5..0.5 over the encoded matrix and field of view). Files without them (most
  scanners') are read with ``read_ismrmrd(path, model=..., units=...)``; nothing is guessed.
- ``model = "k"``: ``traj`` holds (kx, ky[, kz]) along (read, phase, slice), D = 2 or 3; the image
  is reconstructed on the reconSpace grid in that logical frame, centred on the acquisition's
  ``position`` (the scanner's usual demodulation of the off-centre shift).
- ``model = "solid_harmonics"``: ``traj`` holds the coefficients k_b(t) of the real solid harmonics
  (field-camera order, design/MODEL.md: 1, x, y, z, xy, zy, 3z^2 - r^2, xz, x^2 - y^2, ...), D = 1,
  4, 9 or 16, in rad/m^order, measured in the frame of the header's ``position`` and direction
  vectors (the patient coordinate system, millimetres in the file, metres here). The voxels are
  then placed at their physical positions ``position + R @ offset``, and the coefficients must
  describe the phase of the data as stored (a scanner's demodulation included, in the k0 term).
- **Sample times**: ``t_j = TE + (j - center_sample) * dwell`` within each readout, with TE the
  first ``sequenceParameters.TE`` (ms in the file) and dwell the acquisition's
  ``sample_time_us``; ``discard_pre`` / ``discard_post`` samples are dropped.
- Acquisitions flagged ``ACQ_IS_NOISE_MEASUREMENT`` become :attr:`Scan.noise`; navigator,
  phase-correction, dummy-scan, calibration-only and feedback acquisitions are skipped. All imaging
  acquisitions must belong to one slice, contrast, repetition, phase and set (``select`` picks one).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

__all__ = [
    "Scan",
    "IsmrmrdError",
    "read_ismrmrd",
    "write_ismrmrd",
    "nifti_affine",
    "write_nifti",
    "write_ismrmrd_image",
    "load_array",
]

MODELS = ("k", "solid_harmonics")
UNITS = ("rad/m", "1/m", "normalized")
SOLID_HARMONIC_TERMS = (1, 4, 9, 16)
# acquisitions that are not imaging data (ismrmrd's flag constants); ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING stays
_SKIPPED_FLAGS = (
    "ACQ_IS_PARALLEL_CALIBRATION",
    "ACQ_IS_NAVIGATION_DATA",
    "ACQ_IS_PHASECORR_DATA",
    "ACQ_IS_HPFEEDBACK_DATA",
    "ACQ_IS_RTFEEDBACK_DATA",
    "ACQ_IS_SURFACECOILCORRECTIONSCAN_DATA",
    "ACQ_IS_PHASE_STABILIZATION_REFERENCE",
    "ACQ_IS_PHASE_STABILIZATION",
    "ACQ_IS_DUMMYSCAN_DATA",
)
# encoding counters that must agree across the imaging acquisitions of one reconstruction
_COUNTERS = ("slice", "contrast", "repetition", "phase", "set")
_NUMBER_OF_SAMPLES_MAX = 65535  # ISMRMRD's number_of_samples is uint16


class IsmrmrdError(ValueError):
    """A file that is not what :func:`read_ismrmrd` needs: the message names the file and the
    missing or mismatched field."""


def _require(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"horecon.io needs the '{module}' package: pip install 'horecon[io]' ({e})"
        ) from e


@dataclasses.dataclass
class Scan:
    """One reconstruction's raw data, read from an ISMRMRD file (see the module doc).

    Arrays follow the Plan's conventions: data (M, L), trajectory (M, D), times (M,); images
    are indexed [read, phase, slice].
    """

    data: np.ndarray
    """(M, L) complex64: the imaging samples, readout after readout."""
    trajectory: np.ndarray
    """(M, D) float64: k in rad/m (model 'k') or solid-harmonic coefficients in rad/m^order."""
    model: str
    """'k' or 'solid_harmonics'."""
    times: np.ndarray
    """(M,) float64, seconds after excitation."""
    readouts: np.ndarray
    """(R,) int: samples of each readout (they add up to M)."""
    dwell: float
    """Sample spacing in seconds."""
    echo_time: float
    """Seconds (the header's first TE; 0 when the header has none)."""
    matrix: tuple
    """The reconSpace matrix (nx, ny, nz)."""
    fov: np.ndarray
    """The reconSpace field of view (3,), metres."""
    encoded_matrix: tuple
    """The encodedSpace matrix (nx, ny, nz)."""
    encoded_fov: np.ndarray
    """The encodedSpace field of view (3,), metres."""
    position: np.ndarray
    """Centre of the imaged volume (3,), metres, patient coordinates (LPS)."""
    read_dir: np.ndarray
    phase_dir: np.ndarray
    slice_dir: np.ndarray
    noise: np.ndarray | None = None
    """(K, L) complex64 samples of the noise acquisitions, or None."""
    noise_dwell: float | None = None
    header: object = None
    """The parsed XML header (``ismrmrd.xsd.ismrmrdHeader``)."""
    path: str = ""

    @property
    def ncoils(self) -> int:
        return self.data.shape[1]

    @property
    def nsamples(self) -> int:
        return self.data.shape[0]

    @property
    def shape(self) -> tuple:
        """The image shape: (nx, ny) for one slice, else (nx, ny, nz)."""
        return self.matrix[:2] if self.matrix[2] == 1 else tuple(self.matrix)

    @property
    def rotation(self) -> np.ndarray:
        """3x3 matrix whose columns are read_dir, phase_dir, slice_dir."""
        return np.column_stack([self.read_dir, self.phase_dir, self.slice_dir])

    def voxel_size(self) -> np.ndarray:
        """(3,) metres: fov / matrix."""
        return self.fov / np.asarray(self.matrix, dtype=np.float64)

    def logical_positions(self) -> np.ndarray:
        """(N, 3) voxel positions in the (read, phase, slice) frame, metres, relative to
        ``position`` (MODEL.md's grid: index n//2 on the centre), voxel n = ix + nx*(iy + ny*iz)."""
        axes = [(np.arange(n) - n // 2) * d for n, d in zip(self.matrix, self.voxel_size())]
        grid = np.meshgrid(*axes, indexing="ij")
        return np.column_stack([g.ravel(order="F") for g in grid])

    def positions(self) -> np.ndarray:
        """(N, 3) physical voxel positions in metres (patient coordinates, LPS)."""
        return self.position + self.logical_positions() @ self.rotation.T

    def plan(self, **options):
        """A :class:`horecon.Plan` for this scan (``options``: backend, precision, threads, ...),
        with its positions and phase model set: model 'k' on the logical grid
        (``set_grid_positions``), model 'solid_harmonics' on the physical positions. Add
        sensitivities and off-resonance (``plan.set_off_resonance(omega, scan.times)``) yourself."""
        from . import Plan

        plan = Plan(self.matrix, ncoils=self.ncoils, nsamples=self.nsamples, **options)
        try:
            if self.model == "k":
                plan.set_grid_positions(self.fov, (0.0, 0.0, 0.0))
                plan.set_trajectory(self.trajectory)
            else:
                plan.set_positions(self.positions())
                plan.set_solid_harmonics(self.trajectory)
        except BaseException:
            plan.close()
            raise
        return plan

    def noise_covariance(self) -> np.ndarray:
        """(L, L) complex128 sample covariance of the noise acquisitions (IsmrmrdError without)."""
        if self.noise is None or self.noise.shape[0] < 2:
            raise IsmrmrdError(f"{self.path}: no noise acquisitions (ACQ_IS_NOISE_MEASUREMENT) to estimate a covariance")
        n = self.noise.astype(np.complex128)
        return (n.T @ n.conj()) / n.shape[0]


# ------------------------------------------------------------------------------ reading
def _user_parameters(description, kind: str) -> dict:
    return {p.name: p.value for p in getattr(description, kind, []) or []} if description else {}


def _parse_header(path, xml):
    xsd = _require("ismrmrd.xsd")
    try:
        return xsd.CreateFromDocument(xml)
    except Exception as e:  # the parser's own exception types vary between versions
        raise IsmrmrdError(f"{path}: the XML header does not follow the ISMRMRD schema: {e}") from e


def _space(path, encoding, name):
    space = getattr(encoding, name, None)
    if space is None or space.matrixSize is None or space.fieldOfView_mm is None:
        raise IsmrmrdError(f"{path}: the header has no encoding.{name} (matrixSize and fieldOfView_mm)")
    m, f = space.matrixSize, space.fieldOfView_mm
    matrix = (int(m.x), int(m.y), int(m.z or 1))
    fov = np.array([f.x, f.y, f.z], dtype=np.float64) * 1e-3
    if min(matrix) < 1 or not np.all(np.isfinite(fov)) or np.any(fov <= 0):
        raise IsmrmrdError(f"{path}: encoding.{name}: matrixSize {matrix} and fieldOfView_mm {tuple(fov * 1e3)} must be positive")
    return matrix, fov


def _flagged(flags, bit):
    """ISMRMRD's flag ``bit`` (1-based, as ismrmrd's ACQ_* constants) set in each of ``flags``."""
    return (flags & np.uint64(1 << (bit - 1))) != 0


def read_ismrmrd(
    path,
    *,
    dataset: str = "dataset",
    model: str | None = None,
    units: str | None = None,
    select: dict | None = None,
) -> Scan:
    """Reads an ISMRMRD file (HDF5) into a :class:`Scan`.

    Parameters
    ----------
    path : the .h5 file.
    dataset : the HDF5 group of the ISMRMRD dataset ("dataset").
    model : 'k' or 'solid_harmonics', overriding (or supplying) the header's
        ``trajectoryDescription`` userParameterString ``horecon.model``.
    units : 'rad/m', '1/m' or 'normalized' for model 'k' (cycles per pixel over the encoded
        matrix and field of view), overriding the header's ``horecon.units``.
        Solid-harmonic coefficients are always rad/m^order.
    select : encoding counters to keep, e.g. ``{"slice": 2, "repetition": 0}``; without it all
        imaging acquisitions must agree on slice, contrast, repetition, phase and set.

    Raises
    ------
    FileNotFoundError : no such file.
    IsmrmrdError : not an ISMRMRD file, or a field is missing or inconsistent (the message
        names it).
    """
    h5py = _require("h5py")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise IsmrmrdError(f"{path}: not an HDF5 file ({e})") from e
    try:
        return _read_open(path, f, dataset, model, units, select)
    except (IsmrmrdError, ImportError):
        raise
    except Exception as e:  # noqa: BLE001 - h5py's and numpy's errors on a damaged or odd file
        raise IsmrmrdError(f"{path}: a malformed ISMRMRD file ({type(e).__name__}: {e})") from e


def _read_open(path, f, dataset, model, units, select):
    """read_ismrmrd on the open file ``f`` (closed here)."""
    with f:
        if dataset not in f:
            raise IsmrmrdError(f"{path}: no ISMRMRD dataset '{dataset}' (groups: {', '.join(f.keys()) or 'none'})")
        group = f[dataset]
        if "xml" not in group:
            raise IsmrmrdError(f"{path}: '{dataset}/xml' (the ISMRMRD XML header) is missing")
        if "data" not in group:
            raise IsmrmrdError(f"{path}: '{dataset}/data' (the acquisitions) is missing")
        xml = group["xml"][0]
        records = group["data"][()]
    header = _parse_header(path, xml)
    return _scan_from(path, header, records, model, units, select)


def _scan_from(path, header, records, model, units, select):
    if not header.encoding:
        raise IsmrmrdError(f"{path}: the header has no <encoding>")
    encoding = header.encoding[0]
    matrix, fov = _space(path, encoding, "reconSpace")
    encoded_matrix, encoded_fov = _space(path, encoding, "encodedSpace")
    description = encoding.trajectoryDescription
    strings = _user_parameters(description, "userParameterString")
    model = model or strings.get("horecon.model")
    if model is None:
        raise IsmrmrdError(
            f"{path}: the trajectory's meaning is not declared (encoding.trajectoryDescription "
            "userParameterString 'horecon.model' = 'k' or 'solid_harmonics'): pass model='k' or "
            "model='solid_harmonics' (and units=... for k)"
        )
    if model not in MODELS:
        raise IsmrmrdError(f"{path}: model must be one of {MODELS}, got {model!r}")
    if model == "k":
        units = units or strings.get("horecon.units")
        if units is None:
            raise IsmrmrdError(
                f"{path}: the trajectory's units are not declared (encoding.trajectoryDescription "
                "userParameterString 'horecon.units'): pass units='rad/m', '1/m' or 'normalized'"
            )
        if units not in UNITS:
            raise IsmrmrdError(f"{path}: units must be one of {UNITS}, got {units!r}")
    te = header.sequenceParameters.TE if header.sequenceParameters is not None else []
    echo_time = float(te[0]) * 1e-3 if te else 0.0

    names = records.dtype.names or ()
    for field in ("head", "data", "traj"):
        if field not in names:
            raise IsmrmrdError(f"{path}: the acquisitions have no '{field}' field")
    head = records["head"]
    head_fields = head.dtype.names or ()
    needed = (
        "flags", "number_of_samples", "active_channels", "trajectory_dimensions", "sample_time_us",
        "discard_pre", "discard_post", "center_sample", "position", "read_dir", "phase_dir",
        "slice_dir", "idx",
    )
    for field in needed:
        if field not in head_fields:
            raise IsmrmrdError(f"{path}: the acquisition header has no '{field}' field")
    ismrmrd = _require("ismrmrd")
    flags = head["flags"].astype(np.uint64)
    noise_mask = _flagged(flags, ismrmrd.ACQ_IS_NOISE_MEASUREMENT)
    skipped = np.zeros(len(records), dtype=bool)
    for name in _SKIPPED_FLAGS:
        skipped |= _flagged(flags, getattr(ismrmrd, name))
    imaging = np.flatnonzero(~noise_mask & ~skipped)
    for counter, value in (select or {}).items():
        if counter not in _COUNTERS + ("average", "kspace_encode_step_1", "kspace_encode_step_2", "segment"):
            raise IsmrmrdError(f"select: unknown encoding counter {counter!r}")
        imaging = imaging[head["idx"][counter][imaging] == value]
    if imaging.size == 0:
        raise IsmrmrdError(
            f"{path}: no imaging acquisitions"
            + (f" with {select}" if select else "")
            + f" ({len(records)} acquisitions, {int(noise_mask.sum())} noise, {int(skipped.sum())} skipped)"
        )
    for counter in _COUNTERS:
        values = np.unique(head["idx"][counter][imaging])
        if values.size > 1:
            raise IsmrmrdError(
                f"{path}: the imaging acquisitions belong to {values.size} values of idx.{counter} "
                f"({', '.join(str(v) for v in values[:8])}{', ...' if values.size > 8 else ''}): "
                f"pass select={{'{counter}': {values[0]}}}"
            )

    def field_of(name, which):
        values = np.unique(head[name][which], axis=0)
        if values.shape[0] > 1:
            raise IsmrmrdError(f"{path}: the imaging acquisitions disagree on {name} ({values.shape[0]} different values)")
        return values[0]

    channels = int(field_of("active_channels", imaging))
    dims = int(field_of("trajectory_dimensions", imaging))
    dwell_us = float(field_of("sample_time_us", imaging))
    if channels < 1:
        raise IsmrmrdError(f"{path}: active_channels = 0")
    receivers = header.acquisitionSystemInformation.receiverChannels if header.acquisitionSystemInformation else None
    if receivers is not None and receivers != channels:
        raise IsmrmrdError(
            f"{path}: acquisitionSystemInformation.receiverChannels = {receivers} but the acquisitions "
            f"have active_channels = {channels}"
        )
    if dims == 0:
        raise IsmrmrdError(
            f"{path}: trajectory_dimensions = 0: the acquisitions carry no trajectory (horecon needs k or "
            "field-camera coefficients per sample)"
        )
    allowed = (2, 3) if model == "k" else SOLID_HARMONIC_TERMS
    if dims not in allowed:
        raise IsmrmrdError(
            f"{path}: trajectory_dimensions = {dims} does not fit model '{model}' (expected one of {allowed})"
        )
    if not dwell_us > 0:
        raise IsmrmrdError(f"{path}: sample_time_us = {dwell_us}: the dwell time must be positive")
    dwell = dwell_us * 1e-6

    blocks, trajectories, times, readouts = [], [], [], []
    for i in imaging:
        h = head[i]
        samples = int(h["number_of_samples"])
        raw = np.asarray(records["data"][i], dtype=np.float32)
        traj = np.asarray(records["traj"][i], dtype=np.float32)
        if raw.size != 2 * samples * channels:
            raise IsmrmrdError(
                f"{path}: acquisition {i}: data has {raw.size // 2} complex values, number_of_samples x "
                f"active_channels = {samples} x {channels}"
            )
        if traj.size != samples * dims:
            raise IsmrmrdError(
                f"{path}: acquisition {i}: traj has {traj.size} values, number_of_samples x "
                f"trajectory_dimensions = {samples} x {dims}"
            )
        pre = int(h["discard_pre"])
        keep = slice(pre, max(pre, samples - int(h["discard_post"])))
        j = np.arange(samples, dtype=np.float64)[keep]
        if j.size == 0:
            continue
        # data: channels x samples (sample fastest); traj: samples x dims (dimension fastest)
        blocks.append(raw.view(np.complex64).reshape(channels, samples).T[keep])
        trajectories.append(traj.reshape(samples, dims)[keep])
        times.append(echo_time + (j - float(h["center_sample"])) * dwell)
        readouts.append(j.size)
    if not blocks:
        raise IsmrmrdError(f"{path}: every sample is discarded (discard_pre + discard_post)")
    trajectory = np.concatenate(trajectories).astype(np.float64)
    if model == "k":
        trajectory = _k_in_rad_per_m(trajectory, units, encoded_matrix, encoded_fov)

    noise, noise_dwell = None, None
    noise_index = np.flatnonzero(noise_mask)
    if noise_index.size:
        noise_channels = int(field_of("active_channels", noise_index))
        if noise_channels != channels:
            raise IsmrmrdError(
                f"{path}: the noise acquisitions have active_channels = {noise_channels}, the imaging ones {channels}"
            )
        noise = np.concatenate([
            np.asarray(records["data"][i], dtype=np.float32).view(np.complex64).reshape(channels, -1).T
            for i in noise_index
        ])
        noise_dwell = float(head["sample_time_us"][noise_index[0]]) * 1e-6

    first = head[imaging[0]]
    directions = {}
    for name in ("read_dir", "phase_dir", "slice_dir"):
        v = field_of(name, imaging).astype(np.float64)
        norm = np.linalg.norm(v)
        if not abs(norm - 1) < 1e-3:
            raise IsmrmrdError(f"{path}: {name} = {tuple(v)} is not a unit vector")
        directions[name] = v / norm
    return Scan(
        data=np.asfortranarray(np.concatenate(blocks)),
        trajectory=np.asfortranarray(trajectory),
        model=model,
        times=np.concatenate(times),
        readouts=np.array(readouts, dtype=np.int64),
        dwell=dwell,
        echo_time=echo_time,
        matrix=matrix,
        fov=fov,
        encoded_matrix=encoded_matrix,
        encoded_fov=encoded_fov,
        position=np.asarray(first["position"], dtype=np.float64) * 1e-3,
        noise=noise,
        noise_dwell=noise_dwell,
        header=header,
        path=path,
        **directions,
    )


def _k_in_rad_per_m(k, units, encoded_matrix, encoded_fov):
    d = k.shape[1]
    if units == "rad/m":
        return k
    if units == "1/m":
        return 2 * np.pi * k
    # normalized: cycles per pixel of the encoded matrix, k_cycles/m = k * matrix / fov
    scale = 2 * np.pi * np.asarray(encoded_matrix[:d], dtype=np.float64) / encoded_fov[:d]
    return k * scale


# ------------------------------------------------------------------------------ writing raw data
def _readouts_of(times, readouts, m):
    if readouts is None:
        # a new readout wherever time does not advance (radial spokes, interleaves)
        starts = np.flatnonzero(np.diff(times) <= 0) + 1
        edges = np.concatenate([[0], starts, [m]])
        return np.diff(edges)
    if np.isscalar(readouts):
        length = int(readouts)
        if length < 1 or m % length:
            raise ValueError(f"readouts = {length} must divide the {m} samples")
        return np.full(m // length, length)
    lengths = np.asarray(readouts, dtype=np.int64)
    if lengths.sum() != m or np.any(lengths < 1):
        raise ValueError(f"readouts must be positive lengths adding up to {m}, got a sum of {lengths.sum()}")
    return lengths


def write_ismrmrd(
    path,
    data,
    trajectory,
    times,
    *,
    fov,
    matrix,
    model: str = "k",
    readouts=None,
    noise=None,
    position=(0.0, 0.0, 0.0),
    read_dir=(1.0, 0.0, 0.0),
    phase_dir=(0.0, 1.0, 0.0),
    slice_dir=(0.0, 0.0, 1.0),
    dataset: str = "dataset",
    field_strength: float = 3.0,
) -> None:
    """Writes (simulated) raw data as an ISMRMRD file, through the ``ismrmrd`` package.

    data (M, L) complex; trajectory (M, D): k in rad/m along (read, phase, slice) for model 'k'
    (D = 2, 3), or solid-harmonic coefficients in rad/m^order (D = 1, 4, 9, 16) in the frame of
    ``position`` and the direction vectors for model 'solid_harmonics'; times (M,) seconds after
    excitation. The samples are cut into readouts (``readouts``: a length or a list of lengths;
    default: a new readout wherever the time does not advance), and each readout's times must be
    ``TE + j * dwell`` with one TE (the first sample's time) and one dwell for the whole file,
    which is how ISMRMRD stores them. fov (3,) metres and matrix (3,) give the reconSpace and
    encodedSpace; position (m) and the unit direction vectors place the volume; noise (K, L) is
    written as one noise acquisition. Overwrites ``path``.
    """
    ismrmrd = _require("ismrmrd")
    xsd = _require("ismrmrd.xsd")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    d = np.asarray(data)
    if d.ndim == 1:
        d = d[:, None]
    k = np.asarray(trajectory, dtype=np.float64)
    if k.ndim == 1:
        k = k[:, None]
    t = np.asarray(times, dtype=np.float64)
    m, coils = d.shape
    if k.shape[0] != m or t.shape != (m,):
        raise ValueError(f"data has {m} samples, trajectory {k.shape[0]}, times {t.shape}: they must agree")
    allowed = (2, 3) if model == "k" else SOLID_HARMONIC_TERMS
    if k.shape[1] not in allowed:
        raise ValueError(f"trajectory has {k.shape[1]} columns; model '{model}' needs one of {allowed}")
    lengths = _readouts_of(t, readouts, m)
    if lengths.max() > _NUMBER_OF_SAMPLES_MAX:
        raise ValueError(
            f"a readout of {lengths.max()} samples exceeds ISMRMRD's number_of_samples limit "
            f"{_NUMBER_OF_SAMPLES_MAX}: pass readouts= (shorter readouts, each starting at TE)"
        )
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    echo_time = float(t[0])
    steps = np.concatenate([np.diff(t[s:s + n]) for s, n in zip(starts, lengths)])
    dwell = float(np.median(steps)) if steps.size else 1e-6
    expected = np.concatenate([echo_time + np.arange(n) * dwell for n in lengths])
    if not np.allclose(t, expected, rtol=0, atol=1e-3 * dwell):
        raise ValueError(
            "times cannot be stored in ISMRMRD: every readout must run TE + j*dwell with the same TE "
            f"(= {echo_time:g} s) and dwell (= {dwell:g} s)"
        )
    matrix = tuple(int(v) for v in matrix) + (1,) * (3 - len(tuple(matrix)))
    fov_mm = np.broadcast_to(np.asarray(fov, dtype=np.float64), (3,)) * 1e3

    space = xsd.encodingSpaceType(
        matrixSize=xsd.matrixSizeType(x=matrix[0], y=matrix[1], z=matrix[2]),
        fieldOfView_mm=xsd.fieldOfViewMm(x=float(fov_mm[0]), y=float(fov_mm[1]), z=float(fov_mm[2])),
    )
    description = xsd.trajectoryDescriptionType(
        identifier="horecon",
        userParameterString=[
            xsd.userParameterStringType(name="horecon.model", value=model),
            xsd.userParameterStringType(name="horecon.units", value="rad/m" if model == "k" else "rad/m^order"),
        ],
        comment="written by horecon.io.write_ismrmrd; the convention is in horecon's README (ISMRMRD)",
    )
    header = xsd.ismrmrdHeader(
        experimentalConditions=xsd.experimentalConditionsType(
            H1resonanceFrequency_Hz=int(round(42.577478e6 * field_strength))
        ),
        acquisitionSystemInformation=xsd.acquisitionSystemInformationType(
            receiverChannels=int(coils), systemFieldStrength_T=float(field_strength)
        ),
        encoding=[
            xsd.encodingType(
                encodedSpace=space,
                reconSpace=space,
                encodingLimits=xsd.encodingLimitsType(),
                trajectory=xsd.trajectoryType.OTHER,
                trajectoryDescription=description,
            )
        ],
        sequenceParameters=xsd.sequenceParametersType(TE=[echo_time * 1e3]),
    )
    geometry = {
        "position": tuple(np.asarray(position, dtype=np.float64) * 1e3),
        "read_dir": tuple(read_dir),
        "phase_dir": tuple(phase_dir),
        "slice_dir": tuple(slice_dir),
    }
    if os.path.exists(path):
        os.remove(path)
    with ismrmrd.Dataset(os.fspath(path), dataset, create_if_needed=True) as out:
        out.write_xml_header(header.toXML("utf-8"))
        if noise is not None:
            n = np.asarray(noise, dtype=np.complex64)
            if n.ndim != 2 or n.shape[1] != coils:
                raise ValueError(f"noise has shape {n.shape}, expected (K, {coils})")
            acq = ismrmrd.Acquisition.from_array(
                np.ascontiguousarray(n.T), None, sample_time_us=dwell * 1e6, **geometry
            )
            acq.set_flag(ismrmrd.ACQ_IS_NOISE_MEASUREMENT)
            out.append_acquisition(acq)
        for index, (s, n) in enumerate(zip(starts, lengths)):
            acq = ismrmrd.Acquisition.from_array(
                np.ascontiguousarray(d[s:s + n].T, dtype=np.complex64),
                np.ascontiguousarray(k[s:s + n], dtype=np.float32),
                sample_time_us=dwell * 1e6,
                center_sample=0,
                scan_counter=index,
                **geometry,
            )
            acq.idx.kspace_encode_step_1 = index
            if index == 0:
                acq.set_flag(ismrmrd.ACQ_FIRST_IN_SLICE)
            if index == len(lengths) - 1:
                acq.set_flag(ismrmrd.ACQ_LAST_IN_SLICE)
            out.append_acquisition(acq)


# ------------------------------------------------------------------------------ images out
def _geometry(scan=None, **given):
    """(matrix, voxel size (m), position (m), rotation) from a Scan and/or keywords."""
    out = {}
    for name in ("matrix", "fov", "position", "read_dir", "phase_dir", "slice_dir"):
        value = given.get(name)
        if value is None and scan is not None:
            value = getattr(scan, name)
        if value is None:
            raise ValueError(f"{name} is needed (give a Scan or {name}=...)")
        out[name] = value
    matrix = tuple(int(v) for v in out["matrix"]) + (1,) * (3 - len(tuple(out["matrix"])))
    voxel = np.broadcast_to(np.asarray(out["fov"], dtype=np.float64), (3,)) / np.asarray(matrix)
    rotation = np.column_stack([np.asarray(out[n], dtype=np.float64) for n in ("read_dir", "phase_dir", "slice_dir")])
    return matrix, voxel, np.asarray(out["position"], dtype=np.float64), rotation


def nifti_affine(scan=None, **geometry) -> np.ndarray:
    """The 4x4 NIfTI affine (RAS+, millimetres) of the reconstructed grid: voxel [i, j, k] (read,
    phase, slice) lies at ``position + R @ ((i - nx//2) dx, (j - ny//2) dy, (k - nz//2) dz)`` in
    ISMRMRD's patient coordinates (LPS), which NIfTI's RAS+ flips in x and y. From a :class:`Scan`
    or keywords matrix, fov (m), position (m), read_dir, phase_dir, slice_dir."""
    matrix, voxel, position, rotation = _geometry(scan, **geometry)
    lps = np.eye(4)
    lps[:3, :3] = rotation * voxel  # columns: direction * spacing
    lps[:3, 3] = position - rotation @ (np.array([n // 2 for n in matrix]) * voxel)
    lps[:3] *= 1e3  # metres -> mm (the last row stays 0 0 0 1)
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps


def _image_3d(image, matrix):
    """The image indexed [read, phase, slice]: given so (trailing singleton axes
    optional) or flat in voxel order; any other shape is refused, not reshaped."""
    arr = np.asarray(image)
    matrix = tuple(int(m) for m in matrix)
    n = int(np.prod(matrix))
    if arr.ndim == 1 and arr.size == n:
        return arr.reshape(matrix, order="F")
    trimmed = matrix
    while len(trimmed) > 1 and trimmed[-1] == 1:
        trimmed = trimmed[:-1]
    if arr.shape in (matrix, trimmed):
        return arr.reshape(matrix)
    shapes = " or ".join(str(s) for s in dict.fromkeys((matrix, trimmed, (n,))))
    raise ValueError(f"image has shape {arr.shape}, expected {shapes} (indexed [read, phase, slice], or flat)")


def write_nifti(path, image, scan=None, *, magnitude: bool = True, **geometry) -> None:
    """Writes an image indexed [read, phase, slice] (or flat, voxel n = ix + nx*(iy + ny*iz)) as
    NIfTI-1 with :func:`nifti_affine` as qform and sform (scanner coordinates, mm). Magnitude as
    float32 by default; ``magnitude=False`` keeps complex64."""
    nib = _require("nibabel")
    matrix, voxel, _, _ = _geometry(scan, **geometry)
    arr = _image_3d(image, matrix)
    arr = np.abs(arr).astype(np.float32) if magnitude else arr.astype(np.complex64)
    affine = nifti_affine(scan, **geometry)
    img = nib.Nifti1Image(arr, affine)
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    img.header.set_xyzt_units(xyz="mm")
    nib.save(img, os.fspath(path))


def write_ismrmrd_image(
    path, image, scan=None, *, dataset: str = "dataset", group: str = "image_0", series: int = 1, **geometry
) -> None:
    """Appends an image (indexed [read, phase, slice]) to an ISMRMRD file as a complex64 image
    with the scan's geometry (position, directions, field of view) in its header; writes the scan's
    XML header too when the file has none. Read it back with ``ismrmrd.Dataset(path).read_image(group, i)``
    (data shaped (channels, z, y, x))."""
    ismrmrd = _require("ismrmrd")
    matrix, voxel, position, rotation = _geometry(scan, **geometry)
    arr = _image_3d(image, matrix).astype(np.complex64)
    with ismrmrd.Dataset(os.fspath(path), dataset, create_if_needed=True) as out:
        if scan is not None and scan.header is not None:
            try:
                out.read_xml_header()
            except LookupError:
                out.write_xml_header(scan.header.toXML("utf-8"))
        img = ismrmrd.Image.from_array(
            np.ascontiguousarray(arr.T),  # [x, y, z] -> (z, y, x), row-major as ismrmrd wants
            image_type=ismrmrd.IMTYPE_COMPLEX,
            field_of_view=tuple(float(v) for v in voxel * np.asarray(matrix) * 1e3),
            position=tuple(float(v) for v in position * 1e3),
            read_dir=tuple(float(v) for v in rotation[:, 0]),
            phase_dir=tuple(float(v) for v in rotation[:, 1]),
            slice_dir=tuple(float(v) for v in rotation[:, 2]),
            image_series_index=series,
        )
        out.append_image(group, img)


def load_array(path, name: str = "array") -> np.ndarray:
    """An array from .npy, .npz (its only or first array) or NIfTI (.nii, .nii.gz) — for
    sensitivities and B0 maps given to horecon-recon. NIfTI arrays keep their index order."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name}: {path}: no such file")
    suffixes = "".join(Path(path).suffixes[-2:]).lower()
    try:
        if path.lower().endswith(".npy"):
            return np.load(path, allow_pickle=False)
        if path.lower().endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                if not z.files:
                    raise ValueError("the .npz holds no array")
                return z[z.files[0]]
        if suffixes.endswith(".nii") or suffixes.endswith(".nii.gz"):
            return np.asanyarray(_require("nibabel").load(path).dataobj)
    except ImportError:
        raise
    except Exception as e:  # noqa: BLE001 - any reader's failure on a bad file (nibabel's are its own)
        raise ValueError(f"{name}: {path}: cannot be read ({type(e).__name__}: {e})") from e
    raise ValueError(f"{name}: {path}: unknown format (use .npy, .npz, .nii or .nii.gz)")
