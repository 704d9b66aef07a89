#!/usr/bin/env python3
"""Times PyTorch's CPU bf16 matmul (oneDNN, AMX where the CPU has it) and scaled_dot_product_attention on the
FLUX.2 [klein] shapes that `kiln bench-ops` uses, the same way: process CPU time / threads, median of R rounds.

It is the peer for the CPU backend's kernels (docs/cpu-backend.md): run it right before or after
`kiln bench-ops --threads N` in one shell loop and compare the CPU ms column shape by shape. Needs torch (the
reference venv: /opt/kiln-ref/bin/python, tools/reference/setup.sh).

    /opt/kiln-ref/bin/python tools/bench/torch_cpu_ops.py --threads 2 --repeat 5 [--only qkv] [--f32]

--f32 times the f32 versions (matmul with f32 weights, f32 attention): the peers of kiln's kernels on the CPU
tiers without AMX (`KILN_CPU=avx512 kiln bench-ops`), whose attention is f32.
"""
import argparse
import time

import torch

# name, M, N, K as in src/cli/cmd_bench_ops.c: y[M, N] = x[M, K] . w[N, K]^T
MATMULS = [
    ("dit.single.linear1", 1536, 27648, 3072), ("dit.single.linear2", 1536, 3072, 12288),
    ("dit.double.qkv", 1024, 9216, 3072), ("dit.double.proj", 1024, 3072, 3072),
    ("dit.double.mlp_in", 1024, 18432, 3072), ("dit.double.mlp_out", 1024, 3072, 9216),
    ("dit.single.linear1", 4608, 27648, 3072), ("dit.single.linear2", 4608, 3072, 12288),
    ("dit.double.qkv", 4096, 9216, 3072), ("dit.double.mlp_out", 4096, 3072, 9216),
]
ATTENTION = [("dit.attention", 1536, 24), ("dit.attention", 4608, 24)]  # name, tokens, heads; head size 128


def timed(fn, threads, repeat):
    fn()  # warm-up (oneDNN builds its kernel here)
    cpu = []
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        cpu.append((time.process_time() - c0) / threads)
    cpu.sort()
    return cpu[len(cpu) // 2], cpu[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--f32", action="store_true", help="f32 inputs instead of bf16")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dt = torch.float32 if a.f32 else torch.bfloat16
    print(f"# torch {torch.__version__}, {a.threads} threads, {dt} inputs; CPU ms per thread, median (and best) of {a.repeat}")
    g = torch.Generator().manual_seed(1)
    for name, m, n, k in MATMULS:
        if a.only not in name:
            continue
        x = torch.randn(m, k, generator=g).to(dt)
        w = (torch.randn(n, k, generator=g) * 0.05).to(dt)
        s, b = timed(lambda: torch.nn.functional.linear(x, w), a.threads, a.repeat)
        print(f"{name:24s} [{m},{k}]x[{n},{k}]^T {s * 1e3:10.2f} ms (best {b * 1e3:8.2f}) {2 * m * n * k / s / 1e9:9.1f} GFLOP/s")
    for name, s_len, h in ATTENTION:
        if a.only not in name:
            continue
        q, kk, v = (torch.randn(1, h, s_len, 128, generator=g).to(dt) for _ in range(3))
        s, b = timed(lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, v), a.threads, a.repeat)
        print(f"{name:24s} S={s_len} {h}q/{h}kv x128 {s * 1e3:10.2f} ms (best {b * 1e3:8.2f}) {4 * h * s_len * s_len * 128 / s / 1e9:9.1f} GFLOP/s")


if __name__ == "__main__":
    main()
