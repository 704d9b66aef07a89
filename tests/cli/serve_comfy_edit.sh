#!/usr/bin/env bash
# serve_comfy_edit.sh - the official FLUX.2 [klein] image-edit templates of comfyui-workflow-templates through plain
# POST /prompt with an uploaded image (LoadImage, ImageScaleToTotalPixels, GetImageSize, VAEEncode,
# ReferenceLatent), on the tiny klein model: the workflow files turned into API prompts by tests/py/workflow_api.py
# (see serve_comfy_flux1.sh), nodes as they are except ImageScaleToTotalPixels' megapixels (0.02: the templates'
# 1 MP takes minutes on the tiny model) and, for the 20-step base template, 2 steps. The distilled template's
# image equals `kiln generate --ref --sigmas` of the same scaled picture (nearest-exact) at Flux2Scheduler's sigmas
# for GetImageSize's size, both computed here in Python from ComfyUI's formulas. KSampler with denoise 0.6 on a
# VAEEncode'd upload equals kiln generate --init at ComfyUI's sigma tail (int(steps / denoise) steps, the last ones). Bad uploads (a truncated PNG, a 30000x30000 header, a
# non-image) get a clear 400 and nothing is written; LoadImage names that leave the input folder are refused,
# a missing one fails naming the file. ~45 s.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
T=$("$PY" -c "import comfyui_workflow_templates_json, os; print(os.path.join(os.path.dirname(comfyui_workflow_templates_json.__file__), 'templates'))" 2>/dev/null) \
  || { echo "FAIL: $PY lacks comfyui-workflow-templates: run scripts/install-test-python.sh"; exit 1; }
make_models
D=$MODELS/diffusion_models
cp "$D/flux-2-klein-4b.safetensors" "$D/flux-2-klein-4b-fp8.safetensors"
cp "$D/flux-2-klein-4b.safetensors" "$D/flux-2-klein-base-4b-fp8.safetensors"
cp "$MODELS/vae/flux2-vae.safetensors" "$MODELS/vae/full_encoder_small_decoder.safetensors"
start_server --batch-images 1
IMG=$KILN_SOURCE_DIR/tests/data/images
CONVERT=$KILN_SOURCE_DIR/tests/py/workflow_api.py

# ---- uploads: good ones stored under their template names, bad ones refused before anything is written ----------
for pair in "ref-90x70.png:handbag_white.png" "ref-100x72.png:comfy_logo_blue.png" "ref-90x70.png:robed_women.png" \
            "palette.png:pink_tone_chair.png"; do
  expect_status 200 "upload ${pair#*:}" -F "image=@$IMG/${pair%%:*};filename=${pair#*:}" "$(url /upload/image)"
done
for bad in bad-truncated.png bad-30000x30000.png bad-not-an-image.png; do
  expect_status 400 "upload $bad refused" -F "image=@$IMG/$bad;filename=$bad" "$(url /upload/image)"
  json_check "$bad: the error says why" "j['error']['type'] == 'invalid_image' and '$bad' in j['error']['message'] and len(j['error']['message']) > len('Invalid image $bad: ')"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$(url "/view?filename=$bad&type=input")" || true)
  [ "$code" = 404 ] && ok "$bad: nothing written" || fail "$bad: stored ($code)"
done
expect_status 200 "GET /object_info/LoadImage" "$(url /object_info/LoadImage)"
json_check "LoadImage lists the uploads, with the upload widget" "j['LoadImage']['input']['required']['image'][0] == ['comfy_logo_blue.png', 'handbag_white.png', 'pink_tone_chair.png', 'robed_women.png'] and j['LoadImage']['input']['required']['image'][1]['image_upload'] is True"

# template -> API prompt with the small-size edits, POSTed; echoes the prompt id
run_template() {
  local name=$1 steps=${2:-}
  python3 "$CONVERT" "$T/$name.json" "$(url '')" >"$SCRATCH/$name.api.json"
  python3 - "$SCRATCH/$name.api.json" "$steps" <<'PY' >"$SCRATCH/req"
import json, sys
g = json.load(open(sys.argv[1]))
for n in g.values():
    if n["class_type"] == "ImageScaleToTotalPixels": n["inputs"]["megapixels"] = 0.02
    if n["class_type"] == "Flux2Scheduler" and sys.argv[2]: n["inputs"]["steps"] = int(sys.argv[2])
print(json.dumps({"prompt": g, "client_id": "edit-test"}))
PY
  curl -s -o "$SCRATCH/body" -w '%{http_code}' -d @"$SCRATCH/req" "$(url /prompt)" >"$SCRATCH/code"
  python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('prompt_id', ''))" "$SCRATCH/body"
}
# the first SaveImage output's file of prompt $1 (history in $SCRATCH/body)
first_image() {
  python3 -c "import json,sys; o=json.load(open(sys.argv[1]))['$1']['outputs']; print(list(o.values())[0]['images'][0]['filename'])" "$SCRATCH/body"
}

for spec in image_flux2_klein_image_edit_4b_distilled: image_flux2_klein_image_edit_4b_base:2; do
  name=${spec%%:*}
  P=$(run_template "$name" "${spec#*:}")
  if [ -z "$P" ]; then fail "$name: POST /prompt $(cat "$SCRATCH/code"): $(head -c 400 "$SCRATCH/body")"; continue; fi
  wait_history "$P" || { fail "$name never finished"; continue; }
  json_check "$name: the template's edit graph runs with the uploaded image" "j['$P']['status']['status_str'] == 'success'"
  F=$(first_image "$P")
  python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(); sys.exit(0 if struct.unpack('>II', b[16:24])==(160,128) else 1)" "$OUT/$F" \
    && ok "$name: 160x128 (90x70 scaled to 0.02 MP, 164x128, on the 16-pixel latent grid)" || fail "$name: $F has the wrong size"
  [ "$name" = image_flux2_klein_image_edit_4b_distilled ] && cp "$OUT/$F" "$SCRATCH/distilled.png"
done

# the distilled template's image is kiln generate's with the same reference: ComfyUI's nearest-exact scaling of the
# 90x70 upload to round(90 s) x round(70 s), s = sqrt(0.02 * 1024^2 / (90 * 70)), torch's source index
# floor((dst + 0.5) * in / out) in float32, written here as a PNG
python3 - "$IMG/ref-90x70.png" "$SCRATCH/scaled.png" <<'PY' || fail "scaling the reference in Python"
import math, struct, sys, zlib
def read_png(path):  # 8-bit RGB / RGBA, non-interlaced: what the committed ref images are
    b = open(path, "rb").read()
    assert b[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(b):
        n, = struct.unpack(">I", b[pos:pos + 4]); kind = b[pos + 4:pos + 8]; data = b[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", data[:10]); assert depth == 8 and ctype in (2, 6)
            ch = 3 if ctype == 2 else 4
        if kind == b"IDAT": idat += data
        pos += 12 + n
    raw, rows, prev, stride = zlib.decompress(idat), [], bytearray(w * ch), w * ch
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0; c = prev[i - ch] if i >= ch else 0; up = prev[i]
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + up) & 255
            elif f == 3: line[i] = (line[i] + (a + up) // 2) & 255
            elif f == 4:
                p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
        rows.append([tuple(line[x * ch:x * ch + 3]) for x in range(w)]); prev = line
    return w, h, rows
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
w, h, px = read_png(sys.argv[1])
s = math.sqrt(0.02 * 1024 * 1024 / (w * h))
W, H = round(w * s), round(h * s)
sx, sy = f32(w / W), f32(h / H)
out = b""
for y in range(H):
    iy = min(int(math.floor(f32(f32(y + 0.5) * sy))), h - 1)
    out += b"\0" + b"".join(bytes(px[iy][min(int(math.floor(f32(f32(x + 0.5) * sx))), w - 1)]) for x in range(W))
chunk = lambda k, d: struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
open(sys.argv[2], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(out)) + chunk(b"IEND", b""))
print(W, H)
PY
# Flux2Scheduler's sigmas at GetImageSize's 164x128 (not the latent's 160x128), ComfyUI's formulas in float32
SIG=$(python3 "$KILN_SOURCE_DIR/tests/py/comfy_sigmas.py" flux2 4 164 128)
"$KILN_BIN" generate -q --comfy-noise -p "Change the bag color to blue." --ref "$SCRATCH/scaled.png" -W 160 -H 128 --sigmas "$SIG" \
  --seed 43301611940728 --unet "$D/flux-2-klein-4b.safetensors" --clip "$MODELS/text_encoders/qwen_3_4b.safetensors" \
  --vae "$MODELS/vae/flux2-vae.safetensors" -o "$SCRATCH/cli.png" 2>"$SCRATCH/cli.err" || fail "kiln generate --ref: $(cat "$SCRATCH/cli.err")"
if [ -s "$SCRATCH/distilled.png" ] && cmp -s <(idat "$SCRATCH/distilled.png") <(idat "$SCRATCH/cli.png"); then
  ok "the edit template's image is kiln generate --ref's of the ComfyUI-scaled upload at ComfyUI's sigmas"
else
  fail "the edit template's image differs from kiln generate --ref"
fi

# ---- KSampler denoise < 1 on a VAEEncode'd upload (image to image): ComfyUI's tail of int(steps / denoise) steps
# of the model's schedule (FLUX.2: shift 2.02), the image noised to its first sigma: kiln generate --init --sigmas
cat >"$SCRATCH/i2i.json" <<'EOF'
{"prompt": {"1": {"class_type": "LoadImage", "inputs": {"image": "handbag_white.png"}},
 "2": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux-2-klein-4b.safetensors", "weight_dtype": "default"}},
 "3": {"class_type": "CLIPLoader", "inputs": {"clip_name": "qwen_3_4b.safetensors", "type": "flux2"}},
 "4": {"class_type": "VAELoader", "inputs": {"vae_name": "flux2-vae.safetensors"}},
 "5": {"class_type": "CLIPTextEncode", "inputs": {"text": "a blue bag", "clip": ["3", 0]}},
 "6": {"class_type": "ConditioningZeroOut", "inputs": {"conditioning": ["5", 0]}},
 "7": {"class_type": "VAEEncode", "inputs": {"pixels": ["1", 0], "vae": ["4", 0]}},
 "8": {"class_type": "KSampler", "inputs": {"model": ["2", 0], "seed": 7, "steps": 2, "cfg": 1.0, "sampler_name": "euler",
       "scheduler": "simple", "positive": ["5", 0], "negative": ["6", 0], "latent_image": ["7", 0], "denoise": 0.6}},
 "9": {"class_type": "VAEDecode", "inputs": {"samples": ["8", 0], "vae": ["4", 0]}},
 "10": {"class_type": "SaveImage", "inputs": {"images": ["9", 0], "filename_prefix": "i2i"}}}}
EOF
expect_status 200 "POST /prompt (KSampler denoise 0.6 on a VAEEncode'd upload)" -d @"$SCRATCH/i2i.json" "$(url /prompt)"
P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$P" || fail "img2img never finished"
json_check "img2img succeeded" "j['$P']['status']['status_str'] == 'success'"
SIG=$(python3 "$KILN_SOURCE_DIR/tests/py/comfy_sigmas.py" simple 2.02 2 0.6)
"$KILN_BIN" generate -q --comfy-noise -p "a blue bag" --init "$IMG/ref-90x70.png" -W 80 -H 64 --sigmas "$SIG" --seed 7 \
  --unet "$D/flux-2-klein-4b.safetensors" --clip "$MODELS/text_encoders/qwen_3_4b.safetensors" \
  --vae "$MODELS/vae/flux2-vae.safetensors" -o "$SCRATCH/i2i.png" 2>"$SCRATCH/cli.err" || fail "kiln generate --init: $(cat "$SCRATCH/cli.err")"
F=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['$P']['outputs']['10']['images'][0]['filename'])" "$SCRATCH/body")
if cmp -s <(idat "$OUT/$F") <(idat "$SCRATCH/i2i.png") && [ -n "$(idat "$SCRATCH/i2i.png" | head -c1)" ]; then
  ok "denoise 0.6 is kiln generate --init at ComfyUI's sigma tail ($SIG)"
else
  fail "the img2img image differs from kiln generate --init --sigmas $SIG"
fi

# ---- LoadImage names ----------------------------------------------------------------------------------------------
echo 'secret' >"$SCRATCH/secret.png"
lo='{"1": {"class_type": "LoadImage", "inputs": {"image": "NAME"}}, "2": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}}}'
for name in ../secret.png /etc/passwd sub/../../x.png; do
  echo "{\"prompt\": ${lo/NAME/$name}}" >"$SCRATCH/req"
  expect_status 400 "LoadImage $name refused" -d @"$SCRATCH/req" "$(url /prompt)"
done
echo "{\"prompt\": ${lo/NAME/missing.png}}" >"$SCRATCH/req"
expect_status 200 "LoadImage of a missing file is accepted at submission" -d @"$SCRATCH/req" "$(url /prompt)"
P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body")
wait_history "$P" || fail "missing LoadImage never finished"
json_check "and fails naming the file" "j['$P']['status']['status_str'] == 'error' and 'missing.png' in j['$P']['status']['messages'][-1][1]['exception_message']"
finish
