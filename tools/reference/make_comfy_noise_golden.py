#!/usr/bin/env python3
"""ComfyUI's batch noise: torch.randn on the CPU of the whole latent batch from one seeded generator.

    /opt/kiln-ref/bin/python tools/reference/make_comfy_noise_golden.py

comfy/sample.py prepare_noise (KSampler; SamplerCustomAdvanced's RandomNoise calls it too) draws
torch.randn(latent.size(), generator=torch.manual_seed(seed), device="cpu") for the whole batch: image i of a
batch of 3 is not the batch-1 image of seed + i. The latent shapes: EmptySD3LatentImage (FLUX.1)
[B, 16, H/8, W/8], EmptyFlux2LatentImage [B, 128, H/16, W/16]. torch's float32 normal kernel depends on the
CPU capability it dispatches to, so each case is drawn twice in child processes: ATEN_CPU_CAPABILITY=avx2
(the vectorised Cephes polynomials) and =default (the C library's logf/cosf/sinf). Writes
tests/data/golden/comfy_noise.safetensors: per case and kernel the noise in ComfyUI's shape, and for FLUX.1
the same values packed 2x2 as the DiT patchifies them (kiln_request.noise's layout).
"""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402

# (name, shape, seed): batch 3 at a non-square size for each model; sizes that are not a multiple of 16 (torch
# redraws the last 16 values); a seed above 2^32 (the CPU generator keeps its low 32 bits) and ComfyUI's largest
CASES = [
    ("flux1_b3_112x48", [3, 16, 48 // 8, 112 // 8], 1234),
    ("flux2_b3_112x48", [3, 128, 48 // 16, 112 // 16], 1234),
    ("flux1_b1_112x48", [1, 16, 48 // 8, 112 // 8], 1234),
    ("tail_1000", [1000], 0x1_0000_0007),
    ("tail_17", [17], 0xFFFF_FFFF_FFFF_FFFF),
    ("block_16", [16], 0),
]


def child(kernel):
    torch.set_num_threads(1)
    cap = torch.backends.cpu.get_cpu_capability()
    want = {"avx2": "AVX2", "default": "DEFAULT"}[kernel]
    if cap != want:
        sys.exit("ATEN_CPU_CAPABILITY=%s gave %s (this CPU lacks AVX2?)" % (kernel, cap))
    out = {}
    for name, shape, seed in CASES:
        g = torch.manual_seed(seed)
        out[name] = torch.randn(shape, generator=g, dtype=torch.float32, device="cpu")
    path = sys.argv[3]
    torch.save(out, path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    g = common.Golden("comfy_noise", "f32", "torch.randn on the CPU (float32) of ComfyUI's latent shapes, one "
                      "seeded generator per batch (comfy/sample.py prepare_noise), under torch's AVX2 and default "
                      "CPU kernels; FLUX.1 also packed 2x2 (channel c*4 + dy*2 + dx)")
    import tempfile
    for kernel in ("avx2", "default"):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "noise.pt")
            env = dict(os.environ, ATEN_CPU_CAPABILITY=kernel)
            subprocess.run([sys.executable, __file__, "--child", kernel, p], env=env, check=True)
            got = torch.load(p)
        for name, shape, seed in CASES:
            t = got[name]
            g.add("%s.%s" % (kernel, name), t)
            if name.startswith("flux1"):
                b, c, h, w = t.shape
                packed = t.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, c * 4, h // 2, w // 2)
                g.add("%s.%s.packed" % (kernel, name), packed)
    g.set("cases", json.dumps([{"name": n, "shape": s, "seed": str(seed)} for n, s, seed in CASES]))
    print("golden:", g.save(), len(CASES), "cases x 2 kernels")


if __name__ == "__main__":
    main()
