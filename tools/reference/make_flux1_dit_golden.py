#!/usr/bin/env python3
"""Tiny FLUX.1 [dev] and [schnell] DiTs and their goldens, with diffusers' FluxTransformer2DModel as oracle.

    /opt/kiln-ref/bin/python tools/reference/make_flux1_dit_golden.py

Writes tests/data/tiny/flux1_dit_{dev,schnell}/{config.json, diffusion_pytorch_model.safetensors} (bf16-exact
random weights stored in bf16, diffusers names as in a FLUX.1 diffusers folder's transformer/) and
tests/data/golden/flux1_dit_{dev,schnell}_f32.safetensors: one forward on a batch of 2 (different latents,
T5 features and CLIP pooled vectors per sample) over a non-square 3x5 token grid, run in fp32, with the
tolerance from the fp32-vs-fp64 spread (make_goldens.tol32). The inputs are passed as FluxPipeline passes them:
timestep = sigma (the scheduler's timestep / 1000), guidance = the guidance scale (dev only), txt_ids zeros,
img_ids (0, y, x) from FluxPipeline._prepare_latent_image_ids. dbg.temb: time_text_embed's output.

Tiny config vs the real one (black-forest-labs/FLUX.1-dev transformer): 3 heads x 16 (24 x 128), hidden 48
(3072), RoPE axes (4, 6, 6) (16, 56, 56), 24 input channels (64), 2 double (19) and 3 single (38) blocks, T5
features 40 (4096), CLIP pooled 28 (768). schnell: the same shapes from another seed, no guidance embedder.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import make_goldens  # noqa: E402

CONFIG = dict(patch_size=1, in_channels=24, out_channels=None, num_layers=2, num_single_layers=3,
              attention_head_dim=16, num_attention_heads=3, joint_attention_dim=40, pooled_projection_dim=28,
              axes_dims_rope=(4, 6, 6))
VARIANTS = {"dev": dict(guidance_embeds=True, seed=20240801), "schnell": dict(guidance_embeds=False, seed=20240802)}
BATCH, N_TXT, GRID_H, GRID_W = 2, 7, 3, 5
SIGMA, GUIDANCE = 0.7236, 3.5


def model(variant, dt):
    from diffusers import FluxTransformer2DModel
    v = VARIANTS[variant]
    torch.manual_seed(v["seed"])
    m = FluxTransformer2DModel(**CONFIG, guidance_embeds=v["guidance_embeds"])
    g = torch.Generator().manual_seed(v["seed"] + 1)
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if ("norm_q" in name or "norm_k" in name or "norm_added" in name) and name.endswith("weight"):
                val = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                val = 0.1 * torch.randn(p.shape, generator=g)
            else:
                val = torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5
            p.copy_(val.to(torch.bfloat16).to(torch.float32))
    m.eval()
    return m.to({"f64": torch.float64, "f32": torch.float32}[dt])


def inputs(variant):
    from diffusers import FluxPipeline
    g = torch.Generator().manual_seed(VARIANTS[variant]["seed"] + 2)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(torch.bfloat16).to(torch.float32)

    d = {"img_tokens": rnd(BATCH, GRID_H * GRID_W, CONFIG["in_channels"]),
         "txt_features": rnd(BATCH, N_TXT, CONFIG["joint_attention_dim"]),
         "pooled": rnd(BATCH, CONFIG["pooled_projection_dim"]),
         "timestep": torch.full((BATCH,), SIGMA),
         "img_ids": FluxPipeline._prepare_latent_image_ids(BATCH, GRID_H, GRID_W, "cpu", torch.float32),
         "txt_ids": torch.zeros(N_TXT, 3)}
    if VARIANTS[variant]["guidance_embeds"]:
        d["guidance"] = torch.full((BATCH,), GUIDANCE)
    return d


def run(variant):
    inp = inputs(variant)
    res = {}
    for dt in ("f64", "f32"):
        m = model(variant, dt)
        t = {"f64": torch.float64, "f32": torch.float32}[dt]
        temb = []
        hook = m.time_text_embed.register_forward_hook(lambda mod, a, out: temb.append(out))
        with torch.no_grad():
            out = m(hidden_states=inp["img_tokens"].to(t), encoder_hidden_states=inp["txt_features"].to(t),
                    pooled_projections=inp["pooled"].to(t), timestep=inp["timestep"].to(t),
                    guidance=inp["guidance"].to(t) if "guidance" in inp else None,
                    img_ids=inp["img_ids"], txt_ids=inp["txt_ids"], return_dict=False)[0]
        hook.remove()
        res[dt] = {"output": out, "dbg.temb": temb[0]}
        if dt == "f32":
            folder = os.path.join(common.TINY, "flux1_dit_" + variant)
            os.makedirs(folder, exist_ok=True)
            sd = {k: v.to(torch.bfloat16).contiguous() for k, v in m.state_dict().items()}
            common.save_safetensors(sd, os.path.join(folder, "diffusion_pytorch_model.safetensors"), {"format": "pt"})
            m.save_config(folder)
    # the committed folder loads in diffusers as it is and gives the same numbers
    from diffusers import FluxTransformer2DModel
    back = FluxTransformer2DModel.from_pretrained(os.path.join(common.TINY, "flux1_dit_" + variant),
                                                  torch_dtype=torch.float32).eval()
    with torch.no_grad():
        again = back(hidden_states=inp["img_tokens"], encoder_hidden_states=inp["txt_features"],
                     pooled_projections=inp["pooled"], timestep=inp["timestep"], guidance=inp.get("guidance"),
                     img_ids=inp["img_ids"], txt_ids=inp["txt_ids"], return_dict=False)[0]
    assert torch.equal(again, res["f32"]["output"]), "reloaded tiny model differs"
    g = common.Golden("flux1_dit_%s_f32" % variant, "f32",
                      "one FluxTransformer2DModel forward (tiny FLUX.1 [%s], tests/data/tiny/flux1_dit_%s), batch 2, "
                      "3x5 grid, timestep = sigma and guidance = the scale as FluxPipeline passes them; dbg.temb = "
                      "time_text_embed output" % (variant, variant))
    for k, v in inp.items():
        g.add(k, v)
    for k, v in res["f32"].items():
        tol, s = make_goldens.tol32(v, res["f64"][k])
        g.add(k, v, tol=tol, spread=s)
    g.set("inputs", __import__("json").dumps(sorted(inp)))
    print("golden:", g.save())


def main():
    common.deterministic()
    for variant in VARIANTS:
        run(variant)


if __name__ == "__main__":
    main()
