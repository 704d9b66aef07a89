/* clip_text.h - the CLIP ViT-L/14 text model as FLUX.1 uses it (transformers CLIPTextModel): token + position
 * embeddings, pre-LN transformer layers (causal self-attention, quick-GELU MLP), final LayerNorm; FluxPipeline
 * feeds the DiT the pooled output, the final-normed hidden state at the EOS position.
 *
 *     kiln_clip_text *te;
 *     KILN_TRY(kiln_clip_text_load(ck, config_json_or_NULL, &te, &err));  // dims from the weights' shapes
 *     KILN_TRY(kiln_clip_text_encode(te, be, ids, batch, 77, hidden_or_NULL, pooled, &err));
 *     kiln_clip_text_free(te);                                            // ck must outlive te
 *
 * Weights: HF names (text_model.embeddings.token_embedding.weight, text_model.encoder.layers.N.self_attn.q_proj.
 * weight, ...), as in a FLUX.1 diffusers folder's text_encoder/ and ComfyUI's clip_l.safetensors.
 * Pooling follows transformers: with the legacy eos_token_id 2 (openai/clip-vit-large-patch14's config) the row
 * of the largest id (its first occurrence: <|endoftext|> 49407 is the largest id), otherwise the first row whose
 * id is eos_token_id (row 0 when there is none, as torch's argmax of an all-zero row gives).
 */
#ifndef KILN_MODELS_CLIP_TEXT_H
#define KILN_MODELS_CLIP_TEXT_H

#include <stdint.h>

#include "base/status.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/weights.h"

typedef struct kiln_clip_layer {
    kiln_tensor ln1_scale, ln1_b; /* f32 [D]: layer_norm1 weight - 1 (layer_norm_modulate's form), bias */
    kiln_tensor wq, wk, wv, wo;   /* [D, D]    self_attn.{q,k,v,out}_proj.weight */
    kiln_tensor bq, bk, bv, bo;   /* f32 [D]   their biases */
    kiln_tensor ln2_scale, ln2_b; /* f32 [D]   layer_norm2 */
    kiln_tensor w1, w2;           /* [F, D], [D, F] mlp.fc1 / mlp.fc2 .weight */
    kiln_tensor b1, b2;           /* f32 [F], [D] */
} kiln_clip_layer;

typedef struct kiln_clip_text {
    int hidden, n_heads, head_dim, ffn, n_layers; /* 768, 12, 64, 3072, 12 for CLIP-L */
    int64_t vocab, n_positions;                   /* 49408, 77 */
    float eps;                                    /* layer_norm_eps, 1e-5 */
    int32_t eos_token_id;                         /* 2 (legacy: pool at the argmax) */
    kiln_tensor tok_embed;                        /* [V, D] */
    kiln_tensor pos_embed;                        /* [P, D] */
    kiln_tensor final_scale, final_b;             /* f32 [D] final_layer_norm (weight - 1, bias) */
    kiln_clip_layer *layers;
    kiln_wset ws;
} kiln_clip_text;

/* config_json: NULL (ComfyUI's clip_l file: CLIP-L's defaults, 12 heads, quick_gelu, eps 1e-5, eos 2) or the
 * text_encoder/config.json (num_attention_heads, layer_norm_eps, eos_token_id, hidden_act read; the sizes it
 * states must agree with the weights). Errors: KILN_E_NOT_FOUND / KILN_E_FORMAT naming the tensor or key,
 * KILN_E_UNSUPPORTED for a hidden_act other than quick_gelu. */
kiln_status kiln_clip_text_load(const kiln_st_file *ck, const char *config_json, kiln_clip_text **out,
                                kiln_err *err);
void kiln_clip_text_free(kiln_clip_text *m);

/* batch sequences of seq ids (seq <= n_positions; no attention mask: FluxPipeline passes none, only the causal
 * one applies). hidden: NULL or f32 [batch*seq, D] (last_hidden_state, after the final LayerNorm); pooled: f32
 * [batch, D]. Both in the backend's memory (host memory on the CPU). Errors: KILN_E_INVALID for an id outside the
 * embedding or seq outside 1..n_positions. */
kiln_status kiln_clip_text_encode(const kiln_clip_text *m, kiln_backend *be, const int32_t *ids, int batch, int seq,
                                  float *hidden, float *pooled, kiln_err *err);

/* The row FluxPipeline pools for one sequence of ids (see above). */
int kiln_clip_text_pool_row(const kiln_clip_text *m, const int32_t *ids, int seq);

#endif
