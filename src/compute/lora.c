/* lora.c - adapter terms beside a matmul (see lora.h). */
#include "compute/lora.h"

kiln_status kiln_matmul_lora(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                             const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err) {
    kiln_tensor base = *w;
    base.lora = NULL;
    KILN_TRY(be->ops->matmul(be, y, x, &base, bias, epi, err));
    const int64_t M = x->ndim == 2 ? x->shape[0] : 0;
    kiln_epilogue add = {KILN_EPI_ADD, NULL};
    const kiln_epilogue *e2 = epi && epi->kind == KILN_EPI_GATED_RESIDUAL ? epi : &add;
    for (const kiln_lora_term *t = w->lora; t; t = t->next) {
        const int64_t r = t->a.shape[0];
        if (t->a.ndim != 2 || t->b.ndim != 2 || t->b.shape[1] != r || t->a.shape[1] != w->shape[1] ||
            t->b.shape[0] != w->shape[0])
            return KILN_FAIL(err, KILN_E_INVALID, "matmul: a LoRA term A [%lld, %lld], B [%lld, %lld] does not fit the "
                             "weight [%lld, %lld]", (long long)t->a.shape[0], (long long)t->a.shape[1],
                             (long long)t->b.shape[0], (long long)t->b.shape[1], (long long)w->shape[0],
                             (long long)w->shape[1]);
        if (M == 0 || r == 0) continue;
        float *buf = be->ops->alloc(be, (size_t)(M * r) * sizeof(float));
        if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "matmul: out of memory for a LoRA intermediate [%lld, %lld]",
                                   (long long)M, (long long)r);
        kiln_tensor xa = kiln_tensor_make(buf, KILN_DT_F32, 2, (int64_t[]){M, r});
        xa.backend = x->backend, xa.device = x->device;
        kiln_status s = be->ops->matmul(be, &xa, x, &t->a, NULL, NULL, err);
        if (s == KILN_OK) s = be->ops->matmul(be, y, &xa, &t->b, NULL, e2, err);
        be->ops->free(be, buf);
        if (s != KILN_OK) return kiln_err_prefix(err, "LoRA term");
    }
    return KILN_OK;
}
