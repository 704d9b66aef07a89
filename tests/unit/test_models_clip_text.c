/* test_models_clip_text.c - the CLIP text model on the tiny checkpoint (tests/data/tiny/clip_text) against the
 * transformers CLIPTextModel golden (clip_text_f32, tools/reference/make_clip_golden.py): last_hidden_state and
 * the pooled EOS row for FluxPipeline's 77-token ids (batch 3, one truncated prompt), in EXACT precision within
 * the golden's tolerance and >= 60 dB, and in the default (FAST, bf16 dot products) precision >= 40 dB. Both
 * pooling rules (legacy eos_token_id 2 = argmax, otherwise the first EOS) and the refusals. */
#include <math.h>
#include <string.h>

#include "golden.h"
#include "models/clip_text.h"
#include "test.h"

#define TINY "tests/data/tiny/clip_text"

/* Signal-to-noise ratio of got against ref in dB. */
static double snr_db(const float *got, const float *ref, size_t n) {
    double sig = 0, noise = 0;
    for (size_t i = 0; i < n; i++) {
        sig += (double)ref[i] * ref[i];
        noise += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    }
    return noise == 0 ? 999.0 : 10.0 * log10(sig / noise);
}

static void check_db(golden *g, const char *tensor, const float *got, size_t n, double min_db, const char *label) {
    size_t cnt;
    float *ref = golden_f32(g, tensor, &cnt);
    if (!ref) return;
    CHECK(cnt == n);
    double db = cnt == n ? snr_db(got, ref, n) : 0;
    printf("  %s %s: %.1f dB (need >= %.0f)\n", tensor, label, db, min_db);
    CHECK_MSG(db >= min_db, "%s %s: %.1f dB < %.0f dB", tensor, label, db, min_db);
    free(ref);
}

typedef struct run {
    kiln_st_file *ck;
    kiln_clip_text *m;
    kiln_backend *be;
} run;

static int open_run(run *r, const char *config_arg) {
    kiln_err err = {0};
    char config[512]; /* test_src_path returns a static buffer */
    snprintf(config, sizeof config, "%s", config_arg);
    memset(r, 0, sizeof *r);
    CHECK_MSG(kiln_st_open(test_src_path(TINY "/model.safetensors"), &r->ck, &err) == KILN_OK, "%s", err.msg);
    if (!r->ck) return 0;
    CHECK_MSG(kiln_clip_text_load(r->ck, config, &r->m, &err) == KILN_OK, "%s", err.msg);
    CHECK(kiln_backend_open_cpu(0, &r->be, &err) == KILN_OK);
    return r->m && r->be;
}

static void close_run(run *r) {
    kiln_clip_text_free(r->m);
    if (r->be) kiln_backend_close(r->be);
    kiln_st_close(r->ck);
}

static void test_against_golden(void) {
    run r;
    golden g;
    if (!open_run(&r, test_src_path(TINY "/config.json")) || !golden_open(&g, "clip_text_f32")) {
        close_run(&r);
        return;
    }
    CHECK_EQ_INT(r.m->n_layers, 3);
    CHECK_EQ_INT(r.m->n_heads, 5);
    CHECK_EQ_INT(r.m->n_positions, 80);
    size_t n;
    int32_t *ids = golden_i32(&g, "input_ids", &n);
    if (!ids || n != 3 * 77) goto out;
    size_t D = (size_t)r.m->hidden;
    float *hid = calloc(n * D, sizeof(float)), *pool = calloc(3 * D, sizeof(float));
    kiln_err err = {0};
    for (int prec = 0; prec < 2; prec++) {
        r.be->precision = prec ? KILN_PREC_EXACT : KILN_PREC_FAST;
        CHECK_MSG(kiln_clip_text_encode(r.m, r.be, ids, 3, 77, hid, pool, &err) == KILN_OK, "%s", err.msg);
        if (prec) {
            golden_compare(&g, "last_hidden", hid, n * D, " (exact)");
            golden_compare(&g, "pooled", pool, 3 * D, " (exact)");
        }
        check_db(&g, "last_hidden", hid, n * D, prec ? 60 : 40, prec ? "exact" : "default");
        check_db(&g, "pooled", pool, 3 * D, prec ? 60 : 40, prec ? "exact" : "default");
    }
    /* pooled without the hidden output: the same rows */
    float *pool2 = calloc(3 * D, sizeof(float));
    CHECK(kiln_clip_text_encode(r.m, r.be, ids, 3, 77, NULL, pool2, &err) == KILN_OK);
    CHECK(memcmp(pool, pool2, 3 * D * sizeof(float)) == 0);
    /* the legacy rule on ids without EOS: the argmax (BOS, row 0) */
    int32_t *odd = golden_i32(&g, "odd_ids", &n);
    if (odd) {
        CHECK_EQ_INT(kiln_clip_text_pool_row(r.m, odd, 77), 0);
        CHECK(kiln_clip_text_encode(r.m, r.be, odd, 3, 77, NULL, pool2, &err) == KILN_OK);
        golden_compare(&g, "pooled_odd_argmax", pool2, 3 * D, " (legacy eos 2)");
    }
    /* refusals */
    ids[3] = (int32_t)r.m->vocab;
    CHECK_EQ_INT(kiln_clip_text_encode(r.m, r.be, ids, 1, 77, NULL, pool2, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "outside the embedding");
    CHECK_EQ_INT(kiln_clip_text_encode(r.m, r.be, ids, 1, 81, NULL, pool2, &err), KILN_E_INVALID);
    free(odd);
    free(pool2);
    free(hid);
    free(pool);
out:
    free(ids);
    golden_close(&g);
    close_run(&r);
}

/* A config with eos_token_id 7 pools at the first 7. */
static void test_first_eos_rule(void) {
    char dir[] = "/tmp/kiln-test-clip-model-XXXXXX", cfg[128], cmd[512];
    if (!mkdtemp(dir)) return;
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(cmd, sizeof cmd, "sed 's/\"eos_token_id\": 2/\"eos_token_id\": 7/' %s > %s", test_src_path(TINY "/config.json"),
             cfg);
    CHECK(system(cmd) == 0);
    run r;
    golden g;
    if (open_run(&r, cfg) && golden_open(&g, "clip_text_f32")) {
        r.be->precision = KILN_PREC_EXACT;
        CHECK_EQ_INT(r.m->eos_token_id, 7);
        size_t n, D = (size_t)r.m->hidden;
        int32_t *odd = golden_i32(&g, "odd_ids", &n);
        float *pool = calloc(3 * D, sizeof(float));
        kiln_err err = {0};
        if (odd) CHECK(kiln_clip_text_encode(r.m, r.be, odd, 3, 77, NULL, pool, &err) == KILN_OK);
        if (odd) golden_compare(&g, "pooled_eos_first", pool, 3 * D, " (eos 7)");
        free(pool);
        free(odd);
        golden_close(&g);
    }
    close_run(&r);
    /* hidden_act other than quick_gelu, sizes that disagree with the weights */
    const char *bad[][2] = {{"\"quick_gelu\"", "\"gelu\""}, {"\"num_hidden_layers\": 3", "\"num_hidden_layers\": 4"},
                            {"\"num_attention_heads\": 5", "\"num_attention_heads\": 3"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "sed 's/%s/%s/' %s > %s", bad[i][0], bad[i][1], test_src_path(TINY "/config.json"), cfg);
        CHECK(system(cmd) == 0);
        kiln_err err = {0};
        kiln_st_file *ck;
        kiln_clip_text *m = NULL;
        CHECK(kiln_st_open(test_src_path(TINY "/model.safetensors"), &ck, &err) == KILN_OK);
        CHECK_MSG(kiln_clip_text_load(ck, cfg, &m, &err) == (i == 0 ? KILN_E_UNSUPPORTED : KILN_E_FORMAT), "case %zu",
                  i);
        CHECK(m == NULL);
        kiln_st_close(ck);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    RUN(test_against_golden);
    RUN(test_first_eos_rule);
    return test_summary();
}
