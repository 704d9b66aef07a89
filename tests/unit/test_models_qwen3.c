/* test_models_qwen3.c - the Qwen3 text encoder on the tiny model (diffusers shards and the ComfyUI single
 * file) against the transformers golden (qwen3_f32): features [h9 | h18 | h27] for a batch of 3 prompts
 * with right padding, causal + padding mask; the default FAST precision against the bf16 run (qwen3_bf16). */
#include <string.h>

#include "golden.h"
#include "models/qwen3.h"
#include "test.h"

static void run_file(const char *path, const char *config) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    CHECK_MSG(kiln_st_open(test_src_path(path), &ck, &err) == KILN_OK, "%s", err.msg);
    if (!ck) return;
    kiln_qwen3 *m = NULL;
    CHECK_MSG(kiln_qwen3_load(ck, config ? test_src_path(config) : NULL, &m, &err) == KILN_OK, "%s", err.msg);
    kiln_backend *be = NULL;
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    golden g;
    if (!m || !be || !golden_open(&g, "qwen3_f32")) goto out;
    be->precision = KILN_PREC_EXACT;
    CHECK_EQ_INT(m->n_layers, 27); /* 30 in the file: layers 27.. are never run */
    CHECK_EQ_INT(m->n_heads / m->n_kv_heads, 4);
    size_t n, nm;
    int32_t *ids = golden_i32(&g, "input_ids", &n);
    int32_t *mask32 = golden_i32(&g, "attention_mask", &nm);
    if (!ids || !mask32 || n != 3 * 512 || nm != n) goto out2;
    uint8_t mask[3 * 512];
    for (size_t i = 0; i < n; i++) mask[i] = (uint8_t)mask32[i];
    float *feat = calloc(n * 3 * (size_t)m->hidden, sizeof(float));
    CHECK_MSG(kiln_qwen3_encode(m, be, ids, mask, 3, 512, feat, &err) == KILN_OK, "%s", err.msg);
    golden_compare(&g, "features", feat, n * 3 * (size_t)m->hidden, config ? " (diffusers)" : " (comfy file)");
    /* the default (FAST, bf16 matmul inputs) precision against the official bf16 run, with its tolerances; the
     * same prompts, so the same ids */
    golden gb;
    if (golden_open(&gb, "qwen3_bf16")) {
        size_t nb = 0;
        int32_t *idsb = golden_i32(&gb, "input_ids", &nb), *maskb = golden_i32(&gb, "attention_mask", NULL);
        CHECK(idsb && maskb && nb == n && !memcmp(idsb, ids, n * sizeof *ids) && !memcmp(maskb, mask32, n * sizeof *ids));
        be->precision = KILN_PREC_FAST;
        CHECK_MSG(kiln_qwen3_encode(m, be, ids, mask, 3, 512, feat, &err) == KILN_OK, "%s", err.msg);
        golden_compare(&gb, "features", feat, n * 3 * (size_t)m->hidden, " (fast)");
        be->precision = KILN_PREC_EXACT;
        free(idsb);
        free(maskb);
        golden_close(&gb);
    }
    /* an id outside the embedding is refused */
    ids[5] = (int32_t)m->vocab;
    CHECK(kiln_qwen3_encode(m, be, ids, mask, 1, 512, feat, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "outside the embedding");
    free(feat);
out2:
    free(ids);
    free(mask32);
    golden_close(&g);
out:
    kiln_qwen3_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

static void test_diffusers_shards(void) {
    run_file("tests/data/tiny/diffusers/text_encoder", "tests/data/tiny/diffusers/text_encoder/config.json");
}

static void test_comfy_file(void) { run_file("tests/data/tiny/comfy/qwen_3_4b.safetensors", NULL); }

int main(void) {
    RUN(test_diffusers_shards);
    RUN(test_comfy_file);
    return test_summary();
}
