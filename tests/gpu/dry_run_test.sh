#!/usr/bin/env bash
# tests/gpu/dry_run_test.sh - tests/gpu/run.sh's own logic without a GPU (ctest gpu_run_dry): its --dry-run
# stand-ins print what the GPU-side programs print, the tiny pipeline runs on the real CPU kiln. Checks that good
# results give PASS rows and exit 0, and that a failing or missing part gives FAIL / "not run" and exit 1 - never
# an "ok" for what did not run.
set -u
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
export KILN_GPU_DRY_KILN=${KILN_BIN:?KILN_BIN not set} KILN_THREADS=1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # run NAME [VAR=value...]: one dry run into $tmp/NAME; rc in $tmp/NAME.rc
  local name=$1
  shift
  env "$@" OUT="$tmp/$name" bash "$src/tests/gpu/run.sh" --dry-run >"$tmp/$name.log" 2>&1
  echo $? >"$tmp/$name.rc"
}
has() { # has NAME REGEX: the summary of run NAME has a line matching REGEX
  grep -qE -- "$2" "$tmp/$1/summary.txt" || { echo "FAIL $1: no summary line /$2/"; sed 's/^/    /' "$tmp/$1/summary.txt"; fail=1; }
}
hasnt() { grep -qE -- "$2" "$tmp/$1/summary.txt" && { echo "FAIL $1: unexpected /$2/"; fail=1; }; return 0; }
rc_is() { [ "$(cat "$tmp/$1.rc")" = "$2" ] || { echo "FAIL $1: exit $(cat "$tmp/$1.rc"), want $2"; tail -5 "$tmp/$1.log"; fail=1; }; }

# 1. everything good (the graphs part reads replays from the backend's close line)
run good
rc_is good 0
for part in units ops peak tiny graphs full memory sanitize; do has good "^$part +PASS "; done
has good "^ops +PASS +simple:"
has good "= 83.3% of peak; attention .*tensor cores.* = 59.6% of peak"
has good "the f32 attention kernel \(KILN_CUDA_ATTENTION=simple\): 155.0 TFLOP/s = 19.9% of peak"
has good "^tiny +PASS +FAST \(the f32 attention kernel"
# cuDNN's SDPA passed and timed faster than the default (650 vs 465 TFLOP/s): the tiny and full-size parts use it
has good "^cudnn +PASS +KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn: .* 12 attention and 6 conv2d calls by cuDNN; attention 4608 x 24 x 128: 650.0 TFLOP/s \(the default: 465.0\); conv2d 3x3 128 at 1024\^2: 300.0 TFLOP/s \(im2col \+ GEMM: 60.0\)"
has good "^tiny +PASS +FAST \(cuDNN's SDPA and convolutions, KILN_CUDA_ATTENTION=cudnn KILN_CUDA_CONV=cudnn\): golden .*; 2 graph replays, identical to eager"
has good "^full +PASS +kiln bench, one process, warm-up excluded, attention cudnn, conv2d cudnn, wide head gemm, Q in shared memory 1"
has good "^ops +PASS +qsmem:"
has good "^ops +PASS +widegemm:"
has good "^profile +skipped +not run: dry run"
has good "^tiny +PASS +--exact: golden pipeline_b1_f32"
has good "^graphs +PASS +1 captured, 2 replayed"
has good "1024x1024 b1 4 steps: .* s/image median of 3 timed \(warm-up excluded\)"
has good "512x512 b3 4 steps"
has good "^memory +PASS +arena 2900 MiB, weights 15800 MiB"
hasnt good "FAIL|not run \(|^[a-z]+ +not run"
# the dry run's stand-in nvidia-smi shows one GPU: the parallel part says so (optional, the run still passes)
has good "^parallel +skipped +not run: 1 GPU"
grep -q "ALL REQUIRED PARTS PASSED" "$tmp/good.log" || { echo "FAIL good: no verdict line"; fail=1; }

# 2. a captured graph that is never replayed fails the run; so does a failing bench (and memory is then not run)
run noreplay "KILN_GPU_DRY_FAIL=graphs full"
rc_is noreplay 1
has noreplay "^graphs +FAIL +captured 1, replayed 0"
has noreplay "^tiny +PASS"
has noreplay "^full +FAIL +kiln bench failed"
has noreplay "^memory +not run"
has noreplay "^tiny +FAIL +FAST \(cuDNN's SDPA and convolutions\): .*replays 0 \(must be >= 1\)"

# 3. no compute-sanitizer and too little time: "not run" rows - and a required part not run fails the run
run bad KILN_GPU_DRY_NO=compute-sanitizer KILN_GPU_BUDGET_S=30
rc_is bad 1
has bad "^ops +PASS +default"
has bad "^peak +not run +out of time"
has bad "^tiny +not run +out of time"
has bad "^full +not run +out of time"
has bad "^memory +not run"
has bad "^sanitize +skipped +not run: no compute-sanitizer"
hasnt bad "^(peak|tiny|full|memory|sanitize) +PASS"
grep -q "==== kiln GPU run: FAILED" "$tmp/bad.log" || { echo "FAIL bad: no FAILED verdict"; fail=1; }

# 4. failing op comparisons and a failing pipeline
run broken "KILN_GPU_DRY_FAIL=ops tiny"
rc_is broken 1
has broken "^ops +FAIL +default"
has broken "^peak +not run +fractions"
has broken "^tiny +FAIL +--exact: kiln generate failed"
has broken "^graphs +FAIL"
has broken "^full +PASS .*attention simple" # the default attention's comparison failed: the f32 kernel

# 5. a kiln built without cuDNN: the cudnn part is skipped, saying why, and the rest runs with the default
run nocudnn KILN_GPU_DRY_NO=cudnn
rc_is nocudnn 0
has nocudnn "^cudnn +skipped +not run: built without cuDNN"
has nocudnn "^full +PASS +kiln bench, one process, warm-up excluded, attention default, conv2d default, wide head gemm"
hasnt nocudnn "cuDNN's SDPA"

# 6. cuDNN's SDPA passes but times slower than the default: the full-size run keeps the default attention, and
# takes cuDNN's convolutions, which timed faster; then the other way round
run slowcudnn DRY_CUDNN_TF=300.0
rc_is slowcudnn 0
has slowcudnn "^cudnn +PASS .*300.0 TFLOP/s \(the default: 465.0\)"
has slowcudnn "^full +PASS +kiln bench, one process, warm-up excluded, attention default, conv2d cudnn"
run slowconv DRY_CUDNN_CONV_TF=50.0 DRY_WIDE_GEMM_TF=90.0 DRY_QS_TF=400.0
has slowconv "^full +PASS +kiln bench, one process, warm-up excluded, attention cudnn, conv2d default, wide head default, Q in shared memory 0"
[ $fail = 0 ] && echo "ok: tests/gpu/run.sh --dry-run, 7 scenarios"
exit $fail
