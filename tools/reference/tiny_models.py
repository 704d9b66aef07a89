"""Tiny FLUX.2 [klein] configurations and seeded random weights for the official classes.

Each tiny config keeps every structural feature of the real model (spec 1.1, 2.1, 3.1) and shrinks only the
widths, so a kiln bug in any structural place (GQA grouping, q/k norms, RoPE axes, shortcut convs, mid
attention, BN statistics, final-layer order) shows up in the goldens. Widths are chosen so that no two
different matrices are square by accident (a transposed load would then still "fit").

Weights: drawn with a fixed seed, then rounded to bf16, because the committed files are bf16 and kiln must
be compared on exactly the weights it loads. fp32 / fp64 goldens run the same bf16-exact values upcast.
"""
import torch

SEED = 20260115  # klein release date; any fixed value works

# Qwen3 text encoder (real: 2560 hidden, 36 layers, 32 q / 8 kv heads x 128, 9728 FFN, vocab 151936).
# 30 layers so that layers beyond the last used one (index 26) exist and must be skipped, like the real 36.
QWEN3 = dict(
    vocab_size=151936,  # the REAL vocab: the tokenizer's ids go up to 151668
    hidden_size=16,  # small: the real-size vocab x hidden embedding dominates the committed bytes
    intermediate_size=56,
    num_hidden_layers=30,
    num_attention_heads=4,  # GQA 4:1 like the real 32:8
    num_key_value_heads=1,
    head_dim=16,  # q_proj out = 64 > hidden 16, like the real 4096 > 2560
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=40960,
    tie_word_embeddings=True,
    attention_bias=False,
    hidden_act="silu",
)

# FLUX.2 DiT (real klein 4B: 24 heads x 128, 5 double, 20 single, joint 7680, axes 4 x 32, theta 2000).
DIT = dict(
    patch_size=1,
    in_channels=128,
    out_channels=None,
    num_layers=2,
    num_single_layers=3,  # unequal counts catch a loop over the wrong block list
    attention_head_dim=32,
    num_attention_heads=2,  # inner 64 != joint 48, so txt_in is not square
    joint_attention_dim=48,  # 3 x Qwen hidden (16)
    timestep_guidance_channels=256,
    mlp_ratio=3.0,
    axes_dims_rope=[8, 8, 8, 8],  # 4 axes summing to the head dim
    rope_theta=2000,
    eps=1e-6,
    guidance_embeds=False,
)

# FLUX.2 VAE (real: 128,256,512,512; 2 res blocks; 32 latent ch; GroupNorm 32; BN over 128 patchified ch).
# 64 -> 32 between the last two decoder levels keeps a 1x1 shortcut conv; GroupNorm(32) needs multiples of 32.
VAE = dict(
    in_channels=3,
    out_channels=3,
    down_block_types=["DownEncoderBlock2D"] * 4,
    up_block_types=["UpDecoderBlock2D"] * 4,
    block_out_channels=[32, 64, 64, 64],
    layers_per_block=2,
    act_fn="silu",
    latent_channels=32,
    norm_num_groups=32,
    sample_size=1024,
    use_quant_conv=True,
    use_post_quant_conv=True,
    mid_block_add_attention=True,
    batch_norm_eps=1e-4,
    batch_norm_momentum=0.1,
    patch_size=[2, 2],
)


def _randomize(module, gen, std_scale=1.0):
    """Overwrite every parameter and buffer with seeded values, deterministic in name order.

    Matrices / convs: N(0, 1/fan_in) so activations keep unit scale through deep stacks (the libraries'
    default 0.02 init would make the tiny layers near-identities and hide bugs). Norm gains: 1 + 0.2 N(0,1);
    norm / conv biases: 0.1 N(0,1); BN running stats: mean 0.5 N(0,1), var in [0.25, 2.25).
    """
    for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
        with torch.no_grad():
            if p.ndim == 1:
                leaf = name.rsplit(".", 1)[-1]
                if leaf == "bias":
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
                else:  # gains of RMSNorm / GroupNorm / q,k norms
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel() if "embed_tokens" not in name else 1
                p.copy_(torch.randn(p.shape, generator=gen) * (std_scale / fan_in**0.5))
    for name, b in sorted(module.named_buffers(), key=lambda kv: kv[0]):
        with torch.no_grad():
            if name.endswith("running_mean"):
                b.copy_(0.5 * torch.randn(b.shape, generator=gen))
            elif name.endswith("running_var"):
                b.copy_(0.25 + 2.0 * torch.rand(b.shape, generator=gen))


def _round_bf16(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))
        for name, b in module.named_buffers():
            if b.is_floating_point() and ("running" in name):
                b.copy_(b.to(torch.bfloat16).to(b.dtype))


def qwen3_config():
    from transformers import Qwen3Config

    return Qwen3Config(**QWEN3, bos_token_id=151643, eos_token_id=151645, dtype="bfloat16")


def build_qwen3():
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(SEED)
    m = Qwen3ForCausalLM(qwen3_config()).to(torch.float32).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    _randomize(m.model, g)
    _round_bf16(m)
    m.tie_weights()
    return m


def build_dit():
    from diffusers import Flux2Transformer2DModel

    torch.manual_seed(SEED)
    m = Flux2Transformer2DModel(**DIT).to(torch.float32).eval()
    g = torch.Generator().manual_seed(SEED + 2)
    _randomize(m, g)
    _round_bf16(m)
    return m


def build_vae():
    from diffusers import AutoencoderKLFlux2

    torch.manual_seed(SEED)
    m = AutoencoderKLFlux2(**VAE).to(torch.float32).eval()
    g = torch.Generator().manual_seed(SEED + 3)
    _randomize(m, g)
    _round_bf16(m)
    return m
