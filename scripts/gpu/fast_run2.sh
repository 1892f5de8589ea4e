#!/bin/bash
# Second GPU run of the device-resident fast path (staged by fast_stage.sh):
# the NUFFT's type-1 spreading without global atomics (HORECON_CUDA_NUFFT_OWNED=1)
# checked by the CUDA NUFFT and fast-path tests, then ho3d-96 in four
# configurations (exact in the same run), bieri-512 (50 CG) and ho3d-1mm (20 CG).
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fast_out}
mkdir -p "$OUT"
START=$(date +%s); DEADLINE=${DEADLINE:-455}
step() { # name timeout command...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  local left=$(( START + DEADLINE - t0 ))
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -le 5 ] && { echo "$name: skipped (no time left)" >> "$OUT/summary.log"; return; }
  timeout "$limit" "$@" >> "$OUT/$name.log" 2>&1
  echo "$name: rc $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.log"
}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } >> "$OUT/summary.log" 2>&1
step tests 80 env HORECON_CUDA_NUFFT_OWNED=1 ./cuda_nufft_tests --test-threads=1
step tests 60 env HORECON_CUDA_NUFFT_OWNED=1 ./cuda_fast_tests --test-threads=1 --nocapture
export HORECON_BENCH_BACKEND=cuda HORECON_BENCH_TOLERANCE=1e-3 HORECON_BENCH_VERBOSITY=2 HORECON_CUDA_FAST_VERBOSE=1
step ho3d96 60 env HORECON_BENCH_EXACT=full ./bench_fast_path ho3d-96
step ho3d96 40 env HORECON_BENCH_EXACT=none HORECON_CUDA_NUFFT_OWNED=1 ./bench_fast_path ho3d-96
step ho3d96 40 env HORECON_BENCH_EXACT=none HORECON_CUDA_FAST_DOUBLE=1 ./bench_fast_path ho3d-96
step ho3d96 40 env HORECON_BENCH_EXACT=none HORECON_CUDA_FAST_DOUBLE=1 HORECON_CUDA_NUFFT_OWNED=1 ./bench_fast_path ho3d-96
step bieri 40 env HORECON_BENCH_EXACT=full HORECON_BENCH_CG=50 HORECON_CUDA_NUFFT_OWNED=1 ./bench_fast_path bieri-512
step ho3d1mm 200 env HORECON_BENCH_EXACT=none HORECON_BENCH_CG=20 HORECON_BENCH_REPS=1 HORECON_BENCH_CHECK=4 HORECON_CUDA_NUFFT_OWNED=1 ./bench_fast_path ho3d-1mm
grep -h "test result\|FAILED\|panicked" "$OUT/tests.log" | head -20
grep -h "ho3d\|bieri\|horecon:" "$OUT"/ho3d96.log "$OUT"/bieri.log "$OUT"/ho3d1mm.log | cut -c1-600
cat "$OUT/summary.log"
