#!/bin/bash
# One device call that verifies this checkout on one GPU (the session's
# check of every CUDA path, figures for BENCHMARKS.md):
#
#   here:   scripts/gpu/verify.sh stage [FINUFFT POET CPM]   builds, strips into .devcarry/verify (git-ignored):
#                                            the CUDA-relevant test executables, the benchmarks,
#                                            this script and the cuFINUFFT source bundle
#   there:  bash .devcarry/verify/verify.sh run [STAGES]   (repository root; logs into $OUT)
#
# STAGES (default all): tests (every CUDA suite; AUTO = CUDA there; multi-GPU parts on one GPU),
# memcheck (compute-sanitizer on NUFFT, Toeplitz and multi-part tests), nufft (horecon's CUDA
# NUFFT and cuFINUFFT's cuperftest on the issue's cases, same call), toeplitz (256², 8 coils,
# off-resonance, set-up + 50 CG, two processes: the second loads the NVRTC disk cache), calib
# (delay and ESPIRiT on CUDA), calibcg (only the calibration test suites).
set -u
MODE=${1:-run}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$MODE" = stage ]; then
  set -e
  DEST=$ROOT/.devcarry/verify
  cd "$ROOT"
  mkdir -p "$DEST"
  benches="bench_cuda_nufft bench_toeplitz bench_calib"
  for b in $benches; do cargo build --release --example "$b"; done
  tests="cuda cuda_fft cuda_nufft toeplitz nufft gridding calib_cg calib multi_gpu operators cg"
  bash scripts/gpu/strip_tests.sh "$DEST" $(printf -- '--test %s ' $tests)
  for b in $benches; do strip -o "$DEST/$b" "target/release/examples/$b"; done
  # the carry's limit is 64 MiB: the executables travel as one xz archive
  (cd "$DEST" && tar -cJf bin.tar.xz ./*_tests bench_* && rm -f ./*_tests bench_*)
  cp scripts/gpu/verify.sh "$DEST/"
  # cuFINUFFT's sources (../shared/bench/peers/cufinufft/README.md): the bundle made from the three
  # fetched repositories given after "stage" (finufft, poet, CPM) when it is not there yet
  if [ ! -d "$DEST/cufinufft" ]; then
    bash "$ROOT/../shared/bench/peers/cufinufft/make_bundle.sh" "${2:?stage FINUFFT POET CPM: the fetched git dirs}" "${3:?}" "${4:?}" "$DEST/cufinufft"
  fi
  du -sh "$DEST"
  exit 0
fi
STAGES=${2:-tests,memcheck,nufft,toeplitz,calib}
D=$ROOT/.devcarry/verify
O=${OUT:-/tmp/horecon-verify}
mkdir -p "$O"
export HORECON_CACHE_DIR=/tmp/horecon-cache
cd "$D" || exit 1
tar -xJf bin.tar.xz
chmod +x ./*_tests bench_* 2>/dev/null
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total,driver_version --format=csv; } > "$O/info.txt" 2>&1
if [[ $STAGES == *nufft* ]]; then
  ( bash cufinufft/build.sh "$D/cufinufft" /tmp/cfb > /tmp/cfb_build.log 2>&1; echo "build rc=$?" >> /tmp/cfb_build.log ) &
  BUILD=$!
fi
t() { # name timeout command...: runs, prints rc and seconds
  local name=$1 limit=$2; shift 2
  local s=$(date +%s)
  echo "=== $name"
  timeout "$limit" "$@"
  echo "=== $name rc=$? ($(( $(date +%s) - s )) s)"
}
if [[ $STAGES == *tests* ]]; then
  {
    t cuda 150 ./cuda_tests --test-threads=4
    t cuda_fft 90 ./cuda_fft_tests --test-threads=2
    t cuda_nufft 90 ./cuda_nufft_tests --test-threads=2 --nocapture
    t nufft 60 ./nufft_tests cpu_and_cuda_agree --nocapture
    t toeplitz 60 ./toeplitz_tests
    t gridding 60 ./gridding_tests --nocapture
    t calib_cg 60 ./calib_cg_tests --nocapture
    t calib 60 ./calib_tests
    HORECON_CUDA_TEST_PARTS=3 t multi_gpu 90 ./multi_gpu_tests --nocapture
    t operators 60 ./operators_tests
    t cg 60 ./cg_tests
  } > "$O/tests.log" 2>&1
  grep -E '^=== .*rc=|test result|FAILED|panicked' "$O/tests.log" > "$O/tests_summary.txt"
fi
if [[ $STAGES == *calibcg* ]]; then
  { t calib_cg 60 ./calib_cg_tests --nocapture; t calib 60 ./calib_tests; } > "$O/calib_cg.log" 2>&1
fi
if [[ $STAGES == *memcheck* ]]; then
  {
    HORECON_TEST_SEED=7 t memcheck_nufft 80 compute-sanitizer --tool memcheck --leak-check full ./cuda_nufft_tests \
      --test-threads=1 batched_equals_one_by_one_and_chunked type_2_is_the_adjoint_of_type_1
    HORECON_TEST_SEED=7 t memcheck_toeplitz 60 compute-sanitizer --tool memcheck --leak-check full ./cuda_fft_tests \
      --test-threads=1 cuda_toeplitz_normal_matches_dense_cpu_and_exact
    HORECON_TEST_SEED=7 HORECON_CUDA_TEST_PARTS=2 t memcheck_parts 60 compute-sanitizer --tool memcheck --leak-check full \
      ./multi_gpu_tests --test-threads=1 parts_on_one_gpu_match_float64_and_one_part
  } > "$O/memcheck.log" 2>&1
  grep -E '^=== .*rc=|ERROR SUMMARY|LEAK SUMMARY|test result' "$O/memcheck.log" > "$O/memcheck_summary.txt"
fi
if [[ $STAGES == *nufft* ]]; then
  { t bench_cuda_nufft 150 ./bench_cuda_nufft; } > "$O/nufft_bench.log" 2>&1
  wait $BUILD
  P=/tmp/cfb/cuperftest
  {
    tail -3 /tmp/cfb_build.log
    run() { # name args...
      local name=$1; shift
      for ty in 1 2; do for meth in 1 2 3; do
        r=$(timeout 40 $P --prec f --type $ty "$@" --method $meth --n_runs 5 2>&1 | grep "^execute," | cut -d, -f4)
        echo "$name type $ty method $meth execute_mean_ms ${r:-failed}"
      done; done
    }
    run a3d --N1 256 --N2 256 --N3 256 --M 10000000 --ntransf 1 --tol 1e-6
    run b96 --N1 96 --N2 96 --N3 96 --M 221184 --ntransf 16 --tol 1e-3
    run b200 --N1 200 --N2 200 --N3 144 --M 1440000 --ntransf 16 --tol 1e-3
    run b512 --N1 512 --N2 512 --N3 1 --M 262144 --ntransf 8 --tol 1e-4
  } > "$O/peer.log" 2>&1
fi
if [[ $STAGES == *toeplitz* ]]; then
  { for i in 1 2; do
      HORECON_BENCH_BACKEND=cuda HORECON_BENCH_EXACT=estimate HORECON_BENCH_OFFRES_HZ=30 HORECON_BENCH_DWELL=1e-6 \
        t "toeplitz process $i" 60 ./bench_toeplitz 256 8 50
    done
    HORECON_BENCH_SETUP=1 HORECON_BENCH_OFFRES_HZ=150 HORECON_BENCH_UNDERSAMPLING=0.526 t "toeplitz set-up 64² CPU" 60 ./bench_toeplitz 64 8 1
  } > "$O/toeplitz.log" 2>&1
fi
if [[ $STAGES == *calib* ]]; then
  { t "calib delay cuda" 60 ./bench_calib delay --backend cuda
    t "calib espirit cuda" 60 ./bench_calib espirit --backend cuda
  } > "$O/calib.log" 2>&1
fi
ls -la "$O"
