/* test_models_embed.c - kiln_embed_rows (models/embed.h), the token lookup of the text encoders, into f32 and into
 * bf16 activations (what Qwen3 allocates on a backend that keeps bf16 activations, compute/ops.h
 * kiln_backend_act_dtype), from a plain bf16 table and from a GGUF Q8_0 one: the bf16 rows must be exactly the f32
 * rows rounded to nearest even, the rows those of the ids asked for, and an activation dtype the lookup cannot
 * write refused by name. Runs on the CPU backend, whose copy and upload are the ops the CUDA backend implements. */
#include <string.h>

#include "compute/ops.h"
#include "models/embed.h"
#include "tensor/convert.h"
#include "tensor/quant.h"
#include "test.h"

enum { ROWS = 5, COLS = 64, N = 4 };
static const int32_t IDS[N] = {3, 0, 3, 4};

static void lookup(kiln_backend *be, const kiln_tensor *table, const char *what) {
    float f32[N * COLS], ref[N * COLS];
    uint16_t b16[N * COLS], want[N * COLS];
    kiln_err err = {0};
    kiln_tensor X = kiln_tensor_make(f32, KILN_DT_F32, 2, (int64_t[]){N, COLS});
    kiln_tensor Y = kiln_tensor_make(b16, KILN_DT_BF16, 2, (int64_t[]){N, COLS});
    memset(b16, 0xff, sizeof b16);
    CHECK_MSG(kiln_embed_rows(be, table, IDS, N, &X, "test", &err) == KILN_OK, "%s f32: %s", what, err.msg);
    CHECK_MSG(kiln_embed_rows(be, table, IDS, N, &Y, "test", &err) == KILN_OK, "%s bf16: %s", what, err.msg);
    /* the rows of the ids: each id's row of the table, widened to f32 */
    for (int i = 0; i < N; i++) {
        if (table->dtype == KILN_DT_QBLOCK)
            CHECK_EQ_INT(kiln_dequant(ref + i * COLS, table->qtype,
                                      (const char *)table->data + (size_t)IDS[i] * table->stride[0], COLS, &err),
                         KILN_OK);
        else
            kiln_bf16_to_f32_n(ref + i * COLS, (const uint16_t *)table->data + (size_t)IDS[i] * COLS, COLS);
    }
    CHECK_MSG(memcmp(f32, ref, sizeof ref) == 0, "%s: the f32 rows are not the ids' rows", what);
    kiln_f32_to_bf16_n(want, ref, N * COLS);
    CHECK_MSG(memcmp(b16, want, sizeof want) == 0, "%s: the bf16 rows are not the f32 rows rounded", what);
    printf("  %s: rows of ids 3 0 3 4 into f32 and bf16 activations\n", what);
}

static void test_embed(void) {
    kiln_backend *be = NULL;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_backend_open_cpu(1, &be, &err), KILN_OK);
    if (!be) return;
    float vals[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) vals[i] = (float)((i * 7919) % 1000) / 97.0f - 5.0f; /* not bf16-exact */
    uint16_t tb[ROWS * COLS];
    kiln_f32_to_bf16_n(tb, vals, ROWS * COLS);
    kiln_tensor plain = kiln_tensor_make(tb, KILN_DT_BF16, 2, (int64_t[]){ROWS, COLS});
    lookup(be, &plain, "bf16 table");

    const kiln_qtype_info *qi = kiln_qtype_get(KILN_QT_Q8_0);
    CHECK(qi != NULL);
    if (!qi) goto out;
    size_t row_bytes = kiln_qtype_nbytes(qi, COLS);
    unsigned char q[ROWS * 2 * 34]; /* Q8_0: 34 bytes per 32 values */
    CHECK(row_bytes * ROWS <= sizeof q);
    for (int r = 0; r < ROWS; r++)
        CHECK_EQ_INT(kiln_quantize(q + r * row_bytes, KILN_QT_Q8_0, vals + r * COLS, COLS, &err), KILN_OK);
    kiln_tensor qt = kiln_tensor_make_q(q, KILN_QT_Q8_0, ROWS, COLS);
    lookup(be, &qt, "Q8_0 table");

    /* an activation dtype the dequantising lookup does not write: refused by name, not written as f32 */
    uint16_t h16[N * COLS];
    kiln_tensor Z = kiln_tensor_make(h16, KILN_DT_F16, 2, (int64_t[]){N, COLS});
    CHECK_EQ_INT(kiln_embed_rows(be, &qt, IDS, N, &Z, "test", &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "f16");
out:
    kiln_backend_close(be);
}

int main(void) {
    RUN(test_embed);
    return test_summary();
}
