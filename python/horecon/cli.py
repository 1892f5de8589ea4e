"""horecon-recon: reconstruct an ISMRMRD scan into a NIfTI, ISMRMRD or numpy image.

    horecon-recon scan.h5 -o image.nii.gz [--sensitivities S.npy] [--b0 B0.nii.gz] ...

Run ``horecon-recon --help`` for every option and the exit codes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# exit codes (also in --help)
EXIT_OK = 0
EXIT_FAILED = 1  # an unexpected error (a bug: please report it)
EXIT_USAGE = 2  # bad command line (argparse's own code)
EXIT_INPUT = 3  # an input file is missing, unreadable, or its fields are missing or mismatched
EXIT_RECONSTRUCTION = 4  # the library refused or failed (message from horecon)
EXIT_OUTPUT = 5  # the output cannot be written
EXIT_INTERRUPTED = 130  # Ctrl-C

EPILOG = """\
input:
  SCAN is an ISMRMRD file (.h5). Its trajectory is k in rad/m, 1/m or normalized units along
  (read, phase, slice), or field-camera coefficients of the real solid harmonics (1, 4, 9 or 16
  terms, rad/m^order) as extra trajectory dimensions: the convention is in the README (section
  ISMRMRD). Files that do not declare it need --model (and --units for k).

sensitivities and B0 (.npy, .npz, .nii, .nii.gz), indexed [read, phase, slice] on the
reconstruction grid (the header's reconSpace matrix):
  --sensitivities: complex, the image shape + (coils,) or (voxels, coils)
  --b0: off-resonance, the image shape or (voxels,), in Hz (--b0-units rad/s for rad/s)

output (by extension):
  .nii / .nii.gz  NIfTI-1, magnitude float32 (--complex: complex64), affine from the
                  header's position and direction vectors (scanner coordinates, mm)
  .h5             an ISMRMRD image (complex64, appended to the file; group image_0)
  .npy            the complex64 image array, indexed [read, phase, slice]

exit codes:
  0  success (not converging within --iterations is not a failure)
  1  unexpected error (a bug)
  2  bad command line
  3  an input file is missing, not ISMRMRD, or has missing or mismatched fields
  4  the reconstruction failed (horecon's message names the reason)
  5  the output cannot be written
  130 interrupted (Ctrl-C)

example:
  horecon-recon scan.h5 -o image.nii.gz --sensitivities sens.npy --b0 b0_hz.nii.gz \\
      --regularizer tikhonov --lambda 1e-3 --iterations 30
"""


def _parser() -> argparse.ArgumentParser:
    from . import PRECISIONS, REGULARIZERS

    p = argparse.ArgumentParser(
        prog="horecon-recon",
        description="Reconstruct an ISMRMRD scan with horecon's exact encoding model (k-space or "
        "higher-order field-camera coefficients, B0, coil sensitivities) by conjugate gradient, "
        "and write the image.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scan", metavar="SCAN", help="ISMRMRD raw data file (.h5)")
    p.add_argument("-o", "--output", required=True, help="output image: .nii, .nii.gz, .h5 or .npy")
    model = p.add_argument_group("model")
    model.add_argument("--sensitivities", metavar="FILE", help="coil sensitivities (required with more than one coil)")
    model.add_argument("--b0", metavar="FILE", help="off-resonance map (Hz unless --b0-units rad/s)")
    model.add_argument("--b0-units", choices=("hz", "rad/s"), default="hz", help="units of --b0 (default: hz)")
    model.add_argument("--model", choices=("k", "solid_harmonics"), help="meaning of the trajectory, if the file does not declare it")
    model.add_argument("--units", choices=("rad/m", "1/m", "normalized"), help="units of a k trajectory, if the file does not declare them")
    model.add_argument("--dataset", default="dataset", help="HDF5 group of the ISMRMRD dataset (default: dataset)")
    model.add_argument(
        "--select", action="append", default=[], metavar="COUNTER=VALUE",
        help="keep the acquisitions with this encoding counter (slice, contrast, repetition, phase, set, "
        "average, segment); repeatable",
    )
    model.add_argument("--prewhiten", action="store_true", help="whiten data and sensitivities with the noise acquisitions' covariance")
    solve = p.add_argument_group("reconstruction")
    solve.add_argument("--regularizer", choices=tuple(REGULARIZERS), default="none", help="default: none")
    solve.add_argument("--lambda", dest="lambda_", type=float, default=0.0, metavar="LAMBDA", help="regularisation weight (default: 0)")
    solve.add_argument("--iterations", type=int, default=30, help="CG iterations (per reweighting for TV/Laplace; default: 30)")
    solve.add_argument("--tolerance", type=float, default=1e-6, help="stop at this relative residual (default: 1e-6)")
    solve.add_argument("--reweightings", type=int, help="outer reweighting steps for total_variation/laplace (default: 5)")
    solve.add_argument("--epsilon", type=float, help="TV/Laplace smoothing, image units (default: 1e-3)")
    solve.add_argument("--sigma", type=float, help="Laplace scale, image units (default: 1)")
    solve.add_argument("--toeplitz", action="store_true", help="Toeplitz normal operator (k trajectories on a grid)")
    solve.add_argument(
        "--approximation", type=float, metavar="TOL",
        help="fast approximate operators within this relative error, where the library offers them",
    )
    device = p.add_argument_group("device")
    device.add_argument(
        "--device", default="auto", metavar="auto|cpu|cuda|cuda:N",
        help="where to compute (default: auto = a CUDA GPU when usable, else the CPU)",
    )
    device.add_argument("--precision", choices=tuple(PRECISIONS), default="accurate", help="default: accurate")
    device.add_argument("--threads", type=int, default=0, help="CPU threads (default: 0 = all cores)")
    out = p.add_argument_group("output")
    out.add_argument("--complex", action="store_true", help="NIfTI: write complex64 instead of the magnitude")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress bar (the summary line is still printed)")
    p.add_argument("--version", action=_Version, help="print the library's version and exit")
    return p


class _Version(argparse.Action):
    """--version: the library's version (Cargo.toml's) and where it was loaded from."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        import horecon

        print(f"horecon-recon {horecon.version()} ({horecon.library_path()})")
        parser.exit()


class _InputError(Exception):
    """An input file problem: exit code 3."""


def _device(text):
    text = text.lower()
    if text in ("auto", "cpu", "cuda"):
        return text, 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return "cuda", int(text[5:])
    raise argparse.ArgumentTypeError(f"--device must be auto, cpu, cuda or cuda:N, got {text!r}")


def _selection(items):
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or not name.strip():
            raise argparse.ArgumentTypeError(f"--select takes COUNTER=VALUE (an integer), got {item!r}")
        out[name.strip()] = number
    return out


def _image_array(name, arr, scan, trailing=None):
    """arr reshaped to (N,) or (N, trailing) in voxel order, from the image shape (+ trailing) or flat."""
    n = int(np.prod(scan.matrix))
    shapes = {tuple(scan.matrix), tuple(scan.shape)}
    if trailing is None:
        if arr.shape in shapes or arr.shape == (n,):
            return arr.reshape(-1, order="F")
        expected = " or ".join(str(s) for s in sorted(shapes | {(n,)}))
    else:
        if arr.ndim >= 2 and arr.shape[:-1] in shapes and arr.shape[-1] == trailing:
            return arr.reshape(n, trailing, order="F")
        if arr.shape == (n, trailing):
            return arr
        expected = " or ".join(str(s + (trailing,)) for s in sorted(shapes | {(n,)}))
    raise _InputError(f"{name} has shape {arr.shape}, expected {expected} (indexed [read, phase, slice])")


def _load(name, path):
    from .io import load_array

    try:
        arr = load_array(path, name)
    except (OSError, ValueError) as e:
        raise _InputError(str(e)) from e
    if arr.dtype.kind not in "biufc":
        raise _InputError(f"{name}: {path}: holds {arr.dtype} values, expected numbers")
    return arr


def _whitening(scan):
    """L^{-1} with noise covariance C = L L^H: whitened data L^{-1} d, sensitivities L^{-1} S."""
    c = scan.noise_covariance()
    try:
        chol = np.linalg.cholesky(c)
    except np.linalg.LinAlgError as e:
        raise _InputError(f"{scan.path}: the noise covariance is not positive definite ({e})") from e
    return np.linalg.inv(chol)


def _write(path, image, scan, complex_values):
    from . import io

    lower = path.lower()
    if lower.endswith((".nii", ".nii.gz")):
        io.write_nifti(path, image, scan, magnitude=not complex_values)
    elif lower.endswith(".h5"):
        io.write_ismrmrd_image(path, image, scan)
    elif lower.endswith(".npy"):
        np.save(path, np.asarray(image, dtype=np.complex64))
    else:
        raise ValueError(f"{path}: unknown output format (use .nii, .nii.gz, .h5 or .npy)")


class _ProgressLine:
    """The solve's progress on stderr: a tqdm bar of the whole call (set-up
    included: the plan's ``bar=``) with the iteration and residual, or a
    plain text line when tqdm is not installed."""

    def __init__(self):
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=100, desc="CG", unit="%", leave=False, dynamic_ncols=True)
        except ImportError:
            self.bar = None
        self.percent, self.text = -1, ""

    def fraction(self, fraction: float) -> bool:
        """The plan's progress (``bar=``): never stops the call."""
        percent = int(100 * fraction)
        if percent != self.percent:
            self.percent = percent
            if self.bar is not None:
                self.bar.update(max(0, percent - self.bar.n))
            else:
                print(f"\rhorecon-recon: CG {percent:3d} %{self.text}", end="", file=sys.stderr, flush=True)
        return False

    def iteration(self, iteration: int, residual: float) -> bool:
        """CG's iteration callback: the iteration and residual beside the bar."""
        self.text = f", iteration {iteration}, residual {residual:.2e}"
        if self.bar is not None:
            self.bar.set_postfix_str(self.text[2:], refresh=False)
        return False

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.percent >= 0:
            print(file=sys.stderr, flush=True)


def run(args) -> int:
    import horecon
    from . import io

    backend, device_index = args.device
    started = time.perf_counter()
    try:
        scan = io.read_ismrmrd(args.scan, dataset=args.dataset, model=args.model, units=args.units, select=args.select)
        data = scan.data
        sens = None
        if args.sensitivities:
            sens = _image_array("--sensitivities", _load("--sensitivities", args.sensitivities), scan, scan.ncoils)
        elif scan.ncoils > 1:
            raise _InputError(f"{args.scan} has {scan.ncoils} coils: --sensitivities is required")
        omega = None
        if args.b0:
            b0 = _load("--b0", args.b0)
            if np.iscomplexobj(b0):
                raise _InputError("--b0 must be real (Hz or rad/s)")
            omega = _image_array("--b0", b0, scan).astype(np.float64)
            if args.b0_units == "hz":
                omega = 2 * np.pi * omega
        if args.prewhiten:
            w = _whitening(scan)
            data = np.asfortranarray((data @ w.T).astype(np.complex64))
            if sens is not None:
                sens = sens @ w.T
    except (io.IsmrmrdError, FileNotFoundError, _InputError) as e:
        print(f"horecon-recon: {e}", file=sys.stderr)
        return EXIT_INPUT
    except ImportError as e:
        print(f"horecon-recon: {e}", file=sys.stderr)
        return EXIT_FAILED

    bar = None
    try:
        with scan.plan(backend=backend, device=device_index, precision=args.precision, threads=args.threads) as plan:
            if sens is not None:
                plan.set_sensitivities(sens)
            if omega is not None:
                plan.set_off_resonance(omega, scan.times)
            if args.toeplitz:
                plan.set_toeplitz(True)
            if args.approximation is not None:
                if not hasattr(plan, "set_approximation"):
                    raise horecon.HoreconValueError(
                        horecon.HORECON_ERR_INVALID_ARGUMENT,
                        "HORECON_ERR_INVALID_ARGUMENT",
                        f"--approximation: this horecon ({horecon.version()}) has no approximate operators",
                    )
                plan.set_approximation(args.approximation)
            if not args.quiet:
                bar = _ProgressLine()
            image, info = plan.cg(
                data,
                max_iterations=args.iterations,
                tolerance=args.tolerance,
                regularizer=args.regularizer,
                lambda_=args.lambda_,
                progress=None if bar is None else bar.iteration,
                reweightings=args.reweightings,
                epsilon=args.epsilon,
                sigma=args.sigma,
                bar=False if bar is None else bar.fraction,
            )
            where = plan.backend
            if bar is not None:
                bar.fraction(1.0)  # the library reports at most every 50 ms: the end is ours
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print("horecon-recon: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except horecon.HoreconError as e:
        if bar is not None:
            bar.close()
        print(f"horecon-recon: {e}", file=sys.stderr)
        return EXIT_RECONSTRUCTION
    if bar is not None:
        bar.close()
    try:
        _write(args.output, image, scan, args.complex)
    except (OSError, ValueError) as e:
        print(f"horecon-recon: cannot write {args.output}: {e}", file=sys.stderr)
        return EXIT_OUTPUT
    seconds = time.perf_counter() - started
    grid = "x".join(str(v) for v in scan.matrix)
    device = where if where == "cpu" else f"{where}:{device_index}"
    print(
        f"horecon-recon: {grid} image from {scan.nsamples} samples x {scan.ncoils} coils ({scan.model}"
        f"{', B0' if omega is not None else ''}); {info['iterations']} iterations, relative residual "
        f"{info['rel_residual']:.2e}{'' if info['converged'] else ' (not converged)'}; "
        f"CG {info['seconds']:.2f} s, total {seconds:.2f} s on {device}; wrote {args.output}"
    )
    return EXIT_OK


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        args.device = _device(args.device)
        args.select = _selection(args.select)
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    try:
        return run(args)
    except KeyboardInterrupt:
        print("horecon-recon: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the last resort: say what happened, exit 1
        print(f"horecon-recon: unexpected error: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("HORECON_DEBUG"):
            raise
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
