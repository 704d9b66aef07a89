#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors (tests/fuzz/corpus/fuzz_safetensors/): small valid files and one
file per corrupt case. The same files drive tests/cli/inspect_corrupt.sh, which checks each bad_* file's exit
code and message. Standard library only; rerun after adding a case:  python3 tests/fuzz/make_safetensors_corpus.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_safetensors")


def image(header, data=b"", hlen=None):
    h = header if isinstance(header, bytes) else header.encode()
    n = len(h) if hlen is None else hlen
    return struct.pack("<Q", n) + h + data


def hdr(obj):
    return json.dumps(obj, separators=(",", ":"))


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


good = hdr({"__metadata__": {"format": "pt"}, "w": t("BF16", [2, 3], 0, 12), "b": t("F32", [3], 12, 24),
            "n": t("I64", [], 24, 32), "e": t("U8", [0], 32, 32)})
cases = {
    "good_small.safetensors": image(good, bytes(range(32))),
    "good_prefix.safetensors": image(hdr({"model.diffusion_model.img_in.weight": t("BF16", [2, 2], 0, 8),
                                          "model.diffusion_model.double_stream_modulation_img.lin.weight":
                                              t("F16", [1, 2], 8, 12)}), bytes(12)),
    "good_fp8.safetensors": image(hdr({"a": t("F8_E4M3", [4], 0, 4), "b": t("F8_E5M2", [2, 2], 4, 8),
                                       "c": t("BOOL", [1], 8, 9), "d": t("F64", [1], 9, 17)}), bytes(17)),
    "good_empty.safetensors": image("{}"),
    "good_meta_only.safetensors": image(hdr({"__metadata__": {"format": "pt"}})),
    "bad_truncated.safetensors": image(good, bytes(range(20))),
    "bad_short.safetensors": b"\x05\x00\x00",
    "bad_json.safetensors": image('{"w":{"dtype":"F32","shape":[1],'),
    "bad_hlen_2_63.safetensors": image(good, bytes(32), hlen=1 << 63),
    "bad_header_past_eof.safetensors": image(good, b"", hlen=len(good) + 100),
    "bad_offsets_eof.safetensors": image(hdr({"w": t("F32", [4], 0, 16)}), bytes(8)),
    "bad_overlap.safetensors": image(hdr({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 4, 12)}), bytes(12)),
    "bad_shape_mismatch.safetensors": image(hdr({"a": t("F32", [3], 0, 8)}), bytes(8)),
    "bad_unknown_dtype.safetensors": image(hdr({"a": t("F12", [2], 0, 2)}), bytes(2)),
    "bad_duplicate.safetensors": image('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                       '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2)),
    "bad_non_utf8.safetensors": image(b'{"a\xff":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', bytes(1)),
    "bad_not_object.safetensors": image("[1,2,3]"),
    "bad_negative_shape.safetensors": image(hdr({"a": t("U8", [-1], 0, 1)}), bytes(1)),
    "bad_begin_gt_end.safetensors": image(hdr({"a": t("U8", [0], 2, 1)}), bytes(2)),
    "bad_empty_name.safetensors": image(hdr({"": t("U8", [1], 0, 1)}), bytes(1)),
    "bad_metadata.safetensors": image(hdr({"__metadata__": {"format": 1}, "a": t("U8", [1], 0, 1)}), bytes(1)),
    "bad_too_many_dims.safetensors": image(hdr({"a": t("U8", [1] * 9, 0, 1)}), bytes(1)),
}

os.makedirs(OUT, exist_ok=True)
for name, blob in cases.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)
print(f"wrote {len(cases)} files to {OUT}")
