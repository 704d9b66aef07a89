#!/usr/bin/env bash
# serve_routes.sh - `kiln serve` on loopback, driven with curl: every route answers with its documented shape,
# the official klein template graph runs unchanged (but for a 64x64 size) on the tiny model, and a bad-input
# suite (malformed JSON, wrong types, unknown classes, missing links, cycles, huge sizes, zero/negative steps,
# path traversal in /view and /upload, oversized bodies, slow-drip connections, bad tokens) gets the documented
# errors while the server keeps serving.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
start_server --timeout 3 --max-body 65536 --front-end-root none

# ---- routes and shapes ------------------------------------------------------------------------------------------
expect_status 200 "GET /health" "$(url /health)"
expect_status 200 "GET / (web page)" "$(url /)"
grep -q '<title>kiln</title>' "$SCRATCH/body" && ok "web page body" || fail "web page body"
expect_status 200 "GET /kiln/ (kiln's page at its own path)" "$(url /kiln/)"
grep -q '<title>kiln</title>' "$SCRATCH/body" && ok "kiln page body" || fail "kiln page body"
expect_status 200 "GET /system_stats" "$(url /system_stats)"
json_check "system_stats shape" "'ram_total' in j['system'] and j['devices'][0]['name']"
expect_status 200 "GET /api/system_stats (the /api prefix)" "$(url /api/system_stats)"
expect_status 200 "GET /object_info" "$(url /object_info)"
json_check "object_info lists the klein classes" "all(c in j for c in ['UNETLoader','CLIPLoader','VAELoader','CLIPTextEncode','ConditioningZeroOut','EmptyFlux2LatentImage','RandomNoise','KSamplerSelect','Flux2Scheduler','CFGGuider','SamplerCustomAdvanced','KSampler','VAEDecode','SaveImage','ImagePixelize'])"
json_check "object_info COMBO lists model files" "j['UNETLoader']['input']['required']['unet_name'][0] == ['flux-2-klein-4b.safetensors']"
expect_status 200 "GET /object_info/KSampler" "$(url /object_info/KSampler)"
json_check "object_info/KSampler has input_order" "j['KSampler']['input_order']['required'][0] == 'model'"
expect_status 200 "GET /models" "$(url /models)"
json_check "models folders" "'diffusion_models' in j and 'vae' in j"
expect_status 200 "GET /models/text_encoders" "$(url /models/text_encoders)"
json_check "models/text_encoders" "j == ['qwen_3_4b.safetensors']"
expect_status 404 "GET /models/nope" "$(url /models/nope)"
expect_status 200 "GET /queue" "$(url /queue)"
json_check "queue shape" "j == {'queue_running': [], 'queue_pending': []}"
expect_status 200 "GET /prompt" "$(url /prompt)"
json_check "prompt exec_info" "j['exec_info']['queue_remaining'] == 0"
expect_status 200 "GET /history (empty)" "$(url /history)"
expect_status 200 "GET /v1/models" "$(url /v1/models)"
json_check "v1/models shape" "j['object'] == 'list' and j['data'][0]['id'] == 'flux.2-klein-4b' and 'flux-2-klein-4b.safetensors' in [m['id'] for m in j['data']]"
expect_status 200 "GET /health_generate" "$(url /health_generate)"
expect_status 200 "POST /free" -X POST -d '{"unload_models":true}' "$(url /free)"
expect_status 200 "POST /interrupt (idle)" -X POST -d '{}' "$(url /interrupt)"
expect_status 404 "unknown route" "$(url /no/such/thing)"
[ "$(cat "$SCRATCH/body")" = "404: Not Found" ] && ok "404 is ComfyUI's plain text" || fail "404 body: $(head -c 200 "$SCRATCH/body")"
expect_status 404 "unknown /api route" "$(url /api/no/such/thing)"
[ "$(cat "$SCRATCH/body")" = "404: Not Found" ] && ok "/api 404 is plain text" || fail "/api 404 body: $(head -c 200 "$SCRATCH/body")"

# ---- the official template graph on the tiny model ---------------------------------------------------------------
graph_body flux2_klein_t2i_template_api.json \
  "g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64)" >"$SCRATCH/req"
expect_status 200 "POST /prompt (official klein template)" -H 'Content-Type: application/json' -d @"$SCRATCH/req" "$(url /prompt)"
json_check "prompt reply shape" "len(j['prompt_id']) == 36 and j['number'] >= 1 and j['node_errors'] == {}"
PID1=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
if wait_history "$PID1"; then ok "history appears"; else fail "history for $PID1 never appeared"; fi
json_check "template graph succeeded" "j['$PID1']['status']['status_str'] == 'success' and j['$PID1']['status']['completed']"
json_check "history messages: start .. success with ms stamps" "[m[0] for m in j['$PID1']['status']['messages']] == ['execution_start','execution_cached','execution_success'] and j['$PID1']['status']['messages'][0][1]['timestamp'] > 10**12"
json_check "history prompt item" "j['$PID1']['prompt'][1] == '$PID1' and j['$PID1']['prompt'][4] == ['9']"
json_check "SaveImage name" "j['$PID1']['outputs']['9']['images'][0] == {'filename': 'Flux2-Klein_00001_.png', 'subfolder': '', 'type': 'output'}"
expect_status 200 "GET /view of the image" "$(url '/view?filename=Flux2-Klein_00001_.png&subfolder=&type=output')"
head -c 8 "$SCRATCH/body" | od -An -c | grep -q 'P   N   G' && ok "view serves a PNG" || fail "view body is not a PNG"
python3 - "$SCRATCH/body" <<'EOF' && ok "PNG is 64x64 and carries the prompt JSON" || fail "PNG size or prompt chunk"
import struct, sys, zlib, json
d = open(sys.argv[1], 'rb').read()
w, h = struct.unpack('>II', d[16:24])
assert (w, h) == (64, 64), (w, h)
i, text = 8, {}
while i < len(d):
    n = struct.unpack('>I', d[i:i+4])[0]; t = d[i+4:i+8]; c = d[i+8:i+8+n]; i += 12 + n
    if t == b'tEXt': k, v = c.split(b'\0', 1); text[k] = v
    if t == b'iTXt': k, rest = c.split(b'\0', 1); text[k] = rest[2:].split(b'\0', 2)[2]
assert 'UNETLoader' in json.loads(text[b'prompt'])['75:70']['class_type']
EOF
expect_status 200 "GET /history?max_items=1" "$(url '/history?max_items=1')"
json_check "history max_items" "len(j) == 1"

# the plain KSampler wiring and the pixelize graph, at the tiny size
for f in flux2_klein_ksampler_api.json flux2_klein_pixel4_api.json; do
  graph_body "$f" "
for n in g.values():
    if n['class_type'] in ('EmptyFlux2LatentImage', 'Flux2Scheduler'): n['inputs'].update(width=64, height=64)
    if n['class_type'] == 'EmptyFlux2LatentImage': n['inputs']['batch_size'] = 2
    if n['class_type'] in ('KSampler', 'Flux2Scheduler'): n['inputs']['steps'] = 2" >"$SCRATCH/req"
  expect_status 200 "POST /prompt ($f)" -d @"$SCRATCH/req" "$(url /prompt)"
  P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
  wait_history "$P" || fail "$f never finished"
  json_check "$f succeeded with 2 images" "j['$P']['status']['status_str'] == 'success' and sum(len(o['images']) for o in j['$P']['outputs'].values()) == 2"
done
ls "$OUT/bench/" | grep -q 'klein-4b-8st_00001_.png' && ok "subfolder prefix saved under bench/" || fail "bench/ subfolder"

# ---- bad input: each gets its documented error, the server keeps serving ------------------------------------------
expect_status 400 "malformed JSON" -d '{"prompt": {' "$(url /prompt)"
json_check "malformed JSON error shape" "j['error']['type'] == 'invalid_prompt' and 'node_errors' in j"
expect_status 400 "prompt not an object" -d '{"prompt": [1,2]}' "$(url /prompt)"
expect_status 400 "no prompt" -d '{"client_id": "x"}' "$(url /prompt)"
json_check "no prompt type" "j['error']['type'] == 'no_prompt'"
expect_status 400 "unknown node class" -d '{"prompt": {"1": {"class_type": "EvilNode", "inputs": {}}}}' "$(url /prompt)"
json_check "unknown class message" "j['error']['type'] == 'invalid_prompt' and 'EvilNode' in j['error']['message']"
expect_status 400 "no outputs" -d '{"prompt": {"3": {"class_type": "VAELoader", "inputs": {"vae_name": "flux2-vae.safetensors"}}}}' "$(url /prompt)"
json_check "no outputs type" "j['error']['type'] == 'prompt_no_outputs'"
bad_graph() { # DESCRIPTION EDIT NODE TYPE
  graph_body flux2_klein_ksampler_api.json "$2" >"$SCRATCH/req"
  expect_status 400 "$1" -d @"$SCRATCH/req" "$(url /prompt)"
  json_check "$1 -> $4 on node $3" "j['error']['type'] == 'prompt_outputs_failed_validation' and j['node_errors']['$3']['errors'][0]['type'] == '$4' and j['node_errors']['$3']['dependent_outputs'] == ['9'] and j['node_errors']['$3']['class_type']"
}
bad_graph "zero steps" "g['7']['inputs']['steps'] = 0" 7 value_smaller_than_min
bad_graph "negative steps" "g['7']['inputs']['steps'] = -4" 7 value_smaller_than_min
bad_graph "huge width" "g['6']['inputs']['width'] = 1000000" 6 value_bigger_than_max
bad_graph "huge batch" "g['6']['inputs']['batch_size'] = 4096" 6 value_bigger_than_max
bad_graph "wrong type (string steps)" "g['7']['inputs']['steps'] = 'eight'" 7 invalid_input_type
bad_graph "link to a missing node" "g['8']['inputs']['samples'] = ['404', 0]" 8 bad_linked_input
bad_graph "link to a missing output" "g['8']['inputs']['samples'] = ['7', 3]" 8 bad_linked_input
bad_graph "malformed link" "g['8']['inputs']['samples'] = ['7']" 8 bad_linked_input
bad_graph "link of the wrong type" "g['8']['inputs']['vae'] = ['1', 0]" 8 return_type_mismatch
bad_graph "missing required input" "del g['7']['inputs']['positive']" 7 required_input_missing
bad_graph "unknown model file" "g['1']['inputs']['unet_name'] = '../../../etc/passwd'" 1 value_not_in_list
bad_graph "unknown sampler" "g['7']['inputs']['sampler_name'] = 'dpmpp_9m'" 7 value_not_in_list
graph_body flux2_klein_ksampler_api.json "g['4']['inputs']['clip'] = ['5', 0]; g['5']['inputs']['conditioning'] = ['4', 0]" >"$SCRATCH/req"
expect_status 400 "cycle" -d @"$SCRATCH/req" "$(url /prompt)"
json_check "cycle reported" "'dependency_cycle' in json.dumps(j) or 'return_type_mismatch' in json.dumps(j)"
graph_body flux2_klein_pixel4_api.json "g['14']['inputs']['image'] = ['16', 0]; g['16'] = {'class_type': 'ImagePixelize', 'inputs': {'image': ['14', 0], 'factor': 2}}" >"$SCRATCH/req"
expect_status 400 "cycle between two pixelize nodes" -d @"$SCRATCH/req" "$(url /prompt)"
json_check "dependency_cycle type" "'dependency_cycle' in json.dumps(j['node_errors'])"
expect_status 400 "prompt_id not a UUID" -d '{"prompt": {}, "prompt_id": "../x"}' "$(url /prompt)"

# oversized bodies (limit 64 KiB here): refused with 413, before and while streaming
head -c 200000 /dev/zero | tr '\0' 'a' >"$SCRATCH/big"
expect_status 413 "oversized body (Content-Length)" -d @"$SCRATCH/big" "$(url /prompt)"
# chunked: the 413 is sent as soon as the limit is crossed; curl may still be sending and see the close
code=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' -d @"$SCRATCH/big" "$(url /prompt)" || true)
if grep -q request_too_large "$SCRATCH/body" && { [ "$code" = 413 ] || [ "$code" = 000 ]; }; then ok "oversized chunked body ($code, 413 body)"; else fail "oversized chunked body: $code"; fi
expect_status 413 "oversized OpenAI body" -d @"$SCRATCH/big" "$(url /v1/images/generations)"
json_check "OpenAI error shape" "set(j['error']) == {'message','type','param','code'}"

# /view traversal variants: never outside the output folder
echo "SECRET-OUTSIDE" >"$SCRATCH/secret.txt"
ln -s "$SCRATCH/secret.txt" "$OUT/link.png"
for q in 'filename=../secret.txt' 'filename=..%2fsecret.txt' 'filename=%2e%2e%2fsecret.txt' \
         'filename=secret.txt&subfolder=..' 'filename=secret.txt&subfolder=%2e%2e' "filename=$SCRATCH/secret.txt" \
         "filename=secret.txt&subfolder=$SCRATCH" 'filename=link.png' 'filename=Flux2-Klein_00001_.png%00.txt' \
         'filename=secret.txt&subfolder=bench/../..' 'filename=secret.txt&type=../..' 'filename=..\secret.txt' \
         'filename=%252e%252e%252fsecret.txt' 'filename=' 'filename=secret.txt&subfolder=%00'; do
  code=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' "$(url "/view?$q")" || true)
  if { [ "$code" = 400 ] || [ "$code" = 404 ]; } && ! grep -q SECRET-OUTSIDE "$SCRATCH/body"; then ok "view refuses $q ($code)"; else fail "view $q -> $code"; fi
done

# /upload/image: stored under input/, traversal in the name or subfolder refused
cp "$KILN_SOURCE_DIR/tests/data/images/rgb.png" "$SCRATCH/up.png" # uploads must decode (serve_comfy_edit.sh: bad ones)
expect_status 200 "upload an image" -F "image=@$SCRATCH/up.png;filename=up.png" "$(url /upload/image)"
json_check "upload reply" "j == {'name': 'up.png', 'subfolder': '', 'type': 'input'}"
expect_status 200 "upload the same name again" -F "image=@$SCRATCH/up.png;filename=up.png" "$(url /upload/image)"
json_check "second upload renamed" "j['name'] == 'up (1).png'"
expect_status 200 "view the upload" "$(url '/view?filename=up.png&type=input')"
# an empty image part (fuzz find: a zero-length chunk with no buffer yet): not an image, refused, nothing stored
: >"$SCRATCH/empty.png"
expect_status 400 "upload an empty image" -F "image=@$SCRATCH/empty.png;filename=empty.png" -F "overwrite=" "$(url /upload/image)"
code=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' "$(url '/view?filename=empty.png&type=input')" || true)
[ "$code" = 404 ] && ok "empty upload not stored" || fail "empty upload view -> $code"
cp "$KILN_SOURCE_DIR/tests/data/images/grey.png" "$SCRATCH/up2.png"
expect_status 200 "upload with overwrite=true" -F "image=@$SCRATCH/up2.png;filename=up.png" -F "overwrite=true" "$(url /upload/image)"
json_check "overwrite keeps the name" "j['name'] == 'up.png'"
code=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' "$(url '/view?filename=up.png&type=input')" || true)
[ "$code" = 200 ] && cmp -s "$SCRATCH/body" "$SCRATCH/up2.png" && ok "overwrite replaced the file" || fail "overwrite view -> $code"
expect_status 400 "upload name ../" -F "image=@$SCRATCH/up.png;filename=../../evil.png" "$(url /upload/image)"
expect_status 400 "upload absolute subfolder" -F "image=@$SCRATCH/up.png;filename=ok.png" -F "subfolder=/tmp" "$(url /upload/image)"
expect_status 400 "upload subfolder .." -F "image=@$SCRATCH/up.png;filename=ok.png" -F "subfolder=a/../../.." "$(url /upload/image)"
expect_status 400 "upload into output" -F "image=@$SCRATCH/up.png;filename=ok.png" -F "type=output" "$(url /upload/image)"
expect_status 400 "upload without multipart" -d 'x=1' "$(url /upload/image)"
[ ! -e "$SCRATCH/evil.png" ] && [ ! -e "$OUT/../evil.png" ] && ok "nothing written outside" || fail "upload escaped"

# slow drip: a client that sends half a request and stalls is cut off after the time-out; others are served
python3 - "$PORT" <<'EOF' && ok "slow-drip connection closed by the server" || fail "slow-drip connection"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /prompt HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
s.settimeout(15)
t = time.time()
data = s.recv(100)  # the server closes (b'') or answers with an error, within the 3 s time-out (+ slack)
assert time.time() - t < 12, "not cut off"
EOF
# a body that drips one byte a second never trips the 3 s idle time-out, but the 4 x 3 s body limit cuts it
python3 - "$PORT" <<'EOF' && ok "dripping body cut off (408 or close)" || fail "dripping body"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /prompt HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
t = time.time()
try:
    while time.time() - t < 40:
        s.sendall(b"{")
        time.sleep(1)
except OSError:
    pass  # closed by the server
assert time.time() - t < 30, "never cut off"
EOF
expect_status 200 "still serving after the bad-input suite" "$(url /health)"
expect_status 200 "queue still answers" "$(url /queue)"
finish
