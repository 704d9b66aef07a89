#!/usr/bin/env bash
# bench_compare.sh - `kiln bench compare` A/B/B/A against two ComfyUI-API test doubles (tests/py/comfy_double.py):
# side b twice as fast, same pixels -> identical outputs "yes", ratio of medians < 1 with its interval, a report
# `kiln bench check` accepts (A/B/B/A order, summary means, reduction); then a lossy side b (other pixels) ->
# "no". Also a bad label pair is refused.
set -euo pipefail
: "${KILN_BIN:?}" "${KILN_SOURCE_DIR:?}"
data="$KILN_SOURCE_DIR/tests/data/bench"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
start() { # name, args...
  local name=$1; shift
  python3 "$KILN_SOURCE_DIR/tests/py/comfy_double.py" --port-file "$tmp/$name.port" "$@" &
  pids+=($!)
}
port() { for _ in $(seq 600); do [ -s "$tmp/$1.port" ] && break; sleep 0.05; done; cat "$tmp/$1.port"; }

start a --exec-ms 100
start b --exec-ms 20
start lossy --exec-ms 20 --pixel-salt x
A=http://127.0.0.1:$(port a); B=http://127.0.0.1:$(port b); L=http://127.0.0.1:$(port lossy)

"$KILN_BIN" bench compare --a "$A" --b "$B" --graph "$data/graphs/klein-4b-8st.json" --bank "$data/prompt-bank.json" \
  --cell still-orchard-1__dwelling --rounds 2 --label-a eager --label-b bcg -o "$tmp/ab.json" --md "$tmp/ab.md" \
  || fail "compare failed"
"$KILN_BIN" bench check "$tmp/ab.json" | grep -q "abba report, valid" || fail "compare report invalid"
grep -q "Identical outputs: yes." "$tmp/ab.md" || fail "identical outputs not yes"
grep -q "| r1-2-b | b |" "$tmp/ab.md" || fail "markdown rows"
python3 - "$tmp/ab.json" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
def need(c, m):
    if not c: sys.exit("FAIL: " + m)
rows = r["rows"]
need([x["side"] for x in rows] == list("abbaabba"), "A/B/B/A order")
a = [x["engine_e2e_s"] for x in rows if x["side"] == "a"]; b = [x["engine_e2e_s"] for x in rows if x["side"] == "b"]
q = r["ratio_of_medians"]
need(abs(q["ratio"] - statistics.median(b) / statistics.median(a)) < 1e-12, "ratio of medians")
need(abs(q["lo"] - min(b) / max(a)) < 1e-12 and abs(q["hi"] - max(b) / min(a)) < 1e-12, "interval (n = 4: min/max)")
need(abs(q["confidence"] - 0.875 ** 2) < 1e-12, "achieved confidence 0.875^2")
need(q["ratio"] < 0.8, "b is the faster side (20 ms vs 100 ms per image)")
need(abs(r["summary"]["engine_e2e_s"]["eager"] - statistics.mean(a)) < 1e-12, "summary mean")
need(r["identical_outputs"] == "yes" and len({x["output_sha256"] for x in rows}) == 1, "identical")
print("compare report ok")
PY

"$KILN_BIN" bench compare --a "$A" --b "$L" --graph "$data/graphs/klein-4b-8st.json" --bank "$data/prompt-bank.json" \
  --rounds 1 --warmup 0 -o "$tmp/al.json" --md "$tmp/al.md" || fail "lossy compare failed"
grep -q "Identical outputs: no." "$tmp/al.md" || fail "a lossy side must give no"
"$KILN_BIN" bench check "$tmp/al.json" >/dev/null || fail "lossy report invalid"

if "$KILN_BIN" bench compare --a "$A" --b "$B" --graph "$data/graphs/klein-4b-8st.json" --bank "$data/prompt-bank.json" \
   --label-a same --label-b same -o "$tmp/x.json" 2>"$tmp/err"; then fail "equal labels accepted"; fi
grep -q "labels must differ" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
echo "bench_compare: all checks passed"
