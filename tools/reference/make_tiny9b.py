"""A tiny FLUX.2 [klein] 9B-shaped model and its text-to-image golden (pipeline_9b) from the official
Flux2KleinPipeline.

What makes klein 9B structurally different from 4B, and is kept here (read from the published configs, spec 5):
  - Qwen3-8B: q_proj's output equals the hidden size (32 x 128 = 4096; Qwen3-4B's is 4096 > 2560) and the
    lm_head is UNTIED (tie_word_embeddings false, lm_head.weight stored): kiln must ignore it, not refuse it;
  - the DiT's joint_attention_dim is 3 x the Qwen3 hidden (12288), features still hidden_states 9, 18, 27
    (the pipeline's text_encoder_out_layers default is the same for both: no 9B-specific layer set);
  - more double than 4B's 5 and fewer single than double x 3 (8 + 24).
Widths differ from the real 9B in every dimension and from the 4B tiny: DiT 3 heads x 24 (axes 6,6,6,6), hidden
72, 3 double + 5 single, joint 48; Qwen3 hidden 16 = 4 heads x 4 (GQA 4:1), intermediate 40, 28 layers.

Writes tests/data/tiny/diffusers-9b/ (folder; VAE, scheduler, tokenizer linked to the 4B tiny's: klein 9B
ships the same VAE), tests/data/tiny/comfy-9b/ (flux-2-klein-9b.safetensors in BFL names, qwen_3_8b.safetensors
and flux2-vae.safetensors linked) and tests/data/golden/pipeline_9b_{f32,bf16}."""
import os
import shutil

import torch
from safetensors.torch import save_file

import common
import layouts  # noqa: F401 (dit_diffusers_to_bfl)
import make_goldens as mg
import tiny_models as tm
from runs import Recorder, bf16_exact

DIF = os.path.join(common.TINY, "diffusers-9b")
COMFY = os.path.join(common.TINY, "comfy-9b")

QWEN3_8B_TINY = dict(tm.QWEN3, hidden_size=16, intermediate_size=40, num_hidden_layers=28, num_attention_heads=4,
                     num_key_value_heads=1, head_dim=4, tie_word_embeddings=False)
DIT_9B_TINY = dict(tm.DIT, num_layers=3, num_single_layers=5, attention_head_dim=24, num_attention_heads=3,
                   joint_attention_dim=48, axes_dims_rope=[6, 6, 6, 6])


def build():
    from diffusers import Flux2Transformer2DModel
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(tm.SEED + 90)
    q = Qwen3ForCausalLM(Qwen3Config(**QWEN3_8B_TINY, bos_token_id=151643, eos_token_id=151645,
                                     dtype="bfloat16")).to(torch.float32).eval()
    tm._randomize(q, torch.Generator().manual_seed(tm.SEED + 91))  # lm_head too: untied, random
    tm._round_bf16(q)
    d = Flux2Transformer2DModel(**DIT_9B_TINY).to(torch.float32).eval()
    tm._randomize(d, torch.Generator().manual_seed(tm.SEED + 92))
    tm._round_bf16(d)
    return q, d


def write(q, d):
    import make_tiny as mt

    for p in (DIF, COMFY):
        shutil.rmtree(p, ignore_errors=True)
        os.makedirs(p)
    common.write_json(os.path.join(DIF, "model_index.json"), mt._model_index(True))
    dsd = mt._bf16(d.state_dict())
    os.makedirs(os.path.join(DIF, "transformer"))
    save_file(dsd, os.path.join(DIF, "transformer", "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    d.save_config(os.path.join(DIF, "transformer"))
    qsd = mt._bf16(dict(q.state_dict()))  # untied: lm_head.weight is stored (Qwen3-8B's files carry it)
    assert "lm_head.weight" in qsd and not torch.equal(qsd["lm_head.weight"], qsd["model.embed_tokens.weight"])
    # One unsharded model.safetensors (a layout diffusers folders also use; sharding is the 4B tiny's test), so
    # that the ComfyUI qwen_3_8b.safetensors can be a link to it instead of a second 10 MB copy.
    mt.write_text_encoder_shards(qsd, q.config, os.path.join(DIF, "text_encoder"))
    te = os.path.join(DIF, "text_encoder")
    for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"):
        os.remove(os.path.join(te, f))
    save_file(qsd, os.path.join(te, "model.safetensors"), metadata={"format": "pt"})
    for sub in ("vae", "scheduler", "tokenizer"):
        os.symlink(os.path.join("..", "diffusers", sub), os.path.join(DIF, sub))
    save_file(layouts.dit_diffusers_to_bfl(dsd), os.path.join(COMFY, "flux-2-klein-9b.safetensors"))
    os.symlink(os.path.join("..", "diffusers-9b", "text_encoder", "model.safetensors"), os.path.join(COMFY, "qwen_3_8b.safetensors"))
    os.symlink(os.path.join("..", "comfy", "flux2-vae.safetensors"), os.path.join(COMFY, "flux2-vae.safetensors"))


def pipeline(dt, q, d):
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline, Flux2Transformer2DModel
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    t = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16}[dt]
    te = Qwen3ForCausalLM.from_pretrained(os.path.join(DIF, "text_encoder"), dtype=torch.float32).to(t).eval()
    tr = Flux2Transformer2DModel.from_pretrained(os.path.join(DIF, "transformer"), torch_dtype=torch.float32).to(t).eval()
    vae = AutoencoderKLFlux2.from_pretrained(os.path.join(DIF, "vae"), torch_dtype=torch.float32).to(t).eval()
    pipe = Flux2KleinPipeline(scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(DIF, "scheduler")),
                              vae=vae, text_encoder=te, tokenizer=AutoTokenizer.from_pretrained(os.path.join(DIF, "tokenizer")),
                              transformer=tr, is_distilled=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe, t


def golden():
    import numpy as np

    h, w, steps, prompts = 48, 80, 4, [mg.PROMPTS[2]]
    noise = bf16_exact(torch.randn(1, 128, h // 16, w // 16, generator=torch.Generator().manual_seed(309)))
    res = {}
    for dt in mg.ORDER:
        pipe, t = pipeline(dt, None, None)
        rec = Recorder()
        rec.watch("dit", pipe.transformer, with_inputs=True)
        lat = []
        with torch.no_grad():
            npimg = pipe(prompt=prompts, height=h, width=w, num_inference_steps=steps, guidance_scale=1.0,
                         latents=noise.to(t), output_type="np", callback_on_step_end=lambda p, i, ts, kw: (
                             lat.append(kw["latents"].clone()), {})[1],
                         callback_on_step_end_tensor_inputs=["latents"]).images
        rec.close()
        out = {"noise": noise, "sigmas": pipe.scheduler.sigmas.clone()}
        for k, (a, kw, o) in enumerate(rec.calls["dit"]):
            if k == 0:
                out["features"] = kw["encoder_hidden_states"]
            out["step%d.timestep" % k] = kw["timestep"]
            out["step%d.velocity" % k] = o[0]
            out["step%d.latents" % k] = lat[k]
        out["image_float"] = torch.from_numpy(np.ascontiguousarray(npimg))
        out["image_u8"] = torch.from_numpy(np.stack([np.asarray(im) for im in pipe.image_processor.numpy_to_pil(npimg)]))
        res[dt] = out
        print("  pipeline_9b %s done" % dt, flush=True)
    mg.uint8_tol(res, "image_u8")
    u8 = res.pop("_u8")
    import json

    mg.save_pair("pipeline_9b", "Flux2KleinPipeline (distilled) on the tiny klein 9B-shaped model (diffusers-9b: "
                 "untied lm_head, q_proj out = hidden), 4 steps, 48x80, injected noise", res,
                 extra={"prompts": json.dumps(prompts), "height": h, "width": w, "steps": steps,
                        "guidance_scale": 1.0, "is_distilled": True}, inputs=("noise",))
    mg.patch_u8_tol("pipeline_9b", u8)


def main():
    common.deterministic()
    q, d = build()
    write(q, d)
    golden()


if __name__ == "__main__":
    main()
