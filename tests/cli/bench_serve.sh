#!/usr/bin/env bash
# bench_serve.sh - `kiln bench` against `kiln serve` over HTTP, end to end on the committed tiny model: the three
# seed-000 graphs (shrunk to 64x64 and few steps so the CPU run is short; the shipped full-size graphs are the
# ones in tests/data/bench/graphs/) run through preflight, warm-up, timed submits, reductions and references;
# the report passes `kiln bench check` and carries every seed-000 section that applies without a GPU. Then
# `kiln bench compare` of the server against itself: A/B/B/A with identical decoded pixels ("yes").
source "$(dirname "$0")/lib/serve_common.bash"
make_models
start_server
export KILN_NVML_LIB=/nonexistent/libnvidia-ml.so.1 # the no-GPU path, whatever the machine
data=$KILN_SOURCE_DIR/tests/data/bench
for g in klein-4b-8st klein-4b-32st klein-4b-8st-pixel4; do
  python3 - "$data/graphs/$g.json" "$SCRATCH/$g.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g.values():
    if n["class_type"] in ("EmptyFlux2LatentImage", "Flux2Scheduler"): n["inputs"].update(width=64, height=64)
    if n["class_type"] == "EmptyFlux2LatentImage": n["inputs"]["batch_size"] = 2
    if n["class_type"] == "Flux2Scheduler": n["inputs"]["steps"] = max(1, n["inputs"]["steps"] // 8)
json.dump(g, open(sys.argv[2], "w"), indent=1)
PY
done
tiny=$KILN_SOURCE_DIR/tests/data/tiny/comfy
if "$KILN_BIN" bench run --url "$(url '')" --arm tiny-cpu --warmup 1 --timed 2 \
     --graph "$SCRATCH/klein-4b-8st.json@ember-harbor-1__dwelling,still-orchard-2__vista" \
     --graph "$SCRATCH/klein-4b-32st.json@glass-tundra-1__dwelling" \
     --graph "$SCRATCH/klein-4b-8st-pixel4.json@lantern-reach-1__dwelling,lantern-reach-2__vista" \
     --bank "$data/prompt-bank.json" --model "$tiny/flux-2-klein-4b.safetensors" --model "$tiny/qwen_3_4b.safetensors" \
     --model "$tiny/flux2-vae.safetensors" --digest-cache "$SCRATCH/digests.json" -o "$SCRATCH/report.json" \
     2>"$SCRATCH/bench.err"; then ok "bench run against kiln serve"; else fail "bench run: $(cat "$SCRATCH/bench.err")"; fi
if "$KILN_BIN" bench check "$SCRATCH/report.json" | grep -q "seconds-per-image report, valid"; then ok "report valid"
else fail "report invalid: $("$KILN_BIN" bench check "$SCRATCH/report.json")"; fi
if python3 - "$SCRATCH/report.json" <<'PY'; then ok "report sections"; else fail "report sections"; fi
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("question", "prompt_bank", "warmup_images", "timed_images", "preflight", "graphs", "refusals",
          "cap_name_check", "arm", "at", "model_digests"):
    assert k in r, k
assert r["warmup_images"] == 6 and r["timed_images"] == 12
for name in ("klein-4b-8st", "klein-4b-32st", "klein-4b-8st-pixel4"):
    g = r["graphs"][name]
    b = g["cards"]["cpu"]["batches"]["2"]
    assert len(b["timed"]) == 2 and b["reduced"]["images"] == 4, name
    for s in b["warmup"] + b["timed"]:
        assert s["exec_seconds"] > 0 and s["wall_seconds"] >= s["exec_seconds"] * 0.5, s
        assert all(len(i["pixel_sha256"]) == 64 and i["width"] == 64 and i["height"] == 64 for i in s["images"])
    assert b["reduced"]["exec_seconds_per_image"]["n"] == 2 and b["reduced"]["images_per_minute_wall"] > 0
    assert b["trace"]["available"] is False and b["references_withheld"]
assert r["graphs"]["klein-4b-8st-pixel4"]["knobs"]["pixelize"] == 4
# the 32-step graph is the 8-step one with its steps changed: the receipt links them (as in seed 000)
assert r["graphs"]["klein-4b-32st"]["receipt"]["graph-at-1-steps"] == r["graphs"]["klein-4b-8st"]["graph_digest"]
assert len(r["model_digests"]) == 3 and all(len(v["sha256"]) == 64 for v in r["model_digests"].values())
PY
"$KILN_BIN" bench show "$SCRATCH/report.json" | grep -q "klein-4b-32st" && ok "show" || fail "show"

# The server against itself: same graph, prompt and seed on both sides -> identical decoded pixels.
if "$KILN_BIN" bench compare --a "$(url '')" --b "$(url '')" --graph "$SCRATCH/klein-4b-8st.json" \
     --bank "$data/prompt-bank.json" --rounds 1 --warmup 0 -o "$SCRATCH/ab.json" --md "$SCRATCH/ab.md" 2>"$SCRATCH/cmp.err"
then ok "compare ran"; else fail "compare: $(cat "$SCRATCH/cmp.err")"; fi
grep -q "Identical outputs: yes." "$SCRATCH/ab.md" && ok "kiln serve is deterministic (identical: yes)" || fail "identical: $(cat "$SCRATCH/ab.md")"
"$KILN_BIN" bench check "$SCRATCH/ab.json" | grep -q "abba report, valid" && ok "compare report valid" || fail "compare report"
# The in-process engine target on the same graphs and models: a valid report with per-stage timings; a graph
# with a post-process node is refused with the reason; and the engine's pixels equal kiln serve's (A/B/B/A).
if "$KILN_BIN" bench run --url "engine:$MODELS" --arm tiny-engine --warmup 1 --timed 2 \
     --graph "$SCRATCH/klein-4b-8st.json@ember-harbor-1__dwelling" --bank "$data/prompt-bank.json" \
     -o "$SCRATCH/engine.json" 2>"$SCRATCH/engine.err"; then ok "bench run, engine target"; else fail "engine run: $(cat "$SCRATCH/engine.err")"; fi
"$KILN_BIN" bench check "$SCRATCH/engine.json" | grep -q "valid (0 problem" && ok "engine report valid" || fail "engine report"
python3 -c "
import json,sys; r=json.load(open('$SCRATCH/engine.json'))
s=r['graphs']['klein-4b-8st']['cards']['cpu']['batches']['2']['timed'][0]
names=[x['name'] for x in s['stages']]
sys.exit(0 if r['target']['kind']=='engine' and 'Denoising' in names and 'TextEncoding' in names else 1)" \
  && ok "engine report has per-stage timings" || fail "engine stages"
if "$KILN_BIN" bench run --url "engine:$MODELS" --graph "$SCRATCH/klein-4b-8st-pixel4.json" --timed 1 \
     --bank "$data/prompt-bank.json" -o "$SCRATCH/px.json" 2>"$SCRATCH/px.err"; then fail "engine accepted ImagePixelize"
else grep -q "ImagePixelize) is not part of text-to-image" "$SCRATCH/px.err" && ok "engine refuses pixelize" || fail "pixelize error: $(cat "$SCRATCH/px.err")"; fi
if "$KILN_BIN" bench compare --a "engine:$MODELS" --b "$(url '')" --graph "$SCRATCH/klein-4b-8st.json" \
     --bank "$data/prompt-bank.json" --rounds 1 --warmup 1 --label-a engine --label-b serve -o "$SCRATCH/es.json" \
     --md "$SCRATCH/es.md" 2>"$SCRATCH/es.err"; then ok "compare engine vs serve"; else fail "compare: $(cat "$SCRATCH/es.err")"; fi
grep -q "Identical outputs: yes." "$SCRATCH/es.md" && ok "engine and serve give identical pixels" || fail "engine vs serve: $(cat "$SCRATCH/es.md")"
# engine@DEVICE:DIR picks the backend: a malformed device is refused up front, a GPU that is not there fails the
# submit with a device error, and engine@cpu: is the plain engine target.
if "$KILN_BIN" bench run --url "engine@gpu:$MODELS" --graph "$SCRATCH/klein-4b-8st.json" --timed 1 \
     --bank "$data/prompt-bank.json" -o "$SCRATCH/dev.json" 2>"$SCRATCH/dev.err"; then fail "engine@gpu accepted"
else grep -q "engine@cuda:N:DIR" "$SCRATCH/dev.err" && ok "engine@gpu refused" || fail "engine@gpu: $(cat "$SCRATCH/dev.err")"; fi
if nvidia-smi -L >/dev/null 2>&1; then ok "engine@cuda:0: a GPU is present (tests/gpu/run.sh covers it)"
elif "$KILN_BIN" bench run --url "engine@cuda:0:$MODELS" --graph "$SCRATCH/klein-4b-8st.json" --timed 1 --warmup 0 \
     --bank "$data/prompt-bank.json" -o "$SCRATCH/dev.json" 2>"$SCRATCH/dev.err"; then fail "engine@cuda:0 ran without a GPU"
else grep -qi "cuda" "$SCRATCH/dev.err" && ok "engine@cuda:0 without a GPU: device error" || fail "engine@cuda:0: $(cat "$SCRATCH/dev.err")"; fi
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "bench_serve: all checks passed"
