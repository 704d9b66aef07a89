#!/usr/bin/env bash
# bench_flux1.sh - a seed-001-style A/B/B/A report of two kiln configurations on the tiny FLUX.1 [dev] model
# (docs/bench-report.md): `kiln bench compare` of the in-process engine with 1 thread (a) and 2 threads (b),
# driven by the official dev template's nodes (tests/data/bench/graphs/flux1-dev-2st.json: DualCLIPLoader with
# T5 named first, FluxGuidance, EmptySD3LatentImage, ModelSamplingFlux, BasicScheduler). The report must pass
# `kiln bench check`, carry engine_e2e_s, denoise_s, stages and output_sha256 per row in A/B/B/A order, and the
# two configurations must give byte-identical pixels. Then what the engine target cannot honour is refused by
# name: a true CFG, two CLIP-L files and no T5; another ModelSamplingFlux shift gives another image.
set -euo pipefail
: "${KILN_BIN:?}" "${KILN_SOURCE_DIR:?}"
data=$(cd "$KILN_SOURCE_DIR/tests/data" && pwd)
t=$data/tiny/flux1/comfy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
m=$tmp/models
mkdir -p "$m/diffusion_models" "$m/text_encoders" "$m/vae"
ln -s "$t/diffusion_models/flux1-dev.safetensors" "$m/diffusion_models/"
ln -s "$(readlink -f "$t/text_encoders/clip_l.safetensors")" "$m/text_encoders/clip_l.safetensors"
ln -s "$(readlink -f "$t/text_encoders/t5xxl_fp16.safetensors")" "$m/text_encoders/t5xxl_fp16.safetensors"
ln -s "$t/vae/ae.safetensors" "$m/vae/"
graph=$data/bench/graphs/flux1-dev-2st.json

"$KILN_BIN" bench compare --a "engine@cpu,threads=1:$m" --b "engine@cpu,threads=2:$m" --graph "$graph" \
  --bank "$data/bench/prompt-bank.json" --cell still-orchard-1__dwelling --rounds 1 --warmup 0 \
  --label-a threads1 --label-b threads2 -o "$tmp/ab.json" --md "$tmp/ab.md" >"$tmp/log" 2>&1 ||
  fail "compare failed: $(tail -5 "$tmp/log")"
"$KILN_BIN" bench check "$tmp/ab.json" | grep -q "abba report, valid" || fail "report invalid: $("$KILN_BIN" bench check "$tmp/ab.json" 2>&1)"
grep -q "Identical outputs: yes." "$tmp/ab.md" || fail "1 and 2 threads give different pixels"
python3 - "$tmp/ab.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
def need(c, m):
    if not c: sys.exit("FAIL: " + m)
rows = r["rows"]
need([x["side"] for x in rows] == list("abba"), "A/B/B/A order")
for x in rows:
    need(x["engine_e2e_s"] > 0 and x["denoise_s"] > 0, "engine_e2e_s and denoise_s per row")
    need({s["name"] for s in x["stages"]} >= {"TextEncoding", "Denoising", "Decoding"}, "stages per row")
    need(len(x["output_sha256"]) == 64, "output_sha256 per row")
need(len({x["output_sha256"] for x in rows}) == 1, "one digest")
need(set(r["summary"]["engine_e2e_s"]) >= {"threads1", "threads2", "reduction_percent"}, "A/B/B/A summary")
print("bench_flux1: report ok")
PY

# what the engine cannot run as asked is refused by name
variant() { # variant NAME PYTHON-EDIT WANT-IN-ERROR
  python3 -c "import json,sys; g=json.load(open(sys.argv[1])); $2; json.dump(g, open(sys.argv[2], 'w'))" "$graph" "$tmp/$1.json"
  if "$KILN_BIN" bench run --url "engine:$m" --graph "$tmp/$1.json" --timed 1 --warmup 0 \
      --bank "$data/bench/prompt-bank.json" -o "$tmp/$1.out.json" >"$tmp/$1.log" 2>&1; then fail "$1 accepted"; fi
  grep -qF "$3" "$tmp/$1.log" || fail "$1: unclear error: $(tail -3 "$tmp/$1.log")"
  echo "ok $1 refused"
}
variant true-cfg 'g["99"]={"class_type":"KSampler","inputs":{"cfg":3.0,"seed":1,"steps":2}}' "true CFG of 3"
# ModelSamplingFlux's shift is computed as kiln serve's node computes it: another max_shift, another image
python3 -c "import json,sys; g=json.load(open(sys.argv[1])); g['30']['inputs']['max_shift']=2.0; json.dump(g, open(sys.argv[2], 'w'))" \
  "$graph" "$tmp/shift.json"
for g in default shift; do
  [ $g = default ] && f=$graph || f=$tmp/shift.json
  "$KILN_BIN" bench run --url "engine:$m" --graph "$f@still-orchard-1__dwelling" --timed 1 --warmup 0 \
    --bank "$data/bench/prompt-bank.json" -o "$tmp/$g.out.json" >"$tmp/$g.log" 2>&1 || fail "$g: $(tail -3 "$tmp/$g.log")"
done
python3 - "$tmp/shift.out.json" "$tmp/default.out.json" <<'PY' || fail "max_shift 2.0 gave the default shift's image"
import json, sys
def digests(node, out):  # every image digest anywhere in a report
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("output_sha256", "pixel_sha256") and isinstance(v, str): out.add(v)
            else: digests(v, out)
    elif isinstance(node, list):
        for v in node: digests(v, out)
    return out
a, b = digests(json.load(open(sys.argv[1])), set()), digests(json.load(open(sys.argv[2])), set())
sys.exit(0 if a and b and not (a & b) else 1)
PY
echo "ok ModelSamplingFlux max_shift 2.0 changes the image"
variant two-clips 'g["11"]["inputs"]["clip_name1"]="clip_l.safetensors"' "are neither T5"
echo "bench_flux1: all checks passed"
