#!/usr/bin/env bash
# The Python package as a user gets it: builds the wheel with pip from the repository root
# (cargo reuses target/: run `cargo build --release` first and nothing is compiled again), checks
# that `pip wheel ./python` builds the same package, installs the wheel with its [test] extra into
# a fresh venv, and runs python/tests there from another folder against the installed package
# (HORECON_TEST_INSTALLED=1: no python/ on sys.path, no PYTHONPATH, no HORECON_LIB).
# Needs python3 with venv and pip, and PyPI (build requirements and the extras).
# Usage: scripts/wheel_test.sh [WORK_DIR]   (default: a temporary folder, removed at the end)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
cd "$root"

echo "wheel_test: pip wheel . (the one build; cargo's target/ reused)"
python3 -m pip wheel -q --no-deps -w "$work/dist" .
wheel=$(ls "$work"/dist/horecon-*.whl)
echo "wheel_test: pip wheel ./python"
python3 -m pip wheel -q --no-deps -w "$work/dist-python" ./python
listing() { python3 -m zipfile -l "$1" | awk 'NR > 1 && $1 !~ /RECORD$/ { print $1 }' | sort; }
if ! diff <(listing "$wheel") <(listing "$(ls "$work"/dist-python/horecon-*.whl)"); then
  echo "wheel_test: pip wheel ./python built a different package" >&2
  exit 1
fi
listing "$wheel" | grep -qx "horecon/libhorecon.so" || { echo "wheel_test: no horecon/libhorecon.so in $wheel" >&2; exit 1; }

echo "wheel_test: fresh venv, pip install $(basename "$wheel")[test]"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel[test]"
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
env -u HORECON_LIB -u PYTHONPATH HORECON_TEST_INSTALLED=1 \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests"
