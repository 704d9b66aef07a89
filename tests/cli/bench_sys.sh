#!/usr/bin/env bash
# kiln bench-sys runs end to end on small buffers (no timing is asserted: figures come from
# scripts/bench-foundation.sh): bandwidth rows, a bf16->f32 row per implementation, the checkpoint RSS
# report, valid --json, and its built-in check of the converted values (exit 0).
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
out=$("$bin" bench-sys --mb 16 --reps 1 --json --checkpoint "$src/tests/fuzz/corpus/fuzz_safetensors/good_small.safetensors")
rc=$?
[ $rc -eq 0 ] || { echo "FAIL bench-sys exit $rc"; exit 1; }
python3 - <<PY || exit 1
import json, sys
text = '''$out'''
j = json.loads(text[text.index("\n{") + 1:])
assert j["checkpoint"]["tensors"] == 4 and j["checkpoint"]["rss_after_mib"] > 0, j["checkpoint"]
assert any(r["isa"] == "scalar" for r in j["bf16_to_f32"]), j["bf16_to_f32"]
assert all(r["gb_per_s"] > 0 for r in j["bf16_to_f32"] + j["bandwidth"])
print("ok bench-sys:", len(j["bf16_to_f32"]), "conversion rows,", len(j["bandwidth"]), "bandwidth rows")
PY
"$bin" bench-sys --mb 1 >/dev/null 2>&1; [ $? -eq 2 ] && echo "ok bad --mb -> 2" || { echo "FAIL bad --mb"; exit 1; }
