#!/usr/bin/env bash
# kiln inspect on every corrupt case of the fuzz seed corpus: exit code 4 (format) and the specific message,
# never a crash; valid files exit 0; plus a missing shard (3), a missing path (3), a bad option (2), --json.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
corpus=$src/tests/fuzz/corpus/fuzz_safetensors
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() { # expect FILE CODE MESSAGE
    local out rc
    out=$("$bin" inspect "$1" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$2" ]; then echo "FAIL $1: exit $rc, want $2 ($out)"; fail=1; return; fi
    if [ -n "$3" ] && ! grep -qF -- "$3" <<<"$out"; then echo "FAIL $1: message '$out' lacks '$3'"; fail=1; return; fi
    echo "ok $(basename "$1") -> $rc"
}

expect "$corpus/bad_truncated.safetensors" 4 "run past the end of the file"
expect "$corpus/bad_short.safetensors" 4 "too short for the 8-byte header length"
expect "$corpus/bad_json.safetensors" 4 "header is not valid JSON"
expect "$corpus/bad_hlen_2_63.safetensors" 4 "header length 9223372036854775808 exceeds the limit"
expect "$corpus/bad_header_past_eof.safetensors" 4 "runs past the end of the file"
expect "$corpus/bad_offsets_eof.safetensors" 4 "data_offsets [0, 16] run past the end"
expect "$corpus/bad_overlap.safetensors" 4 "tensors 'a' [0, 8) and 'b' [4, 12) overlap"
expect "$corpus/bad_shape_mismatch.safetensors" 4 "dtype F32 x shape [3] is 12 bytes but data_offsets span 8"
expect "$corpus/bad_unknown_dtype.safetensors" 4 "unknown dtype 'F12'"
expect "$corpus/bad_duplicate.safetensors" 4 "duplicate tensor names"
expect "$corpus/bad_non_utf8.safetensors" 4 "not valid UTF-8"
expect "$corpus/bad_not_object.safetensors" 4 "header is not a JSON object"
expect "$corpus/bad_negative_shape.safetensors" 4 "shape entry 0 is not a non-negative integer"
expect "$corpus/bad_begin_gt_end.safetensors" 4 "data_offsets begin 2 > end 1"
expect "$corpus/bad_empty_name.safetensors" 4 "a tensor has an empty name"
expect "$corpus/bad_metadata.safetensors" 4 "__metadata__ value for 'format' is not a string"
expect "$corpus/bad_too_many_dims.safetensors" 4 "9 dimensions, more than 8"
for g in "$corpus"/good_*.safetensors; do expect "$g" 0 ""; done

# a sharded checkpoint whose index names a shard that is not there
mkdir -p "$tmp/sh"
cp "$corpus/good_small.safetensors" "$tmp/sh/m-00001-of-00002.safetensors"
printf '{"weight_map":{"w":"m-00001-of-00002.safetensors","b":"m-00001-of-00002.safetensors","n":"m-00001-of-00002.safetensors","e":"m-00001-of-00002.safetensors","x":"m-00002-of-00002.safetensors"}}' \
    >"$tmp/sh/m.safetensors.index.json"
expect "$tmp/sh/m.safetensors.index.json" 3 "names shard m-00002-of-00002.safetensors"
expect "$tmp/sh" 3 "cannot open"
expect "$tmp/absent.safetensors" 3 "No such file"
mkdir -p "$tmp/empty"
expect "$tmp/empty" 3 "no .safetensors checkpoint"

out=$("$bin" inspect --frobnicate 2>&1); rc=$?
if [ $rc -ne 2 ]; then echo "FAIL bad option: exit $rc"; fail=1; else echo "ok bad option -> 2"; fi

# --json is valid JSON with the tensor list; a folder with good and bad files reports both and exits non-zero
mkdir -p "$tmp/mixed"
cp "$corpus/good_small.safetensors" "$corpus/bad_overlap.safetensors" "$tmp/mixed/"
"$bin" inspect --json --sha256 "$tmp/mixed" >"$tmp/out.json" 2>"$tmp/err.txt"; rc=$?
if [ $rc -ne 4 ]; then echo "FAIL mixed folder: exit $rc, want 4"; fail=1; fi
if ! python3 - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["checkpoints"]
assert len(c) == 2, c
bad = [x for x in c if "error" in x]
good = [x for x in c if "error" not in x]
assert len(bad) == 1 and "overlap" in bad[0]["error"] and bad[0]["status"] == "format", bad
g = good[0]
assert g["tensor_count"] == 4 and g["parameters"] == 6 + 3 + 1 + 0, g
assert {t["name"] for t in g["tensors"]} == {"w", "b", "n", "e"}
assert len(g["files"][0]["sha256"]) == 64
assert g["metadata"] == {"format": "pt"}
PY
then echo "FAIL --json output"; fail=1; else echo "ok --json"; fi

# sha256 matches the system's sha256sum
want=$(sha256sum "$corpus/good_small.safetensors" | cut -d' ' -f1)
if ! "$bin" inspect --sha256 --summary "$corpus/good_small.safetensors" | grep -q "$want"; then
    echo "FAIL --sha256 differs from sha256sum"; fail=1; else echo "ok --sha256"; fi
exit $fail
