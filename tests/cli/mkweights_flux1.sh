#!/usr/bin/env bash
# The full-size FLUX.1 [dev] and [schnell] manifests (tests/data/manifests/flux1-*.json, from the official classes by
# tools/reference/make_flux1_manifests.py): `kiln mkweights --sparse` writes each (real headers, data as holes: no
# disk), `kiln inspect` names every file's model, and the engine opens each layout with every shape checked (the
# request after it is refused for its size: the open is what is tested, not a 12 B-parameter forward).
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
export KILN_SOURCE_DIR=$src
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
man=$src/tests/data/manifests
for v in dev schnell; do
    for lay in diffusers comfy; do
        m=$man/flux1-$v.folder.$lay.json
        out=$tmp/$v-$lay
        if ! "$bin" mkweights --sparse --manifest "$m" --out "$out" >"$tmp/log" 2>&1; then
            echo "FAIL $m: $(cat "$tmp/log")"; fail=1; continue; fi
        got=$("$bin" inspect --json --summary "$out" | python3 -c 'import json,sys; print(" ".join(sorted(c["model"]+"/"+c["layout"] for c in json.load(sys.stdin)["checkpoints"])))')
        if [ $lay = diffusers ]; then want="clip-l/hf flux1-$v/diffusers flux1-vae/diffusers t5-xxl/hf"
        else want="clip-l/hf flux1-$v/bfl flux1-vae/bfl t5-xxl/hf"; fi
        if [ "$got" = "$want" ]; then echo "ok inspect $v $lay: $got"; else echo "FAIL inspect $v $lay: '$got'"; fail=1; fi
        if [ $lay = diffusers ]; then args=(--model "$out"); else
            args=(--unet "$out/diffusion_models/flux1-$v.safetensors" --clip "$out/text_encoders/clip_l.safetensors"
                  --clip2 "$out/text_encoders/t5xxl_fp16.safetensors" --vae "$out/vae/ae.safetensors"); fi
        err=$("$bin" generate -p x "${args[@]}" -W 8 -H 16 2>&1)
        if grep -q "FLUX.1 \[$v\]; DiT .* 3072x(19 double + 38 single), 24 heads; CLIP 768 x 12 layers; T5 4096 x 24 layers; VAE 16 latent" <<<"$err" &&
            grep -q "multiples of 16" <<<"$err"; then echo "ok engine opens $v $lay"; else
            echo "FAIL engine $v $lay: $err"; fail=1; fi
        rm -rf "$out"
    done
done
exit $fail
