#!/usr/bin/env bash
# serve_pg_events.sh - on a shared queue (PostgreSQL) a job's final events go out in the transaction that records
# it finished: a node killed -9 right after that commit has still told every node's clients that the job ended.
# KILN_FAULT_PAUSE=after-finish holds the worker just after the commit; the test kills the node there. A psql
# session LISTENing on kiln_events (what every node's listener does) must have received, for the job, exactly
# one execution_success and then exactly one `executing {node: null}` - ComfyUI's end-of-prompt pair, which
# clients such as websockets_api_example.py wait for - and the store must say succeeded. With the events sent
# after the commit (as before this test) the kill leaves a succeeded job nobody hears of. Failed jobs take the
# same path: a job whose model file is corrupt must announce execution_error the same way. Fails, never skips,
# without PostgreSQL.
source "$(dirname "$0")/lib/serve_common.bash"
source "$(dirname "$0")/lib/pg_cluster.bash"
LISTENER_PID=""
trap '[ -n "$LISTENER_PID" ] && kill "$LISTENER_PID" 2>/dev/null; pg_stop; cleanup' EXIT
make_models
printf 'not a safetensors file' >"$MODELS/diffusion_models/broken.safetensors" # listed, fails when loaded
pg_start

# a LISTEN session that stays connected: psql prints the notifications received after each statement it runs
listen_start() {
  : >"$SCRATCH/notices"
  { echo "LISTEN kiln_events;"; for _ in $(seq 1 600); do echo "SELECT pg_sleep(0.1);"; done; } |
    "$PGBIN/psql" -X -q -t -A "$PG_URI" >"$SCRATCH/notices" 2>&1 &
  LISTENER_PID=$!
  sleep 0.5
}
wait_for() { for _ in $(seq 1 600); do eval "$1" && return 0; sleep 0.1; done; return 1; }

# run_and_kill GRAPH_EDIT: submits a job to a node held after its finish, kills it -9 there; prints the job id
run_and_kill() {
  export KILN_FAULT_PAUSE=after-finish:60
  start_server --queue "$PG_URI" --lease 2
  unset KILN_FAULT_PAUSE
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64, steps=1)
g['9']['inputs']['filename_prefix'] = 'pgev/a'
$1" >"$SCRATCH/req"
  curl -s -o "$SCRATCH/body" -d @"$SCRATCH/req" "$(url /prompt)"
  local id
  id=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
  wait_for 'grep -q "holding 60.0 s after-finish" "$SCRATCH/server.log"' || { echo "FAIL: never held after the finish"; exit 1; }
  kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  echo "$id"
}

# check_events ID FINAL: the listener got exactly one FINAL event and then one executing {node: null} for ID
check_events() {
  sleep 1
  python3 - "$SCRATCH/notices" "$1" "$2" <<'PY'
import json, sys
pid, final = sys.argv[2], sys.argv[3]
seen = []
for line in open(sys.argv[1]):
    head = 'Asynchronous notification "kiln_events" with payload "'
    if head not in line:
        continue
    payload = line.split(head, 1)[1].rsplit('" received from server process', 1)[0]
    m = json.loads(payload)
    d = m.get("d") or {}
    if d.get("prompt_id") != pid:
        continue
    if m["t"] == final or (m["t"] == "executing" and d.get("node") is None):
        seen.append(m["t"])
assert seen == [final, "executing"], seen
PY
}

listen_start
id=$(run_and_kill "")
[ "$(pg_sql "SELECT state FROM kiln_jobs WHERE id='$id'")" = 2 ] && ok "the job is recorded succeeded before the kill" \
  || fail "store state: $(pg_sql "SELECT state FROM kiln_jobs WHERE id='$id'")"
check_events "$id" execution_success && ok "killed after the commit: execution_success then executing null were sent" \
  || fail "the end of a succeeded job was not announced (notices: $(grep -c Asynchronous "$SCRATCH/notices"))"

id=$(run_and_kill "g['75:70']['inputs']['unet_name'] = 'broken.safetensors'")
[ "$(pg_sql "SELECT state FROM kiln_jobs WHERE id='$id'")" = 3 ] && ok "the failing job is recorded failed before the kill" \
  || fail "store state: $(pg_sql "SELECT state FROM kiln_jobs WHERE id='$id'")"
check_events "$id" execution_error && ok "killed after the commit: execution_error then executing null were sent" \
  || fail "the end of a failed job was not announced"
finish
