#!/usr/bin/env bash
# bench_hostile.sh - a ComfyUI-API server that answers wrongly (tests/py/comfy_double.py --evil MODE): every
# such answer ends `kiln bench run` with a clear error naming what was wrong, a non-zero exit status, and no
# crash (under ASan in CI: no leak either); the report written so far is kept, marked partial, and valid.
source "$(dirname "$0")/lib/bench_common.bash"
export KILN_NVML_LIB=/nonexistent/libnvidia-ml.so.1
expect() { # mode, message fragment
  local mode=$1 want=$2 rc
  rm -f "$tmp/port"
  python3 "$KILN_SOURCE_DIR/tests/py/comfy_double.py" --port-file "$tmp/port" --exec-ms 5 --evil "$mode" &
  pid=$!
  for _ in $(seq 600); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  set +e
  "$KILN_BIN" bench run --url "http://127.0.0.1:$(cat "$tmp/port")" --graph "$data/graphs/klein-4b-8st.json" \
    --bank "$data/prompt-bank.json" --warmup 0 --timed 1 --timeout 2 -o "$tmp/r.json" 2>"$tmp/err"
  rc=$?
  set -e
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  [ "$rc" -ne 0 ] && [ "$rc" -lt 64 ] || fail "$mode: exit status $rc"
  grep -q -- "$want" "$tmp/err" || fail "$mode: message lacks '$want': $(cat "$tmp/err")"
  # The report is still written, marked partial, and valid (what was done is kept).
  "$KILN_BIN" bench check "$tmp/r.json" | grep -q "valid (0 problem" || fail "$mode: partial report invalid"
  grep -q '"partial": true' "$tmp/r.json" || fail "$mode: report not marked partial"
  echo "ok $mode: $(tail -1 "$tmp/err")"
}
expect no-prompt-id "no usable prompt_id"
expect not-json "the answer is not JSON"
expect huge-json "answer over"
expect no-images "0 output images"
expect bad-png "png:"
expect view-404 "HTTP 404"
expect exec-error "execution error"
expect never-done "not done after 2 s"
echo "bench_hostile: all checks passed"
