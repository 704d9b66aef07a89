/* gguf_te.h - text encoders as GGUF files in llama.cpp's naming (the Qwen3 and T5 files ComfyUI-GGUF users run):
 * recognised by general.architecture, validated against their metadata, renamed to the transformers names kiln's
 * loaders read.
 *
 *     kiln_gguf_te te;
 *     KILN_TRY(kiln_gguf_te_check(g, &te, &err));           // te.kind NONE: not a text encoder (a FLUX GGUF)
 *     char hf[256];
 *     kiln_gguf_te_hf_name(te.kind, "blk.3.attn_q.weight", hf, sizeof hf);   // "model.layers.3.self_attn.q_proj.weight"
 *
 * Architectures (facts from llama.cpp's gguf-py constants and convert_hf_to_gguf.py, and ComfyUI-GGUF's loader.py
 * maps, which kiln's names follow):
 *   "qwen3"            token_embd, output_norm, [output], blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
 *                      attn_q_norm, attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight
 *                      -> model.embed_tokens, model.norm, lm_head, model.layers.N.{input_layernorm, self_attn.q_proj,
 *                      ..k_proj, ..v_proj, ..o_proj, ..q_norm, ..k_norm, post_attention_layernorm, mlp.gate_proj,
 *                      mlp.up_proj, mlp.down_proj}.weight. NO q/k permutation: llama.cpp's converter permutes q/k
 *                      rows only for LLaMA-family models (rotate-half -> interleaved RoPE); Qwen2/Qwen3 keep HF's
 *                      rows (NEOX RoPE), and ComfyUI-GGUF undoes a permutation only for arch "llama".
 *   "t5encoder", "t5"  token_embd, enc.output_norm, enc.blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_o, attn_rel_b
 *                      (block 0 only), ffn_norm, ffn_gate, ffn_up, ffn_down}.weight -> shared, encoder.final_layer_norm,
 *                      encoder.block.N.layer.0.{layer_norm, SelfAttention.q/k/v/o, SelfAttention.relative_attention_bias},
 *                      layer.1.{layer_norm, DenseReluDense.wi_0, wi_1, wo}.weight. "t5" files also hold the decoder
 *                      (dec.*): kept under their own names, never read.
 *
 * Metadata read (ARCH.KEY; llama.cpp reads a model's hyperparameters only from its ARCH.* keys):
 *   qwen3: block_count, context_length, embedding_length, feed_forward_length, attention.head_count,
 *          attention.layer_norm_rms_epsilon (all required, as llama.cpp requires them); attention.head_count_kv
 *          (default head_count), attention.key_length / value_length (default embedding_length / head_count; must
 *          be equal), rope.freq_base (default 10000, llama.cpp's), rope.dimension_count (must be key_length: full
 *          rotary), vocab_size (must be token_embd's rows), rope.scaling.type (only "none"), rope.scaling.factor
 *          (only 0 or 1).
 *   t5:    block_count, embedding_length, feed_forward_length, attention.head_count, attention.key_length,
 *          attention.value_length (= key_length), attention.relative_buckets_count,
 *          attention.layer_norm_rms_epsilon (required); context_length, attention.layer_norm_epsilon (must equal the
 *          RMS one: the converter writes both from layer_norm_epsilon), decoder_start_token_id (the decoder's: unused).
 *          The bucket max distance is not in the file: 128, as llama.cpp and T5 v1.1 use.
 * Refused by name: any other ARCH.* key (a setting kiln would silently ignore), per-layer (array) values, a
 * split file (split.count > 1), rope_freqs.weight (custom RoPE frequencies), attn_rel_b beyond block 0 (UMT5), a T5
 * without ffn_gate (ungated T5 v1.0), any tensor name the architecture does not have, a block index at or past
 * block_count, a missing tensor, a tensor whose shape contradicts the metadata (the message names the key). Keys
 * outside ARCH.* (general.*, tokenizer.*, quantize.*) are not model parameters and are not read: the tokenizer
 * stored in these files is NOT used - kiln tokenises with its own (data/tokenizer), as ComfyUI-GGUF does.
 * Errors: KILN_E_FORMAT (malformed / contradictory), KILN_E_NOT_FOUND (missing tensor), KILN_E_UNSUPPORTED. */
#ifndef KILN_IO_GGUF_TE_H
#define KILN_IO_GGUF_TE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "io/gguf.h"

typedef enum kiln_gguf_te_kind { KILN_GGUF_TE_NONE = 0, KILN_GGUF_TE_QWEN3, KILN_GGUF_TE_T5 } kiln_gguf_te_kind;

#define KILN_GGUF_T5_MAX_DISTANCE 128 /* not stored in the file (llama.cpp's and T5 v1.1's) */

typedef struct kiln_gguf_te {
    kiln_gguf_te_kind kind;
    char arch[16];          /* general.architecture */
    int n_layers;           /* block_count */
    int hidden;             /* embedding_length */
    int ffn;                /* feed_forward_length */
    int n_heads, n_kv_heads; /* attention.head_count, head_count_kv (T5: = n_heads) */
    int head_dim;           /* attention.key_length */
    int64_t vocab;          /* token_embd rows */
    int64_t context;        /* context_length (0 when absent) */
    double eps;             /* attention.layer_norm_rms_epsilon */
    double theta;           /* Qwen3: rope.freq_base */
    int num_buckets;        /* T5: attention.relative_buckets_count */
} kiln_gguf_te;

/* Recognises and validates (see above). An architecture that is not a text encoder gives kind NONE and KILN_OK
 * (nothing else is checked). On failure *out is zeroed. */
kiln_status kiln_gguf_te_check(const kiln_gguf_file *g, kiln_gguf_te *out, kiln_err *err);

/* The transformers name of a tensor of a file of this kind (decoder tensors of a "t5" file: the name itself).
 * False for a name the architecture does not have (or out too small). */
bool kiln_gguf_te_hf_name(kiln_gguf_te_kind kind, const char *gguf_name, char *out, size_t cap);

const char *kiln_gguf_te_kind_name(kiln_gguf_te_kind kind); /* "qwen3", "t5", "none" */

#endif
