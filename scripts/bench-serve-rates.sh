#!/usr/bin/env bash
# Capacity of one `kiln serve` on the committed tiny model (docs/deploy.md, "Capacity"): `kiln bench serve` at a
# list of Poisson arrival rates against a fresh server (default batching), 64x64 images of the template graph.
# Prints `kiln bench show`'s table; keeps the report and the plot when OUT_DIR is given.
# Usage: KILN_BIN=build/kiln scripts/bench-serve-rates.sh [RATES] [REQUESTS] [STEPS] [OUT_DIR]
#        (default 0.5,1,2 24 1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KILN_BIN:-$root/build/kiln}
[ -x "$bin" ] || { echo "bench-serve-rates: no kiln binary at $bin (make build, or set KILN_BIN)"; exit 2; }
rates=${1:-0.5,1,2} requests=${2:-24} steps=${3:-1} keep=${4:-}
work=$(mktemp -d /tmp/kiln-bench-serve-rates.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/models/diffusion_models" "$work/models/text_encoders" "$work/models/vae"
tiny=$root/tests/data/tiny/comfy
cp "$tiny/flux-2-klein-4b.safetensors" "$work/models/diffusion_models/"
cp "$tiny/qwen_3_4b.safetensors" "$work/models/text_encoders/"
cp "$tiny/flux2-vae.safetensors" "$work/models/vae/"
"$bin" serve --port 0 --port-file "$work/port" --models "$work/models" --output "$work/out" >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { cat "$work/server.log"; exit 1; }
printf 'a red fox in the snow\na lighthouse at dusk\na bowl of lemons\na city street in the rain\n' >"$work/prompts.txt"
"$bin" bench serve --url "http://127.0.0.1:$(cat "$work/port")" --graph "$root/tests/data/graphs/flux2_klein_t2i_template_api.json" \
  --sizes 64x64 --steps "$steps" --prompts "$work/prompts.txt" --requests "$requests" --rate "$rates" --warmup 3 \
  -o "$work/report.json" --plot "$work/report.png"
"$bin" bench show "$work/report.json"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$work/report.json" "$work/report.png" "$keep/"; fi
