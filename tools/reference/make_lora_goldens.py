"""LoRA adapters for the tiny FLUX.2 [klein] DiT in the formats FLUX.2 adapters ship in, and the official pipeline's
images with them loaded by diffusers (Flux2KleinPipeline.load_lora_weights) and fused (fuse_lora).

Adapters (tests/data/lora/, random low-rank factors; the modules chosen so that every mapping kiln needs is used:
a q and a k third of a fused qkv, a whole fused qkv onto split weights, single-block fused projections, the
final adaLN whose halves BFL and diffusers order differently (diffusers' norm_out.linear), embedders and the
modulation). Not in the BFL-named adapter: final_layer.adaLN_modulation.1 - diffusers 0.42.1's ai-toolkit
converter maps it onto norm_out.linear WITHOUT swapping the (shift; scale) halves into diffusers' (scale; shift),
so diffusers applies such an adapter's shift rows to the scale; kiln applies it to the BFL weight as trained
(as ComfyUI does), which by design disagrees with diffusers there (docs/pitfalls.md).
  lora-diffusers.safetensors  transformer.<diffusers module>.lora_A/lora_B.weight (scale 1)
  lora-kohya.safetensors      lora_unet_<BFL module, '_' for '.'>.lora_down/lora_up.weight + alpha (scale alpha/rank)
  lora-bfl.safetensors        diffusion_model.<BFL module>.lora_A/lora_B.weight (ai-toolkit / BFL; scale 1)
  bad-*.safetensors           refused by kiln: an unknown target, a rank mismatch, a B without its A, an alpha in
                              the diffusers format
Goldens (tests/data/golden/lora_<case>_f32.safetensors): noise (input), image_u8 with the adapters, image_u8_base
without them; metadata loras = [[file, strength], ...] in application order. Cases: each format alone, and two
stacked (bfl at 0.7 and kohya at 0.5: both loaded, set_adapters with those weights, fused together).

Run: /opt/kiln-ref/bin/python tools/reference/make_lora_goldens.py   (regenerate.sh runs it; needs peft)
"""
import copy
import json
import os

import numpy as np
import torch

import common
import runs

LDIR = os.path.join(common.DATA, "lora")
PROMPT = "a lighthouse on a cliff at dusk"
H, W, STEPS, SEED = 48, 64, 3, 4242


def factors(g, n, k, r, amp):
    a = torch.randn(r, k, generator=g) / k ** 0.5
    b = torch.randn(n, r, generator=g) * amp
    return a.contiguous(), b.contiguous()


def make_adapters(bfl_shapes, dif_shapes):
    g = torch.Generator().manual_seed(99)
    D = bfl_shapes["img_in.weight"][0]
    dif = {}
    for mod, r in [("transformer_blocks.0.attn.to_q", 4), ("transformer_blocks.0.attn.to_k", 4),
                   ("transformer_blocks.1.attn.add_v_proj", 2), ("transformer_blocks.0.attn.to_out.0", 4),
                   ("transformer_blocks.1.ff.linear_in", 3), ("single_transformer_blocks.1.attn.to_qkv_mlp_proj", 4),
                   ("proj_out", 2), ("x_embedder", 4), ("norm_out.linear", 2)]:
        n, k = dif_shapes[mod + ".weight"]
        a, b = factors(g, n, k, r, 0.08)
        dif["transformer.%s.lora_A.weight" % mod] = a
        dif["transformer.%s.lora_B.weight" % mod] = b
    koh = {}
    for mod, r, alpha in [("double_blocks.0.img_attn.qkv", 4, 2.0), ("single_blocks.0.linear1", 4, 8.0),
                          ("double_blocks.1.txt_mlp.0", 3, 3.0), ("img_in", 2, 1.0), ("final_layer.linear", 4, 4.0),
                          ("double_blocks.1.txt_attn.proj", 4, 6.0)]:
        n, k = bfl_shapes[mod + ".weight"]
        a, b = factors(g, n, k, r, 0.08)
        key = "lora_unet_" + mod.replace(".", "_")
        koh[key + ".lora_down.weight"] = a.to(torch.bfloat16)
        koh[key + ".lora_up.weight"] = b.to(torch.bfloat16)
        koh[key + ".alpha"] = torch.tensor(alpha, dtype=torch.bfloat16)
    bfl = {}
    for mod, r in [("double_blocks.1.img_attn.qkv", 4), ("single_blocks.2.linear2", 4),
                   ("double_stream_modulation_img.lin", 2), ("txt_in", 3),
                   ("double_blocks.0.txt_attn.qkv", 2)]:
        n, k = bfl_shapes[mod + ".weight"]
        a, b = factors(g, n, k, r, 0.08)
        bfl["diffusion_model.%s.lora_A.weight" % mod] = a.to(torch.float16)
        bfl["diffusion_model.%s.lora_B.weight" % mod] = b.to(torch.float16)
    files = {"lora-diffusers.safetensors": dif, "lora-kohya.safetensors": koh, "lora-bfl.safetensors": bfl}
    for name, sd in files.items():
        common.save_safetensors(sd, os.path.join(LDIR, name))
    # refused by kiln (each with one thing wrong)
    a, b = factors(g, D, D, 2, 0.1)
    bad = {
        "bad-target.safetensors": {"diffusion_model.double_blocks.7.img_attn.proj.lora_A.weight": a,
                                   "diffusion_model.double_blocks.7.img_attn.proj.lora_B.weight": b},
        "bad-rank.safetensors": {"transformer.transformer_blocks.0.attn.to_out.0.lora_A.weight": a,
                                 "transformer.transformer_blocks.0.attn.to_out.0.lora_B.weight": b[:, :1].contiguous()},
        "bad-orphan.safetensors": {"diffusion_model.img_in.lora_B.weight": b},
        "bad-alpha.safetensors": {"transformer.transformer_blocks.0.attn.to_out.0.lora_A.weight": a,
                                  "transformer.transformer_blocks.0.attn.to_out.0.lora_B.weight": b,
                                  "transformer.transformer_blocks.0.attn.to_out.0.alpha": torch.tensor(1.0)},
    }
    for name, sd in bad.items():
        common.save_safetensors(sd, os.path.join(LDIR, name))


def run(loras):
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline

    sched = FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(runs.DIF, "scheduler"))
    pipe = Flux2KleinPipeline(scheduler=sched, vae=runs.vae("f32"), text_encoder=runs.text_encoder("f32"),
                              tokenizer=runs.tokenizer(), transformer=copy.deepcopy(runs.dit("f32")), is_distilled=True)
    pipe.set_progress_bar_config(disable=True)
    names = ["a%d" % i for i in range(len(loras))]
    for (name, _), an in zip(loras, names):
        pipe.load_lora_weights(os.path.join(LDIR, name), adapter_name=an)
    if len(loras) == 1:
        pipe.fuse_lora(lora_scale=loras[0][1], adapter_names=names)
    elif loras:  # several: each adapter's strength as its adapter weight, then all fused at once
        pipe.set_adapters(names, adapter_weights=[s for _, s in loras])
        pipe.fuse_lora(lora_scale=1.0, adapter_names=names)
    g = torch.Generator().manual_seed(SEED)
    noise = runs.bf16_exact(torch.randn(1, 128, H // 16, W // 16, generator=g))
    with torch.no_grad():
        pil = pipe(prompt=[PROMPT], height=H, width=W, num_inference_steps=STEPS, guidance_scale=1.0,
                   latents=noise, output_type="pil").images
    return noise, torch.from_numpy(np.stack([np.asarray(im) for im in pil]))


def main():
    import layouts

    common.deterministic()
    os.makedirs(LDIR, exist_ok=True)
    sd = runs.dit("f32").state_dict()
    dif_shapes = {k: tuple(v.shape) for k, v in sd.items()}
    bfl_shapes = {k: tuple(v.shape) for k, v in layouts.dit_diffusers_to_bfl(sd).items()}
    make_adapters(bfl_shapes, dif_shapes)
    noise, base = run([])
    cases = {"diffusers": [("lora-diffusers.safetensors", 0.8)], "kohya": [("lora-kohya.safetensors", 1.0)],
             "bfl": [("lora-bfl.safetensors", 1.3)],
             "stacked": [("lora-bfl.safetensors", 0.7), ("lora-kohya.safetensors", 0.5)]}
    for case, loras in cases.items():
        _, img = run(loras)
        gd = common.Golden("lora_%s_f32" % case, "f32", "Flux2KleinPipeline (distilled, f32) with the adapters "
                           "loaded by load_lora_weights and fused (fuse_lora(lora_scale=strength)) in order")
        gd.add("noise", noise, tol=(0, 0))
        gd.add("image_u8", img)
        gd.add("image_u8_base", base)
        gd.set("prompts", json.dumps([PROMPT]))
        gd.set("height", H)
        gd.set("width", W)
        gd.set("steps", STEPS)
        gd.set("guidance_scale", 1.0)
        gd.set("loras", json.dumps([["tests/data/lora/" + n, s] for n, s in loras]))
        gd.save()
        print("golden: lora_%s_f32" % case)


if __name__ == "__main__":
    main()
