"""Shared helpers for the kiln reference oracle: paths, determinism, versions, golden files.

The oracle never re-implements FLUX.2 maths; it only builds the official classes (diffusers / transformers) on
tiny configurations, feeds them fixed inputs and stores what they return. Everything here is plumbing.
"""
import json
import os
import sys

# No network, ever: every model is built from a config object, the tokenizer from a local file.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Bit-for-bit reruns: one intra-op thread, deterministic kernels (set before torch spins up its pools).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(REPO, "tests", "data")
TINY = os.path.join(DATA, "tiny")
GOLDEN = os.path.join(DATA, "golden")
MANIFESTS = os.path.join(DATA, "manifests")
# The Qwen3 tokenizer: the repository's own copy first (data/tokenizer/qwen3), else the shared original.
TOKENIZER_DIR = os.environ.get("KILN_TOKENIZER_DIR") or next(
    (d for d in (os.path.join(REPO, "data", "tokenizer", "qwen3"), "/work/shared/data/qwen3-tokenizer")
     if os.path.exists(os.path.join(d, "tokenizer.json"))),
    os.path.join(REPO, "data", "tokenizer", "qwen3"),
)


def deterministic():
    """Pin every knob that could make two regenerations differ."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def versions():
    import diffusers
    import numpy
    import safetensors
    import tokenizers
    import transformers

    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": numpy.__version__,
    }


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


class Golden:
    """One golden file: f32 tensors (int64 for ids / int as i64, uint8 for images) plus metadata.

    Tolerance convention (see tests/data/golden/README.md): metadata "tol.<name>" = "atol,rtol"; kiln passes
    when |kiln - golden| <= atol + rtol * |golden| holds elementwise. "spread.<name>" records the measured
    max-abs spread that grounded it. Integer tensors are exact ("tol" = "0,0").
    """

    def __init__(self, name, run_dtype, description):
        self.name = name
        self.tensors = {}
        self.meta = {"kiln_golden": "1", "golden": name, "run_dtype": run_dtype, "description": description}
        self.meta.update({"version." + k: v for k, v in versions().items()})

    def add(self, key, t, tol=None, spread=None):
        t = t.detach().cpu()
        if t.is_floating_point():
            t = t.to(torch.float32)
        elif t.dtype != torch.uint8:
            t = t.to(torch.int64)
        self.tensors[key] = t.contiguous().clone()
        if tol is not None:
            self.meta["tol." + key] = "%g,%g" % tol
        elif not t.is_floating_point():
            self.meta["tol." + key] = "0,0"
        if spread is not None:
            self.meta["spread." + key] = "%.3g" % spread

    def set(self, key, value):
        self.meta[key] = str(value)

    def save(self):
        os.makedirs(GOLDEN, exist_ok=True)
        path = os.path.join(GOLDEN, self.name + ".safetensors")
        save_safetensors(self.tensors, path, self.meta)
        return path


def save_safetensors(tensors, path, metadata=None):
    """safetensors.save_file, then the header rewritten with sorted __metadata__ keys: the library writes its
    metadata map in random (hash) order, which would break bit-for-bit regeneration. Tensor entries and data
    are untouched; only the header JSON is re-serialised (serde_json's compact form) and re-padded to 8."""
    import struct

    from safetensors.torch import save_file

    save_file(tensors, path, metadata=metadata)
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", None)
    out = {}
    if meta is not None:
        out["__metadata__"] = dict(sorted(meta.items()))
    out.update(header)
    text = json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
