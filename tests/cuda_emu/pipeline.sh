#!/usr/bin/env bash
# pipeline.sh - the whole FLUX.2 [klein] pipeline on the emulated GPU (the KILN_CUDA_EMU build), the checks
# tests/gpu/run.sh makes on a real one (its "tiny" and "graphs" parts): the golden request (80x48, 4 steps, its
# injected noise) through `kiln generate --device cuda`
#   --exact   against the official fp32 pipeline's image: >= 40 dB (the CPU gives inf)
#   graphs    the same run with KILN_CUDA_GRAPHS=0 gives the same pixels, and the graphed run captured the
#             denoising step and replayed it (the backend's close line)
#   FAST      against the official bf16 pipeline's image: >= 30 dB (the CPU gives 41.6)
# ~3 min on 2 cores: the emulator runs every GPU thread.
set -uo pipefail
: "${KILN_BIN:?KILN_BIN must point at the kiln of the emulator build}"
: "${KILN_SOURCE_DIR:?}"
ROOT=$KILN_SOURCE_DIR
TINY=$ROOT/tests/data/tiny/diffusers GOLD=$ROOT/tests/data/golden
PROMPT="A photo of a red fox in fresh snow, golden hour, 35mm film grain"
D=$(mktemp -d /tmp/kiln-emu-pipeline.XXXXXX)
trap 'rm -rf "$D"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
gen() { # gen PNG [args]: the golden's request on cuda:0, the log in $D/PNG.log
  local png=$1
  shift
  KILN_LOG=info timeout 900 "$KILN_BIN" generate -q --model "$TINY" --device cuda:0 -W 80 -H 48 --steps 4 \
    --noise "$GOLD/pipeline_b1_f32.safetensors" -p "$PROMPT" -o "$D/$png" "$@" >"$D/$png.log" 2>&1 ||
    { tail -20 "$D/$png.log"; return 1; }
}
report() { python3 "$ROOT/tests/gpu/report.py" "$@"; }
source "$ROOT/tests/cuda_emu/graphs.bash"

if gen exact.png --exact && r=$(report golden "$GOLD/pipeline_b1_f32.safetensors" "$D/exact.png" 40); then
  ok "--exact: $r"
else
  fail "--exact: ${r:-kiln generate failed}"
fi
check_graphs "$D/exact.png.log" 1
if KILN_CUDA_GRAPHS=0 gen eager.png --exact && report png "$D/exact.png" "$D/eager.png" inf >/dev/null; then
  ok "the graphed run's pixels equal eager launches' (KILN_CUDA_GRAPHS=0)"
else
  fail "graphed and eager runs differ"
fi
if gen fast.png && r=$(report golden "$GOLD/pipeline_b1_bf16.safetensors" "$D/fast.png" 30); then
  ok "FAST: $r"
else
  fail "FAST: ${r:-kiln generate failed}"
fi
[ $fails = 0 ] && echo "pipeline (emulated GPU): all passed" || exit 1
