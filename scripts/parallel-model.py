#!/usr/bin/env python3
"""The scaling model of docs/parallel.md: bytes each rank moves per denoising step for Ulysses sequence
parallelism (SP) and Megatron-style tensor parallelism (TP) of the FLUX.2 klein 4B DiT, the per-rank compute,
and the predicted step time and speedup over one device on a few interconnects.

    scripts/parallel-model.py              # markdown tables (what docs/parallel.md shows)

The model's shape is read from tests/data/manifests/flux2-klein-4b.folder.diffusers.json (the real layout):
hidden D, heads, double/single block counts, linear parameter count. Assumptions (stated, not measured):
bf16 activations on the wire (2 bytes; kiln's CPU path moves f32 = twice these bytes), 512 text tokens, one
image per DiT batch (CFG doubles everything), no overlap of communication with compute (a pessimistic bound),
ring algorithms (all-to-all: each rank sends (P-1)/P of its block; all-reduce 2(P-1)/P), 60% of dense bf16 peak.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MAN = os.path.join(HERE, "..", "tests/data/manifests/flux2-klein-4b.folder.diffusers.json")

def model():
    m = json.load(open(MAN))
    ts = [t for f in m["files"] if f["path"].startswith("transformer/") for t in f["tensors"]]
    shape = {t["name"]: t["shape"] for t in ts}
    D = shape["x_embedder.weight"][0]
    n_double = len({n.split(".")[1] for n in shape if n.startswith("transformer_blocks.")})
    n_single = len({n.split(".")[1] for n in shape if n.startswith("single_transformer_blocks.")})
    head_dim = shape["transformer_blocks.0.attn.norm_q.weight"][0]
    # linear weights that run once per token (blocks and the in/out projections, not the per-step modulation)
    per_token = sum(_n(s) for n, s in shape.items() if len(s) == 2 and "modulation" not in n
                    and not n.startswith(("time_guidance_embed", "norm_out")))
    return dict(D=D, heads=D // head_dim, n_double=n_double, n_single=n_single, per_token=per_token,
                params=sum(_n(s) for s in shape.values()))

def _n(s):
    r = 1
    for d in s:
        r *= d
    return r

L = 512
BYTES = 2
LINKS = [("NVLink 5 (GB300, 900 GB/s/dir)", 900e9),
         ("PCIe 5 x16 (~50 GB/s)", 50e9), ("100 GbE (12.5 GB/s)", 12.5e9), ("400 Gb/s IB (50 GB/s)", 50e9)]
DEVICES = [("GB300 (2500 TFLOP/s bf16 dense)", 2500e12)]
EFF = 0.6

def per_step(m, N, P, kind):
    D, blocks = m["D"], m["n_double"] + m["n_single"]
    T = L + N
    attn = blocks * 4 * T * T * D          # QK^T and PV, 2 FLOP per multiply-add
    if kind == "one":
        return 2 * m["per_token"] * T + attn, 0
    if kind == "sp":  # image tokens split, text on every rank; each head whole on one rank
        flops = 2 * m["per_token"] * (L + N / P) + attn / P
        a2a = 4 * (N / P) * D * (P - 1) / P        # q|k|v out, attention back: 4 D per local image token
        gather = L * (D / P) * (P - 1)             # the text head groups of the other ranks
        return flops, blocks * (a2a + gather) * BYTES
    # tp: weights split by columns in, rows out; one all-reduce of [T, D] per block half
    flops = (2 * m["per_token"] * T + attn) / P
    n_ar = 2 * m["n_double"] + m["n_single"]
    return flops, n_ar * 2 * (P - 1) / P * T * D * BYTES

def main():
    m = model()
    print("FLUX.2 klein 4B DiT from the manifest: D=%d, %d heads, %d double + %d single blocks, %.2f G parameters "
          "(%.2f G in per-token linears)\n" % (m["D"], m["heads"], m["n_double"], m["n_single"], m["params"] / 1e9,
                                               m["per_token"] / 1e9))
    for side in (1024, 4096):
        N = (side // 16) ** 2
        f1, _ = per_step(m, N, 1, "one")
        print("### %dx%d (%d image + %d text tokens): one device %.1f TFLOP per step, %.3f s on one GB300\n"
              % (side, side, N, L, f1 / 1e12, f1 / (2500e12 * EFF)))
        print("| ranks | scheme | GB moved per rank per step | TFLOP per rank per step | " +
              " | ".join("s/step (speedup), %s" % l[0].split(" (")[0] for d in DEVICES for l in LINKS) + " |")
        print("| --- | --- | --- | --- | " + " | ".join("---" for _ in LINKS) + " |")
        for P in (2, 4, 8):
            for kind in ("sp", "tp"):
                f, b = per_step(m, N, P, kind)
                cells = []
                for dname, peak in DEVICES:
                    t1 = f1 / (peak * EFF)
                    for lname, bw in LINKS:
                        t = f / (peak * EFF) + b / bw
                        cells.append("%.3f (%.1fx)" % (t, t1 / t))
                print("| %d | %s | %.2f | %.1f | %s |" % (P, kind.upper(), b / 1e9, f / 1e12, " | ".join(cells)))
        print()
    # the seed-002 configuration: 4 x GB300, SP4, 4096^2, six steps
    N = (4096 // 16) ** 2
    f, b = per_step(m, N, 4, "sp")
    t = 6 * (f / (2500e12 * EFF) + b / 900e9)
    print("seed 002 (4 x GB300, Ulysses SP4, 4096x4096, 6 steps): predicted DiT time %.2f s at %d%% of peak "
          "with no overlap, %.2f s at 90%%" % (t, EFF * 100, 6 * (f / (2500e12 * 0.9) + b / 900e9)))

if __name__ == "__main__":
    main()
