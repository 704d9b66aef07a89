/* dit_kv.c - attention with the 9B-KV reference cache (see dit_kv.h). */
#include <math.h>

#include "models/dit_kv.h"
#include "models/views.h"

/* One sample, after RoPE: q, k, v [T, D] views, out [T, D]. EXTRACT: the last R rows are the references: their
 * k | v go to this sample's cache rows, text + image queries (rows [0, T - R)) attend over all T keys and the
 * reference queries over the R reference keys only. CACHED: T = text + image tokens; the keys and values are
 * copied next to the cached ones (kv->kv) and every query attends over the T + R of them. */
static kiln_status attend_sample(kiln_backend *be, const kiln_dit_attn *a, const kiln_dit_kv *kv, int64_t b,
                                 const kiln_tensor *q, const kiln_tensor *k, const kiln_tensor *v, kiln_tensor *out,
                                 kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = a->D, T = q->shape[0], R = kv->R;
    const float scale = 1.0f / sqrtf((float)a->head_dim);
    kiln_tensor C = kiln_f32_2d(kv->cache, a->B * R, 2 * D);
    if (kv->mode == KILN_DIT_KV_EXTRACT) {
        const int64_t n0 = T - R; /* text + image rows */
        kiln_tensor ck = kiln_block(&C, b * R, R, 0, D), cv = kiln_block(&C, b * R, R, D, D);
        kiln_tensor kr = kiln_tensor_rows(k, n0, R), vr = kiln_tensor_rows(v, n0, R);
        KILN_TRY(op->copy(be, &ck, &kr, err));
        KILN_TRY(op->copy(be, &cv, &vr, err));
        kiln_tensor q0 = kiln_tensor_rows(q, 0, n0), o0 = kiln_tensor_rows(out, 0, n0);
        KILN_TRY(op->attention(be, &o0, &q0, k, v, a->heads, a->heads, scale, false, NULL, err));
        kiln_tensor qr = kiln_tensor_rows(q, n0, R), orr = kiln_tensor_rows(out, n0, R);
        return op->attention(be, &orr, &qr, &kr, &vr, a->heads, a->heads, scale, false, NULL, err);
    }
    kiln_tensor KV = kiln_f32_2d(kv->kv, T + R, 2 * D);
    kiln_tensor dk = kiln_block(&KV, 0, T, 0, D), dv = kiln_block(&KV, 0, T, D, D);
    kiln_tensor dc = kiln_tensor_rows(&KV, T, R), sc = kiln_tensor_rows(&C, b * R, R);
    KILN_TRY(op->copy(be, &dk, k, err));
    KILN_TRY(op->copy(be, &dv, v, err));
    KILN_TRY(op->copy(be, &dc, &sc, err));
    kiln_tensor ka = kiln_cols(&KV, 0, D), va = kiln_cols(&KV, D, D);
    return op->attention(be, out, q, &ka, &va, a->heads, a->heads, scale, false, NULL, err);
}

kiln_status kiln_dit_kv_joint_attention(kiln_backend *be, const kiln_dit_attn *a, const kiln_dit_kv *kv,
                                        const kiln_tensor *qkv_t, const kiln_tensor *qkv_i, kiln_tensor *cat,
                                        kiln_tensor *cato, kiln_tensor *att_t, kiln_tensor *att_i, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = a->D, L = a->L, N = a->N, T = L + N;
    for (int64_t b = 0; b < a->B; b++) {
        kiln_tensor ct = kiln_tensor_rows(cat, 0, L), ci = kiln_tensor_rows(cat, L, N);
        kiln_tensor st = kiln_tensor_rows(qkv_t, b * L, L), si = kiln_tensor_rows(qkv_i, b * N, N);
        KILN_TRY(op->copy(be, &ct, &st, err));
        KILN_TRY(op->copy(be, &ci, &si, err));
        kiln_tensor seq = kiln_tensor_rows(cat, 0, T), o = kiln_tensor_rows(cato, 0, T);
        kiln_tensor q = kiln_cols(&seq, 0, D), k = kiln_cols(&seq, D, D), v = kiln_cols(&seq, 2 * D, D);
        KILN_TRY(op->rope(be, &q, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(op->rope(be, &k, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(attend_sample(be, a, kv, b, &q, &k, &v, &o, err));
        kiln_tensor ot = kiln_tensor_rows(cato, 0, L), oi = kiln_tensor_rows(cato, L, N);
        kiln_tensor dt = kiln_tensor_rows(att_t, b * L, L), di = kiln_tensor_rows(att_i, b * N, N);
        KILN_TRY(op->copy(be, &dt, &ot, err));
        KILN_TRY(op->copy(be, &di, &oi, err));
    }
    return KILN_OK;
}

kiln_status kiln_dit_kv_single_attention(kiln_backend *be, const kiln_dit_attn *a, const kiln_dit_kv *kv,
                                         kiln_tensor *qkv, kiln_tensor *out, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = a->D, T = a->L + a->N;
    for (int64_t b = 0; b < a->B; b++) {
        kiln_tensor q = kiln_block(qkv, b * T, T, 0, D), k = kiln_block(qkv, b * T, T, D, D);
        kiln_tensor v = kiln_block(qkv, b * T, T, 2 * D, D), o = kiln_block(out, b * T, T, 0, D);
        KILN_TRY(op->rope(be, &q, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(op->rope(be, &k, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(attend_sample(be, a, kv, b, &q, &k, &v, &o, err));
    }
    return KILN_OK;
}
