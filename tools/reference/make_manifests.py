"""Full-size tensor manifests of the real FLUX.2 [klein] 4B checkpoints (no weights; meta device).

The OFFICIAL classes are instantiated with the REAL published configs (spec 1.1, 2.1, 3.1) on the meta
device, so names and shapes come from the classes themselves; BFL names come from layouts.py (the same
writer the tiny files use). The results are checked against the spec's tables (tensor counts, parameter
totals, every shape of spec 1.6). Format: tests/data/manifests/README.md ("kiln-manifest/1").
"""
import json
import os

import common
import torch

import layouts

OUT = common.MANIFESTS

# Real configs (spec 1.1 / 3.1 / 4.1 / 2.1).
DIT_4B = dict(patch_size=1, in_channels=128, out_channels=None, num_layers=5, num_single_layers=20,
              attention_head_dim=128, num_attention_heads=24, joint_attention_dim=7680,
              timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=[32, 32, 32, 32], rope_theta=2000,
              eps=1e-6, guidance_embeds=False)
QWEN3_4B = dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=1000000.0,
                rms_norm_eps=1e-6, max_position_embeddings=40960, tie_word_embeddings=True, attention_bias=False,
                hidden_act="silu", bos_token_id=151643, eos_token_id=151645, max_window_layers=36,
                use_sliding_window=False, sliding_window=None, attention_dropout=0.0, initializer_range=0.02)
SHARD_BYTES = 5 * 10**9  # huggingface_hub's classic default max_shard_size "5GB" -> two shards for 8 GB


def _meta(fn):
    with torch.device("meta"):
        return fn()


def dit_model():
    from diffusers import Flux2Transformer2DModel

    return _meta(lambda: Flux2Transformer2DModel(**DIT_4B))


def vae_model():
    from diffusers import AutoencoderKLFlux2

    return _meta(lambda: AutoencoderKLFlux2())  # the class defaults are the released FLUX.2 VAE config


def qwen_config():
    from transformers import Qwen3Config

    return Qwen3Config(**QWEN3_4B, dtype="bfloat16")


def qwen_model():
    from transformers import Qwen3ForCausalLM

    return _meta(lambda: Qwen3ForCausalLM(qwen_config()))


def _dtype(t):
    return {torch.bfloat16: "BF16", torch.float32: "F32", torch.int64: "I64"}[t.dtype]


def tensors(sd, cast_bf16=True):
    """[(name, dtype, shape)] sorted by name; float tensors stored as BF16 like the released files."""
    out = []
    for k in sorted(sd):
        v = sd[k]
        dt = "BF16" if (cast_bf16 and v.is_floating_point()) else _dtype(v)
        out.append({"name": k, "dtype": dt, "shape": list(v.shape)})
    return out


def nparams(ts):
    n = 0
    for t in ts:
        if t["dtype"] == "BF16":
            p = 1
            for s in t["shape"]:
                p *= s
            n += p
    return n


def _config_json(model):
    return json.loads(model.to_json_string())


def qwen_config_json():
    c = json.loads(qwen_config().to_json_string())  # diff against defaults, as save_pretrained writes
    # Published Qwen3 configs carry rope_theta / torch_dtype (transformers 5 writes rope_parameters / dtype).
    c.update({"architectures": ["Qwen3ForCausalLM"], "rope_theta": 1000000.0, "torch_dtype": "bfloat16"})
    c.pop("layer_types", None)
    return dict(sorted(c.items()))


def shard(ts, prefix):
    """Greedy in-order split like huggingface_hub's state-dict splitter (the real file's exact split is
    not known; kiln must read any split through the index)."""
    order = [t for t in ts]  # HF iterates the state dict in module order: embeddings, layers, norm
    order.sort(key=lambda t: _module_order_key(t["name"]))
    shards, cur, size = [], [], 0
    for t in order:
        b = 2 * nparams([t])
        if cur and size + b > SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    shards.append(cur)
    n = len(shards)
    return [{"path": "%smodel-%05d-of-%05d.safetensors" % (prefix, i + 1, n), "metadata": {"format": "pt"},
             "tensors": sorted(s, key=lambda t: t["name"])} for i, s in enumerate(shards)]


def _module_order_key(name):
    import re

    m = re.match(r"model\.layers\.(\d+)\.", name)
    if name.startswith("model.embed_tokens"):
        return (0, 0, name)
    if m:
        return (1, int(m.group(1)), name)
    return (2, 0, name)


def write_manifest(name, obj):
    """Pretty JSON, but one tensor per line: readable diffs, and a tenth of the size of fully indented JSON."""
    marks = {}

    def mark(o):
        if isinstance(o, dict) and set(o) == {"name", "dtype", "shape"}:
            key = "@@T%d@@" % len(marks)
            marks[key] = json.dumps(o, separators=(", ", ": "))
            return key
        if isinstance(o, dict):
            return {k: mark(v) for k, v in o.items()}
        if isinstance(o, list):
            return [mark(v) for v in o]
        return o

    text = json.dumps(mark(obj), indent=2)
    for key, val in marks.items():
        text = text.replace('"%s"' % key, val, 1)
    with open(os.path.join(OUT, name), "w") as f:
        f.write(text + "\n")
    json.loads(text)  # still one valid document


def manifest(model, component, layout, source, files, **extra):
    d = {"format": "kiln-manifest/1", "model": model, "component": component, "layout": layout,
         "source": source, "files": files}
    d.update(extra)
    return d


def scheduler_json():
    import make_tiny

    return json.loads(make_tiny.scheduler().to_json_string())


def model_index(distilled):
    import make_tiny

    return make_tiny._model_index(distilled)


def check(name, cond, msg):
    if not cond:
        raise AssertionError("%s: %s" % (name, msg))


def check_dit_bfl(ts):
    """Every row of spec 1.6, and the count 149."""
    D, F = 3072, 9216
    shapes = {t["name"]: t["shape"] for t in ts}
    exp = {"img_in.weight": [D, 128], "txt_in.weight": [D, 7680], "time_in.in_layer.weight": [D, 256],
           "time_in.out_layer.weight": [D, D], "double_stream_modulation_img.lin.weight": [6 * D, D],
           "double_stream_modulation_txt.lin.weight": [6 * D, D], "single_stream_modulation.lin.weight": [3 * D, D],
           "final_layer.adaLN_modulation.1.weight": [2 * D, D], "final_layer.linear.weight": [128, D]}
    for n in range(5):
        for s in ("img", "txt"):
            p = "double_blocks.%d.%s_" % (n, s)
            exp.update({p + "attn.qkv.weight": [3 * D, D], p + "attn.norm.query_norm.scale": [128],
                        p + "attn.norm.key_norm.scale": [128], p + "attn.proj.weight": [D, D],
                        p + "mlp.0.weight": [2 * F, D], p + "mlp.2.weight": [D, F]})
    for m in range(20):
        p = "single_blocks.%d." % m
        exp.update({p + "linear1.weight": [3 * D + 2 * F, D], p + "linear2.weight": [D, D + F],
                    p + "norm.query_norm.scale": [128], p + "norm.key_norm.scale": [128]})
    check("dit bfl", shapes == exp, "differs from spec 1.6: %s" % sorted(set(shapes.items()) ^ set(
        (k, tuple(v)) for k, v in exp.items()))[:4] if shapes != exp else "")
    check("dit bfl", len(ts) == 149, "count %d != 149" % len(ts))


def main():
    os.makedirs(OUT, exist_ok=True)
    report = {}

    # DiT -------------------------------------------------------------------------------------------
    dit = dit_model()
    dsd = dit.state_dict()
    d_ts = tensors(dsd)
    b_ts = tensors(layouts.dit_diffusers_to_bfl(dsd))
    check_dit_bfl(b_ts)
    src = "diffusers %s Flux2Transformer2DModel(klein-4B config, spec 1.1) on the meta device" % common.versions()["diffusers"]
    dit_cfg = _config_json(dit)
    write_manifest("flux2-klein-4b.dit.bfl.json", manifest(
        "flux2-klein-4b", "dit", "bfl", src + "; BFL names via tools/reference/layouts.py (fused qkv, "
        "final_layer shift-then-scale)", [{"path": "flux-2-klein-4b.safetensors", "tensors": b_ts}]))
    write_manifest("flux2-klein-4b.dit.diffusers.json", manifest(
        "flux2-klein-4b", "dit", "diffusers", src,
        [{"path": "diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"}, "tensors": d_ts}],
        extra_files=[{"path": "config.json", "json": dit_cfg}]))
    report["dit"] = (len(b_ts), len(d_ts), nparams(b_ts))
    check("dit", nparams(b_ts) == nparams(d_ts), "param totals differ between layouts")

    # Qwen3-4B ----------------------------------------------------------------------------------------
    q = qwen_model()
    q_ts = tensors(layouts.qwen3_hf_names(q.state_dict()))
    src = "transformers %s Qwen3ForCausalLM(Qwen3-4B config, spec 2.1) on the meta device; tied lm_head not stored" % (
        common.versions()["transformers"])
    write_manifest("qwen3-4b.text_encoder.comfy.json", manifest(
        "qwen3-4b", "text_encoder", "hf", src + "; ComfyUI single file qwen_3_4b.safetensors",
        [{"path": "qwen_3_4b.safetensors", "tensors": q_ts}]))
    te_files = shard(q_ts, "")
    write_manifest("qwen3-4b.text_encoder.diffusers.json", manifest(
        "qwen3-4b", "text_encoder", "hf", src + "; diffusers text_encoder/ shards (greedy 5 GB split)", te_files,
        index={"path": "model.safetensors.index.json"},
        extra_files=[{"path": "config.json", "json": qwen_config_json()}]))
    report["qwen3"] = (len(q_ts), len(te_files), nparams(q_ts))

    # VAE -----------------------------------------------------------------------------------------------
    v = vae_model()
    vsd = v.state_dict()
    v_ts = tensors(vsd)
    vb_ts = tensors(layouts.vae_diffusers_to_bfl(vsd))
    src = "diffusers %s AutoencoderKLFlux2() (class defaults = FLUX.2 VAE, spec 3.1) on the meta device" % (
        common.versions()["diffusers"])
    vae_cfg = _config_json(v)
    write_manifest("flux2-vae.vae.diffusers.json", manifest(
        "flux2-vae", "vae", "diffusers", src + "; also the ComfyUI flux2-vae.safetensors naming (spec 3.5, unverified)",
        [{"path": "diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"}, "tensors": v_ts}],
        extra_files=[{"path": "config.json", "json": vae_cfg}]))
    write_manifest("flux2-vae.vae.comfy.json", manifest(
        "flux2-vae", "vae", "diffusers", src + "; ComfyUI single file (diffusers names, spec 3.5)",
        [{"path": "flux2-vae.safetensors", "tensors": v_ts}]))
    write_manifest("flux2-vae.vae.bfl.json", manifest(
        "flux2-vae", "vae", "bfl", src + "; BFL/ldm names via tools/reference/layouts.py (spec 3.5 mapping)",
        [{"path": "ae.safetensors", "tensors": vb_ts}]))
    report["vae"] = (len(v_ts), len(vb_ts), nparams(v_ts))
    check("vae", len(v_ts) == 251 and sum(t["dtype"] == "BF16" for t in v_ts) == 250, "count %d" % len(v_ts))

    # Whole diffusers folders (distilled and base) -------------------------------------------------------
    for name, distilled in (("flux2-klein-4b", True), ("flux2-klein-base-4b", False)):
        files = [{"path": "transformer/diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"},
                  "tensors": d_ts}]
        files += [dict(f, path="text_encoder/" + f["path"]) for f in te_files]
        files += [{"path": "vae/diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"},
                   "tensors": v_ts}]
        write_manifest("%s.folder.diffusers.json" % name, manifest(
            name, "folder", "diffusers", "the diffusers Flux2KleinPipeline folder (is_distilled %s): "
            "the dit / text_encoder / vae diffusers manifests combined" % str(distilled).lower(), files,
            index={"path": "text_encoder/model.safetensors.index.json",
                   "files": [f["path"] for f in files if f["path"].startswith("text_encoder/")]},
            extra_files=[{"path": "model_index.json", "json": model_index(distilled)},
                         {"path": "transformer/config.json", "json": dit_cfg},
                         {"path": "text_encoder/config.json", "json": qwen_config_json()},
                         {"path": "vae/config.json", "json": vae_cfg},
                         {"path": "scheduler/scheduler_config.json", "json": scheduler_json()}],
            copy_tokenizer="tokenizer"))
    # ComfyUI models/ tree: the three single files.
    write_manifest("flux2-klein-4b.folder.comfy.json", manifest(
        "flux2-klein-4b", "folder", "bfl", "ComfyUI models/ layout: diffusion_models (BFL names), "
        "text_encoders (HF names), vae (diffusers names)",
        [{"path": "diffusion_models/flux-2-klein-4b.safetensors", "tensors": b_ts},
         {"path": "text_encoders/qwen_3_4b.safetensors", "tensors": q_ts},
         {"path": "vae/flux2-vae.safetensors", "tensors": v_ts}]))

    for k, (a, b, n) in report.items():
        print("manifest %-6s tensors %s / %s, params %.4f B" % (k, a, b, n / 1e9))
    check("dit", abs(report["dit"][2] / 1e9 - 3.875) < 0.01, "DiT params")
    check("qwen3", abs(report["qwen3"][2] / 1e9 - 4.02) < 0.01, "Qwen3 params")
    check("vae", abs(report["vae"][2] / 1e6 - 84.0) < 1.0, "VAE params")


if __name__ == "__main__":
    common.deterministic()
    main()
