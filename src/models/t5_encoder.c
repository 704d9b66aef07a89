/* t5_encoder.c - T5 v1.1 encoder forward (see t5_encoder.h), through the ops table.
 *
 * Per layer, as transformers' T5Block (T5LayerSelfAttention, then T5LayerFF with T5DenseGatedActDense):
 *   h = rms_norm(x); q, k, v = h wq^T, h wk^T, h wv^T
 *   attention: one op per sequence over all heads, softmax(q k^T + position_bias) v - T5 does not scale the
 *     scores (scale 1.0); the position bias is the op's additive bias, the [H * S, S] table below
 *   x += att wo^T                              (the matmul's ADD epilogue)
 *   h = rms_norm(x); z = gelu_new(h wi_0^T) * (h wi_1^T)   (gelu_mul); x += z wo_ff^T
 * so a layer is 10 ops plus 1 attention per sequence, whatever the head count (it was 6 ops per sequence and
 * head and 1 per token besides, before the attention op took a bias: ~21,800 ops for a T5-XXL prompt, now 264).
 * The bias table (row h*S + i: query i of head h over the keys) is built on the host from layer 0's bucket
 * embedding (only layer 0 has one; every layer reuses it) and uploaded once per call.
 */
#include "models/t5_encoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "models/embed.h"
#include "models/views.h"
#include "tensor/quant.h"

int kiln_t5_relative_bucket(int rp, int num_buckets, int max_distance) {
    int ret = 0, nb = num_buckets / 2;
    if (rp > 0) ret += nb;
    rp = abs(rp);
    int max_exact = nb / 2;
    if (rp < max_exact) return ret + rp;
    /* torch: log(rp.float() / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact), in float32 */
    float t = logf((float)rp / (float)max_exact) / (float)log((double)max_distance / max_exact) * (float)(nb - max_exact);
    int large = max_exact + (int)t;
    if (large > nb - 1) large = nb - 1;
    return ret + large;
}

/* bias[h*S + i][j] = rel_bias[bucket(j - i)][h] */
static kiln_status bias_table(const kiln_t5_encoder *m, int seq, float **out, kiln_err *err) {
    size_t H = (size_t)m->n_heads, S = (size_t)seq, nb = (size_t)m->num_buckets;
    float *emb = kiln_malloc(nb * H * sizeof *emb), *t = kiln_malloc(H * S * S * sizeof *t);
    int *bucket = kiln_malloc((2 * S) * sizeof *bucket);
    if (!emb || !t || !bucket) {
        kiln_free(emb);
        kiln_free(t);
        kiln_free(bucket);
        return KILN_FAIL(err, KILN_E_NOMEM, "T5: out of memory for the %d-token position bias", seq);
    }
    if (m->rel_bias.dtype == KILN_DT_QBLOCK) { /* a GGUF may quantise it: whole rows of blocks, one run */
        kiln_status s = kiln_dequant(emb, m->rel_bias.qtype, m->rel_bias.data, nb * H, err);
        if (s != KILN_OK) {
            kiln_free(emb);
            kiln_free(t);
            kiln_free(bucket);
            return kiln_err_prefix(err, "T5: relative attention bias: ");
        }
    } else {
        kiln_to_f32(emb, m->rel_bias.data, m->rel_bias.dtype, nb * H);
    }
    for (size_t d = 0; d < 2 * S - 1; d++) bucket[d] = kiln_t5_relative_bucket((int)d - (int)(S - 1), m->num_buckets, m->max_distance);
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < S; i++)
            for (size_t j = 0; j < S; j++) t[(h * S + i) * S + j] = emb[(size_t)bucket[j + S - 1 - i] * H + h];
    kiln_free(emb);
    kiln_free(bucket);
    *out = t;
    return KILN_OK;
}

#define CK(x)                                                                                                 \
    do {                                                                                                      \
        if ((s = (x)) != KILN_OK) goto done;                                                                  \
    } while (0)

kiln_status kiln_t5_encoder_encode(const kiln_t5_encoder *m, kiln_backend *be, const int32_t *ids, int batch,
                                   int seq, float *hidden, kiln_err *err) {
    const kiln_ops *op = be->ops;
    if (batch <= 0 || seq <= 0 || seq > (1 << 16))
        return KILN_FAIL(err, KILN_E_INVALID, "T5: %d x %d tokens", batch, seq);
    const int64_t R = (int64_t)batch * seq, D = m->d_model, Dk = m->d_kv, H = m->n_heads, I = H * Dk, F = m->d_ff;
    const int64_t S = seq;
    for (int64_t i = 0; i < R; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return KILN_FAIL(err, KILN_E_INVALID, "T5: token id %d outside the embedding (%lld rows)", ids[i],
                             (long long)m->vocab);
    kiln_status s = KILN_OK;
    float *hb = NULL;
    /* the activations in the backend's dtype (bf16 on CUDA in FAST, as transformers runs a bf16 T5; the
     * attention op keeps its scores and probabilities in f32); the position-bias table and the hidden states out
     * f32 */
    const kiln_dtype dt = kiln_backend_act_dtype(be);
    const size_t es = kiln_dtype_size(dt);
    void *x = op->alloc(be, (size_t)(R * D) * es), *h = op->alloc(be, (size_t)(R * D) * es);
    void *q = op->alloc(be, (size_t)(R * I) * es), *k = op->alloc(be, (size_t)(R * I) * es);
    void *v = op->alloc(be, (size_t)(R * I) * es), *att = op->alloc(be, (size_t)(R * I) * es);
    void *g = op->alloc(be, (size_t)(R * F) * es), *u = op->alloc(be, (size_t)(R * F) * es);
    void *bias = op->alloc(be, (size_t)(H * S * S) * 4);
    if (!x || !h || !q || !k || !v || !att || !g || !u || !bias) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "T5: out of memory for activations (%d x %d tokens)", batch, seq);
        goto done;
    }
    CK(bias_table(m, seq, &hb, err));
    CK(op->upload(be, bias, hb, (size_t)(H * S * S) * 4, err));
    kiln_tensor X = kiln_view_2d(x, dt, R, D), Hn = kiln_view_2d(h, dt, R, D), Qt = kiln_view_2d(q, dt, R, I);
    kiln_tensor Kt = kiln_view_2d(k, dt, R, I), Vt = kiln_view_2d(v, dt, R, I), A = kiln_view_2d(att, dt, R, I);
    kiln_tensor G = kiln_view_2d(g, dt, R, F), U = kiln_view_2d(u, dt, R, F);
    kiln_tensor B = kiln_f32_2d(bias, H * S, S), OUT = kiln_f32_2d(hidden, R, D);
    kiln_epilogue add = {KILN_EPI_ADD, NULL};

    CK(kiln_embed_rows(be, &m->embed, ids, R, &X, "T5", err)); /* a quantised GGUF table: just these rows */
    for (int l = 0; l < m->n_layers; l++) {
        const kiln_t5_layer *L = &m->layers[l];
        CK(op->rms_norm(be, &Hn, &X, &L->attn_norm, m->eps, err));
        CK(kiln_matmul(be, &Qt, &Hn, &L->wq, NULL, err));
        CK(kiln_matmul(be, &Kt, &Hn, &L->wk, NULL, err));
        CK(kiln_matmul(be, &Vt, &Hn, &L->wv, NULL, err));
        for (int b = 0; b < batch; b++) { /* every head at once; no scaling (T5), the position bias added */
            kiln_tensor qb = kiln_tensor_rows(&Qt, b * S, S), kb = kiln_tensor_rows(&Kt, b * S, S);
            kiln_tensor vb = kiln_tensor_rows(&Vt, b * S, S), ob = kiln_tensor_rows(&A, b * S, S);
            CK(op->attention(be, &ob, &qb, &kb, &vb, (int)H, (int)H, 1.0f, false, NULL, &B, err));
        }
        CK(kiln_matmul_epi(be, &X, &A, &L->wo, NULL, &add, err));
        CK(op->rms_norm(be, &Hn, &X, &L->ffn_norm, m->eps, err));
        CK(kiln_matmul(be, &G, &Hn, &L->wi0, NULL, err));
        CK(kiln_matmul(be, &U, &Hn, &L->wi1, NULL, err));
        CK(op->gelu_mul(be, &G, &G, &U, err)); /* G = gelu_new(G) * U */
        CK(kiln_matmul_epi(be, &X, &G, &L->wo_ff, NULL, &add, err));
    }
    CK(op->rms_norm(be, &OUT, &X, &m->final_norm, m->eps, err));
    CK(op->sync(be, err));
done:
    kiln_free(hb);
    void *bufs[] = {x, h, q, k, v, att, g, u, bias};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) op->free(be, bufs[i]);
    return s;
}
