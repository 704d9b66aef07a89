#!/bin/sh
# Create the oracle's Python environment from PyPI, outside the repository.
#   tools/reference/setup.sh [VENV_DIR]      (default /opt/kiln-ref)
# Then: tools/reference/regenerate.sh        (uses $KILN_REF_VENV or /opt/kiln-ref)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-${KILN_REF_VENV:-/opt/kiln-ref}}
case "$venv" in
  "$here"/*|"$(cd "$here/../.." && pwd)"/*) echo "setup.sh: put the venv outside the repository" >&2; exit 2;;
esac
python3 -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install -r "$here/requirements.txt"
"$venv/bin/python" -c "import torch, diffusers, transformers; print('kiln-ref ready:', torch.__version__, diffusers.__version__, transformers.__version__)"
