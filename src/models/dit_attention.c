/* dit_attention.c - [txt ; img] RoPE attention shared by the FLUX.1 and FLUX.2 DiTs (see dit_attention.h). */
#include <math.h>

#include "base/alloc.h"
#include "models/dit_attention.h"
#include "models/rope_tables.h"
#include "models/views.h"

/* q, k, v [T, D] of sample b (RoPE applied) -> out: a's hook, else full attention. */
static kiln_status attend(kiln_backend *be, const kiln_dit_attn *a, int64_t b, const kiln_tensor *q,
                          const kiln_tensor *k, const kiln_tensor *v, kiln_tensor *out, kiln_err *err) {
    if (a->attend) return a->attend(be, a, b, q, k, v, out, err);
    const float scale = 1.0f / sqrtf((float)a->head_dim);
    return be->ops->attention(be, out, q, k, v, a->heads, a->heads, scale, false, NULL, NULL, err);
}

kiln_status kiln_dit_joint_attention(kiln_backend *be, const kiln_dit_attn *a, const kiln_tensor *qkv_t,
                                     const kiln_tensor *qkv_i, kiln_tensor *cat, kiln_tensor *cato, kiln_tensor *att_t,
                                     kiln_tensor *att_i, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = a->D, L = a->L, N = a->N;
    for (int64_t b = 0; b < a->B; b++) {
        kiln_tensor ct = kiln_tensor_rows(cat, 0, L), ci = kiln_tensor_rows(cat, L, N);
        kiln_tensor st = kiln_tensor_rows(qkv_t, b * L, L), si = kiln_tensor_rows(qkv_i, b * N, N);
        KILN_TRY(op->copy(be, &ct, &st, err));
        KILN_TRY(op->copy(be, &ci, &si, err));
        kiln_tensor q = kiln_cols(cat, 0, D), k = kiln_cols(cat, D, D), v = kiln_cols(cat, 2 * D, D);
        KILN_TRY(op->rope(be, &q, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(op->rope(be, &k, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(attend(be, a, b, &q, &k, &v, cato, err));
        kiln_tensor ot = kiln_tensor_rows(cato, 0, L), oi = kiln_tensor_rows(cato, L, N);
        kiln_tensor dt = kiln_tensor_rows(att_t, b * L, L), di = kiln_tensor_rows(att_i, b * N, N);
        KILN_TRY(op->copy(be, &dt, &ot, err));
        KILN_TRY(op->copy(be, &di, &oi, err));
    }
    return KILN_OK;
}

kiln_status kiln_dit_single_attention(kiln_backend *be, const kiln_dit_attn *a, kiln_tensor *qkv, kiln_tensor *out,
                                      kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = a->D, T = a->L + a->N;
    for (int64_t b = 0; b < a->B; b++) {
        kiln_tensor q = kiln_block(qkv, b * T, T, 0, D), k = kiln_block(qkv, b * T, T, D, D);
        kiln_tensor v = kiln_block(qkv, b * T, T, 2 * D, D), o = kiln_block(out, b * T, T, 0, D);
        KILN_TRY(op->rope(be, &q, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(op->rope(be, &k, a->cos, a->sin, a->heads, true, err));
        KILN_TRY(attend(be, a, b, &q, &k, &v, &o, err));
    }
    return KILN_OK;
}

kiln_status kiln_dit_join_streams(kiln_backend *be, kiln_tensor *S, const kiln_tensor *txt, const kiln_tensor *img,
                                  int64_t B, int64_t L, int64_t N, kiln_err *err) {
    const int64_t T = L + N;
    for (int64_t b = 0; b < B; b++) {
        kiln_tensor dt = kiln_tensor_rows(S, b * T, L), di = kiln_tensor_rows(S, b * T + L, N);
        kiln_tensor st = kiln_tensor_rows(txt, b * L, L), si = kiln_tensor_rows(img, b * N, N);
        KILN_TRY(be->ops->copy(be, &dt, &st, err));
        KILN_TRY(be->ops->copy(be, &di, &si, err));
    }
    return KILN_OK;
}

kiln_status kiln_dit_split_image(kiln_backend *be, kiln_tensor *img, const kiln_tensor *S, int64_t B, int64_t L,
                                 int64_t N, kiln_err *err) {
    const int64_t T = L + N;
    for (int64_t b = 0; b < B; b++) {
        kiln_tensor di = kiln_tensor_rows(img, b * N, N), si = kiln_tensor_rows(S, b * T + L, N);
        KILN_TRY(be->ops->copy(be, &di, &si, err));
    }
    return KILN_OK;
}

kiln_status kiln_dit_rope_upload(kiln_backend *be, const int32_t *ids, int64_t T, const int *axes, int n_axes,
                                 double theta, int64_t half_dim, float *rcos, float *rsin, kiln_err *err) {
    size_t bytes = (size_t)(T * half_dim) * sizeof(float);
    float *hc = kiln_malloc(bytes), *hs = kiln_malloc(bytes);
    kiln_status s = KILN_OK;
    if (!hc || !hs) s = KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory for the RoPE tables (%lld tokens)",
                                  (long long)T);
    if (s == KILN_OK) {
        kiln_rope_flux2(ids, T, axes, n_axes, theta, hc, hs);
        s = be->ops->upload(be, rcos, hc, bytes, err);
        if (s == KILN_OK) s = be->ops->upload(be, rsin, hs, bytes, err);
    }
    kiln_free(hc);
    kiln_free(hs);
    return s;
}
