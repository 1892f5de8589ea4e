#!/bin/bash
# CPU-only check of kernels/fft_ops.cu and kernels/nufft_toeplitz.cu (no GPU
# needed; the kernels' NUFFT replaced by direct sums): compiles the kernels as
# host C++ (serial grid-stride loops, shim.h) for MODE 0 (float32 grids) and
# MODE 2 (float64), and runs emu.py: the orchestration of
# src/backend/cuda/{toeplitz,cartesian}.rs transcribed to Python with numpy
# FFTs in cuFFT's conventions, against dense float64 E^H W E, E and E^H on
# random problems (2D/3D, odd/even, kernel grids longer than 2n, coil batches
# with padding, time segments). Needs g++ and python3 with numpy.
# Usage: bash scripts/gpu/fft_ops_host/run.sh [seed]
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for m in 0 2; do
  { echo '#include "shim.h"'; cat "$ROOT/kernels/complex.cu" "$ROOT/kernels/fft_ops.cu" "$ROOT/kernels/nufft_toeplitz.cu"; } > "$W/k$m.cpp"
  g++ -O1 -shared -fPIC -DMODE=$m -DDOUBLE=1 -Wall -I"$HERE" -o "$W/libk$m.so" "$W/k$m.cpp"
done
cd "$W" && python3 "$HERE/emu.py" "${1:-1}"
