#!/bin/sh
# Regenerate every oracle output, bit for bit: tests/data/tiny, tests/data/golden, tests/data/manifests,
# tests/data/gguf (and the fuzz_gguf seeds), tests/data/quant, tests/data/lora.
#   tools/reference/regenerate.sh           regenerate, then rewrite tools/reference/SHA256SUMS
#   tools/reference/regenerate.sh --check   regenerate, then fail if any byte differs from SHA256SUMS
# Python comes from $KILN_REF_VENV (default /opt/kiln-ref), made by tools/reference/setup.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=${KILN_REF_VENV:-/opt/kiln-ref}/bin/python
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TQDM_DISABLE=1 DIFFUSERS_VERBOSITY=error TRANSFORMERS_VERBOSITY=error PYTHONWARNINGS=ignore
cd "$here"
"$py" make_tiny.py
"$py" make_goldens.py
# FLUX.1: CLIP-L and T5 text encoders, then the DiT (dev and schnell)
"$py" make_clip_golden.py
"$py" make_t5_golden.py
"$py" make_flux1_dit_golden.py
# GGUF / fp8 reader data (the gguf package), then the quantised tiny DiTs and their pipeline goldens
"$py" make_gguf.py
"$py" make_quant_goldens.py
# editing (reference images) and image-to-image; the decoder test images
"$py" make_image_inputs.py
"$py" make_edit_goldens.py
"$py" make_tiny9b.py
"$py" make_kv_goldens.py            # the 9B-KV folder (links to the 9B-shaped one) and Flux2KleinKVPipeline goldens
"$py" make_flux1_vae_golden.py
"$py" make_flux1_schedule_golden.py
"$py" make_comfy_sigmas_golden.py
"$py" make_comfy_noise_golden.py   # torch.randn of ComfyUI's batch latents (AVX2 and default kernels)
"$py" make_comfy_tokens_golden.py  # ComfyUI's FLUX.1 prompt tokens and weighted features (needs the tiny flux1 models)
"$py" make_flux1_pipeline_golden.py
"$py" make_flux1_quant_goldens.py   # the tiny FLUX.1 [dev] DiT quantised (needs the tiny flux1 models)
"$py" make_te_gguf.py               # Qwen3 / T5 text encoders as llama.cpp-named GGUFs (needs the tiny models)
# LoRA adapters in each format and diffusers' load_lora_weights + fuse_lora images (needs peft)
"$py" make_lora_goldens.py
"$py" describe_goldens.py
"$py" make_manifests.py
"$py" make_manifests_9b.py
"$py" make_flux1_manifests.py
cd "$repo"
# Regular files by content; symlinks (tiny tokenizer, diffusers-base subfolders) by their target. Hand-written
# READMEs are left out so that editing prose never breaks --check (the generated golden table is derived
# from the golden files, which are checked).
sums=$( (find tests/data/tiny tests/data/golden tests/data/manifests tests/data/gguf tests/data/quant tests/data/images tests/data/lora -type f ! -name '*.md' | LC_ALL=C sort | xargs sha256sum
         find tests/data/tiny -type l | LC_ALL=C sort | while read -r l; do echo "link  $l -> $(readlink "$l")"; done) )
if [ "${1:-}" = "--check" ]; then
  if printf '%s\n' "$sums" | diff -u "$here/SHA256SUMS" -; then echo "regenerate: bit-for-bit identical"; else
    echo "regenerate: outputs differ from tools/reference/SHA256SUMS" >&2; exit 1; fi
else
  printf '%s\n' "$sums" > "$here/SHA256SUMS"
  echo "regenerate: done ($(printf '%s\n' "$sums" | wc -l) files, sums in tools/reference/SHA256SUMS)"
fi
