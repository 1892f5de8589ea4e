#!/bin/bash
# Builds here and stages what the NUFFT run (issue 14) needs on the GPU machine
# into $1 (default /work/main/.devcarry/nufft-cuda): the stripped CUDA test
# executables (cuda_nufft, cuda_fft, toeplitz), the two benchmarks, the run
# script, and the cuFINUFFT source bundle (../shared/bench/peers/cufinufft,
# made from the three fetched repositories given as $2 $3 $4 when the bundle
# is not there yet).
set -eu
DEST=${1:-/work/main/.devcarry/nufft-cuda}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
cargo build --release --example bench_cuda_nufft --example bench_toeplitz
mkdir -p "$DEST"
cargo test --release --no-run --message-format=json --test cuda_nufft --test cuda_fft --test toeplitz 2>/dev/null | python3 -c '
import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do strip -o "$DEST/${name}_tests" "$exe"; done
for b in bench_cuda_nufft bench_toeplitz; do strip -o "$DEST/$b" "target/release/examples/$b"; done
cp scripts/gpu/nufft_run.sh "$DEST/"
if [ ! -d "$DEST/cufinufft" ]; then
  bash "$ROOT/../shared/bench/peers/cufinufft/make_bundle.sh" "$2" "$3" "$4" "$DEST/cufinufft"
fi
du -sh "$DEST"; ls -la "$DEST"
