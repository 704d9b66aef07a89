"""Config variants of the tiny klein folder, and what the OFFICIAL pipeline makes of each.

A fine-tune or repack may ship configs that differ from klein's own; kiln must give the official result for
every config it accepts. Each variant folder under tests/data/tiny/variants/ holds only what differs (a config,
or for the 27-layer text encoder a second shard) plus relative symlinks to the tiny weights in ../../diffusers,
so the variants add little to the repository. Goldens (tests/data/golden/variant_<name>_f32.safetensors) come
from Flux2KleinPipeline.from_pretrained(folder) in fp32: the official loaders read every config themselves,
nothing here tells them what the config means. Some runs reuse an existing folder with other call arguments
(guidance 0.5 on base, a 681-token prompt, a negative prompt).

  write_folders()   called by make_tiny.py
  make_goldens()    called by make_goldens.py (section "variants")
"""
import json
import os
import shutil

import common
import numpy as np
import torch

from runs import bf16_exact

VARIANTS_DIR = os.path.join(common.TINY, "variants")
DIF = os.path.join(common.TINY, "diffusers")
SUBS = ("transformer", "text_encoder", "vae", "tokenizer", "scheduler")

PROMPT = "A photo of a red fox in fresh snow, golden hour, 35mm film grain"
NEGATIVE = "blurry, low quality, watermark, text"


def _read(sub, name):
    with open(os.path.join(DIF, sub, name)) as f:
        return json.load(f)


def _link_dir(folder, sub):
    os.symlink(os.path.join("..", "..", "diffusers", sub), os.path.join(folder, sub))


def _own_dir(folder, sub, config_name, config, keep_files=True):
    """sub/ with its own config and symlinks to every other file of ../../diffusers/sub."""
    d = os.path.join(folder, sub)
    os.makedirs(d)
    if keep_files:
        for f in sorted(os.listdir(os.path.join(DIF, sub))):
            if f != config_name:
                os.symlink(os.path.join("..", "..", "..", "diffusers", sub, f), os.path.join(d, f))
    common.write_json(os.path.join(d, config_name), config)
    return d


def _qwen27(folder):
    """A real 27-layer Qwen3 (layers 27..29 dropped from the tiny 30-layer one): shard 1 (the embedding) is a
    symlink, shard 2 and the index are new. With exactly 27 layers transformers returns the final-normed output
    as hidden_states[27], so the third klein feature is normed."""
    from safetensors.torch import load_file

    cfg = _read("text_encoder", "config.json")
    cfg["num_hidden_layers"] = 27
    cfg["layer_types"] = cfg["layer_types"][:27]
    d = _own_dir(folder, "text_encoder", "config.json", cfg, keep_files=False)
    s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    os.symlink(os.path.join("..", "..", "..", "diffusers", "text_encoder", s1), os.path.join(d, s1))
    sd = load_file(os.path.join(DIF, "text_encoder", s2))
    keep = {k: v for k, v in sd.items() if not (k.startswith("model.layers.") and int(k.split(".")[2]) >= 27)}
    common.save_safetensors(keep, os.path.join(d, s2), {"format": "pt"})
    index = _read("text_encoder", "model.safetensors.index.json")
    wm = {k: v for k, v in index["weight_map"].items() if k == "model.embed_tokens.weight" or k in keep}
    total = sum(v.numel() * v.element_size() for v in keep.values())
    total += sum(v.numel() * v.element_size() for v in load_file(os.path.join(DIF, "text_encoder", s1)).values())
    common.write_json(os.path.join(d, "model.safetensors.index.json"),
                      {"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))})


def _edit(sub, name, **changes):
    def apply(folder):
        c = _read(sub, name)
        for k, v in changes.items():
            if v is _DROP:
                c.pop(k, None)
            else:
                c[k] = v
        _own_dir(folder, sub, name, dict(sorted(c.items())))

    return apply


_DROP = object()


def _model_index_without_distilled(folder):
    with open(os.path.join(DIF, "model_index.json")) as f:
        mi = json.load(f)
    mi.pop("is_distilled")
    common.write_json(os.path.join(folder, "model_index.json"), mi)


# name -> what the folder changes (None: model_index.json only); FOLDER_SUB: the subfolder it writes itself
FOLDERS = {
    "static-shift": _edit("scheduler", "scheduler_config.json", use_dynamic_shifting=False, shift=3.0),
    "linear-shift": _edit("scheduler", "scheduler_config.json", time_shift_type="linear"),
    # transformers 5 writes rope_parameters only; 50000 differs from both 1e6 (Qwen3-4B) and 10000 (the default)
    "rope-nested": _edit("text_encoder", "config.json", rope_theta=_DROP,
                         rope_parameters={"rope_theta": 50000.0, "rope_type": "default"}),
    # an older writer: top-level rope_theta only
    "rope-toplevel": _edit("text_encoder", "config.json", rope_parameters=_DROP, rope_theta=200000.0),
    # GroupNorm eps is not a config key (diffusers fixes it at 1e-6); the BatchNorm one is (0.1: visible next to running_var in [0.25, 2.25))
    "vae-groups16": _edit("vae", "config.json", norm_num_groups=16, batch_norm_eps=0.1),
    "no-is-distilled": None,
    "qwen3-27-layers": _qwen27,
}
FOLDER_SUB = {"static-shift": "scheduler", "linear-shift": "scheduler", "rope-nested": "text_encoder",
              "rope-toplevel": "text_encoder", "vae-groups16": "vae", "qwen3-27-layers": "text_encoder"}


def write_folders():
    shutil.rmtree(VARIANTS_DIR, ignore_errors=True)
    for name, make in FOLDERS.items():
        folder = os.path.join(VARIANTS_DIR, name)
        os.makedirs(folder)
        if name == "no-is-distilled":
            _model_index_without_distilled(folder)
        else:
            shutil.copyfile(os.path.join(DIF, "model_index.json"), os.path.join(folder, "model_index.json"))
        own = FOLDER_SUB.get(name)
        if make is not None:
            make(folder)
        for sub in SUBS:
            if sub != own:
                _link_dir(folder, sub)
    print("variants: %d folders in %s" % (len(FOLDERS), os.path.relpath(VARIANTS_DIR, common.REPO)))


def long_prompt(tok, n=681):
    """A prompt of exactly n tokens on its own (the template adds its own around it)."""
    words = ("mountains rivers clouds forests meadows deserts glaciers villages harbours lighthouses bridges "
             "castles gardens orchards vineyards canyons waterfalls").split()
    parts = []
    i = 0
    while len(tok(" ".join(parts), add_special_tokens=False)["input_ids"]) < n:
        parts.append(words[i % len(words)])
        i += 1
    while len(tok(" ".join(parts), add_special_tokens=False)["input_ids"]) > n:
        parts.pop()
    while len(tok(" ".join(parts), add_special_tokens=False)["input_ids"]) < n:
        parts.append("a")
    text = " ".join(parts)
    assert len(tok(text, add_special_tokens=False)["input_ids"]) == n
    return text


# Runs: golden name -> folder (relative to tests/data/tiny), call arguments.
def runs_table(tok):
    lp = long_prompt(tok)
    d = dict(prompt=PROMPT, height=48, width=80, steps=4, guidance=1.0, negative=None)
    base = dict(d, steps=2, guidance=4.0)
    return {
        "static-shift": ("variants/static-shift", d, 411),
        "linear-shift": ("variants/linear-shift", d, 412),
        "rope-nested": ("variants/rope-nested", d, 413),
        "rope-toplevel": ("variants/rope-toplevel", d, 414),
        "vae-groups16": ("variants/vae-groups16", d, 415),
        "no-is-distilled": ("variants/no-is-distilled", base, 416),  # the pipeline's default: base, CFG 4
        "qwen3-27-layers": ("variants/qwen3-27-layers", d, 417),
        "base-guidance-0.5": ("diffusers-base", dict(base, guidance=0.5), 418),  # no CFG: guidance <= 1
        "long-prompt": ("diffusers", dict(d, prompt=lp), 419),
        "negative-base": ("diffusers-base", dict(base, negative=NEGATIVE), 420),
        "negative-distilled": ("diffusers", dict(d, negative=NEGATIVE), 421),  # unused: no CFG when distilled
    }


def _pipeline(folder):
    from diffusers import Flux2KleinPipeline

    pipe = Flux2KleinPipeline.from_pretrained(os.path.join(common.TINY, folder), torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _run(folder, a, seed):
    pipe = _pipeline(folder)
    g = torch.Generator().manual_seed(seed)
    noise = bf16_exact(torch.randn(1, 128, a["height"] // 16, a["width"] // 16, generator=g))
    kw = dict(prompt=a["prompt"], height=a["height"], width=a["width"], num_inference_steps=a["steps"],
              guidance_scale=a["guidance"], latents=noise)
    if a["negative"] is not None:
        # Flux2KleinPipeline takes negative_prompt_embeds (its own default is the embeds of ""); a negative prompt
        # is the pipeline's encode_prompt of that text, as diffusers' negative_prompt does elsewhere.
        kw["negative_prompt_embeds"] = pipe.encode_prompt(prompt=a["negative"])[0]
    feats = []
    h = pipe.transformer.register_forward_hook(
        lambda m, args, kwargs, out: feats.append(kwargs["encoder_hidden_states"].clone()), with_kwargs=True)
    with torch.no_grad():
        npimg = pipe(**kw, output_type="np").images
        h.remove()
        pil = pipe(**kw, output_type="pil").images
    cfg = pipe.do_classifier_free_guidance
    out = {"noise": noise, "sigmas": pipe.scheduler.sigmas.clone(), "features": feats[0],
           "image_float": torch.from_numpy(np.ascontiguousarray(npimg)),
           "image_u8": torch.from_numpy(np.stack([np.asarray(im) for im in pil]))}
    if cfg:
        out["negative_features"] = feats[1]
    return out, cfg, pipe


def make_goldens():
    from runs import tokenizer

    tok = tokenizer()
    for name, (folder, a, seed) in runs_table(tok).items():
        out, cfg, pipe = _run(folder, a, seed)
        g = common.Golden("variant_%s_f32" % name, "f32", "Flux2KleinPipeline.from_pretrained(tests/data/tiny/%s) "
                          "in fp32, injected noise; the official loaders read the folder's configs" % folder)
        for k, v in out.items():
            g.add(k, v, tol=(0, 0) if k == "noise" else None)
        templated = tok.apply_chat_template([{"role": "user", "content": a["prompt"]}], tokenize=False,
                                            add_generation_prompt=True, enable_thinking=False)
        n_full = len(tok(templated)["input_ids"])
        for k, v in (("folder", folder), ("prompt", a["prompt"]), ("height", a["height"]), ("width", a["width"]),
                     ("steps", a["steps"]), ("guidance_scale", a["guidance"]), ("cfg", int(cfg)),
                     ("is_distilled", int(pipe.config.is_distilled)), ("prompt_tokens", n_full),
                     ("dropped_tokens", max(0, n_full - 512))):
            g.set(k, v)
        if a["negative"] is not None:
            g.set("negative_prompt", a["negative"])
        g.save()
        print("golden: variant_%s_f32 (cfg %d, %d prompt tokens)" % (name, cfg, n_full))
