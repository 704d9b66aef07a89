#!/usr/bin/env bash
# kiln generate with the weights users have: GGUF and fp8 DiT files (tests/data/quant, made by the oracle) and
# LoRA adapters (--lora FILE[:STRENGTH], repeatable; --lora-merge), on the tiny model; and the refusals users
# meet, each with its message: a bad adapter file, a malformed --lora argument, a GGUF file with a type kiln
# cannot dequantise, an NVFP4 fp8 file.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
tiny=$src/tests/data/tiny
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_THREADS=${KILN_THREADS:-2}
te=(--clip "$tiny/comfy/qwen_3_4b.safetensors" --vae "$tiny/comfy/flux2-vae.safetensors")

expect() { # expect CODE MESSAGE -- ARGS...
    local code=$1 msg=$2 out rc
    shift 3
    out=$("$bin" generate -q "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$code" ]; then echo "FAIL generate $*: exit $rc, want $code ($out)"; fail=1; return; fi
    if [ -n "$msg" ] && ! grep -qF -- "$msg" <<<"$out"; then echo "FAIL generate $*: '$out' lacks '$msg'"; fail=1; return; fi
    echo "ok exit $rc: ${msg:-success}"
}
run=(-p "a red fox" -W 32 -H 32 --steps 2 --seed 5)
for f in klein-q8_0.gguf klein-q4_k.gguf klein-fp8_bfl.safetensors klein-fp8_scaled.safetensors; do
    expect 0 "" -- "${run[@]}" --unet "$src/tests/data/quant/$f" "${te[@]}" -o "$tmp/$f.png"
    [ -s "$tmp/$f.png" ] || { echo "FAIL no image from $f"; fail=1; }
done
L=$src/tests/data/lora
expect 0 "" -- "${run[@]}" --model "$tiny/diffusers" --lora "$L/lora-kohya.safetensors" -o "$tmp/l1.png"
expect 0 "" -- "${run[@]}" --model "$tiny/diffusers" --lora "$L/lora-kohya.safetensors:1" -o "$tmp/l2.png"
cmp -s "$tmp/l1.png" "$tmp/l2.png" || { echo "FAIL --lora F and F:1 differ"; fail=1; }
expect 0 "" -- "${run[@]}" --model "$tiny/diffusers" --lora "$L/lora-kohya.safetensors:0" -o "$tmp/l0.png"
expect 0 "" -- "${run[@]}" --model "$tiny/diffusers" -o "$tmp/none.png"
cmp -s "$tmp/l1.png" "$tmp/none.png" && { echo "FAIL the adapter changed nothing"; fail=1; }
expect 0 "" -- "${run[@]}" --unet "$src/tests/data/quant/klein-q8_0.gguf" "${te[@]}" --lora "$L/lora-bfl.safetensors:0.5" \
    --lora "$L/lora-diffusers.safetensors:0.8" --lora-merge -o "$tmp/stack.png"
expect 0 "" -- "${run[@]}" --unet "$src/tests/data/quant/klein-fp8_bfl.safetensors" "${te[@]}" --lora "$L/lora-kohya.safetensors:0.6" \
    -o "$tmp/fp8-lora.png"
expect 4 "rank mismatch" -- "${run[@]}" --model "$tiny/diffusers" --lora "$L/bad-rank.safetensors" -o "$tmp/e.png"
expect 4 "not a weight of this DiT" -- "${run[@]}" --model "$tiny/diffusers" --lora "$L/bad-target.safetensors" -o "$tmp/e.png"
expect 2 "not a finite number" -- "${run[@]}" --model "$tiny/diffusers" --lora "$L/lora-bfl.safetensors:nan" -o "$tmp/e.png"
expect 2 "no adapter file" -- "${run[@]}" --model "$tiny/diffusers" --lora ":0.5" -o "$tmp/e.png"
[ -e "$tmp/e.png" ] && { echo "FAIL a failed request left e.png"; fail=1; }
expect 7 "nvfp4" -- "${run[@]}" --unet "$src/tests/data/gguf/fp8-nvfp4.safetensors" "${te[@]}" -o "$tmp/e.png"
exit $fail
