"""Goldens for editing (reference images) and image-to-image, from the official Flux2KleinPipeline on the tiny
klein models (tests/data/tiny/diffusers), fp64 / fp32 / bf16 runs as make_goldens.py does.

  edit_r1    image=[ref-100x72.png], no height/width: the output takes the reference's size (96x64 after the
             multiple-of-16 crop), 4 steps
  edit_r3    image=[ref-90x70.png, ref-1100x1000.png (over the 1024^2 cap: LANCZOS to 1073x976, then 1072x976),
             ref-70x150.png], height 48, width 64, 4 steps
  img2img_s030 / img2img_s080
             init-96x64.png at strength 0.3 / 0.8 with 10 steps: the img2img semantics of diffusers' flow-matching
             pipelines assembled from the official pieces: Flux2KleinInpaintPipeline.get_timesteps (t_start),
             Flux2KleinPipeline._encode_vae_image (posterior mode, patchify, BN), scheduler.scale_noise, then
             Flux2KleinPipeline itself with latents=that and sigmas=the schedule's tail (mu from the full count)
  resize_lanczos
             PIL Image.resize(LANCZOS) of ref-1100x1000.png to 1073x976, the pipeline's _resize_to_target_area

Also writes the input images into tests/data/images (PIL, deterministic patterns)."""
import json
import math
import os

import numpy as np
import torch
from PIL import Image

import common
import make_goldens as mg
import runs
from runs import Recorder, bf16_exact

IMAGES = os.path.join(common.DATA, "images")
PROMPT = mg.PROMPTS[2]


def pattern(w, h, seed, levels=1):
    """Smooth (compresses well as PNG) but not trivial: a few random low-frequency waves per channel; the large
    reference in steps of `levels` grey levels so that its PNG stays small."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.zeros((h, w, 3))
    for c in range(3):
        for _ in range(4):
            fx, fy, ph = rng.uniform(0.5, 6) / w, rng.uniform(0.5, 6) / h, rng.uniform(0, 6.3)
            out[:, :, c] += np.sin(2 * np.pi * (fx * x + fy * y) + ph)
    out = 127.5 + 120 * out / 4
    out = np.rint(out / levels) * levels
    return Image.fromarray(np.clip(np.rint(out), 0, 255).astype(np.uint8), "RGB")


def write_images():
    os.makedirs(IMAGES, exist_ok=True)
    for name, (w, h, seed, lv) in {"ref-100x72": (100, 72, 11, 1), "ref-90x70": (90, 70, 12, 1),
                                   "ref-1100x1000": (1100, 1000, 13, 16), "ref-70x150": (70, 150, 14, 1),
                                   "init-96x64": (96, 64, 15, 1)}.items():
        pattern(w, h, seed, lv).save(os.path.join(IMAGES, name + ".png"), "PNG", optimize=True)


def load(name):
    return Image.open(os.path.join(IMAGES, name + ".png")).convert("RGB")


def run(dt, refs, h, w, steps, noise, init=None, strength=None):
    pipe = runs.pipeline(dt)
    t = runs.DTYPES[dt]
    out = {}
    rec = Recorder()
    rec.watch("dit", pipe.transformer, with_inputs=True)
    lat_steps = []

    def cb(p, i, ts, kw):
        lat_steps.append(kw["latents"].clone())
        return {}

    args = dict(prompt=[PROMPT], num_inference_steps=steps, guidance_scale=1.0, output_type="np",
                callback_on_step_end=cb, callback_on_step_end_tensor_inputs=["latents"])
    if refs:
        args["image"] = [load(r) for r in refs]
    if h:
        args.update(height=h, width=w)
    latents = noise.to(t)
    if init is not None:
        from diffusers import Flux2KleinInpaintPipeline
        from diffusers.pipelines.flux2.pipeline_flux2_klein import compute_empirical_mu, retrieve_timesteps

        img = pipe.image_processor.preprocess(load(init), height=h, width=w, resize_mode="crop").to(t)
        with torch.no_grad():
            x0 = pipe._encode_vae_image(img, generator=None)  # [1, 128, h/16, w/16]
        seq = (h // 16) * (w // 16)
        sig = np.linspace(1.0, 1 / steps, steps)
        retrieve_timesteps(pipe.scheduler, steps, "cpu", sigmas=sig, mu=compute_empirical_mu(seq, steps))
        full = pipe.scheduler.timesteps.clone()
        ts, n_run = Flux2KleinInpaintPipeline.get_timesteps(pipe, steps, strength, "cpu")
        t_start = steps - n_run
        latents = pipe.scheduler.scale_noise(x0, ts[:1], noise.to(t))
        args["sigmas"] = sig[t_start:]
        out["init_latent"] = pipe._pack_latents(x0)
    args["latents"] = latents
    with torch.no_grad():
        npimg = pipe(**args).images
        rec.close()
    if init is not None:
        assert torch.equal(pipe.scheduler.timesteps, full[t_start:]), (pipe.scheduler.timesteps, full)
    pil = pipe.image_processor.numpy_to_pil(npimg)
    out["noise"] = noise
    out["sigmas"] = pipe.scheduler.sigmas.clone()
    n = noise.shape[2] * noise.shape[3]
    calls = rec.calls["dit"]
    for k, (a, kw, o) in enumerate(calls):
        if k == 0:
            out["features"] = kw["encoder_hidden_states"]
            if refs and len(refs) == 1:  # (3 references: 4,400 tokens, too large to commit; the steps check them)
                out["ref_tokens"] = kw["hidden_states"][0, n:]
        out["step%d.timestep" % k] = kw["timestep"]
        out["step%d.velocity" % k] = o[0][:, :n]  # what the pipeline keeps (noise_pred[:, :N])
        out["step%d.latents" % k] = lat_steps[k]
    out["image_float"] = torch.from_numpy(np.ascontiguousarray(npimg))
    out["image_u8"] = torch.from_numpy(np.stack([np.asarray(im) for im in pil]))
    return out, len(calls)


def golden(name, desc, refs, h, w, steps, seed, out_hw, init=None, strength=None):
    oh, ow = out_hw
    g = torch.Generator().manual_seed(seed)
    noise = bf16_exact(torch.randn(1, 128, oh // 16, ow // 16, generator=g))
    res, n_run = {}, None
    for dt in mg.ORDER:
        res[dt], n_run = run(dt, refs, h, w, steps, noise, init, strength)
        print("  %s %s done" % (name, dt), flush=True)
    mg.uint8_tol(res, "image_u8")
    u8 = res.pop("_u8")
    extra = {"prompts": json.dumps([PROMPT]), "height": oh, "width": ow, "steps": steps, "steps_run": n_run,
             "request_height": h or 0, "request_width": w or 0, "refs": json.dumps(refs or []),
             "guidance_scale": 1.0, "is_distilled": True}
    if init is not None:
        extra.update(init=init, strength=repr(strength))
    mg.save_pair(name, desc, res, extra=extra, inputs=("noise",))
    mg.patch_u8_tol(name, u8)


def resize_golden():
    from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor

    im = load("ref-1100x1000")
    r = Flux2ImageProcessor._resize_to_target_area(im, 1024 * 1024)
    import hashlib

    a = np.ascontiguousarray(np.asarray(r))
    g = common.Golden("resize_lanczos", "u8", "Flux2ImageProcessor._resize_to_target_area(ref-1100x1000.png, "
                      "1024*1024): PIL LANCZOS to %dx%d; sha256 = of the [H, W, 3] uint8 bytes; rows = rows 0..3 "
                      "and the last (the borders) and rows 480..483" % r.size)
    g.add("rows", torch.from_numpy(np.concatenate([a[0:4], a[-1:], a[480:484]]).copy()), tol=(0, 0))
    g.set("sha256", hashlib.sha256(a.tobytes()).hexdigest())
    g.set("width", r.size[0])
    g.set("height", r.size[1])
    g.save()
    print("golden: resize_lanczos", r.size)


def main():
    common.deterministic()
    write_images()
    resize_golden()
    golden("edit_r1", "Flux2KleinPipeline(image=[ref-100x72.png]) distilled, no height/width (the reference's "
           "96x64), 4 steps, injected noise; ref_tokens = the DiT's hidden_states after the noisy tokens at step 0; "
           "step<k>.velocity = noise_pred[:, :N]", ["ref-100x72"], None, None, 4, 401, (64, 96))
    golden("edit_r3", "Flux2KleinPipeline(image=[ref-90x70, ref-1100x1000 (resized: over 1024^2), ref-70x150]), "
           "48x64, 4 steps", ["ref-90x70", "ref-1100x1000", "ref-70x150"], 48, 64, 4, 402, (48, 64))
    for s, seed in ((0.3, 403), (0.8, 404)):
        golden("img2img_s%03d" % round(s * 100), "img2img of init-96x64.png at strength %g, 10 steps: get_timesteps, "
               "_encode_vae_image, scale_noise, then Flux2KleinPipeline(latents=, sigmas=tail); init_latent = the "
               "encoded init tokens" % s, None, 64, 96, 10, seed, (64, 96), init="init-96x64", strength=s)


if __name__ == "__main__":
    main()
