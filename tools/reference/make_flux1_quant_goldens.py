"""Quantised tiny FLUX.1 [dev] DiTs and the official FluxPipeline's images on their dequantised weights.

The FLUX.1 counterpart of make_quant_goldens.py (same quantisers and file writers): the tiny [dev] DiT of
tests/data/tiny/flux1/dev, under the BFL names the FLUX.1 GGUF and fp8 files in circulation use (make_flux1_pipeline_
golden.dit_to_bfl, checked there against diffusers' own converter), is quantised and written to tests/data/quant/;
the oracle dequantises those bytes itself (GGUF: gguf.quants.dequantize; fp8: the e4m3 value times its float32
scale), maps the values back onto the diffusers FluxTransformer2DModel (element ids through the same name mapping,
so the fused qkv / linear1 rows and the swapped final-layer halves land where they came from) and runs FluxPipeline
in float32 with the committed tiny CLIP, T5 and VAE. kiln must reach the same image (>= 60 dB, --exact) from the
quantised file: tests/unit/test_pipeline_quant.c. FLUX.1's linear layers carry biases: they stay unquantised (1-D),
as in the files in circulation.

  q8_0      GGUF (architecture "flux"), every 2-D weight whose rows are whole 32-value blocks Q8_0, else F32
  q4_k      GGUF, Q4_K where a row is whole 256-value super-blocks, else Q8_0 / F32
  fp8_bfl   safetensors, BFL/ComfyUI comfy-quant layout (e4m3fn weight, float32 weight_scale, input_scale,
            _quantization_metadata)
Goldens (tests/data/golden/quant_flux1_<fmt>_f32.safetensors): noise (input, kiln's [B, 4z, H/16, W/16] layout),
image_u8 (the official image on the dequantised weights), image_u8_bf16 (on the unquantised weights).

Run: /opt/kiln-ref/bin/python tools/reference/make_flux1_quant_goldens.py   (regenerate.sh runs it)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import make_flux1_pipeline_golden as f1  # noqa: E402
import make_quant_goldens as q  # noqa: E402
import runs  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402

PROMPT = "a red fox in fresh snow"
H, W, STEPS, GUIDANCE, MAX_SEQ, SEED = 48, 64, 3, 3.5, 512, 2114
STEM = "flux1-dev"


def run(pipe, noise):
    B, C = noise.shape[0], noise.shape[1]
    packed = noise.reshape(B, C, -1).permute(0, 2, 1).contiguous()  # [B, N, 4z] token-major, as _pack_latents
    with torch.no_grad():
        img = pipe(prompt=[PROMPT], height=H, width=W, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
                   max_sequence_length=MAX_SEQ, latents=packed, output_type="np").images
    return torch.from_numpy((img * 255).round().astype("uint8"))


def main():
    common.deterministic()
    os.makedirs(q.QDIR, exist_ok=True)
    pipe = f1.pipeline("dev", "f32")
    base = pipe.transformer
    back = q.Unmapper(base, f1.dit_to_bfl)
    g = torch.Generator().manual_seed(SEED)
    noise = runs.bf16_exact(torch.randn(1, f1.DIT["in_channels"], H // 16, W // 16, generator=g))
    ref_img = run(pipe, noise)
    for fmt, qt in (("q8_0", T.Q8_0), ("q4_k", T.Q4_K), ("fp8_bfl", None)):
        if qt is not None:
            deq, types = q.gguf_file(fmt, back.bfl, qt, prefix=STEM, arch="flux")
        else:
            deq, types = q.fp8_file(fmt, back.bfl, prefix=STEM)
        pipe.transformer = back.model(deq)
        img = run(pipe, noise)
        pipe.transformer = base
        ext = "gguf" if qt is not None else "safetensors"
        gold = common.Golden("quant_flux1_%s_f32" % fmt, "f32", "FluxPipeline ([dev], f32) on the tiny DiT "
                             "dequantised from tests/data/quant/%s-%s.%s; image_u8_bf16: on the unquantised DiT"
                             % (STEM, fmt, ext))
        gold.add("noise", noise, tol=(0, 0))
        gold.add("image_u8", img)
        gold.add("image_u8_bf16", ref_img)
        for k, v in (("family", "flux1"), ("prompts", json.dumps([PROMPT])), ("height", H), ("width", W),
                     ("steps", STEPS), ("guidance_scale", GUIDANCE), ("max_sequence_length", MAX_SEQ),
                     ("types", json.dumps(types, sort_keys=True)), ("file", "tests/data/quant/%s-%s.%s" % (STEM, fmt, ext))):
            gold.set(k, v)
        gold.save()
        print("golden: quant_flux1_%s_f32 (%s)" % (fmt, types))


if __name__ == "__main__":
    main()
