#!/bin/bash
# Builds here and stages what the GPU run of the device-resident fast path
# (issue 17) needs into .devcarry/fast (git-ignored; the device tool carries
# only the session's checkout: copy the folder into /work/main/.devcarry/fast): the stripped cuda_fast
# and fast_path test executables, bench_fast_path and scripts/gpu/fast_run.sh.
# Then: run with carry [".devcarry/fast"] and command `bash .devcarry/fast/run.sh`.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST="$ROOT/.devcarry/fast"
cd "$ROOT"
cargo build --release --example bench_fast_path
mkdir -p "$DEST"
cargo test --release --no-run --test cuda_fast --test fast_path --test cuda_nufft --message-format=json 2>/dev/null | python3 -c '
import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do strip -o "$DEST/${name}_tests" "$exe"; done
strip -o "$DEST/bench_fast_path" target/release/examples/bench_fast_path
cp scripts/gpu/fast_run.sh "$DEST/run.sh"
ls -la "$DEST"
du -sh "$DEST"
