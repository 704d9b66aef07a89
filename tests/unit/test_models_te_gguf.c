/* test_models_te_gguf.c - the Qwen3 and T5 text encoders read from GGUF files in llama.cpp's naming (F32, F16,
 * Q8_0, Q4_K; tests/data/gguf/te, tools/reference/make_te_gguf.py) against transformers run on the weights each
 * file holds, dequantised (goldens gguf_te_qwen3, gguf_te_t5): EXACT precision, within the golden's tolerance and
 * >= 60 dB. The metadata must reach the model (eps 0.03 / 0.02 and rope theta 5000 in these files, far from every
 * default), the quantised matrices and the token embedding must stay quantised in memory (QBLOCK views of the
 * mapping). Also printed: the dB against the model on the unquantised weights - each format's quality cost on
 * these tiny encoders (docs/benchmarks.md) - which must be below the same-weights figure for the lossy types. */
#include <math.h>
#include <string.h>

#include "golden.h"
#include "models/qwen3.h"
#include "models/t5_encoder.h"
#include "test.h"

static const char *const FORMATS[] = {"f32", "f16", "q8_0", "q4_k"};

/* dB against the same weights (>= 60 and the golden's tolerance) and against the unquantised model (printed) */
static void judge(golden *g, const char *what, const char *fmt, const char *key, const char *ref_key,
                  const float *got, size_t n) {
    char k[64];
    snprintf(k, sizeof k, "%s_%s", key, fmt);
    size_t nr = 0, nu = 0;
    float *ref = golden_f32(g, k, &nr), *orig = golden_f32(g, ref_key, &nu);
    if (ref && orig && nr == n && nu == n) {
        golden_compare(g, k, got, n, "");
        double same = golden_snr_db(got, ref, n), vs = golden_snr_db(got, orig, n);
        char tk[64];
        snprintf(tk, sizeof tk, "types_%s", fmt);
        printf("  %s %-5s %s: %.1f dB vs transformers on the same (dequantised) weights; %.1f dB vs the unquantised "
               "model\n", what, fmt, golden_meta(g, tk), same, vs);
        CHECK_MSG(same >= 60.0, "%s %s: %.1f dB < 60 dB", what, fmt, same);
        if (!strcmp(fmt, "q8_0") || !strcmp(fmt, "q4_k"))
            CHECK_MSG(vs < same, "%s %s: the quantised file equals the unquantised model (%.1f dB)", what, fmt, vs);
    } else {
        CHECK_MSG(0, "%s %s: golden %s / %s missing or of the wrong size", what, fmt, k, ref_key);
    }
    free(ref);
    free(orig);
}

static void test_qwen3(void) {
    golden g;
    if (!golden_open(&g, "gguf_te_qwen3")) return;
    kiln_backend *be = NULL;
    kiln_err err = {0};
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    size_t n = 0, nm = 0;
    int32_t *ids = golden_i32(&g, "input_ids", &n), *mask32 = golden_i32(&g, "attention_mask", &nm);
    const int B = 2, S = 32;
    for (size_t f = 0; be && ids && mask32 && n == (size_t)B * S && nm == n && f < 4; f++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/gguf/te/qwen3-q-%s.gguf", FORMATS[f]);
        kiln_st_file *ck = NULL;
        kiln_qwen3 *m = NULL;
        CHECK_MSG(kiln_st_open(test_src_path(path), &ck, &err) == KILN_OK, "%s", err.msg);
        if (ck) CHECK_MSG(kiln_qwen3_load(ck, NULL, &m, &err) == KILN_OK, "%s: %s", path, err.msg);
        if (m) {
            CHECK_NEAR(m->eps, 0.03f, 1e-9);  /* qwen3.attention.layer_norm_rms_epsilon */
            CHECK_NEAR(m->theta, 5000.0f, 1e-3); /* qwen3.rope.freq_base */
            CHECK_EQ_INT(m->n_config_layers, 27);
            CHECK(m->norm_last);
            CHECK_EQ_INT(m->hidden, 256);
            CHECK_EQ_INT(m->n_heads, 2);
            CHECK_EQ_INT(m->n_kv_heads, 1);
            bool quant = f >= 2;
            CHECK_MSG((m->embed.dtype == KILN_DT_QBLOCK) == quant, "%s: embedding dtype %s", FORMATS[f],
                      kiln_dtype_name(m->embed.dtype));
            CHECK((m->layers[5].wq.dtype == KILN_DT_QBLOCK) == quant);
            CHECK((m->layers[26].w_down.dtype == KILN_DT_QBLOCK) == quant);
            uint8_t mask[64];
            for (size_t i = 0; i < n; i++) mask[i] = (uint8_t)mask32[i];
            size_t nf = n * 3 * (size_t)m->hidden;
            float *feat = calloc(nf, sizeof(float));
            be->precision = KILN_PREC_EXACT;
            CHECK_MSG(kiln_qwen3_encode(m, be, ids, mask, B, S, feat, &err) == KILN_OK, "%s", err.msg);
            judge(&g, "Qwen3", FORMATS[f], "features", "features_ref", feat, nf);
            free(feat);
        }
        kiln_qwen3_free(m);
        kiln_st_close(ck);
    }
    free(ids);
    free(mask32);
    if (be) kiln_backend_close(be);
    golden_close(&g);
}

static void test_t5(void) {
    golden g;
    if (!golden_open(&g, "gguf_te_t5")) return;
    kiln_backend *be = NULL;
    kiln_err err = {0};
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    size_t n = 0;
    int32_t *ids = golden_i32(&g, "input_ids", &n);
    const int B = 2, S = 64;
    for (size_t f = 0; be && ids && n == (size_t)B * S && f < 4; f++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/gguf/te/t5-q-%s.gguf", FORMATS[f]);
        kiln_st_file *ck = NULL;
        kiln_t5_encoder *m = NULL;
        CHECK_MSG(kiln_st_open(test_src_path(path), &ck, &err) == KILN_OK, "%s", err.msg);
        if (ck) CHECK_MSG(kiln_t5_encoder_load(ck, NULL, &m, &err) == KILN_OK, "%s: %s", path, err.msg);
        if (m) {
            CHECK_NEAR(m->eps, 0.02f, 1e-9); /* t5encoder.attention.layer_norm_rms_epsilon */
            CHECK_EQ_INT(m->num_buckets, 32);
            CHECK_EQ_INT(m->max_distance, 128);
            CHECK_EQ_INT(m->d_kv, 16);
            CHECK_EQ_INT(m->n_heads, 2);
            CHECK_EQ_INT(m->n_layers, 2);
            CHECK((m->embed.dtype == KILN_DT_QBLOCK) == (f >= 2));
            size_t nh = n * (size_t)m->d_model;
            float *hid = calloc(nh, sizeof(float));
            be->precision = KILN_PREC_EXACT;
            CHECK_MSG(kiln_t5_encoder_encode(m, be, ids, B, S, hid, &err) == KILN_OK, "%s", err.msg);
            judge(&g, "T5", FORMATS[f], "hidden", "hidden_ref", hid, nh);
            free(hid);
        }
        kiln_t5_encoder_free(m);
        kiln_st_close(ck);
    }
    free(ids);
    if (be) kiln_backend_close(be);
    golden_close(&g);
}

/* The wrong encoder for the slot is refused by name, not read as garbage. */
static void test_wrong_kind(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/gguf/te/t5-q-q8_0.gguf"), &ck, &err) == KILN_OK);
    kiln_qwen3 *q = NULL;
    if (ck) {
        CHECK_EQ_INT(kiln_qwen3_load(ck, NULL, &q, &err), KILN_E_FORMAT);
        CHECK_ERR_CONTAINS(&err, "t5encoder GGUF, not a Qwen3");
    }
    kiln_st_close(ck);
    ck = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/gguf/te/qwen3-q-q8_0.gguf"), &ck, &err) == KILN_OK);
    kiln_t5_encoder *t = NULL;
    if (ck) {
        CHECK_EQ_INT(kiln_t5_encoder_load(ck, NULL, &t, &err), KILN_E_FORMAT);
        CHECK_ERR_CONTAINS(&err, "qwen3 GGUF, not a T5");
    }
    kiln_st_close(ck);
}

int main(void) {
    RUN(test_qwen3);
    RUN(test_t5);
    RUN(test_wrong_kind);
    return test_summary();
}
