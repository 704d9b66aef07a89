#!/usr/bin/env bash
# tests/gpu/profile.sh - on the GPU machine, after tests/gpu/run.sh built kiln into $KILN_GPU_BUILD: the cuBLASLt
# probe (tests/gpu/lt_probe.cu) and Nsight Compute over the first attention launch of the ops test's timings
# (4608 tokens x 24 heads x 128, the DiT's bf16 q|k|v views) for each attention kernel: where the time goes
# (speed of light, occupancy, warp stalls, the hottest source lines). Output: $OUT/profile.log.
#     OUT=/some/dir tests/gpu/profile.sh [simple tc ...]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${KILN_GPU_BUILD:-/tmp/kiln-gpu-build}
OUT=${OUT:-$ROOT/gpu-out}
ARCH=${KILN_GPU_ARCH:-90}
export PATH="$PATH:/usr/local/cuda/bin"
LOG=$OUT/profile.log
mkdir -p "$OUT"
ARGS=("$@")
{
  echo "== lt_probe =="
  nvcc -O2 -arch=sm_$ARCH "$ROOT/tests/gpu/lt_probe.cu" -lcublasLt -o "$BUILD/lt_probe" && timeout 60 "$BUILD/lt_probe"
} >>"$LOG" 2>&1
# the attention A/B, one process each: the simple kernel; the tensor-core one with and without cp.async, with 64-
# and 128-query blocks, with Q in shared memory (3 blocks per SM at 64); cuDNN's SDPA
{
  echo "== attention timings (test_timing: 4608 tokens x 24 heads x 128, bf16 q|k|v views) =="
  for v in "simple 1 64 0" "tc 1 64 0" "tc 0 64 0" "tc 1 128 0" "tc 0 128 0" "tc 1 64 1" "tc 1 128 1" "cudnn 1 64 0"; do
    set -- $v
    printf 'KILN_CUDA_ATTENTION=%s KILN_CUDA_TC_ASYNC=%s KILN_CUDA_TC_BQ=%s KILN_CUDA_TC_QSMEM=%s: ' "$1" "$2" "$3" "$4"
    KILN_REQUIRE_GPU=1 KILN_OPS_TIME=1 KILN_OPS_ONLY=test_timing KILN_CUDA_ATTENTION=$1 KILN_CUDA_TC_ASYNC=$2 KILN_CUDA_TC_BQ=$3 KILN_CUDA_TC_QSMEM=$4 \
      KILN_SOURCE_DIR="$ROOT" timeout 60 "$BUILD/test_compute_cuda_ops" 2>&1 | grep -m1 'time attention' || echo "no timing"
  done
  for w in tc gemm; do
    printf 'KILN_CUDA_WIDE_ATTENTION=%s: ' "$w"
    KILN_REQUIRE_GPU=1 KILN_OPS_TIME=1 KILN_OPS_ONLY=test_timing KILN_CUDA_WIDE_ATTENTION=$w KILN_SOURCE_DIR="$ROOT" \
      timeout 60 "$BUILD/test_compute_cuda_ops" 2>&1 | grep -m1 'time attention 16384' || echo "no timing"
  done
} >>"$LOG" 2>&1
set -- "${ARGS[@]}"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -z "$NCU" ]; then echo "profile: no ncu" | tee -a "$LOG"; exit 0; fi
for att in "${@:-simple tc}"; do
  for a in $att; do
    echo "== ncu: KILN_CUDA_ATTENTION=$a, the first attention launch of test_timing ==" >>"$LOG"
    KILN_REQUIRE_GPU=1 KILN_OPS_TIME=1 KILN_OPS_ONLY=test_timing KILN_CUDA_ATTENTION=$a KILN_SOURCE_DIR="$ROOT" \
      timeout 120 "$NCU" --clock-control none -k regex:k_attention -c 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section SourceCounters "$BUILD/test_compute_cuda_ops" >>"$LOG" 2>&1
    echo "(rc $?)" >>"$LOG"
  done
done
echo "profile: $(wc -l <"$LOG") lines in $LOG"
