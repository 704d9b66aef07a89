/* t5_encoder.h - the T5 v1.1 encoder as FLUX.1 uses it (transformers T5EncoderModel, text_encoder_2): token
 * embedding (no position embedding, no scaling), per layer a pre-RMS-norm self-attention with a relative position
 * bias (layer 0's buckets, shared by every layer; attention logits NOT scaled by 1/sqrt(d)) and a pre-RMS-norm
 * gated-GELU FFN (gelu_new(wi_0 h) * wi_1 h -> wo), then the final RMS norm: last_hidden_state, which FluxPipeline
 * passes to the DiT as prompt_embeds. FluxPipeline gives T5 no attention mask: padding tokens are attended to.
 *
 *     kiln_t5_encoder *te;
 *     KILN_TRY(kiln_t5_encoder_load(ck, config_json_or_NULL, &te, &err));
 *     KILN_TRY(kiln_t5_encoder_encode(te, be, ids, batch, 512, hidden, &err));   // hidden f32 [batch*seq, D]
 *     kiln_t5_encoder_free(te);
 *
 * Weights: HF names (shared.weight or encoder.embed_tokens.weight, encoder.block.N.layer.0.SelfAttention.q.weight,
 * ...layer.1.DenseReluDense.wi_0.weight, encoder.final_layer_norm.weight), as in a FLUX.1 diffusers folder's
 * text_encoder_2/ and ComfyUI's t5xxl files.
 */
#ifndef KILN_MODELS_T5_ENCODER_H
#define KILN_MODELS_T5_ENCODER_H

#include <stdint.h>

#include "base/status.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/weights.h"

typedef struct kiln_t5_layer {
    kiln_tensor attn_norm;      /* f32 [D]   layer.0.layer_norm */
    kiln_tensor wq, wk, wv;     /* [H*Dk, D] layer.0.SelfAttention.{q,k,v} */
    kiln_tensor wo;             /* [D, H*Dk] layer.0.SelfAttention.o */
    kiln_tensor ffn_norm;       /* f32 [D]   layer.1.layer_norm */
    kiln_tensor wi0, wi1;       /* [F, D]    layer.1.DenseReluDense.wi_0 / wi_1 */
    kiln_tensor wo_ff;          /* [D, F]    layer.1.DenseReluDense.wo */
} kiln_t5_layer;

typedef struct kiln_t5_encoder {
    int d_model, n_heads, d_kv, d_ff, n_layers; /* 4096, 64, 64, 10240, 24 for T5-XXL */
    int num_buckets, max_distance;              /* 32, 128 */
    int64_t vocab;                              /* 32128 */
    float eps;                                  /* 1e-6 */
    kiln_tensor embed;                          /* [V, D] */
    kiln_tensor rel_bias;                       /* [num_buckets, H]: layer 0's relative_attention_bias (a view
                                                   of the mapping: read on the host to build the bias table) */
    kiln_tensor final_norm;                     /* f32 [D] */
    kiln_t5_layer *layers;
    kiln_wset ws;
} kiln_t5_encoder;

/* ck may be a llama.cpp-named t5encoder GGUF (io/gguf_te.h, city96's t5-v1_1-xxl-encoder-*.gguf): its metadata
 * gives d_kv, num_heads, the bucket count and eps (max distance 128, as llama.cpp), config_json is not read, and
 * quantised weights stay quantised (the token embedding too; a quantised relative bias is dequantised).
 * config_json: NULL (ComfyUI's t5xxl file: T5 v1.1 XXL's d_kv 64, 32 buckets, max distance 128, eps 1e-6,
 * gated-gelu) or text_encoder_2/config.json (num_heads, d_kv, relative_attention_num_buckets /
 * _max_distance, layer_norm_epsilon, feed_forward_proj / dense_act_fn / is_gated_act read; the sizes it states
 * must agree with the weights). Errors: KILN_E_NOT_FOUND / KILN_E_FORMAT naming the tensor or key,
 * KILN_E_UNSUPPORTED for another FFN (relu, ungated). */
kiln_status kiln_t5_encoder_load(const kiln_st_file *ck, const char *config_json, kiln_t5_encoder **out,
                                 kiln_err *err);
void kiln_t5_encoder_free(kiln_t5_encoder *m);

/* last_hidden_state for batch sequences of seq ids: hidden f32 [batch*seq, D] in the backend's memory.
 * Errors: KILN_E_INVALID for an id outside the embedding or seq < 1. */
kiln_status kiln_t5_encoder_encode(const kiln_t5_encoder *m, kiln_backend *be, const int32_t *ids, int batch,
                                   int seq, float *hidden, kiln_err *err);

/* transformers' T5Attention._relative_position_bucket, bidirectional (the encoder's), for one relative position
 * (key position - query position), computed in float32 as torch does. */
int kiln_t5_relative_bucket(int relative_position, int num_buckets, int max_distance);

#endif
