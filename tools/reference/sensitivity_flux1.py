#!/usr/bin/env python3
"""Prove the FLUX.1 end-to-end goldens can fail: plant known implementation mistakes in the OFFICIAL FluxPipeline
run (weights, configs or inputs only; no FLUX.1 maths re-implemented) and measure how far outside the fp32
tolerance each lands: ratio = max|mutant - golden| / atol of the golden's image_float (a test fails when > 1).

    /opt/kiln-ref/bin/python tools/reference/sensitivity_flux1.py

Prints one line per mutation; the unmodified run must give ~0 and every mistake must be caught.
"""
import copy
import os
import sys

import numpy as np
import torch
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import make_flux1_pipeline_golden as mk  # noqa: E402


def golden(name):
    with safe_open("%s/flux1_%s_f32.safetensors" % (common.GOLDEN, name), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def image(pipe, case, **over):
    variant, prompts, h, w, steps, guidance, max_seq, _ = mk.CASES[case]
    ref, _ = golden(case)
    noise = ref["noise"]
    B, C = noise.shape[0], noise.shape[1]
    args = dict(prompt=prompts, height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
                max_sequence_length=max_seq, latents=noise.reshape(B, C, -1).permute(0, 2, 1).contiguous(),
                output_type="np")
    args.update(over)
    with torch.no_grad():
        return torch.from_numpy(np.ascontiguousarray(pipe(**args).images))


def ratio(img, case):
    ref, meta = golden(case)
    atol = float(meta["tol.image_float"].split(",")[0])
    return float((img.double() - ref["image_float"].double()).abs().max()) / atol


def cases():
    dev = mk.pipeline("dev", "f32")
    yield "dev: unmodified official pipeline (must be ~0)", ratio(image(dev, "dev_b1"), "dev_b1")
    yield "dev: guidance 4.5 instead of 3.5 (guidance not passed)", ratio(image(dev, "dev_b1", guidance_scale=4.5),
                                                                        "dev_b1")
    yield "dev: T5 cut at 256 instead of 512 (long prompt)", ratio(image(dev, "dev_long", max_sequence_length=256),
                                                                  "dev_long")
    p = copy.deepcopy(dev)
    with torch.no_grad():
        w = p.transformer.norm_out.linear.weight
        w.copy_(torch.cat(w.chunk(2, 0)[::-1]))
    yield "dev: norm_out (scale, shift) halves swapped", ratio(image(p, "dev_b1"), "dev_b1")
    p = copy.deepcopy(dev)
    p.vae.register_to_config(shift_factor=0.0)
    yield "dev: VAE shift_factor not added", ratio(image(p, "dev_b1"), "dev_b1")
    p = copy.deepcopy(dev)
    p.vae.register_to_config(scaling_factor=1 / 0.3611)
    yield "dev: latents multiplied by scaling_factor instead of divided", ratio(image(p, "dev_b1"), "dev_b1")
    p = copy.deepcopy(dev)
    p.scheduler.register_to_config(use_dynamic_shifting=False, shift=1.0)
    yield "dev: no resolution-dependent shift (schnell's schedule)", ratio(image(p, "dev_b1"), "dev_b1")
    orig = mk_ids = type(dev)._prepare_latent_image_ids

    def swapped(batch_size, height, width, device, dtype):
        ids = orig(batch_size, height, width, device, dtype)
        return ids[:, [0, 2, 1]]

    type(dev)._prepare_latent_image_ids = staticmethod(swapped)
    try:
        yield "dev: image ids (row, col) swapped", ratio(image(dev, "dev_b1"), "dev_b1")
    finally:
        type(dev)._prepare_latent_image_ids = staticmethod(mk_ids)
    # CLIP pooled at the last position instead of the first <|endoftext|>
    p = copy.deepcopy(dev)
    real = p.text_encoder.forward

    def last_pooled(*a, **k):
        out = real(*a, **k)
        out.pooler_output = out.last_hidden_state[:, -1]
        return out

    p.text_encoder.forward = last_pooled
    yield "dev: CLIP pooled at the last token, not the EOS", ratio(image(p, "dev_b1"), "dev_b1")
    sch = mk.pipeline("schnell", "f32")
    yield "schnell: unmodified official pipeline (must be ~0)", ratio(image(sch, "schnell_b1"), "schnell_b1")
    p = copy.deepcopy(sch)
    p.scheduler.register_to_config(use_dynamic_shifting=True, shift=3.0)
    yield "schnell: dev's shifted schedule", ratio(image(p, "schnell_b1"), "schnell_b1")
    yield "schnell: T5 at 512 instead of 256", ratio(image(sch, "schnell_b1", max_sequence_length=512), "schnell_b1")


if __name__ == "__main__":
    common.deterministic()
    for name, r in cases():
        print("%-62s max|diff|/atol = %.3g  %s" % (name, r, "FAILS (caught)" if r > 1 else "passes"))
