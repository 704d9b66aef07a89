/* test_models_t5_encoder.c - the T5 encoder on the tiny checkpoint (tests/data/tiny/t5_encoder) against the
 * transformers T5EncoderModel golden (t5_encoder_f32, tools/reference/make_t5_golden.py): last_hidden_state for
 * FluxPipeline's T5 ids (batch 3, 77 tokens, one truncated prompt, no attention mask) in EXACT precision within the
 * golden's tolerance and >= 60 dB, in the default (FAST) precision >= 40 dB; the relative-position buckets of every
 * position -600..600 for the real and the tiny config; the refusals. */
#include <math.h>
#include <string.h>

#include "golden.h"
#include "models/t5_encoder.h"
#include "test.h"

#define TINY "tests/data/tiny/t5_encoder"

static double snr_db(const float *got, const float *ref, size_t n) {
    double sig = 0, noise = 0;
    for (size_t i = 0; i < n; i++) {
        sig += (double)ref[i] * ref[i];
        noise += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    }
    return noise == 0 ? 999.0 : 10.0 * log10(sig / noise);
}

static void test_buckets(void) {
    golden g;
    if (!golden_open(&g, "t5_encoder_f32")) return;
    const struct {
        const char *name;
        int nb, md;
    } cfg[] = {{"buckets_real", 32, 128}, {"buckets_tiny", 16, 20}};
    for (size_t c = 0; c < 2; c++) {
        size_t n;
        int32_t *want = golden_i32(&g, cfg[c].name, &n);
        if (!want) continue;
        CHECK_EQ_INT(n, 1201);
        size_t bad = 0;
        for (int rp = -600; rp <= 600 && n == 1201; rp++)
            if (kiln_t5_relative_bucket(rp, cfg[c].nb, cfg[c].md) != want[rp + 600]) {
                if (!bad) fprintf(stderr, "  %s: position %d: kiln %d, HF %d\n", cfg[c].name, rp,
                                  kiln_t5_relative_bucket(rp, cfg[c].nb, cfg[c].md), want[rp + 600]);
                bad++;
            }
        CHECK_MSG(bad == 0, "%zu buckets differ (%s)", bad, cfg[c].name);
        free(want);
    }
    golden_close(&g);
}

static void test_against_golden(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    char config[512];
    snprintf(config, sizeof config, "%s", test_src_path(TINY "/config.json"));
    CHECK_MSG(kiln_st_open(test_src_path(TINY "/model.safetensors"), &ck, &err) == KILN_OK, "%s", err.msg);
    kiln_t5_encoder *m = NULL;
    if (ck) CHECK_MSG(kiln_t5_encoder_load(ck, config, &m, &err) == KILN_OK, "%s", err.msg);
    kiln_backend *be = NULL;
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    golden g;
    if (!m || !be || !golden_open(&g, "t5_encoder_f32")) goto out;
    CHECK_EQ_INT(m->n_layers, 3);
    CHECK_EQ_INT(m->n_heads, 3);
    CHECK_EQ_INT(m->d_kv, 12);
    CHECK_EQ_INT(m->num_buckets, 16);
    size_t n;
    int32_t *ids = golden_i32(&g, "input_ids", &n);
    if (ids && n == 3 * 77) {
        size_t D = (size_t)m->d_model;
        float *hid = calloc(n * D, sizeof(float));
        float *ref = golden_f32(&g, "last_hidden", NULL);
        for (int prec = 0; prec < 2 && ref; prec++) {
            be->precision = prec ? KILN_PREC_EXACT : KILN_PREC_FAST;
            CHECK_MSG(kiln_t5_encoder_encode(m, be, ids, 3, 77, hid, &err) == KILN_OK, "%s", err.msg);
            if (prec) golden_compare(&g, "last_hidden", hid, n * D, " (exact)");
            double db = snr_db(hid, ref, n * D), need = prec ? 60 : 40;
            printf("  last_hidden %s: %.1f dB (need >= %.0f)\n", prec ? "exact" : "default", db, need);
            CHECK_MSG(db >= need, "%.1f dB < %.0f dB", db, need);
        }
        ids[7] = (int32_t)m->vocab;
        CHECK_EQ_INT(kiln_t5_encoder_encode(m, be, ids, 1, 77, hid, &err), KILN_E_INVALID);
        CHECK_ERR_CONTAINS(&err, "outside the embedding");
        free(ref);
        free(hid);
    }
    free(ids);
    golden_close(&g);
out:
    kiln_t5_encoder_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

static void test_config_refusals(void) {
    char dir[] = "/tmp/kiln-test-t5-model-XXXXXX", cfg[128], cmd[600];
    if (!mkdtemp(dir)) return;
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    const char *bad[][3] = {{"gated-gelu", "relu", "unsupported"}, {"\"num_layers\": 3", "\"num_layers\": 4", "format"},
                            {"\"d_kv\": 12", "\"d_kv\": 9", "format"}, {"\"num_heads\": 3", "\"num_heads\": 4", "format"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "sed 's/%s/%s/' %s > %s", bad[i][0], bad[i][1], test_src_path(TINY "/config.json"), cfg);
        CHECK(system(cmd) == 0);
        kiln_err err = {0};
        kiln_st_file *ck = NULL;
        kiln_t5_encoder *m = NULL;
        CHECK(kiln_st_open(test_src_path(TINY "/model.safetensors"), &ck, &err) == KILN_OK);
        kiln_status want = bad[i][2][0] == 'u' ? KILN_E_UNSUPPORTED : KILN_E_FORMAT;
        CHECK_MSG(kiln_t5_encoder_load(ck, cfg, &m, &err) == want, "case %zu: %s", i, err.msg);
        CHECK(m == NULL);
        kiln_st_close(ck);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    RUN(test_buckets);
    RUN(test_against_golden);
    RUN(test_config_refusals);
    return test_summary();
}
