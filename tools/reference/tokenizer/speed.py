#!/usr/bin/env python3
"""Tokens per second: kiln vs HF `tokenizers` on the same long corpus, same machine, side by side.

    /opt/kiln-ref/bin/python tools/reference/tokenizer/speed.py build/kiln [--lines 20000] [--repeat 7]

Writes a deterministic corpus (seeded; one prompt per line: English image prompts short and long, other
scripts, emoji, code) to /tmp/kiln-tokenizer-speed.txt, then times
  * HF tokenizers, Tokenizer.encode_batch over the lines, one thread (RAYON_NUM_THREADS=1), median of --repeat
  * HF tokenizers, the same with its default thread pool (all cores)
  * HF tokenizers, Tokenizer.encode_batch_fast (no offsets), one thread
  * kiln: `kiln tokenize --bench FILE --repeat N` (one thread, a fresh tokenizer, median of N)
Both sides must report the same token total (a cheap check that they tokenized the same thing). The BPE caches
are warm after the first repetition on both sides, so the median is the steady state a server sees.
"""
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import gen_corpus  # noqa: E402  (the corpus generator's prompt builders)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PATH = "/tmp/kiln-tokenizer-speed.txt"


def corpus(lines):
    r = random.Random(7)
    out = []
    for i in range(lines):
        k = r.random()
        if k < 0.6:
            s = gen_corpus.image_prompt(r, long=r.random() < 0.3)
        elif k < 0.9:
            s = r.choice(gen_corpus.SNIPPETS) + ", " + gen_corpus.image_prompt(r)
        else:
            s = gen_corpus.random_mix(r, r.randint(10, 200))
        out.append(s.replace("\n", " ").replace("\r", " "))
    return out


def time_hf(threads, texts, repeat, method="encode_batch"):
    code = (
        "import os, sys, time, json, statistics\n"
        "import tokenizers\n"
        f"t = tokenizers.Tokenizer.from_file({os.path.join(ROOT, 'data/tokenizer/qwen3/tokenizer.json')!r})\n"
        f"texts = open({PATH!r}, encoding='utf-8').read().split('\\n')\n"
        "if texts and texts[-1] == '': texts.pop()\n"
        "ts, cs = [], []\n"
        f"for _ in range({repeat}):\n"
        "    t0, c0 = time.perf_counter(), time.process_time()\n"
        f"    enc = t.{method}(texts)\n"
        "    ts.append(time.perf_counter() - t0); cs.append(time.process_time() - c0)\n"
        "print(json.dumps({'tokens': sum(len(e.ids) for e in enc), 'median': statistics.median(ts),\n"
        "                  'cpu': statistics.median(cs)}))\n")
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import json
    return json.loads(out.stdout)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kiln = sys.argv[1]
    lines = int(sys.argv[sys.argv.index("--lines") + 1]) if "--lines" in sys.argv else 20000
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 7
    texts = corpus(lines)
    with open(PATH, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(texts) + "\n")
    import tokenizers
    size = os.path.getsize(PATH)
    hf1 = time_hf(1, texts, repeat)
    hfn = time_hf(0, texts, repeat)
    hff = time_hf(1, texts, repeat, "encode_batch_fast")
    out = subprocess.run([kiln, "tokenize", "--bench", PATH, "--repeat", str(repeat)], capture_output=True, text=True,
                         check=True).stdout
    print(out.strip())
    f = out.split()
    k_tokens = int(f[f.index("tokens,") - 1])
    k_med = float(f[f.index("median") + 1])
    k_cpu = float(f[f.index("CPU") + 1])
    if k_tokens != hf1["tokens"]:
        print(f"token totals differ: kiln {k_tokens}, HF {hf1['tokens']}", file=sys.stderr)
        return 1
    print(f"corpus: {lines} lines, {size} bytes, {k_tokens} tokens; tokenizers {tokenizers.__version__}; "
          f"median of {repeat}")
    print(f"{'':32}{'wall s':>8}{'tokens/s':>11}{'ratio':>7}{'CPU s':>8}{'tokens/CPU s':>14}{'ratio':>7}")
    rows = (("HF encode_batch, 1 thread", hf1), (f"HF encode_batch, {os.cpu_count()} threads", hfn),
            ("HF encode_batch_fast, 1 thread", hff),
            ("kiln, 1 thread", {"median": k_med, "cpu": k_cpu}))
    for name, m in rows:
        print(f"{name:32}{m['median']:8.3f}{k_tokens / m['median']:11.0f}{hf1['median'] / m['median']:6.2f}x"
              f"{m['cpu']:8.3f}{k_tokens / m['cpu']:14.0f}{hf1['cpu'] / m['cpu']:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
