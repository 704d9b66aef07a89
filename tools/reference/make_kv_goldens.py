"""The tiny FLUX.2 [klein] 9B-KV folder and its goldens, from the official Flux2KleinKVPipeline (diffusers
pipelines/flux2/pipeline_flux2_klein_kv.py), fp64 / fp32 / bf16 runs as make_goldens.py does.

The 9B-KV checkpoint is the klein 9B transformer class with the same tensor shapes, run by another pipeline
(KV-cache-aware attention processors: reference tokens prepended, modulated at a fixed timestep, attending only
to themselves at step 0, their K/V cached and injected at steps 1+). So the tiny KV folder is the tiny 9B-shaped
one (make_tiny9b.py) under a model_index.json naming Flux2KleinKVPipeline: every subfolder is a link.

  kv_t2i  no image: the pipeline's standard forward at every step, 48x80, 4 steps
  kv_r1   image=[ref-100x72.png], no height/width (the reference's 96x64 after the multiple-of-16 crop), 4 steps
  kv_r3   image=[ref-90x70.png, ref-1100x1000.png (over the 1024^2 cap), ref-70x150.png], 48x64, 4 steps

Recorded per DiT call: step<k>.velocity = the transformer's output (the image tokens only: in extract mode it
drops the text and reference rows itself), step<k>.latents, step<k>.timestep; features at step 0; ref_tokens =
the first R rows of step 0's hidden_states (the references prepended), for kv_r1."""
import json
import os
import shutil

import numpy as np
import torch

import common
import make_edit_goldens as me
import make_goldens as mg
from runs import Recorder, bf16_exact

KV = os.path.join(common.TINY, "diffusers-9b-kv")
B9 = os.path.join(common.TINY, "diffusers-9b")


def write_folder():
    shutil.rmtree(KV, ignore_errors=True)
    os.makedirs(KV)
    with open(os.path.join(B9, "model_index.json")) as f:
        mi = json.load(f)
    mi["_class_name"] = "Flux2KleinKVPipeline"
    common.write_json(os.path.join(KV, "model_index.json"), mi)
    for sub, target in (("transformer", "diffusers-9b"), ("text_encoder", "diffusers-9b"), ("vae", "diffusers"),
                        ("scheduler", "diffusers"), ("tokenizer", "diffusers")):
        os.symlink(os.path.join("..", target, sub), os.path.join(KV, sub))


def pipeline(dt):
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2KleinKVPipeline, Flux2Transformer2DModel
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    t = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16}[dt]
    te = Qwen3ForCausalLM.from_pretrained(os.path.join(KV, "text_encoder"), dtype=torch.float32).to(t).eval()
    tr = Flux2Transformer2DModel.from_pretrained(os.path.join(KV, "transformer"), torch_dtype=torch.float32).to(t).eval()
    vae = AutoencoderKLFlux2.from_pretrained(os.path.join(KV, "vae"), torch_dtype=torch.float32).to(t).eval()
    pipe = Flux2KleinKVPipeline(scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(KV, "scheduler")),
                                vae=vae, text_encoder=te, tokenizer=AutoTokenizer.from_pretrained(os.path.join(KV, "tokenizer")),
                                transformer=tr)
    pipe.set_progress_bar_config(disable=True)
    return pipe, t


def run(dt, refs, h, w, steps, noise):
    pipe, t = pipeline(dt)
    rec = Recorder()
    rec.watch("dit", pipe.transformer, with_inputs=True)
    lat = []

    def cb(p, i, ts, kw):
        lat.append(kw["latents"].clone())
        return {}

    args = dict(prompt=[me.PROMPT], num_inference_steps=steps, output_type="np", latents=noise.to(t),
                callback_on_step_end=cb, callback_on_step_end_tensor_inputs=["latents"])
    if refs:
        args["image"] = [me.load(r) for r in refs]
    if h:
        args.update(height=h, width=w)
    with torch.no_grad():
        npimg = pipe(**args).images
    rec.close()
    out = {"noise": noise, "sigmas": pipe.scheduler.sigmas.clone()}
    n = noise.shape[2] * noise.shape[3]
    calls = rec.calls["dit"]
    for k, (a, kw, o) in enumerate(calls):
        mode = kw.get("kv_cache_mode")
        assert mode == (None if not refs else "extract" if k == 0 else "cached"), (k, mode)
        assert "ref_fixed_timestep" not in kw  # the pipeline leaves the transformer's default (0.0)
        if k == 0:
            out["features"] = kw["encoder_hidden_states"]
            if refs:
                r = kw["num_ref_tokens"]
                assert kw["hidden_states"].shape[1] == r + n
                if len(refs) == 1:  # (3 references: 4,400 tokens, too large to commit; the steps check them)
                    out["ref_tokens"] = kw["hidden_states"][0, :r]  # prepended: the first r rows
        out["step%d.timestep" % k] = kw["timestep"]
        assert o[0].shape[1] == n
        out["step%d.velocity" % k] = o[0]
        out["step%d.latents" % k] = lat[k]
    out["image_float"] = torch.from_numpy(np.ascontiguousarray(npimg))
    out["image_u8"] = torch.from_numpy(np.stack([np.asarray(im) for im in pipe.image_processor.numpy_to_pil(npimg)]))
    return out, len(calls)


def golden(name, desc, refs, h, w, steps, seed, out_hw):
    oh, ow = out_hw
    noise = bf16_exact(torch.randn(1, 128, oh // 16, ow // 16, generator=torch.Generator().manual_seed(seed)))
    res, n_run = {}, None
    for dt in mg.ORDER:
        res[dt], n_run = run(dt, refs, h, w, steps, noise)
        print("  %s %s done" % (name, dt), flush=True)
    mg.uint8_tol(res, "image_u8")
    u8 = res.pop("_u8")
    extra = {"prompts": json.dumps([me.PROMPT]), "height": oh, "width": ow, "steps": steps, "steps_run": n_run,
             "request_height": h or 0, "request_width": w or 0, "refs": json.dumps(refs or []),
             "pipeline": "Flux2KleinKVPipeline", "is_distilled": True}
    mg.save_pair(name, desc, res, extra=extra, inputs=("noise",))
    mg.patch_u8_tol(name, u8)


def check_t2i_is_klein():
    """The claim that lets a ComfyUI single file of the KV checkpoint run as klein 9B: without references the KV
    pipeline computes what Flux2KleinPipeline does (pipeline_9b: same weights, noise, size, steps)."""
    from safetensors.torch import load_file

    g = load_file(os.path.join(common.GOLDEN, "pipeline_9b_f32.safetensors"))
    out, _ = run("f32", None, 48, 80, 4, g["noise"])
    assert torch.equal(out["image_u8"], g["image_u8"].to(out["image_u8"].dtype))
    for k in range(4):
        assert torch.allclose(out["step%d.velocity" % k], g["step%d.velocity" % k], atol=1e-4, rtol=0), k
    print("  kv without references = Flux2KleinPipeline (pipeline_9b): image bytes equal", flush=True)


def main():
    common.deterministic()
    write_folder()
    check_t2i_is_klein()
    golden("kv_t2i", "Flux2KleinKVPipeline without image= on the tiny 9B-KV folder (diffusers-9b-kv): the standard "
           "forward at every step, 48x80, 4 steps, injected noise", None, 48, 80, 4, 501, (48, 80))
    golden("kv_r1", "Flux2KleinKVPipeline(image=[ref-100x72.png]), no height/width (the reference's 96x64), 4 steps: "
           "step 0 extract (references prepended, fixed-timestep modulation, reference rows self-attend, K/V cached), "
           "steps 1-3 cached; ref_tokens = the first R rows of step 0's hidden_states; step<k>.velocity = the "
           "transformer's output (image tokens only)", ["ref-100x72"], None, None, 4, 502, (64, 96))
    golden("kv_r3", "Flux2KleinKVPipeline(image=[ref-90x70, ref-1100x1000 (resized: over 1024^2), ref-70x150]), "
           "48x64, 4 steps (extract, then cached)", ["ref-90x70", "ref-1100x1000", "ref-70x150"], 48, 64, 4, 503,
           (48, 64))


if __name__ == "__main__":
    main()
