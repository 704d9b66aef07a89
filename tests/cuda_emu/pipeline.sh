#!/usr/bin/env bash
# pipeline.sh - the whole FLUX.2 [klein] pipeline on the emulated GPU (the KILN_CUDA_EMU build), the checks
# tests/gpu/run.sh makes on a real one (its "tiny" and "graphs" parts): the golden request (80x48, 4 steps, its
# injected noise) through `kiln generate --device cuda`
#   --exact   against the official fp32 pipeline's image: >= 40 dB (the CPU gives inf)
#   graphs    the same run with KILN_CUDA_GRAPHS=0 gives the same pixels, and the graphed run captured the
#             denoising step and replayed it (the backend's close line)
#   FAST      against the official bf16 pipeline's image: >= 30 dB (the CPU gives 41.6), the activations of
#             Qwen3, the DiT and the VAE in bf16 (kiln_backend_act_dtype) - and with KILN_CUDA_ACT=f32 too; the
#             two images differ (the bf16 activations ran), and the bf16 one is within 1 dB of the f32 one's
#             distance to the bf16 golden (41.5 vs 41.8 dB: kiln's bf16 roundings are not PyTorch's, so two bf16
#             runs differ by both; the DiT alone in bf16 gave 42.0)
#   tc        FAST with the tensor-core attention (the FAST default; the simple kernel by KILN_CUDA_ATTENTION=simple), klein and FLUX.1: >= 30 dB and within
#             1 dB of the simple kernel's image
# and FLUX.1 [dev] (below). ~6 min on 2 cores: the emulator runs every GPU thread.
set -uo pipefail
: "${KILN_BIN:?KILN_BIN must point at the kiln of the emulator build}"
: "${KILN_SOURCE_DIR:?}"
ROOT=$KILN_SOURCE_DIR
TINY=$ROOT/tests/data/tiny/diffusers GOLD=$ROOT/tests/data/golden
PROMPT="A photo of a red fox in fresh snow, golden hour, 35mm film grain"
D=$(mktemp -d /tmp/kiln-emu-pipeline.XXXXXX)
trap 'rm -rf "$D"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
gen() { # gen PNG [args]: the golden's request on cuda:0, the log in $D/PNG.log
  local png=$1
  shift
  KILN_LOG=info timeout 900 "$KILN_BIN" generate -q --model "$TINY" --device cuda:0 -W 80 -H 48 --steps 4 \
    --noise "$GOLD/pipeline_b1_f32.safetensors" -p "$PROMPT" -o "$D/$png" "$@" >"$D/$png.log" 2>&1 ||
    { tail -20 "$D/$png.log"; return 1; }
}
report() { python3 "$ROOT/tests/gpu/report.py" "$@"; }
db() { sed -E 's/.*PSNR ([0-9.]+|inf) dB.*/\1/' <<<"$1"; }
source "$ROOT/tests/cuda_emu/graphs.bash"

if gen exact.png --exact && r=$(report golden "$GOLD/pipeline_b1_f32.safetensors" "$D/exact.png" 40); then
  ok "--exact: $r"
else
  fail "--exact: ${r:-kiln generate failed}"
fi
check_graphs "$D/exact.png.log" 1
if KILN_CUDA_GRAPHS=0 gen eager.png --exact && report png "$D/exact.png" "$D/eager.png" inf >/dev/null; then
  ok "the graphed run's pixels equal eager launches' (KILN_CUDA_GRAPHS=0)"
else
  fail "graphed and eager runs differ"
fi
if KILN_CUDA_ATTENTION=simple gen fast.png && r=$(report golden "$GOLD/pipeline_b1_bf16.safetensors" "$D/fast.png" 30); then
  ok "FAST, bf16 activations: $r"
else
  fail "FAST, bf16 activations: ${r:-kiln generate failed}"
fi
# (profiled: KILN_CUDA_PROFILE=1 runs eagerly and closes with one line per op and a total)
if KILN_CUDA_ACT=f32 KILN_CUDA_ATTENTION=simple KILN_CUDA_PROFILE=1 gen fast32.png &&
   r32=$(report golden "$GOLD/pipeline_b1_bf16.safetensors" "$D/fast32.png" 30); then
  ok "FAST, f32 activations (KILN_CUDA_ACT=f32): $r32"
  if grep -q "cuda: profile: cuda_matmul " "$D/fast32.png.log" && grep -q "cuda: profile: cuda_attention " "$D/fast32.png.log" &&
     grep -q "cuda: profile: total .* calls" "$D/fast32.png.log" && grep -q " 0 graphs captured" "$D/fast32.png.log"; then
    ok "KILN_CUDA_PROFILE=1: the per-op table, eager launches"
  else
    fail "KILN_CUDA_PROFILE=1: no per-op table, or graphs captured: $(grep -h 'cuda: profile\|graphs captured' "$D/fast32.png.log" | head -3 | tr '\n' ' ')"
  fi
  if ! grep -q "DiT activations in bf16" "$D/fast.png.log" || ! grep -q "DiT activations in f32" "$D/fast32.png.log"; then
    fail "the DiT's activations: '$(grep -h "DiT activations" "$D/fast.png.log" "$D/fast32.png.log" | tr '\n' ' ')' (want bf16, then f32)"
  elif report png "$D/fast.png" "$D/fast32.png" inf >/dev/null 2>&1; then
    fail "bf16 and f32 activations gave the same pixels: the bf16 activations did not run"
  elif python3 -c "import sys; sys.exit(not float('$(db "$r")') >= float('$(db "$r32")') - 1.0)"; then
    ok "bf16 activations changed the image, $(db "$r") dB vs $(db "$r32") dB from the bf16 golden"
  else
    fail "bf16 activations moved the image over 1 dB away from the bf16 golden: $(db "$r") dB vs $(db "$r32") dB"
  fi
else
  fail "FAST, f32 activations: ${r32:-kiln generate failed}"
fi

# the tensor-core attention (the FAST default; mma.sync, bf16 Q/K/V/P) through the whole pipeline: >= 30 dB from
# the bf16 golden and within 1 dB of the simple kernel's FAST image (KILN_CUDA_ATTENTION=simple above)
tc_check() { # tc_check WHAT GOLDEN PNG_TC PNG_SIMPLE RESULT_SIMPLE
  local r
  if ! grep -q "attention tensor cores" "$D/$3.log"; then
    fail "$1: the backend did not say 'attention tensor cores': $(grep -h "cuda: .*attention" "$D/$3.log" | head -1)"
  elif r=$(report golden "$2" "$D/$3" 30) &&
       python3 -c "import sys; sys.exit(not float('$(db "$r")') >= float('$(db "$5")') - 1.0)"; then
    ok "$1, tensor-core attention: $r (simple kernel: $(db "$5") dB)"
  else
    fail "$1, tensor-core attention: ${r:-no image} (simple kernel: $(db "$5") dB)"
  fi
}
if [ -n "${r:-}" ] && gen fasttc.png; then # the default: tensor cores in FAST
  tc_check "FAST" "$GOLD/pipeline_b1_bf16.safetensors" fasttc.png fast.png "$r"
else
  fail "FAST, tensor-core attention: kiln generate failed"
fi

# FLUX.1 [dev] (its tiny model, the official fp32 golden flux1_dev_b1_f32): --exact >= 40 dB (inf on the CPU);
# FAST with its DiT's activations in bf16 (the log says so) >= 35 dB (43.6; f32 activations 45.1, the CPU 45.4)
F1=(--model "$ROOT/tests/data/tiny/flux1/dev" --steps 3 --guidance 3.5 --noise "$GOLD/flux1_dev_b1_f32.safetensors"
    -p "a red fox in fresh snow, golden hour")
gen1() { # gen1 PNG [args]: the FLUX.1 golden's request on cuda:0
  local png=$1
  shift
  KILN_LOG=info timeout 900 "$KILN_BIN" generate -q --device cuda:0 -W 80 -H 48 "${F1[@]}" -o "$D/$png" "$@" \
    >"$D/$png.log" 2>&1 || { tail -20 "$D/$png.log"; return 1; }
}
G1=$GOLD/flux1_dev_b1_f32.safetensors
if gen1 f1exact.png --exact && r=$(report golden "$G1" "$D/f1exact.png" 40); then
  ok "FLUX.1 --exact: $r"
else
  fail "FLUX.1 --exact: ${r:-kiln generate failed}"
fi
if KILN_CUDA_ATTENTION=simple gen1 f1fast.png && r=$(report golden "$G1" "$D/f1fast.png" 35); then
  if grep -q "DiT activations in bf16" "$D/f1fast.png.log"; then
    ok "FLUX.1 FAST, bf16 activations: $r"
  else
    fail "FLUX.1: the DiT's activations: '$(grep -h "DiT activations" "$D/f1fast.png.log")' (want bf16)"
  fi
  if gen1 f1fasttc.png; then # the default
    tc_check "FLUX.1 FAST (T5's bias, CLIP)" "$G1" f1fasttc.png f1fast.png "$r"
  else
    fail "FLUX.1 FAST, tensor-core attention: kiln generate failed"
  fi
else
  fail "FLUX.1 FAST: ${r:-kiln generate failed}"
fi
[ $fails = 0 ] && echo "pipeline (emulated GPU): all passed" || exit 1
