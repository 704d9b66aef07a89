#!/usr/bin/env bash
# serve_crash.sh - kill -9 in the middle of a run, then restart: every accepted job completes exactly once,
# the job that was running runs again, the finished history survives, nothing is duplicated or lost.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
start_server
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
start_server
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
curl -s -o "$SCRATCH/body" "$(url /queue)"
json_check "queue empty afterwards" "j == {'queue_running': [], 'queue_pending': []}"
finish
