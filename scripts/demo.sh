#!/usr/bin/env bash
# The main job on a generated model: write a small random-weight checkpoint folder with `kiln mkweights`
# (diffusers-style: transformer/, text_encoder/ shards + index, vae/, tokenizer/) and `kiln inspect` it.
# Usage: scripts/demo.sh [OUTDIR]   (default out/demo; `make demo` builds first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KILN_BIN:-$root/build/kiln}
out=${1:-$root/out/demo}
[ -x "$bin" ] || { echo "demo: no kiln binary at $bin (run make build)"; exit 2; }
export KILN_SOURCE_DIR=$root
"$bin" mkweights --manifest "$root/tests/data/mkweights/small.json" --out "$out" --seed 42
"$bin" inspect --summary "$out"
echo "demo: ok - checkpoints in $out"

# Text to image. Real weights: set KILN_MODEL to a diffusers FLUX.2 [klein] folder (or KILN_UNET, KILN_CLIP,
# KILN_VAE to the three ComfyUI files). Without them the image comes from the tiny random model of
# tests/data/tiny: the pipeline is real, the picture is noise.
prompt=${KILN_PROMPT:-"a red fox in fresh snow, golden hour"}
if [ -n "${KILN_MODEL:-}" ]; then
    model=(--model "$KILN_MODEL"); size=(-W 512 -H 512)
elif [ -n "${KILN_UNET:-}" ]; then
    model=(--unet "$KILN_UNET" --clip "${KILN_CLIP:?KILN_CLIP not set}" --vae "${KILN_VAE:?KILN_VAE not set}"); size=(-W 512 -H 512)
else
    echo "demo: no real weights configured (KILN_MODEL): generating on the TINY RANDOM test model - expect noise"
    model=(--model "$root/tests/data/tiny/diffusers"); size=(-W 256 -H 256)
fi
"$bin" generate -p "$prompt" "${model[@]}" "${size[@]}" --steps 4 --seed 42 -o "$out/image.png" --perf-dump "$out/image.perf.json"
echo "demo: ok - image in $out/image.png, per-stage timings in $out/image.perf.json"
