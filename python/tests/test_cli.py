"""horecon-recon: --help, exit codes, and the round trip simulate -> ISMRMRD -> horecon-recon ->
NIfTI -> read back, compared with the reconstruction made directly with a Plan."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ismrmrd", reason="the [io] extra (ismrmrd) is not installed")
pytest.importorskip("h5py", reason="the [io] extra (h5py) is not installed")
nib = pytest.importorskip("nibabel", reason="the [io] extra (nibabel) is not installed")
pytest.importorskip("tqdm", reason="tqdm (a dependency of the package) is not installed")

import horecon  # noqa: E402
import horecon.io as hio  # noqa: E402
import horecon.sim as sim  # noqa: E402

INSTALLED = bool(os.environ.get("HORECON_TEST_INSTALLED"))


def _command():
    """The console script next to this Python (an installed package), else `python -m horecon.cli`."""
    script = Path(sys.executable).parent / "horecon-recon"
    if script.exists():
        return [str(script)]
    assert not INSTALLED, f"the installed package has no console script at {script}"
    return [sys.executable, "-m", "horecon.cli"]


def recon(*args, cwd=None, first_on_path=None):
    env = dict(os.environ)
    if not INSTALLED:  # the checkout's package, as conftest imports it
        env["PYTHONPATH"] = str(Path(horecon.__file__).resolve().parents[1])
    if first_on_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(first_on_path), env.get("PYTHONPATH")) if p)
    return subprocess.run(_command() + [str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_help_is_complete():
    out = recon("--help")
    assert out.returncode == 0, out.stderr
    for option in (
        "--output", "--sensitivities", "--b0", "--b0-units", "--model", "--units", "--select", "--prewhiten",
        "--regularizer", "--lambda", "--iterations", "--tolerance", "--reweightings", "--epsilon", "--sigma",
        "--toeplitz", "--approximation", "--device", "--precision", "--threads", "--complex", "--quiet",
        "exit codes:", "total_variation", "cuda:N", ".nii.gz",
    ):
        assert option in out.stdout, f"--help does not mention {option}"
    version = recon("--version")
    assert version.returncode == 0 and horecon.version() in version.stdout


@pytest.fixture(scope="module")
def scan_files(tmp_path_factory):
    """A 16-term higher-order spiral scan with B0, 4 coils and a noise acquisition, 20x20 at
    z = 20 mm: the ISMRMRD file, sensitivities (.npy), B0 in Hz (.nii.gz) and the arrays."""
    folder = tmp_path_factory.mktemp("scan")
    n, fov, coils, center = 20, 0.22, 4, (0.0, 0.0, 0.02)
    fovs = (fov, fov, 0.005)
    k, t = sim.spiral(n, fov, 1.0, 1e-5, 2e-3)
    coefficients = sim.field_coefficients(k, 1e-5)
    positions = sim.refined_grid((n, n, 1), fovs, center, 1)
    truth = sim.shepp_logan(2, (0.2, 0.2, 0.0), center, positions)
    sens = sim.coil_sensitivities(positions, coils, 0.15)
    omega = sim.off_resonance(positions, (0.2, 0.2, 0.0), center, 40.0)
    with horecon.Plan((n, n), ncoils=coils, nsamples=k.shape[0]) as plan:
        plan.set_grid_positions(fovs, center)
        plan.set_solid_harmonics(coefficients)
        plan.set_off_resonance(omega, t)
        plan.set_sensitivities(sens)
        data = plan.forward(truth)
    data, sigma = sim.add_noise(data, 50.0, 3)
    noise = (np.random.default_rng(5).standard_normal((200, coils)) * sigma).astype(np.complex64)
    hio.write_ismrmrd(
        folder / "scan.h5", data, coefficients, t, fov=fovs, matrix=(n, n, 1), model="solid_harmonics",
        position=center, noise=noise,
    )
    np.save(folder / "sens.npy", sens.reshape(n, n, coils, order="F"))
    b0 = nib.Nifti1Image((omega / (2 * np.pi)).reshape(n, n, order="F").astype(np.float32), np.eye(4))
    nib.save(b0, folder / "b0_hz.nii.gz")
    return {
        "folder": folder, "n": n, "fovs": fovs, "center": center, "coefficients": coefficients, "t": t,
        "omega": omega, "sens": sens, "data": data,
    }


def test_round_trip_matches_the_direct_reconstruction(scan_files, tmp_path):
    f = scan_files
    out = tmp_path / "image.nii.gz"
    result = recon(
        f["folder"] / "scan.h5", "-o", out, "--sensitivities", f["folder"] / "sens.npy",
        "--b0", f["folder"] / "b0_hz.nii.gz", "--iterations", 12, "--regularizer", "tikhonov",
        "--lambda", 1e-4, "--complex", "--device", "cpu", "--precision", "double", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    print(summary)
    assert "20x20x1 image" in summary and "12 iterations" in summary and "on cpu" in summary
    assert "relative residual" in summary and str(out) in summary
    assert "CG: " in result.stderr and "%|" in result.stderr  # the tqdm bar (cleared at the end)
    recon_image = np.asanyarray(nib.load(out).dataobj)[:, :, 0]
    # the same problem solved directly, from the arrays written (coefficients as float32, as
    # stored); in double precision, since CG amplifies float32 rounding differences (~1e-4 here)
    n = f["n"]
    with horecon.Plan((n, n), ncoils=4, nsamples=f["t"].size, backend="cpu", precision="double") as plan:
        plan.set_grid_positions(f["fovs"], f["center"])
        plan.set_solid_harmonics(f["coefficients"].astype(np.float32).astype(np.float64))
        plan.set_off_resonance(f["omega"].astype(np.float32).astype(np.float64), f["t"])
        plan.set_sensitivities(f["sens"])
        direct, info = plan.cg(f["data"], max_iterations=12, regularizer="tikhonov", lambda_=1e-4)
    err = np.linalg.norm(recon_image - direct) / np.linalg.norm(direct)
    print(f"horecon-recon vs direct CG: relative difference {err:.1e}")
    assert err < 1e-5
    assert nib.load(out).affine[2, 3] == pytest.approx(20.0)  # the slice at z = 20 mm


def test_progress_line_without_tqdm(scan_files, tmp_path):
    """Without tqdm the solve's progress is a text line on stderr, rewritten in place, ending at 100 %."""
    hidden = tmp_path / "hide_tqdm"
    (hidden / "tqdm").mkdir(parents=True)
    (hidden / "tqdm" / "__init__.py").write_text("raise ImportError('tqdm is hidden for this test')\n")
    f = scan_files
    result = recon(f["folder"] / "scan.h5", "-o", tmp_path / "x.npy", "--sensitivities", f["folder"] / "sens.npy",
                   "--iterations", 3, "--device", "cpu", first_on_path=hidden)
    assert result.returncode == 0, result.stderr
    # (text mode reads the line's carriage returns as newlines)
    lines = [line for line in result.stderr.splitlines() if line]
    assert all(line.startswith("horecon-recon: CG ") for line in lines), result.stderr
    assert lines[0] == "horecon-recon: CG   0 %", result.stderr
    assert lines[-1].startswith("horecon-recon: CG 100 %, iteration 3, residual "), result.stderr


def test_quiet_magnitude_ismrmrd_and_numpy_outputs(scan_files, tmp_path):
    f = scan_files
    common = ["--sensitivities", f["folder"] / "sens.npy", "--iterations", 3, "--device", "cpu"]
    quiet = recon(f["folder"] / "scan.h5", "-o", tmp_path / "m.nii", "-q", *common)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and len(quiet.stdout.strip().splitlines()) == 1
    magnitude = np.asanyarray(nib.load(tmp_path / "m.nii").dataobj)
    assert magnitude.dtype == np.float32 and (magnitude >= 0).all()
    assert recon(f["folder"] / "scan.h5", "-o", tmp_path / "x.npy", "-q", *common).returncode == 0
    np.testing.assert_allclose(np.abs(np.load(tmp_path / "x.npy"))[..., None], magnitude, rtol=1e-6)
    assert recon(f["folder"] / "scan.h5", "-o", tmp_path / "x.h5", "-q", "--prewhiten", *common).returncode == 0
    import ismrmrd

    with ismrmrd.Dataset(str(tmp_path / "x.h5"), "dataset", create_if_needed=False) as dset:
        assert dset.read_image("image_0", 0).data.shape == (1, 1, 20, 20)


def test_exit_codes(scan_files, tmp_path):
    f = scan_files
    np.save(f["folder"] / "text.npy", np.array(["a", "b"]))
    np.savez(f["folder"] / "empty.npz")
    (f["folder"] / "cut.nii.gz").write_bytes((f["folder"] / "b0_hz.nii.gz").read_bytes()[:40])
    scan = f["folder"] / "scan.h5"
    sens = ["--sensitivities", f["folder"] / "sens.npy"]
    cases = {
        "missing file": (["nothing.h5", "-o", "x.nii"], 3, "no such file"),
        "not HDF5": ([f["folder"] / "sens.npy", "-o", "x.nii"], 3, "not an HDF5 file"),
        "no sensitivities": ([scan, "-o", "x.nii"], 3, "--sensitivities is required"),
        "wrong sensitivities": ([scan, "-o", "x.nii", "--sensitivities", f["folder"] / "b0_hz.nii.gz"], 3, "--sensitivities has shape"),
        "wrong B0": ([scan, "-o", "x.nii", *sens, "--b0", f["folder"] / "sens.npy"], 3, "--b0 must be real"),
        "unknown counter": ([scan, "-o", "x.nii", *sens, "--select", "echo=1"], 3, "unknown encoding counter"),
        "non-integer counter": ([scan, "-o", "x.nii", *sens, "--select", "slice=\u00b2"], 2, "COUNTER=VALUE"),
        "text sensitivities": ([scan, "-o", "x.nii", "--sensitivities", f["folder"] / "text.npy"], 3, "expected numbers"),
        "empty npz": ([scan, "-o", "x.nii", "--sensitivities", f["folder"] / "empty.npz"], 3, "holds no array"),
        "damaged NIfTI": ([scan, "-o", "x.nii", *sens, "--b0", f["folder"] / "cut.nii.gz"], 3, "cannot be read"),
        "bad option": ([scan, "-o", "x.nii", "--regularizer", "magic"], 2, "invalid choice"),
        "no output": ([scan], 2, "--output"),
        "bad device": ([scan, "-o", "x.nii", "--device", "tpu"], 2, "--device"),
        "unwritable": ([scan, "-o", tmp_path / "no" / "such" / "x.nii", *sens, "--iterations", 1], 5, "cannot write"),
        "unknown format": ([scan, "-o", "x.png", *sens, "--iterations", 1], 5, "unknown output format"),
        "library refuses": ([scan, "-o", "x.nii", *sens, "--iterations", 1, "--threads", -3], 4, "HORECON_ERR"),
    }
    if horecon.cuda_device_count() == 0:
        cases["no GPU"] = ([scan, "-o", "x.nii", *sens, "--device", "cuda"], 4, "HORECON_ERR_BACKEND_UNAVAILABLE")
    for name, (args, code, message) in cases.items():
        result = recon(*args, cwd=tmp_path)
        assert result.returncode == code, f"{name}: exit {result.returncode}, expected {code}: {result.stderr}"
        assert message in result.stderr, f"{name}: {result.stderr!r} does not say {message!r}"


@pytest.mark.skipif(not INSTALLED, reason="checks the installed package (HORECON_TEST_INSTALLED=1, scripts/wheel_test.sh)")
def test_console_script_is_installed():
    assert shutil.which("horecon-recon", path=str(Path(sys.executable).parent))
