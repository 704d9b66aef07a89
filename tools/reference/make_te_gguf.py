"""Text encoders as GGUF files in llama.cpp's naming and layout (the Qwen3 / T5 GGUFs ComfyUI-GGUF users run), and
transformers' output on the weights those files hold.

    /opt/kiln-ref/bin/python tools/reference/make_te_gguf.py      (regenerate.sh runs it)

Files are written with the `gguf` package (GGUFWriter) under llama.cpp's names and metadata keys (gguf-py's
constants, convert_hf_to_gguf.py's TextModel / T5EncoderModel set_gguf_parameters): general.architecture "qwen3"
(token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v / attn_output / attn_q_norm / attn_k_norm / ffn_norm /
ffn_gate / ffn_up / ffn_down, output_norm; qwen3.block_count, context_length, embedding_length,
feed_forward_length, attention.head_count, head_count_kv, key_length, value_length, rope.freq_base,
attention.layer_norm_rms_epsilon) and "t5encoder" (token_embd, enc.blk.N.attn_q / k / v / o, attn_rel_b in block 0,
attn_norm, ffn_gate / up / down, ffn_norm, enc.output_norm; t5encoder.context_length, embedding_length,
feed_forward_length, block_count, attention.head_count, key_length, value_length, layer_norm_epsilon,
relative_buckets_count, layer_norm_rms_epsilon). q/k rows are written in HF's order: llama.cpp's converter
permutes them only for LLaMA-family models (Qwen2/Qwen3 use NEOX RoPE on HF's rows, and ComfyUI-GGUF undoes a
permutation only for arch "llama"). Tokenizer keys (tokenizer.ggml.model and a short token list) are written too:
kiln must ignore them (it tokenises with data/tokenizer, as ComfyUI-GGUF uses its own tokenizers).

Types, as llama.cpp's tools choose them: 1-D tensors F32; F32 / F16 files all 2-D in that type; Q8_0: rows that are
whole 32-blocks Q8_0, else F16 (convert_hf_to_gguf's fallback); Q4_K: rows of whole 256-super-blocks Q4_K, else
Q5_0 when whole 32-blocks (llama-quantize's Q4_K fallback), else F16. Q8_0 and Q5_0 by gguf.quants.quantize; Q4_K
by make_quant_goldens.q4_k (the package has no K quantiser; gguf.quants.dequantize of the bytes is the reference).

Models:
  qwen3-q    a Qwen3 sized for the quantised types: hidden 256, 27 layers (klein reads hidden states 9, 18, 27; with
             exactly 27 the last is the final-normed one), 2 q / 1 kv heads x 16, FFN 32, vocab 256, eps 0.03 and
             rope theta 5000 (far from the defaults 1e-6 / 1e6 / 10000, so a wrong or missing key shows).
             Files tests/data/gguf/te/qwen3-q-{f32,f16,q8_0,q4_k}.gguf; golden gguf_te_qwen3: the features
             [h9 | h18 | h27] of Qwen3Model (transformers) on each file's dequantised weights for 2 x 32 random ids
             (the second sequence right-padded, attention mask passed) - features_<fmt> - and on the unquantised
             weights (features_ref, for the quality table).
  t5-q       a T5 v1.1 encoder likewise: d_model 256, 2 layers, 2 heads x d_kv 16, d_ff 64, vocab 256, 32 buckets
             (max distance 128: not stored in GGUF; llama.cpp's), eps 0.02. tests/data/gguf/te/t5-q-<fmt>.gguf;
             golden gguf_te_t5: T5EncoderModel's last_hidden_state for 2 x 64 random ids, no mask (FluxPipeline's).
  tiny Qwen3 the committed tiny klein text encoder (tests/data/tiny/diffusers/text_encoder, hidden 16, 30 layers)
             as Q8_0 (o_proj is the only matrix with whole 32-blocks: the rest fall back to F16, as llama.cpp's
             converter does): tests/data/gguf/te/qwen3-tiny-q8_0.gguf; golden gguf_te_klein_q8_0: the official
             Flux2KleinPipeline image with that text encoder's dequantised weights (the tiny DiT and VAE of
             tests/data/tiny/diffusers), and image_u8_bf16 on the unquantised text encoder.
  tiny T5    the committed tiny FLUX.1 T5 (tests/data/tiny/flux1, d_model 32) as Q8_0 (all but wo and the relative
             bias quantised, the token embedding included): tests/data/gguf/te/t5-tiny-q8_0.gguf; golden
             gguf_te_flux1_t5_q8_0: FluxPipeline's [dev] image with its dequantised weights.
"""
import copy
import json
import os

import numpy as np
import torch

import common
import make_goldens
import runs
import gguf
from gguf import GGMLQuantizationType as T
from make_quant_goldens import q4_k

OUT = os.path.join(common.DATA, "gguf", "te")
CORPUS = os.path.join(common.REPO, "tests", "fuzz", "corpus", "fuzz_gguf")
FORMATS = [("f32", T.F32), ("f16", T.F16), ("q8_0", T.Q8_0), ("q4_k", T.Q4_K)]
FMT_NAME = {t: n for n, t in FORMATS}
SEED = 20261203

QWEN3_Q = dict(vocab_size=256, hidden_size=256, intermediate_size=32, num_hidden_layers=27, num_attention_heads=2,
               num_key_value_heads=1, head_dim=16, rope_theta=5000.0, rms_norm_eps=0.03,
               max_position_embeddings=4096, tie_word_embeddings=True, attention_bias=False, hidden_act="silu")
T5_Q = dict(vocab_size=256, d_model=256, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
            relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=0.02,
            feed_forward_proj="gated-gelu", dropout_rate=0.0, is_encoder_decoder=False, use_cache=False,
            tie_word_embeddings=False)

# HF name (per block: after "model.layers.N." / "encoder.block.N.") -> llama.cpp name (after "blk.N." / "enc.blk.N.")
QWEN3_BLOCK = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
QWEN3_GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm"}
T5_BLOCK = {"layer.0.layer_norm": "attn_norm", "layer.0.SelfAttention.q": "attn_q", "layer.0.SelfAttention.k": "attn_k",
            "layer.0.SelfAttention.v": "attn_v", "layer.0.SelfAttention.o": "attn_o",
            "layer.0.SelfAttention.relative_attention_bias": "attn_rel_b", "layer.1.layer_norm": "ffn_norm",
            "layer.1.DenseReluDense.wi_0": "ffn_gate", "layer.1.DenseReluDense.wi_1": "ffn_up",
            "layer.1.DenseReluDense.wo": "ffn_down"}
T5_GLOBAL = {"shared": "token_embd", "encoder.final_layer_norm": "enc.output_norm"}


def gguf_name(hf, block_hf, block_gg, blocks, glob):
    stem = hf[: -len(".weight")]
    if stem in glob:
        return glob[stem] + ".weight"
    assert stem.startswith(block_hf), hf
    n, rest = stem[len(block_hf):].split(".", 1)
    return "%s%s.%s.weight" % (block_gg, n, blocks[rest])


def choose(x, want):
    """The GGML type of one tensor in a file of type want (llama.cpp's choices, see the module doc)."""
    if x.ndim == 1 or want == T.F32:
        return T.F32
    k = x.shape[-1]
    if want == T.F16:
        return T.F16
    if want == T.Q8_0:
        return T.Q8_0 if k % 32 == 0 else T.F16
    return T.Q4_K if k % 256 == 0 else T.Q5_0 if k % 32 == 0 else T.F16


def encode(x, qt):
    """(bytes to store, their dequantised float32 values)."""
    if qt == T.F32:
        return x, x.copy()
    if qt == T.F16:
        h = x.astype(np.float16)
        return h, h.astype(np.float32)
    q = q4_k(x) if qt == T.Q4_K else gguf.quants.quantize(x, qt)
    back = gguf.quants.dequantize(q, qt).reshape(x.shape).astype(np.float32)
    assert np.abs(back - x).max() <= np.abs(x).max() / 6 + 1e-6, qt
    return q, back


def write_gguf(path, arch, meta, tensors, want):
    """tensors: [(gguf name, float32 array)] in file order; meta(writer) adds the metadata. Returns
    ({gguf name: dequantised float32 array}, {type name: count})."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    w = gguf.GGUFWriter(path, arch)
    w.add_name("kiln tiny " + arch)
    meta(w)
    w.add_file_type({T.F32: 0, T.F16: 1, T.Q8_0: 7, T.Q4_K: 15}[want])
    w.add_tokenizer_model("gpt2" if arch == "qwen3" else "t5")
    w.add_token_list(["<pad>", "a", "b"])  # not the model's vocabulary: kiln must not read it
    deq, types = {}, {}
    for name, x in tensors:
        qt = choose(x, want)
        types[qt.name] = types.get(qt.name, 0) + 1
        q, back = encode(np.ascontiguousarray(x, dtype=np.float32), qt)
        if qt in (T.F32, T.F16):
            w.add_tensor(name, q)
        else:
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
        deq[name] = back
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return deq, types


def qwen3_meta(cfg, n_layers):
    def meta(w):
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(cfg["hidden_size"])
        w.add_block_count(n_layers)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(cfg["num_attention_heads"])
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_rope_freq_base(cfg["rope_theta"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    return meta


def t5_meta(cfg):
    def meta(w):
        w.add_context_length(512)  # n_positions absent: the converter's default
        w.add_embedding_length(cfg["d_model"])
        w.add_feed_forward_length(cfg["d_ff"])
        w.add_block_count(cfg["num_layers"])
        w.add_head_count(cfg["num_heads"])
        w.add_key_length(cfg["d_kv"])
        w.add_value_length(cfg["d_kv"])
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        w.add_relative_attn_buckets_count(cfg["relative_attention_num_buckets"])
        w.add_layer_norm_rms_eps(cfg["layer_norm_epsilon"])
    return meta


def qwen3_tensors(sd, n_layers):
    """The state dict in the converter's order: token_embd, the blocks, output_norm (tied lm_head: no output)."""
    out = [("token_embd.weight", sd["model.embed_tokens.weight"])]
    for i in range(n_layers):
        for hf in QWEN3_BLOCK:
            out.append(("blk.%d.%s.weight" % (i, QWEN3_BLOCK[hf]), sd["model.layers.%d.%s.weight" % (i, hf)]))
    out.append(("output_norm.weight", sd["model.norm.weight"]))
    return [(n, v.float().numpy()) for n, v in out]


def t5_tensors(sd, n_layers):
    out = [("token_embd.weight", sd["shared.weight"])]
    for i in range(n_layers):
        for hf in T5_BLOCK:
            key = "encoder.block.%d.%s.weight" % (i, hf)
            if key in sd:
                out.append(("enc.blk.%d.%s.weight" % (i, T5_BLOCK[hf]), sd[key]))
    out.append(("enc.output_norm.weight", sd["encoder.final_layer_norm.weight"]))
    return [(n, v.float().numpy()) for n, v in out]


def with_weights(model, deq, block_hf, block_gg, blocks, glob):
    """A copy of model holding the dequantised GGUF values (mapped back to its HF names)."""
    m = copy.deepcopy(model)
    sd = m.state_dict()
    new = {}
    for k in sd:
        if k in ("lm_head.weight", "encoder.embed_tokens.weight"):
            continue  # tied to the embedding
        if "relative_attention_bias" in k and not k.startswith(block_hf + "0."):
            continue
        new[k] = torch.from_numpy(deq[gguf_name(k, block_hf, block_gg, blocks, glob)]).reshape(sd[k].shape)
    missing, unexpected = m.load_state_dict(new, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight", "encoder.embed_tokens.weight"}, (missing, unexpected)
    if hasattr(m, "tie_weights"):
        m.tie_weights()
    return m.eval()


def randomise(m, g):
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if "norm" in name:
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif "embed" in name or "shared" in name or "relative_attention_bias" in name:
                v = torch.randn(p.shape, generator=g)
            else:
                v = torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).to(torch.float32))  # bf16-exact, like every tiny model


def every_format(gold, stem, key, write, model, run):
    """For each format: write(type) the file -> (dequantised weights, type counts), model(those) the HF model,
    run(model) its output: stored as <key>_<fmt> with the fp32-vs-fp64 tolerance; then the golden is saved."""
    for fmt, want in FORMATS:
        deq, types = write(want)
        m = model(deq)
        f32, f64 = run(m), run(copy.deepcopy(m).double())
        tol, s = make_goldens.tol32(f32, f64)
        gold.add("%s_%s" % (key, fmt), f32, tol=tol, spread=s)
        gold.set("types_" + fmt, json.dumps(types, sort_keys=True))
        print("%s-%s.gguf: %s" % (stem, fmt, types))
    print("golden:", gold.save())


def qwen3_features(m, ids, mask):
    with torch.no_grad():
        hs = m(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    return torch.cat([hs[9], hs[18], hs[27]], dim=-1)


def make_qwen3():
    from transformers import Qwen3Config, Qwen3Model
    torch.manual_seed(SEED)
    base = Qwen3Model(Qwen3Config(**QWEN3_Q)).to(torch.float32).eval()
    randomise(base, torch.Generator().manual_seed(SEED + 1))
    g = torch.Generator().manual_seed(SEED + 2)
    B, S = 2, 32
    ids = torch.randint(0, QWEN3_Q["vocab_size"], (B, S), generator=g)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, 20:] = 0
    ids[1, 20:] = 255  # right padding, as Flux2KleinPipeline pads
    sd = {("model." + k): v for k, v in base.state_dict().items()}
    L = QWEN3_Q["num_hidden_layers"]
    gold = common.Golden("gguf_te_qwen3", "f32", "Qwen3Model (transformers) features [h9|h18|h27] on the weights of "
                         "tests/data/gguf/te/qwen3-q-<fmt>.gguf (llama.cpp names), dequantised: features_<fmt>; "
                         "features_ref on the unquantised weights")
    gold.add("input_ids", ids)
    gold.add("attention_mask", mask)
    ref = qwen3_features(base, ids, mask)
    gold.add("features_ref", ref)
    every_format(gold, "qwen3-q", "features", lambda want: write_gguf(
        os.path.join(OUT, "qwen3-q-%s.gguf" % FMT_NAME[want]), "qwen3", qwen3_meta(QWEN3_Q, L), qwen3_tensors(sd, L),
        want), lambda deq: with_weights(base, deq, "layers.", "blk.", QWEN3_BLOCK,
                                        {"embed_tokens": "token_embd", "norm": "output_norm"}),
        lambda m: qwen3_features(m, ids, mask))


def make_t5():
    from transformers import T5Config, T5EncoderModel
    torch.manual_seed(SEED)
    base = T5EncoderModel(T5Config(**T5_Q)).to(torch.float32).eval()
    randomise(base, torch.Generator().manual_seed(SEED + 3))
    base.tie_weights()
    g = torch.Generator().manual_seed(SEED + 4)
    ids = torch.randint(0, T5_Q["vocab_size"], (2, 64), generator=g)
    sd = base.state_dict()
    gold = common.Golden("gguf_te_t5", "f32", "T5EncoderModel (transformers) last_hidden_state on the weights of "
                         "tests/data/gguf/te/t5-q-<fmt>.gguf (llama.cpp t5encoder names), dequantised: hidden_<fmt>; "
                         "hidden_ref on the unquantised weights; no attention mask (FluxPipeline's)")
    gold.add("input_ids", ids)
    with torch.no_grad():
        gold.add("hidden_ref", base(ids).last_hidden_state)
    def hidden(m):
        with torch.no_grad():
            return m(ids).last_hidden_state
    every_format(gold, "t5-q", "hidden", lambda want: write_gguf(
        os.path.join(OUT, "t5-q-%s.gguf" % FMT_NAME[want]), "t5encoder", t5_meta(T5_Q),
        t5_tensors(sd, T5_Q["num_layers"]), want),
        lambda deq: with_weights(base, deq, "encoder.block.", "enc.blk.", T5_BLOCK, T5_GLOBAL), hidden)


def make_klein():
    """The tiny klein text encoder as a Q8_0 GGUF, and the official image made with its dequantised weights."""
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline
    te = runs.text_encoder("f32")
    cfg = te.config
    L = cfg.num_hidden_layers
    meta = dict(max_position_embeddings=cfg.max_position_embeddings, hidden_size=cfg.hidden_size,
                intermediate_size=cfg.intermediate_size, num_attention_heads=cfg.num_attention_heads,
                num_key_value_heads=cfg.num_key_value_heads, rope_theta=cfg.rope_parameters["rope_theta"]
                if getattr(cfg, "rope_parameters", None) else cfg.rope_theta, rms_norm_eps=cfg.rms_norm_eps,
                head_dim=cfg.head_dim)
    deq, types = write_gguf(os.path.join(OUT, "qwen3-tiny-q8_0.gguf"), "qwen3", qwen3_meta(meta, L),
                            qwen3_tensors(te.state_dict(), L), T.Q8_0)
    te_q = with_weights(te, deq, "model.layers.", "blk.", QWEN3_BLOCK, QWEN3_GLOBAL)
    H, W, STEPS, SEED_IMG, PROMPT = 48, 64, 3, 2113, "a red fox in fresh snow"

    def image(text_encoder):
        sched = FlowMatchEulerDiscreteScheduler.from_pretrained(os.path.join(runs.DIF, "scheduler"))
        pipe = Flux2KleinPipeline(scheduler=sched, vae=runs.vae("f32"), text_encoder=text_encoder,
                                  tokenizer=runs.tokenizer(), transformer=runs.dit("f32"), is_distilled=True)
        pipe.set_progress_bar_config(disable=True)
        gen = torch.Generator().manual_seed(SEED_IMG)
        noise = runs.bf16_exact(torch.randn(1, 128, H // 16, W // 16, generator=gen))
        with torch.no_grad():
            pil = pipe(prompt=[PROMPT], height=H, width=W, num_inference_steps=STEPS, guidance_scale=1.0,
                       latents=noise, output_type="pil").images
        return noise, torch.from_numpy(np.stack([np.asarray(im) for im in pil]))

    noise, img = image(te_q)
    _, img_ref = image(te)
    gold = common.Golden("gguf_te_klein_q8_0", "f32", "Flux2KleinPipeline (distilled, f32) with the tiny text encoder "
                         "dequantised from tests/data/gguf/te/qwen3-tiny-q8_0.gguf; image_u8_bf16: with the "
                         "unquantised text encoder")
    gold.add("noise", noise, tol=(0, 0))
    gold.add("image_u8", img)
    gold.add("image_u8_bf16", img_ref)
    gold.set("prompts", json.dumps([PROMPT]))
    gold.set("height", H)
    gold.set("width", W)
    gold.set("steps", STEPS)
    gold.set("types", json.dumps(types, sort_keys=True))
    gold.set("file", "tests/data/gguf/te/qwen3-tiny-q8_0.gguf")
    print("qwen3-tiny-q8_0.gguf: %s" % types)
    print("golden:", gold.save())


def make_flux1():
    """The tiny FLUX.1 T5 (d_model 32: q/k/v/o, wi_0/wi_1 and the token embedding are whole 32-blocks) as Q8_0, and
    FluxPipeline's [dev] image with its dequantised weights (the flux1 quant goldens' prompt, size and seed)."""
    import make_flux1_pipeline_golden as f1
    import make_flux1_quant_goldens as fq
    pipe = f1.pipeline("dev", "f32")
    t5 = pipe.text_encoder_2
    cfg = t5.config
    meta = dict(d_model=cfg.d_model, d_ff=cfg.d_ff, num_layers=cfg.num_layers, num_heads=cfg.num_heads, d_kv=cfg.d_kv,
                layer_norm_epsilon=cfg.layer_norm_epsilon,
                relative_attention_num_buckets=cfg.relative_attention_num_buckets)
    assert cfg.relative_attention_max_distance == 128  # GGUF has no key for it: llama.cpp's 128
    deq, types = write_gguf(os.path.join(OUT, "t5-tiny-q8_0.gguf"), "t5encoder", t5_meta(meta),
                            t5_tensors(t5.state_dict(), cfg.num_layers), T.Q8_0)
    g = torch.Generator().manual_seed(fq.SEED)
    noise = runs.bf16_exact(torch.randn(1, f1.DIT["in_channels"], fq.H // 16, fq.W // 16, generator=g))
    ref_img = fq.run(pipe, noise)
    pipe.text_encoder_2 = with_weights(t5, deq, "encoder.block.", "enc.blk.", T5_BLOCK, T5_GLOBAL)
    img = fq.run(pipe, noise)
    gold = common.Golden("gguf_te_flux1_t5_q8_0", "f32", "FluxPipeline ([dev], f32) with the tiny T5 dequantised from "
                         "tests/data/gguf/te/t5-tiny-q8_0.gguf; image_u8_bf16: with the unquantised T5")
    gold.add("noise", noise, tol=(0, 0))
    gold.add("image_u8", img)
    gold.add("image_u8_bf16", ref_img)
    for k, v in (("prompts", json.dumps([fq.PROMPT])), ("height", fq.H), ("width", fq.W), ("steps", fq.STEPS),
                 ("guidance_scale", fq.GUIDANCE), ("max_sequence_length", fq.MAX_SEQ),
                 ("types", json.dumps(types, sort_keys=True)), ("file", "tests/data/gguf/te/t5-tiny-q8_0.gguf")):
        gold.set(k, v)
    print("t5-tiny-q8_0.gguf: %s" % types)
    print("golden:", gold.save())


def make_corpus():
    """Two small valid seeds for fuzz_gguf (tests/fuzz/corpus/fuzz_gguf/): a 2-layer Qwen3 and a 2-layer T5 encoder,
    hidden 32, Q8_0 (every row one block), so the fuzzer starts from files the text-encoder check accepts."""
    rng = np.random.default_rng(SEED)
    q = dict(max_position_embeddings=128, hidden_size=32, intermediate_size=32, num_attention_heads=2,
             num_key_value_heads=1, rope_theta=1e6, rms_norm_eps=1e-6, head_dim=16)
    sd = {"model.embed_tokens.weight": (8, 32), "model.norm.weight": (32,)}
    shapes = {"input_layernorm": (32,), "self_attn.q_proj": (32, 32), "self_attn.k_proj": (16, 32),
              "self_attn.v_proj": (16, 32), "self_attn.o_proj": (32, 32), "self_attn.q_norm": (16,),
              "self_attn.k_norm": (16,), "post_attention_layernorm": (32,), "mlp.gate_proj": (32, 32),
              "mlp.up_proj": (32, 32), "mlp.down_proj": (32, 32)}
    for i in range(2):
        for k, v in shapes.items():
            sd["model.layers.%d.%s.weight" % (i, k)] = v
    sd = {k: torch.from_numpy(rng.standard_normal(v).astype(np.float32)) for k, v in sd.items()}
    write_gguf(os.path.join(CORPUS, "qwen3-te.gguf"), "qwen3", qwen3_meta(q, 2), qwen3_tensors(sd, 2), T.Q8_0)
    t = dict(d_model=32, d_ff=32, num_layers=2, num_heads=2, d_kv=16, layer_norm_epsilon=1e-6,
             relative_attention_num_buckets=32)
    sd = {"shared.weight": (8, 32), "encoder.final_layer_norm.weight": (32,),
          "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": (32, 2)}
    shapes = {"layer.0.layer_norm": (32,), "layer.0.SelfAttention.q": (32, 32), "layer.0.SelfAttention.k": (32, 32),
              "layer.0.SelfAttention.v": (32, 32), "layer.0.SelfAttention.o": (32, 32), "layer.1.layer_norm": (32,),
              "layer.1.DenseReluDense.wi_0": (32, 32), "layer.1.DenseReluDense.wi_1": (32, 32),
              "layer.1.DenseReluDense.wo": (32, 32)}
    for i in range(2):
        for k, v in shapes.items():
            sd["encoder.block.%d.%s.weight" % (i, k)] = v
    sd = {k: torch.from_numpy(rng.standard_normal(v).astype(np.float32)) for k, v in sd.items()}
    write_gguf(os.path.join(CORPUS, "t5-te.gguf"), "t5encoder", t5_meta(t), t5_tensors(sd, 2), T.Q8_0)


def main():
    common.deterministic()
    make_qwen3()
    make_t5()
    make_klein()
    make_flux1()
    make_corpus()


if __name__ == "__main__":
    main()
