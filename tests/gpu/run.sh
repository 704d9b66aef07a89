#!/usr/bin/env bash
# tests/gpu/run.sh - THE script for a machine with an NVIDIA GPU (issue 23): one run, within one 10-minute device
# command (KILN_GPU_BUDGET_S, default 520 s of parts), gives the verdict and the figures. Needs the CUDA toolkit,
# a driver, CMake and Python 3; no internet. Logs go to $OUT (default ./gpu-out).
#
#     OUT=/some/dir tests/gpu/run.sh            # on the GPU machine
#     tests/gpu/run.sh --dry-run                # here, without a GPU: the script's own logic (tests/gpu/dry_run_test.sh)
#
# Every part ends as PASS, FAIL or "not run" (with the reason) - never "ok" for something that did not run. A
# required part that FAILs or could not run makes the exit status 1; only `sanitize` is optional.
#   deps      pkg-config finds kiln's libraries, or they are unpacked from .gpu-debs/ (tests/gpu/fetch-debs.sh)
#   build     Release, KILN_CUDA=ON, sm_$KILN_GPU_ARCH (90), the kiln program and the CUDA tests only
#   units     tests/unit/test_compute_cuda_* host logic with the GPU present (KILN_REQUIRE_GPU=1)
#   ops       every op against float64 references (test_compute_cuda_ops: default kernels - FAST attention on
#             tensor cores - timed; then KILN_DETERMINISTIC=1; then the f32 attention, KILN_CUDA_ATTENTION=simple,
#             timed); then the VAE's wide head as GEMMs, KILN_CUDA_WIDE_ATTENTION=gemm, and the tensor-core kernel
#             with Q in shared memory, KILN_CUDA_TC_QSMEM=1, each timed; run-to-run bit-identity
#   cudnn     cuDNN's SDPA and convolutions (KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn; optional): the op
#             comparison again with them, timed, and how many calls cuDNN ran (the rest run on kiln's kernels);
#             libcudnn.so.9 and cudnn.h are looked for in the machine's Python (PyTorch's nvidia-cudnn wheel) and the
#             CUDA toolkit. When it passes, the tiny pipeline runs with both (graph replay, equal to eager), and each
#             that times faster than kiln's own is used by the full-size parts
#   peak      bf16 GEMM ceiling through cuBLASLt (tests/gpu/gemm_peak.cu); the ops run's GEMM and attention
#             TFLOP/s as fractions of it
#   tiny      the whole CUDA pipeline on tests/data/tiny/diffusers with the goldens' injected noise against the
#             official pipeline's images: --exact vs pipeline_b1_f32 (>= 40 dB, as test_pipeline_golden), FAST vs
#             pipeline_b1_bf16 (>= 30 dB), with bf16 activations (the default), with KILN_CUDA_ACT=f32 and with
#             the f32 attention kernel (KILN_CUDA_ATTENTION=simple)
#   graphs    4 steps: the denoising step must be captured (>= 1) AND replayed (>= 1) - read from the backend's
#             "cuda: memory peak:" close line - and the image equal to eager launches (KILN_CUDA_GRAPHS=0)
#   full      random full-size klein-4B weights (kiln mkweights, ComfyUI layout); `kiln bench run` in ONE process:
#             the seed-000 style 8-step graph from the prompt bank, 1024x1024 x 4 steps, 512x512 batch 3 x 4 steps,
#             warm-up submit first so the timed ones are later requests in the same process, NVML telemetry; with
#             the default attention unless its op comparison failed (then KILN_CUDA_ATTENTION=simple)
#   memory    device memory kiln used at its peak (arena, placed weights, outside the arena) from the backend's
#             close line of that bench process - not nvidia-smi's memory.used
#   parallel  Ulysses SP and TP (--tp 2) over 2 GPUs under mpirun vs one GPU, >= 60 dB; SP x TP on 4 (optional:
#             "not run" with one GPU)
#   sanitize  compute-sanitizer memcheck over the ops test (optional: unsupported on gVisor machines)
#   profile   tests/gpu/profile.sh (optional, when time is left): the cuBLASLt probe, the attention A/B timings,
#             Nsight Compute over the default attention kernel
# Output files (at most 8 come back from a device call): run.log summary.txt build.log ops.log pipeline.log
# bench.json gemm.log profile.log.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${KILN_GPU_BUILD:-/tmp/kiln-gpu-build}
WEIGHTS=${KILN_GPU_WEIGHTS:-/tmp/kiln-gpu-comfy}
ARCH=${KILN_GPU_ARCH:-90}
BUDGET=${KILN_GPU_BUDGET_S:-520}
JOBS=$(nproc 2>/dev/null || echo 8)
PY=$(command -v python3 || command -v python || echo python3)
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$OUT"
: >"$OUT/summary.txt"
exec > >(tee "$OUT/run.log") 2>&1
T0=$SECONDS
FAILED=0

say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*"; }
# row PART STATUS DETAIL: STATUS is PASS, FAIL, "not run" (a required part: fails the run) or "skipped" (optional)
row() {
  printf '%-9s %-8s %s\n' "$1" "$2" "$3" >>"$OUT/summary.txt"
  case $2 in PASS | skipped) ;; *) FAILED=1 ;; esac
  say "$1: $2 $3"
}
info() { printf '          %s\n' "$*" >>"$OUT/summary.txt"; say "  $*"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
fits() { [ "$(left)" -ge "$1" ]; } # is there time left for a part needing about this many seconds?

# ---- dry run: stand-ins for the GPU-side programs, so the script's own logic runs without a GPU --------------------
# The stand-ins print what the real programs print (formats copied from them); KILN_GPU_DRY_FAIL="PART..." makes those
# parts' programs fail, KILN_GPU_DRY_NO=TOOL removes a tool. The tiny pipeline runs the REAL CPU kiln
# (KILN_GPU_DRY_KILN, default build/kiln) with --device cuda:0 replaced by cpu, so the golden comparison is real.
if [ $DRY = 1 ]; then
  STUB=$(mktemp -d)
  trap 'rm -rf "$STUB"' EXIT
  BUILD=$STUB/build WEIGHTS=$STUB/weights
  mkdir -p "$BUILD" "$STUB/bin"
  REAL_KILN=${KILN_GPU_DRY_KILN:-$ROOT/build/kiln}
  fail_is() { case " ${KILN_GPU_DRY_FAIL:-} " in *" $1 "*) return 0 ;; esac; return 1; }
  stub() { # stub PATH BODY
    printf '#!/usr/bin/env bash\n%s\n' "$2" >"$1"
    chmod +x "$1"
  }
  stub "$STUB/bin/nvidia-smi" 'echo "NVIDIA H200 (dry run), 580.00, 143771 MiB, 1980 MHz"'
  stub "$STUB/bin/nvcc" 'case " $* " in *" --version "*) echo "Cuda compilation tools, release 13.0 (dry run)";; esac
for a; do [ "$prev" = -o ] && printf "#!/usr/bin/env bash\necho \"peak_tflops %s\"\n" "${DRY_PEAK:-780.0}" >"$a" && chmod +x "$a"; prev=$a; done
exit 0'
  stub "$STUB/bin/cmake" 'exit 0'
  [ "${KILN_GPU_DRY_NO:-}" = compute-sanitizer ] ||
    stub "$STUB/bin/compute-sanitizer" 'shift 4; "$@" >/dev/null; echo "========= ERROR SUMMARY: 0 errors"'
  for t in arena residency launch graph_cache algo_cache check device; do
    stub "$BUILD/test_compute_cuda_$t" "$(fail_is units && echo 'echo "not ok"; exit 1' || echo 'echo "3 passed, 0 failed"')"
  done
  if fail_is ops; then ops_body='echo "  add   rel_l2 0.0e+00 tol 1e-06  ok"; echo "  matmul bf16 77x300x256   rel_l2 3.1e-02 tol 1e-05  FAIL"; echo "1 passed, 1 failed"; exit 1'
  else ops_body='echo "device under test: cuda"; for i in 1 2 3; do echo "  matmul case $i rel_l2 1.0e-07 tol 1e-05  ok"; done
[ "${KILN_OPS_TIME:-0}" = 1 ] && [ "${KILN_CUDA_ATTENTION:-}" = simple ] && echo "  time attention 4608 tokens x 24 heads x 128        2.100 ms    155.0 TFLOP/s"
if [ "${KILN_CUDA_ATTENTION:-}" = cudnn ]; then
  [ "${KILN_GPU_DRY_NO:-}" = cudnn ] && echo "cuda:0: KILN_CUDA_ATTENTION=cudnn: this kiln was built without cuDNN (dry run)" && exit 1
  echo "  time attention 4608 tokens x 24 heads x 128        0.500 ms    ${DRY_CUDNN_TF:-650.0} TFLOP/s"
  echo "[info] cuda: attention: 12 calls by cuDNN, 30 by the tensor-core kernel (shapes cuDNN does not take)"
  [ "${KILN_CUDA_CONV:-}" = cudnn ] && echo "  time conv2d 3x3 128 -> 128 at 1024x1024, bf16      1.000 ms    ${DRY_CUDNN_CONV_TF:-300.0} TFLOP/s" &&
    echo "[info] cuda: conv2d: 6 calls by cuDNN, 9 by im2col and a GEMM (shapes cuDNN does not take)"
fi
[ "${KILN_OPS_TIME:-0}" = 1 ] && [ "${KILN_CUDA_ATTENTION:-}" != simple ] && [ "${KILN_CUDA_ATTENTION:-}" != cudnn ] && echo "  time attention 4608 tokens x 24 heads x 128        0.700 ms    $([ "${KILN_CUDA_TC_QSMEM:-0}" = 1 ] && echo "${DRY_QS_TF:-500.0}" || echo 465.0) TFLOP/s" &&
  echo "  time matmul 4608 x 27648 x 3072 (single linear1)   1.200 ms    650.0 TFLOP/s" &&
  echo "  time attention 16384 tokens x 1 head x 512 (VAE mid)  5.000 ms  $([ "${KILN_CUDA_WIDE_ATTENTION:-}" = gemm ] && echo "${DRY_WIDE_GEMM_TF:-400.0}" || echo 110.0) TFLOP/s" &&
  echo "  time conv2d 3x3 128 -> 128 at 1024x1024, bf16      5.000 ms     60.0 TFLOP/s" &&
  echo "  time e4m3 weight widened 4608 x 27648 x 3072         1.400 ms    557.0 TFLOP/s" &&
  echo "  time e4m3 x e4m3 4608 x 27648 x 3072 (KILN_CUDA_FP8)   0.700 ms   1114.0 TFLOP/s"
echo "7 passed, 0 failed"'; fi
  stub "$BUILD/test_compute_cuda_ops" "$ops_body"
  replays=2; fail_is graphs && replays=0
  # kiln: generate -> the real CPU kiln, then the CUDA backend's close line; mkweights/bench -> stand-ins
  stub "$BUILD/kiln" "REAL='$REAL_KILN'; ROOT='$ROOT'; FAIL=' ${KILN_GPU_DRY_FAIL:-} '
cmd=\$1; shift
case \$cmd in
generate)
  a=(); for x in \"\$@\"; do [ \"\$x\" = cuda:0 ] && x=cpu; a+=(\"\$x\"); done
  case \"\$FAIL\" in *' tiny '*) echo 'kiln generate: CUDA error (dry run)' >&2; exit 8;; esac
  \"\$REAL\" generate \"\${a[@]}\" || exit
  [ \"\${KILN_CUDA_GRAPHS:-1}\" = 0 ] && n=0 || n=1; [ \$n = 1 ] && r=$replays || r=0
  echo \"[info] cuda: memory peak: arena 3 MiB (capacity 66 MiB), weights 12 MiB, outside the arena 0 MiB, scratch 1 MiB, workspace 4 MiB; 9 GEMM shapes (90 hits), \$n graphs captured, \$r replays\" >&2 ;;
mkweights)
  while [ \$# -gt 0 ]; do [ \"\$1\" = --out ] && mkdir -p \"\$2/vae\" && : >\"\$2/vae/flux2-vae.safetensors\"; shift; done ;;
bench)
  case \"\$FAIL\" in *' full '*) echo 'kiln bench: out of memory (dry run)' >&2; exit 6;; esac
  o=; g=(); while [ \$# -gt 0 ]; do case \$1 in -o) o=\$2; shift;; --graph) g+=(\"\$2\"); shift;; esac; shift; done
  python3 - \"\$o\" \"\${g[@]}\" <<'PYEOF'
import json, sys
out, graphs = sys.argv[1], sys.argv[2:]
rep = {'graphs': {}}
for i, path in enumerate(graphs):
    g = json.load(open(path))
    lat = next(n for n in g.values() if n['class_type'] == 'EmptyFlux2LatentImage')['inputs']
    steps = next(n for n in g.values() if n['class_type'] == 'Flux2Scheduler')['inputs']['steps']
    b = lat['batch_size']
    timed = [{'exec_seconds': 0.3 * b}] * 3
    rep['graphs'][path.split('/')[-1]] = {'knobs': {'width': lat['width'], 'height': lat['height'], 'steps': steps},
        'cards': {'0': {'batches': {str(b): {'timed': timed, 'cold_first_submit_exec_seconds': 9.0,
            'reduced': {'exec_seconds_per_image': {'median': 0.3}},
            'trace': {'memory.used': {'max': 30000}, 'power.draw': {'median': 500}}}}}}}
json.dump(rep, open(out, 'w'))
PYEOF
  echo '[info] cuda: memory peak: arena 2900 MiB (capacity 3100 MiB), weights 15800 MiB, outside the arena 0 MiB, scratch 300 MiB, workspace 32 MiB; 60 GEMM shapes (9000 hits), 3 graphs captured, 40 replays' >&2 ;;
*) \"\$REAL\" \"\$cmd\" \"\$@\" ;;
esac"
  export PATH="$STUB/bin:$PATH"
  say "DRY RUN: stand-ins in $STUB (real CPU kiln: $REAL_KILN)"
fi

say "kiln GPU run in $ROOT -> $OUT (budget $BUDGET s)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
nvcc --version 2>&1 | tail -1 | sed 's/^/nvcc: /'

# ---- deps and build -----------------------------------------------------------------------------------------------
MODS=$(sed -n '/pkg_check_modules(DEPS/,/)/p' "$ROOT/CMakeLists.txt" | tr ' ' '\n' |
       grep -v -E 'pkg_check_modules|DEPS|REQUIRED|IMPORTED_TARGET|^\)?$' | tr -d ')')
kiln_sysroot() { # kiln_sysroot DEBDIR ROOT MODULES...: unpack .debs into a private sysroot and point the tools at it
  local debs=$1 root=$2 ma=x86_64-linux-gnu i missing
  shift 2
  mkdir -p "$root"
  for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$root" || return 1; done
  [ -x "$root/usr/bin/pkgconf" ] && [ ! -e "$root/usr/bin/pkg-config" ] && ln -s pkgconf "$root/usr/bin/pkg-config"
  export PKG_CONFIG_LIBDIR="$root/usr/lib/$ma/pkgconfig:$root/usr/share/pkgconfig:$root/usr/lib/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$root" PATH="$root/usr/bin:$PATH"
  export CPATH="$root/usr/include:$root/usr/include/$ma${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$root/usr/lib/$ma:$root/lib/$ma${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$root/usr/lib/$ma:$root/lib/$ma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  # private requirements whose -dev packages were not fetched: kiln links dynamically, an empty .pc does
  for i in $(seq 1 60); do
    missing=$(pkg-config --exists --print-errors "$@" 2>&1 | sed -n "s/.*Package '\([^']*\)', required by.*not found.*/\1/p" | head -1)
    [ -z "$missing" ] && break
    printf 'Name: %s\nDescription: kiln stand-in\nVersion: 999\nLibs:\nCflags:\n' "$missing" >"$root/usr/lib/$ma/pkgconfig/$missing.pc"
  done
  pkg-config --exists --print-errors "$@"
}
# cuDNN for variant 3 (src/compute/cuda/cuda_cudnn.h): its library and headers where this machine has them - the
# CUDA toolkit, or the nvidia-* wheels of its Python (PyTorch's); the cuDNN frontend's headers come carried in
# .gpu-debs/cudnn-frontend (tests/gpu/fetch-debs.sh), where CMake looks
cudnn_paths() {
  "$PY" - <<'PYEOF' 2>/dev/null
import glob, os
roots = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu"]
try:
    import nvidia
    roots += [os.path.join(p, "**") for p in nvidia.__path__]
except Exception:
    pass
def first(name):
    for r in roots:
        for f in glob.glob(os.path.join(r, name), recursive=True):
            return os.path.dirname(f)
    return ""
lib, rt = first("libcudnn.so.9"), first("libcudart.so.13")
inc = "" if os.path.isfile("/usr/local/cuda/include/cudnn.h") else first("cudnn.h")
print(lib, rt or "-", inc or "-")
PYEOF
}
if [ $DRY = 0 ] && read -r CUDNN_LIB CUDART_LIB CUDNN_INC < <(cudnn_paths) && [ -n "$CUDNN_LIB" ]; then
  export LD_LIBRARY_PATH="$CUDNN_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ "$CUDART_LIB" != - ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$CUDART_LIB"
  [ "$CUDNN_INC" != - ] && export KILN_CUDNN_INCLUDE="$CUDNN_INC"
  say "cuDNN: libcudnn.so.9 in $CUDNN_LIB, libcudart.so.13 in $CUDART_LIB, cudnn.h in ${CUDNN_INC/-//usr/local/cuda/include}"
fi
BUILT=0
if [ $DRY = 1 ]; then
  row deps PASS "dry run: not checked"
  row build PASS "dry run: stand-ins"
  BUILT=1
else
  if command -v pkg-config >/dev/null && pkg-config --exists $MODS 2>/dev/null; then
    row deps PASS "system pkg-config finds: $(echo $MODS)"
  elif [ -d "$ROOT/.gpu-debs" ] && kiln_sysroot "$ROOT/.gpu-debs" /tmp/kiln-sysroot $MODS >"$OUT/build.log" 2>&1; then
    row deps PASS "unpacked $(ls "$ROOT"/.gpu-debs/*.deb | wc -l) packages from .gpu-debs into /tmp/kiln-sysroot"
  else
    row deps FAIL "missing libraries ($(echo $MODS)) and no usable .gpu-debs/: run tests/gpu/fetch-debs.sh, carry .gpu-debs"
  fi
  GEN=""
  command -v ninja >/dev/null && GEN="-G Ninja"
  [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$BUILD/CMakeCache.txt" && GEN=""
  targets="kiln $(cd "$ROOT/tests/unit" && ls test_compute_cuda_*.c | sed 's/\.c$//' | tr '\n' ' ')"
  say "build: cmake $GEN -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH in $BUILD ($JOBS jobs): $targets"
  t_build=$SECONDS
  if cmake -S "$ROOT" -B "$BUILD" $GEN -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
       -DKILN_TESTS=ON >>"$OUT/build.log" 2>&1 &&
     timeout 300 cmake --build "$BUILD" -j"$JOBS" --target $targets >>"$OUT/build.log" 2>&1; then
    BUILT=1
    row build PASS "$((SECONDS - t_build)) s, $(grep -c 'warning' "$OUT/build.log") warnings"
  else
    row build FAIL "see build.log: $(grep -m1 -E 'error:|undefined reference|CMake Error' "$OUT/build.log" | cut -c1-200)"
    # binaries built for sm_$ARCH on the dev machine (tests/gpu/prebuild.sh, carried as .gpu-prebuilt/): the rest of
    # the run still gives its verdicts and figures, while the build stays FAIL
    if [ -x "$ROOT/.gpu-prebuilt/kiln" ] && mkdir -p "$BUILD" && cp "$ROOT"/.gpu-prebuilt/* "$BUILD"/ &&
       "$BUILD/kiln" --help >/dev/null 2>&1; then
      BUILT=1
      info "the parts below run the prebuilt binaries from .gpu-prebuilt/ ($(cat "$ROOT/.gpu-prebuilt/BUILT_FROM" 2>/dev/null))"
    fi
  fi
fi
KILN="$BUILD/kiln"
export KILN_SOURCE_DIR="$ROOT"

# ---- units ----------------------------------------------------------------------------------------------------------
if [ $BUILT = 1 ]; then
  ok=0 bad=0 names=""
  for t in "$BUILD"/test_compute_cuda_*; do
    [ -x "$t" ] || continue
    case $t in *_ops) continue ;; esac
    if KILN_REQUIRE_GPU=1 timeout 60 "$t" >>"$OUT/ops.log" 2>&1; then ok=$((ok + 1)); else bad=$((bad + 1)); names="$names $(basename "$t")"; fi
  done
  if [ $((ok + bad)) = 0 ]; then row units "not run" "no test_compute_cuda_* programs in $BUILD"
  elif [ $bad = 0 ]; then row units PASS "$ok programs"
  else row units FAIL "$bad failed:$names (ops.log)"; fi
else
  row units "not run" "no build"
fi

# ---- ops: CUDA vs float64 -------------------------------------------------------------------------------------------
# default: the backend's own choice (FAST: the tensor-core attention); simple: KILN_CUDA_ATTENTION=simple, the f32
# kernel, timed beside it
ATT_TF="" MM_TF="" CONV_TF="" ATT_SIMPLE_TF="" WIDE_TF="" WIDE_GEMM_TF="" QS_TF="" DEFAULT_OK=0
if [ $BUILT = 1 ] && [ -x "$BUILD/test_compute_cuda_ops" ]; then
  for mode in default deterministic simple widegemm qsmem; do
    det=0 att="" tim=0
    [ $mode = default ] && tim=1
    [ $mode = deterministic ] && det=1
    [ $mode = simple ] && att=simple tim=1
    wide="" qs=0
    [ $mode = widegemm ] && wide=gemm tim=1
    [ $mode = qsmem ] && qs=1 tim=1
    log=$OUT/ops-$mode.tmp
    KILN_REQUIRE_GPU=1 KILN_DETERMINISTIC=$det KILN_CUDA_ATTENTION=$att KILN_CUDA_WIDE_ATTENTION=$wide KILN_CUDA_TC_QSMEM=$qs \
      KILN_OPS_TIME=$tim timeout 150 "$BUILD/test_compute_cuda_ops" >"$log" 2>&1
    rc=$?
    n_ok=$(grep -c ' ok$' "$log")
    if [ $rc = 0 ] && [ "$n_ok" -gt 0 ]; then
      row ops PASS "$mode: $n_ok comparisons within tolerance (float64 references), run-to-run bit-identical"
      [ $mode = default ] && DEFAULT_OK=1
    elif [ $rc = 77 ]; then
      row ops "not run" "$mode: the test found no GPU"
    else
      why=$(grep -E 'FAIL|KILN_REQUIRE_GPU|error' "$log" | head -3 | tr '\n' ' ')
      row ops FAIL "$mode (rc $rc): $(printf '%s' "${why:-$(tail -1 "$log")}" | cut -c1-200) (ops.log)"
    fi
    if [ $mode = default ]; then
      ATT_TF=$(awk '/time attention 4608/ {print $(NF-1)}' "$log")
      WIDE_TF=$(awk '/time attention 16384/ {print $(NF-1)}' "$log")
      MM_TF=$(awk '/time matmul/ {print $(NF-1)}' "$log")
      CONV_TF=$(awk '/time conv2d/ {print $(NF-1)}' "$log")
    fi
    [ $mode = simple ] && ATT_SIMPLE_TF=$(awk '/time attention 4608/ {print $(NF-1)}' "$log")
    [ $mode = widegemm ] && [ $rc = 0 ] && WIDE_GEMM_TF=$(awk '/time attention 16384/ {print $(NF-1)}' "$log")
    [ $mode = qsmem ] && [ $rc = 0 ] && QS_TF=$(awk '/time attention 4608/ {print $(NF-1)}' "$log")
    { echo "== test_compute_cuda_ops ($mode) =="; cat "$log"; } >>"$OUT/ops.log"
    rm -f "$log"
  done
else
  row ops "not run" "no build"
fi

# ---- cudnn: attention variant 3 and cuDNN's convolutions (optional) ------------------------------------------------
CUDNN_TF="" CUDNN_CONV_TF="" CUDNN_OK=0 CUDNN_CONVS=0
if [ $BUILT = 1 ] && [ -x "$BUILD/test_compute_cuda_ops" ]; then
  log=$OUT/ops-cudnn.tmp
  KILN_REQUIRE_GPU=1 KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn KILN_OPS_TIME=1 KILN_LOG=info timeout 150 \
    "$BUILD/test_compute_cuda_ops" >"$log" 2>&1
  rc=$?
  # every backend the test opens logs its counts at close
  calls=$(sed -n 's/.*cuda: attention: \([0-9]*\) calls by cuDNN.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  CUDNN_CONVS=$(sed -n 's/.*cuda: conv2d: \([0-9]*\) calls by cuDNN.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  CUDNN_TF=$(awk '/time attention 4608/ {print $(NF-1); exit}' "$log")
  CUDNN_CONV_TF=$(awk '/time conv2d/ {print $(NF-1); exit}' "$log")
  why=$(grep -m1 -o -E 'built without cuDNN|cuDNN: cannot load [^(]*|cuDNN [0-9]+ is older[^;]*' "$log")
  if [ -n "$why" ]; then
    row cudnn skipped "not run: $why"
  elif [ $rc = 0 ] && [ "$calls" -gt 0 ]; then
    CUDNN_OK=1
    row cudnn PASS "KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn: $(grep -c ' ok$' "$log") comparisons within tolerance, $calls attention and $CUDNN_CONVS conv2d calls by cuDNN; attention 4608 x 24 x 128: ${CUDNN_TF:-?} TFLOP/s (the default: ${ATT_TF:-?}); conv2d 3x3 128 at 1024^2: ${CUDNN_CONV_TF:-?} TFLOP/s (im2col + GEMM: ${CONV_TF:-?})"
  elif [ $rc = 0 ]; then
    row cudnn skipped "cuDNN loaded but ran no attention call: every shape fell back ($(grep -m1 "kiln's own kernel runs it" "$log" | cut -c1-200))"
  else
    row cudnn FAIL "KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn (rc $rc): $(grep -E 'FAIL|error' "$log" | head -2 | tr '\n' ' ' | cut -c1-200) (ops.log)"
  fi
  { echo "== test_compute_cuda_ops (cudnn) =="; cat "$log"; } >>"$OUT/ops.log"
  rm -f "$log"
fi

# ---- peak and fractions -----------------------------------------------------------------------------------------
PEAK=""
if ! fits 40; then
  row peak "not run" "out of time ($(left) s left)"
else
  { nvcc -O2 -arch=sm_$ARCH "$ROOT/tests/gpu/gemm_peak.cu" -lcublasLt -o "$BUILD/gemm_peak" >"$OUT/gemm.log" 2>&1 ||
    cp "$ROOT/.gpu-prebuilt/gemm_peak" "$BUILD/gemm_peak" 2>>"$OUT/gemm.log"; } &&
    timeout 90 "$BUILD/gemm_peak" >>"$OUT/gemm.log" 2>&1 && PEAK=$(awk '/^peak_tflops/ {print $2}' "$OUT/gemm.log")
  if [ -z "$PEAK" ]; then
    row peak FAIL "no bf16 GEMM peak measured (gemm.log)"
  elif [ -z "$MM_TF" ] || [ -z "$ATT_TF" ]; then
    row peak "not run" "fractions: bf16 peak ${PEAK} TFLOP/s, but the ops run printed no timings"
  else
    row peak PASS "bf16 peak ${PEAK} TFLOP/s (cuBLASLt 8192^3)"
    info "$(awk -v m="$MM_TF" -v a="$ATT_TF" -v p="$PEAK" 'BEGIN { printf "DiT matmul 4608x27648x3072: %s TFLOP/s = %.1f%% of peak; attention 4608 tokens x 24 heads (the default, tensor cores): %s TFLOP/s = %.1f%% of peak", m, 100*m/p, a, 100*a/p }')"
    [ -n "$ATT_SIMPLE_TF" ] && info "$(awk -v a="$ATT_SIMPLE_TF" -v p="$PEAK" 'BEGIN { printf "the f32 attention kernel (KILN_CUDA_ATTENTION=simple): %s TFLOP/s = %.1f%% of peak", a, 100*a/p }')"
    # the fp8 checkpoint's linear1, widened per matmul vs e4m3 x e4m3 (KILN_CUDA_FP8=1): reported, not required
    while read -r line; do info "$line"; done < <(sed -n 's/^  time \(e4m3 .*\)$/\1/p' "$OUT/ops.log")
  fi
fi

# ---- the attention kernel of the full-size run: the default, unless its op comparison failed (then simple)
ATT=default
[ $DEFAULT_OK = 1 ] || ATT=simple
# cuDNN's SDPA, and its convolutions, when their comparison passed and each timed faster than kiln's own
faster() { [ -n "$1" ] && [ -n "$2" ] && awk -v c="$1" -v d="$2" 'BEGIN { exit !(c > d) }'; }
CONV=default
[ $DEFAULT_OK = 1 ] && [ $CUDNN_OK = 1 ] && faster "$CUDNN_TF" "$ATT_TF" && ATT=cudnn
[ $DEFAULT_OK = 1 ] && [ $CUDNN_OK = 1 ] && [ "$CUDNN_CONVS" -gt 0 ] && faster "$CUDNN_CONV_TF" "$CONV_TF" && CONV=cudnn
# the VAE's wide head as GEMMs (KILN_CUDA_WIDE_ATTENTION=gemm) when its comparison passed and it timed faster
WIDE=default
[ $DEFAULT_OK = 1 ] && faster "$WIDE_GEMM_TF" "$WIDE_TF" && WIDE=gemm
# the tensor-core kernel with Q in shared memory (KILN_CUDA_TC_QSMEM=1): the default's calls, and cuDNN's fallbacks
QS=0
[ $DEFAULT_OK = 1 ] && faster "$QS_TF" "$ATT_TF" && QS=1
# KILN_GPU_ATTENTION=simple|tc forces the choice (an A/B run of the pipeline while the op comparison fails elsewhere)
[ -n "${KILN_GPU_ATTENTION:-}" ] && ATT=$KILN_GPU_ATTENTION && say "attention forced by KILN_GPU_ATTENTION=$ATT"
say "attention for the full-size run: $ATT (default ${ATT_TF:-?} TFLOP/s, its comparison passed: $DEFAULT_OK; simple ${ATT_SIMPLE_TF:-?}; cudnn ${CUDNN_TF:-?}, passed: $CUDNN_OK); conv2d: $CONV (im2col ${CONV_TF:-?}, cudnn ${CUDNN_CONV_TF:-?}); the VAE's wide head: $WIDE (tensor cores ${WIDE_TF:-?}, GEMMs ${WIDE_GEMM_TF:-?}); Q in shared memory: $QS (${QS_TF:-?} TFLOP/s)"
att_env() { [ "$ATT" = default ] && echo "" || echo "$ATT"; } # KILN_CUDA_ATTENTION for the full-size run
conv_env() { [ "$CONV" = default ] && echo "" || echo "$CONV"; } # KILN_CUDA_CONV likewise
wide_env() { [ "$WIDE" = default ] && echo "" || echo "$WIDE"; } # KILN_CUDA_WIDE_ATTENTION likewise
export KILN_CUDA_TC_QSMEM=$QS # every later part: the tiny pipeline, graphs, the full-size runs

# ---- tiny pipeline vs the official goldens, and graph capture + replay --------------------------------------------------
TINY="$ROOT/tests/data/tiny/diffusers"
GOLD="$ROOT/tests/data/golden"
PROMPT="A photo of a red fox in fresh snow, golden hour, 35mm film grain"
gen() { # gen OUTPNG [extra kiln generate args...]: the golden's request (80x48, 4 steps, its noise) on cuda:0
  local png=$1
  shift
  echo "+ kiln generate --device cuda:0 -o $png $*" >>"$OUT/pipeline.log"
  timeout 120 "$KILN" generate -q --model "$TINY" --device cuda:0 -W 80 -H 48 --steps 4 \
    --noise "$GOLD/pipeline_b1_f32.safetensors" -p "$PROMPT" -o "$png" "$@" >>"$OUT/pipeline.log" 2>&1
}
d=$OUT/tiny.tmp
mkdir -p "$d"
if [ $BUILT = 0 ] || [ ! -x "$KILN" ]; then
  row tiny "not run" "no kiln program"
  row graphs "not run" "no kiln program"
elif ! fits 40; then
  row tiny "not run" "out of time ($(left) s left)"
  row graphs "not run" "out of time"
else
  if gen "$d/exact.png" --exact && r=$("$PY" "$ROOT/tests/gpu/report.py" golden "$GOLD/pipeline_b1_f32.safetensors" "$d/exact.png" 40); then
    row tiny PASS "--exact: $r"
  else
    row tiny FAIL "--exact: ${r:-kiln generate failed: $(tail -1 "$OUT/pipeline.log" | cut -c1-160)}"
  fi
  r=""
  if gen "$d/fast.png" && r=$("$PY" "$ROOT/tests/gpu/report.py" golden "$GOLD/pipeline_b1_bf16.safetensors" "$d/fast.png" 30); then
    row tiny PASS "FAST (bf16 activations): $r"
  else
    row tiny FAIL "FAST (bf16 activations): ${r:-kiln generate failed: $(tail -1 "$OUT/pipeline.log" | cut -c1-160)}"
  fi
  r="" # the same with f32 activations (KILN_CUDA_ACT=f32): the emulated GPU gives 41.8 dB, bf16 activations 41.5
  if KILN_CUDA_ACT=f32 gen "$d/fast32.png" &&
     r=$("$PY" "$ROOT/tests/gpu/report.py" golden "$GOLD/pipeline_b1_bf16.safetensors" "$d/fast32.png" 30); then
    row tiny PASS "FAST (f32 activations, KILN_CUDA_ACT=f32): $r"
  else
    row tiny FAIL "FAST (f32 activations): ${r:-kiln generate failed: $(tail -1 "$OUT/pipeline.log" | cut -c1-160)}"
  fi
  r="" # the f32 attention kernel through the pipeline (FAST's default is the tensor-core one; H200: 41.3 dB both)
  if KILN_CUDA_ATTENTION=simple gen "$d/fastsimple.png" &&
     r=$("$PY" "$ROOT/tests/gpu/report.py" golden "$GOLD/pipeline_b1_bf16.safetensors" "$d/fastsimple.png" 30); then
    row tiny PASS "FAST (the f32 attention kernel, KILN_CUDA_ATTENTION=simple): $r"
  else
    row tiny FAIL "FAST (the f32 attention kernel): ${r:-kiln generate failed: $(tail -1 "$OUT/pipeline.log" | cut -c1-160)}"
  fi
  r="" # cuDNN's SDPA through the pipeline, where its op comparison passed
  if [ $CUDNN_OK = 1 ]; then
    # with graphs (the default): cuDNN's launches inside the captured step, replayed, equal to eager ones
    if KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn KILN_LOG=info gen "$d/fastcudnn.png" 2>/dev/null &&
       cp "$OUT/pipeline.log" "$d/graphc.log" &&
       KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn KILN_CUDA_GRAPHS=0 gen "$d/eagercudnn.png" &&
       r=$("$PY" "$ROOT/tests/gpu/report.py" golden "$GOLD/pipeline_b1_bf16.safetensors" "$d/fastcudnn.png" 30); then
      m=$("$PY" "$ROOT/tests/gpu/report.py" memline "$d/graphc.log")
      rep=$(printf '%s' "$m" | sed -n 's/.* captured \([0-9]*\) replays.*/\1/p')
      same=no
      "$PY" "$ROOT/tests/gpu/report.py" png "$d/fastcudnn.png" "$d/eagercudnn.png" inf >/dev/null && same=yes
      if [ "${rep:-0}" -ge 1 ] 2>/dev/null && [ $same = yes ]; then
        row tiny PASS "FAST (cuDNN's SDPA and convolutions, KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn): $r; $rep graph replays, identical to eager"
      else
        row tiny FAIL "FAST (cuDNN's SDPA and convolutions): $r, but replays ${rep:-?} (must be >= 1), identical to eager: $same"
        ATT=$( [ "$ATT" = cudnn ] && echo default || echo "$ATT") CONV=default
        say "attention and conv2d for the full-size run: $ATT, $CONV"
      fi
    else
      row tiny FAIL "FAST (cuDNN's SDPA and convolutions): ${r:-kiln generate failed: $(tail -1 "$OUT/pipeline.log" | cut -c1-160)}"
      ATT=$( [ "$ATT" = cudnn ] && echo default || echo "$ATT") CONV=default
      say "attention and conv2d for the full-size run: $ATT, $CONV"
    fi
  fi
  # step 1 eager, step 2 captured and launched, steps 3-4 replayed (src/pipeline/denoise_step.h)
  : >"$d/graph.log"
  if KILN_LOG=info gen "$d/graph.png" 2>/dev/null && cp "$OUT/pipeline.log" "$d/graph.log" &&
     KILN_CUDA_GRAPHS=0 gen "$d/eager.png"; then
    m=$("$PY" "$ROOT/tests/gpu/report.py" memline "$d/graph.log")
    cap=$(printf '%s' "$m" | sed -n 's/.*graphs \([0-9]*\) captured.*/\1/p')
    rep=$(printf '%s' "$m" | sed -n 's/.* captured \([0-9]*\) replays.*/\1/p')
    same=no # the pixels (the PNGs' text chunks may differ)
    "$PY" "$ROOT/tests/gpu/report.py" png "$d/graph.png" "$d/eager.png" inf >/dev/null && same=yes
    if [ "${cap:-0}" -ge 1 ] 2>/dev/null && [ "${rep:-0}" -ge 1 ] 2>/dev/null && [ $same = yes ]; then
      row graphs PASS "$cap captured, $rep replayed; image identical to eager launches"
    else
      row graphs FAIL "captured ${cap:-?}, replayed ${rep:-?} (both must be >= 1); identical to eager: $same ($m)"
    fi
  else
    row graphs FAIL "kiln generate failed (pipeline.log)"
  fi
fi
rm -rf "$d"

# ---- full size: kiln bench in one process (warm-up, then timed later requests), NVML telemetry, memory peak ----------
COMFY_MANIFEST="$ROOT/tests/data/manifests/flux2-klein-4b.folder.comfy.json"
BANK="$ROOT/tests/data/bench/prompt-bank.json"
SEED_GRAPH="$ROOT/tests/data/bench/graphs/klein-4b-8st.json"
if [ $BUILT = 0 ] || [ ! -x "$KILN" ]; then
  row full "not run" "no kiln program"
  row memory "not run" "no kiln program"
elif ! fits 200; then
  row full "not run" "out of time ($(left) s left, needs ~200)"
  row memory "not run" "out of time"
else
  [ -f "$WEIGHTS/vae/flux2-vae.safetensors" ] ||
    timeout 150 "$KILN" mkweights --manifest "$COMFY_MANIFEST" --out "$WEIGHTS" >>"$OUT/pipeline.log" 2>&1
  g=$OUT/graphs.tmp
  mkdir -p "$g"
  # the two timing cells: the seed-000 graph with only size, batch and steps changed
  "$PY" - "$SEED_GRAPH" "$g" <<'EOF'
import json, sys
src, out = sys.argv[1], sys.argv[2]
for w, h, b, steps in ((1024, 1024, 1, 4), (512, 512, 3, 4)):
    g = json.load(open(src))
    for n in g.values():
        if n["class_type"] == "EmptyFlux2LatentImage":
            n["inputs"].update(width=w, height=h, batch_size=b)
        if n["class_type"] == "Flux2Scheduler":
            n["inputs"].update(steps=steps, width=w, height=h)
    json.dump(g, open(f"{out}/klein-4b-{w}x{h}-b{b}-{steps}st.json", "w"), indent=1)
EOF
  blog=$OUT/bench.tmp
  if [ ! -f "$WEIGHTS/vae/flux2-vae.safetensors" ]; then
    row full FAIL "kiln mkweights failed (pipeline.log)"
    row memory "not run" "no weights"
  elif KILN_CUDA_ATTENTION=$(att_env) KILN_CUDA_CONV=$(conv_env) KILN_CUDA_WIDE_ATTENTION=$(wide_env) KILN_LOG=info \
        timeout 300 "$KILN" bench run --url "engine@cuda:0:$WEIGHTS" --arm h200-gpu-run --warmup 1 --timed 3 \
        --graph "$SEED_GRAPH" --graph "$g/klein-4b-1024x1024-b1-4st.json" --graph "$g/klein-4b-512x512-b3-4st.json" \
        --bank "$BANK" --gpu 0 -o "$OUT/bench.json" >"$blog" 2>&1; then
    if r=$("$PY" "$ROOT/tests/gpu/report.py" bench "$OUT/bench.json"); then
      row full PASS "kiln bench, one process, warm-up excluded, attention $ATT, conv2d $CONV, wide head $WIDE, Q in shared memory $QS (bench.json)"
    else
      row full FAIL "a graph without timed submits (bench.json)"
    fi
    while IFS= read -r line; do info "$line"; done <<<"$r"
    if m=$("$PY" "$ROOT/tests/gpu/report.py" memline "$blog"); then row memory PASS "$m"
    else row memory FAIL "$m"; fi
  else
    row full FAIL "kiln bench failed: $(grep -v '^\[' "$blog" | tail -1 | cut -c1-200) (pipeline.log)"
    row memory "not run" "the bench process failed"
  fi
  cat "$blog" >>"$OUT/pipeline.log" 2>/dev/null
  # where one 1024x1024 image's GPU time goes, by op (KILN_CUDA_PROFILE=1: eager launches): reported, not judged
  if [ $DRY = 0 ] && [ -f "$WEIGHTS/vae/flux2-vae.safetensors" ] && fits 60; then
    plog=$OUT/prof.tmp
    KILN_CUDA_PROFILE=1 KILN_CUDA_ATTENTION=$(att_env) KILN_CUDA_CONV=$(conv_env) KILN_CUDA_WIDE_ATTENTION=$(wide_env) KILN_LOG=info timeout 120 "$KILN" generate -q --device cuda:0 \
      --unet "$WEIGHTS/diffusion_models/flux-2-klein-4b.safetensors" --clip "$WEIGHTS/text_encoders/qwen_3_4b.safetensors" \
      --vae "$WEIGHTS/vae/flux2-vae.safetensors" -W 1024 -H 1024 --steps 4 -p "$PROMPT" -o "$OUT/prof.png.tmp" >"$plog" 2>&1
    info "one 1024x1024 x 4 steps image by op (KILN_CUDA_PROFILE=1, rc $?):"
    while IFS= read -r line; do info "  $line"; done < <(sed -n 's/.*cuda: profile: //p' "$plog" | head -12)
    cat "$plog" >>"$OUT/pipeline.log"
    rm -f "$plog" "$OUT/prof.png.tmp"
  fi
  rm -rf "$g" "$blog"
fi

# ---- parallel: Ulysses SP and tensor parallelism over the GPUs (issue 20; optional: needs >= 2 GPUs and mpirun) -------
# One rank per GPU (a rank takes GPU local-rank + N of --device cuda:N), NCCL between them when kiln was built with
# it (else the MPI communicator staging through the host), the tiled VAE decode spread over them; each image against
# the single-GPU one, --exact, >= 60 dB. SP: the tiny DiT (2 heads) over 2 GPUs. TP: a 4-head copy of it
# (tests/py/dit_regroup_heads.py) with --tp 2, and SP 2 x TP 2 when there are 4 GPUs.
NGPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c .)
if [ "$NGPU" -lt 2 ]; then
  row parallel skipped "not run: $NGPU GPU (sequence and tensor parallelism need >= 2)"
elif [ $BUILT = 0 ] || [ ! -x "$KILN" ] || ! command -v mpirun >/dev/null || ! fits 90; then
  row parallel "not run" "$NGPU GPUs, but no kiln program, no mpirun or out of time"
else
  d=$OUT/parallel.tmp
  mkdir -p "$d"
  pmpi() { local np=$1; shift; OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_LOG=info timeout 180 \
           mpirun --oversubscribe -np "$np" -x KILN_LOG "$KILN" "$@" >>"$OUT/pipeline.log" 2>&1; }
  pgen=(generate -q --model "$TINY" --device cuda:0 -W 128 -H 128 --steps 4 --seed 5 --vae-tile 8 --exact -p "$PROMPT")
  "$PY" "$ROOT/tests/py/dit_regroup_heads.py" "$TINY" "$d/h4" 16 >>"$OUT/pipeline.log" 2>&1
  tgen=("${pgen[@]}")
  tgen[3]=$d/h4
  res="" bad=0
  if timeout 120 "$KILN" "${pgen[@]}" -o "$d/one.png" >>"$OUT/pipeline.log" 2>&1 && pmpi 2 "${pgen[@]}" -o "$d/sp2.png" &&
     r=$("$PY" "$ROOT/tests/gpu/report.py" png "$d/sp2.png" "$d/one.png" 60); then res="SP 2: $r"
  else res="SP 2 FAILED"; bad=1; fi
  if timeout 120 "$KILN" "${tgen[@]}" -o "$d/h4one.png" >>"$OUT/pipeline.log" 2>&1 && pmpi 2 "${tgen[@]}" --tp 2 -o "$d/tp2.png" &&
     r=$("$PY" "$ROOT/tests/gpu/report.py" png "$d/tp2.png" "$d/h4one.png" 60); then res="$res; TP 2: $r"
  else res="$res; TP 2 FAILED"; bad=1; fi
  if [ "$NGPU" -ge 4 ]; then
    if pmpi 4 "${tgen[@]}" --tp 2 -o "$d/sp2tp2.png" && r=$("$PY" "$ROOT/tests/gpu/report.py" png "$d/sp2tp2.png" "$d/h4one.png" 60)
    then res="$res; SP 2 x TP 2: $r"; else res="$res; SP 2 x TP 2 FAILED"; bad=1; fi
  else res="$res; SP 2 x TP 2 not run ($NGPU GPUs, needs 4)"; fi
  if [ $bad = 0 ]; then row parallel PASS "$NGPU GPUs: $res"; else row parallel FAIL "$res (pipeline.log)"; fi
  rm -rf "$d"
fi

# ---- compute-sanitizer (optional: Firecracker machines only) --------------------------------------------------------------
if [ $BUILT = 1 ] && command -v compute-sanitizer >/dev/null && fits 60; then
  s=$OUT/sanitize.tmp
  if KILN_REQUIRE_GPU=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/test_compute_cuda_ops" >"$s" 2>&1; then
    row sanitize PASS "memcheck clean over the ops test"
  else
    row sanitize skipped "memcheck rc $?: $(grep -m2 -E 'ERROR|Invalid|not supported' "$s" | tr '\n' ' ' | cut -c1-160)"
  fi
  rm -f "$s"
else
  row sanitize skipped "not run: $(command -v compute-sanitizer >/dev/null || echo 'no compute-sanitizer')$(fits 60 || echo ' out of time')"
fi

# ---- profile (optional): what the next change needs to know --------------------------------------------------------
if [ $DRY = 0 ] && [ $BUILT = 1 ] && fits 90; then
  if KILN_GPU_BUILD=$BUILD OUT=$OUT timeout $(($(left) - 10)) bash "$ROOT/tests/gpu/profile.sh" tc >/dev/null 2>&1; then
    row profile skipped "optional, ran: profile.log (cuBLASLt probe, attention A/B, Nsight Compute)"
  else
    row profile skipped "optional: profile.sh rc $? (profile.log)"
  fi
else
  row profile skipped "not run: $( [ $DRY = 1 ] && echo 'dry run' || echo "no build or out of time ($(left) s left)")"
fi

say "done in $((SECONDS - T0)) s"
echo
echo "==== kiln GPU run: $( [ $FAILED = 0 ] && echo 'ALL REQUIRED PARTS PASSED' || echo 'FAILED' ) ($((SECONDS - T0)) s) ===="
printf '%-9s %-8s %s\n' part status detail
cat "$OUT/summary.txt"
exit $FAILED
