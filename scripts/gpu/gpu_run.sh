#!/bin/bash
# The one script sent to the GPU machine (run from the repository root there,
# with .devcarry/cuda/ holding what scripts/gpu/stage.sh staged): the CUDA tests,
# compute-sanitizer memcheck, the benchmark, the two peers, ptxas -v and SASS.
# Logs go to $OUT (at most 8 files come back).
set -u
D=.devcarry/cuda
O=${OUT:-/tmp/horecon-gpu-out}
mkdir -p "$O" /tmp/ptx
STAGES=${1:-tests,memcheck,bench,peers,sass}
# also: fastpath (bench_fast_path), fftops (cuFFT Toeplitz/Cartesian tests + memcheck), fftperf (bench_toeplitz, bench_kim), ncu (FFMA kernel), ncutcA / ncutcF (tensor-core kernel), demo, python
if [[ $STAGES == *python* ]]; then
  # the Python binding's tests on the GPU machine (AUTO = CUDA there)
  { HORECON_LIB=$PWD/$D/libhorecon.so timeout 200 python3 -m pytest -q -p no:cacheprovider python/tests; echo "python tests rc=$?"; } > "$O/python.log" 2>&1
fi
cd "$D" || exit 1
chmod +x ./*_tests bench_cuda demo bench_toeplitz bench_kim 2>/dev/null
# BENCH_CASES (environment): the benchmark's arguments (default: all cases)
{
  date -u
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total,driver_version --format=csv
  nvcc --version | tail -2
} > "$O/info.txt" 2>&1
export HORECON_CUDA_DUMP_PTX=/tmp/ptx
if [[ $STAGES == *tests* ]]; then
  { timeout 300 ./cuda_tests --test-threads=8 --nocapture; echo "cuda tests rc=$?";
    timeout 200 ./operators_tests --nocapture; echo "operators tests (AUTO = CUDA here) rc=$?";
    timeout 200 ./cg_tests --nocapture; echo "cg tests (AUTO = CUDA here) rc=$?";
    timeout 200 ./regularizers_tests --nocapture; echo "regularizers tests (AUTO = CUDA here) rc=$?"; } > "$O/tests.log" 2>&1
fi
if [[ $STAGES == *fftops* ]]; then
  # issue 5 §2/§3 on CUDA: cuFFT Toeplitz and Cartesian operators, then the CPU suites of
  # both modes with AUTO = CUDA (they compare the GPU against the float64 sums too)
  { ls -l /usr/lib/x86_64-linux-gnu/libcufft* /usr/local/cuda/lib64/libcufft* 2>&1 | head -5;
    timeout 300 ./cuda_fft_tests --test-threads=4 --nocapture; echo "cuda_fft tests rc=$?";
    HORECON_TEST_SEED=4242 timeout 300 compute-sanitizer --tool memcheck --leak-check full ./cuda_fft_tests \
      --test-threads=1 cuda_fft_chunked_coils_equal_unchunked cuda_toeplitz_normal_matches_dense_cpu_and_exact \
      cuda_fft_regularized_cg_matches_cpu;
    echo "cuda_fft memcheck rc=$?";
    timeout 300 ./toeplitz_tests --nocapture; echo "toeplitz tests rc=$?";
    timeout 300 ./cartesian_tests --nocapture; echo "cartesian tests rc=$?"; } > "$O/fft_tests.log" 2>&1
fi
if [[ $STAGES == *fftperf* ]]; then
  # Toeplitz: 256^2, 8 coils, spiral, 50 CG iterations (target <= 0.3 s on the GPU);
  # Kim et al.: 256x160x80, 8 coils, 5 x 15 Laplace CG (target <= 1.5 s)
  { [ -x ./bench_toeplitz ] && HORECON_BENCH_BACKEND=cuda timeout 240 ./bench_toeplitz 256 8 50; echo "bench_toeplitz rc=$?";
    # (Laplace on CUDA: the CUDA Cartesian operator with the CUDA regularizers, kernels/fd.cu)
    [ -x ./bench_kim ] && timeout 240 ./bench_kim --backend cuda; echo "bench_kim rc=$?"; } > "$O/fft_bench.log" 2>&1
fi
if [[ $STAGES == *fastpath* ]]; then
  # The fast path (issue 17) at 1e-3 against the exact path in the same run: ho3d-96 E/EH/EHE
  # (targets >= 20x, >= 25x), ho3d-1mm 20 CG iterations with set-up (<= 20 s; exact estimated
  # from 1/16 of the samples), bieri-512 50 CG iterations fast vs exact (>= 5x).
  { [ -x ./bench_fast_path ] && HORECON_BENCH_BACKEND=cuda HORECON_BENCH_EXACT=full timeout 300 ./bench_fast_path ho3d-96;
    echo "fast path ho3d-96 rc=$?";
    HORECON_BENCH_BACKEND=cuda HORECON_BENCH_CG=20 timeout 300 ./bench_fast_path ho3d-1mm; echo "fast path ho3d-1mm rc=$?";
    HORECON_BENCH_BACKEND=cuda HORECON_BENCH_EXACT=full HORECON_BENCH_CG=50 timeout 300 ./bench_fast_path bieri-512;
    echo "fast path bieri-512 rc=$?"; } > "$O/fast_path.log" 2>&1
fi
if [[ $STAGES == *bench* ]]; then
  { timeout 300 ./bench_cuda ${BENCH_CASES:-}; echo "bench rc=$?"; } > "$O/bench.log" 2>&1
fi
if [[ $STAGES == *demo* ]]; then
  { timeout 200 ./demo; echo "demo rc=$?"; } > "$O/demo.log" 2>&1
fi
if [[ $STAGES == *peers* ]]; then
  { nvcc -O3 -arch=sm_90 -o /tmp/seed_style_eh seed_style_eh.cu && /tmp/seed_style_eh 256 && /tmp/seed_style_eh 512;
    python3 torch_eh.py 256; python3 torch_eh.py 512; } > "$O/peers.log" 2>&1
fi
if [[ $STAGES == *memcheck* ]]; then
  { HORECON_TEST_SEED=12345 timeout 240 compute-sanitizer --tool memcheck --leak-check full ./cuda_tests --test-threads=1 \
      cuda_sign_convention_single_voxel chunked_execution_equals_unchunked tensor_core_and_ffma_paths_match_float64 cg_on_gpu_matches_cg_on_cpu several_plans_and_threads_at_once cuda_adjoint_is_the_adjoint \
      fd_tv_laplace_cg_on_gpu_matches_cpu;
    echo "memcheck rc=$?"; } > "$O/memcheck.log" 2>&1
fi
if [[ ,$STAGES, == *,ncu,* ]]; then
  # launches 4 and 5 of phase_sum: the last forward and the first adjoint timing rep on bieri-512 accurate
  timeout 240 ncu --kernel-name phase_sum --launch-skip 4 --launch-count 2 --section SpeedOfLight \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy --section InstructionStats \
    --section SchedulerStats ./bench_cuda bieri-512:A > "$O/ncu.txt" 2>&1
fi
if [[ $STAGES == *sass* ]]; then
  {
    for f in /tmp/ptx/phase_sum*.ptx; do
      echo "== $f"; ptxas -arch=sm_90 -v "$f" -o /tmp/k.cubin 2>&1 | grep -E "registers|spill"
    done
  } > "$O/ptxas.txt" 2>&1
  f=$(ls /tmp/ptx/phase_sum_FE_10_NS_0_LB_8_MODE_0_SIGN_m1*.ptx 2>/dev/null | tail -1)
  if [ -n "$f" ]; then
    ptxas -arch=sm_90 "$f" -o /tmp/k.cubin && cuobjdump -sass /tmp/k.cubin > "$O/sass.txt" 2>&1
  fi
  # the tensor-core kernel of accurate mode (E^H of bieri-512)
  f=$(ls /tmp/ptx/phase_sum_tc_FE_10_NS_0_LB_8_MODE_0_SIGN_m1*.ptx 2>/dev/null | tail -1)
  if [ -n "$f" ]; then
    ptxas -arch=sm_90 "$f" -o /tmp/k.cubin && cuobjdump -sass /tmp/k.cubin > "$O/sass_tc.txt" 2>&1
  fi
fi
for mode in A F; do
  if [[ ,$STAGES, == *,ncutc$mode,* ]]; then
    # the tensor-core kernel: the last forward and the first adjoint timing rep on bieri-512
    # (A accurate, F fast)
    timeout 240 ncu --kernel-name phase_sum_tc --launch-skip 4 --launch-count 2 --section SpeedOfLight \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy --section InstructionStats \
      --section SchedulerStats ./bench_cuda bieri-512:$mode > "$O/ncu_tc_$mode.txt" 2>&1
  fi
done
ls -la "$O"
