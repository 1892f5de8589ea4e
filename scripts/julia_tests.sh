#!/usr/bin/env bash
# The Julia binding's tests (julia/test/runtests.jl) against the release
# library. Without a Julia runtime on PATH they skip with one line (.ci/run
# installs one on Debian 12: bullseye's Julia 1.5 with bullseye's libunwind).
set -u
cd "$(dirname "$0")/.."
if ! command -v julia >/dev/null; then
  echo "julia tests skipped: no julia on PATH"
  exit 0
fi
# A Julia paired with a libunwind newer than the one it was built with (Debian
# 12's 1.6 under bullseye's Julia 1.5) dies on the first exception thrown in
# compiled code: say so instead of a bare segmentation fault.
if ! julia --startup-file=no -e 'f() = error("x"); try f() catch end' >/dev/null 2>&1; then
  echo "julia tests: this julia ($(julia --version 2>&1)) crashes on an exception; install the libunwind it was built with (.ci/run: libunwind8/bullseye)"
  exit 1
fi
export HORECON_LIB=${HORECON_LIB:-$PWD/target/release/libhorecon.so}
exec julia --startup-file=no julia/test/runtests.jl
