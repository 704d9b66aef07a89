"""Load the committed tiny models back through the official classes and run them in a chosen dtype.

Goldens are produced from the files in tests/data/tiny/diffusers (not from the in-memory models), so what
the oracle ran is exactly what kiln loads. fp64 runs exist only to measure the fp32 error (tolerances);
note that some official code computes internally in fp32 even in an fp64 run (Qwen3 RMSNorm, the scheduler's
Euler step), which is recorded in the README.
"""
import os

import common
import torch

DIF = os.path.join(common.TINY, "diffusers")
BASE = os.path.join(common.TINY, "diffusers-base")
DTYPES = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16}

_cache = {}


def tokenizer():
    from transformers import AutoTokenizer

    if "tok" not in _cache:
        _cache["tok"] = AutoTokenizer.from_pretrained(os.path.join(DIF, "tokenizer"))
    return _cache["tok"]


def _load(kind, dtype):
    from diffusers import AutoencoderKLFlux2, Flux2Transformer2DModel
    from transformers import Qwen3ForCausalLM

    key = (kind, dtype)
    if key not in _cache:
        # Load in fp32 (exact for bf16 files), then cast: from_pretrained's own casting differs per class.
        if kind == "te":
            m = Qwen3ForCausalLM.from_pretrained(os.path.join(DIF, "text_encoder"), dtype=torch.float32)
        elif kind == "dit":
            m = Flux2Transformer2DModel.from_pretrained(os.path.join(DIF, "transformer"), torch_dtype=torch.float32)
        else:
            m = AutoencoderKLFlux2.from_pretrained(os.path.join(DIF, "vae"), torch_dtype=torch.float32)
        _cache[key] = m.to(DTYPES[dtype]).eval()
    return _cache[key]


def text_encoder(dtype):
    return _load("te", dtype)


def dit(dtype):
    return _load("dit", dtype)


def vae(dtype):
    return _load("vae", dtype)


def pipeline(dtype, base=False):
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline

    sched = FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(DIF, "scheduler"))
    pipe = Flux2KleinPipeline(
        scheduler=sched,
        vae=vae(dtype),
        text_encoder=text_encoder(dtype),
        tokenizer=tokenizer(),
        transformer=dit(dtype),
        is_distilled=not base,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


class Recorder:
    """Forward hooks that record what official modules returned (never recompute anything)."""

    def __init__(self):
        self.handles = []
        self.calls = {}

    def watch(self, name, module, with_inputs=False):
        def hook(mod, args, kwargs, out):
            self.calls.setdefault(name, []).append((args, kwargs, out) if with_inputs else out)

        self.handles.append(module.register_forward_hook(hook, with_kwargs=True))

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def bf16_exact(t):
    """Inputs shared by the fp64/fp32/bf16 runs are rounded to bf16 first, so all runs see the same values."""
    return t.to(torch.bfloat16).to(torch.float32)
