"""pytest setup: makes `horecon` (python/) and the shared benchmark cases
(shared/bench/cases.py) importable, and hands out seeded random generators."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve()
if not os.environ.get("HORECON_TEST_INSTALLED"):  # else: the installed package (scripts/wheel_test.sh)
    sys.path.insert(0, str(HERE.parents[1]))  # python/
sys.path.insert(0, str(HERE.parent))  # python/tests/ (the float64 reference)


def shared_bench_dir():
    """shared/bench: $HORECON_SHARED (the shared folder, or its bench/) or
    ../shared/bench relative to the repository root."""
    env = os.environ.get("HORECON_SHARED")
    candidates = []
    if env:
        candidates += [Path(env) / "bench", Path(env)]
    candidates.append(HERE.parents[2].parent / "shared" / "bench")
    for c in candidates:
        if (c / "cases.py").is_file():
            return c, candidates
    return None, candidates


@pytest.fixture(scope="session")
def cases():
    """The shared/bench/cases.py module, or a skip naming where it was looked for."""
    path, tried = shared_bench_dir()
    if path is None:
        pytest.skip(
            "shared/bench/cases.py not found (looked in "
            + ", ".join(str(t) for t in tried)
            + "); set HORECON_SHARED to the shared folder"
        )
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    import cases as module

    return module


@pytest.fixture
def rng(request):
    """A fresh generator; its seed is printed (shown on failure) and can be
    replayed with HORECON_TEST_SEED."""
    env = os.environ.get("HORECON_TEST_SEED")
    seed = int(env) if env else int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.name}: seed {seed} (replay with HORECON_TEST_SEED={seed})")
    return SeededRng(seed)


class SeededRng:
    """numpy's Generator plus the seed it came from (for failure messages)."""

    def __init__(self, seed):
        self.seed = seed
        self.generator = np.random.default_rng(seed)

    def __getattr__(self, name):
        return getattr(self.generator, name)

    def complex(self, *shape):
        """Standard complex normal values (never zeros)."""
        return self.generator.standard_normal(shape) + 1j * self.generator.standard_normal(shape)


@pytest.fixture
def sigint():
    """Ctrl-C raises KeyboardInterrupt during the test even where the test
    process was started with SIGINT ignored (a background job of a
    non-interactive shell: Python then installs no handler of its own)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
