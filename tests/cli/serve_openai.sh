#!/usr/bin/env bash
# serve_openai.sh - the OpenAI images API with the real `openai` SDK (tests/py/test_serve_openai.py) against
# `kiln serve --token` on the tiny model, with a broken diffusion model file beside the real one (its jobs fail
# when they run: the retry and error-path tests). Then a second server on the same store with
# --request-timeout 1: a slow job's 504 is retried by the SDK with one Idempotency-Key and makes one job; a third
# with --memory-limit 0.05: a size its memory plan refuses is a 400, sent once.
# ~40 s on 2 cores. Fails, never skips, when the venv is missing.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
if ! "$PY" -c "import openai, requests, pytest" 2>/dev/null; then
  echo "FAIL: $PY lacks openai/requests/pytest: run scripts/install-test-python.sh"
  exit 1
fi
make_models
# a file that lists as a model and fails when the engine opens it
head -c 4096 /dev/urandom >"$MODELS/diffusion_models/broken.safetensors"
TOKEN=tok-$RANDOM$RANDOM
run_phase() {
  KILN_URL="http://127.0.0.1:$PORT" KILN_TOKEN="$TOKEN" KILN_SCRATCH="$SCRATCH" \
    "$PY" -m pytest -q -p no:cacheprovider -k "$1" "$KILN_SOURCE_DIR/tests/py/test_serve_openai.py" \
    || { tail -30 "$SCRATCH/server.log"; exit 1; }
}
start_server --token "$TOKEN" --default-size 80x64 --unet flux-2-klein-4b.safetensors
run_phase "not test_timeout and not test_memory_refusal"
stop_server
start_server --token "$TOKEN" --request-timeout 1 --unet flux-2-klein-4b.safetensors
run_phase test_timeout
stop_server
# a memory limit the tiny model's 1024x1024 does not fit (~0.09 GB) while 64x64 does: the refusal's status
start_server --token "$TOKEN" --memory-limit 0.05 --unet flux-2-klein-4b.safetensors
run_phase test_memory_refusal
