#!/usr/bin/env bash
# Runs matlab/horecon_install.m with GNU Octave on a clean path (builds the MEX
# with mkoctfile --mex against the release library, adds the path, self-test),
# then matlab/tests/run_tests.m with octave-cli. Installs nothing: needs
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
# horecon_install on a clean path (--norc): it builds the MEX, adds matlab/ to the path and
# runs its self-test; the tests then run from another folder.
octave-cli --no-gui --norc --eval "
  assert(isempty(which('horecon_mex')), 'the path is not clean: horecon_mex is already on it');
  cd('$root/matlab');
  info = horecon_install('Rebuild');
  cd(tempdir());
  assert(info.built && info.selfTestPassed, 'horecon_install did not build and self-test');
  assert(~isempty(which('horecon_mex')) && ~isempty(which('horecon.Plan')), 'horecon_install left horecon off the path');
  run('$root/matlab/tests/run_tests.m');
"
