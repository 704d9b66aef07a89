#!/usr/bin/env bash
# serve_comfy_flux1.sh - the official FLUX.1 templates of comfyui-workflow-templates (the test venv's package,
# scripts/install-test-python.sh) through plain POST /prompt on the tiny FLUX.1 models: each workflow file is
# turned into the API prompt the frontend would send (tests/py/workflow_api.py, itself checked here against the
# real frontend's committed export of the klein template), its nodes left as they are except the latent size
# and step count (64x48, 2 steps: the templates' 1024x1024 x 20 steps take minutes on the tiny models, as in
# serve_frontend_chromium.sh). The template's model names are copies of the tiny FLUX.1 files (comfy layout,
# tests/data/tiny/flux1/comfy). Also: FLUX.1 graphs of the nodes the templates do not use (CLIPTextEncodeFlux,
# FluxGuidance, ModelSamplingFlux, BasicScheduler, BasicGuider) give the image the same request gives with the
# same sigmas through the CLI; the one-checkpoint flux_schnell template (CheckpointLoaderSimple, an fp8 checkpoint
# made from the tiny files) equals its graph on separate files; a batch is one ComfyUI noise draw. ~90 s.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
T=$("$PY" -c "import comfyui_workflow_templates_json, os; print(os.path.join(os.path.dirname(comfyui_workflow_templates_json.__file__), 'templates'))" 2>/dev/null) \
  || { echo "FAIL: $PY lacks comfyui-workflow-templates: run scripts/install-test-python.sh"; exit 1; }
make_models
t1=$KILN_SOURCE_DIR/tests/data/tiny/flux1/comfy
cp "$t1/diffusion_models/flux1-dev.safetensors" "$t1/diffusion_models/flux1-schnell.safetensors" "$MODELS/diffusion_models/"
cp "$t1/diffusion_models/flux1-dev.safetensors" "$MODELS/diffusion_models/flux1-krea-dev_fp8_scaled.safetensors"
cp -L "$t1/text_encoders/clip_l.safetensors" "$t1/text_encoders/t5xxl_fp16.safetensors" "$MODELS/text_encoders/"
cp "$t1/vae/ae.safetensors" "$MODELS/vae/"
cp "$MODELS/diffusion_models/flux-2-klein-4b.safetensors" "$MODELS/diffusion_models/flux-2-klein-base-4b.safetensors"
start_server --batch-images 1
CONVERT=$KILN_SOURCE_DIR/tests/py/workflow_api.py

# the converter is the frontend: the klein template with serve_frontend_chromium.sh's edits gives its export
python3 - "$T/image_flux2_klein_text_to_image.json" "$SCRATCH/klein_edited.json" <<'PY'
import json, sys
wf = json.load(open(sys.argv[1]))
for n in wf["nodes"]:
    n["mode"] = 0
for sg in wf["definitions"]["subgraphs"]:
    for n in sg["nodes"]:
        if n["type"] == "PrimitiveInt": n["widgets_values"][0] = 64
        if n["type"] == "Flux2Scheduler": n["widgets_values"][0] = 1
json.dump(wf, open(sys.argv[2], "w"))
PY
python3 "$CONVERT" "$SCRATCH/klein_edited.json" "$(url '')" >"$SCRATCH/klein_api.json"
if python3 - "$SCRATCH/klein_api.json" "$KILN_SOURCE_DIR/tests/data/graphs/flux2_klein_t2i_official_frontend_api.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for v in b.values(): v.pop("_meta", None)
sys.exit(0 if a == b else 1)
PY
then ok "workflow_api.py turns the klein template into the frontend's own export"; else fail "workflow_api.py differs from the frontend's export"; fi

# template -> API prompt (64x48, 2 steps), POSTed; echoes the prompt id
run_template() {
  local name=$1
  python3 "$CONVERT" "$T/$name.json" "$(url '')" >"$SCRATCH/$name.api.json"
  python3 - "$SCRATCH/$name.api.json" <<'PY' >"$SCRATCH/req"
import json, sys
g = json.load(open(sys.argv[1]))
for n in g.values():
    if n["class_type"] == "EmptySD3LatentImage": n["inputs"].update(width=64, height=48)
    if n["class_type"] in ("KSampler", "BasicScheduler"): n["inputs"]["steps"] = 2
print(json.dumps({"prompt": g, "client_id": "flux1-test"}))
PY
  curl -s -o "$SCRATCH/body" -w '%{http_code}' -d @"$SCRATCH/req" "$(url /prompt)" >"$SCRATCH/code"
  python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('prompt_id', ''))" "$SCRATCH/body"
}

for name in flux_dev_full_text_to_image flux_schnell_full_text_to_image flux_dev_checkpoint_example flux1_krea_dev; do
  P=$(run_template "$name")
  if [ -z "$P" ]; then fail "$name: POST /prompt $(cat "$SCRATCH/code"): $(head -c 400 "$SCRATCH/body")"; continue; fi
  wait_history "$P" || { fail "$name never finished"; continue; }
  json_check "$name: the unmodified template graph runs" "j['$P']['status']['status_str'] == 'success'"
  F=$(python3 -c "import json,sys; o=json.load(open(sys.argv[1]))['$P']['outputs']; print(list(o.values())[0]['images'][0]['filename'])" "$SCRATCH/body" 2>/dev/null || true)
  curl -s -o "$SCRATCH/img.png" "$(url "/view?filename=$F&type=output")"
  python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(); sys.exit(0 if b[:8]==b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', b[16:24])==(64,48) else 1)" "$SCRATCH/img.png" \
    && ok "$name: a 64x48 PNG" || fail "$name: output $F is not a 64x48 PNG"
  cp "$SCRATCH/img.png" "$SCRATCH/$name.png"
done

# the dev and schnell templates' images are kiln generate's at ComfyUI's sigmas for each model's own shift
# (model_sampling: [dev] 1.15, [schnell] 1.0 - ComfyUI shifts schnell, diffusers does not), KSampler simple
for spec in flux_dev_full_text_to_image:dev:1.15 flux_schnell_full_text_to_image:schnell:1.0; do
  IFS=: read -r name v shift <<<"$spec"
  python3 - "$SCRATCH/$name.api.json" >"$SCRATCH/args" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
k = [n for n in g.values() if n["class_type"] == "KSampler"][0]["inputs"]
enc = [n for n in g.values() if n["class_type"] in ("CLIPTextEncode", "CLIPTextEncodeFlux")]
pos = [n for n in enc if n["inputs"].get("text", n["inputs"].get("clip_l"))][0]["inputs"]
print(k["seed"]); print(pos.get("text", pos.get("clip_l"))); print(pos.get("t5xxl", pos.get("text")))
PY
  { read -r seed; read -r clip_text; read -r t5_text; } <"$SCRATCH/args"
  SIG=$(python3 "$KILN_SOURCE_DIR/tests/py/comfy_sigmas.py" simple "$shift" 2 1)
  "$KILN_BIN" generate -q --comfy-noise --comfy-text -p "$clip_text" --prompt-2 "$t5_text" --sigmas "$SIG" --seed "$seed" \
    --unet "$MODELS/diffusion_models/flux1-$v.safetensors" --clip "$MODELS/text_encoders/clip_l.safetensors" \
    --clip2 "$MODELS/text_encoders/t5xxl_fp16.safetensors" --vae "$MODELS/vae/ae.safetensors" -W 64 -H 48 \
    -o "$SCRATCH/$v-cli.png" 2>"$SCRATCH/cli.err" || fail "kiln generate $v: $(cat "$SCRATCH/cli.err")"
  if cmp -s <(idat "$SCRATCH/$name.png") <(idat "$SCRATCH/$v-cli.png") && [ -n "$(idat "$SCRATCH/$v-cli.png" | head -c1)" ]; then
    ok "$name: kiln generate's pixels at ComfyUI's sigmas for shift $shift ($SIG)"
  else
    fail "$name differs from kiln generate --sigmas $SIG"
  fi
  # ComfyUI pads FLUX.1's T5 text to 256 tokens for [dev] too, where diffusers pads to 512: the graph is not kiln
  # generate's diffusers encoding (without --comfy-text)
  if [ "$v" = dev ]; then
    "$KILN_BIN" generate -q --comfy-noise -p "$clip_text" --prompt-2 "$t5_text" --sigmas "$SIG" --seed "$seed" \
      --unet "$MODELS/diffusion_models/flux1-dev.safetensors" --clip "$MODELS/text_encoders/clip_l.safetensors" \
      --clip2 "$MODELS/text_encoders/t5xxl_fp16.safetensors" --vae "$MODELS/vae/ae.safetensors" -W 64 -H 48 \
      -o "$SCRATCH/dev-diffusers.png" 2>"$SCRATCH/cli.err" || fail "kiln generate dev (diffusers' text): $(cat "$SCRATCH/cli.err")"
    cmp -s <(idat "$SCRATCH/$name.png") <(idat "$SCRATCH/dev-diffusers.png") \
      && fail "$name: the graph encodes T5 as diffusers does (512 tokens), not as ComfyUI (256)" \
      || ok "$name: T5 is ComfyUI's 256 tokens, not diffusers' 512 (the images differ)"
  fi
done
grep -q "flux1_krea\|Flux.1_Dev" <(ls "$OUT") && ok "the templates' filename prefixes are kept" || fail "no template prefix in $(ls "$OUT")"

# ---- the single-checkpoint schnell template: CheckpointLoaderSimple (model, encoders and VAE in one file). Its
# flux1-schnell-fp8.safetensors is made here as ComfyUI's are: the tiny schnell DiT in fp8 e4m3 (kiln convert) and
# CLIP-L, T5 and the VAE, each under ComfyUI's prefix (tests/py/make_checkpoint.py). Its image must equal, byte for
# byte, the same graph on the separate files (UNETLoader of the fp8 DiT, DualCLIPLoader, VAELoader).
mkdir -p "$MODELS/checkpoints"
"$KILN_BIN" convert "$t1/diffusion_models/flux1-schnell.safetensors" "$MODELS/diffusion_models/flux1-schnell-e4m3.safetensors" \
  --to fp8-e4m3 >/dev/null 2>"$SCRATCH/cli.err" || fail "kiln convert --to fp8-e4m3: $(cat "$SCRATCH/cli.err")"
python3 "$KILN_SOURCE_DIR/tests/py/make_checkpoint.py" "$MODELS/checkpoints/flux1-schnell-fp8.safetensors" \
  "$MODELS/diffusion_models/flux1-schnell-e4m3.safetensors" "$MODELS/text_encoders/clip_l.safetensors" \
  "$MODELS/text_encoders/t5xxl_fp16.safetensors" "$MODELS/vae/ae.safetensors" || fail "make_checkpoint.py failed"
P=$(run_template flux_schnell)
if [ -z "$P" ]; then
  fail "flux_schnell: POST /prompt $(cat "$SCRATCH/code"): $(head -c 400 "$SCRATCH/body")"
else
  wait_history "$P" || fail "flux_schnell never finished"
  json_check "flux_schnell: the unmodified one-checkpoint template runs" "j['$P']['status']['status_str'] == 'success'"
  CK=$(python3 -c "import json,sys; o=json.load(open(sys.argv[1]))['$P']['outputs']; print(list(o.values())[0]['images'][0]['filename'])" "$SCRATCH/body" 2>/dev/null || true)
  # the same graph with the three loaders of separate files in place of CheckpointLoaderSimple
  python3 - "$SCRATCH/flux_schnell.api.json" >"$SCRATCH/req" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
(cid,) = [k for k, n in g.items() if n["class_type"] == "CheckpointLoaderSimple"]
g[cid] = {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-schnell-e4m3.safetensors", "weight_dtype": "default"}}
g["sep_clip"] = {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors",
                                                            "clip_name2": "t5xxl_fp16.safetensors", "type": "flux"}}
g["sep_vae"] = {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}}
for n in g.values():
    for k, v in n["inputs"].items():
        if isinstance(v, list) and v[0] == cid and v[1] in (1, 2):
            n["inputs"][k] = ["sep_clip" if v[1] == 1 else "sep_vae", 0]
    if n["class_type"] == "SaveImage":
        n["inputs"]["filename_prefix"] = "schnell_separate"
    if n["class_type"] == "EmptySD3LatentImage": n["inputs"].update(width=64, height=48)  # as run_template
    if n["class_type"] == "KSampler": n["inputs"]["steps"] = 2
print(json.dumps({"prompt": g}))
PY
  expect_status 200 "POST /prompt (the flux_schnell graph on the separate files)" -d @"$SCRATCH/req" "$(url /prompt)"
  P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
  wait_history "$P" || fail "the separate-files graph never finished"
  SEP=$(python3 -c "import json,sys; o=json.load(open(sys.argv[1]))['$P']['outputs']; print(list(o.values())[0]['images'][0]['filename'])" "$SCRATCH/body" 2>/dev/null || true)
  if [ -n "$CK" ] && [ -n "$SEP" ] && cmp -s <(idat "$OUT/$CK") <(idat "$OUT/$SEP") && [ -n "$(idat "$OUT/$SEP" | head -c1)" ]; then
    ok "flux_schnell's one fp8 checkpoint gives the separate files' image, byte for byte"
  else
    fail "flux_schnell's checkpoint image ($CK) differs from the separate files' ($SEP)"
  fi
fi
# a checkpoint that is not FLUX.1's whole pipeline is refused by name when it runs (here: the DiT alone)
cp "$t1/diffusion_models/flux1-schnell.safetensors" "$MODELS/checkpoints/dit-only.safetensors"
python3 - "$SCRATCH/flux_schnell.api.json" >"$SCRATCH/req" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g.values():
    if n["class_type"] == "CheckpointLoaderSimple": n["inputs"]["ckpt_name"] = "dit-only.safetensors"
    if n["class_type"] == "EmptySD3LatentImage": n["inputs"].update(width=64, height=48)
print(json.dumps({"prompt": g}))
PY
expect_status 200 "POST /prompt (CheckpointLoaderSimple of a DiT-only file)" -d @"$SCRATCH/req" "$(url /prompt)"
P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$P" || fail "the DiT-only checkpoint graph never finished"
json_check "a DiT-only file fails as not a FLUX.1 checkpoint" \
  "j['$P']['status']['status_str'] == 'error' and 'not a FLUX.1 checkpoint' in json.dumps(j['$P']['status']['messages'])"

# the other FLUX.1 nodes, and the graph's image against the CLI's with the same sigmas (ComfyUI's schedule, passed
# to kiln generate --sigmas): the same engine call, so the same pixels
cat >"$SCRATCH/custom.json" <<'EOF'
{"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-dev.safetensors", "weight_dtype": "default"}},
 "2": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "t5xxl_fp16.safetensors", "clip_name2": "clip_l.safetensors", "type": "flux"}},
 "3": {"class_type": "CLIPTextEncodeFlux", "inputs": {"clip": ["2", 0], "clip_l": "a red fox", "t5xxl": "a red fox in the (snow:1.3)", "guidance": 4.5}},
 "4": {"class_type": "FluxGuidance", "inputs": {"conditioning": ["3", 0], "guidance": 2.5}},
 "5": {"class_type": "ModelSamplingFlux", "inputs": {"model": ["1", 0], "max_shift": 1.15, "base_shift": 0.5, "width": 80, "height": 48}},
 "6": {"class_type": "BasicScheduler", "inputs": {"model": ["5", 0], "scheduler": "simple", "steps": 3, "denoise": 1.0}},
 "7": {"class_type": "BasicGuider", "inputs": {"model": ["5", 0], "conditioning": ["4", 0]}},
 "8": {"class_type": "RandomNoise", "inputs": {"noise_seed": 5}},
 "9": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
 "10": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 80, "height": 48, "batch_size": 1}},
 "11": {"class_type": "SamplerCustomAdvanced", "inputs": {"noise": ["8", 0], "guider": ["7", 0], "sampler": ["9", 0], "sigmas": ["6", 0], "latent_image": ["10", 0]}},
 "12": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
 "13": {"class_type": "VAEDecode", "inputs": {"samples": ["11", 0], "vae": ["12", 0]}},
 "14": {"class_type": "SaveImage", "inputs": {"images": ["13", 0], "filename_prefix": "custom"}}}
EOF
python3 -c "import json,sys; print(json.dumps({'prompt': json.load(open(sys.argv[1]))}))" "$SCRATCH/custom.json" >"$SCRATCH/req"
expect_status 200 "POST /prompt (CLIPTextEncodeFlux, FluxGuidance, ModelSamplingFlux, BasicScheduler, BasicGuider)" -d @"$SCRATCH/req" "$(url /prompt)"
P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$P" || fail "custom FLUX.1 graph never finished"
json_check "custom FLUX.1 graph succeeded" "j['$P']['status']['status_str'] == 'success'"
# ComfyUI's sigmas for this graph, computed here from its formulas (model_sampling.py ModelSamplingFlux's table in
# float32 as torch evaluates it, each operation rounded to float32; nodes_model_advanced.py's shift line at 80x48;
# samplers.py simple_scheduler's stride)
SIG=$(python3 "$KILN_SOURCE_DIR/tests/py/comfy_sigmas.py" simple-msf 1.15 0.5 80 48 3)
"$KILN_BIN" generate -q --comfy-noise --comfy-text -p "a red fox" --prompt-2 "a red fox in the (snow:1.3)" --guidance 2.5 --sigmas "$SIG" \
  --unet "$MODELS/diffusion_models/flux1-dev.safetensors" --clip "$MODELS/text_encoders/clip_l.safetensors" \
  --clip2 "$MODELS/text_encoders/t5xxl_fp16.safetensors" --vae "$MODELS/vae/ae.safetensors" -W 80 -H 48 --seed 5 \
  -o "$SCRATCH/cli.png" 2>"$SCRATCH/cli.err" || fail "kiln generate --sigmas: $(cat "$SCRATCH/cli.err")"
F=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['$P']['outputs']['14']['images'][0]['filename'])" "$SCRATCH/body")
if cmp -s <(idat "$OUT/$F") <(idat "$SCRATCH/cli.png") && [ -n "$(idat "$SCRATCH/cli.png" | head -c1)" ]; then
  ok "the graph's pixels are the CLI's with ComfyUI's sigmas (ModelSamplingFlux 80x48, simple, 3 steps)"
else
  fail "the graph's image differs from kiln generate --sigmas $SIG"
fi
# ---- a batch is ONE noise draw, as ComfyUI's prepare_noise: torch.randn([3, C, H, W]) from the seed (FLUX.1: 16
# channels at /8, FLUX.2: 128 at /16; 80x48 and 112x64 so the draw order is not a square's). Image i equals kiln
# generate --comfy-noise -n 3 (pipeline/torch_randn, bit-exact to torch in test_pipeline_torch_randn), and images 1
# and 2 are not the batch-1 images of seed + i (kiln's own seed + i rule, which the OpenAI route and kiln generate keep)
batch_check() { # family graph.json width height kiln-generate-args...
  local fam=$1 graph=$2 W=$3 H=$4 P i=0 f
  shift 4
  python3 -c "import json,sys; print(json.dumps({'prompt': json.load(open(sys.argv[1]))}))" "$graph" >"$SCRATCH/req"
  expect_status 200 "$fam: POST /prompt (batch 3, seed 5)" -d @"$SCRATCH/req" "$(url /prompt)"
  P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
  wait_history "$P" || fail "$fam batch never finished"
  python3 -c "import json,sys; [print(i['filename']) for o in json.load(open(sys.argv[1]))['$P']['outputs'].values() for i in o['images']]" \
    "$SCRATCH/body" >"$SCRATCH/batch-files"
  [ "$(wc -l <"$SCRATCH/batch-files")" = 3 ] || { fail "$fam: the batch gave $(wc -l <"$SCRATCH/batch-files") images"; return; }
  "$KILN_BIN" generate -q --comfy-noise -n 3 --seed 5 -W "$W" -H "$H" "$@" -o "$SCRATCH/$fam-b3-%d.png" 2>"$SCRATCH/cli.err" \
    || fail "$fam: kiln generate --comfy-noise -n 3: $(cat "$SCRATCH/cli.err")"
  while read -r f; do
    if cmp -s <(idat "$OUT/$f") <(idat "$SCRATCH/$fam-b3-$i.png") && [ -n "$(idat "$OUT/$f" | head -c1)" ]; then
      ok "$fam batch image $i is ComfyUI's noise of the batch (kiln generate --comfy-noise -n 3)"
    else
      fail "$fam batch image $i differs from kiln generate --comfy-noise -n 3 image $i"
    fi
    # image 0 is the batch-1 draw of the seed only when an image is a whole number of torch's 16-value blocks
    # (the tiny FLUX.1 latent's 6 x 6 x 10 is not: torch redraws a batch-1 tail), so it is not compared
    [ "$i" = 0 ] && { i=1; continue; }
    "$KILN_BIN" generate -q --comfy-noise --seed $((5 + i)) -W "$W" -H "$H" "$@" -o "$SCRATCH/$fam-b1.png" 2>"$SCRATCH/cli.err" \
      || fail "$fam: kiln generate --seed $((5 + i)): $(cat "$SCRATCH/cli.err")"
    if cmp -s <(idat "$OUT/$f") <(idat "$SCRATCH/$fam-b1.png"); then
      fail "$fam batch image $i is the single image of seed $((5 + i)): seed + i, not one draw"
    else
      ok "$fam batch image $i is not the single image of seed $((5 + i)) (one draw, not seed + i)"
    fi
    i=$((i + 1))
  done <"$SCRATCH/batch-files"
}
python3 - "$SCRATCH/custom.json" "$SCRATCH/batch1.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
g["10"]["inputs"]["batch_size"] = 3
g["14"]["inputs"]["filename_prefix"] = "batch_flux1"
json.dump(g, open(sys.argv[2], "w"))
PY
batch_check flux1 "$SCRATCH/batch1.json" 80 48 --comfy-text -p "a red fox" --prompt-2 "a red fox in the (snow:1.3)" --guidance 2.5 --sigmas "$SIG" \
  --unet "$MODELS/diffusion_models/flux1-dev.safetensors" --clip "$MODELS/text_encoders/clip_l.safetensors" \
  --clip2 "$MODELS/text_encoders/t5xxl_fp16.safetensors" --vae "$MODELS/vae/ae.safetensors"
cat >"$SCRATCH/batch2.json" <<'EOF'
{"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux-2-klein-4b.safetensors", "weight_dtype": "default"}},
 "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "qwen_3_4b.safetensors", "type": "flux2"}},
 "3": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["2", 0], "text": "a red fox"}},
 "4": {"class_type": "ConditioningZeroOut", "inputs": {"conditioning": ["3", 0]}},
 "5": {"class_type": "EmptyFlux2LatentImage", "inputs": {"width": 112, "height": 64, "batch_size": 3}},
 "6": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "seed": 5, "steps": 2, "cfg": 1.0, "sampler_name": "euler",
       "scheduler": "simple", "positive": ["3", 0], "negative": ["4", 0], "latent_image": ["5", 0], "denoise": 1.0}},
 "7": {"class_type": "VAELoader", "inputs": {"vae_name": "flux2-vae.safetensors"}},
 "8": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["7", 0]}},
 "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "batch_flux2"}}}
EOF
SIG2=$(python3 "$KILN_SOURCE_DIR/tests/py/comfy_sigmas.py" simple 2.02 2 1)
batch_check flux2 "$SCRATCH/batch2.json" 112 64 -p "a red fox" --sigmas "$SIG2" \
  --unet "$MODELS/diffusion_models/flux-2-klein-4b.safetensors" --clip "$MODELS/text_encoders/qwen_3_4b.safetensors" \
  --vae "$MODELS/vae/flux2-vae.safetensors"

# ComfyUI's prompt weights reach T5: without the (snow:1.3) weight the image is another one
"$KILN_BIN" generate -q --comfy-noise --comfy-text -p "a red fox" --prompt-2 "a red fox in the snow" --guidance 2.5 \
  --sigmas "$SIG" --unet "$MODELS/diffusion_models/flux1-dev.safetensors" --clip "$MODELS/text_encoders/clip_l.safetensors" \
  --clip2 "$MODELS/text_encoders/t5xxl_fp16.safetensors" --vae "$MODELS/vae/ae.safetensors" -W 80 -H 48 --seed 5 \
  -o "$SCRATCH/cli-unweighted.png" 2>"$SCRATCH/cli.err" || fail "kiln generate (unweighted): $(cat "$SCRATCH/cli.err")"
cmp -s <(idat "$OUT/$F") <(idat "$SCRATCH/cli-unweighted.png") && fail "the (snow:1.3) weight changed nothing" \
  || ok "ComfyUI's (snow:1.3) weight changes T5's features (the image differs from the unweighted text's)"
# and the T5 text matters: without --prompt-2 (T5 reads the CLIP text) the image is another one
"$KILN_BIN" generate -q --comfy-noise --comfy-text -p "a red fox" --guidance 2.5 --sigmas "$SIG" \
  --unet "$MODELS/diffusion_models/flux1-dev.safetensors" --clip "$MODELS/text_encoders/clip_l.safetensors" \
  --clip2 "$MODELS/text_encoders/t5xxl_fp16.safetensors" --vae "$MODELS/vae/ae.safetensors" -W 80 -H 48 --seed 5 \
  -o "$SCRATCH/cli-one-text.png" 2>"$SCRATCH/cli.err" || fail "kiln generate without --prompt-2: $(cat "$SCRATCH/cli.err")"
cmp -s <(idat "$OUT/$F") <(idat "$SCRATCH/cli-one-text.png") && fail "CLIPTextEncodeFlux's t5xxl text changed nothing" \
  || ok "CLIPTextEncodeFlux's t5xxl text reaches T5 (the image differs from the CLIP text's)"
finish
