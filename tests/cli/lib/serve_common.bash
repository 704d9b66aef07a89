# serve_common.bash - helpers for the tests that drive `kiln serve` (sourced by tests/cli/serve_*.sh).
# Each test gets its own scratch folder, a models folder that links the committed tiny model, and a server on a
# free loopback port (--port 0, read back from --port-file). The server is stopped by PID on exit.
set -euo pipefail
: "${KILN_BIN:?KILN_BIN must point at the kiln binary}"
: "${KILN_SOURCE_DIR:?KILN_SOURCE_DIR must point at the source tree}"
SCRATCH=$(mktemp -d /tmp/kiln-serve-test.XXXXXX)
MODELS=$SCRATCH/models
OUT=$SCRATCH/out
DB=$SCRATCH/user/kiln-jobs.sqlite   # the job store: --database defaults to <user-dir>/kiln-jobs.sqlite, user/ beside OUT
SERVER_PID=""
PORT=""
fails=0

cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

make_models() {
  mkdir -p "$MODELS/diffusion_models" "$MODELS/text_encoders" "$MODELS/vae"
  local tiny=$KILN_SOURCE_DIR/tests/data/tiny/comfy
  # copies, not links: the server must see one stable snapshot even if the committed files are regenerated
  cp "$tiny/flux-2-klein-4b.safetensors" "$MODELS/diffusion_models/"
  cp "$tiny/qwen_3_4b.safetensors" "$MODELS/text_encoders/"
  cp "$tiny/flux2-vae.safetensors" "$MODELS/vae/"
}

# start_server [extra kiln serve flags...]: starts in the background, waits for /health.
start_server() {
  rm -f "$SCRATCH/port"
  "$KILN_BIN" serve --port 0 --port-file "$SCRATCH/port" --models "$MODELS" --output "$OUT" "$@" \
    >>"$SCRATCH/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if [ -s "$SCRATCH/port" ]; then
      PORT=$(cat "$SCRATCH/port")
      curl -s -o /dev/null "http://127.0.0.1:$PORT/health" && return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SCRATCH/server.log"; echo "FAIL: server exited at start"; exit 1; }
    sleep 0.1
  done
  cat "$SCRATCH/server.log"; echo "FAIL: server did not come up"; exit 1
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

url() { echo "http://127.0.0.1:$PORT$1"; }

ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# expect_status CODE DESCRIPTION curl-args...: the HTTP status of one request.
expect_status() {
  local want=$1 what=$2; shift 2
  local got
  got=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' "$@" || true)
  if [ "$got" = "$want" ]; then ok "$what ($got)"; else fail "$what: status $got, want $want: $(head -c 300 "$SCRATCH/body")"; fi
}

# json_check DESCRIPTION PYTHON-EXPR: evaluates EXPR with j = the last body as JSON.
json_check() {
  local what=$1 expr=$2
  if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($expr) else 1)" "$SCRATCH/body" 2>/dev/null; then
    ok "$what"
  else
    fail "$what: $(head -c 400 "$SCRATCH/body")"
  fi
}

# graph FILE [python statements on g]: prints {"prompt": graph} with edits applied.
graph_body() {
  local file=$1 edit=${2:-}
  python3 -c "
import json,sys
g=json.load(open(sys.argv[1]))
$edit
print(json.dumps({'prompt': g, 'client_id': 'shell-test'}))" "$KILN_SOURCE_DIR/tests/data/graphs/$file"
}

# wait_history ID: waits until /history/ID is non-empty (60 s), leaves it in $SCRATCH/body.
wait_history() {
  for _ in $(seq 1 600); do
    curl -s -o "$SCRATCH/body" "$(url "/history/$1")"
    if python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) else 1)" "$SCRATCH/body" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

# idat PNG: the pixel data (IDAT chunks), without the text chunks, which name paths and parameters
idat() { python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read()[8:]; o=b""
while b:
    n,=struct.unpack(">I",b[:4]); o+=b[8:8+n] if b[4:8]==b"IDAT" else b""; b=b[12+n:]
sys.stdout.buffer.write(o)' "$1"; }

finish() {
  if [ "$fails" -ne 0 ]; then
    echo "---- server log"; tail -50 "$SCRATCH/server.log"
    echo "$fails check(s) FAILED"; exit 1
  fi
  echo "all checks passed"
}
