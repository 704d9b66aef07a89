#!/usr/bin/env bash
# Installs every Debian package kiln's build and tests need. Idempotent: run it as often as you like.
# Usage: scripts/install-deps.sh            (needs root or sudo)
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates python3 python3-venv python3-pip
  clang llvm libclang-rt-14-dev            # libFuzzer + sanitizer runtimes
  libjansson-dev                           # JSON (safetensors headers, graphs, reports)
  libssl-dev                               # SHA-256 via libcrypto
  libpcre2-dev libutf8proc-dev             # tokenizer: pre-tokenizer regex, NFC
  libpng-dev libspng-dev                   # PNG output; PNG input images (src/io/image_load.c, test_io_image_load)
  libwebp-dev                              # WebP input images (image_load.c, fuzz_image_load); OpenAI output_format webp
  libjpeg-dev                              # JPEG live previews on the websocket; JPEG input images (libjpeg-turbo)
  libsqlite3-dev                           # durable job queue
  libpq-dev postgresql                     # the shared job queue (kiln serve --queue postgresql://), its cluster test
  libmicrohttpd-dev                        # HTTP server
  libcurl4-openssl-dev                     # HTTP client (kiln bench against a ComfyUI-API server)
  libopenblas-dev                          # comparison baseline for the CPU matmul
  openmpi-bin libopenmpi-dev               # MPI communicator: mpirun -np N kiln generate (tests/cli/parallel_mpi.sh)
  curl
  chromium                                 # headless browser for the web page test (tests/cli/serve_webpage.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# the cuDNN frontend's headers where the CUDA toolkit is (make cuda compiles the cuDNN attention against them)
cudnn_frontend() {
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    $SUDO "$(dirname "$0")/fetch-cudnn-frontend.sh" ||
      echo "install-deps: warning: no cuDNN frontend headers (PyPI unreachable?): the CUDA build goes without cuDNN attention"
  fi
}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  "$(dirname "$0")/install-test-python.sh"   # Python clients for the server tests (venv outside the repo)
  cudnn_frontend
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
"$(dirname "$0")/install-test-python.sh"   # Python clients for the server tests (venv outside the repo)
cudnn_frontend
