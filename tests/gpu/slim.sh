#!/usr/bin/env bash
# tests/gpu/slim.sh - the device tool sends the checkout and at most 64 MiB (tracked files + carried paths); the
# tracked tree is ~130 MiB, mostly test data the GPU run never reads. Before a device call:
#     tests/gpu/fetch-debs.sh && tests/gpu/prebuild.sh && tests/gpu/slim.sh aside    # ~27 MiB + ~30 MiB carried
#     (device) run: bash tests/gpu/run.sh, carry [".gpu-debs", ".gpu-prebuilt"]
#     tests/gpu/slim.sh back                                                         # after the call
# What stays: the sources, tests/data/tiny/diffusers, the two pipeline_b1 goldens, the manifests and the bench
# graphs, data/tokenizer/qwen3 - what run.sh reads. `back` restores from git (nothing is lost: all of it is tracked).
set -euo pipefail
cd "$(dirname "$0")/../.."
STASH=${KILN_GPU_STASH:-/tmp/kiln-gpu-stash}
case "${1:-}" in
aside)
  mkdir -p "$STASH"
  for p in tests/data/gguf tests/data/quant tests/data/tokenizer tests/data/images tests/data/lora data/tokenizer/t5 \
           data/tokenizer/clip-l $(ls -d tests/data/tiny/* | grep -v '/diffusers$') \
           $(ls tests/data/golden/* | grep -v '/pipeline_b1_'); do
    [ -e "$p" ] || continue
    mkdir -p "$STASH/$(dirname "$p")" && mv "$p" "$STASH/$p"
  done
  echo "slim: $(git ls-files -z | xargs -0 stat -c '%s' 2>/dev/null | awk '{s+=$1} END {printf "%.1f", s/1048576}') MiB of tracked files left; carried: $(du -scm .gpu-debs .gpu-prebuilt 2>/dev/null | tail -1 | cut -f1) MiB"
  ;;
back)
  git ls-files -d -z | xargs -0 -r git checkout --
  rm -rf "$STASH"
  echo "slim: $(git ls-files -d | wc -l) tracked files missing"
  ;;
*)
  echo "usage: tests/gpu/slim.sh aside|back" >&2
  exit 2
  ;;
esac
