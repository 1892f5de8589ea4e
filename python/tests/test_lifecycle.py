"""The plan is freed on close, on leaving a with block and on garbage
collection; closing twice is fine; use after close raises."""

import gc

import numpy as np
import pytest

import horecon


class CountingDestroy:
    """Wraps horecon_plan_destroy to count the handles it frees."""

    def __init__(self, lib):
        self.inner = lib.horecon_plan_destroy
        self.freed = []

    def __call__(self, handle):
        self.freed.append(handle)
        return self.inner(handle)


@pytest.fixture
def destroy(monkeypatch):
    lib = horecon._load()
    counter = CountingDestroy(lib)
    monkeypatch.setattr(lib, "horecon_plan_destroy", counter)
    return counter


def make_plan():
    plan = horecon.Plan((4, 3), nsamples=5)
    plan.set_grid_positions(0.2)
    plan.set_trajectory(np.linspace(-40, 40, 10).reshape(5, 2))
    return plan


def test_close_twice_and_use_after_close(destroy):
    plan = make_plan()
    handle = plan._handle
    plan.close()
    assert plan.closed and destroy.freed == [handle]
    plan.close()
    assert destroy.freed == [handle], "the second close must not free again"
    calls = [
        lambda: plan.forward(np.ones(12)),
        lambda: plan.adjoint(np.ones(5)),
        lambda: plan.normal(np.ones(12)),
        lambda: plan.cg(np.ones(5)),
        lambda: plan.set_grid_positions(0.2),
        lambda: plan.set_positions(np.zeros((12, 3))),
        lambda: plan.set_trajectory(np.ones((5, 2))),
        lambda: plan.set_solid_harmonics(np.ones((5, 4))),
        lambda: plan.set_basis(np.ones((12, 2)), np.ones((5, 2))),
        lambda: plan.set_off_resonance(None),
        lambda: plan.set_sensitivities(None),
        lambda: plan.backend,
        lambda: plan.cancel(),
    ]
    for call in calls:
        with pytest.raises(horecon.HoreconError) as info:
            call()
        assert info.value.status == horecon.HORECON_ERR_NULL_POINTER
        assert "closed" in info.value.message
    assert "closed" in repr(plan)


def test_context_exit_frees(destroy):
    with make_plan() as plan:
        handle = plan._handle
        plan.forward(np.ones(12))
    assert destroy.freed == [handle] and plan.closed
    with pytest.raises(RuntimeError):
        with make_plan() as plan:
            handle = plan._handle
            raise RuntimeError("inside the block")
    assert destroy.freed[-1] == handle and plan.closed


def test_garbage_collection_frees(destroy):
    plan = make_plan()
    handle = plan._handle
    del plan
    gc.collect()
    assert destroy.freed == [handle]
    # a plan in a reference cycle is freed by the cycle collector
    plan = make_plan()
    handle = plan._handle
    plan.me = plan
    del plan
    gc.collect()
    assert destroy.freed[-1] == handle


def test_many_plans_do_not_leak():
    """Creating and dropping plans that each hold ~1.5 MB of positions keeps
    the resident size flat (would grow by ~600 MB if plans leaked)."""

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    try:
        rss_mb()
    except OSError:
        pytest.skip("no /proc/self/statm")

    def churn(count):
        for _ in range(count):
            plan = horecon.Plan((256, 256), nsamples=4, threads=1)
            plan.set_grid_positions(0.2)
            plan.set_trajectory(np.ones((4, 2)))
            plan.forward(np.ones(256 * 256))  # builds the operator too
            del plan

    churn(20)
    gc.collect()
    before = rss_mb()
    churn(400)
    gc.collect()
    grown = rss_mb() - before
    assert grown < 100, f"resident size grew by {grown:.0f} MB over 400 plans"


def test_close_while_a_solve_runs_frees_after_it(destroy):
    """close() from another thread during cg: later calls raise at once, the
    running solve finishes safely, and the plan is freed when it ends."""
    import threading

    plan = make_plan()
    handle = plan._handle
    data = plan.forward(np.arange(12.0))
    started, release = threading.Event(), threading.Event()
    result = {}

    def progress(iteration, rel_residual):
        started.set()
        release.wait(5)
        return False

    def run():
        result["out"] = plan.cg(data, max_iterations=3, tolerance=0.0, progress=progress)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(5)
    plan.close()
    assert destroy.freed == [], "must not free while the solve runs"
    with pytest.raises(horecon.HoreconError) as info:
        plan.forward(np.ones(12))
    assert info.value.status == horecon.HORECON_ERR_NULL_POINTER
    release.set()
    worker.join(10)
    assert not worker.is_alive()
    image, stats = result["out"]
    assert stats["iterations"] == 3 and image.shape == (4, 3)
    assert destroy.freed == [handle]


def test_setter_waits_for_operators_in_flight():
    """A setter from another thread during cg waits for the solve to end
    (the library's setters need the plan exclusively); a setter from the
    solve's own progress callback is refused instead of deadlocking."""
    import threading

    plan = make_plan()
    data = plan.forward(np.arange(12.0))
    started, release = threading.Event(), threading.Event()
    order = []

    def progress(iteration, rel_residual):
        started.set()
        release.wait(5)
        order.append("cg iteration")
        return False

    def setter():
        plan.set_grid_positions(0.3)
        order.append("setter")

    solver = threading.Thread(
        target=lambda: plan.cg(data, max_iterations=2, tolerance=0.0, progress=progress)
    )
    solver.start()
    assert started.wait(5)
    other = threading.Thread(target=setter)
    other.start()
    other.join(0.3)
    assert other.is_alive(), "the setter must wait for the running solve"
    release.set()
    solver.join(10)
    other.join(10)
    assert order == ["cg iteration", "cg iteration", "setter"]

    def changes_its_own_plan(iteration, rel_residual):
        plan.set_grid_positions(0.2)

    with pytest.raises(horecon.HoreconError) as info:
        plan.cg(data, progress=changes_its_own_plan)
    assert info.value.status == horecon.HORECON_ERR_INVALID_ARGUMENT
    assert "progress callback" in info.value.message
    # operators from the callback are fine
    seen = []
    plan.cg(
        data, max_iterations=2, tolerance=0.0, progress=lambda i, r: seen.append(plan.forward(np.ones(12)))
    )
    assert len(seen) == 2
    plan.close()
