#!/usr/bin/env bash
# The full-size FLUX.2 [klein] 4B layouts load into kiln's structs with every shape checked: `kiln mkweights
# --sparse` writes the real checkpoints' headers from tests/data/manifests (no disk used), `kiln generate`
# opens them (diffusers folder, klein-base folder, ComfyUI single files) and prints the dimensions it read;
# the request is then refused by the up-front memory estimate (--memory-limit 1 GB: exit 6, nothing computed).
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
man=$src/tests/data/manifests
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mk() { "$bin" mkweights --manifest "$man/$1" --out "$tmp/$2" --sparse >/dev/null 2>&1 || { echo "FAIL mkweights $1"; fail=1; }; }
mk flux2-klein-4b.folder.diffusers.json dif
mk flux2-klein-base-4b.folder.diffusers.json base
mk flux2-klein-4b.folder.comfy.json comfy
mk flux2-vae.vae.bfl.json bflvae

check() { # check LABEL WANT... -- ARGS
    local label=$1 out rc
    shift
    local want=()
    while [ "$1" != "--" ]; do want+=("$1"); shift; done
    shift
    out=$("$bin" generate -p "a fox" -W 512 -H 512 --memory-limit 1 -o "$tmp/x.png" "$@" 2>&1)
    rc=$?
    [ "$rc" -eq 6 ] || { echo "FAIL $label: exit $rc, want 6: $out"; fail=1; return; }
    for w in "${want[@]}"; do
        grep -qF -- "$w" <<<"$out" || { echo "FAIL $label: output lacks '$w': $out"; fail=1; return; }
    done
    echo "ok $label"
}

check "diffusers folder" "DiT diffusers 3072x(5 double + 20 single), 24 heads" "Qwen3 2560 hidden x 27 layers" \
    "VAE 32 latent channels, 4 levels" "klein] distilled" "not enough memory" -- --model "$tmp/dif"
check "klein base folder" "klein] base" "DiT diffusers 3072x(5 double + 20 single)" -- --model "$tmp/base"
check "comfy files" "DiT BFL 3072x(5 double + 20 single), 24 heads" "Qwen3 2560 hidden x 27 layers" -- \
    --unet "$tmp/comfy/diffusion_models/flux-2-klein-4b.safetensors" \
    --clip "$tmp/comfy/text_encoders/qwen_3_4b.safetensors" --vae "$tmp/comfy/vae/flux2-vae.safetensors"
# the VAE under BFL/ldm names (ae.safetensors: up levels numbered finest first, attention as 1x1 convs)
check "BFL-named VAE" "VAE 32 latent channels, 4 levels" -- \
    --unet "$tmp/comfy/diffusion_models/flux-2-klein-4b.safetensors" \
    --clip "$tmp/comfy/text_encoders/qwen_3_4b.safetensors" --vae "$tmp/bflvae/ae.safetensors"
[ -e "$tmp/x.png" ] && { echo "FAIL a refused request wrote x.png"; fail=1; }
exit $fail
