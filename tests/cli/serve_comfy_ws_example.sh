#!/usr/bin/env bash
# serve_comfy_ws_example.sh - ComfyUI's websocket API examples (tests/py/comfy_ws_example.py) 100 times in a
# row on the tiny model (64x64, 1 step): half read /history on `executing {node: null}` and fetch /view (the
# history row must be committed before that message), half take the image from SaveImageWebsocket's binary
# frames. Also checks the event order ComfyUI sends, and --preview-method latent2rgb's JPEG frames and
# progress_state messages. KILN_WS_RUNS overrides the count.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
"$PY" -c "import websocket" 2>/dev/null || { echo "FAIL: $PY lacks websocket-client: run scripts/install-test-python.sh"; exit 1; }
make_models
start_server --batch-images 1
graph_body flux2_klein_t2i_template_api.json \
  "g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64, steps=1)" \
  | python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)['prompt']))" >"$SCRATCH/graph.json"
if "$PY" "$KILN_SOURCE_DIR/tests/py/comfy_ws_example.py" "http://127.0.0.1:$PORT" "$SCRATCH/graph.json" "${KILN_WS_RUNS:-100}"; then
  ok "ComfyUI's websocket examples, ${KILN_WS_RUNS:-100} runs"
else
  fail "ComfyUI's websocket examples"
fi
# the order of one prompt's messages, as ComfyUI sends them
"$PY" - "http://127.0.0.1:$PORT" "$SCRATCH/graph.json" <<'PYEOF' && ok "event order" || fail "event order"
import json, sys, urllib.request, uuid, websocket
url, graph = sys.argv[1], json.load(open(sys.argv[2]))
cid = str(uuid.uuid4())
ws = websocket.create_connection(url.replace("http", "ws") + "/ws?clientId=" + cid, timeout=60)
req = urllib.request.Request(url + "/prompt", json.dumps({"prompt": graph, "client_id": cid}).encode())
pid = json.load(urllib.request.urlopen(req))["prompt_id"]
seen = []
while True:
    raw = ws.recv()
    assert isinstance(raw, str), "a binary frame without --preview-method or SaveImageWebsocket"
    m = json.loads(raw)
    if m["data"].get("prompt_id") not in (pid, None): continue
    seen.append((m["type"], m["data"].get("node", "-")))
    if m["type"] == "executing" and m["data"]["node"] is None: break
types = [t for t, _ in seen]
assert types.index("execution_start") < types.index("execution_cached") < types.index("executing"), types
assert types.index("execution_success") == len(types) - 2, types  # success, then executing null last
assert "progress" in types and "executed" in types, types
PYEOF

# --preview-method latent2rgb: a JPEG preview frame per step (u32 BE 1 = PREVIEW_IMAGE, u32 BE 1 = JPEG), the
# latent's size (W/8 x H/8), and progress_state messages ending with every node finished
stop_server
start_server --batch-images 1 --preview-method latent2rgb
"$PY" - "http://127.0.0.1:$PORT" "$SCRATCH/graph.json" <<'PYEOF' && ok "latent2rgb previews and progress_state" || fail "latent2rgb previews and progress_state"
import json, struct, sys, urllib.request, uuid, websocket
url, graph = sys.argv[1], json.load(open(sys.argv[2]))
graph["75:62"]["inputs"]["steps"] = 2
cid = str(uuid.uuid4())
ws = websocket.create_connection(url.replace("http", "ws") + "/ws?clientId=" + cid, timeout=60)
req = urllib.request.Request(url + "/prompt", json.dumps({"prompt": graph, "client_id": cid}).encode())
pid = json.load(urllib.request.urlopen(req))["prompt_id"]
previews, states = [], []
while True:
    raw = ws.recv()
    if isinstance(raw, bytes):
        previews.append(raw)
        continue
    m = json.loads(raw)
    if m["type"] == "progress_state": states.append(m["data"])
    if m["type"] == "executing" and m["data"]["node"] is None and m["data"]["prompt_id"] == pid: break
assert len(previews) == 2, len(previews)
for p in previews:
    assert struct.unpack(">II", p[:8]) == (1, 1), p[:8]
    jpg = p[8:]
    assert jpg[:2] == b"\xff\xd8" and jpg[-2:] == b"\xff\xd9", jpg[:4]
    i = 2  # the SOF0 marker holds the size
    while jpg[i + 1] not in (0xC0, 0xC2): i += 2 + struct.unpack(">H", jpg[i + 2:i + 4])[0]
    h, w = struct.unpack(">HH", jpg[i + 5:i + 9])
    assert (w, h) == (8, 8), (w, h)
assert states and all(s["prompt_id"] == pid for s in states)
last = states[-1]["nodes"]
assert last["75:64"]["max"] == 2 and all(v["state"] == "finished" for v in last.values()), last
assert any(s["nodes"].get("75:64", {}).get("state") == "running" and s["nodes"]["75:64"]["value"] == 1 for s in states)
PYEOF
finish
