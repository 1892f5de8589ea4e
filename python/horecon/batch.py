"""horecon.batch: reconstruct many independent problems (slices, volumes, time
frames, a study) on a Dask cluster or in one process.

    from horecon import batch

    problems = [batch.Problem(f"slice{z:03d}", (256, 256), data[z], ncoils=8,
                              fov=(0.22, 0.22, 0.005), solid_harmonics=coefficients,
                              off_resonance=(omega[z], times), sensitivities=coils[z],
                              cg={"max_iterations": 20, "regularizer": "tikhonov", "lambda_": 1e-3})
                for z in range(nslices)]
    report = batch.run(problems, "out/")          # out/slice000.npy, ..., out/batch.jsonl
    report.raise_for_failures()

Where the tasks run
-------------------
- ``scheduler=None`` (default) with Dask installed: a ``distributed.LocalCluster``
  with one worker process per GPU (``horecon.cuda_device_count()``), worker i
  using device ``device + i``; without a GPU, CPU workers (``n_workers``, by
  default min(4, CPU cores)), each plan using its share of the cores
  (:func:`local_cluster`; start it yourself to reuse it across calls).
- ``scheduler="tcp://host:8786"`` (or a ``distributed.Client``): an existing
  cluster, on any number of hosts. horecon must be importable on its workers;
  a worker uses device ``$HORECON_DEVICE`` when set, else its name when that
  is an integer (modulo the devices it sees), else ``device``. Start its
  workers without Dask's ``MALLOC_TRIM_THRESHOLD_`` (configuration
  ``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_: null``; see
  :func:`local_cluster`).
- ``scheduler="local"``, or Dask not installed: the same in this process, one
  problem after another.

Each task builds its plan on its worker (so a GPU worker gets the model once,
on its own device), solves, and hands the image back; the client writes it to
``out_dir`` as soon as it arrives (``name.npy``, or ``name.nii.gz`` with
``format="nifti"``, which needs nibabel) and appends one JSON line per event
to ``out_dir/batch.jsonl``. A failed task is reported on stderr with its input
and submitted once more (``retries``); a problem that fails every attempt is
listed in the report's ``failed`` (and the log): never silently dropped.
Progress: a tqdm bar when tqdm is installed, else one line per problem on stderr.

Worker processes are started by ``multiprocessing``'s spawn: a script that
calls :func:`run` with a local cluster needs the ``if __name__ == "__main__":``
guard.

Items
-----
An item is a :class:`Problem`, or a callable returning one (called on the
worker: load the data there instead of shipping it), or, with your own
``reconstruct(item, plan_options)``, anything that function takes.
``items`` is a mapping name -> item, or an iterable of Problems or of
(name, item) pairs. Names must be unique: they name the output files.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["Problem", "Result", "Report", "run", "reconstruct", "local_cluster"]


@dataclasses.dataclass
class Problem:
    """One reconstruction: plan sizes, model and data, in the conventions of
    :class:`horecon.Plan` (its setters take the same arrays).

    The geometry is ``positions`` (N, 3) or ``fov`` (+ ``center``) for the
    grid helper; the phase model one of ``solid_harmonics`` (M, B),
    ``trajectory`` (M, ndims) or ``basis`` = (basis (N, B), coefficients (M, B));
    ``off_resonance`` = (omega (N,), times (M,)) is optional. ``cg`` holds the
    keyword arguments of :meth:`horecon.Plan.cg`; ``toeplitz`` enables the
    Toeplitz normal operator (True, or the number of time segments).
    M = data.size / ncoils.
    """

    name: str
    shape: Any
    data: Any
    ncoils: int = 1
    positions: Any = None
    fov: Any = None
    center: Any = (0.0, 0.0, 0.0)
    solid_harmonics: Any = None
    trajectory: Any = None
    basis: Any = None
    off_resonance: Any = None
    sensitivities: Any = None
    toeplitz: Any = False
    cg: dict = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        """The input in one line (for failure reports; never raises, whatever the fields hold)."""
        model = [k for k in ("solid_harmonics", "trajectory", "basis") if getattr(self, k) is not None]
        try:
            shape = tuple(int(s) for s in np.atleast_1d(self.shape))
        except (TypeError, ValueError):
            shape = self.shape
        return (
            f"Problem {self.name!r}: shape {shape}, {self.ncoils} coil(s), "
            f"data {np.shape(self.data)}, model {'+'.join(model) or 'none'}"
            f"{' + off-resonance' if self.off_resonance is not None else ''}, cg {self.cg}"
        )


def reconstruct(problem: Problem, plan_options: dict):
    """Builds the plan of ``problem`` with ``plan_options`` (backend, device,
    precision, threads, ...: :class:`horecon.Plan`'s keywords) and solves it
    by CG. Returns (image, info) as :meth:`horecon.Plan.cg`."""
    import horecon

    data = np.asarray(problem.data)
    ncoils = int(problem.ncoils)
    if data.size % ncoils:
        raise ValueError(f"{problem.name}: data has {data.size} values, not a multiple of ncoils = {ncoils}")
    with horecon.Plan(problem.shape, ncoils, data.size // ncoils, **plan_options) as plan:
        if problem.positions is not None:
            plan.set_positions(problem.positions)
        elif problem.fov is not None:
            plan.set_grid_positions(problem.fov, problem.center)
        if problem.solid_harmonics is not None:
            plan.set_solid_harmonics(problem.solid_harmonics)
        elif problem.trajectory is not None:
            plan.set_trajectory(problem.trajectory)
        elif problem.basis is not None:
            plan.set_basis(*problem.basis)
        if problem.off_resonance is not None:
            plan.set_off_resonance(*problem.off_resonance)
        if problem.sensitivities is not None:
            plan.set_sensitivities(problem.sensitivities)
        if problem.toeplitz:
            plan.set_toeplitz(True, 0 if problem.toeplitz is True else int(problem.toeplitz))
        return plan.cg(data, **problem.cg)


@dataclasses.dataclass
class Result:
    """What became of one item: its file (``path``), CG's info, the attempts
    it took, where it ran, and the error text of its last failed attempt."""

    name: str
    path: str | None = None
    info: dict | None = None
    attempts: int = 0
    worker: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.path is not None


@dataclasses.dataclass
class Report:
    """The outcome of :func:`run`: every item once, in submission order."""

    results: list
    seconds: float
    workers: int
    mode: str

    @property
    def failed(self) -> list:
        return [r for r in self.results if not r.ok]

    def raise_for_failures(self) -> None:
        """Raises RuntimeError naming every item that failed all its attempts."""
        if self.failed:
            raise RuntimeError(
                f"{len(self.failed)} of {len(self.results)} problems failed: "
                + "; ".join(f"{r.name}: {r.error}" for r in self.failed)
            )


# ------------------------------------------------------------------ tasks
def _placement(backend: str, device: int, num_gpus: int, threads: int) -> dict:
    """The plan options of the worker running this task: its GPU (see the
    module documentation) or its share of the CPU cores."""
    options = {"backend": backend, "threads": threads}
    if backend == "cpu":
        return options
    index = os.environ.get("HORECON_DEVICE")
    if index is not None:
        options["device"] = int(index)
        return options
    name = None
    try:
        from distributed import get_worker

        name = get_worker().name
    except (ImportError, ValueError):
        pass  # not on a Dask worker
    if isinstance(name, int) and num_gpus > 0:
        options["device"] = device + name % num_gpus
    else:
        options["device"] = device
    return options


def _task(item, reconstruct_fn, placement: tuple, precision: str):
    """Runs on the worker: loads a lazy item, builds the plan, solves.
    Returns (image, info, worker description)."""
    if callable(item) and not isinstance(item, Problem):
        item = item()
    options = _placement(*placement)
    options["precision"] = precision
    out = reconstruct_fn(item, options)
    image, info = out if isinstance(out, tuple) else (out, {})
    where = options["backend"] + (f":{options['device']}" if "device" in options else "")
    return np.asarray(image), dict(info), f"{os.getpid()}@{os.uname().nodename} {where}"


# ----------------------------------------------------------------- output
class _Sink:
    """Writes images and the event log as results arrive."""

    def __init__(self, out_dir, fmt: str, voxel_size):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        if fmt not in ("npy", "nifti"):
            raise ValueError(f"format must be 'npy' or 'nifti', got {fmt!r}")
        if fmt == "nifti":
            try:
                import nibabel  # noqa: F401
            except ImportError as e:
                raise ImportError("format='nifti' needs nibabel (pip install nibabel)") from e
        self.fmt = fmt
        size = np.broadcast_to(np.asarray(1.0 if voxel_size is None else voxel_size, dtype=np.float64), (3,))
        if not (np.isfinite(size).all() and (size > 0).all()):
            raise ValueError(f"voxel_size must be positive and finite (scalar or 3), got {voxel_size!r}")
        self.voxel_size = size
        self.log = open(self.dir / "batch.jsonl", "a", encoding="utf-8")

    def event(self, **fields):
        fields["time"] = time.time()
        self.log.write(json.dumps(fields, default=str) + "\n")
        self.log.flush()

    def write(self, name: str, image: np.ndarray) -> str:
        if self.fmt == "npy":
            path = self.dir / f"{name}.npy"
            np.save(path, image)
        else:
            import nibabel

            affine = np.diag(list(self.voxel_size) + [1.0])
            path = self.dir / f"{name}.nii.gz"
            nibabel.save(nibabel.Nifti1Image(np.asarray(image, dtype=np.complex64), affine), path)
        return str(path)

    def close(self):
        self.log.close()


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.bar = total, 0, None
        self.enabled = enabled
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc="horecon.batch", unit="problem")
            except ImportError:
                pass

    def step(self, text: str):
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(text, refresh=False)
        elif self.enabled:
            print(f"horecon.batch [{self.done}/{self.total}] {text}", file=sys.stderr, flush=True)

    def note(self, text: str):
        # tqdm.write prints to stdout unless told: the notes go with the bar, to stderr
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _named(items) -> list:
    if isinstance(items, dict):
        pairs = list(items.items())
    else:
        pairs = [(it.name, it) if isinstance(it, Problem) else tuple(it) for it in items]
    names = [str(n) for n, _ in pairs]
    seen = set()
    for n in names:
        if n in seen:
            raise ValueError(f"horecon.batch: the name {n!r} is used twice (names name the output files)")
        if not n or "/" in n or n in (".", ".."):
            raise ValueError(f"horecon.batch: {n!r} cannot name an output file")
        seen.add(n)
    return [(n, it) for n, (_, it) in zip(names, pairs)]


def _describe(item) -> str:
    if isinstance(item, Problem):
        return item.describe()
    text = repr(item)
    return text if len(text) <= 300 else text[:297] + "..."


# ---------------------------------------------------------------- cluster
def local_cluster(n_workers: int):
    """The ``distributed.LocalCluster`` that :func:`run` starts when given no
    scheduler: ``n_workers`` worker processes of one thread each (a task's
    plan has its own CPU threads), no dashboard, quiet worker logs (a failed
    task's "Compute Failed" would repeat what :func:`run` reports). Start
    one yourself to reuse it across calls: ``run(..., scheduler=Client(cluster))``.

    The workers are spawned without the ``MALLOC_TRIM_THRESHOLD_=65536`` that
    Dask sets by default (``distributed.nanny.pre-spawn-environ``): it fixes
    glibc's mmap threshold at 128 KiB, so every large array a task makes
    (inputs, the library's buffers) is fresh memory whose pages fault in
    again: 14,500 page faults and 35 ms of system time per bieri-256 slice's
    inputs alone, where the plain process reuses its heap. (A value already
    in this process's environment, yours or set by an earlier Dask cluster
    started here, still reaches the workers.)"""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        )


# -------------------------------------------------------------------- run
def run(
    items,
    out_dir,
    *,
    scheduler=None,
    n_workers: int | None = None,
    backend: str = "auto",
    device: int = 0,
    precision: str = "accurate",
    threads: int | None = None,
    retries: int = 1,
    format: str = "npy",
    voxel_size=None,
    progress: bool = True,
    reconstruct: Callable = reconstruct,
) -> Report:
    """Reconstructs every item and writes its image to ``out_dir`` (module
    documentation). ``backend`` 'auto' means CUDA workers when the client sees
    a GPU, else CPU workers; ``threads`` is each plan's CPU threads (default:
    the cores divided among the local workers). ``voxel_size`` (metres or
    any unit, scalar or 3) goes into the NIfTI affine. Returns a
    :class:`Report`; failures do not raise (see ``Report.raise_for_failures``)."""
    named = _named(items)
    if n_workers is not None and (not isinstance(n_workers, (int, np.integer)) or n_workers < 1):
        raise ValueError(f"horecon.batch: n_workers must be a positive integer, got {n_workers!r}")
    if threads is not None and (not isinstance(threads, (int, np.integer)) or threads < 0):
        raise ValueError(f"horecon.batch: threads must be a non-negative integer, got {threads!r}")
    sink = _Sink(out_dir, format, voxel_size)
    try:
        return _run_with(named, sink, scheduler, n_workers, backend, device, precision, threads, retries,
                         progress, reconstruct)
    finally:
        sink.close()


def _run_with(named, sink, scheduler, n_workers, backend, device, precision, threads, retries, progress,
              reconstruct) -> Report:
    """:func:`run` once its inputs are checked and its sink is open."""
    import horecon

    start = time.perf_counter()
    num_gpus = horecon.cuda_device_count() if backend in ("auto", "cuda") else 0
    if backend == "auto":
        backend = "cuda" if num_gpus > 0 else "cpu"
    use_dask = scheduler != "local"
    if use_dask:
        try:
            import distributed  # noqa: F401
        except ImportError:
            if scheduler is not None:
                raise ImportError(
                    "horecon.batch: a scheduler was given but Dask is not installed "
                    "(pip install 'dask[distributed]', or the horecon[batch] extra)"
                ) from None
            use_dask = False
    if n_workers is None:
        n_workers = max(1, num_gpus - device) if backend == "cuda" else min(4, os.cpu_count() or 1)
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // n_workers) if use_dask else 0
    placement = (backend, device, max(1, num_gpus - device) if backend == "cuda" else 0, threads)
    results = {n: Result(n) for n, _ in named}
    bar = _Progress(len(named), progress)
    try:
        if use_dask:
            workers = _run_dask(named, results, sink, bar, scheduler, n_workers, placement, precision, retries, reconstruct)
            mode = "dask"
        else:
            _run_local(named, results, sink, bar, placement, precision, retries, reconstruct)
            workers, mode = 1, "local"
    finally:
        bar.close()
    return Report([results[n] for n, _ in named], time.perf_counter() - start, workers, mode)


def _finish(name, item, results, sink, bar, outcome, attempt, retries) -> bool:
    """Records one attempt: writes the image, or reports the failure. True
    when the item should be submitted again."""
    result = results[name]
    result.attempts = attempt
    if isinstance(outcome, BaseException):
        result.error = f"{type(outcome).__name__}: {outcome}"
        again = attempt <= retries
        sink.event(name=name, status="failed", attempt=attempt, error=result.error, input=_describe(item),
                   retry=again, traceback="".join(traceback.format_exception(outcome))[-4000:])
        bar.note(
            f"horecon.batch: {name} failed (attempt {attempt}): {result.error}\n"
            f"  input: {_describe(item)}\n  {'retrying' if again else 'giving up: listed in the report as failed'}"
        )
        if not again:
            bar.step(f"{name} FAILED")
        return again
    image, info, worker = outcome
    try:
        path = sink.write(name, image)
    except Exception as e:  # noqa: BLE001 - the item failed (no retry: the image is lost with the file)
        result.error = f"writing its image failed: {type(e).__name__}: {e}"
        sink.event(name=name, status="failed", attempt=attempt, error=result.error, input=_describe(item),
                   retry=False)
        bar.note(f"horecon.batch: {name}: {result.error}; listed in the report as failed")
        bar.step(f"{name} FAILED")
        return False
    result.path, result.info, result.worker, result.error = path, info, worker, None
    sink.event(name=name, status="done", attempt=attempt, path=result.path, worker=worker, info=info)
    bar.step(f"{name} ({info.get('iterations', '?')} it, {worker})")
    return False


def _run_local(named, results, sink, bar, placement, precision, retries, reconstruct_fn):
    for name, item in named:
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome = _task(item, reconstruct_fn, placement, precision)
            except Exception as e:  # noqa: BLE001 - reported and retried
                outcome = e
            if not _finish(name, item, results, sink, bar, outcome, attempt, retries):
                break


def _run_dask(named, results, sink, bar, scheduler, n_workers, placement, precision, retries, reconstruct_fn):
    from distributed import Client, as_completed

    cluster = None
    if scheduler is None:
        cluster = local_cluster(n_workers)
        client = Client(cluster)
    elif isinstance(scheduler, Client):
        client = scheduler
    else:
        client = Client(scheduler)
    try:
        workers = len(client.scheduler_info().get("workers", {})) or n_workers
        pending = {}

        def submit(name, item, attempt):
            future = client.submit(
                _task, item, reconstruct_fn, placement, precision, key=f"horecon-{name}-{attempt}", pure=False
            )
            pending[future.key] = (name, item, attempt)
            return future

        stream = as_completed([submit(n, it, 1) for n, it in named], with_results=False)
        for future in stream:
            name, item, attempt = pending.pop(future.key)
            try:
                outcome = future.result()
            except Exception as e:  # noqa: BLE001 - the task's error (or a lost worker)
                outcome = e
            future.release()
            if _finish(name, item, results, sink, bar, outcome, attempt, retries):
                stream.add(submit(name, item, attempt + 1))
        return workers
    finally:
        if scheduler is None or not isinstance(scheduler, Client):
            client.close()
        if cluster is not None:
            cluster.close()
