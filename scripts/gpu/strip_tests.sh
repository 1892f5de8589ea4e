#!/bin/bash
# Builds the integration-test executables named by the cargo arguments
# ("--test cuda --test nufft ...", or none for all) and strips each into
# DEST as <name>_tests: what the GPU machine (no Rust there) runs.
#   scripts/gpu/strip_tests.sh DEST [cargo test arguments...]
set -eu
DEST=$1
shift
mkdir -p "$DEST"
cargo test --release --no-run --message-format=json "$@" 2>/dev/null | python3 -c '
import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do strip -o "$DEST/${name}_tests" "$exe"; done
