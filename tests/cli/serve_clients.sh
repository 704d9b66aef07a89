#!/usr/bin/env bash
# serve_clients.sh - real clients against `kiln serve` on the tiny model: Python's openai package, a websocket
# client, requests (tests/py/test_serve_clients.py, run by pytest from the venv that
# scripts/install-test-python.sh makes). Fails, never skips, when the venv is missing.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
if ! "$PY" -c "import openai, websocket, requests, pytest" 2>/dev/null; then
  echo "FAIL: $PY lacks openai/websocket-client/requests/pytest: run scripts/install-test-python.sh"
  exit 1
fi
make_models
TOKEN=tok-$RANDOM$RANDOM
start_server --token "$TOKEN"
KILN_URL="http://127.0.0.1:$PORT" KILN_TOKEN="$TOKEN" "$PY" -m pytest -q -p no:cacheprovider \
  "$KILN_SOURCE_DIR/tests/py/test_serve_clients.py" || { tail -30 "$SCRATCH/server.log"; exit 1; }
