#!/usr/bin/env bash
# kiln mkweights: the small test manifest generates real data that `kiln inspect` opens; every committed
# full-size manifest (tests/data/manifests) generates with --sparse (real headers, data as holes: no disk)
# and `kiln inspect` recognises each file's model and layout; bad usage and bad manifests fail cleanly.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
export KILN_SOURCE_DIR=$src
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fail=1; }

if "$bin" mkweights --manifest "$src/tests/data/mkweights/small.json" --out "$tmp/small" --seed 3 >"$tmp/log" 2>&1 &&
    "$bin" inspect --summary "$tmp/small" >"$tmp/inspect" 2>&1; then ok "small manifest generates and inspects"
else bad "small manifest: $(cat "$tmp/log" "$tmp/inspect")"; fi
grep -q "4 tensors" "$tmp/inspect" && grep -q "model.safetensors.index.json" "$tmp/inspect" || bad "small: index not inspected"

# Each full-size manifest: expected model ids per file, in manifest order of `kiln inspect`'s folder walk
check() { # check MANIFEST EXPECTED_IDS...
    local m=$1; shift
    local out="$tmp/$(basename "$m" .json)"
    if ! "$bin" mkweights --sparse --manifest "$m" --out "$out" >"$tmp/log" 2>&1; then bad "$m: $(cat "$tmp/log")"; return; fi
    if ! "$bin" inspect --json --summary "$out" >"$tmp/j" 2>"$tmp/e"; then bad "$m: inspect failed: $(cat "$tmp/e")"; return; fi
    local got
    got=$(python3 -c 'import json,sys; print(" ".join(sorted(c["model"]+"/"+c["layout"] for c in json.load(open(sys.argv[1]))["checkpoints"])))' "$tmp/j")
    local want
    want=$(printf '%s\n' "$@" | sort | tr '\n' ' ' | sed 's/ $//')
    if [ "$got" = "$want" ]; then ok "$(basename "$m"): $got"; else bad "$(basename "$m"): got '$got', want '$want'"; fi
    rm -rf "$out"
}
man=$src/tests/data/manifests
check "$man/flux2-klein-4b.dit.bfl.json" flux2-klein-4b/bfl
check "$man/flux2-klein-4b.dit.diffusers.json" flux2-klein-4b/diffusers
check "$man/qwen3-4b.text_encoder.comfy.json" qwen3-4b/hf
check "$man/qwen3-4b.text_encoder.diffusers.json" qwen3-4b/hf
check "$man/flux2-vae.vae.diffusers.json" flux2-vae/diffusers
check "$man/flux2-vae.vae.comfy.json" flux2-vae/diffusers
check "$man/flux2-vae.vae.bfl.json" flux2-vae/bfl
check "$man/flux2-klein-4b.folder.comfy.json" flux2-klein-4b/bfl qwen3-4b/hf flux2-vae/diffusers
check "$man/flux2-klein-4b.folder.diffusers.json" flux2-klein-4b/diffusers qwen3-4b/hf flux2-vae/diffusers
check "$man/flux2-klein-base-4b.folder.diffusers.json" flux2-klein-4b/diffusers qwen3-4b/hf flux2-vae/diffusers

# every committed manifest validates (dry run)
for m in "$man"/*.json; do
    "$bin" mkweights --dry-run --manifest "$m" >/dev/null 2>"$tmp/e" || bad "dry run $m: $(cat "$tmp/e")"
done
ok "dry runs"

# usage and input errors
"$bin" mkweights --out "$tmp/x" >/dev/null 2>&1; [ $? -eq 2 ] && ok "missing --manifest -> 2" || bad "missing --manifest"
"$bin" mkweights --manifest "$tmp/none.json" --out "$tmp/x" >/dev/null 2>&1; [ $? -eq 3 ] && ok "absent manifest -> 3" || bad "absent manifest"
printf '{"format":"kiln-manifest/1","model":"m","component":"dit","layout":"bfl","files":[{"path":"../x.safetensors","tensors":[{"name":"a","dtype":"F32","shape":[1]}]}]}' >"$tmp/evil.json"
out=$("$bin" mkweights --manifest "$tmp/evil.json" --out "$tmp/x" 2>&1); rc=$?
[ $rc -eq 4 ] && grep -q "without '..'" <<<"$out" && ok "path escape -> 4" || bad "path escape: $rc $out"
[ ! -e "$tmp/x.safetensors" ] || bad "path escape wrote a file"
"$bin" mkweights --manifest "$src/tests/data/mkweights/small.json" --out "$tmp/x" --seed -1 >/dev/null 2>&1
[ $? -eq 2 ] && ok "bad seed -> 2" || bad "bad seed"
exit $fail
