#!/usr/bin/env bash
# bench_variants.sh - `kiln bench variants` (the seed-002 report, docs/bench-report.md "variants") on the tiny model
# against two servers: a one-rank kiln serve and `mpirun -np 2 kiln serve --sp 2` (a multi-rank engine, rank 0
# measuring nothing itself: the client measures). The report has the seed's shape plus the requests it reduces:
# `kiln bench check` passes it, recomputing every median, the lifecycle phases and the VAE stage records from the
# requests; the VAE records are the server's Decoding stage (kiln serve's history extension); tampered copies (a
# cycle median, a VAE record, a lifecycle median, n) are refused. `kiln bench show` prints its table. The in-process
# engine target under mpirun is refused by name (a multi-rank engine is measured behind kiln serve).
source "$(dirname "$0")/lib/serve_common.bash"
command -v mpirun >/dev/null || { echo "FAIL mpirun not found (scripts/install-deps.sh installs openmpi-bin)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 # Open MPI's own allocations at exit
make_models
MPI_PID=""
stop_ranks() {
  [ -n "$MPI_PID" ] || return 0
  local p
  for p in $(pgrep -f "serve --port 0 --port-file $SCRATCH/port2"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && kill -TERM "$p"
  done
  for _ in $(seq 1 300); do kill -0 "$MPI_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$MPI_PID" 2>/dev/null && { fail "the two-rank server did not stop"; pkill -9 -f "port-file $SCRATCH/port2" || true; }
  wait "$MPI_PID" 2>/dev/null || true
  MPI_PID=""
}
trap 'stop_ranks; cleanup' EXIT

start_server --front-end-root none
ONE=$PORT
timeout 300 mpirun --oversubscribe -np 2 -x KILN_THREADS -x ASAN_OPTIONS "$KILN_BIN" serve --port 0 \
  --port-file "$SCRATCH/port2" --models "$MODELS" --output "$SCRATCH/out2" --user-dir "$SCRATCH/user2" \
  --front-end-root none --sp 2 \
  >"$SCRATCH/ranks.log" 2>&1 &
MPI_PID=$!
for _ in $(seq 1 300); do
  [ -s "$SCRATCH/port2" ] && curl -s -o /dev/null "http://127.0.0.1:$(cat "$SCRATCH/port2")/health" && break
  sleep 0.1
done
TWO=$(cat "$SCRATCH/port2" 2>/dev/null) || { cat "$SCRATCH/ranks.log"; echo "FAIL: the two-rank server did not come up"; exit 1; }

graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64, steps=2)
g['75:73']['inputs']['noise_seed'] = 3" | python3 -c "import json,sys; json.dump(json.load(sys.stdin)['prompt'], open(sys.argv[1], 'w'))" "$SCRATCH/g.json"

REP=$SCRATCH/variants.json
if "$KILN_BIN" bench variants --variant one-rank="http://127.0.0.1:$ONE" --variant sp2="http://127.0.0.1:$TWO" \
     --graph "$SCRATCH/g.json" --cycles 2 --requests 3 --warmup 1 --hardware cpu --case t2i-64 -o "$REP" 2>"$SCRATCH/table"; then
  ok "kiln bench variants ran 2 cycles x 2 variants"
else fail "kiln bench variants: $(cat "$SCRATCH/table")"; fi
grep -q "sp2" "$SCRATCH/table" && ok "the table names the variants" || fail "table: $(cat "$SCRATCH/table")"
"$KILN_BIN" bench check "$REP" >"$SCRATCH/check" 2>&1 && ok "kiln bench check passes the report" \
  || fail "check: $(cat "$SCRATCH/check")"
python3 - "$REP" <<'PY' && ok "the seed-002 shape: kind, cycles numbered across the run, 3 requests each, VAE records of every request" || fail "shape"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["kind"] == "variants" and r["schema"] == "kiln-bench-report/1", r.get("kind")
names = [v["variant"] for v in r["results"]]
assert names == ["one-rank", "sp2"], names
for v in r["results"]:
    cyc = [c["cycle"] for c in v["http_cycles"]]
    assert cyc == ([0, 2] if v["variant"] == "one-rank" else [1, 3]), cyc
    for c in v["http_cycles"]:
        assert c["n"] == 3 and c["complete_cell"] and c["case"] == "t2i-64" and c["hardware"] == "cpu", c
        assert len(c["warmup"]) == 1 and len(c["requests"]) == 3
        for q in c["requests"]:
            assert 0 <= q["queued_s"] <= q["http_s"] <= q["saved_validated_s"], q
            assert q["running_s"] <= q["done_s"] and q["stage_gen_s"] > 0 and q["vae_s"] > 0, q
        assert set(c["lifecycle_medians_s"]) == {"submit_to_queued", "queued_to_running", "running_to_done", "done_to_http", "http_to_saved_validated"}
    assert len(v["vae_stage_records"]) == 6 and v["vae_median_s"] > 0, v["vae_stage_records"]
PY
"$KILN_BIN" bench show "$REP" >"$SCRATCH/show" 2>&1 && grep -q "one-rank" "$SCRATCH/show" && ok "kiln bench show prints it" \
  || fail "show: $(cat "$SCRATCH/show")"
# tampered copies: each must be refused, naming the field
tamper() { # WHAT PYTHON-EDIT EXPECTED-TEXT
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2; json.dump(r, open(sys.argv[2], 'w'))" "$REP" "$SCRATCH/bad.json"
  if "$KILN_BIN" bench check "$SCRATCH/bad.json" >"$SCRATCH/check" 2>&1; then fail "$1: check passed a tampered report"
  elif grep -q "$3" "$SCRATCH/check"; then ok "$1: refused ($3)"; else fail "$1: $(head -c 400 "$SCRATCH/check")"; fi
}
tamper "a cycle's HTTP median" "r['results'][1]['http_cycles'][0]['http_median_s'] += 0.5" "http_median_s"
tamper "a VAE stage record" "r['results'][0]['vae_stage_records'][2]['vae_s'] *= 3" "vae_stage_records"
tamper "a lifecycle median" "r['results'][1]['http_cycles'][1]['lifecycle_medians_s']['queued_to_running'] += 1" "queued_to_running"
tamper "n against the requests" "r['results'][0]['http_cycles'][1]['n'] = 2" "/n: 2, but 3 requests succeeded"
tamper "a request's clock order" "q = r['results'][0]['http_cycles'][0]['requests'][0]; q['http_s'] = q['queued_s'] - 1" "queued_s <= http_s"
# the in-process engine target under mpirun: every rank would bench on its own, out of step; refused by name
out=$(timeout 60 mpirun --oversubscribe -np 2 -x ASAN_OPTIONS "$KILN_BIN" bench run --url "engine:$MODELS" --graph "$SCRATCH/g.json" \
  --bank "$KILN_SOURCE_DIR/tests/data/bench/prompt-bank.json" 2>&1 || true)
grep -q "engine target under mpirun (2 ranks)" <<<"$out" && ok "the engine target under mpirun is refused by name" \
  || fail "engine target under mpirun: $(head -c 300 <<<"$out")"
stop_ranks
finish
