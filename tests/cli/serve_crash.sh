#!/usr/bin/env bash
# serve_crash.sh - kill -9 in the middle of a run, then restart: every accepted job completes exactly once,
# the job that was running runs again, the finished history survives, nothing is duplicated or lost.
# /history alone cannot show that (a re-run overwrites a job's entry), so the test also counts what a re-run
# leaves behind: output files (one per job), execution_start events on /ws (tests/py/ws_events.py, per server
# lifetime) and the job store's QUEUED -> RUNNING claims (attempts, read from the SQLite file).
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
"$PY" -c "import websocket" 2>/dev/null || { echo "FAIL: $PY lacks websocket-client: run scripts/install-test-python.sh"; exit 1; }
make_models
start_server
echo "http://127.0.0.1:$PORT" >"$SCRATCH/url.tmp" && mv "$SCRATCH/url.tmp" "$SCRATCH/url" # whole, for the readers
"$PY" "$KILN_SOURCE_DIR/tests/py/ws_events.py" "$SCRATCH/url" shell-test "$SCRATCH/events" "$SCRATCH/ws_stop" \
  2>"$SCRATCH/ws.log" &
WS_PID=$!
for _ in $(seq 1 100); do grep -q "^connected 0" "$SCRATCH/events" 2>/dev/null && break; sleep 0.05; done
grep -q "^connected 0" "$SCRATCH/events" && ok "websocket follower connected" || fail "websocket follower never connected"
N=5
ids=()
for i in $(seq 1 $N); do
  # job 2 is long (512x512, 30 steps: seconds, not milliseconds), so it is surely still running when the poll
  # below sees it and the kill lands; with all jobs tiny, jobs 2-5 could all finish before the poll ran
  size=64 steps=3
  [ "$i" -eq 2 ] && size=512 steps=30
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=$size, height=$size); g['75:62']['inputs'].update(width=$size, height=$size, steps=$steps)
g['75:73']['inputs']['noise_seed'] = $i; g['9']['inputs']['filename_prefix'] = 'crash/job$i'" >"$SCRATCH/req"
  curl -s -o "$SCRATCH/body" -d @"$SCRATCH/req" "$(url /prompt)"
  ids+=("$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")")
done
[ ${#ids[@]} -eq $N ] && ok "$N jobs accepted" || fail "accepted ${#ids[@]} of $N"
# wait for the first to finish (history to survive) and another to be running, then kill -9
wait_history "${ids[0]}" && ok "first job finished before the crash" || fail "first job never finished"
for _ in $(seq 1 300); do
  curl -s -o "$SCRATCH/body" "$(url /queue)"
  python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['queue_running'] else 1)" "$SCRATCH/body" && break
  sleep 0.05
done
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
ok "server killed with SIGKILL"
# the store as the crash left it: which jobs had finished, which was running, how often each was claimed
python3 "$KILN_SOURCE_DIR/tests/py/store_jobs.py" "$DB" "$SCRATCH/at_crash.json"
python3 - "$SCRATCH/at_crash.json" "${ids[@]}" <<'PY' && ok "at the crash: job 1 succeeded, job 2 running, jobs 3-5 queued" || fail "store at the crash: $(cat "$SCRATCH/at_crash.json")"
import json, sys
s = json.load(open(sys.argv[1])); ids = sys.argv[2:]
assert [s[i]["state"] for i in ids] == ["succeeded", "running", "queued", "queued", "queued"], s
assert [s[i]["attempts"] for i in ids] == [1, 1, 0, 0, 0], s
PY
start_server
echo "http://127.0.0.1:$PORT" >"$SCRATCH/url.tmp" && mv "$SCRATCH/url.tmp" "$SCRATCH/url" # whole, for the readers
grep -q "queued again" "$SCRATCH/server.log" && ok "restart re-queued the job that was running" || fail "no recovery logged"
for id in "${ids[@]}"; do wait_history "$id" || fail "job $id never finished after the restart"; done
curl -s -o "$SCRATCH/body" "$(url /history)"
python3 - "$SCRATCH/body" "${ids[@]}" <<'PY' && ok "every job succeeded exactly once, outputs distinct" || fail "history after the crash"
import json, sys
h = json.load(open(sys.argv[1])); ids = sys.argv[2:]
assert len(h) == len(ids), (len(h), len(ids))
files = []
for pid in ids:
    e = h[pid]
    assert e["status"]["status_str"] == "success", e["status"]
    assert [m[0] for m in e["status"]["messages"]].count("execution_success") == 1
    files += [i["subfolder"] + "/" + i["filename"] for i in e["outputs"]["9"]["images"]]
assert len(files) == len(set(files)) == len(ids), files
PY
# what a re-run would leave: a second output file, a second claim in the store, a second execution_start
(cd "$OUT" && find crash -name '*.png' | sort) >"$SCRATCH/files"
python3 - "$SCRATCH/files" "$N" <<'PY' && ok "one output file per job" || fail "output files: $(tr '\n' ' ' <"$SCRATCH/files")"
import re, sys
files = open(sys.argv[1]).read().split(); n = int(sys.argv[2])
assert len(files) == n, files
assert sorted(int(re.match(r"crash/job(\d+)_", f).group(1)) for f in files) == list(range(1, n + 1)), files
PY
python3 "$KILN_SOURCE_DIR/tests/py/store_jobs.py" "$DB" "$SCRATCH/final.json"
python3 - "$SCRATCH/at_crash.json" "$SCRATCH/final.json" "${ids[@]}" <<'PY' && ok "store: the running job claimed twice, every other job once, the finished one untouched" || fail "store after the restart: $(cat "$SCRATCH/final.json")"
import json, sys
c, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])); ids = sys.argv[3:]
assert sorted(f) == sorted(ids), f
assert all(f[i]["state"] == "succeeded" for i in ids), f
assert [f[i]["attempts"] for i in ids] == [1, 2, 1, 1, 1], f
assert f[ids[0]]["finished_ms"] == c[ids[0]]["finished_ms"], (c[ids[0]], f[ids[0]])
PY
touch "$SCRATCH/ws_stop"
wait "$WS_PID" || fail "websocket follower: $(tail -3 "$SCRATCH/ws.log")"
"$PY" - "$SCRATCH/events" "$KILN_SOURCE_DIR/tests/py" "${ids[@]}" <<'PY' && ok "execution_start: jobs 1, 2 before the crash; 3-5 once after it, job 1 never again" || fail "execution_start events: $(tr '\n' ' ' <"$SCRATCH/events")"
import sys
sys.path.insert(0, sys.argv[2])
import ws_events
lines = open(sys.argv[1]).read().splitlines(); ids = sys.argv[3:]
c = ws_events.counts(lines)
assert "connected 1" in lines, lines  # followed the restarted server
assert set(l for l, _ in c) <= {0, 1}, c
assert c.get((0, ids[0])) == 1 and c.get((0, ids[1])) == 1, c
assert all((0, i) not in c for i in ids[2:]), c
assert (1, ids[0]) not in c, c                      # the job that had finished does not start again
assert c.get((1, ids[1]), 0) <= 1, c                # the re-run (its start may beat the reconnect)
assert all(c.get((1, i)) == 1 for i in ids[2:]), c  # after the long re-run of job 2: surely followed
assert all(p in ids for _, p in c), c
PY
curl -s -o "$SCRATCH/body" "$(url /queue)"
json_check "queue empty afterwards" "j == {'queue_running': [], 'queue_pending': []}"
finish
