#!/usr/bin/env python3
"""A tiny FLUX.1 VAE (diffusers AutoencoderKL as FLUX.1's vae/config.json builds it) and its golden.

    /opt/kiln-ref/bin/python tools/reference/make_flux1_vae_golden.py

Writes tests/data/tiny/flux1_vae/{config.json, diffusion_pytorch_model.safetensors} (bf16-exact random weights in
bf16, diffusers names), tests/data/tiny/flux1_vae_ae.safetensors (the same weights under BFL/ldm names, as
FLUX.1's ae.safetensors stores them; checked by loading it back with diffusers' own single-file conversion,
AutoencoderKL.from_single_file) and tests/data/golden/flux1_vae_f32.safetensors: decode(z) of a non-square 6x10
latent and encode(image).latent_dist.mode(), fp32 with the tolerance from the fp32-vs-fp64 spread.

Tiny config vs FLUX.1's (black-forest-labs/FLUX.1-dev vae): block_out_channels 16, 24, 32, 32 (128, 256, 512, 512:
still 4 levels, so 8x), layers_per_block 1 (2), norm_num_groups 8 (32), latent_channels 6 (16), use_quant_conv
and use_post_quant_conv false as in FLUX.1. scaling_factor / shift_factor are FLUX.1's own (0.3611, 0.1159): the
ComfyUI layout has no config and must use them, and the end-to-end goldens run both layouts on these weights.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import layouts  # noqa: E402
import make_goldens  # noqa: E402
import runs  # noqa: E402
import tiny_models  # noqa: E402

CONFIG = dict(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
              up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[16, 24, 32, 32], layers_per_block=1,
              act_fn="silu", latent_channels=6, norm_num_groups=8, sample_size=64, scaling_factor=0.3611,
              shift_factor=0.1159, latents_mean=None, latents_std=None, force_upcast=True, use_quant_conv=False,
              use_post_quant_conv=False, mid_block_add_attention=True)
SEED = 20240811
FOLDER = os.path.join(common.TINY, "flux1_vae")
AE = os.path.join(common.TINY, "flux1_vae_ae.safetensors")


def build(dt):
    from diffusers import AutoencoderKL
    torch.manual_seed(SEED)
    m = AutoencoderKL(**CONFIG).to(torch.float32).eval()
    tiny_models._randomize(m, torch.Generator().manual_seed(SEED + 1))
    tiny_models._round_bf16(m)
    return m.to({"f64": torch.float64, "f32": torch.float32}[dt])


def save(m):
    from diffusers import AutoencoderKL
    os.makedirs(FOLDER, exist_ok=True)
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in m.state_dict().items()}
    common.save_safetensors(sd, os.path.join(FOLDER, "diffusion_pytorch_model.safetensors"), {"format": "pt"})
    m.save_config(FOLDER)
    common.save_safetensors(layouts.vae_diffusers_to_bfl(sd), AE, {"format": "pt"})
    # diffusers' single-file loader (its own ldm -> diffusers conversion) must give back every tensor
    back = AutoencoderKL.from_single_file(AE, config=FOLDER, torch_dtype=torch.bfloat16)
    bsd = back.state_dict()
    assert sorted(bsd) == sorted(sd), "BFL ae: other keys after diffusers' conversion"
    for k, v in sd.items():
        assert torch.equal(bsd[k], v), "BFL ae: %s differs after diffusers' conversion" % k


def main():
    common.deterministic()
    g = torch.Generator().manual_seed(SEED + 2)
    z = runs.bf16_exact(torch.randn(1, 6, 6, 10, generator=g))
    img = runs.bf16_exact(torch.rand(1, 3, 48, 80, generator=g) * 2 - 1)
    res = {}
    for dt in ("f64", "f32"):
        m = build(dt)
        t = {"f64": torch.float64, "f32": torch.float32}[dt]
        with torch.no_grad():
            out = m.decode(z.to(t), return_dict=False)[0]
            mean = m.encode(img.to(t)).latent_dist.mode()
        res[dt] = {"decode.image": out, "encode.mean": mean}
        if dt == "f32":
            save(m)
    gold = common.Golden("flux1_vae_f32", "f32", "AutoencoderKL (tiny FLUX.1 VAE, tests/data/tiny/flux1_vae) "
                         "decode(z) -> image in [-1,1]; encode(image).latent_dist.mode()")
    gold.add("decode.latent", z)
    gold.add("encode.image", img)
    for k, v in res["f32"].items():
        tol, s = make_goldens.tol32(v, res["f64"][k])
        gold.add(k, v, tol=tol, spread=s)
    print("golden:", gold.save())


if __name__ == "__main__":
    main()
