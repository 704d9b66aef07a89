#!/usr/bin/env bash
# serve_te_gguf.sh - `kiln serve` with a llama.cpp-named Qwen3 GGUF as the only text encoder in text_encoders/: the
# OpenAI images route picks it for the klein DiT by its tensors (the server's model detection: the GGUF's width 16
# x 3 = the DiT's text width 48) and makes a 64x64 image; /object_info lists it for ComfyUI-GGUF's CLIPLoaderGGUF, and UnetLoaderGGUF lists the
# .gguf DiT of unet/ but not the .safetensors one; a klein graph with UnetLoaderGGUF makes UNETLoader's pixels on the
# same GGUF file. ~15 s.
source "$(dirname "$0")/lib/serve_common.bash"
mkdir -p "$MODELS/diffusion_models" "$MODELS/text_encoders" "$MODELS/vae"
cp "$KILN_SOURCE_DIR/tests/data/tiny/comfy/flux-2-klein-4b.safetensors" "$MODELS/diffusion_models/"
cp "$KILN_SOURCE_DIR/tests/data/tiny/comfy/flux2-vae.safetensors" "$MODELS/vae/"
cp "$KILN_SOURCE_DIR/tests/data/gguf/te/qwen3-tiny-q8_0.gguf" "$MODELS/text_encoders/"
cp "$KILN_SOURCE_DIR/tests/data/gguf/te/t5-q-q8_0.gguf" "$MODELS/text_encoders/" # a T5: must not be picked
mkdir -p "$MODELS/unet"
cp "$KILN_SOURCE_DIR/tests/data/quant/klein-q8_0.gguf" "$MODELS/unet/" # UnetLoaderGGUF's list: unet/ too
start_server --default-size 64x64
base="http://127.0.0.1:$PORT"
body=$(curl -s -X POST "$base/v1/images/generations" -H 'Content-Type: application/json' \
  -d '{"model": "flux.2-klein-4b", "prompt": "a red fox", "n": 1, "size": "64x64"}')
if python3 -c 'import json,sys,base64; d=json.loads(sys.argv[1]); b=base64.b64decode(d["data"][0]["b64_json"]); sys.exit(b[:4]!=b"\x89PNG")' "$body"; then
  echo "ok OpenAI image with the GGUF text encoder"
else
  echo "FAIL OpenAI generation: ${body:0:300}"; tail -20 "$SCRATCH/server.log"; fails=1
fi
info=$(curl -s "$base/object_info/CLIPLoaderGGUF")
if python3 -c 'import json,sys; d=json.loads(sys.argv[1])["CLIPLoaderGGUF"]["input"]["required"]; sys.exit("qwen3-tiny-q8_0.gguf" not in d["clip_name"][0])' "$info"; then
  echo "ok object_info CLIPLoaderGGUF lists qwen3-tiny-q8_0.gguf"
else
  echo "FAIL object_info: ${info:0:300}"; fails=1
fi
info=$(curl -s "$base/object_info/UnetLoaderGGUF")
if python3 -c 'import json,sys; d=json.loads(sys.argv[1])["UnetLoaderGGUF"]["input"]["required"]; sys.exit(d["unet_name"][0] != ["klein-q8_0.gguf"])' "$info"; then
  echo "ok object_info UnetLoaderGGUF lists the .gguf DiT of unet/ only"
else
  echo "FAIL object_info UnetLoaderGGUF: ${info:0:300}"; fails=1
fi
# the same graph with UNETLoader and with UnetLoaderGGUF on the same GGUF DiT: the same pixels (the text encoder
# through CLIPLoaderGGUF, 64x64, 2 steps)
gguf_graph() { # CLASS PREFIX
  graph_body flux2_klein_t2i_template_api.json "
g['75:70'] = {'class_type': '$1', 'inputs': {'unet_name': 'klein-q8_0.gguf'}}
if '$1' == 'UNETLoader': g['75:70']['inputs']['weight_dtype'] = 'default'
g['75:71'] = {'class_type': 'CLIPLoaderGGUF', 'inputs': {'clip_name': 'qwen3-tiny-q8_0.gguf', 'type': 'flux2'}}
g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64, steps=2)
g['9']['inputs']['filename_prefix'] = '$2'"
}
for cls in UNETLoader UnetLoaderGGUF; do
  id=$(gguf_graph $cls "gguf-$cls" | curl -s -d @- "$base/prompt" | python3 -c "import json,sys; print(json.load(sys.stdin).get('prompt_id',''))")
  if [ -n "$id" ] && wait_history "$id" && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['$id']['status']['status_str']=='success' else 1)" "$SCRATCH/body"; then
    echo "ok /prompt with $cls on klein-q8_0.gguf"
  else echo "FAIL /prompt with $cls: $(head -c 400 "$SCRATCH/body")"; fails=1; fi
done
a=$(ls "$OUT"/gguf-UNETLoader_*.png 2>/dev/null | head -1) b=$(ls "$OUT"/gguf-UnetLoaderGGUF_*.png 2>/dev/null | head -1)
if [ -n "$a" ] && [ -n "$b" ] && [ "$(idat "$a" | wc -c)" -gt 0 ] && cmp -s <(idat "$a") <(idat "$b"); then
  echo "ok UnetLoaderGGUF's image is UNETLoader's on the same file, pixel for pixel"
else echo "FAIL UnetLoaderGGUF vs UNETLoader images: '$a' '$b'"; fails=1; fi
stop_server
exit $fails
