"""Name/shape transforms between the diffusers layout and the BFL (ComfyUI single-file) layout.

Written from the spec's tables (spec 1.6, 1.7, 3.5), not from diffusers' converter, so that the converter can
check this writer: make_tiny.py converts our BFL file back with diffusers' own
convert_flux2_transformer_checkpoint_to_diffusers and requires identical tensors and outputs.
Works on real and on meta tensors (the full-size manifests use it on the meta device).
"""
import re

import torch

# --- DiT ---------------------------------------------------------------------------------------------

_DIT_TOP = {
    "x_embedder.weight": "img_in.weight",
    "context_embedder.weight": "txt_in.weight",
    "time_guidance_embed.timestep_embedder.linear_1.weight": "time_in.in_layer.weight",
    "time_guidance_embed.timestep_embedder.linear_2.weight": "time_in.out_layer.weight",
    "time_guidance_embed.guidance_embedder.linear_1.weight": "guidance_in.in_layer.weight",  # FLUX.2 dev only
    "time_guidance_embed.guidance_embedder.linear_2.weight": "guidance_in.out_layer.weight",
    "double_stream_modulation_img.linear.weight": "double_stream_modulation_img.lin.weight",
    "double_stream_modulation_txt.linear.weight": "double_stream_modulation_txt.lin.weight",
    "single_stream_modulation.linear.weight": "single_stream_modulation.lin.weight",
    "proj_out.weight": "final_layer.linear.weight",
}

# double block: diffusers suffix -> BFL suffix (qkv handled by fusing below)
_DIT_DOUBLE = {
    "attn.norm_q.weight": "img_attn.norm.query_norm.scale",
    "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
    "attn.to_out.0.weight": "img_attn.proj.weight",
    "ff.linear_in.weight": "img_mlp.0.weight",
    "ff.linear_out.weight": "img_mlp.2.weight",
    "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
    "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale",
    "attn.to_add_out.weight": "txt_attn.proj.weight",
    "ff_context.linear_in.weight": "txt_mlp.0.weight",
    "ff_context.linear_out.weight": "txt_mlp.2.weight",
}
_DIT_QKV = {  # BFL fused name -> diffusers q, k, v (rows stacked q then k then v)
    "img_attn.qkv.weight": ("attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight"),
    "txt_attn.qkv.weight": ("attn.add_q_proj.weight", "attn.add_k_proj.weight", "attn.add_v_proj.weight"),
}
_DIT_SINGLE = {
    "attn.to_qkv_mlp_proj.weight": "linear1.weight",
    "attn.to_out.weight": "linear2.weight",
    "attn.norm_q.weight": "norm.query_norm.scale",
    "attn.norm_k.weight": "norm.key_norm.scale",
}


def swap_halves(w):
    """diffusers AdaLayerNormContinuous rows are (scale, shift); BFL final_layer rows are (shift, scale)."""
    a, b = w.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


def dit_diffusers_to_bfl(sd):
    """diffusers Flux2Transformer2DModel state dict -> BFL flux-2 names. Raises on any unknown key."""
    out, used = {}, set()
    blocks = set()
    for k, v in sd.items():
        if k in _DIT_TOP:
            out[_DIT_TOP[k]] = v
            used.add(k)
        elif k == "norm_out.linear.weight":
            out["final_layer.adaLN_modulation.1.weight"] = swap_halves(v)
            used.add(k)
        m = re.match(r"transformer_blocks\.(\d+)\.(.*)$", k)
        if m:
            blocks.add(int(m.group(1)))
            if m.group(2) in _DIT_DOUBLE:
                out["double_blocks.%s.%s" % (m.group(1), _DIT_DOUBLE[m.group(2)])] = v
                used.add(k)
        m = re.match(r"single_transformer_blocks\.(\d+)\.(.*)$", k)
        if m and m.group(2) in _DIT_SINGLE:
            out["single_blocks.%s.%s" % (m.group(1), _DIT_SINGLE[m.group(2)])] = v
            used.add(k)
    for n in sorted(blocks):
        for fused, parts in _DIT_QKV.items():
            names = ["transformer_blocks.%d.%s" % (n, p) for p in parts]
            out["double_blocks.%d.%s" % (n, fused)] = torch.cat([sd[x] for x in names], dim=0)
            used.update(names)
    unknown = sorted(set(sd) - used)
    if unknown:
        raise KeyError("unmapped diffusers DiT keys: %s" % unknown[:8])
    return out


# --- VAE ---------------------------------------------------------------------------------------------

_VAE_RESNET = {"norm1": "norm1", "conv1": "conv1", "norm2": "norm2", "conv2": "conv2", "conv_shortcut": "nin_shortcut"}
_VAE_ATTN = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}


def _vae_mid(prefix, rest):
    m = re.match(r"resnets\.(\d)\.(\w+)\.(weight|bias)$", rest)
    if m:
        return "%s.mid.block_%d.%s.%s" % (prefix, int(m.group(1)) + 1, _VAE_RESNET[m.group(2)], m.group(3))
    m = re.match(r"attentions\.0\.(group_norm|to_q|to_k|to_v|to_out\.0)\.(weight|bias)$", rest)
    if m:
        return "%s.mid.attn_1.%s.%s" % (prefix, _VAE_ATTN[m.group(1)], m.group(2))
    return None


def vae_diffusers_to_bfl(sd, levels=4):
    """diffusers AutoencoderKLFlux2 state dict -> BFL/ldm ae names (spec 3.5). Attention linears become
    1x1 convs ([C,C] -> [C,C,1,1]). Raises on any unknown key."""
    out = {}
    for k, v in sd.items():
        new = None
        if k.startswith("bn."):
            new = k
        elif k.startswith("quant_conv."):
            new = "encoder." + k
        elif k.startswith("post_quant_conv."):
            new = "decoder." + k
        else:
            m = re.match(r"(encoder|decoder)\.(.*)$", k)
            side, rest = m.group(1), m.group(2)
            if rest.startswith(("conv_in.", "conv_out.")):
                new = k
            elif rest.startswith("conv_norm_out."):
                new = "%s.norm_out.%s" % (side, rest.split(".", 1)[1])
            elif rest.startswith("mid_block."):
                new = _vae_mid(side, rest[len("mid_block."):])
            else:
                m = re.match(r"down_blocks\.(\d)\.resnets\.(\d)\.(\w+)\.(weight|bias)$", rest)
                if m:
                    new = "encoder.down.%s.block.%s.%s.%s" % (m.group(1), m.group(2), _VAE_RESNET[m.group(3)], m.group(4))
                m = m or re.match(r"down_blocks\.(\d)\.downsamplers\.0\.conv\.(weight|bias)$", rest)
                if m and new is None:
                    new = "encoder.down.%s.downsample.conv.%s" % (m.group(1), m.group(2))
                m2 = re.match(r"up_blocks\.(\d)\.resnets\.(\d)\.(\w+)\.(weight|bias)$", rest)
                if m2:
                    lvl = levels - 1 - int(m2.group(1))
                    new = "decoder.up.%d.block.%s.%s.%s" % (lvl, m2.group(2), _VAE_RESNET[m2.group(3)], m2.group(4))
                m2 = m2 or re.match(r"up_blocks\.(\d)\.upsamplers\.0\.conv\.(weight|bias)$", rest)
                if m2 and new is None:
                    new = "decoder.up.%d.upsample.conv.%s" % (levels - 1 - int(m2.group(1)), m2.group(2))
        if new is None:
            raise KeyError("unmapped diffusers VAE key: %s" % k)
        if ".attn_1." in new and new.endswith(".weight") and v.ndim == 2 and ".norm." not in new:
            v = v.reshape(v.shape[0], v.shape[1], 1, 1)
        out[new] = v
    return out


# --- Qwen3 ---------------------------------------------------------------------------------------------


def qwen3_hf_names(sd):
    """HF Qwen3ForCausalLM state dict -> the names stored on disk (ComfyUI qwen_3_4b.safetensors and the
    diffusers text_encoder shards): identical names, minus the tied lm_head (not stored; tie_word_embeddings)."""
    return {k: v for k, v in sd.items() if k != "lm_head.weight"}
