"""horecon.batch: many independent problems, in one process and on Dask CPU
workers. Every image the runner writes must equal the CG solution of a plan
built directly with the same options, a failing problem must be reported
with its input, retried once and listed (never dropped), and a problem that
fails once must succeed on its retry."""

import json
from pathlib import Path

import numpy as np
import pytest

import horecon
from horecon import batch

CG = {"max_iterations": 25, "tolerance": 0.0, "regularizer": "tikhonov", "lambda_": 1e-3}


def random_problem(rng, name, shape=(7, 6), ncoils=2):
    """A small 2D problem with a random in-Nyquist trajectory and data E x."""
    n = int(np.prod(shape))
    m = 2 * n
    fov = 0.2
    kmax = np.pi * np.array(shape) / fov
    k = rng.uniform(-1, 1, (m, 2)) * kmax
    sens = rng.complex(n, ncoils).astype(np.complex64)
    problem = batch.Problem(name, shape, None, ncoils=ncoils, fov=(fov, fov, 0.005), trajectory=k,
                            sensitivities=sens, cg=dict(CG))
    with horecon.Plan(shape, ncoils, m, backend="cpu") as plan:
        plan.set_grid_positions(problem.fov)
        plan.set_trajectory(k)
        plan.set_sensitivities(sens)
        problem.data = plan.forward(rng.complex(*shape).astype(np.complex64))
    return problem


def direct_solution(problem):
    """The same problem solved by a plan built here, as the runner's tasks do:
    (image, info)."""
    return batch.reconstruct(problem, {"backend": "cpu", "threads": 1, "precision": "accurate"})


class FailsOnce:
    """A lazy item that raises on its first call (in any process: the marker
    file keeps the state) and returns its problem afterwards."""

    def __init__(self, problem, marker):
        self.problem, self.marker = problem, Path(marker)

    def __call__(self):
        if not self.marker.exists():
            self.marker.write_text("failed once")
            raise RuntimeError("transient failure (first attempt)")
        return self.problem

    def __repr__(self):
        return f"FailsOnce({self.problem.name!r})"


def check_run(rng, tmp_path, **options):
    good = [random_problem(rng, f"slice{i}", shape=(7 + i % 2, 6)) for i in range(4)]
    bad = random_problem(rng, "bad")
    bad.data = bad.data.copy()
    bad.data[3, 1] = np.nan  # HORECON_ERR_NOT_FINITE on every attempt
    flaky = random_problem(rng, "flaky")
    items = [(p.name, p) for p in good] + [("bad", bad), ("flaky", FailsOnce(flaky, tmp_path / "flaky.marker"))]
    out = tmp_path / "out"
    report = batch.run(items, out, backend="cpu", threads=1, **options)
    print(f"mode {report.mode}, {report.workers} worker(s), {report.seconds:.2f} s")
    assert [r.name for r in report.results] == [name for name, _ in items]
    for p in good + [flaky]:
        r = next(r for r in report.results if r.name == p.name)
        assert r.ok, r.error
        image = np.load(r.path)
        expected, expected_info = direct_solution(p)
        err = np.linalg.norm(image - expected) / np.linalg.norm(expected)
        print(f"{p.name}: {r.attempts} attempt(s) on {r.worker}, |runner - direct| = {err:.1e}")
        assert image.shape == expected.shape
        assert err <= 1e-6
        # the runner passed the CG options on: the same iterations as the direct
        # solve (fewer than max_iterations only where CG reached the rounding level)
        assert r.info["iterations"] == expected_info["iterations"]
        assert r.info["iterations"] == CG["max_iterations"] or r.info["converged"]
    assert next(r for r in report.results if r.name == "flaky").attempts == 2
    # the failure: retried once, listed, reported with its input, no file
    assert [r.name for r in report.failed] == ["bad"]
    assert report.failed[0].attempts == 2
    assert "HORECON_ERR_NOT_FINITE" in report.failed[0].error
    assert not (out / "bad.npy").exists()
    with pytest.raises(RuntimeError, match="1 of 6 problems failed: bad"):
        report.raise_for_failures()
    events = [json.loads(line) for line in (out / "batch.jsonl").read_text().splitlines()]
    failures = [e for e in events if e["status"] == "failed"]
    assert [(e["name"], e["attempt"], e["retry"]) for e in failures if e["name"] == "bad"] == [
        ("bad", 1, True),
        ("bad", 2, False),
    ]
    assert all("Problem 'bad': shape (7, 6), 2 coil(s)" in e["input"] for e in failures if e["name"] == "bad")
    assert [(e["name"], e["attempt"]) for e in failures if e["name"] == "flaky"] == [("flaky", 1)]
    assert sorted(e["name"] for e in events if e["status"] == "done") == sorted(p.name for p in good + [flaky])
    return report


def test_batch_in_one_process(rng, tmp_path, capsys):
    report = check_run(rng, tmp_path, scheduler="local")
    assert report.mode == "local"
    err = capsys.readouterr().err
    assert "bad failed (attempt 1)" in err and "input: Problem 'bad'" in err


def test_batch_on_dask_cpu_workers(rng, tmp_path):
    pytest.importorskip("distributed", reason="Dask is not installed (pip install dask distributed)")
    report = check_run(rng, tmp_path, n_workers=2)
    assert report.mode == "dask" and report.workers == 2


def test_batch_rejects_unusable_names(rng, tmp_path):
    p = random_problem(rng, "same")
    with pytest.raises(ValueError, match="used twice"):
        batch.run([p, p], tmp_path, scheduler="local")
    with pytest.raises(ValueError, match="cannot name an output file"):
        batch.run({"a/b": p}, tmp_path, scheduler="local")
    with pytest.raises(ValueError, match="format must be"):
        batch.run([p], tmp_path, scheduler="local", format="mat")


def test_batch_writes_nifti(rng, tmp_path):
    nibabel = pytest.importorskip("nibabel", reason="nibabel is not installed")
    p = random_problem(rng, "volume")
    report = batch.run([p], tmp_path, scheduler="local", backend="cpu", threads=1, format="nifti",
                       voxel_size=(2.0, 2.0, 5.0))
    assert report.results[0].path.endswith("volume.nii.gz")
    img = nibabel.load(report.results[0].path)
    expected, _ = direct_solution(p)
    np.testing.assert_allclose(np.asarray(img.dataobj), expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    np.testing.assert_allclose(np.diag(img.affine), [2.0, 2.0, 5.0, 1.0])


def test_local_cluster_workers_keep_glibc_malloc_defaults():
    """Dask's default MALLOC_TRIM_THRESHOLD_ costs every task page faults
    (batch.local_cluster's documentation): the runner's workers must start
    without it, and the cluster must otherwise be the documented one."""
    pytest.importorskip("distributed", reason="Dask is not installed (pip install dask distributed)")
    import os

    from distributed import Client

    if "MALLOC_TRIM_THRESHOLD_" in os.environ:
        pytest.skip("MALLOC_TRIM_THRESHOLD_ is set in this process: workers inherit it")
    with batch.local_cluster(1) as cluster, Client(cluster) as client:
        environ = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        threads = [w["nthreads"] for w in client.scheduler_info()["workers"].values()]
    assert list(environ.values()) == [None]
    assert threads == [1]
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ  # nor left in this process's environment


def test_a_failing_item_or_write_is_reported_not_raised(rng, tmp_path):
    """A problem whose fields fail (shape None: its description once raised
    too), an image whose file cannot be written (a 300-character name) and a
    voxel size given as an array: the batch reports, never aborts."""
    good = random_problem(rng, "good")
    odd = random_problem(rng, "odd")
    odd.shape = None
    long_name = "x" * 300
    report = batch.run({"good": good, "odd": odd, long_name: random_problem(rng, "long")}, tmp_path,
                       scheduler="local", backend="cpu", threads=1, retries=0, progress=False)
    assert [r.name for r in report.failed] == ["odd", long_name]
    assert "writing its image failed" in report.failed[1].error
    assert report.results[0].ok and Path(report.results[0].path).exists()
    log = [json.loads(line) for line in (tmp_path / "batch.jsonl").read_text().splitlines()]
    assert {e["name"] for e in log if e["status"] == "failed"} == {"odd", long_name}
    pytest.importorskip("nibabel", reason="nibabel is not installed")
    report = batch.run([good], tmp_path / "nifti", scheduler="local", backend="cpu", threads=1, format="nifti",
                       voxel_size=np.array([2.0, 2.0, 5.0]), progress=False)
    assert report.results[0].ok
    for bad in ({"n_workers": 0}, {"n_workers": -1}, {"threads": -2}, {"voxel_size": 0.0}):
        with pytest.raises(ValueError):
            batch.run([good], tmp_path / "bad", scheduler="local", **bad)
