#!/usr/bin/env bash
# kiln inspect on the oracle's tiny checkpoints (tests/data/tiny: ComfyUI single files and diffusers folders,
# written by the official classes): every file opens and is recognised with the right family and layout.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
tiny=$src/tests/data/tiny
fail=0
check() { # check PATH WANT("model/layout ...")
    local got
    got=$("$bin" inspect --json --summary "$1" 2>&1 | python3 -c 'import json,sys; print(" ".join(sorted(c.get("model","ERR")+"/"+c.get("layout", c.get("error","")) for c in json.load(sys.stdin)["checkpoints"])))' 2>&1)
    if [ "$got" = "$2" ]; then echo "ok $1: $got"; else echo "FAIL $1: got '$got', want '$2'"; fail=1; fi
}
check "$tiny/comfy/flux-2-klein-4b.safetensors" "flux2-dit/bfl"
check "$tiny/comfy/qwen_3_4b.safetensors" "qwen3/hf"
check "$tiny/comfy/flux2-vae.safetensors" "flux2-vae/diffusers"
check "$tiny/diffusers" "flux2-dit/diffusers flux2-vae/diffusers qwen3/hf"
check "$tiny/diffusers/text_encoder" "qwen3/hf"
out=$("$bin" inspect "$tiny/comfy/flux-2-klein-4b.safetensors") || { echo "FAIL text output"; fail=1; }
grep -q "img_in.weight" <<<"$out" && grep -q "2 double + 3 single blocks" <<<"$out" && echo "ok text listing" ||
    { echo "FAIL text listing: $out" | head -5; fail=1; }
exit $fail
