#!/bin/bash
# Device side of scripts/gpu/spread_stage.sh (branch spread3): every CUDA NUFFT test with the new defaults
# (output-driven type 1, paired flush), the output-driven tests with the
# single-cell flush, the suites that build type-1 NUFFTs (Toeplitz, gridding,
# CPU ≡ CUDA), compute-sanitizer on the dense test, then the bench (auto;
# single-cell flush; batch 64). Logs into $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/spread-out}
mkdir -p "$O"
export HORECON_CACHE_DIR=/tmp/horecon-cache
cd "$D" || exit 1
tar -xJf bin.tar.xz
chmod +x ./*_tests bench_cuda_nufft
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total,driver_version --format=csv; cat commit.txt; } > "$O/info.txt" 2>&1
t() { local name=$1 limit=$2; shift 2; local s=$(date +%s); echo "=== $name"; timeout "$limit" "$@"; echo "=== $name rc=$? ($(( $(date +%s) - s )) s)"; }
( HORECON_TEST_SEED=7 t memcheck 220 compute-sanitizer --tool memcheck --leak-check full ./cuda_nufft_tests \
    --test-threads=1 --nocapture output_driven_spreading_dense_and_clustered > "$O/memcheck.log" 2>&1 ) &
MC=$!
t cuda_nufft 170 ./cuda_nufft_tests --test-threads=1 --nocapture > "$O/tests.log" 2>&1
{
  HORECON_CUDA_NUFFT_PAIRS=0 t pairs0 70 ./cuda_nufft_tests --test-threads=1 --nocapture output_driven
} > "$O/tests_pairs0.log" 2>&1 &
P0=$!
{
  t cuda_fft 90 ./cuda_fft_tests --test-threads=2
  t toeplitz 60 ./toeplitz_tests
  t nufft 60 ./nufft_tests cpu_and_cuda_agree --nocapture
  t gridding 60 ./gridding_tests --nocapture
} > "$O/tests_other.log" 2>&1
wait $P0
wait $MC
# At most 8 files come back: the single-cell-flush tests join tests_other.log.
cat "$O/tests_pairs0.log" >> "$O/tests_other.log" && rm -f "$O/tests_pairs0.log"
{ grep -E '^=== .*rc=|test result|FAILED|panicked' "$O"/tests*.log
  grep -E '^=== .*rc=|ERROR SUMMARY|LEAK SUMMARY|test result|Invalid' "$O/memcheck.log" | head -40; } > "$O/summary.txt"
export HORECON_BENCH_REPS=7
t bench_auto 60 ./bench_cuda_nufft > "$O/bench_auto.log" 2>&1
HORECON_CUDA_NUFFT_PAIRS=0 t bench_pairs0 50 ./bench_cuda_nufft > "$O/bench_pairs0.log" 2>&1
HORECON_CUDA_NUFFT_BATCH=64 t bench_batch64 25 ./bench_cuda_nufft b96 b200 b512 > "$O/bench_batch64.log" 2>&1
