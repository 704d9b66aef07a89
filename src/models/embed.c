/* embed.c - token embedding rows from a plain or GGML-quantised table (see embed.h). */
#include "models/embed.h"

#include "base/alloc.h"
#include "tensor/convert.h"
#include "tensor/quant.h"

kiln_status kiln_embed_rows(kiln_backend *be, const kiln_tensor *table, const int32_t *ids, int64_t n,
                            kiln_tensor *X, const char *what, kiln_err *err) {
    const kiln_ops *op = be->ops;
    if (table->dtype != KILN_DT_QBLOCK) {
        for (int64_t i = 0; i < n; i++) {
            kiln_tensor src = kiln_tensor_rows(table, ids[i], 1), dst = kiln_tensor_rows(X, i, 1);
            KILN_TRY(op->copy(be, &dst, &src, err));
        }
        return KILN_OK;
    }
    const size_t D = (size_t)table->shape[1], row_bytes = (size_t)table->stride[0];
    float *buf = kiln_malloc((size_t)n * D * sizeof *buf);
    if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for %lld embedding rows", what, (long long)n);
    kiln_status s = KILN_OK;
    for (int64_t i = 0; i < n && s == KILN_OK; i++) {
        const uint8_t *row = (const uint8_t *)table->data + (size_t)ids[i] * row_bytes;
        s = kiln_dequant(buf + (size_t)i * D, table->qtype, row, D, err);
    }
    if (s == KILN_OK && X->dtype == KILN_DT_BF16) { /* bf16 activations: rounded here, uploaded at half the size */
        uint16_t *h = kiln_malloc((size_t)n * D * sizeof *h);
        if (h) kiln_f32_to_bf16_n(h, buf, (size_t)n * D);
        s = h ? op->upload(be, X->data, h, (size_t)n * D * sizeof *h, err)
              : KILN_FAIL(err, KILN_E_NOMEM, "out of memory for %lld bf16 rows", (long long)n);
        kiln_free(h);
    } else if (s == KILN_OK) {
        s = X->dtype == KILN_DT_F32 ? op->upload(be, X->data, buf, (size_t)n * D * sizeof *buf, err)
                                    : KILN_FAIL(err, KILN_E_UNSUPPORTED, "embedding rows into %s activations",
                                                kiln_dtype_name(X->dtype));
    }
    kiln_free(buf);
    return s == KILN_OK ? KILN_OK : kiln_err_prefix(err, "%s: token embedding: ", what);
}
