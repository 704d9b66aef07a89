/* qwen3.c - Qwen3 decoder layers 0..26 -> FLUX.2 [klein] text features (see qwen3.h, spec 2.2-2.3). */
#include "models/qwen3.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "models/config.h"
#include "models/embed.h"
#include "models/rope_tables.h"
#include "models/views.h"

#define KLEIN_SEQ 512 /* the klein prompt template's token count */

/* Whether layer i (< 27) attends through a sliding window: Qwen3Config keeps sliding_window only with
 * use_sliding_window, then layer_types (else the layers from max_window_layers on) say which layers slide. */
static bool layer_slides(const json_t *c, int i) {
    if (!kiln_cfg_true(c, "use_sliding_window")) return false;
    const json_t *types = kiln_cfg_get(c, "layer_types");
    if (json_is_array(types)) {
        const char *t = json_string_value(json_array_get(types, (size_t)i));
        return t && !strcmp(t, "sliding_attention");
    }
    return i >= (int)kiln_cfg_num(c, "max_window_layers", 28);
}

/* text_encoder/config.json (see qwen3.h). */
static kiln_status read_config(kiln_qwen3 *m, const kiln_wset *ws, const char *path, kiln_err *err) {
    m->eps = 1e-6f;
    m->theta = 1e6f; /* Qwen3-4B's, for single files (no config) */
    m->n_config_layers = 0;
    while (kiln_w_has(ws, "model.layers.%d.input_layernorm.weight", m->n_config_layers)) m->n_config_layers++;
    const kiln_gguf_te *te = kiln_st_gguf_te(ws->ck);
    if (te) { /* a llama.cpp GGUF: its metadata is the config (validated against the tensors at open) */
        if (te->kind != KILN_GGUF_TE_QWEN3)
            return KILN_FAIL(err, KILN_E_FORMAT, "Qwen3: %s is a %s GGUF, not a Qwen3 text encoder",
                             kiln_st_label(ws->ck), te->arch);
        m->eps = (float)te->eps;                          /* qwen3.attention.layer_norm_rms_epsilon */
        m->theta = (float)te->theta;                      /* qwen3.rope.freq_base */
        m->n_config_layers = te->n_layers;                /* qwen3.block_count */
        m->norm_last = m->n_config_layers == m->n_layers; /* transformers ties the last hidden state */
        /* llama.cpp's converter permutes q/k rows into interleaved RoPE pairs only for LLaMA-family models;
         * Qwen2/Qwen3 keep HF's rows (NEOX RoPE), so nothing is undone here (ComfyUI-GGUF: only for "llama") */
        m->rope_interleaved = false;
        return KILN_OK;
    }
    json_t *c;
    KILN_TRY(kiln_config_open(path, &c, err));
    if (!c) {
        m->norm_last = m->n_config_layers == m->n_layers;
        return KILN_OK;
    }
    const char *w = "text_encoder/config.json";
    kiln_status s = KILN_OK;
    double theta = 10000.0, eps = m->eps; /* transformers' RotaryEmbeddingConfigMixin.default_theta */
    bool tie_last = true;
    const json_t *rp = kiln_cfg_get(c, "rope_parameters");
    if (kiln_cfg_get(c, "rope_scaling"))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: rope_scaling is not supported (kiln implements the default RoPE; "
                      "set it to null)", w);
    if (s == KILN_OK && rp && !json_is_object(rp))
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: rope_parameters must be an object", w);
    if (s == KILN_OK && rp && (json_object_get(rp, "full_attention") || json_object_get(rp, "sliding_attention")))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: rope_parameters per layer type is not supported", w);
    if (s == KILN_OK && rp) {
        const char *type = kiln_cfg_str(rp, "rope_type");
        if (!type) type = kiln_cfg_str(rp, "type");
        if (type && strcmp(type, "default"))
            s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: rope_parameters.rope_type \"%s\" is not supported (kiln "
                          "implements \"default\")", w, type);
    }
    /* priority as transformers 5: rope_parameters.rope_theta, then the top-level rope_theta, then 10000 */
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "rope_theta", &theta, err);
    const json_t *rt = rp ? kiln_cfg_get(rp, "rope_theta") : NULL;
    if (s == KILN_OK && rt && !json_is_number(rt))
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: rope_parameters.rope_theta must be a number", w);
    if (s == KILN_OK && rt) theta = json_number_value(rt);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "rms_norm_eps", &eps, err);
    if (s == KILN_OK) s = kiln_cfg_expect_str(c, w, "hidden_act", "silu", err);
    if (s == KILN_OK && kiln_cfg_true(c, "attention_bias"))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: attention_bias true is not supported (Qwen3 has none)", w);
    if (s == KILN_OK) s = kiln_cfg_int(c, w, "num_hidden_layers", &m->n_config_layers, err);
    if (s == KILN_OK) s = kiln_cfg_boolean(c, w, "tie_last_hidden_states", &tie_last, err);
    if (s == KILN_OK && m->n_config_layers < m->n_layers)
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: num_hidden_layers %d: FLUX.2 [klein] reads hidden_states 9, 18 "
                      "and 27, so the text encoder needs at least 27 layers", w, m->n_config_layers);
    for (int i = 0; s == KILN_OK && i < m->n_layers; i++) {
        double window = kiln_cfg_num(c, "sliding_window", 4096);
        if (layer_slides(c, i) && window < KLEIN_SEQ)
            s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: layer %d uses sliding_window %g, shorter than the %d-token "
                          "sequence (use_sliding_window / layer_types): not supported", w, i, window,
                          KLEIN_SEQ);
    }
    if (s == KILN_OK && !(theta > 0 && eps > 0))
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: rope_theta %g and rms_norm_eps %g must be positive", w, theta, eps);
    m->theta = (float)theta;
    m->eps = (float)eps;
    m->norm_last = m->n_config_layers == m->n_layers && tie_last;
    json_decref(c);
    return s;
}

kiln_status kiln_qwen3_load(const kiln_st_file *ck, const char *config_json, kiln_qwen3 **out, kiln_err *err) {
    kiln_qwen3 *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "Qwen3: out of memory");
    kiln_wset_init(&m->ws, ck, "text encoder (Qwen3)", err);
    kiln_wset *ws = &m->ws;
    const int outs[KILN_QWEN3_N_OUT] = KILN_QWEN3_OUT_LAYERS;
    memcpy(m->out_layers, outs, sizeof outs);
    m->n_layers = outs[KILN_QWEN3_N_OUT - 1] + 1;
    kiln_status s = read_config(m, ws, config_json, err);
    if (s != KILN_OK) goto fail;
    if ((s = kiln_w_mat(ws, &m->embed, -1, -1, "model.embed_tokens.weight")) != KILN_OK) goto fail;
    m->vocab = m->embed.shape[0];
    m->hidden = (int)m->embed.shape[1];
    kiln_tensor qn;
    if ((s = kiln_w_vec(ws, &qn, -1, "model.layers.0.self_attn.q_norm.weight")) != KILN_OK) goto fail;
    m->head_dim = (int)qn.shape[0];
    kiln_tensor t;
    if ((s = kiln_w_mat(ws, &t, -1, m->hidden, "model.layers.0.self_attn.q_proj.weight")) != KILN_OK) goto fail;
    m->n_heads = (int)(t.shape[0] / m->head_dim);
    if ((s = kiln_w_mat(ws, &t, -1, m->hidden, "model.layers.0.self_attn.k_proj.weight")) != KILN_OK) goto fail;
    m->n_kv_heads = (int)(t.shape[0] / m->head_dim);
    if ((s = kiln_w_mat(ws, &t, -1, m->hidden, "model.layers.0.mlp.gate_proj.weight")) != KILN_OK) goto fail;
    m->ffn = (int)t.shape[0];
    if (m->head_dim <= 0 || m->head_dim % 2 || m->n_heads <= 0 || m->n_kv_heads <= 0 ||
        m->n_heads % m->n_kv_heads) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "Qwen3: inconsistent head layout (head_dim %d, %d q heads, %d kv heads)",
                      m->head_dim, m->n_heads, m->n_kv_heads);
        goto fail;
    }
    if (!kiln_w_has(ws, "model.layers.%d.input_layernorm.weight", m->n_layers - 1)) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "Qwen3: FLUX.2 [klein] needs at least %d decoder layers (the features "
                      "are hidden states 9, 18 and 27); model.layers.%d is missing", m->n_layers, m->n_layers - 1);
        goto fail;
    }
    if (m->norm_last && (s = kiln_w_vec(ws, &m->final_norm, m->hidden, "model.norm.weight")) != KILN_OK) goto fail;
    m->layers = kiln_calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "Qwen3: out of memory");
        goto fail;
    }
    int D = m->hidden, Dh = m->head_dim, Q = m->n_heads * Dh, KV = m->n_kv_heads * Dh, F = m->ffn;
    for (int i = 0; i < m->n_layers; i++) {
        kiln_qwen3_layer *L = &m->layers[i];
        const char *p = "model.layers";
        if ((s = kiln_w_vec(ws, &L->in_norm, D, "%s.%d.input_layernorm.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wq, Q, D, "%s.%d.self_attn.q_proj.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wk, KV, D, "%s.%d.self_attn.k_proj.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wv, KV, D, "%s.%d.self_attn.v_proj.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->q_norm, Dh, "%s.%d.self_attn.q_norm.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->k_norm, Dh, "%s.%d.self_attn.k_norm.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wo, D, Q, "%s.%d.self_attn.o_proj.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->post_norm, D, "%s.%d.post_attention_layernorm.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->w_gate, F, D, "%s.%d.mlp.gate_proj.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->w_up, F, D, "%s.%d.mlp.up_proj.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->w_down, D, F, "%s.%d.mlp.down_proj.weight", p, i)))
            goto fail;
    }
    *out = m;
    return KILN_OK;
fail:
    kiln_qwen3_free(m);
    return s;
}

void kiln_qwen3_free(kiln_qwen3 *m) {
    if (!m) return;
    kiln_wset_free(&m->ws);
    kiln_free(m->layers);
    kiln_free(m);
}

size_t kiln_qwen3_workspace(const kiln_qwen3 *m, int batch, int seq, kiln_dtype dt) {
    size_t R = (size_t)batch * seq, D = m->hidden, Q = (size_t)m->n_heads * m->head_dim;
    size_t KV = (size_t)m->n_kv_heads * m->head_dim, F = m->ffn;
    return kiln_dtype_size(dt) * R * (2 * D + 2 * Q + 2 * KV + 2 * F) + sizeof(float) * (size_t)seq * m->head_dim + R;
}

/* X += a . w^T: fused into the residual on one rank; under TP this rank's columns c0.. of w, all-reduced. */
static kiln_status project_out(kiln_backend *be, kiln_comm *tp, kiln_tensor *X, const kiln_tensor *a,
                               const kiln_tensor *w, int64_t c0, kiln_tensor *part, const kiln_epilogue *add,
                               kiln_err *err) {
    if (!tp) return kiln_matmul_epi(be, X, a, w, NULL, add, err);
    kiln_tensor wc = kiln_cols(w, c0, a->shape[1]);
    KILN_TRY(kiln_matmul(be, part, a, &wc, NULL, err));
    KILN_TRY(tp->ops->all_reduce(tp, be, (float *)part->data, (size_t)(part->shape[0] * part->shape[1]), err));
    return be->ops->add(be, X, X, part, err);
}

#define CK(x)                                                                                                 \
    do {                                                                                                      \
        if ((s = (x)) != KILN_OK) goto done;                                                                  \
    } while (0)

kiln_status kiln_qwen3_tp_check(const kiln_qwen3 *m, int t, kiln_err *err) {
    const int g = m->n_heads / m->n_kv_heads, hq = t >= 1 ? m->n_heads / t : 0;
    if (t < 1 || m->n_heads % t || m->ffn % t || (hq % g && g % hq))
        return KILN_FAIL(err, KILN_E_INVALID, "tensor parallelism over %d ranks: the text encoder's %d query heads "
                         "(%d per key/value head) and %d MLP units cannot be split %d ways", t, m->n_heads, g, m->ffn,
                         t);
    for (int l = 0; l < m->n_layers; l++) {
        const kiln_tensor *w[] = {&m->layers[l].wo, &m->layers[l].w_down};
        for (int j = 0; j < 2; j++)
            if (w[j]->dtype == KILN_DT_QBLOCK)
                return KILN_FAIL(err, KILN_E_UNSUPPORTED, "tensor parallelism: the text encoder's GGUF-quantised "
                                 "weights cannot be split by columns; run without --tp");
    }
    return KILN_OK;
}

kiln_status kiln_qwen3_encode(const kiln_qwen3 *m, kiln_backend *be, const int32_t *ids, const uint8_t *mask,
                              int batch, int seq, float *out, kiln_err *err) {
    return kiln_qwen3_encode_tp(m, be, NULL, ids, mask, batch, seq, out, err);
}

kiln_status kiln_qwen3_encode_tp(const kiln_qwen3 *m, kiln_backend *be, kiln_comm *tp, const int32_t *ids,
                                 const uint8_t *mask, int batch, int seq, float *out, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t R = (int64_t)batch * seq, D = m->hidden, Dh = m->head_dim;
    /* Tensor parallelism: rank r of t takes query heads r*Hq/t.. and the key/value heads they read (a split of
     * them when each rank has whole groups, else the one group its heads share, computed on every rank of it),
     * MLP units r*F/t..; o_proj and down_proj take the matching columns and an all-reduce sums them. */
    if (tp && tp->size == 1) tp = NULL;
    if (tp) KILN_TRY(kiln_qwen3_tp_check(m, tp->size, err));
    const int t = tp ? tp->size : 1, r = tp ? tp->rank : 0, g = m->n_heads / m->n_kv_heads;
    const int hq = m->n_heads / t, kv0 = r * hq / g, hkv = (r * hq + hq - 1) / g + 1 - kv0;
    const int64_t Q = (int64_t)hq * Dh, KV = (int64_t)hkv * Dh, F = m->ffn / t;
    for (int64_t i = 0; i < R; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return KILN_FAIL(err, KILN_E_INVALID, "Qwen3: token id %d outside the embedding (%lld rows)", ids[i],
                             (long long)m->vocab);
    kiln_status s = KILN_OK;
    /* the activations in the backend's dtype (bf16 on CUDA in FAST, as transformers runs a bf16 Qwen3; f32 under
     * tensor parallelism, whose all-reduce sums f32), the RoPE tables and the features out in f32 */
    const kiln_dtype dt = tp ? KILN_DT_F32 : kiln_backend_act_dtype(be);
    const size_t es = kiln_dtype_size(dt);
    void *x = op->alloc(be, (size_t)(R * D) * es), *h = op->alloc(be, (size_t)(R * D) * es);
    void *q = op->alloc(be, (size_t)(R * Q) * es), *att = op->alloc(be, (size_t)(R * Q) * es);
    void *k = op->alloc(be, (size_t)(R * KV) * es), *v = op->alloc(be, (size_t)(R * KV) * es);
    void *gt = op->alloc(be, (size_t)(R * F) * es), *u = op->alloc(be, (size_t)(R * F) * es);
    float *cs = op->alloc(be, (size_t)(seq * Dh / 2) * 4), *sn = op->alloc(be, (size_t)(seq * Dh / 2) * 4);
    uint8_t *msk = op->alloc(be, (size_t)R);
    float *part = tp ? op->alloc(be, (size_t)(R * D) * 4) : NULL;
    if (!x || !h || !q || !att || !k || !v || !gt || !u || !cs || !sn || !msk || (tp && !part)) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "Qwen3: out of memory for activations (%d x %d tokens)", batch, seq);
        goto done;
    }
    /* Host-side tables, uploaded (a memcpy on the CPU). */
    {
        float *hc = kiln_malloc((size_t)(seq * Dh / 2) * 4), *hs = kiln_malloc((size_t)(seq * Dh / 2) * 4);
        if (!hc || !hs) {
            kiln_free(hc);
            kiln_free(hs);
            s = KILN_FAIL(err, KILN_E_NOMEM, "Qwen3: out of memory");
            goto done;
        }
        kiln_rope_qwen3(seq, (int)Dh, m->theta, hc, hs);
        s = op->upload(be, cs, hc, (size_t)(seq * Dh / 2) * 4, err);
        if (s == KILN_OK) s = op->upload(be, sn, hs, (size_t)(seq * Dh / 2) * 4, err);
        kiln_free(hc);
        kiln_free(hs);
        CK(s);
        CK(op->upload(be, msk, mask, (size_t)R, err));
    }
    kiln_tensor X = kiln_view_2d(x, dt, R, D), H = kiln_view_2d(h, dt, R, D);
    kiln_tensor Qt = kiln_view_2d(q, dt, R, Q), A = kiln_view_2d(att, dt, R, Q);
    kiln_tensor Kt = kiln_view_2d(k, dt, R, KV), Vt = kiln_view_2d(v, dt, R, KV);
    kiln_tensor G = kiln_view_2d(gt, dt, R, F), U = kiln_view_2d(u, dt, R, F);
    kiln_tensor COS = kiln_f32_2d(cs, seq, Dh / 2), SIN = kiln_f32_2d(sn, seq, Dh / 2);
    kiln_tensor OUT = kiln_f32_2d(out, R, 3 * D);
    kiln_epilogue add = {KILN_EPI_ADD, NULL};
    kiln_tensor PART = kiln_f32_2d(part, R, D);

    /* Embedding lookup: the tokens' rows as f32 (a quantised GGUF table: just those rows dequantised) */
    CK(kiln_embed_rows(be, &m->embed, ids, R, &X, "Qwen3", err));
    int next_out = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const kiln_qwen3_layer *L = &m->layers[l];
        /* attention */
        CK(op->rms_norm(be, &H, &X, &L->in_norm, m->eps, err));
        kiln_tensor wq = kiln_tensor_rows(&L->wq, r * Q, Q), wk = kiln_tensor_rows(&L->wk, kv0 * Dh, KV);
        kiln_tensor wv = kiln_tensor_rows(&L->wv, kv0 * Dh, KV);
        CK(kiln_matmul(be, &Qt, &H, &wq, NULL, err));
        CK(kiln_matmul(be, &Kt, &H, &wk, NULL, err));
        CK(kiln_matmul(be, &Vt, &H, &wv, NULL, err));
        CK(op->rms_norm(be, &Qt, &Qt, &L->q_norm, m->eps, err));
        CK(op->rms_norm(be, &Kt, &Kt, &L->k_norm, m->eps, err));
        for (int b = 0; b < batch; b++) {
            kiln_tensor qb = kiln_tensor_rows(&Qt, (int64_t)b * seq, seq);
            kiln_tensor kb = kiln_tensor_rows(&Kt, (int64_t)b * seq, seq);
            kiln_tensor vb = kiln_tensor_rows(&Vt, (int64_t)b * seq, seq);
            kiln_tensor ab = kiln_tensor_rows(&A, (int64_t)b * seq, seq);
            kiln_tensor mb = kiln_tensor_make(msk + (size_t)b * seq, KILN_DT_U8, 1, (int64_t[]){seq});
            CK(op->rope(be, &qb, &COS, &SIN, hq, m->rope_interleaved, err));
            CK(op->rope(be, &kb, &COS, &SIN, hkv, m->rope_interleaved, err));
            CK(op->attention(be, &ab, &qb, &kb, &vb, hq, hkv, 1.0f / sqrtf((float)Dh), true, &mb, NULL, err));
        }
        CK(project_out(be, tp, &X, &A, &L->wo, r * Q, &PART, &add, err));
        /* MLP */
        CK(op->rms_norm(be, &H, &X, &L->post_norm, m->eps, err));
        kiln_tensor wg = kiln_tensor_rows(&L->w_gate, r * F, F), wu = kiln_tensor_rows(&L->w_up, r * F, F);
        CK(kiln_matmul(be, &G, &H, &wg, NULL, err));
        CK(kiln_matmul(be, &U, &H, &wu, NULL, err));
        CK(op->silu_mul(be, &G, &G, &U, err));
        CK(project_out(be, tp, &X, &G, &L->w_down, r * F, &PART, &add, err));
        if (next_out < KILN_QWEN3_N_OUT && l == m->out_layers[next_out]) {
            kiln_tensor dst = kiln_cols(&OUT, next_out * D, D);
            bool normed = m->norm_last && l == m->n_layers - 1; /* hidden_states[27] of a 27-layer model */
            if (normed) CK(op->rms_norm(be, &H, &X, &m->final_norm, m->eps, err));
            CK(op->copy(be, &dst, normed ? &H : &X, err));
            next_out++;
        }
    }
    CK(op->sync(be, err));
done:
    op->free(be, x);
    op->free(be, h);
    op->free(be, q);
    op->free(be, att);
    op->free(be, k);
    op->free(be, v);
    op->free(be, gt);
    if (part) op->free(be, part);
    op->free(be, u);
    op->free(be, cs);
    op->free(be, sn);
    op->free(be, msk);
    return s;
}
