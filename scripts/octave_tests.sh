#!/usr/bin/env bash
# Builds the MEX with GNU Octave (mkoctfile --mex) against the release library
# and runs matlab/tests/run_tests.m with octave-cli. Installs nothing: needs
# octave and liboctave-dev (apt-get install -y --no-install-recommends octave
# liboctave-dev) and target/release/libhorecon.so (cargo build --release).
# Exits non-zero when the build or any test fails.
#
# Note: every octave-cli run prints "error: ignoring const execution_exception&
# while preparing to exit" (an Octave 7 bug, exit code 0); only the exit code counts.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if ! command -v octave-cli >/dev/null 2>&1; then
  echo "octave_tests.sh: octave-cli not found (apt-get install octave liboctave-dev)" >&2
  exit 2
fi
if [ ! -f target/release/libhorecon.so ]; then
  echo "octave_tests.sh: target/release/libhorecon.so missing: run cargo build --release first" >&2
  exit 2
fi
octave-cli --no-gui --norc --eval "
  addpath('$root/matlab');
  build_mex();
  run('$root/matlab/tests/run_tests.m');
"
