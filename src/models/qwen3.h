/* qwen3.h - the Qwen3 text encoder as FLUX.2 [klein] uses it: decoder layers 0..26 only, features
 * [h9 | h18 | h27] (outputs of 0-based layers 8, 17, 26, no final norm), causal + padding mask (spec 2).
 *
 *     kiln_qwen3 *te;
 *     KILN_TRY(kiln_qwen3_load(ck, config_json_or_NULL, &te, &err));   // dims read from the weights' shapes
 *     float *feat = ...;                                                // [batch*seq, 3*hidden]
 *     KILN_TRY(kiln_qwen3_encode(te, be, ids, mask, batch, seq, feat, &err));
 *     kiln_qwen3_free(te);                                               // ck must outlive te
 *
 * Weights: HF names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...), the same in
 * the diffusers text_encoder/ shards and ComfyUI's qwen_3_4b.safetensors. Only layers 0..26 are touched, so
 * layers 27..35 are never paged in from the mapping.
 */
#ifndef KILN_MODELS_QWEN3_H
#define KILN_MODELS_QWEN3_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compute/comm.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/weights.h"

#define KILN_QWEN3_N_OUT 3
/* 0-based layers whose outputs form the features: hidden_states[9], [18], [27] of HF. */
#define KILN_QWEN3_OUT_LAYERS {8, 17, 26}

typedef struct kiln_qwen3_layer {
    kiln_tensor in_norm;   /* f32 [D]             input_layernorm */
    kiln_tensor wq;        /* [Hq*Dh, D]          self_attn.q_proj */
    kiln_tensor wk;        /* [Hkv*Dh, D]         self_attn.k_proj */
    kiln_tensor wv;        /* [Hkv*Dh, D]         self_attn.v_proj */
    kiln_tensor q_norm;    /* f32 [Dh]            self_attn.q_norm */
    kiln_tensor k_norm;    /* f32 [Dh]            self_attn.k_norm */
    kiln_tensor wo;        /* [D, Hq*Dh]          self_attn.o_proj */
    kiln_tensor post_norm; /* f32 [D]             post_attention_layernorm */
    kiln_tensor w_gate;    /* [F, D]              mlp.gate_proj */
    kiln_tensor w_up;      /* [F, D]              mlp.up_proj */
    kiln_tensor w_down;    /* [D, F]              mlp.down_proj */
} kiln_qwen3_layer;

typedef struct kiln_qwen3 {
    int hidden;            /* D: 2560 (4B) */
    int n_heads, n_kv_heads, head_dim; /* 32, 8, 128 */
    int ffn;               /* F: 9728 */
    int n_layers;          /* layers run: 27 */
    int n_config_layers;   /* num_hidden_layers (config, else the layers in the file): 36 */
    bool norm_last;        /* exactly 27 layers: hidden_states[27] is the final-normed output (transformers ties the
                            * last hidden state to last_hidden_state), so the third feature gets model.norm */
    kiln_tensor final_norm; /* f32 [D] model.norm (when norm_last) */
    int64_t vocab;         /* embedding rows: 151936 */
    float eps, theta;      /* 1e-6, 1e6 */
    bool rope_interleaved; /* q/k rows hold RoPE pairs (2i, 2i+1) rather than HF's (i, i+Dh/2): never for the
                            * layouts kiln reads (HF; llama.cpp's qwen3, whose converter keeps HF's rows) */
    int out_layers[KILN_QWEN3_N_OUT];
    kiln_tensor embed;     /* [V, D]              model.embed_tokens */
    kiln_qwen3_layer *layers;
    kiln_wset ws;
} kiln_qwen3;

/* ck may be a llama.cpp-named qwen3 GGUF (io/gguf_te.h; Q8_0, Q4_K, ... weights stay quantised, the token
 * embedding too): then its metadata gives eps (attention.layer_norm_rms_epsilon), theta (rope.freq_base) and the
 * layer count (block_count), and config_json is not read.
 * config_json: NULL (single files: Qwen3-4B's theta 1e6 and eps 1e-6, the layer count from the weights), or the
 * text_encoder/config.json path, read as transformers 5 reads it: rope_parameters.rope_theta, else a top-level
 * rope_theta, else 10000; rms_norm_eps; num_hidden_layers; tie_last_hidden_states. Refused by name: rope_type
 * other than "default", rope_scaling, per-layer-type rope_parameters, hidden_act other than silu,
 * attention_bias, a sliding window shorter than the 512-token sequence, fewer than 27 layers.
 * Errors: KILN_E_NOT_FOUND / KILN_E_FORMAT / KILN_E_UNSUPPORTED naming the tensor or the key. */
kiln_status kiln_qwen3_load(const kiln_st_file *ck, const char *config_json, kiln_qwen3 **out, kiln_err *err);
void kiln_qwen3_free(kiln_qwen3 *m);

/* Features for `batch` sequences of `seq` tokens: ids/mask [batch*seq] (mask 1 = real token), out f32
 * [batch*seq, 3*hidden] in the backend's memory (host memory on the CPU). Errors: KILN_E_INVALID for an id outside the embedding. */
kiln_status kiln_qwen3_encode(const kiln_qwen3 *m, kiln_backend *be, const int32_t *ids, const uint8_t *mask,
                              int batch, int seq, float *out, kiln_err *err);

/* The same over the ranks of tp (NULL or one rank: kiln_qwen3_encode; docs/parallel.md): each rank computes
 * H/t query heads, the key/value heads they read and F/t MLP units, from row views of q/k/v/gate/up and column
 * views of o_proj/down_proj; one all-reduce after each. Every rank gets the whole of out. KILN_E_INVALID when
 * kiln_qwen3_tp_check refuses t. */
kiln_status kiln_qwen3_encode_tp(const kiln_qwen3 *m, kiln_backend *be, kiln_comm *tp, const int32_t *ids,
                                 const uint8_t *mask, int batch, int seq, float *out, kiln_err *err);
/* KILN_OK when t divides the query heads and MLP units and each rank's heads are whole key/value groups or lie
 * in one (Qwen3-4B: 32 q / 8 kv heads: t = 2, 4, 8, 16, 32); else the reason. */
kiln_status kiln_qwen3_tp_check(const kiln_qwen3 *m, int t, kiln_err *err);

/* Bytes of activations kiln_qwen3_encode allocates for batch x seq, in dt (kiln_backend_act_dtype; f32 under TP). */
size_t kiln_qwen3_workspace(const kiln_qwen3 *m, int batch, int seq, kiln_dtype dt);

#endif
