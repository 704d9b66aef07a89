#!/usr/bin/env bash
# bench_check.sh - `kiln bench check|show|digest` on the seed reports and on broken files: exit status 0 for a
# valid report, 4 for one with problems (each listed), 3 for a missing file; unknown fields listed on request.
set -euo pipefail
: "${KILN_BIN:?}" "${KILN_SOURCE_DIR:?}"
seeds="$KILN_SOURCE_DIR/tests/data/bench/seeds"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$KILN_BIN" bench check "$seeds"/*.txt > "$tmp/out" || fail "seeds must pass: $(cat "$tmp/out")"
[ "$(grep -c ', valid (0 problem' "$tmp/out")" -eq 3 ] || fail "three valid seeds: $(cat "$tmp/out")"
"$KILN_BIN" bench check --unknown "$seeds/001_6e4e75fc4d9c4806.txt" | grep -q "unknown field /high_bcg (kept)" || fail "--unknown"
for s in "$seeds"/*.txt; do "$KILN_BIN" bench show "$s" > "$tmp/show" || fail "show $s"; done
grep -q "native_graph" "$tmp/show" || fail "show of seed 002"
# A corrupted copy: exit 4, and the problem named with its path.
python3 - "$seeds/000_b6f3f2a8c34741b3.txt" "$tmp/bad.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["graphs"]["klein-4b-8st"]["cards"]["0"]["batches"]["3"]["reduced"]["images_per_minute_wall"] = 99.0
json.dump(r, open(sys.argv[2], "w"))
PY
set +e
"$KILN_BIN" bench check "$tmp/bad.json" > "$tmp/out"; rc=$?
"$KILN_BIN" bench check /nonexistent/kiln/report.json 2>/dev/null; rc2=$?
echo '{"rows": 5}' > "$tmp/typed.json"
"$KILN_BIN" bench check "$tmp/typed.json" > "$tmp/out2"; rc3=$?
"$KILN_BIN" bench show "$tmp/typed.json" > "$tmp/out3"; rc4=$?
set -e
[ "$rc" -eq 4 ] || fail "corrupted report: exit $rc"
grep -q "batches/3/reduced/images_per_minute_wall: 99" "$tmp/out" || fail "problem not named: $(cat "$tmp/out")"
[ "$rc2" -eq 3 ] || fail "missing file: exit $rc2"
[ "$rc3" -eq 4 ] && grep -q "/rows: expected array, got integer" "$tmp/out2" || fail "type error: $(cat "$tmp/out2")"
[ "$rc4" -eq 0 ] && grep -q "does not follow the schema" "$tmp/out3" || fail "show of a bad report"
"$KILN_BIN" bench digest "$KILN_SOURCE_DIR/tests/data/bench/graphs/klein-4b-8st.json" |
  grep -q "graph_digest 2909f994427042d52d49c9275df757d8e86ae3d665946b133b97150ec342279e" || fail "digest"
echo "bench_check: all checks passed"
