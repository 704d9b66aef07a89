#!/usr/bin/env bash
# serve_frontend_chromium.sh - ComfyUI's official web frontend (comfyui-frontend-package 1.58.1, found the default
# way: `kiln serve --python PY` asks the test venv's python for the package) and the official FLUX.2 [klein]
# text-to-image template (comfyui-workflow-templates) in headless Chromium (tests/py/frontend_chromium.py): the
# template loads, runs (both subgraphs, 64x64, 1 step), its images show on the canvas, in the queue overlay and
# in the assets sidebar, no console errors, a setting survives a reload, a saved workflow shows in the workflows
# sidebar. The template's model names are mapped to the tiny test files: flux-2-klein-4b.safetensors is the tiny
# distilled model, and flux-2-klein-base-4b.safetensors (the base subgraph's name) a copy of it (there is no tiny
# base checkpoint in ComfyUI's single-file layout). The frontend's API-format export (graphToPrompt) must equal
# the committed tests/data/graphs/flux2_klein_t2i_official_frontend_api.json (serve_comfy_nodes.sh runs that file
# through plain /prompt). Screenshots and the export are kept under $KILN_ARTIFACT_DIR (default ./artifacts,
# i.e. build/artifacts under ctest). ~40 s.
source "$(dirname "$0")/lib/serve_common.bash"
PY=${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/python
TEMPLATE=$("$PY" -c "import comfyui_workflow_templates as t; print(t.get_asset_path('image_flux2_klein_text_to_image', 'image_flux2_klein_text_to_image.json'))" 2>/dev/null) \
  || { echo "FAIL: $PY lacks comfyui-workflow-templates: run scripts/install-test-python.sh"; exit 1; }
"$PY" -c "import comfyui_frontend_package, websocket" 2>/dev/null || { echo "FAIL: $PY lacks comfyui-frontend-package: run scripts/install-test-python.sh"; exit 1; }
ART=${KILN_ARTIFACT_DIR:-$PWD/artifacts}/frontend_chromium
rm -rf "$ART"; mkdir -p "$ART"
make_models
cp "$MODELS/diffusion_models/flux-2-klein-4b.safetensors" "$MODELS/diffusion_models/flux-2-klein-base-4b.safetensors"
start_server --python "$PY"
grep -q "web frontend .*comfyui_frontend_package/static" "$SCRATCH/server.log" && ok "the installed frontend is served by default" \
  || fail "frontend not found by default: $(grep 'web frontend' "$SCRATCH/server.log")"
if "$PY" "$KILN_SOURCE_DIR/tests/py/frontend_chromium.py" "http://127.0.0.1:$PORT" "$TEMPLATE" "$ART" "$ART/api_export.json" \
     "$SCRATCH/user"; then
  ok "the official frontend and klein template in chromium"
else
  fail "the official frontend and klein template in chromium"
fi
if cmp -s "$ART/api_export.json" "$KILN_SOURCE_DIR/tests/data/graphs/flux2_klein_t2i_official_frontend_api.json"; then
  ok "graphToPrompt export equals the committed test data"
else
  fail "graphToPrompt export differs from tests/data/graphs/flux2_klein_t2i_official_frontend_api.json (see $ART/api_export.json)"
fi
ls "$ART"/*.png >/dev/null 2>&1 && ok "screenshots kept in $ART" || fail "no screenshots"
finish
