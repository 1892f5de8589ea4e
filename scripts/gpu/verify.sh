#!/bin/bash
# One device call that verifies this checkout on one GPU (every CUDA path;
# the figures of BENCHMARKS.md):
#
#   here:   scripts/gpu/verify.sh stage [FINUFFT POET CPM]
#           builds and stages into .devcarry/verify (git-ignored): the stripped
#           test and bench executables and libhorecon.so as one xz archive (the
#           carry's limit is 64 MiB), this script, the Dask wheels for the GPU
#           machine's Python (it has no network), shared/bench/cases.py, and the
#           cuFINUFFT source bundle (made from the three fetched git dirs when
#           absent: ../shared/bench/peers/cufinufft/README.md)
#   there:  bash .devcarry/verify/verify.sh run [STAGES]   (repository root; logs into $OUT)
#
# STAGES (default tests,nufft,fastpath,toeplitz,calib,batch):
#   tests     the CUDA suites in $TESTS (default: all staged; AUTO = CUDA there;
#             multi-GPU with HORECON_CUDA_TEST_PARTS=3 parts on one GPU)
#   memcheck  compute-sanitizer on NUFFT, Toeplitz, multi-part and fast-path tests
#   nufft     horecon's CUDA NUFFT and cuFINUFFT's cuperftest on issue 14's cases, same call
#   fastpath  bench_fast_path at 1e-3 with the exact path in the same run: ho3d-96, bieri-512
#             (50 CG), ho3d-1mm (20 CG, set-up included)
#   toeplitz  256², 8 coils, off-resonance, set-up + 50 CG, two processes (NVRTC disk cache)
#   calib     delay and ESPIRiT (bench_calib --backend cuda)
#   calibcg   only the calibration test suites
#   batch     horecon.batch: 64 bieri-256 slices, one Dask worker, against a plain loop (best of 2),
#             and the runner's own cost (--no-solve: inputs made, zero images written, no plan)
# At most 8 files come back from a call: keep the stages of one call to that.
set -u
MODE=${1:-run}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$MODE" = stage ]; then
  set -e
  DEST=$ROOT/.devcarry/verify
  cd "$ROOT"
  mkdir -p "$DEST"
  benches="bench_cuda_nufft bench_toeplitz bench_calib bench_fast_path"
  for b in $benches; do cargo build --release --example "$b"; done
  tests="cuda cuda_fft cuda_nufft cuda_fast fast_path toeplitz nufft gridding calib_cg calib coefficients multi_gpu operators cg"
  bash scripts/gpu/strip_tests.sh "$DEST" $(printf -- '--test %s ' $tests)
  for b in $benches; do strip -o "$DEST/$b" "target/release/examples/$b"; done
  strip -o "$DEST/libhorecon.so" target/release/libhorecon.so
  (cd "$DEST" && tar -cJf bin.tar.xz ./*_tests bench_* libhorecon.so && rm -f ./*_tests bench_* libhorecon.so)
  cp scripts/gpu/verify.sh "$DEST/"
  mkdir -p "$DEST/shared/bench" && cp "$ROOT/../shared/bench/cases.py" "$DEST/shared/bench/"
  if [ ! -d "$DEST/wheels" ]; then
    python3 -m pip download -q --only-binary=:all: --python-version "${PYVER:-3.12}" \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
      -d "$DEST/wheels" dask distributed
  fi
  if [ ! -d "$DEST/cufinufft" ]; then
    bash "$ROOT/../shared/bench/peers/cufinufft/make_bundle.sh" "${2:?stage FINUFFT POET CPM: the fetched git dirs}" "${3:?}" "${4:?}" "$DEST/cufinufft"
  fi
  du -sh "$DEST"
  exit 0
fi
STAGES=${2:-tests,nufft,fastpath,toeplitz,calib,batch}
D=$ROOT/.devcarry/verify
O=${OUT:-/tmp/horecon-verify}
mkdir -p "$O"
export HORECON_CACHE_DIR=/tmp/horecon-cache
cd "$D" || exit 1
tar -xJf bin.tar.xz
chmod +x ./*_tests bench_* 2>/dev/null
{ date -u; git -C "$ROOT" log --oneline -1 2>/dev/null
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total,driver_version --format=csv; } > "$O/info.txt" 2>&1
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
if [[ ,$STAGES, == *,tests,* ]]; then
  TESTS=${TESTS:-cuda cuda_fft cuda_nufft cuda_fast fast_path nufft toeplitz gridding calib_cg calib coefficients multi_gpu operators cg}
  {
    for s in $TESTS; do
      case $s in
        nufft) t nufft 60 ./nufft_tests cpu_and_cuda_agree --nocapture ;;
        multi_gpu) HORECON_CUDA_TEST_PARTS=3 t multi_gpu 90 ./multi_gpu_tests --nocapture ;;
        cuda_nufft|cuda_fast|calib_cg|gridding) t "$s" 170 "./${s}_tests" --test-threads=2 --nocapture ;;
        *) t "$s" 150 "./${s}_tests" --test-threads=4 ;;
      esac
    done
  } > "$O/tests.log" 2>&1
  grep -E '^=== .*rc=|test result|FAILED|panicked' "$O/tests.log" > "$O/tests_summary.txt"
fi
if [[ $STAGES == *memcheck* ]]; then
  {
    HORECON_TEST_SEED=7 t memcheck_nufft 120 compute-sanitizer --tool memcheck --leak-check full ./cuda_nufft_tests \
      --test-threads=1 batched_equals_one_by_one_and_chunked output_driven_spreading_dense_and_clustered
    HORECON_TEST_SEED=7 t memcheck_toeplitz 60 compute-sanitizer --tool memcheck --leak-check full ./cuda_fft_tests \
      --test-threads=1 cuda_toeplitz_normal_matches_dense_cpu_and_exact
    HORECON_TEST_SEED=7 HORECON_CUDA_TEST_PARTS=2 t memcheck_parts 60 compute-sanitizer --tool memcheck --leak-check full \
      ./multi_gpu_tests --test-threads=1 parts_on_one_gpu_match_float64_and_one_part
    HORECON_TEST_SEED=7 t memcheck_fast 60 compute-sanitizer --tool memcheck --leak-check full ./cuda_fast_tests \
      --test-threads=1 the_device_pair_is_adjoint
  } > "$O/memcheck.log" 2>&1
fi
if [[ $STAGES == *calibcg* ]]; then
  { t calib_cg 60 ./calib_cg_tests --nocapture; t calib 60 ./calib_tests; } > "$O/calib_cg.log" 2>&1
fi
if [[ $STAGES == *nufft* ]]; then
  { t bench_cuda_nufft 150 ./bench_cuda_nufft; } > "$O/nufft.log" 2>&1
  wait $BUILD
  P=/tmp/cfb/cuperftest
  {
    tail -3 /tmp/cfb_build.log
    run() { # name args...
      local name=$1; shift
      for ty in 1 2; do for meth in 1 2 3; do
        r=$(timeout 40 $P --prec f --type $ty "$@" --method $meth --n_runs 5 2>&1 | grep "^execute," | cut -d, -f4)
        echo "cuFINUFFT $name type $ty method $meth execute_mean_ms ${r:-failed}"
      done; done
    }
    run a3d --N1 256 --N2 256 --N3 256 --M 10000000 --ntransf 1 --tol 1e-6
    run b96 --N1 96 --N2 96 --N3 96 --M 221184 --ntransf 16 --tol 1e-3
    run b200 --N1 200 --N2 200 --N3 144 --M 1440000 --ntransf 16 --tol 1e-3
    run b512 --N1 512 --N2 512 --N3 1 --M 262144 --ntransf 8 --tol 1e-4
  } >> "$O/nufft.log" 2>&1
fi
if [[ $STAGES == *fastpath* ]]; then
  { export HORECON_BENCH_BACKEND=cuda HORECON_BENCH_TOLERANCE=1e-3
    HORECON_BENCH_EXACT=full t "fast path ho3d-96" 120 ./bench_fast_path ho3d-96
    HORECON_BENCH_EXACT=full HORECON_BENCH_CG=50 t "fast path bieri-512" 60 ./bench_fast_path bieri-512
    HORECON_BENCH_VERBOSITY=2 HORECON_CUDA_FAST_VERBOSE=1 HORECON_BENCH_EXACT=none HORECON_BENCH_CG=20 \
      t "fast path ho3d-1mm" 150 ./bench_fast_path ho3d-1mm
  } > "$O/fast_path.log" 2>&1
fi
if [[ $STAGES == *toeplitz* ]]; then
  { for i in 1 2; do
      HORECON_BENCH_BACKEND=cuda HORECON_BENCH_EXACT=estimate HORECON_BENCH_OFFRES_HZ=30 HORECON_BENCH_DWELL=1e-6 \
        t "toeplitz process $i" 60 ./bench_toeplitz 256 8 50
    done
  } > "$O/toeplitz.log" 2>&1
fi
if [[ ,$STAGES, == *,calib,* ]]; then
  { t "calib delay cuda" 60 ./bench_calib delay --backend cuda
    t "calib espirit cuda" 60 ./bench_calib espirit --backend cuda
  } >> "$O/toeplitz.log" 2>&1
fi
if [[ $STAGES == *batch* ]]; then
  {
    python3 -c "import distributed" 2>/dev/null ||
      python3 -m pip install -q --no-index --find-links "$D/wheels" dask distributed 2>&1 | tail -3
    cd "$ROOT"
    HORECON_LIB=$D/libhorecon.so HORECON_SHARED=$D/shared t "batch: 64 bieri-256 slices, 1 Dask worker" 300 \
      python3 scripts/bench_batch.py --case bieri-256 --slices 64 --iterations 50 --workers 1 --repeat 2 --timing
    HORECON_LIB=$D/libhorecon.so HORECON_SHARED=$D/shared t "batch: the runner's own cost (no plan)" 120 \
      python3 scripts/bench_batch.py --case bieri-256 --slices 64 --workers 1 --no-solve --repeat 3
  } > "$O/batch.log" 2>&1
fi
ls -la "$O"
