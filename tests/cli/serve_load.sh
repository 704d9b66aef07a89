#!/usr/bin/env bash
# serve_load.sh - KILN_LOAD_CLIENTS (200) concurrent clients submit and poll for KILN_LOAD_SECONDS (60); half-way
# the server is killed with SIGKILL and restarted. Every accepted job completes exactly once (counted in /history,
# output files, the job store's claims and /ws execution_start events: tests/py/load_serve.py), none is lost or
# invented, no crash, and the restarted server's memory stays flat under the polling load.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
"$PY" -c "import requests" 2>/dev/null || { echo "FAIL: $PY lacks requests: run scripts/install-test-python.sh"; exit 1; }
CLIENTS=${KILN_LOAD_CLIENTS:-200}
SECONDS_=${KILN_LOAD_SECONDS:-60}
make_models
start_server --max-queue 100000
echo "http://127.0.0.1:$PORT" >"$SCRATCH/url.tmp" && mv "$SCRATCH/url.tmp" "$SCRATCH/url" # whole, for the readers
KILN_SOURCE_DIR=$KILN_SOURCE_DIR "$PY" "$KILN_SOURCE_DIR/tests/py/load_serve.py" "$SCRATCH/url" "$CLIENTS" "$SECONDS_" \
  "$SCRATCH/kill" "$OUT" "$SCRATCH/at_crash.json" >"$SCRATCH/load.log" 2>&1 &
LOAD=$!
while [ ! -e "$SCRATCH/kill" ]; do
  kill -0 "$LOAD" 2>/dev/null || { cat "$SCRATCH/load.log"; fail "load driver exited early"; finish; }
  sleep 0.2
done
kill -0 "$SERVER_PID" && ok "server alive under load" || fail "server died under load"
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
ok "kill -9 in the middle of the load"
# the store as the crash left it (which jobs had succeeded, which were running): load_serve.py counts claims against it
python3 "$KILN_SOURCE_DIR/tests/py/store_jobs.py" "$DB" "$SCRATCH/at_crash.json"
start_server --max-queue 100000   # same output folder, same database
echo "http://127.0.0.1:$PORT" >"$SCRATCH/url.tmp" && mv "$SCRATCH/url.tmp" "$SCRATCH/url" # whole, for the readers
rss() { awk '/VmRSS/ {print $2}' "/proc/$SERVER_PID/status"; }
# baseline once the restarted server has finished a job (the engine's models are then loaded)
hcount() { curl -s "$(url /history)" | python3 -c "import json,sys; print(len(json.load(sys.stdin)))"; }
H0=$(hcount)
for _ in $(seq 1 600); do [ "$(hcount)" -gt "$H0" ] && break; sleep 0.2; done
RSS0=$(rss)
wait "$LOAD" && ok "every accepted job completed exactly once" || fail "load check"
cat "$SCRATCH/load.log" | tail -3
kill -0 "$SERVER_PID" && ok "server alive after the load" || fail "server died"
RSS1=$(rss)
GROWTH=$(( (RSS1 - RSS0) / 1024 ))
echo "rss: ${RSS0} kB -> ${RSS1} kB"
[ "$GROWTH" -lt 128 ] && ok "memory flat (+${GROWTH} MiB)" || fail "memory grew by ${GROWTH} MiB"
finish
