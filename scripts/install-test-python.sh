#!/usr/bin/env bash
# Installs the Python clients the server tests drive kiln with (openai, websocket-client, requests, pytest) and
# ComfyUI's web frontend and workflow templates (comfyui-frontend-package 1.58.1, comfyui-workflow-templates 0.11.97; the frontend test compares
# against an export of that template version)
# into a virtual environment at a fixed place outside the repository. Idempotent.
# Usage: scripts/install-test-python.sh            (KILN_TEST_VENV overrides the place)
set -euo pipefail
venv=${KILN_TEST_VENV:-/opt/kiln-test-venv}
packages=(openai websocket-client requests pytest "comfyui-frontend-package==1.58.1" "comfyui-workflow-templates==0.11.97")
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import openai, websocket, requests, pytest, comfyui_frontend_package, comfyui_workflow_templates" 2>/dev/null; then
  echo "install-test-python: $venv ready"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
"$venv/bin/python" -c "import openai, websocket, requests, pytest"
echo "install-test-python: installed ${packages[*]} into $venv"
