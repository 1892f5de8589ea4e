#!/usr/bin/env bash
# CPU benchmark in one invocation: the numpy peer (shared/bench/peers/numpy_eh.py)
# and horecon's E and Eᴴ on the same case, then the ratio.
# Usage: scripts/bench_cpu.sh [width=128]   (needs numpy; ../shared/bench or $HORECON_SHARED/bench)
set -eu
cd "$(dirname "$0")/.."
width=${1:-128}
peers=${HORECON_SHARED:-../shared}/bench/peers
cargo build --release --example bench_cpu -q
echo "date: $(date -u +%F) commit: $(git rev-parse --short HEAD 2>/dev/null || echo none) cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) cores: $(nproc)"
peer=$(python3 "$peers/numpy_eh.py" "$width")
echo "$peer"
ours=$(./target/release/examples/bench_cpu "bieri-$width" --reps 3)
echo "$ours"
peer_rate=$(echo "$peer" | sed -n 's/.* \([0-9.]*\) Mpairs\/s/\1/p')
echo "$ours" | awk -v p="$peer_rate" '$2=="accurate" {printf "accurate %s: %.1fx numpy (%.0f vs %.1f Mpairs/s)\n", $3, $5*1000/p, $5*1000, p}'
