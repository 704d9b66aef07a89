#!/usr/bin/env bash
# bench_http.sh - `kiln bench run` end to end over HTTP against the ComfyUI-API test double (tests/py/
# comfy_double.py; `kiln serve` replaces it once it can serve the bench graphs), on a machine without NVML:
# the report must pass `kiln bench check`, carry the decoded-pixel digests the server encoded, rotate cells
# with recorded seeds, say why telemetry is unavailable, withhold references with the reason, cache model
# digests; failures (no server, a server refusing prompts, a bad graph) must be clean errors.
source "$(dirname "$0")/lib/bench_common.bash"

start_double() {
  rm -f "$tmp/port"
  python3 "$KILN_SOURCE_DIR/tests/py/comfy_double.py" --port-file "$tmp/port" "$@" &
  pid=$!
  for _ in $(seq 600); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  [ -s "$tmp/port" ] || fail "test double did not start"
  url="http://127.0.0.1:$(cat "$tmp/port")"
}
stop_double() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

export KILN_NVML_LIB=/nonexistent/libnvidia-ml.so.1   # this test is the no-GPU path, even on a GPU machine
head -c 100000 /dev/urandom > "$tmp/model.safetensors"

start_double --exec-ms 20
"$KILN_BIN" bench run --url "$url" --arm r1-cpu --warmup 1 --timed 3 \
  --graph "$data/graphs/klein-4b-8st.json" \
  --graph "$data/graphs/klein-4b-8st-pixel4.json@lantern-reach-1__dwelling,lantern-reach-2__vista" \
  --bank "$data/prompt-bank.json" --model "$tmp/model.safetensors" --digest-cache "$tmp/digests.json" \
  -o "$tmp/report.json" || fail "bench run failed"
"$KILN_BIN" bench check "$tmp/report.json" | tee "$tmp/check.txt"
grep -q "seconds-per-image report, valid" "$tmp/check.txt" || fail "report not valid"
"$KILN_BIN" bench show "$tmp/report.json" > "$tmp/show.txt"
grep -q "klein-4b-8st-pixel4" "$tmp/show.txt" || fail "show lacks a graph"
grep -q "telemetry: unavailable (nvml: unavailable" "$tmp/show.txt" || fail "show does not say telemetry is unavailable"

python3 - "$tmp/report.json" "$url" "$tmp/model.safetensors" <<'PY'
import hashlib, json, sys, urllib.request
r = json.load(open(sys.argv[1])); url = sys.argv[2]
def need(c, msg):
    if not c: sys.exit("FAIL: " + msg)
need(r["schema"] == "kiln-bench-report/1" and r["kind"] == "seconds-per-image", "schema/kind")
need(r["telemetry"]["available"] is False and "nvml: unavailable" in r["telemetry"]["why"], "telemetry why")
need(r["refusals"] == [], "no refusals expected")
need(r["preflight"]["card_available"]["contention_gate"]["applicable"] is False, "gate not applicable")
g = r["graphs"]["klein-4b-8st"]
need(g["knobs"] == {"steps": 8, "cfg": 1.0, "sampler": "euler", "width": 512, "height": 512, "batch_size": 3,
                    "unet": "flux-2-klein-4b.safetensors", "clip": "qwen_3_4b.safetensors",
                    "vae": "flux2-vae.safetensors"}, "knobs %s" % g["knobs"])
graph = json.load(open(sys.argv[0] if False else __import__("os").environ["KILN_SOURCE_DIR"] + "/tests/data/bench/graphs/klein-4b-8st.json"))
canon = json.dumps(graph, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
need(g["graph_digest"] == hashlib.sha256(canon).hexdigest(), "graph digest != Python's canonical digest")
b = g["cards"]["cpu"]["batches"]["3"]
need(len(b["warmup"]) == 1 and len(b["timed"]) == 3, "submit counts")
need(b["cold_first_submit_exec_seconds"] == b["warmup"][0]["exec_seconds"], "cold submit")
cells = g["prompt_cells"]
for i, s in enumerate(b["timed"]):
    need(s["cell"] == cells[i % len(cells)], "cell rotation at %d" % i)
    need(s["seed"] == 910100 + 1000 + 3 * i, "seed at %d" % i)
    need(s["n_images"] == 3 and len(s["images"]) == 3, "images")
    for im in s["images"]:
        want = json.load(urllib.request.urlopen(url + "/debug/pixels?filename=" + im["filename"]))["sha256"]
        need(im["pixel_sha256"] == want, "decoded pixel digest differs from the server's pixels")
need(b["reduced"]["submits"] == 3 and b["reduced"]["images"] == 9, "reduced counts")
need(b["trace"]["available"] is False and b["trace"]["power.draw"]["n"] == 0 and b["trace"]["power.draw"]["median"] is None,
     "unavailable trace must be null with n = 0")
need(b["ratio_vs_references"] == {} and all("never matched across caps" in v for v in b["references_withheld"].values()),
     "references must be withheld across (unknown) caps")
p = r["graphs"]["klein-4b-8st-pixel4"]
need(p["knobs"]["pixelize"] == 4 and p["prompt_cells"] == ["lantern-reach-1__dwelling", "lantern-reach-2__vista"], "pixel4 cells")
need(p["reference"]["cold_excluded"] == [3.35], "cold reference excluded and listed")
md = r["model_digests"][sys.argv[3]]
need(md["sha256"] == hashlib.sha256(open(sys.argv[3], "rb").read()).hexdigest() and md["from_cache"] is False, "model digest")
print("report content ok")
PY

# The second run takes the model digest from the cache (path + size + mtime unchanged).
"$KILN_BIN" bench run --url "$url" --graph "$data/graphs/klein-4b-32st.json@ember-harbor-1__dwelling" --warmup 0 \
  --timed 1 --bank "$data/prompt-bank.json" --model "$tmp/model.safetensors" --digest-cache "$tmp/digests.json" \
  -o "$tmp/report2.json" || fail "second run failed"
python3 -c "import json,sys; r=json.load(open('$tmp/report2.json')); sys.exit(0 if r['model_digests']['$tmp/model.safetensors']['from_cache'] is True else 'FAIL: digest not from cache')"
"$KILN_BIN" bench check "$tmp/report2.json" >/dev/null || fail "second report invalid"

# A graph without an output is refused before anything is submitted.
echo '{"1":{"class_type":"UNETLoader","inputs":{"unet_name":"x"}}}' > "$tmp/bad.json"
if "$KILN_BIN" bench run --url "$url" --graph "$tmp/bad.json" --bank "$data/prompt-bank.json" >/dev/null 2>"$tmp/err.txt"; then
  fail "a graph without SaveImage was accepted"
fi
grep -q "no SaveImage" "$tmp/err.txt" || fail "unclear error: $(cat "$tmp/err.txt")"
stop_double

# A server that refuses prompts: a clean error with its message, exit status non-zero.
start_double --fail-prompts 5
if "$KILN_BIN" bench run --url "$url" --graph "$data/graphs/klein-4b-8st.json" --bank "$data/prompt-bank.json" \
   --timed 1 -o "$tmp/r3.json" 2>"$tmp/err.txt"; then fail "a refusing server gave success"; fi
grep -q "scripted failure" "$tmp/err.txt" || fail "server message lost: $(cat "$tmp/err.txt")"
stop_double

# Nobody listening.
if "$KILN_BIN" bench run --url http://127.0.0.1:9 --graph "$data/graphs/klein-4b-8st.json" \
   --bank "$data/prompt-bank.json" --timed 1 -o "$tmp/r4.json" 2>"$tmp/err.txt"; then fail "no server gave success"; fi
grep -q "POST http://127.0.0.1:9/prompt" "$tmp/err.txt" || fail "unclear error: $(cat "$tmp/err.txt")"
echo "bench_http: all checks passed"
