#!/usr/bin/env python3
"""The tiny T5 v1.1 encoder (FLUX.1's text_encoder_2) and its golden, with transformers' T5EncoderModel as oracle.

    /opt/kiln-ref/bin/python tools/reference/make_t5_golden.py

Writes tests/data/tiny/t5_encoder/{config.json, model.safetensors} (bf16-exact random weights in bf16, the names
of a FLUX.1 diffusers folder's text_encoder_2/) and tests/data/golden/t5_encoder_f32.safetensors: the FluxPipeline
T5 ids of three prompts (real T5 tokenizer, max_sequence_length 77 here: 256/512 in FLUX.1, the long prompt
truncated, pad 0, no attention mask passed, as FluxPipeline calls it), T5EncoderModel's last_hidden_state run in
fp32 with the tolerance from the fp32-vs-fp64 spread (make_goldens.tol32), and the relative-position bucket of
every relative position -600..600 for the REAL config (32 buckets, max distance 128) and the tiny one.

Tiny config vs the real T5-XXL encoder: d_model 40 (4096), 3 heads x d_kv 12 (64 x 64; inner 36 != d_model),
d_ff 72 (10240), 3 layers (24), 16 buckets (32), max distance 20 (128, so 77 tokens reach the clipped buckets),
eps 2e-6 (1e-6); vocab 32128 as real (the tokenizer's ids reach 32099); gated-gelu (gelu_new) as real.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import make_goldens  # noqa: E402

SEED = 20261202
CONFIG = dict(vocab_size=32128, d_model=40, d_kv=12, d_ff=72, num_layers=3, num_heads=3,
              relative_attention_num_buckets=16, relative_attention_max_distance=20, layer_norm_epsilon=2e-6,
              feed_forward_proj="gated-gelu", dropout_rate=0.0, is_encoder_decoder=False, use_cache=False,
              tie_word_embeddings=False)
PROMPTS = ["a cat", "A photo of a red fox in fresh snow, golden hour, 35mm film grain, \u6771\u4eac",
           " ".join(["a very long prompt about mountains rivers and clouds"] * 12)]
SEQ = 77
TINY = os.path.join(common.TINY, "t5_encoder")


def model(dt):
    from transformers import T5Config, T5EncoderModel
    cfg = T5Config(**CONFIG)
    torch.manual_seed(SEED)
    m = T5EncoderModel(cfg)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if "layer_norm" in name:
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif "relative_attention_bias" in name or "shared" in name or "embed" in name:
                v = torch.randn(p.shape, generator=g)
            else:
                v = torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).to(torch.float32))
    m.eval()
    return m.to({"f64": torch.float64, "f32": torch.float32}[dt]), cfg


def buckets(nb, md):
    from transformers.models.t5.modeling_t5 import T5Attention
    rp = torch.arange(-600, 601, dtype=torch.long)
    return T5Attention._relative_position_bucket(rp, bidirectional=True, num_buckets=nb, max_distance=md)


def main():
    common.deterministic()
    from transformers import T5TokenizerFast
    tok = T5TokenizerFast.from_pretrained(os.path.join(common.REPO, "data", "tokenizer", "t5"))
    ids = tok(PROMPTS, padding="max_length", max_length=SEQ, truncation=True, return_tensors="pt").input_ids
    assert ids[2, -1] == 1 and (ids[2] == 0).sum() == 0, "prompt 3 must be truncated"
    res = {}
    for dt in ("f64", "f32"):
        m, cfg = model(dt)
        with torch.no_grad():
            out = m(ids).last_hidden_state
        res[dt] = {"input_ids": ids, "last_hidden": out}
        if dt == "f32":
            sd = {k: v.to(torch.bfloat16).contiguous() for k, v in m.state_dict().items()
                  if k != "encoder.embed_tokens.weight"}  # tied to shared.weight; FLUX.1 files store shared only
            common.save_safetensors(sd, os.path.join(TINY, "model.safetensors"), {"format": "pt"})
            c = cfg.to_dict()
            c = {k: c[k] for k in sorted(c) if k in CONFIG or k in ("dense_act_fn", "is_gated_act", "model_type")}
            c["architectures"] = ["T5EncoderModel"]
            common.write_json(os.path.join(TINY, "config.json"), c)
    from transformers import T5EncoderModel
    back = T5EncoderModel.from_pretrained(TINY, dtype=torch.float32).eval()
    with torch.no_grad():
        assert torch.equal(back(ids).last_hidden_state, res["f32"]["last_hidden"]), "reloaded tiny model differs"
    g = common.Golden("t5_encoder_f32", "f32", "T5EncoderModel (tiny, tests/data/tiny/t5_encoder) "
                      "last_hidden_state for FluxPipeline's T5 ids (no attention mask); relative-position buckets "
                      "of positions -600..600 for the real (32, 128) and tiny (16, 20) configs")
    g.add("input_ids", ids)
    tol, s = make_goldens.tol32(res["f32"]["last_hidden"], res["f64"]["last_hidden"])
    g.add("last_hidden", res["f32"]["last_hidden"], tol=tol, spread=s)
    g.add("buckets_real", buckets(32, 128))
    g.add("buckets_tiny", buckets(16, 20))
    print("golden:", g.save())


if __name__ == "__main__":
    main()
