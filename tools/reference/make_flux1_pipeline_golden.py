#!/usr/bin/env python3
"""Tiny FLUX.1 [dev] and [schnell] pipelines in both layouts, and end-to-end goldens from the official FluxPipeline.

    /opt/kiln-ref/bin/python tools/reference/make_flux1_pipeline_golden.py

Writes (bf16-exact random weights stored in bf16):
  tests/data/tiny/flux1/dev/        a diffusers FLUX.1 folder: model_index.json (FluxPipeline), transformer/,
                                    text_encoder/ (CLIPTextModel), text_encoder_2/ (T5EncoderModel), tokenizer/ and
                                    tokenizer_2/ (links to data/tokenizer/clip-l and t5), vae/ (AutoencoderKL),
                                    scheduler/ (link to the official [dev] scheduler config of
                                    make_flux1_schedule_golden.py)
  tests/data/tiny/flux1/schnell/    the same with its own transformer (no guidance embedder) and scheduler
  tests/data/tiny/flux1/comfy/      ComfyUI single files of the same weights: diffusion_models/flux1-dev.safetensors
                                    and flux1-schnell.safetensors (BFL names, made with the inverse of diffusers'
                                    convert_flux_transformer_checkpoint_to_diffusers and checked by running that
                                    converter back), text_encoders/clip_l.safetensors, t5xxl_fp16.safetensors, vae/ae (BFL names, checked with
                                    AutoencoderKL.from_single_file)
  tests/data/tiny/flux1_dit_{dev,schnell}_bfl.safetensors  the per-stage tiny DiTs under BFL names (same check)
  tests/data/golden/flux1_<case>_f32.safetensors            one per case below

Each golden: FluxPipeline(prompt(s), height, width, num_inference_steps, guidance_scale, max_sequence_length,
latents = the injected noise packed) in fp32, with tolerances from the fp32-vs-fp64 spread (make_goldens.tol32;
uint8 images: max(1, 2 x spread) grey levels). Tensors: noise [B, 4z, H/16, W/16] (kiln's request layout; the
pipeline gets it packed, token n = (y, x) row-major, channel c*4 + dy*2 + dx, as _pack_latents orders it),
clip_ids / t5_ids, pooled (the DiT's pooled_projections), features (encoder_hidden_states), sigmas,
step<k>.timestep (as passed: t / 1000), step<k>.velocity, step<k>.latents (after the Euler step), vae_input (what
the VAE decoder gets: latents / scaling_factor + shift_factor, unpacked), image_float (np output), image_u8.

Tiny configs vs the real FLUX.1: DiT hidden 128 (3072), 1 head x 128 (24 x 128), 1 double (19) and 2 single (38)
blocks, 24 input channels (64), T5 width 32 (4096), CLIP pooled 48 (768); CLIP-L text: hidden 48 (768), 2 layers
(12), MLP 64 (3072); T5: d_model 32 (4096), 2 layers (24), 2 heads (64), d_ff 48 (10240); VAE: see VAE below. What ComfyUI's single files cannot say (they carry no config) is kept at the real
values so that both layouts run these weights: the RoPE axes (16, 56, 56) and head dim 128, CLIP's 12 heads and
eps 1e-5, T5's d_kv 64, 32 buckets, max distance 128, eps 1e-6, the VAE's 32 GroupNorm groups and scale/shift. Non-default values of
those are proven by the per-stage goldens (make_clip_golden.py, make_t5_golden.py, make_flux1_dit_golden.py, make_flux1_vae_golden.py).
schnell runs with max_sequence_length 256, as its model card does (the pipeline's default is 512).
"""
import inspect
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import make_goldens  # noqa: E402
import runs  # noqa: E402

ROOT = os.path.join(common.TINY, "flux1")
DIT = dict(patch_size=1, in_channels=24, out_channels=None, num_layers=1, num_single_layers=2, attention_head_dim=128,
           num_attention_heads=1, joint_attention_dim=32, pooled_projection_dim=48, axes_dims_rope=(16, 56, 56))
CLIP = dict(vocab_size=49408, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=12,
            max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=32,
            bos_token_id=0, eos_token_id=2, pad_token_id=1)
T5 = dict(vocab_size=32128, d_model=32, d_kv=64, d_ff=48, num_layers=2, num_heads=2, relative_attention_num_buckets=32,
          relative_attention_max_distance=128, layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu",
          dropout_rate=0.0, is_encoder_decoder=False, use_cache=False, tie_word_embeddings=False)
# The VAE: FLUX.1's AutoencoderKL with 32 GroupNorm groups (the single ae.safetensors has no config to say other),
# block_out_channels 32, 32, 64, 64 (128, 256, 512, 512), layers_per_block 1 (2), 6 latent channels (16).
VAE = dict(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
           up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[32, 32, 64, 64], layers_per_block=1,
           act_fn="silu", latent_channels=6, norm_num_groups=32, sample_size=64, scaling_factor=0.3611,
           shift_factor=0.1159, latents_mean=None, latents_std=None, force_upcast=True, use_quant_conv=False,
           use_post_quant_conv=False, mid_block_add_attention=True)
SEED = 20241201
MODEL_INDEX = {"_class_name": "FluxPipeline", "_diffusers_version": "0.42.1", "feature_extractor": [None, None],
               "image_encoder": [None, None], "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
               "text_encoder": ["transformers", "CLIPTextModel"], "text_encoder_2": ["transformers", "T5EncoderModel"],
               "tokenizer": ["transformers", "CLIPTokenizer"], "tokenizer_2": ["transformers", "T5TokenizerFast"],
               "transformer": ["diffusers", "FluxTransformer2DModel"], "vae": ["diffusers", "AutoencoderKL"]}
LONG = ("A lighthouse on a rocky cliff at dusk, waves crashing below, seagulls circling the lamp, "
        "painted in thick impasto oils with warm and cold light. ") * 40
PROMPTS = ["a red fox in fresh snow, golden hour", "Ein Hund im Regen, \u6771\u4eac, neon", "",
           "a tiny robot watering a bonsai tree, studio lighting"]
# name: (variant, prompts, height, width, steps, guidance, max_sequence_length, noise seed)
CASES = {
    "dev_b1": ("dev", [PROMPTS[0]], 48, 80, 3, 3.5, 512, 401),
    "dev_b3": ("dev", PROMPTS[1:4], 32, 32, 2, 2.5, 512, 402),
    "dev_long": ("dev", [LONG], 32, 48, 2, 3.5, 512, 403),
    "schnell_b1": ("schnell", [PROMPTS[3]], 48, 80, 4, 0.0, 256, 404),
    "schnell_b3": ("schnell", PROMPTS[0:3], 32, 32, 2, 0.0, 256, 405),
    "schnell_long": ("schnell", [LONG], 48, 32, 2, 0.0, 256, 406),
}


def rand_(m, seed, emb_scale=0.5):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if ("norm" in name and name.endswith("weight")) or name.endswith("layer_norm.weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif "embed" in name or "shared" in name or "relative_attention_bias" in name:
                v = emb_scale * torch.randn(p.shape, generator=g)
            else:
                v = torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).to(torch.float32))
    return m.eval()


def link(target, name):
    if os.path.lexists(name):
        os.remove(name)
    os.symlink(target, name)


def save_bf16(m, path, drop=()):
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in m.state_dict().items() if k not in drop}
    common.save_safetensors(sd, path, {"format": "pt"})
    return sd


def dit_to_bfl(sd):
    """diffusers FluxTransformer2DModel names -> BFL flux1 names (the inverse of diffusers'
    convert_flux_transformer_checkpoint_to_diffusers). Raises on an unmapped key."""
    out, sd = {}, dict(sd)

    def mv(src, dst):
        for leaf in ("weight", "bias"):
            if "%s.%s" % (src, leaf) in sd:
                out["%s.%s" % (dst, leaf)] = sd.pop("%s.%s" % (src, leaf))

    for a, b in (("time_text_embed.timestep_embedder.linear_1", "time_in.in_layer"),
                 ("time_text_embed.timestep_embedder.linear_2", "time_in.out_layer"),
                 ("time_text_embed.text_embedder.linear_1", "vector_in.in_layer"),
                 ("time_text_embed.text_embedder.linear_2", "vector_in.out_layer"),
                 ("time_text_embed.guidance_embedder.linear_1", "guidance_in.in_layer"),
                 ("time_text_embed.guidance_embedder.linear_2", "guidance_in.out_layer"),
                 ("context_embedder", "txt_in"), ("x_embedder", "img_in"), ("proj_out", "final_layer.linear")):
        mv(a, b)
    for leaf in ("weight", "bias"):
        scale, shift = sd.pop("norm_out.linear." + leaf).chunk(2, dim=0)
        out["final_layer.adaLN_modulation.1." + leaf] = torch.cat([shift, scale], dim=0)
    i = 0
    while "transformer_blocks.%d.norm1.linear.weight" % i in sd:
        p, q = "transformer_blocks.%d." % i, "double_blocks.%d." % i
        mv(p + "norm1.linear", q + "img_mod.lin")
        mv(p + "norm1_context.linear", q + "txt_mod.lin")
        for leaf in ("weight", "bias"):
            out[q + "img_attn.qkv." + leaf] = torch.cat([sd.pop(p + "attn.to_%s.%s" % (x, leaf)) for x in "qkv"])
            out[q + "txt_attn.qkv." + leaf] = torch.cat([sd.pop(p + "attn.add_%s_proj.%s" % (x, leaf))
                                                         for x in "qkv"])
        out[q + "img_attn.norm.query_norm.scale"] = sd.pop(p + "attn.norm_q.weight")
        out[q + "img_attn.norm.key_norm.scale"] = sd.pop(p + "attn.norm_k.weight")
        out[q + "txt_attn.norm.query_norm.scale"] = sd.pop(p + "attn.norm_added_q.weight")
        out[q + "txt_attn.norm.key_norm.scale"] = sd.pop(p + "attn.norm_added_k.weight")
        mv(p + "attn.to_out.0", q + "img_attn.proj")
        mv(p + "attn.to_add_out", q + "txt_attn.proj")
        mv(p + "ff.net.0.proj", q + "img_mlp.0")
        mv(p + "ff.net.2", q + "img_mlp.2")
        mv(p + "ff_context.net.0.proj", q + "txt_mlp.0")
        mv(p + "ff_context.net.2", q + "txt_mlp.2")
        i += 1
    i = 0
    while "single_transformer_blocks.%d.norm.linear.weight" % i in sd:
        p, q = "single_transformer_blocks.%d." % i, "single_blocks.%d." % i
        mv(p + "norm.linear", q + "modulation.lin")
        for leaf in ("weight", "bias"):
            out[q + "linear1." + leaf] = torch.cat([sd.pop(p + "attn.to_%s.%s" % (x, leaf)) for x in "qkv"] +
                                                   [sd.pop(p + "proj_mlp." + leaf)])
        out[q + "norm.query_norm.scale"] = sd.pop(p + "attn.norm_q.weight")
        out[q + "norm.key_norm.scale"] = sd.pop(p + "attn.norm_k.weight")
        mv(p + "proj_out", q + "linear2")
        i += 1
    if sd:
        raise KeyError("unmapped FluxTransformer2DModel keys: %s" % sorted(sd))
    return out


def check_bfl(bfl, sd, hidden):
    """diffusers' own converter (its inner_dim constant, 3072, set to the tiny width) must give sd back."""
    from diffusers.loaders import single_file_utils as sfu
    src = inspect.getsource(sfu.convert_flux_transformer_checkpoint_to_diffusers)
    assert "inner_dim = 3072" in src
    ns = dict(vars(sfu))
    exec(src.replace("inner_dim = 3072", "inner_dim = %d" % hidden), ns)
    back = ns["convert_flux_transformer_checkpoint_to_diffusers"]({k: v.clone() for k, v in bfl.items()})
    assert sorted(back) == sorted(sd), sorted(set(back) ^ set(sd))
    for k in sd:
        assert torch.equal(back[k], sd[k]), k


def build_models():
    from diffusers import FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel
    dev = os.path.join(ROOT, "dev")
    sch = os.path.join(ROOT, "schnell")
    comfy = os.path.join(ROOT, "comfy")
    for d in (dev, sch, os.path.join(comfy, "diffusion_models"), os.path.join(comfy, "text_encoders"),
              os.path.join(comfy, "vae")):
        os.makedirs(d, exist_ok=True)
    # text encoders (shared by both variants)
    torch.manual_seed(SEED)
    clip = rand_(CLIPTextModel(CLIPTextConfig(**CLIP)), SEED + 1)
    os.makedirs(os.path.join(dev, "text_encoder"), exist_ok=True)
    sd = {("" if k.startswith("text_model.") else "text_model.") + k: v.to(torch.bfloat16).contiguous()
          for k, v in clip.state_dict().items() if "position_ids" not in k}
    common.save_safetensors(sd, os.path.join(dev, "text_encoder", "model.safetensors"), {"format": "pt"})
    c = clip.config.to_dict()
    common.write_json(os.path.join(dev, "text_encoder", "config.json"),
                      dict({k: c[k] for k in sorted(c) if k in CLIP or k == "model_type"},
                           architectures=["CLIPTextModel"]))
    torch.manual_seed(SEED + 2)
    t5 = rand_(T5EncoderModel(T5Config(**T5)), SEED + 3, emb_scale=1.0)
    os.makedirs(os.path.join(dev, "text_encoder_2"), exist_ok=True)
    save_bf16(t5, os.path.join(dev, "text_encoder_2", "model.safetensors"), drop=("encoder.embed_tokens.weight",))
    c = t5.config.to_dict()
    common.write_json(os.path.join(dev, "text_encoder_2", "config.json"),
                      dict({k: c[k] for k in sorted(c) if k in T5 or k in ("dense_act_fn", "is_gated_act",
                                                                            "model_type")},
                           architectures=["T5EncoderModel"]))
    for sub, target in (("tokenizer", "../../../../../data/tokenizer/clip-l"),
                        ("tokenizer_2", "../../../../../data/tokenizer/t5")):
        link(target, os.path.join(dev, sub))
    from diffusers import AutoencoderKL
    import layouts
    torch.manual_seed(SEED + 4)
    vae = rand_(AutoencoderKL(**VAE), SEED + 5)
    vdir = os.path.join(dev, "vae")
    if os.path.islink(vdir):
        os.remove(vdir)
    os.makedirs(vdir, exist_ok=True)
    vsd = save_bf16(vae, os.path.join(vdir, "diffusion_pytorch_model.safetensors"))
    vae.save_config(vdir)
    ae = os.path.join(comfy, "vae", "ae.safetensors")
    if os.path.islink(ae):
        os.remove(ae)
    common.save_safetensors(layouts.vae_diffusers_to_bfl(vsd), ae, {"format": "pt"})
    back = AutoencoderKL.from_single_file(ae, config=vdir, torch_dtype=torch.bfloat16).state_dict()
    assert sorted(back) == sorted(vsd) and all(torch.equal(back[k], vsd[k]) for k in vsd), "BFL ae differs"

    link("../../flux1_scheduler_dev", os.path.join(dev, "scheduler"))
    for sub in ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2", "vae"):
        link("../dev/" + sub, os.path.join(sch, sub))
    link("../../flux1_scheduler_schnell", os.path.join(sch, "scheduler"))
    link("../../dev/text_encoder/model.safetensors", os.path.join(comfy, "text_encoders", "clip_l.safetensors"))
    link("../../dev/text_encoder_2/model.safetensors", os.path.join(comfy, "text_encoders", "t5xxl_fp16.safetensors"))
    # transformers
    for variant, folder, seed in (("dev", dev, SEED + 10), ("schnell", sch, SEED + 20)):
        torch.manual_seed(seed)
        m = rand_(FluxTransformer2DModel(**DIT, guidance_embeds=variant == "dev"), seed + 1)
        tdir = os.path.join(folder, "transformer")
        os.makedirs(tdir, exist_ok=True)
        sd = save_bf16(m, os.path.join(tdir, "diffusion_pytorch_model.safetensors"))
        m.save_config(tdir)
        bfl = dit_to_bfl(sd)
        check_bfl(bfl, sd, DIT["attention_head_dim"] * DIT["num_attention_heads"])
        common.save_safetensors(bfl, os.path.join(comfy, "diffusion_models", "flux1-%s.safetensors" % variant),
                                {"format": "pt"})
        common.write_json(os.path.join(folder, "model_index.json"), MODEL_INDEX)
    # the per-stage tiny DiTs under BFL names too
    from safetensors.torch import load_file
    for variant in ("dev", "schnell"):
        src = os.path.join(common.TINY, "flux1_dit_" + variant)
        sd = load_file(os.path.join(src, "diffusion_pytorch_model.safetensors"))
        bfl = dit_to_bfl(sd)
        check_bfl(bfl, sd, json.load(open(os.path.join(src, "config.json")))["num_attention_heads"] * 16)
        common.save_safetensors(bfl, os.path.join(common.TINY, "flux1_dit_%s_bfl.safetensors" % variant),
                                {"format": "pt"})


def pipeline(variant, dt):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextModel, CLIPTokenizer, T5EncoderModel, T5TokenizerFast
    d = os.path.join(ROOT, variant)
    t = runs.DTYPES[dt]
    f32 = torch.float32
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(d, "scheduler")),
        vae=AutoencoderKL.from_pretrained(os.path.join(d, "vae"), torch_dtype=f32).to(t).eval(),
        text_encoder=CLIPTextModel.from_pretrained(os.path.join(d, "text_encoder"), dtype=f32).to(t).eval(),
        tokenizer=CLIPTokenizer.from_pretrained(os.path.join(d, "tokenizer")),
        text_encoder_2=T5EncoderModel.from_pretrained(os.path.join(d, "text_encoder_2"), dtype=f32).to(t).eval(),
        tokenizer_2=T5TokenizerFast.from_pretrained(os.path.join(d, "tokenizer_2")),
        transformer=FluxTransformer2DModel.from_pretrained(os.path.join(d, "transformer"), torch_dtype=f32).to(t).eval())
    pipe.set_progress_bar_config(disable=True)
    return pipe


def run(variant, dt, prompts, h, w, steps, guidance, max_seq, noise):
    pipe = pipeline(variant, dt)
    t = runs.DTYPES[dt]
    rec = runs.Recorder()
    rec.watch("dit", pipe.transformer, with_inputs=True)
    rec.watch("dec", pipe.vae.decoder, with_inputs=True)
    rec.watch("clip", pipe.text_encoder, with_inputs=True)
    rec.watch("t5", pipe.text_encoder_2, with_inputs=True)
    lat = []

    def cb(p, i, ts, kw):
        lat.append(kw["latents"].clone())
        return {}

    B, C = noise.shape[0], noise.shape[1]
    packed = noise.reshape(B, C, -1).permute(0, 2, 1).contiguous()  # [B, N, 4z], token-major (_pack_latents)
    with torch.no_grad():
        img = pipe(prompt=prompts, height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
                   max_sequence_length=max_seq, latents=packed.to(t), output_type="np", callback_on_step_end=cb,
                   callback_on_step_end_tensor_inputs=["latents"]).images
    rec.close()
    out = {"noise": noise, "clip_ids": rec.calls["clip"][0][1].get("input_ids", rec.calls["clip"][0][0][0]
                                                                    if rec.calls["clip"][0][0] else None),
           "t5_ids": rec.calls["t5"][0][1].get("input_ids", rec.calls["t5"][0][0][0] if rec.calls["t5"][0][0] else None),
           "sigmas": pipe.scheduler.sigmas.clone()}
    calls = rec.calls["dit"]
    assert len(calls) == steps
    out["pooled"] = calls[0][1]["pooled_projections"]
    out["features"] = calls[0][1]["encoder_hidden_states"]
    for k in range(steps):
        kw, o = calls[k][1], calls[k][2]
        out["step%d.timestep" % k] = kw["timestep"]
        if kw["guidance"] is not None:
            out["step%d.guidance" % k] = kw["guidance"]
        out["step%d.velocity" % k] = o[0]
        out["step%d.latents" % k] = lat[k]
    out["vae_input"] = torch.cat([c[0][0] for c in rec.calls["dec"]])
    out["image_float"] = torch.from_numpy(np.ascontiguousarray(img))
    out["image_u8"] = torch.from_numpy((img * 255).round().astype("uint8"))
    return out


def golden(name, case):
    variant, prompts, h, w, steps, guidance, max_seq, seed = case
    g = torch.Generator().manual_seed(seed)
    noise = runs.bf16_exact(torch.randn(len(prompts), DIT["in_channels"], h // 16, w // 16, generator=g))
    res = {dt: run(variant, dt, prompts, h, w, steps, guidance, max_seq, noise) for dt in ("f64", "f32")}
    gold = common.Golden("flux1_%s_f32" % name, "f32", "FluxPipeline (tiny FLUX.1 [%s], tests/data/tiny/flux1/%s), "
                         "%d prompt(s), %dx%d (HxW), %d steps, guidance %g, max_sequence_length %d, injected noise; "
                         "see make_flux1_pipeline_golden.py" % (variant, variant, len(prompts), h, w, steps, guidance,
                                                                max_seq))
    for k, v in res["f32"].items():
        if k in ("noise", "clip_ids", "t5_ids"):
            assert torch.equal(v, res["f64"][k]), k
            gold.add(k, v, tol=(0, 0))
        elif k == "image_u8":
            s = int((v.int() - res["f64"][k].int()).abs().max())
            gold.add(k, v)
            gold.set("tol." + k, "%d,0" % max(1, 2 * s))
            gold.set("spread." + k, "%d" % s)
        else:
            tol, s = make_goldens.tol32(v, res["f64"][k].to(v.dtype) if not v.is_floating_point() else res["f64"][k])
            gold.add(k, v, tol=tol, spread=s)
    for k, v in (("variant", variant), ("prompts", json.dumps(prompts, ensure_ascii=False)), ("height", h),
                 ("width", w), ("steps", steps), ("guidance_scale", guidance), ("max_sequence_length", max_seq)):
        gold.set(k, v)
    gold.set("inputs", json.dumps(["noise"]))
    print("golden:", gold.save())


def main():
    common.deterministic()
    build_models()
    only = sys.argv[1:]
    for name, case in CASES.items():
        if not only or name in only:
            golden(name, case)


if __name__ == "__main__":
    main()
