#!/usr/bin/env python3
"""Joins a FLUX.1 DiT, CLIP-L, T5-XXL and VAE file into one ComfyUI all-in-one checkpoint, the layout
CheckpointLoaderSimple reads (comfy/supported_models.py Flux: model.diffusion_model., text_encoders.clip_l.transformer.,
text_encoders.t5xxl.transformer., vae.), for the tests (the official flux_schnell / flux_dev checkpoint templates name
flux1-schnell-fp8.safetensors / flux1-dev-fp8.safetensors). Pure Python, no torch: the tensors' bytes are copied.

    python3 tests/py/make_checkpoint.py OUT.safetensors DIT CLIP_L T5XXL VAE

Each input may be plain (BFL/ComfyUI names) or already under the prefix; names keep their order, each file's
metadata is dropped except ComfyUI's `_quantization_metadata` of the DiT, whose layer names get the DiT's prefix (as
ComfyUI's own checkpoints carry it).
"""
import json
import os
import struct
import sys

PREFIXES = ("model.diffusion_model.", "text_encoders.clip_l.transformer.", "text_encoders.t5xxl.transformer.", "vae.")


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    return header.pop("__metadata__", {}) or {}, header, blob[8 + n:]


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    out, inputs = sys.argv[1], sys.argv[2:]
    header, chunks, offset, meta = {}, [], 0, {}
    for prefix, path in zip(PREFIXES, inputs):
        m, h, data = read(path)
        for name, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            b, e = t["data_offsets"]
            full = name if name.startswith(prefix) else prefix + name
            header[full] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [offset, offset + e - b]}
            chunks.append(data[b:e])
            offset += e - b
        if prefix == PREFIXES[0] and "_quantization_metadata" in m:
            q = json.loads(m["_quantization_metadata"])
            q["layers"] = {(k if k.startswith(prefix) else prefix + k): v for k, v in q.get("layers", {}).items()}
            meta["_quantization_metadata"] = json.dumps(q, sort_keys=True)
    if meta:
        header = {"__metadata__": meta, **header}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for c in chunks:
            f.write(c)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
