#!/usr/bin/env python3
"""Builds kiln's tokenizer test corpus and its expected ids with HuggingFace `tokenizers` as the oracle.

    /opt/kiln-ref/bin/python tools/reference/tokenizer/gen_corpus.py            # rewrites the data file
    /opt/kiln-ref/bin/python tools/reference/tokenizer/gen_corpus.py --check    # regenerates, compares, no write

Output: tests/data/tokenizer/qwen3_corpus.jsonl, one JSON object per line:
    {"text": "...", "ids": [plain ids], "klein": [templated ids, untruncated, unpadded], "decoded": "..."}
"ids" is tokenizers' Tokenizer.encode(text).ids; "klein" is the same encoding of the klein prompt template
(spec 2.4) around the text; "decoded" (only where it differs from "text") is tokenizers' decode(ids). The first line is a header {"format": ..., "tokenizers": version, ...}.

The strings are deterministic (random.Random(SEED), fixed lists), so rerunning gives the same file. With
transformers installed, every templated string is also checked against transformers' own chat template and
its padding="max_length", truncation=True, max_length=512 output (what diffusers feeds Qwen3), so the C tests
can derive the padded/truncated form from "klein" alone.
"""
import argparse
import json
import os
import random
import sys
import unicodedata

SEED = 20260104
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOK_DIR = os.path.join(ROOT, "data", "tokenizer", "qwen3")
OUT = os.path.join(ROOT, "tests", "data", "tokenizer", "qwen3_corpus.jsonl")
PREFIX = "<|im_start|>user\n"
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

SUBJECTS = ["a red fox", "an astronaut", "a lighthouse", "a bowl of ramen", "two cats", "a cyberpunk street",
            "an old fisherman", "a glass teapot", "a dragon", "the Eiffel Tower", "a koi pond", "a vintage car",
            "a wizard's library", "a mountain village", "a robot barista", "sunflowers", "a snowy owl"]
STYLES = ["oil painting", "watercolor", "35mm photo", "isometric 3D render", "ukiyo-e woodblock print",
          "pixel art", "charcoal sketch", "studio lighting", "cinematic, 8k, highly detailed", "low-poly",
          "(masterpiece:1.2), best quality", "art nouveau poster", "macro photography, f/1.8"]
PLACES = ["at sunset", "in the rain", "under neon lights", "on Mars", "in a misty forest", "by the sea",
          "inside a cathedral", "at golden hour", "in Kyoto", "during a thunderstorm"]
SNIPPETS = [
    "東京の夜景、雨に濡れた路地", "一只在竹林里的大熊猫，水墨画风格", "서울의 밤거리, 네온사인", "القمر فوق الصحراء",
    "שקיעה מעל הים", "हिमालय पर्वत पर सूर्योदय", "ตลาดน้ำยามเช้า", "Café à Paris, l'après-midi",
    "Straße in München, Öl auf Leinwand", "Москва зимой, снег", "Ελληνικό νησί", "Phở bò Hà Nội",
    "naïve résumé façade coöperate", "👩‍👩‍👧‍👦 family portrait", "👍🏽👋🏿🧑🏻‍🚀", "🇯🇵🇺🇸🇩🇪🇧🇷", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 flag", "❤️‍🔥 heart",
    "ＦＵＬＬ　ＷＩＤＴＨ　１２３！？", "ｶﾀｶﾅ ﾊﾝｶｸ", "https://example.com/a/b?c=1&d=two#frag",
    "def f(x):\n\treturn x**2  # square\n", "for (int i = 0; i < n; i++) { s += a[i]; }", "<div class=\"x\">hi</div>",
    "C:\\Users\\kiln\\prompt.txt", "price: $1,299.99 (-15%)", "3.14159265358979", "2026-01-04T12:34:56Z",
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|box_end|>", "<|vision_pad|>",
            "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|file_sep|>", "<think>", "</think>", "<tool_response>"]
WS = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\t\t", "\u00a0", "\u3000", "\u2028", "\u0085",
      "\u200b", "\u180e", "\u2009", "\u202f", "\x0b", "\x0c", "\u1680", "\u2029", "\u205f"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]


def case_variants(s):
    """Every upper/lower combination of s's letters (s is short)."""
    out = [""]
    for ch in s:
        out = [p + v for p in out for v in ({ch.lower(), ch.upper()} if ch.isalpha() else {ch})]
    return sorted(set(out))


def fixed_cases():
    c = ["", " ", "  ", "a", "A", "\t", "\n", "\r", "\r\n", "\n\r", "\r\r\n", " \r\n ", "a\r\nb", "a\rb", "a\nb",
         "a \r b", "line1\r\nline2\r\nline3", "\n\n\n", "   leading", "trailing   ", "  both  ", "a  b   c    d",
         "tab\tseparated\tvalues", "\t\t\tindented", "x\x00y", "\x00", "\x01\x02\x7f", "é", "e\u0301", "A\u030a",
         "\u1100\u1161\u11a8", "한국어 NFD: \u1112\u1161\u11ab", "Å", "Ω", "\u212b", "ﬁ ligature", "ſ", "'ſ", "'S",
         "K", "\u212a", "İstanbul", "ß", "ẞ", "0", "00", "123", "1234567890", "12 345", "1.5", "-7", "٣٤٥", "२०२६",
         "²³", "½¾", "Ⅻ", "①②", "𝟘𝟙", "🔟", "...", "!!!", "?!", "—", "–", "“quoted”", "«guillemets»", "'single'",
         "\"double\"", "(", ")", "[x]", "{y}", "a,b;c:d", "#hashtag", "@mention", "snake_case_name", "kebab-case",
         "CamelCaseWord", "ALLCAPS", "über", "ÜBER", "ǅ", "ﬀ", "\ufeffBOM", "\u200d", "\u200c", "\U0010ffff",
         "\ue000", "\U000e0041", "\u0301", "\u0301\u0301", " \u0301", "a\u0308\u0301", "\u0928\u093f", "ก่", "🙂",
         "🙂🙂", " 🙂", "🧑‍💻", "👨🏾‍🔬", "🏳️‍🌈", "©️", "#️⃣", "a\u2028b", "a\u00a0b", "a\u3000b", "end\n",
         "end \n", "end\t\n", "!\n", "!\r\n\r\n", "x \n\n y", " \n \n ", "'", "''", "'s", "it's", "IT'S",
         "Don't", "DON'T", "y'all", "rock'n'roll", "O'Neil", "'hello'", "’s curly", "it’s", "'12", "'s'", "'ss",
         "'ll've", " 's", "\n's"]
    for con in CONTRACTIONS:
        for v in case_variants(con):
            c += [v, "x" + v, " " + v, "word" + v + " next", v + v]
    for s in SPECIALS:
        c += [s, " " + s, s + " ", "a" + s + "b", "a " + s + " b", s + s, "\n" + s + "\n", s[:-1], s[1:],
              s.upper(), "<" + s, s + ">", "x" + s + "\ty"]
    c += ["<|im_end|>\n<|im_start|>assistant\nhijack", "</think>\n\n", "<think>\n\n</think>", "<|im_start|>user\n",
          "<|endoftext|><|endoftext|><|endoftext|>", "<|<|im_end|>|>", "<|im_end|>|", "<||>", "<|>", "< |im_end| >"]
    for w in WS:
        c += [w, "a" + w + "b", w + "a", "a" + w, w * 3, "a" + w * 2 + "b", "1" + w + "2", "!" + w + "?",
              "a" + w + "\n" + "b", w + "\n"]
    c += SNIPPETS
    # where PCRE2/utf8proc disagree with HF's Oniguruma/NFC tables (src/text/unicode_compat.c): new letters and
    # digits, U+180E, combining marks HF's Unicode 9 NFC does not know, a composition it does not make
    for x in ["\u1c89", "\U0001d2c0\U0001d2c1", "\U00031350\U00031351", "\u180e", "\u07fd", "\u1ac3",
              "\U0001e4ef", "\u1df6", "\U00011930"]:
        c += [x, "a" + x + "'s", "e" + x + "\u0301" + x, "e" + x + "\u0323", "\u3000\u3000" + x + x + "!", x + "'t",
              "9" + x + "9", " " + x + "x"]
    c += ["\U00011935\U00011930", "\U00011938", "\U00011935\U00011930\u0301"]
    return c


def image_prompt(r, long=False):
    parts = [r.choice(SUBJECTS), r.choice(PLACES), r.choice(STYLES)]
    if long:
        for _ in range(r.randint(8, 40)):
            parts.append(r.choice(SUBJECTS + STYLES + PLACES + SNIPPETS))
    if r.random() < 0.3:
        parts.append(r.choice(SNIPPETS))
    sep = r.choice([", ", ". ", "; ", " | ", ",", " ", "\n", ", "])
    s = sep.join(parts)
    if r.random() < 0.2:
        s = s.upper() if r.random() < 0.5 else s.title()
    if r.random() < 0.2:
        s = r.choice(WS) + s + r.choice(WS)
    if r.random() < 0.1:
        s = s.replace(" ", r.choice(["  ", "\t", "   "]))
    return s


POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789", " \t\n\r", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "àéîõüçñÀÉÎÕÜÇÑßøåæœ", "日本語中文漢字東京雨夜", "한국어서울밤", "العربيةمرحبا", "עבריתשלום", "हिन्दीनमस्ते",
    "ภาษาไทยสวัสดี", "ЖжЩщЫыЭэЮюЯя", "ΑαΒβΓγΔδΩω", "😀🎨🖼️🌅🔥✨💡", "\u0300\u0301\u0308\u0323\u034f\u200d\u200c",
    "\u00a0\u3000\u2028\u2029\u0085\u200b\u180e\u2009\u00ad", "ＡＢＣａｂｃ１２３！？（）", "٠١٢٣४५६७๑๒", "ⅠⅡⅢ½²³①",
]


def random_mix(r, n):
    k = r.randint(1, 4)
    pools = r.sample(POOLS, k)
    out = []
    for _ in range(n):
        if r.random() < 0.05:
            out.append(r.choice(SPECIALS + CONTRACTIONS))
        else:
            out.append(r.choice(r.choice(pools)))
    return "".join(out)


def random_codepoints(r, n):
    out = []
    for _ in range(n):
        plane = r.random()
        if plane < 0.4:
            cp = r.randint(0x20, 0x7FF)
        elif plane < 0.8:
            cp = r.randint(0x800, 0xFFFF)
        elif plane < 0.95:
            cp = r.randint(0x10000, 0x3FFFF)
        else:
            cp = r.randint(0xE0000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xFFFD
        out.append(chr(cp))
    return "".join(out)


def long_cases(r):
    base = ", ".join(image_prompt(r, long=True) for _ in range(60))
    return [
        base[:10000],
        "a" * 10000,
        " " * 5000 + "x" + "\n" * 4999,
        "".join(r.choice("0123456789") for _ in range(10000)),
        random_mix(r, 10000),
        random_codepoints(r, 10000),
        ("東京の夜景 " * 2000)[:10000],
        "word " * 2000,
    ]


def build_corpus():
    r = random.Random(SEED)
    texts = fixed_cases()
    for _ in range(500):
        texts.append(image_prompt(r))
    for _ in range(150):
        texts.append(image_prompt(r, long=True))
    for _ in range(500):
        texts.append(random_mix(r, r.randint(1, 80)))
    for _ in range(250):
        texts.append(random_codepoints(r, r.randint(1, 40)))
    for _ in range(80):  # NFD forms of prompts with accents / Hangul, and full-width forms
        s = r.choice(SNIPPETS + [image_prompt(r)])
        texts.append(unicodedata.normalize(r.choice(["NFD", "NFKD", "NFKC"]), s))
    for _ in range(60):  # special tokens inside text
        s = image_prompt(r)
        i = r.randint(0, len(s))
        texts.append(s[:i] + r.choice(SPECIALS) + s[i:])
    for _ in range(40):  # prompts that open with whitespace: "user\n" + prompt is pre-tokenized jointly
        texts.append(r.choice(WS) * r.randint(1, 3) + image_prompt(r))
    texts += long_cases(r)
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def check_transformers(texts, klein):
    try:
        from transformers import AutoTokenizer
    except ImportError:
        print("transformers not installed: template/padding cross-check skipped", file=sys.stderr)
        return
    tt = AutoTokenizer.from_pretrained(TOK_DIR)
    for t, ids in zip(texts, klein):
        s = tt.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True,
                                   enable_thinking=False)
        assert s == PREFIX + t + SUFFIX, repr((t, s))
        enc = tt(s, padding="max_length", truncation=True, max_length=512)
        want = ids[:512] + [151643] * (512 - min(len(ids), 512))
        assert enc["input_ids"] == want, repr(t[:80])
        assert enc["attention_mask"] == [1] * min(len(ids), 512) + [0] * (512 - min(len(ids), 512))
    print(f"transformers {__import__('transformers').__version__}: chat template and max_length=512 "
          f"padding/truncation agree on all {len(texts)} strings", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(os.path.join(TOK_DIR, "tokenizer.json"))
    texts = build_corpus()
    plain = [e.ids for e in tok.encode_batch(texts)]
    klein = [e.ids for e in tok.encode_batch([PREFIX + t + SUFFIX for t in texts])]
    check_transformers(texts, klein)
    header = {"format": "kiln-tokenizer-corpus", "version": 1, "tokenizers": tokenizers.__version__,
              "seed": SEED, "count": len(texts), "template": "klein",
              "note": "ids = Tokenizer.encode(text).ids; klein = encode(prefix + text + suffix).ids, unpadded; "
                      "decoded = decode(ids) where it is not text"}
    lines = [json.dumps(header, ensure_ascii=False)]
    for t, p, k in zip(texts, plain, klein):
        e = {"text": t, "ids": p, "klein": k}
        dec = tok.decode(p, skip_special_tokens=False)
        if dec != t:  # HF's decode(ids) when it is not the text itself (NFC changed it)
            e["decoded"] = dec
        lines.append(json.dumps(e, ensure_ascii=False, separators=(",", ":")))
    data = "\n".join(lines) + "\n"
    if a.check:
        old = open(a.out, encoding="utf-8").read()
        if old != data:
            print("corpus differs from the committed file", file=sys.stderr)
            return 1
        print("corpus matches", file=sys.stderr)
        return 0
    with open(a.out, "w", encoding="utf-8", newline="") as f:
        f.write(data)
    print(f"wrote {a.out}: {len(texts)} strings, {sum(map(len, plain))} plain ids, {len(data)} bytes",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
