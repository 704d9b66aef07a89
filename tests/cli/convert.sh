#!/usr/bin/env bash
# kiln convert: each --to format on the tiny FLUX.2 DiT, read back by kiln inspect (family, types); usage errors
# (exit 2), an existing OUT refused without --force, a failed conversion leaves no OUT or OUT.tmp.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
in=$src/tests/data/tiny/comfy/flux-2-klein-4b.safetensors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; fail=1; }

for fmt in gguf-q8_0 gguf-q4_k gguf-f16; do
    out=$("$bin" convert "$in" "$tmp/$fmt.gguf" --to "$fmt") || bad "$fmt: exit $?"
    info=$("$bin" inspect --summary "$tmp/$fmt.gguf") || bad "$fmt: inspect exit $?"
    grep -qF "model:      flux2-dit" <<<"$info" && ok "$fmt reads back as flux2-dit" || bad "$fmt: $info"
done
grep -qF "types:      Q8_0 x 26 Q4_K x 4 BF16 x 15" <<<"$("$bin" inspect --summary "$tmp/gguf-q4_k.gguf")" \
    && ok "q4_k type mix" || bad "q4_k type mix"
"$bin" convert "$in" "$tmp/fp8.safetensors" --to fp8-e4m3 >/dev/null || bad "fp8 exit $?"
grep -qF "fp8:        comfy-quant layout: e4m3 x 31" <<<"$("$bin" inspect --summary "$tmp/fp8.safetensors")" \
    && ok "fp8 reads back" || bad "fp8 inspect"

"$bin" convert "$in" "$tmp/x.gguf" --to gguf-q3_k 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF "is not one of gguf-q8_0" "$tmp/err" && ok "unknown --to" || bad "unknown --to: $rc"
"$bin" convert "$in" --to gguf-q8_0 2>/dev/null; [ $? -eq 2 ] && ok "missing OUT" || bad "missing OUT"
"$bin" convert "$in" "$tmp/x.gguf" --bogus 2>/dev/null; [ $? -eq 2 ] && ok "unknown option" || bad "unknown option"
"$bin" convert --help | grep -qF -- "--to FORMAT             gguf-q8_0 | gguf-q4_k" && ok "help from the table" || bad "help"
"$bin" convert "$in" "$tmp/gguf-f16.gguf" --to gguf-f16 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF "exists (--force replaces it)" "$tmp/err" && ok "existing OUT refused" || bad "existing OUT: $rc"
"$bin" convert "$in" "$tmp/gguf-f16.gguf" --to gguf-q8_0 --force >/dev/null && ok "--force" || bad "--force"
"$bin" convert "$tmp/fp8.safetensors" "$tmp/y.gguf" --to gguf-q8_0 2>"$tmp/err"; rc=$?
[ $rc -eq 7 ] && [ ! -e "$tmp/y.gguf" ] && [ ! -e "$tmp/y.gguf.tmp" ] && ok "failed conversion leaves nothing" \
    || bad "failed conversion: rc $rc, $(cat "$tmp/err")"
exit $fail
