#!/bin/bash
# Builds here and stages what the GPU machine needs into $1 (default
# /work/main/.devcarry/cuda): stripped test and bench executables, the script,
# and the peers from shared/bench/peers.
set -eu
DEST=${1:-/work/main/.devcarry/cuda}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
cargo build --release --example bench_cuda --example demo
# the FFT benchmarks of issue 5 (Toeplitz §2, Kim et al. §3) when present on this branch
FFT_BENCHES=""
for b in bench_toeplitz bench_kim bench_fast_path; do
  if [ -f "examples/$b.rs" ]; then FFT_BENCHES="$FFT_BENCHES $b"; cargo build --release --example "$b"; fi
done
mkdir -p "$DEST"
bash scripts/gpu/strip_tests.sh "$DEST"
strip -o "$DEST/bench_cuda" target/release/examples/bench_cuda
strip -o "$DEST/demo" target/release/examples/demo
for b in $FFT_BENCHES; do strip -o "$DEST/$b" "target/release/examples/$b"; done
strip -o "$DEST/libhorecon.so" target/release/libhorecon.so
cp scripts/gpu/gpu_run.sh "$DEST/"
cp "$ROOT/../shared/bench/peers/seed_style_eh.cu" "$ROOT/../shared/bench/peers/torch_eh.py" "$DEST/"
ls -la "$DEST"
