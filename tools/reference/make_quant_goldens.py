"""Quantised tiny FLUX.2 [klein] DiTs and the official pipeline's images on their dequantised weights.

For each format below the oracle quantises the tiny DiT (tests/data/tiny/diffusers/transformer, in BFL names as
the files in circulation use them) and writes the file kiln loads (tests/data/quant/); it then dequantises those
bytes itself (GGUF: gguf.quants.dequantize; fp8: the fp8 value as float32 times its float32 scale, as ComfyUI
dequantises), maps the values back onto the diffusers Flux2Transformer2DModel and runs Flux2KleinPipeline in
float32 with the committed tiny text encoder and VAE. kiln must reach the same image (>= 60 dB, --exact) from
the quantised file: tests/unit/test_pipeline_quant.c.

  q8_0    GGUF, every 2-D weight Q8_0 (gguf.quants.quantize); 1-D tensors F32
  q4_k    GGUF, Q4_K where a row is whole 256-value super-blocks, else Q8_0 (the fallback llama.cpp and kiln
          convert use); quantised here (the gguf package has no K quantiser): per 32 values a 6-bit scale and min
          from the range, packed as GGML's Q4_K layout - gguf's dequantize of the bytes is the reference, and the
          script checks it against the source within one step
  q6_k    GGUF, Q6_K likewise (per 16 values an int8 scale; 6-bit values)
  fp8_bfl     safetensors, BFL/ComfyUI comfy-quant layout: e4m3fn weight, float32 weight_scale (absmax / 448),
              input_scale, _quantization_metadata naming the layers
  fp8_scaled  safetensors, ComfyUI scaled-fp8: the scaled_fp8 marker and float32 scale_weight
Goldens (tests/data/golden/quant_<fmt>_f32.safetensors): noise (input), image_u8 (the official image on the
dequantised weights) and image_u8_bf16 (the official image on the unquantised weights, for the quality table in
docs/benchmarks.md). The tiny model's dims are not multiples of 256 in most layers, so the K types cover only
the layers whose rows are (listed in each golden's metadata).

Run: /opt/kiln-ref/bin/python tools/reference/make_quant_goldens.py   (regenerate.sh runs it)
"""
import copy
import json
import os

import numpy as np
import torch

import common
import layouts
import runs
import gguf
from gguf import GGMLQuantizationType as T

QDIR = os.path.join(common.DATA, "quant")
PROMPT = "a red fox in fresh snow"
H, W, STEPS, SEED = 48, 64, 3, 2112


def f16(a):
    return np.asarray(a, dtype=np.float32).astype(np.float16)


def q4_k(x):
    """x [rows, K] float32, K % 256 == 0 -> Q4_K blocks [rows, K/256*144] uint8."""
    b = x.reshape(-1, 8, 32).astype(np.float32)
    lo, hi = np.minimum(b.min(-1), 0), b.max(-1)
    sc, mn = (hi - lo) / 15.0, -lo  # x = d*sc*q - dmin*m
    d = f16(sc.max(-1) / 63.0).astype(np.float32)
    dm = f16(mn.max(-1) / 63.0).astype(np.float32)
    sq = np.clip(np.rint(np.divide(sc, d[:, None], out=np.zeros_like(sc), where=d[:, None] > 0)), 0, 63).astype(np.uint8)
    mq = np.clip(np.rint(np.divide(mn, dm[:, None], out=np.zeros_like(mn), where=dm[:, None] > 0)), 0, 63).astype(np.uint8)
    step = d[:, None] * sq
    q = np.divide(b + (dm[:, None] * mq)[..., None], step[..., None], out=np.zeros_like(b), where=step[..., None] > 0)
    q = np.clip(np.rint(q), 0, 15).astype(np.uint8)
    n = b.shape[0]
    out = np.zeros((n, 144), np.uint8)
    out[:, 0:2] = f16(d).view(np.uint8).reshape(n, 2)
    out[:, 2:4] = f16(dm).view(np.uint8).reshape(n, 2)
    s = np.zeros((n, 12), np.uint8)
    for j in range(4):
        s[:, j] = (sq[:, j] & 63) | ((sq[:, j + 4] >> 4) << 6)
        s[:, j + 4] = (mq[:, j] & 63) | ((mq[:, j + 4] >> 4) << 6)
        s[:, j + 8] = (sq[:, j + 4] & 15) | ((mq[:, j + 4] & 15) << 4)
    out[:, 4:16] = s
    qq = q.reshape(n, 4, 2, 32)  # 64 values per 32 bytes: low nibble the first 32, high the next 32
    out[:, 16:] = (qq[:, :, 0, :] | (qq[:, :, 1, :] << 4)).reshape(n, 128)
    return out.reshape(x.shape[0], -1)


def q6_k(x):
    """x [rows, K] float32, K % 256 == 0 -> Q6_K blocks [rows, K/256*210] uint8."""
    b = x.reshape(-1, 16, 16).astype(np.float32)
    amax = np.abs(b).max(-1)
    sf = amax / 31.0
    d = f16(sf.max(-1) / 127.0).astype(np.float32)
    sc = np.clip(np.rint(np.divide(sf, d[:, None], out=np.zeros_like(sf), where=d[:, None] > 0)), -128, 127).astype(np.int8)
    step = d[:, None] * sc.astype(np.float32)
    q = np.divide(b, step[..., None], out=np.zeros_like(b), where=step[..., None] > 0)
    q = (np.clip(np.rint(q), -32, 31) + 32).astype(np.uint8).reshape(-1, 256)
    n = q.shape[0]
    ql, qh = np.zeros((n, 128), np.uint8), np.zeros((n, 64), np.uint8)
    for h in range(2):
        v = q[:, 128 * h:128 * h + 128]
        a, bb, c, e = v[:, 0:32], v[:, 32:64], v[:, 64:96], v[:, 96:128]
        ql[:, 64 * h:64 * h + 32] = (a & 15) | ((c & 15) << 4)
        ql[:, 64 * h + 32:64 * h + 64] = (bb & 15) | ((e & 15) << 4)
        qh[:, 32 * h:32 * h + 32] = (a >> 4) | ((bb >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
    out = np.concatenate([ql, qh, sc.view(np.uint8), f16(d).view(np.uint8).reshape(n, 2)], axis=1)
    return out.reshape(x.shape[0], -1)


def choose(name, x, want):
    """The GGML type a 2-D weight gets (want, or the fallback when its rows are not whole blocks)."""
    if x.ndim != 2 or not name.endswith(".weight"):
        return T.F32
    k = x.shape[1]
    if want in (T.Q4_K, T.Q6_K) and k % 256 == 0:
        return want
    return T.Q8_0 if k % 32 == 0 else T.F32


def gguf_file(fmt, bfl, want, prefix="klein", arch="flux2"):
    """Writes tests/data/quant/<prefix>-<fmt>.gguf; returns the dequantised weights and the type counts."""
    path = os.path.join(QDIR, "%s-%s.gguf" % (prefix, fmt))
    w = gguf.GGUFWriter(path, arch)
    deq, types = {}, {}
    for name in sorted(bfl):
        x = bfl[name].float().numpy()
        qt = choose(name, x, want)
        types[qt.name] = types.get(qt.name, 0) + 1
        if qt == T.F32:
            w.add_tensor(name, x)
            deq[name] = torch.from_numpy(x.copy())
            continue
        q = gguf.quants.quantize(x, qt) if qt == T.Q8_0 else (q4_k(x) if qt == T.Q4_K else q6_k(x))
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
        back = gguf.quants.dequantize(q, qt).reshape(x.shape)
        # the packing is GGML's: the package's dequantisation of these bytes lands within a step of the source
        assert np.abs(back - x).max() <= np.abs(x).max() / (6 if qt == T.Q4_K else 20) + 1e-6, (name, qt)
        deq[name] = torch.from_numpy(np.ascontiguousarray(back, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return deq, types


def fp8_file(fmt, bfl, prefix="klein"):
    """Writes tests/data/quant/<prefix>-<fmt>.safetensors; returns the dequantised weights and the type counts."""
    out, deq, layers = {}, {}, {}
    for name in sorted(bfl):
        v = bfl[name].float()
        if v.ndim != 2 or not name.endswith(".weight"):
            out[name] = v.to(torch.bfloat16)  # kept as the source stores it
            deq[name] = out[name].float()
            continue
        stem = name[: -len(".weight")]
        scale = (v.abs().max() / 448.0).reshape(()).to(torch.float32)
        w8 = (v / scale).to(torch.float8_e4m3fn)
        out[name] = w8
        if fmt == "fp8_bfl":
            out[stem + ".weight_scale"] = scale
            out[stem + ".input_scale"] = torch.tensor(1.0, dtype=torch.float32)
            layers[stem] = {"format": "float8_e4m3fn"}
        else:
            out[stem + ".scale_weight"] = scale
        deq[name] = w8.to(torch.float32) * scale
    meta = None
    if fmt == "fp8_bfl":
        meta = {"_quantization_metadata": json.dumps({"format_version": "1.0", "layers": layers}, sort_keys=True)}
    else:
        out["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    common.save_safetensors(out, os.path.join(QDIR, "%s-%s.safetensors" % (prefix, fmt)), meta)
    return deq, {"e4m3": len([k for k in out if out[k].dtype == torch.float8_e4m3fn and out[k].numel()])}


class Unmapper:
    """Maps dequantised BFL-named weights back onto the diffusers model they came from: the layout conversion
    (to_bfl, which fuses and reorders) is run once on element ids (exact in float64), so every BFL element knows
    its diffusers source."""

    def __init__(self, base, to_bfl):
        self.base = base
        self.sd = {k: v.detach().clone() for k, v in base.state_dict().items()}
        self.ids, self.n = {}, 0
        for k in sorted(self.sd):
            c = self.sd[k].numel()
            self.ids[k] = torch.arange(self.n, self.n + c, dtype=torch.float64).reshape(self.sd[k].shape)
            self.n += c
        self.bfl = to_bfl(self.sd)
        self.src = to_bfl(self.ids)

    def model(self, deq):
        """A copy of the base model holding the dequantised values deq (BFL names -> float32 tensors)."""
        flat = torch.full((self.n,), float("nan"), dtype=torch.float32)
        for k, v in deq.items():
            flat[self.src[k].long().flatten()] = v.flatten()
        assert not torch.isnan(flat).any()
        m = copy.deepcopy(self.base)
        m.load_state_dict({k: flat[self.ids[k].long()].reshape(self.sd[k].shape) for k in self.sd})
        return m.eval()


def run(dit):
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline

    sched = FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(runs.DIF, "scheduler"))
    pipe = Flux2KleinPipeline(scheduler=sched, vae=runs.vae("f32"), text_encoder=runs.text_encoder("f32"),
                              tokenizer=runs.tokenizer(), transformer=dit, is_distilled=True)
    pipe.set_progress_bar_config(disable=True)
    g = torch.Generator().manual_seed(SEED)
    noise = runs.bf16_exact(torch.randn(1, 128, H // 16, W // 16, generator=g))
    with torch.no_grad():
        pil = pipe(prompt=[PROMPT], height=H, width=W, num_inference_steps=STEPS, guidance_scale=1.0,
                   latents=noise, output_type="pil").images
    return noise, torch.from_numpy(np.stack([np.asarray(im) for im in pil]))


def main():
    common.deterministic()
    os.makedirs(QDIR, exist_ok=True)
    base = runs.dit("f32")
    back = Unmapper(base, layouts.dit_diffusers_to_bfl)
    noise, ref_img = run(base)
    formats = [("q8_0", T.Q8_0), ("q4_k", T.Q4_K), ("q6_k", T.Q6_K), ("fp8_bfl", None), ("fp8_scaled", None)]
    for fmt, qt in formats:
        deq, types = gguf_file(fmt, back.bfl, qt) if qt is not None else fp8_file(fmt, back.bfl)
        _, img = run(back.model(deq))
        g = common.Golden("quant_%s_f32" % fmt, "f32", "Flux2KleinPipeline (distilled, f32) on the tiny DiT "
                          "dequantised from tests/data/quant/klein-%s.*; image_u8_bf16: on the unquantised DiT" % fmt)
        g.add("noise", noise, tol=(0, 0))
        g.add("image_u8", img)
        g.add("image_u8_bf16", ref_img)
        g.set("prompts", json.dumps([PROMPT]))
        g.set("height", H)
        g.set("width", W)
        g.set("steps", STEPS)
        g.set("guidance_scale", 1.0)
        g.set("types", json.dumps(types, sort_keys=True))
        g.set("file", "tests/data/quant/klein-%s.%s" % (fmt, "gguf" if qt is not None else "safetensors"))
        g.save()
        print("golden: quant_%s_f32 (%s)" % (fmt, types))


if __name__ == "__main__":
    main()
