#!/usr/bin/env python3
"""Full-size tensor manifests of FLUX.1 [dev] and [schnell] (no weights; the official classes on the meta device).

    /opt/kiln-ref/bin/python tools/reference/make_flux1_manifests.py

The OFFICIAL classes with the REAL published configs (black-forest-labs/FLUX.1-dev and -schnell: transformer/,
text_encoder/ = openai/clip-vit-large-patch14's text model, text_encoder_2/ = google/t5-v1_1-xxl's encoder, vae/,
scheduler/) give names and shapes; BFL names come from make_flux1_pipeline_golden.dit_to_bfl (checked there against
diffusers' own converter) and layouts.vae_diffusers_to_bfl (checked with AutoencoderKL.from_single_file). Writes
tests/data/manifests/flux1-{dev,schnell}.folder.{diffusers,comfy}.json ("kiln-manifest/1"): the diffusers folder
(T5 in two shards + index as released; the transformer as one file: the format holds one index, kiln reads either)
and the ComfyUI models/ tree (diffusion_models/flux1-<v>.safetensors BF16, text_encoders/clip_l.safetensors,
text_encoders/t5xxl_fp16.safetensors F16, vae/ae.safetensors). Checked: parameter totals (DiT 11.90 B dev,
11.90 B - guidance schnell; T5 encoder 4.76 B; CLIP-L text 123 M; VAE 83.8 M).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import layouts  # noqa: E402
import make_flux1_pipeline_golden as mk  # noqa: E402
import make_manifests as mm  # noqa: E402

DIT = dict(patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
           attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768,
           axes_dims_rope=[16, 56, 56])
CLIP_L = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
              max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=768,
              bos_token_id=0, eos_token_id=2, pad_token_id=1)
T5_XXL = dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
              relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=1e-6,
              feed_forward_proj="gated-gelu", dropout_rate=0.1, is_encoder_decoder=False, use_cache=False,
              tie_word_embeddings=False)
VAE = dict(mk.VAE, block_out_channels=[128, 256, 512, 512], layers_per_block=2, latent_channels=16,
           norm_num_groups=32, sample_size=1024)


def meta(fn):
    with torch.device("meta"):
        return fn()


def with_dtype(ts, dt):
    return [dict(t, dtype=dt) if t["dtype"] == "BF16" else t for t in ts]


def main():
    from diffusers import AutoencoderKL, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel
    clip = meta(lambda: CLIPTextModel(CLIPTextConfig(**CLIP_L)))
    c_sd = {("" if k.startswith("text_model.") else "text_model.") + k: v for k, v in clip.state_dict().items()
            if "position_ids" not in k}
    c_ts = mm.tensors(c_sd)
    t5 = meta(lambda: T5EncoderModel(T5Config(**T5_XXL)))
    t_ts = mm.tensors({k: v for k, v in t5.state_dict().items() if k != "encoder.embed_tokens.weight"})
    vae = meta(lambda: AutoencoderKL(**VAE))
    v_sd = vae.state_dict()
    v_ts, vb_ts = mm.tensors(v_sd), mm.tensors(layouts.vae_diffusers_to_bfl(v_sd))
    n_clip, n_t5, n_vae = mm.nparams(c_ts), mm.nparams(t_ts), mm.nparams(v_ts)
    mm.check("clip", abs(n_clip / 1e6 - 123.06) < 0.1, "CLIP-L text params %d" % n_clip)
    mm.check("t5", abs(n_t5 / 1e9 - 4.762) < 0.01, "T5-XXL encoder params %d" % n_t5)
    mm.check("vae", abs(n_vae / 1e6 - 83.65) < 0.5, "VAE params %d" % n_vae)
    clip_cfg = dict(json.loads(clip.config.to_json_string()), architectures=["CLIPTextModel"])
    t5_cfg = dict(json.loads(t5.config.to_json_string()), architectures=["T5EncoderModel"])
    # the T5 encoder's two released shards: a greedy split at 5 GB in module order
    shards, cur, size = [], [], 0
    for t in sorted(t_ts, key=lambda t: (not t["name"].startswith("shared"), t["name"])):
        b = 2 * mm.nparams([t])
        if cur and size + b > mm.SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    shards.append(cur)
    t_files = [{"path": "text_encoder_2/model-%05d-of-%05d.safetensors" % (i + 1, len(shards)),
                "metadata": {"format": "pt"}, "tensors": sorted(s, key=lambda t: t["name"])}
               for i, s in enumerate(shards)]
    for variant in ("dev", "schnell"):
        dit = meta(lambda: FluxTransformer2DModel(**DIT, guidance_embeds=variant == "dev"))
        d_sd = dit.state_dict()
        d_ts, b_ts = mm.tensors(d_sd), mm.tensors(mk.dit_to_bfl(d_sd))
        n_dit = mm.nparams(d_ts)
        mm.check("dit", mm.nparams(b_ts) == n_dit, "layouts differ in parameters")
        want = 11.9016 if variant == "dev" else 11.9016 - 0.0105  # the guidance embedder: 256*3072 + 3072^2 + biases
        mm.check("dit", abs(n_dit / 1e9 - want) < 0.002, "%s DiT params %d" % (variant, n_dit))
        name = "flux1-" + variant
        sched = json.load(open(os.path.join(common.TINY, "flux1_scheduler_" + variant, "scheduler_config.json")))
        files = [{"path": "transformer/diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"},
                  "tensors": d_ts},
                 {"path": "text_encoder/model.safetensors", "metadata": {"format": "pt"}, "tensors": c_ts}]
        files += t_files
        files += [{"path": "vae/diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"}, "tensors": v_ts}]
        mm.write_manifest("%s.folder.diffusers.json" % name, mm.manifest(
            name, "folder", "diffusers", "the diffusers FluxPipeline folder of FLUX.1 [%s]: diffusers %s "
            "FluxTransformer2DModel, AutoencoderKL, transformers CLIPTextModel (CLIP-L text), T5EncoderModel (T5 v1.1 "
            "XXL) with the released configs on the meta device" % (variant, common.versions()["diffusers"]), files,
            index={"path": "text_encoder_2/model.safetensors.index.json", "files": [f["path"] for f in t_files]},
            extra_files=[{"path": "model_index.json", "json": mk.MODEL_INDEX},
                         {"path": "transformer/config.json",
                          "json": dict(json.loads(dit.to_json_string()))},
                         {"path": "text_encoder/config.json", "json": clip_cfg},
                         {"path": "text_encoder_2/config.json", "json": t5_cfg},
                         {"path": "vae/config.json", "json": json.loads(vae.to_json_string())},
                         {"path": "scheduler/scheduler_config.json", "json": sched}]))
        mm.write_manifest("%s.folder.comfy.json" % name, mm.manifest(
            name, "folder", "bfl", "ComfyUI models/ layout of FLUX.1 [%s]: diffusion_models (BFL names), "
            "text_encoders clip_l (HF names) and t5xxl_fp16 (HF names, F16), vae/ae (BFL/ldm names)" % variant,
            [{"path": "diffusion_models/%s.safetensors" % name, "tensors": b_ts},
             {"path": "text_encoders/clip_l.safetensors", "tensors": c_ts},
             {"path": "text_encoders/t5xxl_fp16.safetensors", "tensors": with_dtype(t_ts, "F16")},
             {"path": "vae/ae.safetensors", "tensors": vb_ts}]))
        print("manifest %s: DiT %d tensors (BFL %d), %.4f B params" % (name, len(d_ts), len(b_ts), n_dit / 1e9))
    print("CLIP %d tensors %.2f M; T5 %d tensors %.4f B in %d shards; VAE %d tensors %.2f M" % (
        len(c_ts), n_clip / 1e6, len(t_ts), n_t5 / 1e9, len(shards), len(v_ts), n_vae / 1e6))


if __name__ == "__main__":
    common.deterministic()
    main()
