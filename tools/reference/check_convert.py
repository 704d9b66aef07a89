"""Check `kiln convert` output with the reference readers: the gguf package reads kiln's GGUF files and the
safetensors/torch stack reads its fp8 files; every tensor is compared with the bf16 source.

  /opt/kiln-ref/bin/python tools/reference/check_convert.py SOURCE.safetensors OUT.gguf|OUT.safetensors

GGUF: each tensor must exist with the source's shape (GGUF's reversed ne); Q8_0 bytes must equal
gguf.quants.quantize of the source (bit-exact quantiser), F16 / BF16 / F32 must equal the source cast, and Q4_K,
dequantised by the gguf package, must lie within one q step plus the 6-bit scale rounding of the source.
fp8: X.weight bytes must equal torch's (source.float() / weight_scale).to(float8_e4m3fn), weight_scale must be
max|w| / 448, and _quantization_metadata must name every quantised layer. Exit 1 on any mismatch.
"""
import json
import sys

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as T
from safetensors import safe_open


def load_source(path):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def check_gguf(src, path):
    r = gguf.GGUFReader(path)
    bad = 0
    seen = set()
    for t in r.tensors:
        seen.add(t.name)
        s = src[t.name].float().numpy()
        shape = tuple(int(v) for v in reversed(t.shape))
        if shape != (s.shape or (1,)):
            print(f"FAIL {t.name}: shape {shape} vs source {s.shape}"); bad += 1; continue
        raw = np.asarray(t.data)
        deq = gguf.quants.dequantize(raw, t.tensor_type).reshape(shape)
        if t.tensor_type == T.Q8_0:
            want = gguf.quants.quantize(s.astype(np.float32), T.Q8_0)
            ok = np.array_equal(raw.reshape(-1), want.reshape(-1))
            why = "bytes differ from gguf.quants.quantize"
        elif t.tensor_type == T.Q4_K:
            rows = s.reshape(-1, 256)
            span = (np.maximum(rows.max(1), 0) - np.minimum(rows.min(1), 0))[:, None]
            ok = bool(np.all(np.abs(deq.reshape(-1, 256) - rows) <= span / 15 * 0.5 + span / 63 * 16 + 1e-6))
            why = "error beyond the Q4_K bound"
        else:
            cast = {T.F16: np.float16, T.BF16: np.float32, T.F32: np.float32}[t.tensor_type]
            ok = np.array_equal(deq.reshape(-1), s.reshape(-1).astype(cast).astype(np.float32))
            why = "values differ from the source cast to " + t.tensor_type.name
        if not ok:
            print(f"FAIL {t.name} ({t.tensor_type.name}): {why}"); bad += 1
    missing = set(src) - seen
    if missing:
        print(f"FAIL missing tensors: {sorted(missing)[:5]}"); bad += 1
    arch = r.fields["general.architecture"]
    print(f"gguf: {len(r.tensors)} tensors read by gguf.GGUFReader, architecture "
          f"{bytes(arch.parts[arch.data[0]]).decode()}, {bad} failures")
    return bad


def check_fp8(src, path):
    bad = 0
    with safe_open(path, "pt") as f:
        meta = json.loads(f.metadata()["_quantization_metadata"])["layers"]
        out = {k: f.get_tensor(k) for k in f.keys()}
    for name, s in src.items():
        o = out[name]
        if o.dtype != torch.float8_e4m3fn:
            if not torch.equal(o, s):
                print(f"FAIL {name}: kept tensor differs"); bad += 1
            continue
        layer = name[: -len(".weight")]
        scale = out[layer + ".weight_scale"]
        amax = s.float().abs().max()
        want_scale = amax / 448 if amax > 0 else torch.tensor(1.0)
        want = (s.float() / scale).to(torch.float8_e4m3fn)
        if scale.shape != () or scale.dtype != torch.float32 or scale != want_scale.float():
            print(f"FAIL {name}: weight_scale {scale} vs {want_scale}"); bad += 1
        if not torch.equal(o.view(torch.uint8), want.view(torch.uint8)):
            print(f"FAIL {name}: e4m3 bytes differ from torch's cast"); bad += 1
        if meta.get(layer, {}).get("format") != "float8_e4m3fn":
            print(f"FAIL {name}: not declared in _quantization_metadata"); bad += 1
    print(f"fp8: {len(src)} source tensors checked, {len(meta)} layers declared, {bad} failures")
    return bad


def main():
    src = load_source(sys.argv[1])
    bad = check_gguf(src, sys.argv[2]) if sys.argv[2].endswith(".gguf") else check_fp8(src, sys.argv[2])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
