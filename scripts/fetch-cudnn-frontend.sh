#!/usr/bin/env bash
# Unpacks the headers of cuDNN's frontend (PyPI nvidia-cudnn-frontend: header-only C++, Apache-2.0) into
# DIR/include, for the CUDA build's cuDNN attention (src/compute/cuda/cuda_cudnn.h; CMake looks in
# /opt/kiln-cudnn-frontend/include, $KILN_CUDNN_FRONTEND and .gpu-debs/cudnn-frontend/include). Only the wheel's
# include/ folder is used: its Python module is not installed. Idempotent; needs pip and the network.
# Usage: scripts/fetch-cudnn-frontend.sh [DIR]      (default /opt/kiln-cudnn-frontend)
set -euo pipefail
version=1.32.0
dest=${1:-/opt/kiln-cudnn-frontend}
if [ -f "$dest/include/cudnn_frontend.h" ] && grep -q "$version" "$dest/VERSION" 2>/dev/null; then
  echo "fetch-cudnn-frontend: $dest has $version"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$version"
python3 - "$tmp" "$dest.tmp" <<'PY'
import glob, shutil, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
shutil.rmtree(sys.argv[2], ignore_errors=True)
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    assert any(n == "include/cudnn_frontend.h" for n in names), "no include/cudnn_frontend.h in " + whl
    for n in names:
        z.extract(n, sys.argv[2])
PY
echo "nvidia-cudnn-frontend $version" >"$dest.tmp/VERSION"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch-cudnn-frontend: $version headers in $dest/include ($(du -sh "$dest" | cut -f1))"
