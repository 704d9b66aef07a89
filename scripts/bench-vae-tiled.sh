#!/bin/sh
# Peak memory of the tiled VAE decode (docs/benchmarks.md "Tiled VAE decode"):
#   scripts/bench-vae-tiled.sh tiny              4096x4096 with the tiny VAE, 64-latent tiles (~7 CPU-minutes)
#   scripts/bench-vae-tiled.sh full DIR [SIDE]    a full-size VAE folder (kiln mkweights --manifest
#                                                 tests/data/manifests/flux2-vae.vae.diffusers.json), SIDE px
#                                                 (default 2048), 128-latent tiles (diffusers' default)
# Runs build/test_pipeline_vae_tiled_mem (its bound check included) under /usr/bin/time -v.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BUILD:-$repo/build}/test_pipeline_vae_tiled_mem
export KILN_SOURCE_DIR=$repo
case "${1:-}" in
  tiny) KILN_VAE_MEM_4K=1 /usr/bin/time -v "$bin" 2>&1 | grep -E "tiled decode|ok|passed|Maximum resident|Elapsed" ;;
  full) KILN_VAE_MEM_MODEL=${2:?folder} KILN_VAE_MEM_SIDE=${3:-2048} KILN_VAE_MEM_TILE=${KILN_VAE_MEM_TILE:-128} \
          /usr/bin/time -v "$bin" 2>&1 | grep -E "tiled decode|ok|passed|Maximum resident|Elapsed" ;;
  *) echo "usage: $0 tiny | full DIR [SIDE]" >&2; exit 2 ;;
esac
