"""Each status code reachable from Python arrives as a HoreconError with its
status, name and the library's message; outputs are untouched on failure."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import horecon

PYTHON_DIR = str(Path(__file__).resolve().parents[1])


def ready_plan(shape=(4, 3), ncoils=1, nsamples=5):
    plan = horecon.Plan(shape, ncoils=ncoils, nsamples=nsamples)
    plan.set_grid_positions(0.2)
    plan.set_trajectory(np.linspace(-40, 40, nsamples * 2).reshape(nsamples, 2))
    return plan


def check(info, status, *words):
    e = info.value
    assert isinstance(e, horecon.HoreconError)
    assert e.status == status, f"got {e}"
    assert e.name == horecon.STATUS_NAMES[status]
    assert e.message, "the library's message must come along"
    for w in words:
        assert w in e.message, f"{w!r} not in {e.message!r}"
    assert e.name in str(e) and e.message in str(e)


def test_null_pointer():
    with ready_plan() as plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_off_resonance(np.ones(12), None)  # times passed as NULL
        check(info, horecon.HORECON_ERR_NULL_POINTER, "horecon_set_off_resonance", "times")


def test_invalid_argument():
    with pytest.raises(horecon.HoreconError) as info:
        horecon.Plan((0, 4), nsamples=3)
    check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "horecon_plan_create", "nx")
    with pytest.raises(horecon.HoreconError) as info:
        horecon.Plan(4, nsamples=3, threads=-1)
    check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "num_threads")
    with ready_plan() as plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_solid_harmonics(np.ones((5, 5)))  # nterms 5 is no solid-harmonic order
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "nterms")
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_grid_positions((0.2, -0.1, 0.2))
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "fov")
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(np.ones(5), regularizer="total_variation", lambda_=1.0, reweightings=0)
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "reweightings")
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(np.ones(5), regularizer="bogus")
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "regularizer")
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(np.ones(5), sample_weights=-np.ones(5))
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "sample_weights")
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(np.ones(5), lambda_=-1.0)
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "lambda")
    with horecon.Plan(4, ncoils=2, nsamples=3) as plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_sensitivities(None)
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT, "coils")
    # checked by the binding: still a HoreconError (and a ValueError)
    for kwargs in [dict(precision="exact"), dict(backend="gpu"), dict(shape=(1, 2, 3, 4))]:
        args = dict(shape=4, nsamples=3)
        args.update(kwargs)
        with pytest.raises(ValueError) as info:
            horecon.Plan(**args)
        check(info, horecon.HORECON_ERR_INVALID_ARGUMENT)
    with pytest.raises(TypeError):
        horecon.Plan(4)  # nsamples is required
    with pytest.raises(TypeError):
        horecon.Plan((4.5, 2), nsamples=3)  # sizes must be integers, never truncated


def test_size_mismatch():
    with ready_plan() as plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.forward(np.ones(11))
        check(info, horecon.HORECON_ERR_SIZE_MISMATCH, "image", "(12,)")
        assert isinstance(info.value, ValueError)


def test_not_finite():
    with ready_plan() as plan:
        good = plan.forward(np.ones(12))
        positions = np.zeros((12, 3))
        positions[7, 1] = np.nan
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_positions(positions)
        check(info, horecon.HORECON_ERR_NOT_FINITE, "positions")
        image = np.ones(12, dtype=np.complex64)
        image[3] = np.inf
        with pytest.raises(horecon.HoreconError) as info:
            plan.forward(image)
        check(info, horecon.HORECON_ERR_NOT_FINITE, "image")
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_off_resonance(np.full(12, np.nan), np.ones(5))
        check(info, horecon.HORECON_ERR_NOT_FINITE, "omega")
        # failed setters left the model as it was
        assert np.array_equal(plan.forward(np.ones(12)), good)


def test_incomplete_plan():
    with horecon.Plan((4, 3), nsamples=5) as plan:
        with pytest.raises(horecon.HoreconError) as info:
            plan.forward(np.ones(12))
        check(info, horecon.HORECON_ERR_INCOMPLETE_PLAN, "positions")
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_trajectory(np.ones((5, 2)))
        check(info, horecon.HORECON_ERR_INCOMPLETE_PLAN, "positions")
        plan.set_grid_positions(0.2)
        with pytest.raises(horecon.HoreconError) as info:
            plan.adjoint(np.ones(5))
        check(info, horecon.HORECON_ERR_INCOMPLETE_PLAN, "phase model")
    with horecon.Plan((4, 3), ncoils=2, nsamples=5) as plan:
        plan.set_grid_positions(0.2)
        plan.set_trajectory(np.ones((5, 2)))
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(np.ones((5, 2)))
        check(info, horecon.HORECON_ERR_INCOMPLETE_PLAN, "sensitivities")


def test_backend_unavailable_for_cuda_without_gpu():
    if horecon.cuda_device_count() > 0:
        pytest.skip("a CUDA device is present: 'cuda' is available here")
    with pytest.raises(horecon.HoreconError) as info:
        horecon.Plan((4, 3), nsamples=5, backend="cuda")
    check(info, horecon.HORECON_ERR_BACKEND_UNAVAILABLE)
    with horecon.Plan((4, 3), nsamples=5, backend="auto") as plan:
        assert plan.backend == "cpu"


def test_cancelled():
    with ready_plan() as plan:
        calls = []
        with pytest.raises(horecon.HoreconError) as info:
            plan.cg(
                np.ones(5),
                max_iterations=50,
                tolerance=0.0,
                progress=lambda i, r: calls.append((i, r)) or len(calls) >= 2,
            )
        check(info, horecon.HORECON_ERR_CANCELLED)
        assert len(calls) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses RLIMIT_AS and /proc")
def test_out_of_memory_in_a_child_with_limited_address_space():
    """24 GB of grid positions under a ~1.5 GB address-space limit: the
    library reports OUT_OF_MEMORY instead of aborting (run in a child so the
    limit does not touch this process)."""
    script = textwrap.dedent(
        f"""
        import resource, sys
        sys.path.insert(0, {PYTHON_DIR!r})
        import horecon
        horecon.version()
        plan = horecon.Plan((1024, 1024, 1024), nsamples=1, threads=1)
        vm = [l for l in open('/proc/self/status') if l.startswith('VmSize')][0]
        kb = int(vm.split()[1])
        resource.setrlimit(resource.RLIMIT_AS, (kb * 1024 + (1 << 30), resource.RLIM_INFINITY))
        try:
            plan.set_grid_positions(0.2)
        except horecon.HoreconError as e:
            print('status', e.status, e.message)
        else:
            print('no error')
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"status {horecon.HORECON_ERR_OUT_OF_MEMORY} "), out.stdout + out.stderr


def test_error_message_is_per_call():
    with ready_plan() as plan:
        with pytest.raises(horecon.HoreconError):
            plan.forward(np.full(12, np.nan))
        plan.forward(np.ones(12))  # a later success must not raise a stale error
        with pytest.raises(horecon.HoreconError) as info:
            plan.set_solid_harmonics(np.ones((5, 2)))
        assert "nan" not in info.value.message.lower()


def test_library_not_found_names_what_was_tried(tmp_path):
    missing = tmp_path / "no-such-libhorecon.so"
    env = dict(os.environ, HORECON_LIB=str(missing))
    script = f"import sys; sys.path.insert(0, {PYTHON_DIR!r}); import horecon; horecon.version()"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode != 0
    assert "HORECON_LIB" in out.stderr and str(missing) in out.stderr, out.stderr
