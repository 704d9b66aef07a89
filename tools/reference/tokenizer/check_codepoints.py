#!/usr/bin/env python3
"""Exhaustive check: every Unicode scalar value, in a few contexts, through kiln and HF `tokenizers`.

    /opt/kiln-ref/bin/python tools/reference/tokenizer/check_codepoints.py build/kiln [--step N]

For each code point c (U+0000..U+10FFFF without surrogates; every N-th with --step) one string exercises the
pre-tokenizer classes (\\s, \\p{L}, \\p{N}, the rest), contractions and NFC around c:
    CONTEXT below: letters, digits, punctuation, whitespace runs, contractions and combining marks around c
kiln reads them with `kiln tokenize --jsonl`; the ids must equal tokenizers' encode_batch ids. Prints every
code point that differs (with its general category) and exits 1 if any does. Not run by CI (it needs Python);
the committed corpus carries a sample of what this finds.
"""
import json
import os
import subprocess
import sys
import unicodedata

CONTEXT = ("a{c}b {c}{c}1\n{c} x'{c} e{c}\u0301{c} e{c}\u0323 {c}'s '{c}x \u3000{c}{c}! {c}\n\t{c}x "
           "\u00a0{c}'t 9{c}9 <|im_end|>{c}")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kiln = sys.argv[1]
    step = int(sys.argv[sys.argv.index("--step") + 1]) if "--step" in sys.argv else 1
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(os.path.join(ROOT, "data", "tokenizer", "qwen3", "tokenizer.json"))
    cps = [c for c in range(0, 0x110000, step) if not 0xD800 <= c <= 0xDFFF]
    texts = [CONTEXT.format(c=chr(c)) for c in cps]
    want = [" ".join(map(str, e.ids)) for e in tok.encode_batch(texts)]
    inp = "".join(json.dumps(t) + "\n" for t in texts).encode()
    out = subprocess.run([kiln, "tokenize", "--jsonl"], input=inp, capture_output=True, check=False)
    got = out.stdout.decode().split("\n")
    bad = [c for c, w, g in zip(cps, want, got) if w != g]
    for c in bad[:200]:
        print(f"U+{c:04X} {unicodedata.category(chr(c))} {unicodedata.name(chr(c), '?')}")
    print(f"{len(cps)} code points, {len(bad)} differ (python unicodedata {unicodedata.unidata_version})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
