/* dit_kv.c - attention with the 9B-KV reference cache (see dit_kv.h). */
#include <math.h>

#include "models/dit_kv.h"
#include "models/views.h"

/* One sample, after RoPE: q, k, v [T, D] views, out [T, D]. EXTRACT: the last R rows are the references: their
 * k | v go to this sample's cache rows, text + image queries (rows [0, T - R)) attend over all T keys and the
 * reference queries over the R reference keys only. CACHED: T = text + image tokens; the keys and values are
 * copied next to the cached ones (kv->kv) and every query attends over the T + R of them. */
kiln_status kiln_dit_kv_attend(kiln_backend *be, const kiln_dit_attn *a, int64_t b, const kiln_tensor *q,
                               const kiln_tensor *k, const kiln_tensor *v, kiln_tensor *out, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const kiln_dit_kv *kv = a->attend_ctx;
    const int64_t D = a->D, T = q->shape[0], R = kv->R;
    const float scale = 1.0f / sqrtf((float)a->head_dim);
    kiln_tensor C = kiln_tensor_make(kv->cache, kv->dt, 2, (int64_t[]){a->B * R, 2 * D});
    if (kv->mode == KILN_DIT_KV_EXTRACT) {
        const int64_t n0 = T - R; /* text + image rows */
        kiln_tensor ck = kiln_block(&C, b * R, R, 0, D), cv = kiln_block(&C, b * R, R, D, D);
        kiln_tensor kr = kiln_tensor_rows(k, n0, R), vr = kiln_tensor_rows(v, n0, R);
        KILN_TRY(op->copy(be, &ck, &kr, err));
        KILN_TRY(op->copy(be, &cv, &vr, err));
        kiln_tensor q0 = kiln_tensor_rows(q, 0, n0), o0 = kiln_tensor_rows(out, 0, n0);
        KILN_TRY(op->attention(be, &o0, &q0, k, v, a->heads, a->heads, scale, false, NULL, NULL, err));
        kiln_tensor qr = kiln_tensor_rows(q, n0, R), orr = kiln_tensor_rows(out, n0, R);
        return op->attention(be, &orr, &qr, &kr, &vr, a->heads, a->heads, scale, false, NULL, NULL, err);
    }
    kiln_tensor KV = kiln_tensor_make(kv->kv, kv->dt, 2, (int64_t[]){T + R, 2 * D});
    kiln_tensor dk = kiln_block(&KV, 0, T, 0, D), dv = kiln_block(&KV, 0, T, D, D);
    kiln_tensor dc = kiln_tensor_rows(&KV, T, R), sc = kiln_tensor_rows(&C, b * R, R);
    KILN_TRY(op->copy(be, &dk, k, err));
    KILN_TRY(op->copy(be, &dv, v, err));
    KILN_TRY(op->copy(be, &dc, &sc, err));
    kiln_tensor ka = kiln_cols(&KV, 0, D), va = kiln_cols(&KV, D, D);
    return op->attention(be, out, q, &ka, &va, a->heads, a->heads, scale, false, NULL, NULL, err);
}
