#!/bin/bash
# Output-driven spreading check (branch spread3). Here: builds and strips the
# CUDA NUFFT tests, the suites that build type-1 NUFFTs and bench_cuda_nufft
# into DEST/bin.tar.xz (default .devcarry/spread; DEST must lie in the
# checkout the device call sends) with scripts/gpu/spread_run.sh beside it.
# There: bash DEST/spread_run.sh (logs into $OUT).
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
D=${1:-.devcarry/spread}
mkdir -p "$D"
cp scripts/gpu/spread_run.sh "$D/"
cargo build --release --example bench_cuda_nufft
cargo test --release --no-run --message-format=json --test cuda_nufft --test cuda_fft --test nufft --test toeplitz --test gridding 2>/dev/null | python3 -c '
import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]: print(m["target"]["name"], m["executable"])' | while read -r name exe; do strip -o "$D/${name}_tests" "$exe"; done
strip -o $D/bench_cuda_nufft target/release/examples/bench_cuda_nufft
git log -1 --format='commit %H %s' > $D/commit.txt
git status --short >> $D/commit.txt
(cd $D && tar -cJf bin.tar.xz ./*_tests bench_cuda_nufft && rm -f ./*_tests bench_cuda_nufft)
du -sh $D
