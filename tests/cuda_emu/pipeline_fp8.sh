#!/usr/bin/env bash
# pipeline_fp8.sh - e4m3 x e4m3 GEMMs (KILN_CUDA_FP8=1) through the whole klein pipeline on the emulated GPU (sm_90):
# the tiny model from a ComfyUI scaled-fp8 checkpoint, once with its weights widened to bf16 per matmul (the
# default) and once with the activations quantised to e4m3 per tensor instead. The stated bar for the fp8 path:
#   >= 30 dB   PSNR of the fp8 image against the widened one (measured 39.4 dB on this model)
#   < inf      the two differ: the fp8 GEMMs ran (a switch that never took them would pass the bar)
# ~2 min on 2 cores.
set -uo pipefail
: "${KILN_BIN:?KILN_BIN must point at the kiln of the emulator build}"
: "${KILN_SOURCE_DIR:?}"
ROOT=$KILN_SOURCE_DIR
T=$ROOT/tests/data/tiny/comfy
D=$(mktemp -d /tmp/kiln-emu-fp8.XXXXXX)
trap 'rm -rf "$D"' EXIT
gen() { # gen PNG: the scaled-fp8 klein on cuda:0, the log in $D/PNG.log
  timeout 900 "$KILN_BIN" generate -q --unet "$ROOT/tests/data/quant/klein-fp8_scaled.safetensors" \
    --clip "$T/qwen_3_4b.safetensors" --vae "$T/flux2-vae.safetensors" --device cuda:0 -W 64 -H 48 --steps 3 \
    --seed 7 -p "a red fox in fresh snow" -o "$D/$1" >"$D/$1.log" 2>&1 || { tail -20 "$D/$1.log"; return 1; }
}
gen widened.png || { echo "FAIL the widened run"; exit 1; }
KILN_CUDA_FP8=1 gen fp8.png || { echo "FAIL the KILN_CUDA_FP8=1 run"; exit 1; }
if r=$(python3 "$ROOT/tests/gpu/report.py" png "$D/widened.png" "$D/fp8.png" 30); then
  echo "ok   e4m3 x e4m3 against widened weights: $r"
else
  echo "FAIL e4m3 x e4m3 against widened weights: $r"
  exit 1
fi
case $r in *"PSNR inf"*) echo "FAIL the KILN_CUDA_FP8=1 image equals the widened one: the fp8 GEMMs did not run"; exit 1 ;; esac
echo "pipeline fp8 (emulated GPU): all passed"
