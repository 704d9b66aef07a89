/* qwen3.c - Qwen3 decoder layers 0..26 -> FLUX.2 [klein] text features (see qwen3.h, spec 2.2-2.3). */
#include "models/qwen3.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "models/config.h"
#include "models/rope_tables.h"
#include "models/views.h"

kiln_status kiln_qwen3_load(const kiln_st_file *ck, const char *config_json, kiln_qwen3 **out, kiln_err *err) {
    kiln_qwen3 *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "Qwen3: out of memory");
    kiln_wset_init(&m->ws, ck, "text encoder (Qwen3)", err);
    kiln_wset *ws = &m->ws;
    const int outs[KILN_QWEN3_N_OUT] = KILN_QWEN3_OUT_LAYERS;
    memcpy(m->out_layers, outs, sizeof outs);
    m->n_layers = outs[KILN_QWEN3_N_OUT - 1] + 1;
    m->eps = 1e-6f;
    m->theta = 1e6f;
    double v;
    if (kiln_config_number(config_json, "rope_theta", &v)) m->theta = (float)v;
    if (kiln_config_number(config_json, "rms_norm_eps", &v)) m->eps = (float)v;

    kiln_status s;
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

size_t kiln_qwen3_workspace(const kiln_qwen3 *m, int batch, int seq) {
    size_t R = (size_t)batch * seq, D = m->hidden, Q = (size_t)m->n_heads * m->head_dim;
    size_t KV = (size_t)m->n_kv_heads * m->head_dim, F = m->ffn;
    return sizeof(float) * (R * (2 * D + 2 * Q + 2 * KV + 2 * F) + (size_t)seq * m->head_dim) + R;
}

#define CK(x)                                                                                                 \
    do {                                                                                                      \
        if ((s = (x)) != KILN_OK) goto done;                                                                  \
    } while (0)

kiln_status kiln_qwen3_encode(const kiln_qwen3 *m, kiln_backend *be, const int32_t *ids, const uint8_t *mask,
                              int batch, int seq, float *out, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t R = (int64_t)batch * seq, D = m->hidden, Dh = m->head_dim;
    const int64_t Q = (int64_t)m->n_heads * Dh, KV = (int64_t)m->n_kv_heads * Dh, F = m->ffn;
    for (int64_t i = 0; i < R; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return KILN_FAIL(err, KILN_E_INVALID, "Qwen3: token id %d outside the embedding (%lld rows)", ids[i],
                             (long long)m->vocab);
    kiln_status s = KILN_OK;
    float *x = op->alloc(be, (size_t)(R * D) * 4), *h = op->alloc(be, (size_t)(R * D) * 4);
    float *q = op->alloc(be, (size_t)(R * Q) * 4), *att = op->alloc(be, (size_t)(R * Q) * 4);
    float *k = op->alloc(be, (size_t)(R * KV) * 4), *v = op->alloc(be, (size_t)(R * KV) * 4);
    float *g = op->alloc(be, (size_t)(R * F) * 4), *u = op->alloc(be, (size_t)(R * F) * 4);
    float *cs = op->alloc(be, (size_t)(seq * Dh / 2) * 4), *sn = op->alloc(be, (size_t)(seq * Dh / 2) * 4);
    uint8_t *msk = op->alloc(be, (size_t)R);
    if (!x || !h || !q || !att || !k || !v || !g || !u || !cs || !sn || !msk) {
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
    kiln_tensor X = kiln_f32_2d(x, R, D), H = kiln_f32_2d(h, R, D);
    kiln_tensor Qt = kiln_f32_2d(q, R, Q), A = kiln_f32_2d(att, R, Q);
    kiln_tensor Kt = kiln_f32_2d(k, R, KV), Vt = kiln_f32_2d(v, R, KV);
    kiln_tensor G = kiln_f32_2d(g, R, F), U = kiln_f32_2d(u, R, F);
    kiln_tensor COS = kiln_f32_2d(cs, seq, Dh / 2), SIN = kiln_f32_2d(sn, seq, Dh / 2);
    kiln_tensor OUT = kiln_f32_2d(out, R, 3 * D);
    kiln_epilogue add = {KILN_EPI_ADD, NULL};

    /* Embedding lookup: one row copy (bf16 -> f32) per token. */
    for (int64_t i = 0; i < R; i++) {
        kiln_tensor src = kiln_tensor_rows(&m->embed, ids[i], 1), dst = kiln_tensor_rows(&X, i, 1);
        CK(op->copy(be, &dst, &src, err));
    }
    int next_out = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const kiln_qwen3_layer *L = &m->layers[l];
        /* attention */
        CK(op->rms_norm(be, &H, &X, &L->in_norm, m->eps, err));
        CK(kiln_matmul(be, &Qt, &H, &L->wq, NULL, err));
        CK(kiln_matmul(be, &Kt, &H, &L->wk, NULL, err));
        CK(kiln_matmul(be, &Vt, &H, &L->wv, NULL, err));
        CK(op->rms_norm(be, &Qt, &Qt, &L->q_norm, m->eps, err));
        CK(op->rms_norm(be, &Kt, &Kt, &L->k_norm, m->eps, err));
        for (int b = 0; b < batch; b++) {
            kiln_tensor qb = kiln_tensor_rows(&Qt, (int64_t)b * seq, seq);
            kiln_tensor kb = kiln_tensor_rows(&Kt, (int64_t)b * seq, seq);
            kiln_tensor vb = kiln_tensor_rows(&Vt, (int64_t)b * seq, seq);
            kiln_tensor ab = kiln_tensor_rows(&A, (int64_t)b * seq, seq);
            kiln_tensor mb = kiln_tensor_make(msk + (size_t)b * seq, KILN_DT_U8, 1, (int64_t[]){seq});
            CK(op->rope(be, &qb, &COS, &SIN, m->n_heads, false, err));
            CK(op->rope(be, &kb, &COS, &SIN, m->n_kv_heads, false, err));
            CK(op->attention(be, &ab, &qb, &kb, &vb, m->n_heads, m->n_kv_heads, 1.0f / sqrtf((float)Dh), true,
                             &mb, err));
        }
        CK(kiln_matmul_epi(be, &X, &A, &L->wo, NULL, &add, err));
        /* MLP */
        CK(op->rms_norm(be, &H, &X, &L->post_norm, m->eps, err));
        CK(kiln_matmul(be, &G, &H, &L->w_gate, NULL, err));
        CK(kiln_matmul(be, &U, &H, &L->w_up, NULL, err));
        CK(op->silu_mul(be, &G, &G, &U, err));
        CK(kiln_matmul_epi(be, &X, &G, &L->w_down, NULL, &add, err));
        if (next_out < KILN_QWEN3_N_OUT && l == m->out_layers[next_out]) {
            kiln_tensor dst = kiln_cols(&OUT, next_out * D, D);
            CK(op->copy(be, &dst, &X, err));
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
    op->free(be, g);
    op->free(be, u);
    op->free(be, cs);
    op->free(be, sn);
    op->free(be, msk);
    return s;
}
