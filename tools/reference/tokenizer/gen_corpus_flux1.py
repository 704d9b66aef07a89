#!/usr/bin/env python3
"""Builds kiln's FLUX.1 tokenizer corpora (CLIP-L and T5) and their expected ids with transformers as the oracle.

    /opt/kiln-ref/bin/python tools/reference/tokenizer/gen_corpus_flux1.py            # rewrites both files
    /opt/kiln-ref/bin/python tools/reference/tokenizer/gen_corpus_flux1.py --check    # regenerates, compares

Output: tests/data/tokenizer/clip_l_corpus.jsonl and t5_corpus.jsonl, one JSON object per line after a header:
    {"text": "...", "ids": [...]}
"ids" is transformers' tokenizer(text, add_special_tokens=False)["input_ids"] for CLIPTokenizer /
T5TokenizerFast loaded from data/tokenizer/clip-l and data/tokenizer/t5 (what diffusers' FluxPipeline loads from a
FLUX.1 folder's tokenizer/ and tokenizer_2/). For every string the generator also checks transformers' own
pipeline calls against the form the C test derives from "ids" alone, so the committed ids pin those too:
    CLIP: tokenizer(text, padding="max_length", max_length=77, truncation=True)
          == [49406] + ids[:75] + [49407], padded with 49407 to 77; attention mask = 1 on the real tokens
    T5:   tokenizer(text, padding="max_length", max_length=L, truncation=True) for L = 512 (dev) and 256 (schnell)
          == ids[:L-1] + [1], padded with 0 to L; attention mask likewise
and that tokenizer(text)["input_ids"] (no truncation) is the same with every id. The strings are the Qwen3
corpus's (gen_corpus.build_corpus: plain prompts, unicode-heavy, over-long) plus cases for these two tokenizers'
special tokens, CLIP's lower-casing and whitespace rules, T5's charsmap (full-width forms, compatibility
characters, combining marks after mapped characters, control characters, U+2581).
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gen_corpus  # noqa: E402

SEED = 20261201
ROOT = gen_corpus.ROOT
CLIP_DIR = os.path.join(ROOT, "data", "tokenizer", "clip-l")
T5_DIR = os.path.join(ROOT, "data", "tokenizer", "t5")
OUT_CLIP = os.path.join(ROOT, "tests", "data", "tokenizer", "clip_l_corpus.jsonl")
OUT_T5 = os.path.join(ROOT, "tests", "data", "tokenizer", "t5_corpus.jsonl")

CLIP_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|STARTOFTEXT|>", "<|EndOfText|>", "<|startoftext|", "</w>",
                 "a</w>", "</w></w>", "<|endoftext|><|endoftext|>"]
T5_SPECIALS = ["</s>", "<pad>", "<unk>", "<extra_id_0>", "<extra_id_99>", "<extra_id_100>", "<extra_id_-1>",
               "＜/s＞", "＜pad＞", "＜unk＞", "<\u0301/s>", "</S>", "<s>", "▁", "▁▁", "▁x", "x▁", "▁▁x", "a▁b",
               "\u2581\u2581\u2581hello"]
MARKS = ["\u0301", "\u0308", "\u0323", "\u20dd", "\u0300\u0301", "\ufe0f", "\u200d", "\u3099", "\u309a", "\uff9e"]
MAPPED = ["①", "½", "ﬁ", "Ⅻ", "ｶ", "ﾊ", "Ａ", "１", "ℌ", "㎏", "™", "…", "\u00a0", "\u3000", "\u2028", "ß", "İ",
          "K", "Å", "ǅ", "ﷺ", "\u00ad", "\u200b", "\ufeff", "\u2126", "ｳ"]
CONTROL = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x7f", "\x80", "\x9f", "\t", "\r", "\n", "\x85"]


def extra_cases(r):
    c = []
    for s in CLIP_SPECIALS + T5_SPECIALS:
        c += [s, " " + s, s + " ", "a" + s + "b", "a " + s + " b", s + s, "x" + s + "\ty", s.upper()]
    for m in MAPPED:
        for k in MARKS:
            c += [m + k, "a" + m + k + "b", " " + m + k + k]
    for x in CONTROL:
        c += [x, "a" + x + "b", x + " a", "a " + x, x * 3]
    c += ["HELLO World", "İstanbul İİ", "ΣΊΣΥΦΟΣ", "ǄǅǆǇ", "ﬃ ﬄ ﬅ", "ＡＢＣ ａｂｃ", "Straße STRASSE", "ⓐⓑⓒ ⒶⒷⒸ",
          "   many   spaces   ", "\t\ttabs\t\t", "line\nbreaks\r\nhere", "\u3000ideographic\u3000space",
          "nbsp\u00a0here", "zero\u200bwidth", "8k, 4K, 16:9, f/1.8, 1/250s, ISO-100", "don't can't won't I'm",
          "it'S yOu'Re", "a" * 300, "ab " * 200, "🙂" * 100, "東京" * 200]
    for _ in range(200):  # random mixes of the characters these two normalisers treat specially
        pool = MAPPED + MARKS + CONTROL + CLIP_SPECIALS + T5_SPECIALS + list("aZ9 ,.'")
        c.append("".join(r.choice(pool) for _ in range(r.randint(1, 30))))
    return c


def build():
    r = random.Random(SEED)
    texts = gen_corpus.build_corpus() + extra_cases(r)
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def check_clip(tok, texts, plain):
    for t, ids in zip(texts, plain):
        full = [49406] + ids + [49407]
        assert tok(t)["input_ids"] == full, repr(t[:80])
        real = [49406] + ids[:75] + [49407]
        enc = tok(t, padding="max_length", max_length=77, truncation=True)
        assert enc["input_ids"] == real + [49407] * (77 - len(real)), repr(t[:80])
        assert enc["attention_mask"] == [1] * len(real) + [0] * (77 - len(real)), repr(t[:80])


def check_t5(tok, texts, plain):
    for t, ids in zip(texts, plain):
        assert tok(t)["input_ids"] == ids + [1], repr(t[:80])
        for L in (512, 256):
            real = ids[:L - 1] + [1]
            enc = tok(t, padding="max_length", max_length=L, truncation=True)
            assert enc["input_ids"] == real + [0] * (L - len(real)), repr(t[:80])
            assert enc["attention_mask"] == [1] * len(real) + [0] * (L - len(real)), repr(t[:80])


def render(name, version, texts, plain, note, extra=None):
    header = {"format": "kiln-tokenizer-corpus", "version": 1, "tokenizer": name, "transformers": version,
              "seed": SEED, "count": len(texts), "note": note}
    header.update(extra or {})
    lines = [json.dumps(header, ensure_ascii=False)]
    for t, p in zip(texts, plain):
        lines.append(json.dumps({"text": t, "ids": p}, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    a = ap.parse_args()
    import tokenizers
    import transformers
    from transformers import CLIPTokenizer, T5TokenizerFast
    texts = build()
    clip = CLIPTokenizer.from_pretrained(CLIP_DIR)
    t5 = T5TokenizerFast.from_pretrained(T5_DIR)
    clip_ids = clip(texts, add_special_tokens=False)["input_ids"]
    t5_ids = t5(texts, add_special_tokens=False)["input_ids"]
    check_clip(clip, texts, clip_ids)
    check_t5(t5, texts, t5_ids)
    # how often the file's own pipeline (tokenizers.Tokenizer.from_file, which transformers 5 does not use) differs
    own = tokenizers.Tokenizer.from_file(os.path.join(T5_DIR, "tokenizer.json"))
    own_ids = [e.ids for e in own.encode_batch(texts, add_special_tokens=False)]
    differ = sum(a != b for a, b in zip(own_ids, t5_ids))
    files = {
        OUT_CLIP: render("clip-l", transformers.__version__, texts, clip_ids,
                         "ids = CLIPTokenizer(text, add_special_tokens=False).input_ids; the FluxPipeline form "
                         "(77, truncation, BOS/EOS, pad 49407) is checked by the generator"),
        OUT_T5: render("t5", transformers.__version__, texts, t5_ids,
                       "ids = T5TokenizerFast(text, add_special_tokens=False).input_ids; the FluxPipeline forms "
                       "(512 and 256, truncation, EOS 1, pad 0) are checked by the generator",
                       {"file_pipeline_differs": differ}),
    }
    rc = 0
    for path, data in files.items():
        if a.check:
            same = open(path, encoding="utf-8").read() == data
            print(f"{path}: {'matches' if same else 'DIFFERS'}", file=sys.stderr)
            rc |= 0 if same else 1
            continue
        with open(path + ".tmp", "w", encoding="utf-8", newline="") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        print(f"wrote {path}: {len(texts)} strings, {len(data)} bytes", file=sys.stderr)
    print(f"T5: tokenizer.json's own pipeline differs from T5TokenizerFast on {differ} of {len(texts)} strings",
          file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
