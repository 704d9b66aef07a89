#!/usr/bin/env bash
# bench_serve_rates.sh - `kiln bench serve` against kiln serve on the committed tiny model at three arrival rates
# (64x64, a 1-2 step mix, prompts from a file, Poisson arrivals): every request is served, kiln serve's own
# execution stamps give queue wait, the report passes `kiln bench check` and tests/py/serve_load_report.py
# recomputes its figures; the plot is drawn. (The load generator's queueing figures against doubles with known
# service times: bench_serve_load.sh.)
source "$(dirname "$0")/lib/serve_common.bash"
py=$KILN_SOURCE_DIR/tests/py
check() { python3 "$py/serve_load_report.py" "$@"; }
python3 - "$KILN_SOURCE_DIR/tests/data/bench/graphs/klein-4b-8st.json" "$SCRATCH/graph.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g.values():
    if n["class_type"] == "EmptyFlux2LatentImage": n["inputs"].update(width=64, height=64, batch_size=1)
    if n["class_type"] == "Flux2Scheduler": n["inputs"].update(width=64, height=64, steps=1)
json.dump(g, open(sys.argv[2], "w"), indent=1)
PY
printf 'a red fox in the snow\n\na lighthouse at dusk\r\na bowl of lemons\n' >"$SCRATCH/prompts.txt"
# ---- kiln serve on the tiny model: three arrival rates ---------------------------------------------------------
make_models
start_server
if "$KILN_BIN" bench serve --url "$(url '')" --graph "$SCRATCH/graph.json" --sizes 64x64 --steps 1,2 \
     --prompts "$SCRATCH/prompts.txt" --requests 4 --warmup 1 --rate 0.5,1,2 -o "$SCRATCH/kiln.json" --plot "$SCRATCH/kiln.png" \
     2>"$SCRATCH/kiln.err"; then ok "bench serve, kiln serve at three rates"; else fail "bench serve kiln: $(cat "$SCRATCH/kiln.err")"; fi
"$KILN_BIN" bench check "$SCRATCH/kiln.json" | grep -q "serve-load report, valid (0 problem" && ok "report valid" \
  || fail "report: $("$KILN_BIN" bench check "$SCRATCH/kiln.json")"
[ -s "$SCRATCH/kiln.png" ] && ok "plot written" || fail "no plot"
check kiln "$SCRATCH/kiln.json" && ok "kiln serve: every request served, mix drawn" || fail "kiln figures"
finish
