#!/usr/bin/env python3
"""The tiny CLIP-L text model (FLUX.1's text_encoder) and its goldens, with transformers' CLIPTextModel as oracle.

    /opt/kiln-ref/bin/python tools/reference/make_clip_golden.py

Writes tests/data/tiny/clip_text/{config.json, model.safetensors} (bf16-exact random weights in bf16, HF names as
in a FLUX.1 diffusers folder's text_encoder/) and tests/data/golden/clip_text_f32.safetensors: the FluxPipeline
input ids of three prompts (real CLIP tokenizer: 77 tokens, BOS/EOS, padded with <|endoftext|>, the third one
truncated) and CLIPTextModel's last_hidden_state (after final_layer_norm) and pooler_output (the EOS row, which
FluxPipeline feeds the DiT), run in fp32; tolerances from the fp32-vs-fp64 spread (make_goldens.tol32). A second
config (eos_token_id 49407 instead of the legacy 2) pools at the first <|endoftext|> rather than the argmax; its
pooled output is stored as pooled_eos_first (and the legacy rule's on the same ids as pooled_odd_argmax).

Tiny config vs the real one (openai/clip-vit-large-patch14 text): hidden 40 (768), 3 layers (12), 5 heads x 8
(12 x 64), FFN 88 (3072), 80 positions (77), eps 2e-5 (1e-5); vocab 49408 as real, because the tokenizer's ids
reach 49407. No two different matrices are square.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import make_goldens  # noqa: E402

SEED = 20261201
CONFIG = dict(vocab_size=49408, hidden_size=40, intermediate_size=88, num_hidden_layers=3, num_attention_heads=5,
              max_position_embeddings=80, hidden_act="quick_gelu", layer_norm_eps=2e-5, attention_dropout=0.0,
              bos_token_id=0, eos_token_id=2, pad_token_id=1, projection_dim=24)
PROMPTS = ["a cat", "A photo of a red fox in fresh snow, golden hour, 35mm film grain",
           " ".join(["a very long prompt about mountains rivers and clouds"] * 12)]
TINY = os.path.join(common.TINY, "clip_text")


def model(dt, eos=2):
    from transformers import CLIPTextConfig, CLIPTextModel
    cfg = CLIPTextConfig(**dict(CONFIG, eos_token_id=eos))
    torch.manual_seed(SEED)
    m = CLIPTextModel(cfg)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if "layer_norm" in name and name.endswith("weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif "embedding" in name:
                v = 0.5 * torch.randn(p.shape, generator=g)
            else:
                v = torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).to(torch.float32))
    m.eval()
    return m.to({"f64": torch.float64, "f32": torch.float32}[dt]), cfg


def main():
    common.deterministic()
    from transformers import CLIPTokenizer
    tok = CLIPTokenizer.from_pretrained(os.path.join(common.REPO, "data", "tokenizer", "clip-l"))
    ids = tok(PROMPTS, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    assert ids[2, -1] == 49407 and (ids[2] == 49407).sum() == 1, "prompt 3 must be truncated"
    # every <|endoftext|> replaced by id 7: the legacy rule (eos_token_id 2) pools at the argmax, i.e. at BOS
    # (49406, position 0); eos_token_id 7 pools at the first 7, where EOS was: the two rules differ
    odd = ids.clone()
    odd[odd == 49407] = 7
    assert not (ids == 7).any()
    res = {}
    for dt in ("f64", "f32"):
        m, cfg = model(dt)
        with torch.no_grad():
            out = m(ids)
            out_odd = m(odd)
        m2, _ = model(dt, eos=7)
        with torch.no_grad():
            out2 = m2(odd)
        res[dt] = {"input_ids": ids, "last_hidden": out.last_hidden_state, "pooled": out.pooler_output,
                   "odd_ids": odd, "pooled_odd_argmax": out_odd.pooler_output, "pooled_eos_first": out2.pooler_output}
        if dt == "f32":
            os.makedirs(TINY, exist_ok=True)
            # the names real files use (FLUX.1 text_encoder/ saved by transformers 4, ComfyUI clip_l): "text_model."
            # first; transformers 5's CLIPTextModel state_dict lacks the prefix and maps it when loading
            sd = {("" if k.startswith("text_model.") else "text_model.") + k: v.to(torch.bfloat16).contiguous()
                  for k, v in m.state_dict().items() if "position_ids" not in k}
            common.save_safetensors(sd, os.path.join(TINY, "model.safetensors"), {"format": "pt"})
            c = cfg.to_dict()
            c = {k: c[k] for k in sorted(c) if k in CONFIG or k in ("architectures", "model_type")}
            c["architectures"] = ["CLIPTextModel"]
            common.write_json(os.path.join(TINY, "config.json"), c)
    # the committed folder loads in transformers as it is and gives the same numbers
    from transformers import CLIPTextModel
    back = CLIPTextModel.from_pretrained(TINY, dtype=torch.float32).eval()
    with torch.no_grad():
        assert torch.equal(back(ids).pooler_output, res["f32"]["pooled"]), "reloaded tiny model differs"
    g = common.Golden("clip_text_f32", "f32", "CLIPTextModel (tiny, tests/data/tiny/clip_text) last_hidden_state "
                      "(after final_layer_norm) and pooler_output for FluxPipeline's CLIP input ids; "
                      "pooled_odd_argmax / pooled_eos_first: legacy eos_token_id 2 (argmax) vs 7 (first EOS)")
    for k, v in res["f32"].items():
        if not v.is_floating_point():
            g.add(k, v)
            continue
        tol, s = make_goldens.tol32(v, res["f64"][k])
        g.add(k, v, tol=tol, spread=s)
    g.set("prompts", json.dumps(PROMPTS))
    print("golden:", g.save())


if __name__ == "__main__":
    main()
