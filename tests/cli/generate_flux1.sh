#!/usr/bin/env bash
# FLUX.1 through the kiln binary on the oracle's tiny [dev] and [schnell] models (tests/data/tiny/flux1): `kiln
# inspect` recognises every file of both layouts; `kiln generate` runs the diffusers folder (--model) and the four
# ComfyUI single files (--unet/--clip/--clip2/--vae), writes a PNG whose text chunks name the variant, prints the
# truncation warnings of a long prompt, and both layouts give the same bytes for the same seed (same weights).
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
t=$src/tests/data/tiny/flux1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
check() { # check PATH WANT("model/layout ...")
    local got
    got=$("$bin" inspect --json --summary "$1" 2>&1 | python3 -c 'import json,sys; print(" ".join(sorted(c.get("model","ERR")+"/"+c.get("layout", c.get("error","")) for c in json.load(sys.stdin)["checkpoints"])))' 2>&1)
    if [ "$got" = "$2" ]; then echo "ok inspect $1: $got"; else echo "FAIL inspect $1: got '$got', want '$2'"; fail=1; fi
}
check "$t/dev" "autoencoder-kl/diffusers clip-text/hf flux1-dit/diffusers t5-encoder/hf"
check "$t/comfy" "autoencoder-kl/bfl clip-text/hf flux1-dit/bfl flux1-dit/bfl t5-encoder/hf" # links: listed once
c=$t/comfy
idat() { python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read()[8:]; o=b""
while b:
    n,=struct.unpack(">I",b[:4]); o+=b[8:8+n] if b[4:8]==b"IDAT" else b""; b=b[12+n:]
sys.stdout.buffer.write(o)' "$1"; } # the pixel data, without the text chunks (which name the model path)
for v in dev schnell; do
    "$bin" generate -q -p "a red fox in the snow" --model "$t/$v" -W 80 -H 48 --steps 2 --seed 5 -o "$out/$v-d.png" \
        --exact || { echo "FAIL generate --model $v"; fail=1; }
    "$bin" generate -q -p "a red fox in the snow" --unet "$c/diffusion_models/flux1-$v.safetensors" \
        --clip "$c/text_encoders/clip_l.safetensors" --clip2 "$c/text_encoders/t5xxl_fp16.safetensors" \
        --vae "$c/vae/ae.safetensors" -W 80 -H 48 --steps 2 --seed 5 -o "$out/$v-c.png" --exact ||
        { echo "FAIL generate single files $v"; fail=1; }
    if cmp -s <(idat "$out/$v-d.png") <(idat "$out/$v-c.png") && [ -n "$(idat "$out/$v-d.png" | head -c1)" ]; then echo "ok $v: both layouts give the same pixels"; else
        echo "FAIL $v: the layouts differ"; fail=1; fi
    grep -aq "flux1-$v" "$out/$v-d.png" && echo "ok $v: PNG variant chunk" || { echo "FAIL $v: no variant chunk"; fail=1; }
done
long=$(printf 'a lighthouse on a rocky cliff at dusk, waves crashing below, %.0s' $(seq 60))
err=$("$bin" generate -q -p "$long" --model "$t/schnell" -W 32 -H 32 --steps 1 --seed 1 -o "$out/long.png" 2>&1)
grep -q "truncated for CLIP" <<<"$err" && grep -q "truncated for T5" <<<"$err" && echo "ok long prompt warnings" ||
    { echo "FAIL long prompt warnings: $err"; fail=1; }
# three single files without --clip2 are FLUX.2's; a FLUX.1 DiT then asks for the T5
err=$("$bin" generate -q -p x --unet "$c/diffusion_models/flux1-dev.safetensors" --clip "$c/text_encoders/clip_l.safetensors" \
      --vae "$c/vae/ae.safetensors" -o "$out/x.png" 2>&1)
[ $? -ne 0 ] && grep -q -- "--clip2" <<<"$err" && echo "ok missing --clip2 named" || { echo "FAIL missing --clip2: $err"; fail=1; }
# what FluxPipeline has no counterpart for is refused by name (until session 10 FLUX.1 ignored these silently)
for opt in "--lora $src/tests/data/lora/lora-bfl.safetensors:LoRA adapters with FLUX.1" \
           "--init $src/tests/data/images/init-96x64.png:an init image" \
           "--ref $src/tests/data/images/ref-90x70.png:reference images with FLUX.1"; do
    args=${opt%%:*} want=${opt#*:}
    # shellcheck disable=SC2086
    err=$("$bin" generate -q -p x --model "$t/dev" -W 32 -H 32 --steps 1 $args -o "$out/refused.png" 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "$want" <<<"$err" && [ ! -e "$out/refused.png" ]; then echo "ok ${args%% *} refused by name"
    else echo "FAIL ${args%% *}: exit $rc, '$err'"; fail=1; fi
done
exit $fail
