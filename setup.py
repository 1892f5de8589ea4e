"""Builds the horecon Python package: cargo compiles libhorecon (the C API cdylib) and the
wheel carries it as horecon/libhorecon.so next to the ctypes binding (python/horecon/).

Everything else (name, dependencies, extras, the horecon-recon script) is in pyproject.toml.
python/pyproject.toml and python/setup.py are links to these two files, so that both
`pip install .` (repository root) and `pip install ./python` work: the paths below are taken
relative to the folder pip builds in.
"""

import os
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools_rust import Binding, RustExtension, build_rust

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

# Not resolved: python/setup.py is a link to this file and must see python/ as its folder.
HERE = Path(os.path.abspath(__file__)).parent
ROOT = HERE if (HERE / "Cargo.toml").is_file() else HERE.parent
PYTHON = ROOT / "python"
LIBRARY = {"darwin": "libhorecon.dylib", "win32": "horecon.dll"}.get(sys.platform, "libhorecon.so")


def relative(path: Path) -> str:
    return os.path.relpath(path, HERE)


class build_library(build_rust):
    """The cdylib keeps its own name (libhorecon.so, what ctypes and C programs load), not a
    Python extension module's (libhorecon.cpython-311-x86_64-linux-gnu.so)."""

    def get_dylib_ext_path(self, ext, target_fname):
        return os.path.join(os.path.dirname(super().get_dylib_ext_path(ext, target_fname)), LIBRARY)


class bdist_wheel_any_python(bdist_wheel):
    """The library does not link to Python: one wheel per platform serves every Python 3."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(
    # Cargo.toml is the one source of the version (the library reports it too: horecon.version()).
    version=tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"],
    long_description=(PYTHON / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    # every module and subpackage of python/horecon/ goes in, whoever adds it
    package_dir={"": relative(PYTHON)},
    packages=find_packages(where=relative(PYTHON), include=["horecon", "horecon.*"]),
    rust_extensions=[
        RustExtension(
            "horecon.libhorecon",
            path=relative(ROOT / "Cargo.toml"),
            binding=Binding.NoBinding,
            py_limited_api=False,
            # the manifest's own crate types: cargo then reuses the checkout's `cargo build
            # --release` (target/) instead of compiling the crate again for the wheel
            args=["--crate-type", "cdylib,rlib"],
        )
    ],
    cmdclass={"build_rust": build_library, "bdist_wheel": bdist_wheel_any_python},
    zip_safe=False,
)
