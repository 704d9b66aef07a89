"""GGUF and fp8 test data for kiln's reader, dequantisers and `kiln inspect`, written with the `gguf` PyPI package
(pinned in requirements.txt). Deterministic: the same bytes on every run.

Outputs (tests/data/gguf/):
  quant/<TYPE>.blocks   random blocks of each type kiln dequantises (raw GGML bytes; the f16 scales are random
                        FINITE halves, the packed integers random bytes)
  quant/<TYPE>.f32      gguf.quants.dequantize of those blocks (little-endian float32): the expected values
  quant/Q8_0.in.f32     random bf16-representable float32 values and blocks of near-ties, and
  quant/Q8_0.q          gguf.quants.quantize(..., Q8_0) of them: kiln's Q8_0 quantiser must equal it byte for byte
  tiny.gguf             a small valid GGUF v3 file (GGUFWriter): one metadata key of every value type, arrays of
                        numbers, bools and strings, a custom general.alignment of 64, and FLUX.2 tensors (BFL names)
                        in F32, F16, BF16, Q8_0, Q4_K and Q6_K
  tiny.gguf.txt         what tiny.gguf holds (read back with gguf.GGUFReader), for people; the C tests assert the
                        same facts
  fp8-comfy-quant.safetensors   a FLUX.2-named DiT in miniature in ComfyUI's mixed-precision fp8 layout (the one
                        BFL's fp8 releases use): e4m3fn weights quantised per tensor by absmax / 448 (torch),
                        float32 weight_scale and input_scale, _quantization_metadata naming the layers
  fp8-bad-scale.safetensors  an fp8 weight whose weight_scale has shape [2, 3]: corrupt
  fp8-nvfp4.safetensors  the same names with one NVFP4-declared layer (packed U8 weight, fp8 block scales,
                        weight_scale_2): a layout kiln refuses by name
tests/fuzz/corpus/fuzz_gguf/: tiny.gguf plus corrupt variants (bad magic, counts past the end, misaligned and
overlapping offsets, an unknown type, a truncated file), the seeds of fuzz_gguf.

Run: /opt/kiln-ref/bin/python tools/reference/make_gguf.py
"""
import importlib.metadata
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "tests", "data", "gguf")
CORPUS = os.path.join(REPO, "tests", "fuzz", "corpus", "fuzz_gguf")

# Byte offsets of the f16 fields (d, dmin) inside each type's block, from the block layouts.
HALF_FIELDS = {
    T.Q8_0: [0], T.Q4_0: [0], T.Q5_0: [0], T.Q2_K: [80, 82], T.Q3_K: [108],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_halves(rng, n):
    """Finite halves over the whole range: normal, subnormal, zero, both signs (no inf or NaN: their payloads
    say nothing about dequantisation)."""
    mag = rng.choice([1e-6, 1e-4, 1e-2, 1.0, 100.0], size=n) * rng.standard_normal(n)
    h = mag.astype(np.float16)
    h[rng.random(n) < 0.05] = 0
    return np.where(np.isfinite(h), h, np.float16(1.0))


def quant_blocks(rng, qtype, n_blocks):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        raw[:, off:off + 2] = random_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_quant(rng):
    for qtype, n_blocks in [(T.Q8_0, 24), (T.Q4_0, 24), (T.Q5_0, 24), (T.Q2_K, 6), (T.Q3_K, 6), (T.Q4_K, 6),
                            (T.Q5_K, 6), (T.Q6_K, 6)]:
        raw = quant_blocks(rng, qtype, n_blocks)
        expect = gguf.quants.dequantize(raw.reshape(-1), qtype).astype("<f4")
        write(os.path.join(OUT, "quant", qtype.name + ".blocks"), raw.tobytes())
        write(os.path.join(OUT, "quant", qtype.name + ".f32"), expect.tobytes())
    # plain floats: F32 all finite kinds, F16 every bit pattern but NaN (inf included), BF16 any bits at all
    f32 = np.concatenate([rng.standard_normal(500).astype(np.float32) * 1e3,
                          np.array([0.0, -0.0, 1e-40, -1e-42, np.inf, -np.inf], np.float32)])
    f16 = np.arange(0, 65536, 37, dtype=np.uint16)
    f16 = f16[(f16 & 0x7C00) != 0x7C00 | ((f16 & 0x3FF) == 0)]
    bf16 = rng.integers(0, 65536, size=700, dtype=np.uint16)
    for qtype, arr in [(T.F32, f32.view(np.uint8)), (T.F16, f16.view(np.uint8)), (T.BF16, bf16.view(np.uint8))]:
        expect = gguf.quants.dequantize(arr, qtype).astype("<f4")
        write(os.path.join(OUT, "quant", qtype.name + ".blocks"), arr.tobytes())
        write(os.path.join(OUT, "quant", qtype.name + ".f32"), expect.tobytes())
    # Q8_0 quantiser: inputs as a bf16 checkpoint holds them (kiln convert widens bf16 exactly), with blocks
    # of zeros, of one value and of tiny values among them
    x = (rng.standard_normal(32 * 40) * rng.choice([1e-3, 0.02, 1.0, 30.0], size=32 * 40)).astype(np.float32)
    x[:32] = 0
    x[32:64] = -0.5
    x[64:96] *= 1e-30
    x = ((x.view(np.uint32) + 0x8000) & 0xFFFF0000).view(np.float32)  # round to bf16 (no NaN here)
    # and 64 blocks of near-ties: values (k + 1/2) * d for d = max / 127, where x * (1 / d) lands on or next to
    # a half, so the rounding rule and the exact order of the scale arithmetic decide q
    amax = rng.uniform(0.01, 10, size=64).astype(np.float32)
    d = amax / np.float32(127)
    k = rng.integers(-127, 127, size=(64, 32)).astype(np.float32)
    ties = ((k + np.float32(0.5)) * d[:, None]).astype(np.float32)
    ties[:, 0] = amax  # the block's largest magnitude is exactly amax
    x = np.concatenate([x, ties.reshape(-1)])
    write(os.path.join(OUT, "quant", "Q8_0.in.f32"), x.astype("<f4").tobytes())
    write(os.path.join(OUT, "quant", "Q8_0.q"), gguf.quants.quantize(x.reshape(-1, 32), T.Q8_0).tobytes())


def make_tiny(rng):
    """A FLUX.2-named DiT in miniature: hidden 64, 2 double + 1 single blocks, text width 512. Shapes are
    PyTorch's [out, in]; the file stores them reversed (ne[0] = in)."""
    path = os.path.join(OUT, "tiny.gguf")
    w = gguf.GGUFWriter(path, "flux2")
    w.add_custom_alignment(64)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.375)
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", -2.5e300)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "klein \u00e9t\u00e9")
    w.add_array("test.arr_i32", [1, -2, 3])
    w.add_array("test.arr_f32", [0.5, -1.25])
    w.add_array("test.arr_bool", [True, False, True])
    w.add_array("test.arr_str", ["a", "", "\u00fcber"])
    w.add_key_value("test.arr_u8", [7, 8, 9, 10], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.UINT8)
    tensors = [
        ("img_in.weight", (64, 256), T.Q8_0),
        ("txt_in.weight", (64, 512), T.Q4_K),
        ("double_stream_modulation_img.lin.weight", (48, 256), T.Q6_K),
        ("double_blocks.0.img_attn.qkv.weight", (24, 256), T.Q4_K),
        ("double_blocks.1.img_attn.qkv.weight", (24, 256), T.Q8_0),
        ("single_blocks.0.linear1.weight", (16, 256), T.BF16),
        ("double_blocks.0.img_attn.norm.query_norm.scale", (32,), T.F32),
        ("final_layer.linear.weight", (16, 64), T.F16),
    ]
    for name, shape, qtype in tensors:
        x = rng.standard_normal(shape).astype(np.float32) * 0.05
        if qtype == T.F32:
            w.add_tensor(name, x)
        elif qtype == T.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            q = gguf.quants.quantize(x, qtype) if qtype != T.Q4_K and qtype != T.Q6_K else None
            if q is None:  # the package cannot quantise K types: random blocks with sane scales instead
                nb = int(np.prod(shape)) // 256
                q = quant_blocks(rng, qtype, nb).reshape(*shape[:-1], -1)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(path)
    lines = []
    for f in r.fields.values():
        lines.append(f"kv {f.name} {f.types[0].name}" + (f" of {f.types[-1].name} x{len(f.data)}" if len(f.types) > 1 else ""))
    for t in r.tensors:
        lines.append(f"tensor {t.name} {t.tensor_type.name} ne={list(int(v) for v in t.shape)} "
                     f"offset={t.data_offset} bytes={t.n_bytes}")
    write(path + ".txt", ("\n".join(lines) + "\n").encode())
    return open(path, "rb").read()


# ---- the fuzz corpus: tiny.gguf and hand-built corrupt files -------------------------------------------------

def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def build(version=3, kvs=(), tensors=(), n_tensors=None, n_kv=None, magic=b"GGUF", align=32, data=b""):
    """kvs: raw encoded (key, type, value bytes); tensors: (name, ne list, type, offset)."""
    out = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                              len(kvs) if n_kv is None else n_kv)
    for key, vt, val in kvs:
        out += gstr(key) + struct.pack("<I", vt) + val
    for name, ne, qt, off in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", qt, off)
    out += b"\0" * (-len(out) % align)
    return out + data


def make_corpus(tiny):
    os.makedirs(CORPUS, exist_ok=True)
    arch = ("general.architecture", 8, gstr("flux2"))
    good = [("a.weight", [32, 2], 8, 0), ("b.weight", [4], 0, 96)]
    seeds = {
        "tiny.gguf": tiny,
        "small.gguf": build(kvs=[arch], tensors=good, data=bytes(112)),
        "v2.gguf": build(version=2, kvs=[arch], tensors=good, data=bytes(112)),
        "bad_magic.gguf": build(magic=b"GGUG", kvs=[arch], tensors=good, data=bytes(112)),
        "truncated.gguf": tiny[: len(tiny) // 2],
        "kv_count_past_end.gguf": build(kvs=[arch], n_kv=1 << 40),
        "tensor_count_past_end.gguf": build(kvs=[arch], tensors=good, n_tensors=1 << 50, data=bytes(112)),
        "misaligned.gguf": build(kvs=[arch], tensors=[("a.weight", [32, 2], 8, 4)], data=bytes(80)),
        "unknown_type.gguf": build(kvs=[arch], tensors=[("a.weight", [32], 99, 0)], data=bytes(64)),
        "overlap.gguf": build(kvs=[arch], tensors=[("a.weight", [32, 2], 8, 0), ("b.weight", [32], 8, 32)],
                              data=bytes(96)),
        "data_past_end.gguf": build(kvs=[arch], tensors=good, data=bytes(50)),
        "array_of_strings.gguf": build(kvs=[arch, ("tok", 9, struct.pack("<IQ", 8, 2) + gstr("x") + gstr("yz"))]),
        "bad_alignment.gguf": build(kvs=[arch, ("general.alignment", 4, struct.pack("<I", 48))]),
        # valid, but of a type kiln cannot dequantise (IQ2_XXS, 66 bytes per 256 values)
        "iq2_xxs.gguf": build(kvs=[arch], tensors=[("a.weight", [256, 2], 16, 0)], data=bytes(132)),
    }
    for name, data in seeds.items():
        write(os.path.join(CORPUS, name), data)


def make_fp8(rng):
    import json
    import torch
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(7)
    sd, layers = {}, {}
    for name, shape in [("img_in", (64, 32)), ("txt_in", (64, 48)), ("double_blocks.0.img_attn.qkv", (192, 64)),
                        ("double_stream_modulation_img.lin", (384, 64)), ("single_blocks.0.linear1", (128, 64))]:
        w = torch.randn(shape, generator=g) * 0.05
        scale = w.abs().max() / 448.0
        sd[name + ".weight"] = (w / scale).to(torch.float8_e4m3fn)
        sd[name + ".weight_scale"] = scale.reshape(()).to(torch.float32)
        sd[name + ".input_scale"] = torch.tensor(1.0 / 64)
        sd[name + ".bias"] = torch.zeros(shape[0], dtype=torch.bfloat16)
        layers[name] = {"format": "float8_e4m3fn"}
    sd["final_layer.linear.weight"] = (torch.randn(16, 64, generator=g) * 0.05).to(torch.bfloat16)
    meta = {"_quantization_metadata": json.dumps({"format_version": "1.0", "layers": layers}, sort_keys=True)}
    save_file(dict(sorted(sd.items())), os.path.join(OUT, "fp8-comfy-quant.safetensors"), metadata=meta)
    nv = dict(sd)
    for k in [k for k in nv if k.startswith("img_in.")]:
        del nv[k]
    nv["img_in.weight"] = torch.zeros(64, 16, dtype=torch.uint8)
    nv["img_in.weight_scale"] = torch.ones(64, 2).to(torch.float8_e4m3fn)
    nv["img_in.weight_scale_2"] = torch.tensor(1.0)
    layers2 = dict(layers, img_in={"format": "nvfp4"})
    meta2 = {"_quantization_metadata": json.dumps({"format_version": "1.0", "layers": layers2}, sort_keys=True)}
    save_file(dict(sorted(nv.items())), os.path.join(OUT, "fp8-nvfp4.safetensors"), metadata=meta2)
    bad = {"img_in.weight": sd["img_in.weight"], "img_in.weight_scale": torch.ones(2, 3)}
    save_file(bad, os.path.join(OUT, "fp8-bad-scale.safetensors"))


def main():
    rng = np.random.default_rng(20261201)
    make_quant(rng)
    tiny = make_tiny(rng)
    make_corpus(tiny)
    make_fp8(rng)
    print(f"make_gguf: wrote {OUT} and {CORPUS} (gguf {importlib.metadata.version('gguf')})")


if __name__ == "__main__":
    main()
