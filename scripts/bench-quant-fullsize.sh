#!/usr/bin/env bash
# FULL-SIZE text-to-image from the weight formats users run, side by side in one run (docs/benchmarks.md,
# "Quantised weights, full size"): the bf16 DiT, `kiln convert`'s fp8 (e4m3, comfy-quant layout) and its GGUF
# Q8_0 and Q4_K files, each through `kiln generate --perf-dump` under /usr/bin/time -v: per-stage seconds, the
# peak RSS (kernel's VmHWM and time -v), and the engine's up-front memory estimate for the same request.
# Weights: `kiln mkweights` of the model's ComfyUI-layout manifest (tests/data/manifests; real shapes and bytes,
# random values: the project benchmarks random, never all-zero, weights - zero tensors convert to scale-1 fp8 and
# all-zero GGUF blocks, and a sparse file's holes are never read from disk). KILN_BENCH_SPARSE=1 writes the
# zero-valued sparse layout instead (minutes less; its figures must say so).
# The text encoder and VAE stay bf16 in every row: only the DiT's format changes.
#
# Usage: KILN_THREADS=2 scripts/bench-quant-fullsize.sh MODEL [WORKDIR] [SIZE]
#   MODEL   klein-4b | klein-9b | flux1-dev | flux1-schnell
#   WORKDIR where the weights, converted files and logs go (default /work/big/MODEL); kept for reruns
#   SIZE    square image size (default 512)
# Environment: KILN_BENCH_FORMATS (default "bf16 fp8 q8_0 q4_k"; a format whose estimate exceeds the memory is
# reported and skipped), KILN_BENCH_STEPS (default 4), KILN_BENCH_ROUNDS (default 1: rounds run the formats in
# order, then reversed, A B B A style), KILN_BIN.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KILN_BIN:-$root/build/kiln}
[ -x "$bin" ] || { echo "bench-quant-fullsize: no kiln binary at $bin (make build, or set KILN_BIN)"; exit 2; }
model=${1:?usage: bench-quant-fullsize.sh klein-4b|klein-9b|flux1-dev|flux1-schnell [WORKDIR] [SIZE]}
work=${2:-/work/big/$model}
size=${3:-512}
steps=${KILN_BENCH_STEPS:-4}
rounds=${KILN_BENCH_ROUNDS:-1}
read -r -a formats <<<"${KILN_BENCH_FORMATS:-bf16 fp8 q8_0 q4_k}"
export KILN_SOURCE_DIR=$root

case $model in
klein-4b) manifest=flux2-klein-4b.folder.comfy.json; dit=diffusion_models/flux-2-klein-4b.safetensors
    enc=(--clip "$work/text_encoders/qwen_3_4b.safetensors" --vae "$work/vae/flux2-vae.safetensors") ;;
klein-9b) manifest=flux2-klein-9b.folder.comfy.json; dit=diffusion_models/flux-2-klein-9b.safetensors
    enc=(--clip "$work/text_encoders/qwen_3_8b.safetensors" --vae "$work/vae/flux2-vae.safetensors") ;;
flux1-dev | flux1-schnell) manifest=$model.folder.comfy.json; dit=diffusion_models/$model.safetensors
    enc=(--clip "$work/text_encoders/clip_l.safetensors" --clip2 "$work/text_encoders/t5xxl_fp16.safetensors"
        --vae "$work/vae/ae.safetensors") ;;
*) echo "bench-quant-fullsize: unknown model '$model'"; exit 2 ;;
esac
mkdir -p "$work"
if [ ! -f "$work/$dit" ]; then
    if [ "${KILN_BENCH_SPARSE:-0}" = 1 ]; then
        echo "== writing full-size $model weights (sparse: real layout, ZERO values) to $work"
        "$bin" mkweights --sparse --manifest "$root/tests/data/manifests/$manifest" --out "$work" --seed 1
    else
        echo "== writing full-size $model weights (real layout, random values) to $work"
        "$bin" mkweights --manifest "$root/tests/data/manifests/$manifest" --out "$work" --seed 1
    fi
fi

file_of() { # the DiT file of a format, converted on first use
    local f=$1 out to
    case $f in
    bf16) echo "$work/$dit"; return ;;
    fp8) out=$work/${dit%.safetensors}-fp8.safetensors; to=fp8-e4m3 ;;
    q8_0 | q4_k) out=$work/${dit%.safetensors}-$f.gguf; to=gguf-$f ;;
    *) echo "bench-quant-fullsize: unknown format '$f'" >&2; return 1 ;;
    esac
    if [ ! -f "$out" ]; then
        /usr/bin/time -v "$bin" convert "$work/$dit" "$out" --to "$to" >"$work/convert-$f.log" 2>&1 ||
            { cat "$work/convert-$f.log" >&2; return 1; }
        echo "== converted to $f: $(du -h --apparent-size "$out" | cut -f1), $(sed -n 's/.*Elapsed (wall clock) time.*: //p' \
            "$work/convert-$f.log") wall, max RSS $(( $(sed -n 's/.*Maximum resident set size (kbytes): //p' \
            "$work/convert-$f.log") / 1024 )) MiB" >&2
    fi
    echo "$out"
}

echo "== machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, KILN_THREADS=${KILN_THREADS:-all}," \
    "$(free -g | awk '/^Mem:/ {print $2 " GiB RAM, " $7 " GiB available"}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" --version
declare -A path est
for f in "${formats[@]}"; do
    path[$f]=$(file_of "$f")
    # the engine's estimate: a 1 MB limit makes generate refuse after printing what the request needs
    est[$f]=$("$bin" generate -q -p x --unet "${path[$f]}" "${enc[@]}" -W "$size" -H "$size" --memory-limit 0.001 2>&1 |
        sed -n 's/.*needs about \([0-9.]* GB\) (\([0-9.]* GB\) with \(the text encoder\|T5\) released.*/\1 all resident, \2 released/p' || true)
    echo "== $f: $(du -h --apparent-size "${path[$f]}" | cut -f1) DiT file; estimate ${est[$f]:-?}"
done

order=()
for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then order+=("${formats[@]}"); else for ((i = ${#formats[@]} - 1; i >= 0; i--)); do order+=("${formats[$i]}"); done; fi
done
echo "| format | round | DiT file | TextEncoding s | Denoising s (per step) | Decoding s | total s | CPU s | peak RSS (VmHWM) | max RSS (time -v) | estimate |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
declare -A seen
for f in "${order[@]}"; do
    seen[$f]=$(( ${seen[$f]:-0} + 1 ))
    tag=$f-$size-${seen[$f]}
    if ! /usr/bin/time -v "$bin" generate -p "a red fox in fresh snow, golden hour" --unet "${path[$f]}" "${enc[@]}" \
        -W "$size" -H "$size" --steps "$steps" --seed 1 -o "$work/$tag.png" --perf-dump "$work/perf-$tag.json" \
        --tag "bench-quant-$tag" >"$work/log-$tag.txt" 2>&1; then
        echo "| $f | ${seen[$f]} | failed: $(grep -m1 -E 'kiln|error' "$work/log-$tag.txt" | cut -c1-160) |"
        continue
    fi
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/log-$tag.txt")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$work/log-$tag.txt")
    jq -r --arg f "$f" --arg r "${seen[$f]}" --arg file "$(du -h --apparent-size "${path[$f]}" | cut -f1)" \
        --arg rss "$rss" --arg cpu "$cpu" --arg est "${est[$f]:-?}" '
        def r1: (. * 10 | round) / 10;
        def st($n): (.stages[] | select(.name == $n) | .duration_ms / 1000 | r1);
        "| \($f) | \($r) | \($file) | \(st("TextEncoding")) | \(st("Denoising")) (" +
        ([.denoise_steps_ms[].duration_ms / 1000 | r1 | tostring] | join(", ")) + ") | \(st("Decoding")) | " +
        "\(.total_duration_ms / 1000 | r1) | \($cpu) | \(.peak_memory_bytes / 1e9 * 100 | round / 100) GB | " +
        "\(($rss | tonumber) * 1024 / 1e9 * 100 | round / 100) GB | \($est) |"' "$work/perf-$tag.json"
done
echo "== logs and perf dumps in $work (log-*.txt, perf-*.json); load now $(cut -d' ' -f1-3 /proc/loadavg)"
