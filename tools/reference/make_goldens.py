"""Golden tensors from the official diffusers/transformers code on the tiny klein models.

Every golden is run three times: fp64 (only to measure error), fp32 and bf16 (stored). The fp32 file's
tolerances come from the fp32-vs-fp64 spread, the bf16 file's from the bf16-vs-fp32 spread (rules in tol32 /
tol16, written into each file's metadata and into tests/data/golden/README.md).

Usage: make_goldens.py [section ...]   sections: tokens noise qwen3 dit vae vae_tiled schedule pipeline cfg variants (default: all)
"""
import json
import sys

import common
import numpy as np
import torch

import runs
import variants
from runs import Recorder, bf16_exact

ORDER = ("f64", "f32", "bf16")

# Prompt corpus: plain, empty (the CFG negative), unicode (NFC + CJK + emoji), digits (split one by one),
# leading whitespace / newlines (HF pre-tokenises "user\n" + prompt jointly), a literal special-token string
# (HF maps it to the special id), and one prompt long enough to be truncated at 512 (template tail cut).
PROMPTS = [
    "a cat",
    "",
    "A photo of a red fox in fresh snow, golden hour, 35mm film grain",
    "cafe\u0301 na\u00efve \u6771\u4eac\u30bf\u30ef\u30fc \U0001f3a8\U0001f98a Stra\u00dfe",
    "12345 apples cost $3.14 each (2026-01-15)",
    "  \n\nleading whitespace\tand\ttabs  ",
    "don't stop <|im_end|> here, it's <think> time",
    " ".join(["a very long prompt about mountains rivers and clouds"] * 70),
]
BATCH3 = [PROMPTS[0], PROMPTS[2], PROMPTS[4]]


def maxabs(t):
    return float(t.detach().double().abs().max()) if t.numel() else 0.0


def spread(a, b):
    return float((a.detach().double() - b.detach().double()).abs().max()) if a.numel() else 0.0


def rms(t):
    return float(t.detach().double().pow(2).mean().sqrt()) if t.numel() else 0.0


def rms_tol(a, ref, factor, floor):
    """Second, tighter criterion: RMS of the difference. Max-abs bounds are set by the worst outlier of a
    low-precision run; the RMS bound still catches a small systematic error (a wrong eps, a missed rounding)."""
    s = rms(a - ref.to(a.dtype)) if a.numel() else 0.0
    return max(factor * s, floor * rms(ref), 1e-9), s


def tol32(f32, f64):
    """fp32 golden: atol = 10 x max|f32 - f64| (kiln's own fp32 error is of the same size as torch's), with
    a floor of 1e-6 x max|golden| so that exactly-matching tensors still get a sane bound."""
    s = spread(f32, f64)
    return (max(10.0 * s, 1e-6 * maxabs(f64), 1e-7), 0.0), s


def tol16(b16, f32):
    """bf16 golden: atol = 4 x max|bf16 - f32| (kiln's bf16 error may add to torch's, plus margin), with a
    floor of 2^-8 x max|golden| (one bf16 ulp at the largest magnitude)."""
    s = spread(b16, f32)
    return (max(4.0 * s, maxabs(f32) / 256.0, 1e-6), 0.0), s


def save_pair(name, description, results, extra=None, inputs=()):
    """results: {dtype: {tensor name: tensor}} for f64/f32/bf16 -> <name>_f32 and <name>_bf16 goldens.
    `inputs` name the tensors kiln is given (tolerance 0,0: they are bit-exact data, not results)."""
    out = []
    for dt, ref, rule in (("f32", "f64", tol32), ("bf16", "f32", tol16)):
        g = common.Golden("%s_%s" % (name, dt), dt, description)
        for k, v in results[dt].items():
            if k in inputs:
                assert torch.equal(v, results[ref][k]), k
                g.add(k, v, tol=(0, 0))
                continue
            if not v.is_floating_point():
                g.add(k, v)
                if not torch.equal(v.to(torch.int64), results[ref][k].to(torch.int64)) and v.dtype != torch.uint8:
                    raise AssertionError("integer tensor %s differs between runs" % k)
                continue
            tol, s = rule(v, results[ref][k])
            g.add(k, v, tol=tol, spread=s)
            factor, floor = (10.0, 1e-6) if dt == "f32" else (3.0, 1.0 / 512)
            tr, sr = rms_tol(v.double(), results[ref][k].double(), factor, floor)
            g.set("tolrms." + k, "%g" % tr)
            g.set("spreadrms." + k, "%.3g" % sr)
        for k, v in (extra or {}).items():
            g.set(k, v)
        g.set("inputs", json.dumps(list(inputs)))
        out.append(g.save())
    print("golden:", name, "->", ", ".join(p.rsplit("/", 1)[-1] for p in out))


def uint8_tol(results, key):
    """uint8 images: tolerance in grey levels = max(1, 2 x measured spread), fp32 vs fp64 / bf16 vs fp32."""
    for dt, ref in (("f32", "f64"), ("bf16", "f32")):
        a, b = results[dt][key].int(), results[ref][key].int()
        s = int((a - b).abs().max())
        results.setdefault("_u8", {})[(dt, key)] = (max(1, 2 * s), s)


def patch_u8_tol(name, u8):
    """Writes uint8_tol's grey-level tolerance and spread into the metadata save_pair wrote for golden NAME."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    for dt in ("f32", "bf16"):
        path = "%s/%s_%s.safetensors" % (common.GOLDEN, name, dt)
        with safe_open(path, "pt") as f:
            meta = f.metadata()
        tol, s = u8[(dt, "image_u8")]
        meta["tol.image_u8"] = "%d,0" % tol
        meta["spread.image_u8"] = "%d" % s
        common.save_safetensors(load_file(path), path, meta)


# --- sections ----------------------------------------------------------------------------------------


def _encode(te, prompts):
    """Run the pipeline's own prompt encoder and record what it fed / got from the text encoder."""
    from diffusers import Flux2KleinPipeline

    rec = Recorder()
    rec.watch("te", te, with_inputs=True)
    with torch.no_grad():
        feats = Flux2KleinPipeline._get_qwen3_prompt_embeds(te, runs.tokenizer(), prompts)
    rec.close()
    args, kwargs, out = rec.calls["te"][0]
    return feats, kwargs["input_ids"], kwargs["attention_mask"], out.hidden_states


def sec_tokens():
    _, ids, mask, _ = _encode(runs.text_encoder("f32"), PROMPTS)
    g = common.Golden("tokens", "int64", "token ids + mask of Flux2KleinPipeline._get_qwen3_prompt_embeds "
                      "(chat template, enable_thinking=False, padding max_length 512, truncation)")
    g.add("input_ids", ids)
    g.add("attention_mask", mask)
    g.set("prompts", json.dumps(PROMPTS, ensure_ascii=False))
    g.save()
    print("golden: tokens (%d prompts, real lengths %s)" % (len(PROMPTS), mask.sum(1).tolist()))


def sec_qwen3():
    res = {}
    for dt in ORDER:
        feats, ids, mask, hs = _encode(runs.text_encoder(dt), BATCH3)
        r = {"input_ids": ids, "attention_mask": mask, "features": feats}
        for k in (1, 9, 18, 27):  # 1 = after the first layer, for bisecting
            r["hidden_%d" % k] = hs[k]
        res[dt] = r
    save_pair("qwen3", "Qwen3ForCausalLM hidden_states[k] (k = output of k decoder layers, no final "
              "norm) and the 3 x hidden features [h9|h18|h27] from Flux2KleinPipeline._get_qwen3_prompt_embeds",
              res, extra={"prompts": json.dumps(BATCH3, ensure_ascii=False)}, inputs=("input_ids", "attention_mask"))


def _dit_inputs():
    from diffusers import Flux2KleinPipeline

    g = torch.Generator().manual_seed(101)
    h, w = 3, 5  # a 48x80 image: non-square so a row/column swap fails
    x = bf16_exact(torch.randn(1, 128, h, w, generator=g))
    img = Flux2KleinPipeline._pack_latents(x)
    feats, _, _, _ = _encode(runs.text_encoder("f32"), [PROMPTS[2]])
    ctx = bf16_exact(feats)
    return {
        "img_tokens": img,
        "txt_features": ctx,
        "timestep": torch.tensor([0.7236]),
        "img_ids": Flux2KleinPipeline._prepare_latent_ids(x),
        "txt_ids": Flux2KleinPipeline._prepare_text_ids(ctx),
    }


def sec_dit():
    inp = _dit_inputs()
    res = {}
    for dt in ORDER:
        m = runs.dit(dt)
        t = runs.DTYPES[dt]
        rec = Recorder()
        for name in ("time_guidance_embed", "x_embedder", "context_embedder", "double_stream_modulation_img",
                     "double_stream_modulation_txt", "single_stream_modulation", "norm_out"):
            rec.watch(name, getattr(m, name))
        for i, b in enumerate(m.transformer_blocks):
            rec.watch("double.%d" % i, b)
        for i, b in enumerate(m.single_transformer_blocks):
            rec.watch("single.%d" % i, b)
        with torch.no_grad():
            out = m(hidden_states=inp["img_tokens"].to(t), encoder_hidden_states=inp["txt_features"].to(t),
                    timestep=inp["timestep"].to(t), img_ids=inp["img_ids"], txt_ids=inp["txt_ids"],
                    return_dict=False)[0]
        rec.close()
        r = dict(inp)
        r["output"] = out
        c = rec.calls
        r["dbg.temb"] = c["time_guidance_embed"][0]
        r["dbg.img_in"] = c["x_embedder"][0]
        r["dbg.txt_in"] = c["context_embedder"][0]
        r["dbg.mod_img"] = c["double_stream_modulation_img"][0]
        r["dbg.mod_txt"] = c["double_stream_modulation_txt"][0]
        r["dbg.mod_single"] = c["single_stream_modulation"][0]
        for i in range(len(m.transformer_blocks)):
            txt, img = c["double.%d" % i][0]
            r["dbg.double.%d.txt" % i], r["dbg.double.%d.img" % i] = txt, img
        for i in range(len(m.single_transformer_blocks)):
            r["dbg.single.%d" % i] = c["single.%d" % i][0]
        r["dbg.norm_out"] = c["norm_out"][0]
        res[dt] = r
    save_pair("dit", "one Flux2Transformer2DModel forward (timestep passed as sigma, like the pipeline's "
              "timestep/1000); dbg.* = outputs of the named submodules, in call order", res,
              inputs=("img_tokens", "txt_features", "timestep", "img_ids", "txt_ids"))


def sec_vae():
    g = torch.Generator().manual_seed(202)
    z = bf16_exact(torch.randn(1, 32, 6, 10, generator=g))
    img = bf16_exact(torch.rand(1, 3, 48, 80, generator=g) * 2 - 1)
    res = {}
    for dt in ORDER:
        m = runs.vae(dt)
        t = runs.DTYPES[dt]
        rec = Recorder()
        rec.watch("post_quant_conv", m.post_quant_conv)
        rec.watch("conv_in", m.decoder.conv_in)
        rec.watch("mid", m.decoder.mid_block)
        for i, b in enumerate(m.decoder.up_blocks):
            rec.watch("up.%d" % i, b)
        with torch.no_grad():
            out = m.decode(z.to(t), return_dict=False)[0]
            rec.close()
            mean = m.encode(img.to(t)).latent_dist.mode()
        r = {"decode.latent": z, "decode.image": out, "encode.image": img, "encode.mean": mean}
        r["dbg.decode.post_quant_conv"] = rec.calls["post_quant_conv"][0]
        r["dbg.decode.conv_in"] = rec.calls["conv_in"][0]
        r["dbg.decode.mid_block"] = rec.calls["mid"][0]
        for i in range(2):  # the last two levels are large; decode.image covers them
            r["dbg.decode.up_blocks.%d" % i] = rec.calls["up.%d" % i][0]
        res[dt] = r
    save_pair("vae", "AutoencoderKLFlux2.decode(z) (z un-normalised, unpatchified, [B,32,H/8,W/8]) -> image in "
              "[-1,1]; encode(image).latent_dist.mode() (the pipeline's argmax); dbg.* = submodule outputs", res,
              inputs=("decode.latent", "encode.image"))


def sec_vae_tiled():
    """AutoencoderKLFlux2.tiled_decode with 8-latent (64-pixel) tiles on a 19x26 latent: 4x5 tiles, the last row
    one latent pixel high (8 px, less than the 16-px blend) and the last column two wide."""
    g = torch.Generator().manual_seed(203)
    z = bf16_exact(torch.randn(1, 32, 19, 26, generator=g))
    res = {}
    for dt in ORDER:
        m = runs.vae(dt)
        m.enable_tiling()
        m.tile_latent_min_size = 8
        m.tile_sample_min_size = 64
        with torch.no_grad():
            out = m.decode(z.to(runs.DTYPES[dt]), return_dict=False)[0]
        res[dt] = {"decode.latent": z, "decode.image": out}
    save_pair("vae_tiled", "AutoencoderKLFlux2.decode(z) with enable_tiling(), tile_latent_min_size 8, "
              "tile_sample_min_size 64 (overlap 0.25): the official tiled decode", res, inputs=("decode.latent",))


SCHEDULES = [(64, 64, 2), (256, 256, 4), (512, 512, 4), (1024, 1024, 4), (768, 1360, 4), (1024, 1024, 50),
             (48, 80, 4), (64, 64, 4), (2048, 2048, 4), (1024, 1024, 1)]


def sec_schedule():
    from diffusers.pipelines.flux2.pipeline_flux2_klein import compute_empirical_mu, retrieve_timesteps

    g = common.Golden("schedule", "f32", "sigmas/timesteps of FlowMatchEulerDiscreteScheduler.set_timesteps as "
                      "Flux2KleinPipeline calls it (linspace(1,1/n,n) sigmas, mu = compute_empirical_mu(N, n))")
    for h, w, n in SCHEDULES:
        sched = runs.pipeline("f32").scheduler
        N = (h // 16) * (w // 16)
        mu = compute_empirical_mu(image_seq_len=N, num_steps=n)
        sig = np.linspace(1.0, 1 / n, n)
        ts, _ = retrieve_timesteps(sched, n, "cpu", sigmas=sig, mu=mu)
        key = "%dx%d.%d" % (h, w, n)
        g.add("sigmas." + key, sched.sigmas, tol=(2e-6, 0))
        g.add("timesteps." + key, ts, tol=(2e-3, 0))
        g.add("mu." + key, torch.tensor([mu], dtype=torch.float64), tol=(1e-6, 0))
        g.set("mu_exact." + key, repr(mu))
        g.set("tokens." + key, N)
    g.set("sizes", json.dumps(["%dx%d.%d" % s for s in SCHEDULES]))
    g.save()
    print("golden: schedule (%d cases)" % len(SCHEDULES))


def _run_pipeline(dt, prompts, h, w, steps, noise, base=False, guidance=1.0):
    pipe = runs.pipeline(dt, base=base)
    t = runs.DTYPES[dt]
    out = {}
    rec = Recorder()
    rec.watch("dit", pipe.transformer, with_inputs=True)
    lat_steps = []

    def cb(p, i, ts, kw):
        lat_steps.append(kw["latents"].clone())
        return {}

    common_args = dict(prompt=prompts, height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
                       latents=noise.to(t))
    with torch.no_grad():
        lat = pipe(**common_args, output_type="latent", callback_on_step_end=cb,
                   callback_on_step_end_tensor_inputs=["latents"]).images
        rec.close()
        npimg = pipe(**common_args, output_type="np").images
        pil = pipe(**common_args, output_type="pil").images
    out["noise"] = noise
    out["sigmas"] = pipe.scheduler.sigmas.clone()
    calls = rec.calls["dit"]
    per_step = 2 if (base and guidance > 1) else 1
    for k in range(steps):
        args, kwargs, o = calls[k * per_step]
        if k == 0:
            out["features"] = kwargs["encoder_hidden_states"]
        out["step%d.timestep" % k] = kwargs["timestep"]
        out["step%d.velocity" % k] = o[0]
        if per_step == 2:
            out["step%d.velocity_uncond" % k] = calls[k * per_step + 1][2][0]
            if k == 0:
                out["negative_features"] = calls[1][1]["encoder_hidden_states"]
        out["step%d.latents" % k] = lat_steps[k]
    out["latent"] = lat
    out["image_float"] = torch.from_numpy(np.ascontiguousarray(npimg))
    out["image_u8"] = torch.from_numpy(np.stack([np.asarray(im) for im in pil]))
    return out


def _pipeline_golden(name, desc, prompts, h, w, steps, seed, base=False, guidance=1.0):
    g = torch.Generator().manual_seed(seed)
    noise = bf16_exact(torch.randn(len(prompts), 128, h // 16, w // 16, generator=g))
    res = {dt: _run_pipeline(dt, prompts, h, w, steps, noise, base, guidance) for dt in ORDER}
    uint8_tol(res, "image_u8")
    u8 = res.pop("_u8")
    save_pair(name, desc, res, extra={"prompts": json.dumps(prompts, ensure_ascii=False), "height": h, "width": w,
                                      "steps": steps, "guidance_scale": guidance, "is_distilled": not base},
              inputs=("noise",))
    patch_u8_tol(name, u8)  # uint8 image tolerance (grey levels) into the metadata save_pair wrote


def sec_pipeline():
    _pipeline_golden("pipeline_b1", "Flux2KleinPipeline (distilled) 4 steps, batch 1, 48x80, injected noise "
                     "latents=[B,128,H/16,W/16]; step<k>.velocity = DiT output, step<k>.latents = after the Euler "
                     "update (tokens [B,N,128]); latent = output_type latent; image_float = np; image_u8 = pil",
                     [PROMPTS[2]], 48, 80, 4, 303)
    _pipeline_golden("pipeline_b3", "as pipeline_b1, batch 3 (three prompts), 64x64", BATCH3, 64, 64, 4, 304)


def sec_cfg():
    _pipeline_golden("cfg_base", "Flux2KleinPipeline klein base (is_distilled false), guidance 4.0, empty "
                     "negative prompt, 2 steps, 48x80; step<k>.velocity = conditional DiT output, "
                     "step<k>.velocity_uncond = unconditional, step<k>.latents after the CFG Euler update",
                     [PROMPTS[2]], 48, 80, 2, 305, base=True, guidance=4.0)


def sec_noise():
    """What the pipeline draws when given generator=torch.Generator("cpu").manual_seed(seed) instead of
    latents: diffusers' randn_tensor on the CPU generator (mt19937), in the prompt-embeds dtype. Exact bits:
    lets kiln reproduce diffusers' seeds if it implements torch's CPU normal sampler (spec 4.3)."""
    from diffusers.utils.torch_utils import randn_tensor

    g = common.Golden("noise", "f32+bf16", "diffusers randn_tensor(shape, generator=torch.Generator('cpu')"
                      ".manual_seed(seed), dtype) as Flux2KleinPipeline.prepare_latents draws it; "
                      "noise.<dtype>.s<seed>.<B>x128x<h>x<w>")
    for seed in (0, 42, 2026):
        for shape in ((1, 128, 3, 5), (1, 128, 4, 4), (3, 128, 4, 4), (1, 128, 8, 8)):
            for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
                gen = torch.Generator("cpu").manual_seed(seed)
                t = randn_tensor(shape, generator=gen, device=torch.device("cpu"), dtype=dt)
                g.add("noise.%s.s%d.%s" % (name, seed, "x".join(map(str, shape))), t, tol=(0, 0))
    g.save()
    print("golden: noise")


SECTIONS = {"tokens": sec_tokens, "noise": sec_noise, "qwen3": sec_qwen3, "dit": sec_dit, "vae": sec_vae, "vae_tiled": sec_vae_tiled, "schedule": sec_schedule,
            "pipeline": sec_pipeline, "cfg": sec_cfg, "variants": variants.make_goldens}

if __name__ == "__main__":
    common.deterministic()
    for s in sys.argv[1:] or list(SECTIONS):
        SECTIONS[s]()
