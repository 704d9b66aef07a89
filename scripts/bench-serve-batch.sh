#!/usr/bin/env bash
# Server throughput with and without batching of compatible queued jobs (docs/benchmarks.md, "server"): on the
# committed tiny model, K jobs of the template graph (same size and steps, different prompts and seeds) are
# queued at once on a fresh, warmed `kiln serve --batch-images N`; images per second = K / (last finish - first
# submit). Repeats alternate N=4 and N=1 in the same run; the medians are printed.
# Usage: KILN_BIN=build/kiln scripts/bench-serve-batch.sh [JOBS] [REPEATS] [SIZE] [STEPS]   (default 8 5 128 4)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KILN_BIN:-$root/build/kiln}
[ -x "$bin" ] || { echo "bench-serve-batch: no kiln binary at $bin (make build, or set KILN_BIN)"; exit 2; }
jobs=${1:-8} reps=${2:-5} size=${3:-128} steps=${4:-4}
work=$(mktemp -d /tmp/kiln-bench-serve-batch.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/models/diffusion_models" "$work/models/text_encoders" "$work/models/vae"
tiny=$root/tests/data/tiny/comfy
cp "$tiny/flux-2-klein-4b.safetensors" "$work/models/diffusion_models/"
cp "$tiny/qwen_3_4b.safetensors" "$work/models/text_encoders/"
cp "$tiny/flux2-vae.safetensors" "$work/models/vae/"
for rep in $(seq 1 "$reps"); do
  for n in 4 1; do
    rm -rf "$work/out" "$work/port"
    "$bin" serve --port 0 --port-file "$work/port" --models "$work/models" --output "$work/out" --batch-images "$n" \
      >"$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
    python3 - "$root/tests/data/graphs/flux2_klein_t2i_template_api.json" "$(cat "$work/port")" "$jobs" "$size" \
      "$steps" "$n" <<'PY' | tee -a "$work/results"
import json, sys, time, urllib.request
graph_file, port, jobs, size, steps, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
base = "http://127.0.0.1:%s" % port
for _ in range(100):
    try: urllib.request.urlopen(base + "/health"); break
    except Exception: time.sleep(0.1)
def submit(i):
    g = json.load(open(graph_file))
    g["75:66"]["inputs"].update(width=size, height=size); g["75:62"]["inputs"].update(width=size, height=size, steps=steps)
    g["75:73"]["inputs"]["noise_seed"] = i; g["75:74"]["inputs"]["text"] = "prompt number %d, a red fox" % i
    req = urllib.request.Request(base + "/prompt", json.dumps({"prompt": g}).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["prompt_id"]
def wait(ids):
    while True:
        h = json.load(urllib.request.urlopen(base + "/history"))
        if all(i in h for i in ids): return h
        time.sleep(0.02)
wait([submit(1000)])  # warm-up: models opened, caches warm
t0 = time.monotonic()
ids = [submit(i) for i in range(jobs)]
h = wait(ids)
dt = time.monotonic() - t0
ok = all(h[i]["status"]["status_str"] == "success" for i in ids)
print("batch-images %s: %d jobs %dx%d %d steps in %.3f s = %.3f images/s%s" % (n, jobs, size, size, steps, dt, jobs / dt, "" if ok else " (FAILURES)"))
PY
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  done
done
python3 - "$work/results" <<'PY'
import re, statistics, sys
r = {}
for line in open(sys.argv[1]):
    m = re.match(r"batch-images (\d+): .* = ([0-9.]+) images/s", line)
    if m: r.setdefault(m.group(1), []).append(float(m.group(2)))
for n in sorted(r, reverse=True):
    print("median batch-images %s: %.3f images/s over %d repeats" % (n, statistics.median(r[n]), len(r[n])))
if "4" in r and "1" in r: print("speed-up: %.2fx" % (statistics.median(r["4"]) / statistics.median(r["1"])))
PY
