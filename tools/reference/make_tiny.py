"""Write the tiny klein models in both on-disk layouts (bf16), and prove the two layouts hold the same model.

Outputs (tests/data/tiny/):
  diffusers/            Flux2KleinPipeline folder, is_distilled true (model_index.json, transformer/,
                        text_encoder/ 2 shards + index, vae/, tokenizer/, scheduler/)
  diffusers-base/       klein "base" (is_distilled false): own model_index.json, subfolders are symlinks
                        to ../diffusers/* (same weights)
  comfy/flux-2-klein-4b.safetensors   DiT, BFL names (fused qkv, final layer shift-then-scale)
  comfy/qwen_3_4b.safetensors         Qwen3, HF names, one file, no lm_head (tied)
  comfy/flux2-vae.safetensors         VAE, DIFFUSERS names (what ComfyUI's file reportedly uses, spec 3.5)
  variants/<name>/      config variants (variants.py): own configs, symlinks to diffusers/ for the rest
Checks: our BFL DiT file, converted back by diffusers' own single-file converter, loads strictly into
Flux2Transformer2DModel and gives bit-identical tensors and outputs; the comfy Qwen3 / VAE files equal the
diffusers folder tensors.
"""
import json
import os
import shutil

import common  # noqa: F401  (sets offline + determinism env first)
import torch
from safetensors.torch import load_file

from common import save_safetensors as save_file  # sorted header: bit-for-bit reruns

import layouts
import tiny_models as tm
import variants

VERSIONS = common.versions()


def _bf16(sd):
    return {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in sd.items()}


def _model_index(distilled):
    return {
        "_class_name": "Flux2KleinPipeline",
        "_diffusers_version": VERSIONS["diffusers"],
        "is_distilled": distilled,
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "text_encoder": ["transformers", "Qwen3ForCausalLM"],
        "tokenizer": ["transformers", "Qwen2TokenizerFast"],
        "transformer": ["diffusers", "Flux2Transformer2DModel"],
        "vae": ["diffusers", "AutoencoderKLFlux2"],
    }


def scheduler():
    """The klein scheduler config (spec 4.1: dynamic shifting, exponential time shift; shift unused)."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True, time_shift_type="exponential"
    )


def write_text_encoder_shards(sd, cfg, folder):
    """Two shards + index like the real text_encoder/: embedding alone in shard 1, everything else in 2
    (the real split is by size; kiln must not depend on which tensor sits where)."""
    os.makedirs(folder, exist_ok=True)
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    first = {k: v for k, v in sd.items() if k == "model.embed_tokens.weight"}
    second = {k: v for k, v in sd.items() if k not in first}
    weight_map = {}
    total = 0
    for name, part in zip(names, (first, second)):
        save_file(part, os.path.join(folder, name), metadata={"format": "pt"})
        for k, v in part.items():
            weight_map[k] = name
            total += v.numel() * v.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    common.write_json(os.path.join(folder, "model.safetensors.index.json"), index)
    cfg.save_pretrained(folder)
    # transformers 5 writes rope_parameters / dtype; published Qwen3 configs (and older readers) use
    # rope_theta / torch_dtype. Write both so kiln is tested on the keys real files carry.
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        c = json.load(f)
    c.setdefault("rope_theta", c.get("rope_parameters", {}).get("rope_theta", 1000000.0))
    c.setdefault("torch_dtype", "bfloat16")
    c["architectures"] = ["Qwen3ForCausalLM"]
    common.write_json(path, dict(sorted(c.items())))


def _sha256(path):
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_tokenizer(tokdir):
    """tokenizer.json + tokenizer_config.json. The repository already holds the same bytes in
    data/tokenizer/qwen3 (11 MB), so link to them instead of committing a second copy; copy otherwise."""
    os.makedirs(tokdir)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(common.TOKENIZER_DIR, f)
        in_repo = os.path.join(common.REPO, "data", "tokenizer", "qwen3", f)
        if os.path.exists(in_repo) and _sha256(in_repo) == _sha256(src):
            os.symlink(os.path.relpath(in_repo, tokdir), os.path.join(tokdir, f))
        else:
            shutil.copyfile(src, os.path.join(tokdir, f))


def main():
    common.deterministic()
    root = common.TINY
    dif = os.path.join(root, "diffusers")
    comfy = os.path.join(root, "comfy")
    for d in (dif, comfy, os.path.join(root, "diffusers-base")):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(comfy)

    qwen, dit, vae = tm.build_qwen3(), tm.build_dit(), tm.build_vae()

    # diffusers folder ---------------------------------------------------------------------------
    common.write_json(os.path.join(dif, "model_index.json"), _model_index(True))
    dit_sd = _bf16(dit.state_dict())
    os.makedirs(os.path.join(dif, "transformer"))
    save_file(dit_sd, os.path.join(dif, "transformer", "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    dit.save_config(os.path.join(dif, "transformer"))
    vae_sd = _bf16(vae.state_dict())
    os.makedirs(os.path.join(dif, "vae"))
    save_file(vae_sd, os.path.join(dif, "vae", "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    vae.save_config(os.path.join(dif, "vae"))
    q_sd = _bf16(layouts.qwen3_hf_names(qwen.state_dict()))
    write_text_encoder_shards(q_sd, qwen.config, os.path.join(dif, "text_encoder"))
    scheduler().save_config(os.path.join(dif, "scheduler"))
    write_tokenizer(os.path.join(dif, "tokenizer"))

    # klein base: same weights, CFG on
    base = os.path.join(root, "diffusers-base")
    common.write_json(os.path.join(base, "model_index.json"), _model_index(False))
    for sub in ("transformer", "text_encoder", "vae", "tokenizer", "scheduler"):
        os.symlink(os.path.join("..", "diffusers", sub), os.path.join(base, sub))

    # ComfyUI / BFL single files -----------------------------------------------------------------
    bfl = layouts.dit_diffusers_to_bfl(dit_sd)
    save_file(bfl, os.path.join(comfy, "flux-2-klein-4b.safetensors"))
    save_file(q_sd, os.path.join(comfy, "qwen_3_4b.safetensors"), metadata={"format": "pt"})
    save_file(vae_sd, os.path.join(comfy, "flux2-vae.safetensors"), metadata={"format": "pt"})

    verify(dif, comfy)
    variants.write_folders()


def verify(dif, comfy):
    """Both layouts must hold the same model; checked with the official classes and converter."""
    from diffusers import AutoencoderKLFlux2, Flux2KleinPipeline, Flux2Transformer2DModel
    from diffusers.loaders.single_file_utils import convert_flux2_transformer_checkpoint_to_diffusers
    from transformers import Qwen3ForCausalLM

    ref = Flux2Transformer2DModel.from_pretrained(os.path.join(dif, "transformer"), torch_dtype=torch.float32).eval()
    bfl = load_file(os.path.join(comfy, "flux-2-klein-4b.safetensors"))
    assert len(bfl) == 4 + 3 + 12 * tm.DIT["num_layers"] + 4 * tm.DIT["num_single_layers"] + 2, len(bfl)
    conv = convert_flux2_transformer_checkpoint_to_diffusers(dict(bfl))
    other = Flux2Transformer2DModel.from_config(ref.config).eval()
    other.load_state_dict({k: v.float() for k, v in conv.items()}, strict=True)
    for k, v in ref.state_dict().items():
        assert torch.equal(v, other.state_dict()[k]), k
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 6, 128, generator=g)
    c = torch.randn(1, 7, tm.DIT["joint_attention_dim"], generator=g)
    img_ids = Flux2KleinPipeline._prepare_latent_ids(torch.zeros(1, 128, 2, 3))
    txt_ids = Flux2KleinPipeline._prepare_text_ids(c)
    args = dict(hidden_states=x, encoder_hidden_states=c, timestep=torch.tensor([0.7]), img_ids=img_ids,
                txt_ids=txt_ids, return_dict=False)
    with torch.no_grad():
        a, b = ref(**args)[0], other(**args)[0]
    assert torch.equal(a, b), (a - b).abs().max()

    te = Qwen3ForCausalLM.from_pretrained(os.path.join(dif, "text_encoder"), dtype=torch.bfloat16)
    single = load_file(os.path.join(comfy, "qwen_3_4b.safetensors"))
    for k, v in te.model.state_dict().items():
        assert torch.equal(v, single["model." + k]), k
    assert te.lm_head.weight.data_ptr() == te.model.embed_tokens.weight.data_ptr()
    vae = AutoencoderKLFlux2.from_pretrained(os.path.join(dif, "vae"), torch_dtype=torch.bfloat16)
    single = load_file(os.path.join(comfy, "flux2-vae.safetensors"))
    for k, v in vae.state_dict().items():
        assert torch.equal(v, single[k]), k
    print("make_tiny: layouts verified (BFL DiT round trip through diffusers converter is bit-exact)")


if __name__ == "__main__":
    main()
