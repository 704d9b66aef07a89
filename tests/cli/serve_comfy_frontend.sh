#!/usr/bin/env bash
# serve_comfy_frontend.sh - the routes ComfyUI's web frontend (comfyui-frontend-package) calls, answered with
# ComfyUI's shapes: the frontend's own files from --front-end-root (a stand-in folder here, so the test needs no
# PyPI package), /templates/, /settings, /users, /userdata (list, write, read, move, delete), /jobs, /features,
# /extensions, /experiment/models, /view_metadata, plain 404s; and every traversal attempt on static files and
# userdata (encoded dots and slashes, absolute paths, symlinks out of the root) is refused. ~3 s.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
FE=$SCRATCH/frontend
mkdir -p "$FE/assets" "$FE/extensions/core" "$SCRATCH/templates"
echo '<!doctype html><title>ComfyUI</title>' >"$FE/index.html"
echo 'console.log(1)' >"$FE/assets/index-abc.js"
echo 'export {}' >"$FE/extensions/core/x.js"
echo 'secret' >"$SCRATCH/secret.txt"
ln -s "$SCRATCH/secret.txt" "$FE/assets/link.txt"
echo '[{"moduleName":"default"}]' >"$SCRATCH/templates/index.json"
start_server --front-end-root "$FE" --templates-root "$SCRATCH/templates"

# ---- static files ------------------------------------------------------------------------------------------------
expect_status 200 "GET / is the frontend's index.html" "$(url /)"
grep -q '<title>ComfyUI</title>' "$SCRATCH/body" && ok "frontend index body" || fail "frontend index body"
expect_status 200 "GET /assets/index-abc.js" "$(url /assets/index-abc.js)"
ctype=$(curl -s -o /dev/null -w '%{content_type}' "$(url /assets/index-abc.js)")
[[ $ctype == text/javascript* ]] && ok "js content type ($ctype)" || fail "js content type $ctype"
expect_status 200 "GET /kiln/ is kiln's own page" "$(url /kiln/)"
grep -q '<title>kiln</title>' "$SCRATCH/body" && ok "kiln page body" || fail "kiln page body"
expect_status 200 "GET /templates/index.json" "$(url /templates/index.json)"
for bad in "/%2e%2e/secret.txt" "/..%2fsecret.txt" "/assets/%2e%2e/%2e%2e/secret.txt" "/assets/..%2F..%2Fsecret.txt" \
           "/%2fetc%2fpasswd" "/assets/link.txt" "/.%2e/secret.txt" "/templates/..%2f..%2fsecret.txt" \
           "/assets%5c..%5c..%5csecret.txt" "/assets/index-abc.js%00.html" "/assets/%2e%2e/index.html"; do
  got=$(curl -s --path-as-is -o "$SCRATCH/body" -w '%{http_code}' "$(url "$bad")")
  if [ "$got" = 404 ] && ! grep -q -e secret -e ComfyUI "$SCRATCH/body"; then ok "static traversal refused: $bad"; else fail "static traversal $bad: $got $(head -c 80 "$SCRATCH/body")"; fi
done
got=$(curl -s --path-as-is -o "$SCRATCH/body" -w '%{http_code}' "$(url /../secret.txt)")
! grep -q secret "$SCRATCH/body" && ok "raw ../ refused ($got)" || fail "raw ../ served the file"
expect_status 404 "unknown route: plain 404" "$(url /api/nothing/here)"
[ "$(cat "$SCRATCH/body")" = "404: Not Found" ] && ok "404 body is ComfyUI's" || fail "404 body $(head -c 100 "$SCRATCH/body")"

# ---- start-up routes -------------------------------------------------------------------------------------------
expect_status 200 "GET /api/features" "$(url /api/features)"
json_check "features" "j['supports_preview_metadata'] in (True, False) and j['max_upload_size'] > 0"
expect_status 200 "GET /api/extensions" "$(url /api/extensions)"
json_check "extensions lists the frontend's js" "j == ['/extensions/core/x.js']"
for u in /api/i18n /api/workflow_templates; do expect_status 200 "GET $u" "$(url $u)"; json_check "$u is {}" "j == {}"; done
expect_status 200 "GET /api/embeddings" "$(url /api/embeddings)"; json_check "embeddings []" "j == []"
expect_status 200 "GET /api/experiment/models" "$(url /api/experiment/models)"
json_check "experiment/models" "[m['name'] for m in j] == ['diffusion_models','text_encoders','vae','loras','checkpoints'] and all(len(m['folders']) == 1 for m in j)"
expect_status 200 "GET /api/experiment/models/vae" "$(url /api/experiment/models/vae)"
json_check "experiment/models/vae" "j[0]['name'] == 'flux2-vae.safetensors' and j[0]['pathIndex'] == 0 and j[0]['size'] > 0"
expect_status 404 "view_metadata of an unknown file" "$(url '/api/view_metadata/vae?filename=nope.safetensors')"
expect_status 404 "view_metadata traversal" "$(url '/api/view_metadata/vae?filename=..%2f..%2fsecret.txt')"
expect_status 200 "GET /api/prompt" "$(url /api/prompt)"
json_check "prompt exec_info" "j == {'exec_info': {'queue_remaining': 0}}"

# ---- settings and users --------------------------------------------------------------------------------------
expect_status 200 "GET /api/users" "$(url /api/users)"
json_check "users single-user shape" "j['storage'] == 'server' and isinstance(j['migrated'], bool)"
expect_status 200 "GET /api/settings (empty)" "$(url /api/settings)"; json_check "settings {}" "j == {}"
expect_status 200 "POST /api/settings" -X POST -d '{"Comfy.A": 1, "Comfy.B": "x"}' "$(url /api/settings)"
expect_status 200 "POST /api/settings/{id}" -X POST -d '[1,2]' "$(url /api/settings/Comfy.C)"
expect_status 200 "GET /api/settings/{id}" "$(url /api/settings/Comfy.C)"; json_check "one setting" "j == [1, 2]"
expect_status 200 "GET /api/settings/{unset}" "$(url /api/settings/Comfy.None)"; json_check "unset is null" "j is None"
expect_status 200 "POST /api/settings again" -X POST -d '{"Comfy.D": true, "Comfy.A": 2}' "$(url /api/settings)"
expect_status 200 "GET /api/settings" "$(url /api/settings)"; json_check "settings merged" "j == {'Comfy.A': 2, 'Comfy.B': 'x', 'Comfy.C': [1, 2], 'Comfy.D': True}"
expect_status 400 "POST /api/settings not an object" -X POST -d '[1]' "$(url /api/settings)"
[ -f "$SCRATCH/user/default/comfy.settings.json" ] && ok "settings file in user/default" || fail "no settings file"

# ---- userdata ----------------------------------------------------------------------------------------------------
expect_status 404 "list a missing dir" "$(url '/api/userdata?dir=workflows')"
expect_status 200 "write workflows/a b.json" -X POST --data-binary '{"nodes":[]}' "$(url '/api/userdata/workflows%2Fa%20b.json?overwrite=true&full_info=true')"
json_check "write reply full_info" "j['path'] == 'workflows/a b.json' and j['size'] == 12"
expect_status 409 "write without overwrite" -X POST --data-binary '{}' "$(url '/api/userdata/workflows%2Fa%20b.json?overwrite=false')"
expect_status 200 "list workflows" "$(url '/api/userdata?dir=workflows&recurse=true&split=false&full_info=true')"
json_check "list shape" "[f['path'] for f in j] == ['a b.json'] and j[0]['size'] == 12"
expect_status 200 "read it back" "$(url '/api/userdata/workflows%2Fa%20b.json')"
[ "$(cat "$SCRATCH/body")" = '{"nodes":[]}' ] && ok "read body" || fail "read body $(head -c 80 "$SCRATCH/body")"
expect_status 200 "move it" -X POST "$(url '/api/userdata/workflows%2Fa%20b.json/move/workflows%2Fsub%2Fc.json?overwrite=false')"
json_check "move reply" "j == 'workflows/sub/c.json'"
expect_status 404 "old name gone" "$(url '/api/userdata/workflows%2Fa%20b.json')"
expect_status 200 "list recursive" "$(url '/api/userdata?dir=workflows&recurse=true')"; json_check "list after move" "j == ['sub/c.json']"
expect_status 200 "v2 listing" "$(url '/api/v2/userdata?path=workflows')"
json_check "v2 shape" "j[0]['name'] == 'sub' and j[0]['type'] == 'directory' and j[0]['path'] == 'workflows/sub'"
expect_status 404 "move with a raw slash in {dest} (one segment only, as ComfyUI's route)" -X POST "$(url '/api/userdata/workflows%2Fsub%2Fc.json/move/workflows/d.json')"
expect_status 204 "delete" -X DELETE "$(url '/api/userdata/workflows%2Fsub%2Fc.json')"
expect_status 404 "deleted" "$(url '/api/userdata/workflows%2Fsub%2Fc.json')"
ln -s "$SCRATCH" "$SCRATCH/user/default/escape"
for bad in "..%2Fsecret.txt" "..%2F..%2Fsecret.txt" "%2Fetc%2Fpasswd" "workflows%2F..%2F..%2F..%2Fsecret.txt" \
           "escape%2Fsecret.txt" "a%00b.json" "%2e%2e%2fsecret.txt" "workflows%5c..%5c..%5csecret.txt" "." "sub%2F..%2Fok.json"; do
  got=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' "$(url "/api/userdata/$bad")")
  if [ "$got" != 200 ] && ! grep -q secret "$SCRATCH/body"; then ok "userdata read refused: $bad ($got)"; else fail "userdata read $bad: $got"; fi
  got=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary pwned "$(url "/api/userdata/$bad")")
  [ "$got" != 200 ] && ok "userdata write refused: $bad ($got)" || fail "userdata write $bad: $got"
  got=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary x "$(url "/api/userdata/ok.json")") || true
  got=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$(url "/api/userdata/ok.json/move/$bad")")
  [ "$got" != 200 ] && ok "userdata move refused: $bad ($got)" || fail "userdata move to $bad: $got"
done
[ "$(cat "$SCRATCH/secret.txt")" = secret ] && ! grep -rqs pwned "$SCRATCH" --exclude-dir=user && ok "nothing written outside user/default" || fail "a write escaped"
for d in "..%2F.." "%2Fetc" "escape"; do
  got=$(curl -s -o "$SCRATCH/body" -w '%{http_code}' "$(url "/api/userdata?dir=$d&recurse=true")")
  [ "$got" != 200 ] && ok "userdata list refused: $d ($got)" || fail "userdata list $d: $got $(head -c 100 "$SCRATCH/body")"
done

# ---- jobs ------------------------------------------------------------------------------------------------------
graph_body flux2_klein_t2i_template_api.json \
  "g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64, steps=1)" >"$SCRATCH/req"
expect_status 200 "POST /prompt" -d @"$SCRATCH/req" "$(url /prompt)"
P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$P" || fail "job never finished"
expect_status 200 "GET /api/jobs" "$(url '/api/jobs?status=completed,failed,cancelled&limit=10&offset=0')"
json_check "jobs shape" "j['pagination'] == {'offset': 0, 'limit': 10, 'total': 1, 'has_more': False} and j['jobs'][0]['id'] == '$P' and j['jobs'][0]['status'] == 'completed' and j['jobs'][0]['outputs_count'] == 1 and j['jobs'][0]['preview_output']['nodeId'] == '9' and j['jobs'][0]['preview_output']['mediaType'] == 'images' and j['jobs'][0]['create_time'] > 10**12 and j['jobs'][0]['execution_end_time'] >= j['jobs'][0]['execution_start_time']"
expect_status 200 "GET /api/jobs?status=pending,in_progress" "$(url '/api/jobs?status=pending,in_progress')"
json_check "no running jobs" "j['jobs'] == [] and j['pagination']['total'] == 0"
expect_status 200 "GET /api/jobs/{id}" "$(url "/api/jobs/$P")"
json_check "job detail" "j['id'] == '$P' and j['outputs']['9']['images'][0]['type'] == 'output' and j['execution_status']['status_str'] == 'success' and '75:70' in j['workflow']['prompt']"
expect_status 404 "GET /api/jobs/{unknown}" "$(url /api/jobs/00000000-0000-4000-8000-000000000000)"
expect_status 400 "GET /api/jobs?status=bogus" "$(url '/api/jobs?status=bogus')"
expect_status 400 "GET /api/jobs?limit=0" "$(url '/api/jobs?limit=0')"
finish
