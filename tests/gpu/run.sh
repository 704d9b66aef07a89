#!/usr/bin/env bash
# tests/gpu/run.sh - THE script for a machine with an NVIDIA GPU (issue 9). Needs only the CUDA toolkit, a
# driver, CMake and Python 3; no internet. Finishes in under 8 minutes; logs go to $OUT (default ./gpu-out).
#
#     OUT=/some/dir tests/gpu/run.sh
#
# Parts, each guarded: what does not exist yet (a CLI command, a flag) is reported "n/a" with the reason,
# never skipped silently; a part that runs and fails is "FAIL" and makes the exit status 1.
#   deps      pkg-config finds kiln's libraries, or they are unpacked from .gpu-debs/ (tests/gpu/fetch-debs.sh)
#   build     Release, KILN_CUDA=ON, sm_90 (KILN_GPU_ARCH), in $KILN_GPU_BUILD (default /tmp/kiln-gpu-build)
#   units     tests/unit/test_compute_cuda_*: host logic, and the GPU opens (KILN_REQUIRE_GPU=1)
#   ops       every op, CUDA against the CPU backend, stated tolerances (test_compute_cuda_ops), then again
#             with KILN_DETERMINISTIC=1, then with KILN_CUDA_ATTENTION=tc (attention on tensor cores); each checks
#             run-to-run bit-identity; attention and the largest DiT matmul are timed (KILN_OPS_TIME=1)
#   peak      bf16 GEMM ceiling through cuBLASLt (tests/gpu/gemm_peak.cu) and at the DiT's shapes
#   tiny      the whole pipeline on tests/data/tiny/diffusers: CUDA image vs CPU image (PSNR >= 35 dB FAST)
#   graphs    the same, 4 steps: the denoising step is captured once and replayed (KILN_LOG=debug close line),
#             and the image is byte-identical to eager launches (KILN_CUDA_GRAPHS=0)
#   full      random full-size klein-4B weights (kiln mkweights), 4 steps: 512x512 batch 1 and 3, 1024x1024:
#             seconds per image by stage, DiT ms/step, fraction of bf16 peak, peak GPU memory
#   bench     `kiln bench $KILN_GPU_BENCH_ARGS` when both exist (a seed-000 style run)
#   sanitize  compute-sanitizer memcheck over the ops test, if time is left (informational)
# Output files (at most 8 come back from a device call): run.log summary.txt build.log ops.log gemm.log
# pipeline.log perf.jsonl.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${KILN_GPU_BUILD:-/tmp/kiln-gpu-build}
WEIGHTS=${KILN_GPU_WEIGHTS:-/tmp/kiln-gpu-weights}
ARCH=${KILN_GPU_ARCH:-90}
BUDGET=${KILN_GPU_BUDGET_S:-440} # no part starts that could run past this (8 min = 480 s, minus a margin)
JOBS=$(nproc 2>/dev/null || echo 8)
mkdir -p "$OUT"
: >"$OUT/summary.txt"
exec > >(tee "$OUT/run.log") 2>&1
T0=$SECONDS
FAILED=0
PY=$(command -v python3 || command -v python || echo python3)
export PATH="$PATH:/usr/local/cuda/bin"

say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*"; }
row() { # row PART STATUS DETAIL
  printf '%-9s %-5s %s\n' "$1" "$2" "$3" | tee -a "$OUT/summary.txt" >/dev/null
  [ "$2" = FAIL ] && FAILED=1
  say "$1: $2 $3"
}
left() { echo $((BUDGET - (SECONDS - T0))); }
fits() { [ "$(left)" -ge "$1" ]; } # fits SECONDS: is there time for a part needing about that long?

say "kiln GPU run in $ROOT -> $OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
nvcc --version 2>&1 | tail -1 | sed 's/^/nvcc: /'

# ---- deps ---------------------------------------------------------------------------------------------------
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
  # private requirements (libmicrohttpd -> gnutls, libpng -> zlib, ...) whose -dev packages were not fetched:
  # kiln links dynamically, so an empty stand-in .pc does (their run-time libraries were fetched)
  for i in $(seq 1 60); do
    missing=$(pkg-config --exists --print-errors "$@" 2>&1 | sed -n "s/.*Package '\([^']*\)', required by.*not found.*/\1/p" | head -1)
    [ -z "$missing" ] && break
    printf 'Name: %s\nDescription: kiln stand-in\nVersion: 999\nLibs:\nCflags:\n' "$missing" >"$root/usr/lib/$ma/pkgconfig/$missing.pc"
  done
  pkg-config --exists --print-errors "$@"
}
if command -v pkg-config >/dev/null && pkg-config --exists $MODS 2>/dev/null; then
  row deps PASS "system pkg-config finds: $(echo $MODS)"
elif [ -d "$ROOT/.gpu-debs" ] && kiln_sysroot "$ROOT/.gpu-debs" /tmp/kiln-sysroot $MODS >"$OUT/build.log" 2>&1; then
  row deps PASS "unpacked $(ls "$ROOT"/.gpu-debs/*.deb | wc -l) packages from .gpu-debs into /tmp/kiln-sysroot"
else
  row deps FAIL "missing libraries ($(echo $MODS)) and no usable .gpu-debs/: run tests/gpu/fetch-debs.sh on a machine with apt, carry .gpu-debs"
fi

# ---- build --------------------------------------------------------------------------------------------------
BUILT=0
GEN=""
command -v ninja >/dev/null && GEN="-G Ninja"
[ -f "$BUILD/CMakeCache.txt" ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$BUILD/CMakeCache.txt" && GEN=""
say "build: cmake $GEN -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH in $BUILD ($JOBS jobs)"
if cmake -S "$ROOT" -B "$BUILD" $GEN -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
     -DKILN_TESTS=ON >>"$OUT/build.log" 2>&1 &&
   timeout 300 cmake --build "$BUILD" -j"$JOBS" >>"$OUT/build.log" 2>&1; then
  BUILT=1
  row build PASS "$(grep -c 'warning' "$OUT/build.log") warnings; $(ls "$BUILD"/test_* 2>/dev/null | wc -l) test programs"
else
  row build FAIL "see build.log: $(grep -m1 -E 'error:|undefined reference|CMake Error' "$OUT/build.log" | cut -c1-200)"
  # Something outside the CUDA backend may be broken: still build what the op comparison needs.
  tests=$(cd "$ROOT/tests/unit" && ls test_compute_cuda_*.c 2>/dev/null | sed 's/\.c$//')
  if [ -f "$BUILD/CMakeCache.txt" ] && timeout 200 cmake --build "$BUILD" -j"$JOBS" --target $tests >>"$OUT/build.log" 2>&1; then
    BUILT=1
    row build info "the CUDA backend's tests built on their own; the kiln program did not"
  fi
fi
KILN="$BUILD/kiln"

# ---- unit tests of the CUDA backend --------------------------------------------------------------------------
if [ $BUILT = 1 ]; then
  ok=0 bad=0 names=""
  for t in "$BUILD"/test_compute_cuda_*; do
    [ -x "$t" ] || continue
    case $t in *_ops) continue ;; esac
    if KILN_REQUIRE_GPU=1 KILN_SOURCE_DIR="$ROOT" timeout 60 "$t" >>"$OUT/ops.log" 2>&1; then ok=$((ok + 1)); else bad=$((bad + 1)); names="$names $(basename "$t")"; fi
  done
  [ $bad = 0 ] && row units PASS "$ok programs" || row units FAIL "$bad failed:$names (ops.log)"
else
  row units n/a "no build"
fi

# ---- ops: CUDA vs CPU -------------------------------------------------------------------------------------------
if [ $BUILT = 1 ] && [ -x "$BUILD/test_compute_cuda_ops" ]; then
  # default kernels (timed), deterministic mode, and attention variant 2 on tensor cores (timed)
  for mode in default deterministic tc; do
    det=0 att=simple tim=1
    [ $mode = deterministic ] && det=1 tim=0
    [ $mode = tc ] && att=tc
    log=$BUILD/ops-$mode.log
    if KILN_REQUIRE_GPU=1 KILN_DETERMINISTIC=$det KILN_CUDA_ATTENTION=$att KILN_OPS_TIME=$tim \
       timeout 150 "$BUILD/test_compute_cuda_ops" >"$log" 2>&1; then
      row ops PASS "$mode: $(grep -c ' ok$' "$log") comparisons within tolerance, run-to-run bit-identical"
    else
      why=$(grep -E 'FAIL|KILN_REQUIRE_GPU|error' "$log" | head -3 | tr '\n' ' ')
      row ops FAIL "$mode: $(printf '%s' "${why:-$(tail -1 "$log")}" | cut -c1-200) (ops.log)"
    fi
    grep -E '^  time ' "$log" | sed "s/^  time /  [$mode] /" >>"$OUT/summary.txt"
    { echo "== test_compute_cuda_ops ($mode) =="; cat "$log"; } >>"$OUT/ops.log"
  done
else
  row ops n/a "no build"
fi

# ---- bf16 GEMM peak -----------------------------------------------------------------------------------------------
PEAK=0
if fits 60 && nvcc -O2 -arch=sm_$ARCH "$ROOT/tests/gpu/gemm_peak.cu" -lcublasLt -o "$BUILD/gemm_peak" >"$OUT/gemm.log" 2>&1 &&
   timeout 120 "$BUILD/gemm_peak" >>"$OUT/gemm.log" 2>&1; then
  PEAK=$(awk '/^peak_tflops/ {print $2}' "$OUT/gemm.log")
  row peak PASS "bf16 ${PEAK} TFLOP/s (8192^3, cuBLASLt); DiT shapes in gemm.log"
else
  row peak FAIL "see gemm.log"
fi

# ---- kiln generate: discover the flags the CLI has -------------------------------------------------------------------
HELP=""
[ $BUILT = 1 ] && [ -x "$KILN" ] && HELP=$("$KILN" generate --help 2>&1) && HAVE_GEN=1 || HAVE_GEN=0
flag() { # the first of the given flags that `kiln generate --help` lists (as a whole word: --perf is not --perf-dump)
  for f in "$@"; do printf '%s\n' "$HELP" | grep -q -E -- "(^|[[:space:],])$f([[:space:],=]|\$)" && { echo "$f"; return 0; }; done
  return 1
}
F_MODEL=$(flag --model --model-dir --models) F_DEV=$(flag --device) F_STEPS=$(flag --steps) F_SEED=$(flag --seed)
F_OUT=$(flag --out --output -o) F_PERF=$(flag --perf-json --perf --perf-dump) F_BATCH=$(flag --batch --batch-size -n)
F_W=$(flag --width -W) F_H=$(flag --height -H) F_SIZE=$(flag --size) F_PROMPT=$(flag --prompt -p) F_EXACT=$(flag --exact)
gen_missing=""
for v in F_MODEL F_DEV F_OUT F_PERF; do [ -z "${!v}" ] && gen_missing="$gen_missing ${v#F_}"; done
[ -z "$F_W$F_SIZE" ] && gen_missing="$gen_missing SIZE"
# gen MODEL DEVICE W H BATCH STEPS OUTPNG PERF [extra...]: one kiln generate run, at most 120 s (`timeout`
# cannot run a shell function, so the limit is applied here; environment: `VAR=value gen ...`)
gen() {
  local model=$1 dev=$2 w=$3 h=$4 b=$5 s=$6 png=$7 perf=$8
  shift 8
  local a=("$F_MODEL" "$model" "$F_DEV" "$dev" "$F_OUT" "$png" "$F_PERF" "$perf")
  if [ -n "$F_W" ]; then a+=("$F_W" "$w" "$F_H" "$h"); else a+=("$F_SIZE" "${w}x${h}"); fi
  [ -n "$F_STEPS" ] && a+=("$F_STEPS" "$s")
  [ -n "$F_SEED" ] && a+=("$F_SEED" 42)
  [ -n "$F_BATCH" ] && [ "$b" != 1 ] && a+=("$F_BATCH" "$b")
  if [ -n "$F_PROMPT" ]; then a+=("$F_PROMPT" "a red fox in the snow, studio light"); else a+=("a red fox in the snow, studio light"); fi
  echo "+ kiln generate ${a[*]} $*" >>"$OUT/pipeline.log"
  timeout 120 "$KILN" generate "${a[@]}" "$@" >>"$OUT/pipeline.log" 2>&1
}

# ---- tiny pipeline: CUDA vs CPU -----------------------------------------------------------------------------------
TINY="$ROOT/tests/data/tiny/diffusers"
if [ $HAVE_GEN = 0 ]; then
  row tiny n/a "kiln generate does not exist yet"
elif [ -n "$gen_missing" ]; then
  row tiny n/a "kiln generate lacks flags:$gen_missing"
elif [ ! -d "$TINY" ]; then
  row tiny n/a "no $TINY"
elif fits 40; then
  d=/tmp/kiln-gpu-tiny; mkdir -p $d
  if gen "$TINY" cpu 64 64 1 2 $d/cpu.png $d/cpu.json && gen "$TINY" cuda:0 64 64 1 2 $d/cuda.png $d/cuda.json; then
    if r=$("$PY" "$ROOT/tests/gpu/report.py" png $d/cpu.png $d/cuda.png 35); then row tiny PASS "FAST: $r"; else row tiny FAIL "FAST: $r"; fi
    if [ -n "$F_EXACT" ] && gen "$TINY" cpu 64 64 1 2 $d/cpu-x.png $d/cpu-x.json "$F_EXACT" &&
       gen "$TINY" cuda:0 64 64 1 2 $d/cuda-x.png $d/cuda-x.json "$F_EXACT"; then
      if r=$("$PY" "$ROOT/tests/gpu/report.py" png $d/cpu-x.png $d/cuda-x.png 45); then row tiny PASS "EXACT: $r"; else row tiny FAIL "EXACT: $r"; fi
    fi
  else
    row tiny FAIL "kiln generate failed: $(tail -2 "$OUT/pipeline.log" | tr '\n' ' ' | cut -c1-200)"
  fi
  # CUDA graphs: step 1 eager, step 2 captured, steps 3-4 replayed (src/pipeline/denoise_step.h); a replayed
  # graph must give the same bytes as eager launches (KILN_CUDA_GRAPHS=0)
  if KILN_LOG=debug gen "$TINY" cuda:0 64 64 1 4 $d/graph.png $d/graph.json &&
     KILN_CUDA_GRAPHS=0 gen "$TINY" cuda:0 64 64 1 4 $d/eager.png $d/eager.json; then
    g=$(grep -o '[0-9]* graphs captured, [0-9]* replays' "$OUT/pipeline.log" | tail -1)
    if cmp -s $d/graph.png $d/eager.png && [ -n "$g" ] && [ "${g%% *}" -ge 1 ]; then row graphs PASS "$g; image identical to eager"
    else row graphs FAIL "${g:-no close log}; identical to eager: $(cmp -s $d/graph.png $d/eager.png && echo yes || echo no)"; fi
  else
    row graphs FAIL "kiln generate failed (pipeline.log)"
  fi
else
  row tiny n/a "out of time"
fi

# ---- full size: random klein-4B weights, 4 steps ------------------------------------------------------------------
MANIFEST="$ROOT/tests/data/manifests/flux2-klein-4b.folder.diffusers.json"
if [ $HAVE_GEN = 0 ] || [ -n "$gen_missing" ]; then
  row full n/a "kiln generate missing or incomplete"
elif ! "$KILN" mkweights --help >/dev/null 2>&1; then
  row full n/a "kiln mkweights does not exist yet"
elif [ ! -f "$MANIFEST" ]; then
  row full n/a "no $MANIFEST"
elif ! fits 150; then
  row full n/a "out of time ($(left) s left)"
else
  if [ ! -f "$WEIGHTS/model_index.json" ]; then
    say "full: writing random weights to $WEIGHTS"
    timeout 150 "$KILN" mkweights --manifest "$MANIFEST" --out "$WEIGHTS" >>"$OUT/pipeline.log" 2>&1 ||
      row full FAIL "kiln mkweights failed (pipeline.log)"
  fi
  if [ -f "$WEIGHTS/model_index.json" ]; then
    : >"$OUT/perf.jsonl"
    for cfg in "512 512 1" "512 512 3" "1024 1024 1"; do
      set -- $cfg
      label="${1}x${2} b$3"
      fits 45 || { row full n/a "$label: out of time"; continue; }
      d=/tmp/kiln-gpu-full; mkdir -p $d
      # warm-up (weights into the page cache and onto the GPU, algorithm cache, graph capture), then the timed run
      gen "$WEIGHTS" cuda:0 "$1" "$2" "$3" 4 $d/warm.png $d/warm.json || { row full FAIL "$label: warm-up failed"; continue; }
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >$d/mem.txt 2>/dev/null &
      smi=$!
      gen "$WEIGHTS" cuda:0 "$1" "$2" "$3" 4 $d/img.png $d/perf.json
      rc=$?
      kill $smi 2>/dev/null; wait $smi 2>/dev/null
      mem=$(sort -n $d/mem.txt 2>/dev/null | tail -1)
      if [ $rc = 0 ]; then
        cat $d/perf.json >>"$OUT/perf.jsonl"; echo >>"$OUT/perf.jsonl"
        r=$("$PY" "$ROOT/tests/gpu/report.py" perf "$label" "$1" "$2" "$3" 4 $d/perf.json "${PEAK:-0}" "${mem:-?}")
        printf '%s\n' "$r" >>"$OUT/summary.txt"
        row full PASS "$(printf '%s' "$r" | head -1)"
      else
        row full FAIL "$label: kiln generate failed (pipeline.log)"
      fi
    done
  fi
fi

# ---- kiln bench ---------------------------------------------------------------------------------------------------
if [ $BUILT = 1 ] && [ -x "$KILN" ] && "$KILN" bench --help >/dev/null 2>&1; then
  # Default: a seed-000 style run of the 8-step graph through the in-process engine on the GPU, on full-size random
  # weights in the ComfyUI layout (the layout the graph's loader nodes name).
  COMFY_MANIFEST="$ROOT/tests/data/manifests/flux2-klein-4b.folder.comfy.json"
  COMFY=/tmp/kiln-gpu-comfy
  if [ -z "${KILN_GPU_BENCH_ARGS:-}" ] && [ -f "$COMFY_MANIFEST" ] && fits 150; then
    [ -f "$COMFY/vae/flux2-vae.safetensors" ] ||
      timeout 150 "$KILN" mkweights --manifest "$COMFY_MANIFEST" --out "$COMFY" >>"$OUT/pipeline.log" 2>&1
    KILN_GPU_BENCH_ARGS="run --url engine@cuda:0:$COMFY --arm h200-gpu-run --warmup 1 --timed 3
      --graph $ROOT/tests/data/bench/graphs/klein-4b-8st.json --bank $ROOT/tests/data/bench/prompt-bank.json
      -o $OUT/bench.json"
  fi
  if [ -n "${KILN_GPU_BENCH_ARGS:-}" ] && fits 90; then
    if timeout 150 "$KILN" bench $KILN_GPU_BENCH_ARGS >>"$OUT/pipeline.log" 2>&1; then row bench PASS "kiln bench $KILN_GPU_BENCH_ARGS"
    else row bench FAIL "kiln bench $KILN_GPU_BENCH_ARGS (pipeline.log)"; fi
  else
    row bench n/a "kiln bench exists; set KILN_GPU_BENCH_ARGS for a seed-000 style run ($(left) s left)"
  fi
else
  row bench n/a "kiln bench does not exist yet"
fi

# ---- compute-sanitizer (informational: works on Firecracker machines, not on gVisor) ---------------------------------
if [ $BUILT = 1 ] && command -v compute-sanitizer >/dev/null && fits 100; then
  if KILN_REQUIRE_GPU=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/test_compute_cuda_ops" >"$BUILD/sanitize.log" 2>&1; then
    row sanitize PASS "memcheck clean over the ops test"
  else
    row sanitize info "memcheck rc=$?: $(grep -m2 -E 'ERROR|Invalid|not supported' "$BUILD/sanitize.log" | tr '\n' ' ' | cut -c1-200)"
  fi
fi

say "done in $((SECONDS - T0)) s"
echo
echo "==== summary ($((SECONDS - T0)) s) ===="
cat "$OUT/summary.txt"
exit $FAILED
