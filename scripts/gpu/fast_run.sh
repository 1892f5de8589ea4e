#!/bin/bash
# On the GPU machine (staged by scripts/gpu/fast_stage.sh): the CUDA fast-path
# tests, compute-sanitizer memcheck on two of them, and the benchmarks
# ho3d-96, bieri-512 (50 CG iterations) and ho3d-1mm (20 CG iterations) at
# tolerance 1e-3, the exact path in the same run. Logs into $OUT.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fast_out}
mkdir -p "$OUT"
# Every step within its own limit and all within DEADLINE seconds of the start.
START=$(date +%s); DEADLINE=${DEADLINE:-455}
step() { # name timeout command...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  local left=$(( START + DEADLINE - t0 ))
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -le 5 ] && { echo "$name: skipped (no time left)" | tee -a "$OUT/summary.txt"; return; }
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"
step cuda_fast 100 ./cuda_fast_tests --test-threads=1 --nocapture
export HORECON_BENCH_BACKEND=cuda HORECON_BENCH_TOLERANCE=1e-3
step bench_ho3d96 100 env HORECON_BENCH_EXACT=full ./bench_fast_path ho3d-96
step bench_bieri512 50 env HORECON_BENCH_EXACT=full HORECON_BENCH_CG=50 ./bench_fast_path bieri-512
step memcheck_adjoint 45 compute-sanitizer --tool memcheck --error-exitcode 9 ./cuda_fast_tests the_device_pair_is_adjoint --nocapture
step memcheck_chunked 45 compute-sanitizer --tool memcheck --error-exitcode 9 ./cuda_fast_tests chunked_coils --nocapture
step fast_path 40 ./fast_path_tests --test-threads=4
step bench_ho3d1mm 150 env HORECON_BENCH_EXACT=none HORECON_BENCH_CG=20 ./bench_fast_path ho3d-1mm
tail -n 30 "$OUT"/*.log | tail -c 11000
cat "$OUT/summary.txt"
