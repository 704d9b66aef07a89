#!/usr/bin/env bash
# serve_ops.sh - operations: GET /metrics in Prometheus' text format (every line well formed, the counters match
# the jobs run, histograms cumulative, model residency until /free), --log-format json (every stderr line one JSON
# object), and the graceful drain on SIGTERM (the running job finishes, the queued ones stay queued and run at
# the next start). ~30 s on 2 cores.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
KILN_LOG=info start_server --log-format json

submit() { # submit WIDTH STEPS: prints the prompt id
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=$1, height=$1)
g['75:62']['inputs'].update(width=$1, height=$1, steps=$2)" >"$SCRATCH/req"
  curl -s "$(url /prompt)" -d @"$SCRATCH/req" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])"
}
a=$(submit 64 1); b=$(submit 64 1)
wait_history "$a" && wait_history "$b" || fail "two jobs did not finish"

curl -s -o "$SCRATCH/metrics" -w '%{content_type}' "$(url /metrics)" >"$SCRATCH/ctype"
grep -q "^text/plain; version=0.0.4" "$SCRATCH/ctype" && ok "/metrics content type" || fail "/metrics content type $(cat "$SCRATCH/ctype")"
check_metrics() { # check_metrics PYTHON-EXPR: m = {name{labels}: value}; types = {name: type}
  python3 - "$SCRATCH/metrics" "$1" <<'PY'
import re, sys
m, types, bad = {}, {}, []
for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("# TYPE "):
        _, _, name, typ = line.split(" ", 3); types[name] = typ
    elif line.startswith("# HELP ") or not line:
        continue
    elif re.fullmatch(r'[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? [-+]?([0-9.]+([eE][-+]?[0-9]+)?|Inf)', line):
        key, val = line.rsplit(" ", 1); m[key] = float(val)
        if re.sub(r"(_bucket|_sum|_count)$", "", key.split("{")[0]) not in types: bad.append("no TYPE: " + line)
    else:
        bad.append(line)
def hist_ok(name):  # cumulative buckets, +Inf = count
    b = [v for k, v in m.items() if k.startswith(name + "_bucket")]
    return b == sorted(b) and b[-1] == m[name + "_count"]
if bad: print("malformed:", bad[:3]); sys.exit(1)
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
check_metrics "m['kiln_queue_depth'] == 0 and m['kiln_jobs{state=\"succeeded\"}'] == 2" && ok "queue depth and jobs by state" || fail "queue/jobs gauges: $(grep -v '^#' "$SCRATCH/metrics" | head -12)"
check_metrics "m['kiln_jobs_finished_total{state=\"succeeded\"}'] == 2 and m['kiln_images_total'] == 2 and m['kiln_images_per_second'] > 0" && ok "finished jobs and images counters" || fail "counters"
check_metrics "all(hist_ok(n) and m[n + '_count'] == 2 for n in ('kiln_job_queue_wait_seconds', 'kiln_job_run_seconds', 'kiln_engine_seconds')) and m['kiln_job_run_seconds_sum'] > 0" && ok "stage latency histograms" || fail "histograms"
check_metrics "m['kiln_model_resident{kind=\"diffusion_model\",file=\"flux-2-klein-4b.safetensors\"}'] == 1 and m['kiln_model_resident{kind=\"vae\",file=\"flux2-vae.safetensors\"}'] == 1" && ok "model residency" || fail "model residency"
curl -s -o /dev/null "$(url /free)" -d '{"unload_models": true}'
curl -s -o "$SCRATCH/metrics" "$(url /metrics)"
check_metrics "not any(k.startswith('kiln_model_resident{') for k in m)" && ok "no resident model after /free" || fail "residency after /free"

# every line the server wrote is one JSON log object
python3 - "$SCRATCH/server.log" <<'PY' && ok "--log-format json: every line is a JSON object" || fail "JSON logs"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert all({"ts", "level", "src", "msg"} <= o.keys() for o in objs), objs[:2]
assert any("succeeded" in o["msg"] for o in objs) and any("listening on" in o["msg"] for o in objs), [o["msg"] for o in objs]
PY

# drain: a job running, two queued; SIGTERM: the running one finishes, the others stay queued. KILN_FAULT_PAUSE
# holds every job 3 s after its graph ran: on a fast machine a 256x256 job alone finished before the SIGTERM came.
stop_server
KILN_FAULT_PAUSE=after-stage:3 KILN_LOG=info start_server --log-format json
slow=$(submit 256 30); q1=$(submit 64 1); q2=$(submit 64 1)
for _ in $(seq 1 300); do
  curl -s "$(url /queue)" | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['queue_running'] else 1)" && break
  sleep 0.05
done
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"; rc=$?
SERVER_PID=""
[ "$rc" -eq 0 ] && ok "SIGTERM: exit 0 after the drain" || fail "SIGTERM exit status $rc"
python3 - "$DB" "$slow" "$q1" "$q2" <<'PY' && ok "drain: the running job finished, the queued ones stayed queued" || fail "drain states"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
st = {i: db.execute("SELECT state FROM jobs WHERE id=?", (i,)).fetchone()[0] for i in sys.argv[2:]}
print(st)
sys.exit(0 if st[sys.argv[2]] == 2 and st[sys.argv[3]] == 0 and st[sys.argv[4]] == 0 else 1)
PY
grep -q "draining" "$SCRATCH/server.log" && ok "drain announced" || fail "no drain line in the log"
start_server
wait_history "$q1" && wait_history "$q2" && ok "the queued jobs run at the next start" || fail "queued jobs after restart"
finish
