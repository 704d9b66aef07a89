#!/usr/bin/env python3
"""ComfyUI's FLUX.1 prompt tokenisation: prompt weights, T5-XXL and CLIP-L token sequences.

    /opt/kiln-ref/bin/python tools/reference/make_comfy_tokens_golden.py

ComfyUI is not installed in the oracle venv, so its tokenizer steps are written out here from its source (facts
only: comfy/sd1_clip.py escape_important, unescape_important, parse_parentheses, token_weights and
SDTokenizer.tokenize_with_weights - each weighted segment tokenized whole, tokenizer(segment)["input_ids"] without
its start/end tokens, chunked to max_length with the 8-token max_word_length rule -, with
comfy/text_encoders/flux.py's settings: T5XXLTokenizer has no start token, max_length 99999999, min_length 256 and
pads with 0; CLIP-L is SDTokenizer's default, 77 tokens padded with its end token), run on the transformers
tokenizers of data/tokenizer/ (the same vocabularies as ComfyUI's t5_tokenizer and sd1_tokenizer). Writes
tests/data/golden/comfy_tokens.safetensors: per prompt the T5 ids and weights (float64 weights as float32 pairs:
weights are compared as the float32 values the encoder multiplies by), CLIP-L's first chunk and how many tokens
fall after it. Also tests/data/golden/comfy_text_features.safetensors: for FEATURE_PROMPTS, on the tiny FLUX.1 T5
and CLIP-L (tests/data/tiny/flux1/dev), what ComfyUI's encode_token_weights hands FLUX.1: T5's features with each
weighted token moved to (z - z_empty) * w + z_empty (z_empty: the empty prompt's features at the same length,
gen_empty_tokens' </s> then <pad>), and CLIP-L's pooled output of its first chunk; in float32, tolerances from
the float64 spread (make_goldens.tol32).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402

PROMPTS = [
    "a red fox in the snow",
    "",
    "a (red:1.5) fox",
    "((nested)) and (single) words",
    "escaped \\(not a weight\\) here (real:0.8)",
    "unclosed (paren and a stray ) one",
    "(a:b:1.2) (c:x) (d: 2 ) (e:1_0) (f:inf)",
    "Photo of a CAT, 50mm, f/1.8 — ünïcödé tëxt (wörds:1.3)",
    # long: T5 is never cut (over 256 tokens), CLIP's first chunk ends at a segment boundary
    " ".join(["word%d" % i for i in range(200)]),
    "(" + " ".join(["alpha"] * 60) + ":1.1) " + " ".join("(tiny%d:1.2)" % i for i in range(20)),
]


def escape_important(text):
    return text.replace("\\)", "\0\1").replace("\\(", "\0\2")


def unescape_important(text):
    return text.replace("\0\1", ")").replace("\0\2", "(")


def parse_parentheses(string):
    result, current, nesting = [], "", 0
    for char in string:
        if char == "(":
            if nesting == 0:
                if current:
                    result.append(current)
                current = "("
            else:
                current += char
            nesting += 1
        elif char == ")":
            nesting -= 1
            if nesting == 0:
                result.append(current + ")")
                current = ""
            else:
                current += char
        else:
            current += char
    if current:
        result.append(current)
    return result


def token_weights(string, current_weight):
    out = []
    for x in parse_parentheses(string):
        weight = current_weight
        if len(x) >= 2 and x[-1] == ")" and x[0] == "(":
            x = x[1:-1]
            xx = x.rfind(":")
            weight *= 1.1
            if xx > 0:
                try:
                    weight = float(x[xx + 1:])
                    x = x[:xx]
                except ValueError:
                    pass
            out += token_weights(x, weight)
        else:
            out += [(x, current_weight)]
    return out


def tokenize_with_weights(tok, text, has_start, max_length, pad_to_max, min_length, pad_token):
    empty = tok("")["input_ids"]
    start = empty[0] if has_start else None
    end = empty[1] if has_start else empty[0]
    tokens_start = 1 if has_start else 0
    tokens = []
    for seg, weight in token_weights(escape_important(text), 1.0):
        seg = unescape_important(seg)
        if seg:
            tokens.append([(t, weight) for t in tok(seg)["input_ids"][tokens_start:-1]])
    batched, batch = [], []
    if start is not None:
        batch.append((start, 1.0))
    batched.append(batch)
    for group in tokens:
        is_large = len(group) >= 8
        while group:
            if len(group) + len(batch) > max_length - 1:
                remaining = max_length - len(batch) - 1
                if is_large:
                    batch.extend(group[:remaining])
                    batch.append((end, 1.0))
                    group = group[remaining:]
                else:
                    batch.append((end, 1.0))
                    if pad_to_max:
                        batch.extend([(pad_token, 1.0)] * remaining)
                batch = [] if start is None else [(start, 1.0)]
                batched.append(batch)
            else:
                batch.extend(group)
                group = []
    batch.append((end, 1.0))
    if pad_to_max and len(batch) < max_length:
        batch.extend([(pad_token, 1.0)] * (max_length - len(batch)))
    if min_length is not None and len(batch) < min_length:
        batch.extend([(pad_token, 1.0)] * (min_length - len(batch)))
    return batched


FEATURE_PROMPTS = ["a (red:1.5) fox in the ((snow))", "plain words only"]


def comfy_features(t5m, clipm, t5, clip, prompt, dtype):
    (t5b,) = tokenize_with_weights(t5, prompt, False, 99999999, False, 256, 0)
    ids = torch.tensor([[t for t, _ in t5b]])
    z = t5m.to(dtype)(ids).last_hidden_state[0]
    if any(w != 1.0 for _, w in t5b):  # encode_token_weights: has_weights adds the empty tokens
        empty = torch.tensor([[1] + [0] * (len(t5b) - 1)])
        ze = t5m(empty).last_hidden_state[0]
        z = z.clone()
        for j, (_, w) in enumerate(t5b):
            if w != 1.0:
                z[j] = (z[j] - ze[j]) * w + ze[j]
    cb = tokenize_with_weights(clip, prompt, True, 77, True, None, clip("")["input_ids"][1])
    pooled = clipm.to(dtype)(torch.tensor([[t for t, _ in cb[0]]])).pooler_output[0]
    return z, pooled


def features_golden(t5, clip):
    from transformers import CLIPTextModel, T5EncoderModel
    base = os.path.join(common.TINY, "flux1", "dev")
    t5m = T5EncoderModel.from_pretrained(os.path.join(base, "text_encoder_2")).eval()
    clipm = CLIPTextModel.from_pretrained(os.path.join(base, "text_encoder")).eval()
    g = common.Golden("comfy_text_features", "f32", "ComfyUI's FLUX.1 text conditioning of weighted prompts on the "
                      "tiny T5 and CLIP-L: encode_token_weights' (z - z_empty) * w + z_empty for T5, the first "
                      "chunk's pooled CLIP-L output")
    import make_goldens
    with torch.no_grad():
        for i, p in enumerate(FEATURE_PROMPTS):
            z32, p32 = comfy_features(t5m, clipm, t5, clip, p, torch.float32)
            z64, p64 = comfy_features(t5m, clipm, t5, clip, p, torch.float64)
            t5m.float(), clipm.float()
            for name, a, b in (("features.%d" % i, z32, z64), ("pooled.%d" % i, p32, p64)):
                tol, spread = make_goldens.tol32(a.double(), b)
                g.add(name, a, tol=tol, spread=spread)
    g.set("prompts", json.dumps(FEATURE_PROMPTS))
    print("golden:", g.save(), len(FEATURE_PROMPTS), "prompts")


def main():
    from transformers import CLIPTokenizer, T5TokenizerFast
    t5 = T5TokenizerFast.from_pretrained(os.path.join(common.REPO, "data", "tokenizer", "t5"))
    clip = CLIPTokenizer.from_pretrained(os.path.join(common.REPO, "data", "tokenizer", "clip-l"))
    g = common.Golden("comfy_tokens", "int64", "ComfyUI's FLUX.1 prompt tokenisation (sd1_clip.py token_weights and "
                      "tokenize_with_weights with flux.py's T5XXLTokenizer and CLIP-L settings) on the transformers "
                      "tokenizers of data/tokenizer: T5 ids and weights, CLIP-L's first chunk")
    for i, p in enumerate(PROMPTS):
        (t5b,) = tokenize_with_weights(t5, p, False, 99999999, False, 256, 0)
        cb = tokenize_with_weights(clip, p, True, 77, True, None, clip("")["input_ids"][1])
        g.add("t5_ids.%d" % i, torch.tensor([t for t, _ in t5b], dtype=torch.int64))
        g.add("t5_weights.%d" % i, torch.tensor([w for _, w in t5b], dtype=torch.float32))
        g.add("clip_ids.%d" % i, torch.tensor([t for t, _ in cb[0]], dtype=torch.int64))
        real_after = sum(1 for b in cb[1:] for t, _ in b if t not in (clip("")["input_ids"][0], clip("")["input_ids"][1]))
        g.add("clip_dropped.%d" % i, torch.tensor([real_after], dtype=torch.int64))
    g.set("prompts", json.dumps(PROMPTS, ensure_ascii=False))
    print("golden:", g.save(), len(PROMPTS), "prompts")
    features_golden(t5, clip)


if __name__ == "__main__":
    main()
