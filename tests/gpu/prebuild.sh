#!/usr/bin/env bash
# tests/gpu/prebuild.sh - builds the GPU run's programs here, for sm_${KILN_GPU_ARCH:-90}, without MPI (the GPU
# machine may lack Open MPI's libraries), into .gpu-prebuilt/: tests/gpu/run.sh falls back to them when its own build
# on the GPU machine fails, so that a rare, short GPU lease still gives the op, pipeline and timing verdicts. Carry
# .gpu-prebuilt with the device call, beside .gpu-debs (whose libraries the programs load there).
set -euo pipefail
cd "$(dirname "$0")/../.."
ARCH=${KILN_GPU_ARCH:-90}
B=${KILN_PREBUILD_DIR:-build-gpu-prebuilt}
export PATH="/usr/local/cuda/bin:$PATH"
tests=$(cd tests/unit && ls test_compute_cuda_*.c | sed 's/\.c$//')
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DKILN_TESTS=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
cmake --build "$B" --target kiln $tests
nvcc -O2 -arch=sm_"$ARCH" tests/gpu/gemm_peak.cu -lcublasLt -o "$B/gemm_peak"
rm -rf .gpu-prebuilt && mkdir .gpu-prebuilt
for f in kiln gemm_peak $tests; do cp "$B/$f" .gpu-prebuilt/; done
echo "$(git rev-parse --short HEAD)$(git diff --quiet || echo +changes), sm_$ARCH, $(nvcc --version | tail -1)" >.gpu-prebuilt/BUILT_FROM
echo "prebuild: $(du -sh .gpu-prebuilt | cut -f1) in .gpu-prebuilt ($(cat .gpu-prebuilt/BUILT_FROM))"
