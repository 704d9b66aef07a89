#!/usr/bin/env bash
# serve_webpage.sh - the page at / in headless Chromium: prompt in, image shown, screenshot saved
# (tests/py/webpage_chromium.py drives the browser over the DevTools protocol). Also with --token, so the page's
# token handling (fetch headers, ?token= on the websocket and /view) is exercised.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
"$PY" -c "import websocket" 2>/dev/null || { echo "FAIL: $PY lacks websocket-client: run scripts/install-test-python.sh"; exit 1; }
make_models
TOKEN=page-$RANDOM
start_server --token "$TOKEN"
SHOT=${KILN_SCREENSHOT:-$SCRATCH/webpage.png}
if "$PY" "$KILN_SOURCE_DIR/tests/py/webpage_chromium.py" "http://127.0.0.1:$PORT" "$TOKEN" "$SHOT"; then
  ok "web page shows the generated image"
else
  fail "web page in chromium"
fi
[ -s "$SHOT" ] && ok "screenshot saved ($SHOT)" || fail "no screenshot"
finish
