"""Prove the goldens can fail: plant known implementation mistakes in the OFFICIAL models and measure how far
outside the fp32 tolerance each lands (ratio = max|mutant - golden| / atol; a test fails when ratio > 1).

The mistakes are the classic ones (spec pitfalls): wrong final-layer (shift, scale) order, q/k/v split
order, RoPE theta, timestep scale, hidden-state layer off by one, norm eps, a dropped 1x1 conv. Mutations act
on weights, configs or inputs only; no FLUX.2 maths is re-implemented. Prints one line per mutation.
"""
import copy

import common
import torch
from safetensors import safe_open

import runs


def golden(name):
    with safe_open("%s/%s.safetensors" % (common.GOLDEN, name), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def ratio(out, ref, meta, key):
    atol = float(meta["tol." + key].split(",")[0])
    return float((out.double() - ref[key].double()).abs().max()) / atol


def dit_cases():
    ref, meta = golden("dit_f32")
    base = runs.dit("f32")

    def run(m, **over):
        a = dict(hidden_states=ref["img_tokens"], encoder_hidden_states=ref["txt_features"],
                 timestep=ref["timestep"], img_ids=ref["img_ids"], txt_ids=ref["txt_ids"], return_dict=False)
        a.update(over)
        with torch.no_grad():
            return m(**a)[0]

    yield "dit: unmodified official model (must be ~0)", ratio(run(base), ref, meta, "output")
    m = copy.deepcopy(base)
    with torch.no_grad():
        w = m.norm_out.linear.weight
        w.copy_(torch.cat(w.chunk(2, 0)[::-1]))
    yield "dit: final layer shift/scale halves not swapped", ratio(run(m), ref, meta, "output")
    m = copy.deepcopy(base)
    with torch.no_grad():
        a = m.transformer_blocks[0].attn
        q, k = a.to_q.weight.clone(), a.to_k.weight.clone()
        a.to_q.weight.copy_(k)
        a.to_k.weight.copy_(q)
    yield "dit: fused qkv split as (k, q, v) in double block 0", ratio(run(m), ref, meta, "output")
    m = copy.deepcopy(base)
    m.pos_embed.theta = 10000
    yield "dit: RoPE theta 10000 instead of 2000", ratio(run(m), ref, meta, "output")
    yield "dit: timestep fed as 1000*sigma (double scaling)", ratio(run(base, timestep=ref["timestep"] * 1000), ref,
                                                                   meta, "output")
    ids = ref["img_ids"].clone()
    ids[..., [1, 2]] = ids[..., [2, 1]]
    yield "dit: image ids (row, col) swapped", ratio(run(base, img_ids=ids), ref, meta, "output")
    m = copy.deepcopy(base)
    for blk in m.transformer_blocks:
        blk.norm1.eps = 1e-5
    yield "dit: double-block img LayerNorm eps 1e-5 instead of 1e-6", ratio(run(m), ref, meta, "output")


def qwen_cases():
    from diffusers import Flux2KleinPipeline

    ref, meta = golden("qwen3_f32")
    prompts = __import__("json").loads(meta["prompts"])
    te = runs.text_encoder("f32")

    def feats(model, layers=(9, 18, 27)):
        with torch.no_grad():
            return Flux2KleinPipeline._get_qwen3_prompt_embeds(model, runs.tokenizer(), prompts,
                                                              hidden_states_layers=layers)

    yield "qwen3: unmodified official model (must be ~0)", ratio(feats(te), ref, meta, "features")
    yield "qwen3: hidden states 8/17/26 (off by one)", ratio(feats(te, (8, 17, 26)), ref, meta, "features")
    m = copy.deepcopy(te)
    for layer in m.model.layers:
        layer.input_layernorm.variance_epsilon = 1e-5
    yield "qwen3: input RMSNorm eps 1e-5 instead of 1e-6", ratio(feats(m), ref, meta, "features")
    m = copy.deepcopy(te)
    with torch.no_grad():
        for layer in m.model.layers:
            layer.self_attn.k_norm.weight.fill_(1.0)
    yield "qwen3: k_norm gain ignored", ratio(feats(m), ref, meta, "features")


def vae_cases():
    ref, meta = golden("vae_f32")
    v = runs.vae("f32")

    def dec(m):
        with torch.no_grad():
            return m.decode(ref["decode.latent"], return_dict=False)[0]

    yield "vae: unmodified official model (must be ~0)", ratio(dec(v), ref, meta, "decode.image")
    m = copy.deepcopy(v)
    with torch.no_grad():
        m.post_quant_conv.weight.copy_(torch.eye(32).reshape(32, 32, 1, 1))
        m.post_quant_conv.bias.zero_()
    yield "vae: post_quant_conv skipped", ratio(dec(m), ref, meta, "decode.image")
    m = copy.deepcopy(v)
    for mod in m.decoder.modules():
        if isinstance(mod, torch.nn.GroupNorm):
            mod.eps = 1e-4
    yield "vae: GroupNorm eps 1e-4 (the BN eps) instead of 1e-6", ratio(dec(m), ref, meta, "decode.image")


if __name__ == "__main__":
    common.deterministic()
    for cases in (dit_cases, qwen_cases, vae_cases):
        for name, r in cases():
            print("%-60s max|diff|/atol = %.3g  %s" % (name, r, "FAILS (caught)" if r > 1 else "passes"))
