#!/usr/bin/env python3
"""dit_regroup_heads.py SRC DST HEAD_DIM: a copy of a tiny diffusers FLUX.2 or FLUX.1 folder SRC whose DiT has the
same hidden width cut into more, narrower heads (the tiny FLUX.2 DiT has 2 heads of 32: HEAD_DIM 16 makes 4 of 16;
the tiny FLUX.1 one 1 of 128), for the parallelism tests that need more heads than ranks.

Every weight is the same but the per-head q/k RMS gains, which keep their first HEAD_DIM values; the config gets
the new head count and RoPE axes summing to HEAD_DIM (FLUX.2's four equal; FLUX.1's three as 1/4, 3/8, 3/8). A different (random) model, not an approximation of the tiny one:
the tests compare kiln with itself on it. The other folders are symlinked. Standard library only."""
import json
import os
import struct
import sys

src, dst, dh = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(os.path.join(dst, "transformer"), exist_ok=True)
for name in os.listdir(src):
    if name != "transformer" and not os.path.exists(os.path.join(dst, name)):
        os.symlink(os.path.abspath(os.path.join(src, name)), os.path.join(dst, name))
cfg = json.load(open(os.path.join(src, "transformer", "config.json")))
width = cfg["attention_head_dim"] * cfg["num_attention_heads"]
if dh % 8 or width % dh:
    sys.exit(f"dit_regroup_heads: head dim {dh} must be a multiple of 8 dividing the width {width}")
if len(cfg["axes_dims_rope"]) == 4:
    axes = [dh // 4] * 4
else:
    a = dh * 3 // 8 // 2 * 2
    axes = [dh - 2 * a, a, a]
cfg.update(attention_head_dim=dh, num_attention_heads=width // dh, axes_dims_rope=axes)
json.dump(cfg, open(os.path.join(dst, "transformer", "config.json"), "w"), indent=2)

blob = open(os.path.join(src, "transformer", "diffusion_pytorch_model.safetensors"), "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
head, data = json.loads(blob[8:8 + n]), blob[8 + n:]
out_head, parts, off = {}, [], 0
for name, t in sorted(head.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
    if name == "__metadata__":
        out_head[name] = t
        continue
    b0, b1 = t["data_offsets"]
    raw = data[b0:b1]
    if ".norm_" in name and len(t["shape"]) == 1:  # per-head q/k gains: [old head dim] -> [dh]
        raw = raw[:dh * (len(raw) // t["shape"][0])]
        t = dict(t, shape=[dh])
    out_head[name] = dict(t, data_offsets=[off, off + len(raw)])
    parts.append(raw)
    off += len(raw)
hb = json.dumps(out_head).encode()
hb += b" " * (-len(hb) % 8)
path = os.path.join(dst, "transformer", "diffusion_pytorch_model.safetensors")
with open(path + ".tmp", "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb + b"".join(parts))
os.replace(path + ".tmp", path)
