#!/usr/bin/env bash
# bench_serve_load.sh - `kiln bench serve`, the open-loop load generator, against three servers:
#   - a ComfyUI-API double (tests/py/comfy_double.py: one worker, 200 ms a request): at a constant 10/s - twice
#     its capacity - every request still leaves on schedule and the queue grows by 0.1 s a request, no latency
#     below the FIFO bound 0.2 + 0.1 i; at 2/s nothing queues and every request meets its SLO; closed loop
#     at concurrency 1 never has two in flight; Poisson gaps are reproducible from the seed;
#   - an OpenAI-images double (tests/py/openai_double.py, 200 ms, one worker, every 4th answer a 500): latency
#     grows, failures are counted as errors and as missed SLOs;
# (kiln serve itself at three rates: bench_serve_rates.sh.)
# Every report passes `kiln bench check`, and tests/py/serve_load_report.py recomputes every figure from the
# request records by its own definitions; a doctored percentile is caught by `kiln bench check`.
source "$(dirname "$0")/lib/serve_common.bash"
py=$KILN_SOURCE_DIR/tests/py
check() { python3 "$py/serve_load_report.py" "$@" 2>&1 | tail -3; return "${PIPESTATUS[0]}"; }
doubles=()
stop_doubles() { for p in "${doubles[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap 'stop_doubles; cleanup' EXIT
start_double() { # start_double NAME script args...: the double's port in $DPORT
  local name=$1; shift
  python3 "$@" --port-file "$SCRATCH/$name.port" >"$SCRATCH/$name.log" 2>&1 &
  doubles+=($!)
  for _ in $(seq 1 100); do [ -s "$SCRATCH/$name.port" ] && break; sleep 0.05; done
  DPORT=$(cat "$SCRATCH/$name.port")
}
valid() { "$KILN_BIN" bench check "$1" | grep -q "serve-load report, valid (0 problem" && ok "$2: report valid" || fail "$2: $("$KILN_BIN" bench check "$1")"; }

python3 - "$KILN_SOURCE_DIR/tests/data/bench/graphs/klein-4b-8st.json" "$SCRATCH/graph.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g.values():
    if n["class_type"] == "EmptyFlux2LatentImage": n["inputs"].update(width=64, height=64, batch_size=1)
    if n["class_type"] == "Flux2Scheduler": n["inputs"].update(width=64, height=64, steps=1)
json.dump(g, open(sys.argv[2], "w"), indent=1)
PY
printf 'a red fox in the snow\n\na lighthouse at dusk\r\na bowl of lemons\n' >"$SCRATCH/prompts.txt"

# ---- the ComfyUI-API double ------------------------------------------------------------------------------------
start_double comfy "$py/comfy_double.py" --exec-ms 200
C="http://127.0.0.1:$DPORT"
if "$KILN_BIN" bench serve --url "$C" --graph "$SCRATCH/graph.json" --requests 12 --rate 10,2 --arrival constant \
     -o "$SCRATCH/comfy.json" --plot "$SCRATCH/comfy.png" 2>"$SCRATCH/comfy.err"; then ok "bench serve, comfy double"
else fail "bench serve comfy: $(cat "$SCRATCH/comfy.err")"; fi
valid "$SCRATCH/comfy.json" comfy
check comfy-queue "$SCRATCH/comfy.json" && ok "open loop: on-time sends, queue growth at 2x capacity, none below it" \
  || fail "comfy queueing figures"
python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(24); sys.exit(0 if d[:8]==b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', d[16:24])==(960,600) else 1)" \
  "$SCRATCH/comfy.png" && ok "plot written" || fail "plot"
"$KILN_BIN" bench plot "$SCRATCH/comfy.json" -o "$SCRATCH/again.png" && cmp -s "$SCRATCH/comfy.png" "$SCRATCH/again.png" \
  && ok "kiln bench plot draws the same picture" || fail "kiln bench plot of a serve-load report"
"$KILN_BIN" bench show "$SCRATCH/comfy.json" | grep -q "constant-10/s" && ok "show" || fail "show"
# a doctored figure is caught
python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); r['runs'][0]['summary']['latency_s']['p90'] += 0.05
json.dump(r, open(sys.argv[2], 'w'))" "$SCRATCH/comfy.json" "$SCRATCH/bad.json"
if "$KILN_BIN" bench check "$SCRATCH/bad.json" >"$SCRATCH/bad.out"; then fail "a wrong p90 passed check"
else grep -q "latency_s/p90" "$SCRATCH/bad.out" && ok "check catches a wrong percentile" || fail "bad check: $(cat "$SCRATCH/bad.out")"; fi

if "$KILN_BIN" bench serve --url "$C" --graph "$SCRATCH/graph.json" --requests 8 --concurrency 1 --warmup 1 \
     -o "$SCRATCH/closed.json" 2>"$SCRATCH/closed.err" && check closed "$SCRATCH/closed.json"
then ok "closed loop at concurrency 1: one request in flight"; else fail "closed loop: $(cat "$SCRATCH/closed.err")"; fi
valid "$SCRATCH/closed.json" closed
stop_doubles; doubles=()
start_double fast "$py/comfy_double.py" --exec-ms 1
for s in 7:a 7:b 8:c; do
  "$KILN_BIN" bench serve --url "http://127.0.0.1:$DPORT" --graph "$SCRATCH/graph.json" --requests 40 --rate 40 \
    --warmup 1 --seed "${s%%:*}" -o "$SCRATCH/poisson-${s##*:}.json" 2>>"$SCRATCH/poisson.err" || fail "poisson run $s"
done
check poisson "$SCRATCH/poisson-a.json" "$SCRATCH/poisson-b.json" "$SCRATCH/poisson-c.json" 40 \
  && ok "Poisson arrivals: reproducible from the seed, exponential gaps at the rate" || fail "poisson schedule"

# ---- the OpenAI-images double ----------------------------------------------------------------------------------
start_double openai "$py/openai_double.py" --service-ms 200 --fail-every 4
if "$KILN_BIN" bench serve --api openai --url "http://127.0.0.1:$DPORT" --model double --sizes 64x64 --requests 9 \
     --warmup 3 --rate 10 --arrival constant --prompts "$SCRATCH/prompts.txt" -o "$SCRATCH/openai.json" \
     2>"$SCRATCH/openai.err"; then ok "bench serve, openai double"; else fail "bench serve openai: $(cat "$SCRATCH/openai.err")"; fi
valid "$SCRATCH/openai.json" openai
# 12 generations, the first 3 the warm-up: the 4th, 8th and 12th fail -> 3 of the 9 measured requests
check openai "$SCRATCH/openai.json" 3 && ok "openai: latency grows at 2x capacity, failures counted" || fail "openai figures"
"$KILN_BIN" bench serve --api openai --url "http://127.0.0.1:$DPORT" --rate 1 --concurrency 2 2>"$SCRATCH/x.err" \
  && fail "--rate with --concurrency accepted" || { grep -q "exclude each other" "$SCRATCH/x.err" && ok "--rate and --concurrency refused together" || fail "conflict message: $(cat "$SCRATCH/x.err")"; }
"$KILN_BIN" bench serve --url "http://127.0.0.1:$DPORT" --rate 1 2>"$SCRATCH/x.err" \
  && fail "comfy without --graph accepted" || { grep -q "graph is required" "$SCRATCH/x.err" && ok "comfy needs --graph" || fail "graph message: $(cat "$SCRATCH/x.err")"; }

finish
