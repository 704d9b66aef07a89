#!/usr/bin/env bash
# Text encoders as llama.cpp-named GGUFs through the kiln binary: `kiln generate --clip X.gguf` (klein, the tiny
# Qwen3 as Q8_0) and `--clip2 X.gguf` (FLUX.1 [dev], the tiny T5 as Q8_0) write their PNG; an encoder in the wrong
# slot is refused by name with the format exit code (4). The images' values
# are checked against the official pipelines in test_pipeline_quant; this checks the option wiring.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
te=$src/tests/data/gguf/te
k=$src/tests/data/tiny/comfy
f=$src/tests/data/tiny/flux1/comfy
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
png() { [ -s "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = "211PNG" ]; }

"$bin" generate -q -p "a red fox" --unet "$k/flux-2-klein-4b.safetensors" --clip "$te/qwen3-tiny-q8_0.gguf" \
    --vae "$k/flux2-vae.safetensors" -W 64 -H 48 --steps 2 --seed 3 -o "$out/klein.png" &&
    png "$out/klein.png" && echo "ok klein with --clip qwen3-tiny-q8_0.gguf" ||
    { echo "FAIL klein with a GGUF Qwen3"; fail=1; }
"$bin" generate -q -p "a red fox" --unet "$f/diffusion_models/flux1-dev.safetensors" \
    --clip "$f/text_encoders/clip_l.safetensors" --clip2 "$te/t5-tiny-q8_0.gguf" --vae "$f/vae/ae.safetensors" \
    -W 64 -H 48 --steps 2 --seed 3 -o "$out/flux1.png" &&
    png "$out/flux1.png" && echo "ok FLUX.1 with --clip2 t5-tiny-q8_0.gguf" ||
    { echo "FAIL FLUX.1 with a GGUF T5"; fail=1; }

refused() { # refused WANT_RC NEEDLE ARGS...
    local rc want=$1 needle=$2
    shift 2
    msg=$("$bin" generate -q -p "x" -W 64 -H 48 --steps 1 -o "$out/x.png" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -eq "$want" ] && grep -qF -- "$needle" <<<"$msg"; then echo "ok refused ($rc): $needle"
    else echo "FAIL want exit $want and '$needle', got $rc: $msg"; fail=1; fi
}
refused 4 "t5encoder GGUF, not a Qwen3" --unet "$k/flux-2-klein-4b.safetensors" --clip "$te/t5-q-q8_0.gguf" \
    --vae "$k/flux2-vae.safetensors"
refused 4 "qwen3 GGUF, not a T5" --unet "$f/diffusion_models/flux1-dev.safetensors" \
    --clip "$f/text_encoders/clip_l.safetensors" --clip2 "$te/qwen3-tiny-q8_0.gguf" --vae "$f/vae/ae.safetensors"
exit $fail
