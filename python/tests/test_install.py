"""The installed package (a wheel in a fresh venv: scripts/wheel_test.sh sets HORECON_TEST_INSTALLED=1):
libhorecon.so inside it, `import horecon` from another folder with no environment variables, an
operator and a CG call, HORECON_LIB still overriding, the version from Cargo.toml."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import horecon

pytestmark = pytest.mark.skipif(
    not os.environ.get("HORECON_TEST_INSTALLED"),
    reason="checks an installed package: run scripts/wheel_test.sh (sets HORECON_TEST_INSTALLED=1)",
)

ROOT = Path(__file__).resolve().parents[2]


def run_python(code, cwd, **env):
    clean = {k: v for k, v in os.environ.items() if k not in ("HORECON_LIB", "PYTHONPATH")}
    clean.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=clean, timeout=120)


def test_library_is_inside_the_installed_package(tmp_path):
    assert "site-packages" in horecon.__file__, f"the tests imported {horecon.__file__}, not the installed package"
    code = (
        "import horecon, numpy as np\n"
        "print(horecon.__file__); print(horecon.library_path()); print(horecon.version())\n"
        "with horecon.Plan(4, nsamples=3) as p:\n"
        "    p.set_grid_positions(0.1); p.set_trajectory(np.linspace(-30, 30, 3))\n"
        "    d = p.forward(np.arange(4) + 0j); x, info = p.cg(d, max_iterations=5)\n"
        "print(info['iterations'])\n"
    )
    out = run_python(code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    package, library, version, iterations = out.stdout.split()
    assert "site-packages" in package and not package.startswith(str(ROOT))
    assert library == str(Path(package).parent / "libhorecon.so")
    import tomllib

    assert version == tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    from importlib.metadata import version as dist_version

    assert dist_version("horecon") == version  # the wheel's version: Cargo.toml's too
    assert int(iterations) >= 1


def test_horecon_lib_still_overrides(tmp_path):
    copy = tmp_path / "libcopy.so"
    copy.write_bytes(Path(horecon.library_path()).read_bytes())
    out = run_python("import horecon; print(horecon.library_path())", cwd=tmp_path, HORECON_LIB=str(copy))
    assert out.returncode == 0 and out.stdout.strip() == str(copy)
    bad = run_python("import horecon; horecon.version()", cwd=tmp_path, HORECON_LIB=str(tmp_path / "missing.so"))
    assert bad.returncode != 0 and "HORECON_LIB" in bad.stderr  # an explicit choice never falls back


def test_every_module_of_the_package_is_installed():
    source = {p.name for p in (ROOT / "python" / "horecon").glob("*.py")}
    installed = {p.name for p in Path(horecon.__file__).parent.glob("*.py")}
    assert source <= installed, f"missing from the wheel: {sorted(source - installed)}"
