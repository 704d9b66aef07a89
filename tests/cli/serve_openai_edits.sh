#!/usr/bin/env bash
# serve_openai_edits.sh - /v1/images/edits, the `model` ids (FLUX.1 / FLUX.2) and the `lora` extension with the
# real `openai` SDK (tests/py/test_serve_openai_edits.py) against `kiln serve --token` on a models folder that
# holds the tiny FLUX.2 [klein] files, the tiny FLUX.1 [dev] and [schnell] ComfyUI files and a LoRA in
# models/loras. ~60 s on 2 cores. Fails, never skips, when the venv is missing.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
if ! "$PY" -c "import openai, requests, pytest" 2>/dev/null; then
  echo "FAIL: $PY lacks openai/requests/pytest: run scripts/install-test-python.sh"
  exit 1
fi
make_models
f1=$KILN_SOURCE_DIR/tests/data/tiny/flux1/comfy
cp -L "$f1"/diffusion_models/*.safetensors "$MODELS/diffusion_models/"
cp -L "$f1"/text_encoders/*.safetensors "$MODELS/text_encoders/"
cp -L "$f1/vae/ae.safetensors" "$MODELS/vae/"
mkdir -p "$MODELS/loras"
cp "$KILN_SOURCE_DIR/tests/data/lora/lora-kohya.safetensors" "$MODELS/loras/"
TOKEN=tok-$RANDOM$RANDOM
start_server --token "$TOKEN"
KILN_URL="http://127.0.0.1:$PORT" KILN_TOKEN="$TOKEN" KILN_SCRATCH="$SCRATCH" KILN_INPUT="$OUT/input" \
  KILN_IMAGES="$KILN_SOURCE_DIR/tests/data/images" \
  "$PY" -m pytest -q -p no:cacheprovider ${KILN_PYTEST_K:+-k "$KILN_PYTEST_K"} \
  "$KILN_SOURCE_DIR/tests/py/test_serve_openai_edits.py" || { tail -30 "$SCRATCH/server.log"; exit 1; }
