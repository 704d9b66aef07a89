#!/usr/bin/env bash
# bench_nvml.sh - `kiln bench run` with GPU telemetry, on a machine without a GPU: the scripted NVML double
# (tests/nvml/fake_nvml.c, path in $KILN_FAKE_NVML from CMake) is loaded through kiln's own dlopen path
# (KILN_NVML_LIB) and scripted with FAKE_NVML_<key> variables. A quiet card gives a report with the cap and its
# field, the cap-name check, an idle baseline, a trace with series and counters; a busy card, an unexpected GPU
# process and a name claiming another cap are refusals (exit 9, nothing timed) unless disclosed or --force.
source "$(dirname "$0")/lib/bench_common.bash"
: "${KILN_FAKE_NVML:?path of the kiln_fake_nvml library (set by CMake)}"
python3 "$KILN_SOURCE_DIR/tests/py/comfy_double.py" --port-file "$tmp/port" --exec-ms 150 &
pid=$!
for _ in $(seq 600); do [ -s "$tmp/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$tmp/port")"
export KILN_NVML_LIB=$KILN_FAKE_NVML
run() { # out-name, extra args...
  local out=$1; shift
  "$KILN_BIN" bench run --url "$url" --graph "$data/graphs/klein-4b-8st.json@ember-harbor-1__dwelling" \
    --bank "$data/prompt-bank.json" --warmup 1 --timed 2 --gate 5,0.2,4,2,0 --idle-samples 2 --period 0.05 \
    -o "$tmp/$out.json" "$@"
}

run quiet --arm r1-95w || fail "quiet run"
"$KILN_BIN" bench check "$tmp/quiet.json" | grep -q "valid (0 problem" || fail "quiet report invalid: $("$KILN_BIN" bench check "$tmp/quiet.json")"
python3 - "$tmp/quiet.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
def need(c, m):
    if not c: sys.exit("FAIL: " + m)
uuid = "GPU-00000000-fake-4000-8000-000000000001"
need(r["telemetry"]["available"] is True and r["telemetry"]["driver"] == "999.1.2", "telemetry available")
need(r["refusals"] == [], "no refusal on a quiet card")
gate = r["preflight"]["card_available"]["contention_gate"]
need(gate["passed"] is True and gate["attempts"][0]["verdict"] == "quiet: mean 0.0% <= 5.0%", "gate")
need(gate["attempts"][0]["judged_on"] == "driver samples" and gate["attempts"][0]["driver_samples"]["n"] == 10, "gate on nvmlDeviceGetSamples")
need(gate["attempts"][0]["readings"] == 4, "gate readings")
cap = r["preflight"]["cap"]
need(cap["w"] == 95.0 and cap["field"] == "enforced.power.limit" and cap["per_card_field"][uuid] == "enforced.power.limit", "cap field")
need(cap["per_card_limits_w"][uuid]["power.limit"] is None and cap["per_card_limits_w"][uuid]["power.max_limit"] == 175.0, "limits")
need(r["cap_name_check"]["verdict"] == "the name and the card agree at 95 W", "cap name")
ib = r["preflight"]["idle_baseline"][uuid]
need(ib["power.draw"]["n"] == 2 and ib["power.draw"]["median"] == 250.0 and ib["fan.speed"]["n"] == 0 and ib["fan.speed"]["mean"] is None, "idle baseline")
card = r["graphs"]["klein-4b-8st"]["cards"]["0"]
need(card["uuid"] == uuid and card["bus_id"] == "00000000:01:00.0" and card["cap_w"] == 95.0, "card identity")
tr = card["batches"]["3"]["trace"]
need(tr["available"] is True and tr["samples"] >= 2 and tr["memory.used"]["median"] == 16355.0, "trace")
need(tr["fan.speed"]["n"] == 0 and tr["power.limit"]["n"] == 0 and tr["enforced.power.limit"]["n"] == tr["samples"], "null fields")
need(tr["throttle"]["source"]["sw_power_cap"] == "counter" and tr["throttle"]["source"]["hw_slowdown"] == "sampled", "throttle sources")
need(tr["throttle"]["hw_slowdown"] == 0.0 and tr["energy_j"] == 0.0, "throttle and energy")
need(len(tr["series"]["t"]) == tr["samples"], "series")
need(all("never matched across caps" in v for v in card["batches"]["3"]["references_withheld"].values()), "withheld at 95 W")
print("telemetry report ok")
PY
"$KILN_BIN" bench plot "$tmp/quiet.json" -o "$tmp/quiet.png" || fail "plot"
[ -s "$tmp/quiet.png" ] || fail "no plot"

set +e
FAKE_NVML_util=50 run busy --arm r1-95w 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 9 ] || fail "busy card: exit $rc, want 9"
python3 -c "
import json,sys; r=json.load(open('$tmp/busy.json'))
ok = r['refusals'][0]['check']=='contention_gate' and 'refused after 2 attempt(s): busy: mean 50.0% > 5.0%' == r['refusals'][0]['verdict'] and r['graphs']=={}
sys.exit(0 if ok else 'FAIL: busy refusal %s' % r['refusals'])"
"$KILN_BIN" bench check "$tmp/busy.json" | grep -q "valid (0 problem" || fail "refused report invalid"

# Utilization NOT_SUPPORTED in the driver's samples (as on MIG): the gate falls back to the polled readings.
FAKE_NVML_util_hist=-1 run fallback --arm r1-95w || fail "fallback run"
grep -q '"judged_on": "polled readings"' "$tmp/fallback.json" || fail "gate did not fall back to polled readings"

set +e
FAKE_NVML_nproc=1 run proc --arm r1-95w 2>/dev/null; rc=$?
set -e
[ "$rc" -eq 9 ] || fail "unexpected process: exit $rc"
grep -q '"check": "gpu_processes"' "$tmp/proc.json" || fail "no gpu_processes refusal"
FAKE_NVML_nproc=1 run disclosed --arm r1-95w --disclose 4242 || fail "a disclosed process must pass"

set +e
run wrongcap --arm r1-175w 2>/dev/null; rc=$?
set -e
[ "$rc" -eq 9 ] || fail "name claiming 175 W on a 95 W card: exit $rc"
grep -q "the name claims 175 W but the card is capped at 95.0 W" "$tmp/wrongcap.json" || fail "cap-name verdict"

FAKE_NVML_util=50 run forced --arm r1-95w --force 2>/dev/null || fail "forced run"
python3 -c "
import json,sys; r=json.load(open('$tmp/forced.json'))
sys.exit(0 if r['refusals'] and r['graphs']['klein-4b-8st']['cards']['0']['batches']['3']['reduced']['submits']==2 else 'FAIL: forced')"
echo "bench_nvml: all checks passed"
