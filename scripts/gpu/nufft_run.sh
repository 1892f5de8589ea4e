#!/bin/bash
# The NUFFT run on the GPU machine (issue 14), from the repository root there
# with .devcarry/nufft-cuda/ staged by scripts/gpu/nufft_stage.sh: cuFINUFFT is
# built in the background while the CUDA tests run (cuda_nufft, with
# compute-sanitizer on two of them; cuda_fft and toeplitz, whose Toeplitz
# kernels now come from the NUFFT), then horecon's NUFFT benchmark and
# cuFINUFFT's cuperftest on the same cases in the same call, then the
# Toeplitz benchmark with off-resonance, twice (the second process loads the
# NVRTC cache). STAGES (default all): tests,memcheck,bench,peer,toeplitz.
# Logs go to $OUT.
set -u
D=$PWD/.devcarry/nufft-cuda
O=${OUT:-/tmp/horecon-nufft-out}
STAGES=${1:-tests,memcheck,bench,peer,toeplitz}
mkdir -p "$O"
export HORECON_CACHE_DIR=/tmp/horecon-cache
cd "$D" || exit 1
chmod +x ./*_tests bench_cuda_nufft bench_toeplitz 2>/dev/null
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total,driver_version --format=csv; nvcc --version | tail -2; } > "$O/info.txt" 2>&1
if [[ $STAGES == *peer* ]]; then
  ( bash cufinufft/build.sh "$D/cufinufft" /tmp/cfb > /tmp/cfb_build.log 2>&1; echo "build rc=$?" >> /tmp/cfb_build.log ) &
  BUILD=$!
fi
if [[ $STAGES == *tests* ]]; then
  { timeout 240 ./cuda_nufft_tests --test-threads=1 --nocapture; echo "cuda_nufft tests rc=$?";
    timeout 150 ./cuda_fft_tests --test-threads=2; echo "cuda_fft tests rc=$?";
    timeout 100 ./toeplitz_tests; echo "toeplitz tests (AUTO = CUDA) rc=$?"; } > "$O/tests.log" 2>&1
fi
if [[ $STAGES == *bench* ]]; then
  # BENCH_CONFIGS: space-separated runs of the benchmark, each a comma-separated list of
  # environment settings ("-" = defaults)
  { for cfg in ${BENCH_CONFIGS:--}; do
      echo "== ${cfg}"
      c=${cfg/#-/X=0}; env ${c//,/ } timeout 200 ./bench_cuda_nufft ${BENCH_CASES:-}; echo "bench rc=$?"
    done; } > "$O/bench.log" 2>&1
fi
if [[ $STAGES == *peer* ]]; then
  wait $BUILD
  P=/tmp/cfb/cuperftest
  {
    cat /tmp/cfb_build.log | tail -3
    run() { # name args...
      local name=$1; shift
      for t in 1 2; do for meth in 1 2 3; do
        r=$(timeout 60 $P --prec f --type $t "$@" --method $meth --n_runs 5 2>&1 | grep "^execute," | cut -d, -f4)
        echo "$name type $t method $meth execute_mean_ms ${r:-failed}"
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
      echo "== process $i"
      HORECON_BENCH_BACKEND=cuda HORECON_BENCH_EXACT=estimate HORECON_BENCH_OFFRES_HZ=30 HORECON_BENCH_DWELL=1e-6 timeout 120 ./bench_toeplitz 256 8 50; echo "rc=$?"
    done
    HORECON_BENCH_BACKEND=cuda HORECON_BENCH_EXACT=estimate timeout 120 ./bench_toeplitz 256 8 50; echo "no off-resonance rc=$?"; } > "$O/toeplitz.log" 2>&1
fi
if [[ $STAGES == *memcheck* ]]; then
  { HORECON_TEST_SEED=7 timeout 100 compute-sanitizer --tool memcheck --leak-check full ./cuda_nufft_tests --test-threads=1 \
      batched_equals_one_by_one_and_chunked device_interface_equals_host_interface type_2_is_the_adjoint_of_type_1;
    echo "memcheck rc=$?"; } > "$O/memcheck.log" 2>&1
fi
ls -la "$O"
