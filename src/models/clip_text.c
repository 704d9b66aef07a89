/* clip_text.c - CLIP text model forward (see clip_text.h), through the ops table.
 *
 * Per layer (transformers CLIPEncoderLayer): h = LN1(x); x += out_proj(attn(q, k, v)) with q/k/v projections
 * (biases), causal attention scaled by 1/sqrt(head_dim); h = LN2(x); x += fc2(quick_gelu(fc1(h))). Then the final
 * LayerNorm. quick_gelu(t) = t * sigmoid(1.702 t) is computed as silu(1.702 t) / 1.702 from the table's ops.
 */
#include "models/clip_text.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "models/views.h"

#define QUICK_GELU_K 1.702f

int kiln_clip_text_pool_row(const kiln_clip_text *m, const int32_t *ids, int seq) {
    int row = 0;
    if (m->eos_token_id == 2) { /* legacy configs: the first largest id */
        for (int i = 1; i < seq; i++)
            if (ids[i] > ids[row]) row = i;
        return row;
    }
    for (int i = 0; i < seq; i++)
        if (ids[i] == m->eos_token_id) return i;
    return 0;
}

#define CK(x)                                                                                                 \
    do {                                                                                                      \
        if ((s = (x)) != KILN_OK) goto done;                                                                  \
    } while (0)

kiln_status kiln_clip_text_encode(const kiln_clip_text *m, kiln_backend *be, const int32_t *ids, int batch, int seq,
                                  float *hidden, float *pooled, kiln_err *err) {
    const kiln_ops *op = be->ops;
    if (batch <= 0 || seq <= 0 || seq > m->n_positions)
        return KILN_FAIL(err, KILN_E_INVALID, "CLIP: %d x %d tokens (at most %lld positions)", batch, seq,
                         (long long)m->n_positions);
    const int64_t R = (int64_t)batch * seq, D = m->hidden, F = m->ffn;
    for (int64_t i = 0; i < R; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return KILN_FAIL(err, KILN_E_INVALID, "CLIP: token id %d outside the embedding (%lld rows)", ids[i],
                             (long long)m->vocab);
    kiln_status s = KILN_OK;
    /* the activations in the backend's dtype (bf16 on CUDA in FAST, as transformers runs a bf16 CLIP); the last
     * hidden state and the pooled output f32 */
    const kiln_dtype dt = kiln_backend_act_dtype(be);
    const size_t es = kiln_dtype_size(dt);
    void *x = op->alloc(be, (size_t)(R * D) * es), *h = op->alloc(be, (size_t)(R * D) * es);
    void *q = op->alloc(be, (size_t)(R * D) * es), *k = op->alloc(be, (size_t)(R * D) * es);
    void *v = op->alloc(be, (size_t)(R * D) * es), *att = op->alloc(be, (size_t)(R * D) * es);
    void *g = op->alloc(be, (size_t)(R * F) * es), *pos = op->alloc(be, (size_t)(seq * D) * es);
    float *own = hidden ? NULL : op->alloc(be, (size_t)(R * D) * 4);
    float *last = hidden ? hidden : own;
    if (!x || !h || !q || !k || !v || !att || !g || !pos || !last) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "CLIP: out of memory for activations (%d x %d tokens)", batch, seq);
        goto done;
    }
    kiln_tensor X = kiln_view_2d(x, dt, R, D), H = kiln_view_2d(h, dt, R, D), Qt = kiln_view_2d(q, dt, R, D);
    kiln_tensor Kt = kiln_view_2d(k, dt, R, D), Vt = kiln_view_2d(v, dt, R, D), A = kiln_view_2d(att, dt, R, D);
    kiln_tensor G = kiln_view_2d(g, dt, R, F), POS = kiln_view_2d(pos, dt, seq, D), LAST = kiln_f32_2d(last, R, D);
    kiln_epilogue add = {KILN_EPI_ADD, NULL};

    /* embeddings: token rows + position rows 0..seq-1 */
    kiln_tensor src = kiln_tensor_rows(&m->pos_embed, 0, seq);
    CK(op->copy(be, &POS, &src, err));
    for (int64_t i = 0; i < R; i++) {
        kiln_tensor t = kiln_tensor_rows(&m->tok_embed, ids[i], 1), dst = kiln_tensor_rows(&X, i, 1);
        CK(op->copy(be, &dst, &t, err));
    }
    for (int b = 0; b < batch; b++) {
        kiln_tensor xb = kiln_tensor_rows(&X, (int64_t)b * seq, seq);
        CK(op->add(be, &xb, &xb, &POS, err));
    }
    const float scale = 1.0f / sqrtf((float)m->head_dim);
    for (int l = 0; l < m->n_layers; l++) {
        const kiln_clip_layer *L = &m->layers[l];
        CK(op->layer_norm_modulate(be, &H, &X, &L->ln1_b, &L->ln1_scale, m->eps, err));
        CK(kiln_matmul(be, &Qt, &H, &L->wq, &L->bq, err));
        CK(kiln_matmul(be, &Kt, &H, &L->wk, &L->bk, err));
        CK(kiln_matmul(be, &Vt, &H, &L->wv, &L->bv, err));
        for (int b = 0; b < batch; b++) {
            kiln_tensor qb = kiln_tensor_rows(&Qt, (int64_t)b * seq, seq);
            kiln_tensor kb = kiln_tensor_rows(&Kt, (int64_t)b * seq, seq);
            kiln_tensor vb = kiln_tensor_rows(&Vt, (int64_t)b * seq, seq);
            kiln_tensor ab = kiln_tensor_rows(&A, (int64_t)b * seq, seq);
            CK(op->attention(be, &ab, &qb, &kb, &vb, m->n_heads, m->n_heads, scale, true, NULL, NULL, err));
        }
        CK(kiln_matmul_epi(be, &X, &A, &L->wo, &L->bo, &add, err));
        CK(op->layer_norm_modulate(be, &H, &X, &L->ln2_b, &L->ln2_scale, m->eps, err));
        CK(kiln_matmul(be, &G, &H, &L->w1, &L->b1, err));
        CK(op->scale_shift(be, &G, &G, QUICK_GELU_K, 0.0f, err));
        CK(op->silu(be, &G, &G, err));
        CK(op->scale_shift(be, &G, &G, 1.0f / QUICK_GELU_K, 0.0f, err));
        CK(kiln_matmul_epi(be, &X, &G, &L->w2, &L->b2, &add, err));
    }
    CK(op->layer_norm_modulate(be, &LAST, &X, &m->final_b, &m->final_scale, m->eps, err));
    kiln_tensor P = kiln_f32_2d(pooled, batch, D);
    for (int b = 0; b < batch; b++) {
        int row = kiln_clip_text_pool_row(m, ids + (size_t)b * seq, seq);
        kiln_tensor from = kiln_tensor_rows(&LAST, (int64_t)b * seq + row, 1), to = kiln_tensor_rows(&P, b, 1);
        CK(op->copy(be, &to, &from, err));
    }
    CK(op->sync(be, err));
done:
    op->free(be, x);
    op->free(be, h);
    op->free(be, q);
    op->free(be, k);
    op->free(be, v);
    op->free(be, att);
    op->free(be, g);
    op->free(be, pos);
    op->free(be, own);
    return s;
}
