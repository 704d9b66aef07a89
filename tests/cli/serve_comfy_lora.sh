#!/usr/bin/env bash
# serve_comfy_lora.sh - LoraLoaderModelOnly and LoraLoader (files from models/loras) on the klein template graph,
# tiny model: the graph's image equals kiln generate --lora's at the same sigmas, two LoRA nodes stack in order;
# LoraLoader's strength_clip is ignored with a warning in the history (kiln adapts the DiT only); a name not in
# loras/ is refused at submission; and the server shares a forward only between jobs with identical adapters at
# identical strengths (the same LoRA at another strength, or none, runs alone). ~30 s.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
mkdir -p "$MODELS/loras"
cp "$KILN_SOURCE_DIR/tests/data/lora/lora-kohya.safetensors" "$KILN_SOURCE_DIR/tests/data/lora/lora-bfl.safetensors" "$MODELS/loras/"

# body NAME W H STEPS SEED LORAS: the template graph (64x64 unless given) with LoRA nodes between the model and
# the guider; LORAS is a python list of (class, file, strength_model[, strength_clip])
body() {
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=$2, height=$3); g['75:62']['inputs'].update(width=$2, height=$3, steps=$4)
g['75:73']['inputs']['noise_seed'] = $5
g['9']['inputs']['filename_prefix'] = 'lora/$1'
m = ['75:70', 0]
for i, l in enumerate($6):
    n = {'model': m, 'lora_name': l[1], 'strength_model': l[2]}
    if l[0] == 'LoraLoader': n.update(clip=['75:71', 0], strength_clip=l[3])
    g['l%d' % i] = {'class_type': l[0], 'inputs': n}
    m = ['l%d' % i, 0]
g['75:63']['inputs']['model'] = m" >"$SCRATCH/$1.req"
}
submit() { curl -s -d @"$SCRATCH/$1.req" "$(url /prompt)" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])"; }
ext() { # the kiln extension of job $1's execution_success (history in $SCRATCH/history.json)
  python3 -c "
import json,sys
e = json.load(open(sys.argv[1]))[sys.argv[2]]
assert e['status']['status_str'] == 'success', e['status']
print(json.dumps([d for t, d in e['status']['messages'] if t == 'execution_success'][0]['kiln'], sort_keys=True))" \
    "$SCRATCH/history.json" "$1"
}
K="('LoraLoaderModelOnly', 'lora-kohya.safetensors', 1.0)"
body busy 256 256 6 9 "[]"
body a 64 64 2 1 "[$K]"
body b 64 64 2 2 "[$K]"
body c 64 64 2 3 "[('LoraLoaderModelOnly', 'lora-kohya.safetensors', 0.5)]"
body d 64 64 2 4 "[]"
body e 64 64 2 5 "[('LoraLoader', 'lora-bfl.safetensors', 0.7, 1.0), $K]"

start_server --batch-images 4
busy=$(submit busy); a=$(submit a); b=$(submit b); c=$(submit c); d=$(submit d); e=$(submit e)
for id in "$busy" "$a" "$b" "$c" "$d" "$e"; do wait_history "$id" || fail "job $id never finished"; done
curl -s -o "$SCRATCH/history.json" "$(url /history)"
ea=$(ext "$a"); eb=$(ext "$b"); ec=$(ext "$c"); ed=$(ext "$d"); ee=$(ext "$e")
python3 - "$ea" "$eb" "$a" "$b" <<'PY' && ok "a and b (the same LoRA at the same strength) shared one forward" || fail "a/b not batched: $ea $eb"
import json, sys
ea, eb = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert ea["batched_with"] == [sys.argv[4]] and eb["batched_with"] == [sys.argv[3]], (ea, eb)
PY
case "$ec$ed$ee" in *batched_with*) fail "a job with other adapters was batched: $ec $ed $ee" ;;
  *) ok "c (strength 0.5), d (no LoRA) and e (two LoRAs) each ran alone" ;; esac
python3 - "$SCRATCH/history.json" "$e" <<'PY' && ok "LoraLoader's strength_clip is ignored with a warning" || fail "no strength_clip warning"
import json, sys
m = json.load(open(sys.argv[1]))[sys.argv[2]]["status"]["messages"]
sys.exit(0 if any(t == "kiln_warning" and d["node_id"] == "l0" and "strength_clip" in d["message"] for t, d in m) else 1)
PY

# the images are kiln generate --lora's at Flux2Scheduler's sigmas (one forward or alone: the same pixels)
SIG=$(python3 "$KILN_SOURCE_DIR/tests/py/comfy_sigmas.py" flux2 2 64 64)
L=$MODELS/loras
prompt=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['75:74']['inputs']['text'])" \
  "$KILN_SOURCE_DIR/tests/data/graphs/flux2_klein_t2i_template_api.json")
cli() { # OUT SEED --lora args...
  local o=$1 seed=$2; shift 2
  "$KILN_BIN" generate -q --comfy-noise -p "$prompt" --unet "$MODELS/diffusion_models/flux-2-klein-4b.safetensors" \
    --clip "$MODELS/text_encoders/qwen_3_4b.safetensors" --vae "$MODELS/vae/flux2-vae.safetensors" -W 64 -H 64 \
    --sigmas "$SIG" --seed "$seed" -o "$SCRATCH/$o.png" "$@" 2>"$SCRATCH/cli.err" || fail "kiln generate $*: $(cat "$SCRATCH/cli.err")"
}
cli a 1 --lora "$L/lora-kohya.safetensors:1"
cli c 3 --lora "$L/lora-kohya.safetensors:0.5"
cli d 4
cli e 5 --lora "$L/lora-bfl.safetensors:0.7" --lora "$L/lora-kohya.safetensors:1"
for j in a c d e; do
  f=$(ls "$OUT/lora" | grep "^${j}_")
  if cmp -s <(idat "$OUT/lora/$f") <(idat "$SCRATCH/$j.png") && [ -n "$(idat "$SCRATCH/$j.png" | head -c1)" ]; then
    ok "job $j's image is kiln generate's with the same adapters"
  else
    fail "job $j's image differs from kiln generate's"
  fi
done
cmp -s <(idat "$OUT/lora/$(ls "$OUT/lora" | grep '^a_')") <(idat "$SCRATCH/d.png") && fail "the LoRA changed nothing" || ok "the LoRA changes the image"

body bad 64 64 2 1 "[('LoraLoaderModelOnly', 'missing.safetensors', 1.0)]"
expect_status 400 "a LoRA not in models/loras is refused" -d @"$SCRATCH/bad.req" "$(url /prompt)"
json_check "naming the input" "j['node_errors']['l0']['errors'][0]['details'].startswith('lora_name')"
expect_status 200 "GET /models/loras" "$(url /models/loras)"
json_check "lists the adapters" "j == ['lora-bfl.safetensors', 'lora-kohya.safetensors']"
finish
