#!/usr/bin/env bash
# serve_comfy_nodes.sh - graphs as the frontend and shared API graphs send them: the official klein template's
# API-format export from the frontend (committed test data) through plain /prompt, Primitive* nodes feeding widget
# inputs, PreviewImage (temp outputs), literals coerced as ComfyUI coerces them (numeric strings, 64.0, seeds
# up to 2^64-1), an upper-case prompt id; and uploads: a '"' in a filename is refused, an over-limit chunked
# body gets a 413. ~10 s.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
cp "$MODELS/diffusion_models/flux-2-klein-4b.safetensors" "$MODELS/diffusion_models/flux-2-klein-base-4b.safetensors"
start_server --max-body 65536 --batch-images 1

# the official klein template as the frontend exports it (graphToPrompt; serve_frontend_chromium.sh checks the
# export still equals this file), through plain /prompt: both subgraphs, Primitive nodes, 64x64, 1 step
graph_body flux2_klein_t2i_official_frontend_api.json >"$SCRATCH/req"
expect_status 200 "POST /prompt (the frontend's export of the official template)" -d @"$SCRATCH/req" "$(url /prompt)"
PT=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$PT" || fail "template export never finished"
json_check "template export: both SaveImage outputs, 64x64 PNGs" "j['$PT']['status']['status_str'] == 'success' and sorted(j['$PT']['outputs']) == ['78', '9']"
PID=$(python3 -c "import uuid; print(str(uuid.uuid4()).upper())")
graph_body flux2_klein_t2i_template_api.json "
g['p1'] = {'class_type': 'PrimitiveInt', 'inputs': {'value': '64'}}
g['p2'] = {'class_type': 'PrimitiveStringMultiline', 'inputs': {'value': 'a lighthouse'}}
g['p3'] = {'class_type': 'PrimitiveFloat', 'inputs': {'value': 1}}
g['p4'] = {'class_type': 'PrimitiveBoolean', 'inputs': {'value': True}}
g['p5'] = {'class_type': 'PrimitiveString', 'inputs': {'value': 5}}
g['75:66']['inputs'].update(width=['p1', 0], height='64', batch_size=1.0)
g['75:62']['inputs'].update(width=64, height=64.0, steps='1')
g['75:74']['inputs']['text'] = ['p2', 0]
g['75:63']['inputs']['cfg'] = ['p3', 0]
g['75:73']['inputs']['noise_seed'] = 18446744073709551615
g['pv'] = {'class_type': 'PreviewImage', 'inputs': {'images': g['9']['inputs']['images']}}
" | python3 -c "import json,sys; b=json.load(sys.stdin); b['prompt_id']='$PID'; print(json.dumps(b))" >"$SCRATCH/req"
grep -q '18446744073709551615' "$SCRATCH/req" && ok "request carries the 2^64-1 seed literally" || fail "seed literal"
expect_status 200 "POST /prompt (primitives, coercions, big seed, upper-case id)" -d @"$SCRATCH/req" "$(url /prompt)"
json_check "the upper-case id is kept" "j['prompt_id'] == '$PID'"
wait_history "$PID" || fail "job never finished"
json_check "succeeded" "j['$PID']['status']['status_str'] == 'success'"
json_check "PreviewImage output is temp" "j['$PID']['outputs']['pv']['images'][0]['type'] == 'temp' and j['$PID']['outputs']['pv']['images'][0]['filename'].startswith('ComfyUI_temp_')"
F=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['$PID']['outputs']['pv']['images'][0]['filename'])" "$SCRATCH/body")
expect_status 200 "GET /view of the temp image" "$(url "/view?filename=$F&type=temp")"
for bad in "'x'" "'6.5'" "[1]" "18446744073709551616" "-1"; do
  graph_body flux2_klein_t2i_template_api.json "g['75:73']['inputs']['noise_seed'] = $bad" >"$SCRATCH/req"
  expect_status 400 "noise_seed $bad refused" -d @"$SCRATCH/req" "$(url /prompt)"
done
graph_body flux2_klein_t2i_template_api.json "g['75:66']['inputs']['width'] = '1e3'" >"$SCRATCH/req"
expect_status 400 "INT from '1e3' refused (Python's int() refuses it)" -d @"$SCRATCH/req" "$(url /prompt)"
graph_body flux2_klein_t2i_template_api.json "g['75:63']['inputs']['cfg'] = 'nan'" >"$SCRATCH/req"
expect_status 400 "FLOAT 'nan' refused" -d @"$SCRATCH/req" "$(url /prompt)"
graph_body flux2_klein_t2i_template_api.json "g['p1'] = {'class_type': 'PrimitiveInt', 'inputs': {'value': 99999}}; g['75:66']['inputs']['width'] = ['p1', 0]" >"$SCRATCH/req"
expect_status 200 "a linked out-of-range width is accepted at submission" -d @"$SCRATCH/req" "$(url /prompt)"
P2=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$P2" || fail "job never finished"
json_check "and fails clearly when it runs" "j['$P2']['status']['status_str'] == 'error' and 'outside' in j['$P2']['status']['messages'][-1][1]['exception_message']"

# ---- uploads -----------------------------------------------------------------------------------------------------
python3 - "$PORT" <<'PYEOF' && ok "a quote in an upload filename is refused" || fail "quote in upload filename"
import http.client, sys
b = b'--XX\r\nContent-Disposition: form-data; name="image"; filename="a"b.png"\r\nContent-Type: image/png\r\n\r\nxyz\r\n--XX--\r\n'
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
c.request("POST", "/upload/image", b, {"Content-Type": "multipart/form-data; boundary=XX"})
r = c.getresponse()
assert r.status == 400, (r.status, r.read())
PYEOF
[ ! -e "$OUT/input/a" ] && ok "no truncated file saved" || fail "a truncated 'a' was saved"
head -c 100000 /dev/urandom >"$SCRATCH/big.bin"
expect_status 413 "over-limit chunked upload" -H 'Transfer-Encoding: chunked' -F image=@"$SCRATCH/big.bin" "$(url /upload/image)"
expect_status 200 "the server still answers" "$(url /health)"
finish
