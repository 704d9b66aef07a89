#!/usr/bin/env bash
# End-to-end FLUX.2 [klein] 4B text-to-image on FULL-SIZE weights (docs/benchmarks.md, "pipeline"): seconds per
# image by stage, peak RSS, at 256x256 and 512x512, 4 steps, batch 1, through `kiln generate --perf-dump`.
# Weights: a diffusers klein folder in KILN_MODEL (real weights), else full-size random-layout weights written
# by `kiln mkweights` from tests/data/manifests (--sparse by default: the right shapes and bytes, values zero,
# no disk used; KILN_BENCH_RANDOM=1 writes seeded random values instead, ~16 GB of disk). Timings do not depend
# on the values (no data-dependent kernels).
# Usage: KILN_THREADS=2 scripts/bench-generate.sh [WORKDIR] [SIZES...]    (default sizes: 256 512)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KILN_BIN:-$root/build/kiln}
[ -x "$bin" ] || { echo "bench-generate: no kiln binary at $bin (make build, or set KILN_BIN)"; exit 2; }
work=${1:-$(mktemp -d /tmp/kiln-bench-generate-XXXXXX)}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(256 512)
mkdir -p "$work"
export KILN_SOURCE_DIR=$root

model=${KILN_MODEL:-}
if [ -z "$model" ]; then
    model=$work/klein-4b
    if [ ! -f "$model/model_index.json" ]; then
        sparse=--sparse
        [ "${KILN_BENCH_RANDOM:-0}" = 1 ] && sparse=
        echo "== writing full-size klein 4B weights ($([ -n "$sparse" ] && echo sparse zeros || echo random)) to $model"
        "$bin" mkweights --manifest "$root/tests/data/manifests/flux2-klein-4b.folder.diffusers.json" --out "$model" \
            --seed 1 $sparse
    fi
fi
echo "== machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, KILN_THREADS=${KILN_THREADS:-all}"
"$bin" --version
threads=${KILN_THREADS:-$(nproc)}
# This CPU's bf16 peak (the best bf16 kernel kiln has), GFLOP/s on $threads threads
peak=$("$bin" bench-ops --peak 2>&1 | sed -n 's/^# peak bf16 [a-z0-9]* *\([0-9.]*\) GFLOP\/s/\1/p' | sort -g | tail -1)
echo "== bf16 peak: ${peak:-?} GFLOP/s on $threads threads (kiln bench-ops --peak)"
for s in "${sizes[@]}"; do
    echo "== ${s}x${s}, 4 steps"
    /usr/bin/time -v "$bin" generate -p "a red fox in fresh snow, golden hour" --model "$model" -W "$s" -H "$s" \
        --steps 4 --seed 1 -o "$work/bench-$s.png" --perf-dump "$work/perf-$s.json" --tag "bench-generate-$s" \
        2> "$work/log-$s.txt" || { cat "$work/log-$s.txt"; exit 1; }
    grep -E "^kiln: .*total" "$work/log-$s.txt" || true
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/log-$s.txt")
    # DiT FLOPs per step (klein 4B: D 3072, F 9216, 25 blocks, 512 text tokens): 2*(4D^2 + 3FD) per token per
    # block for the linears, 4*T^2*D per block for attention, plus img_in and the final projection.
    jq -r --arg s "$s" --arg rss "$rss" --arg peak "${peak:-0}" --arg th "$threads" '
        def r2: (. * 100 | round) / 100;
        ($s | tonumber / 16 | . * .) as $n | (512 + $n) as $t |
        (25 * 2 * (4 * 3072 * 3072 + 3 * 9216 * 3072) * $t + 25 * 4 * $t * $t * 3072 + 2 * 2 * $n * 128 * 3072) as $fl |
        (.stages[] | select(.name == "Denoising")) as $dn |
        ($dn.cpu_ms / 1000 / ($th | tonumber)) as $busy |
        "| \($s)x\($s) | " + ([.stages[] | select(.cpu_ms != null and .name != "InputValidation" and .name != "TimestepPreparation" and .name != "LatentPreparation")
          | "\(.name) \(.duration_ms / 1000 | r2) s (cpu \(.cpu_ms / 1000 | r2) s)"] | join(" | ")) +
        " | total \(.total_duration_ms / 1000 | r2) s | peak RSS \(($rss | tonumber) / 1048576 | r2) GB" +
        " | DiT \($fl / 1e12 | r2) TFLOP/step, \($fl * (.denoise_steps_ms | length) / $busy / 1e9 | round) GFLOP/s per busy second" +
        " = \(if ($peak | tonumber) > 0 then ($fl * (.denoise_steps_ms | length) / $busy / 1e9 / ($peak | tonumber) * 100 | round) else "?" end)% of peak |"' \
        "$work/perf-$s.json"
done
echo "== perf dumps in $work/perf-*.json"
