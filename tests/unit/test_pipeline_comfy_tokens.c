/* test_pipeline_comfy_tokens.c - ComfyUI's FLUX.1 prompt tokenisation (text/comfy_prompt.h) against the comfy_tokens
 * golden (tools/reference/make_comfy_tokens_golden.py: sd1_clip.py's token_weights and tokenize_with_weights with
 * flux.py's settings, on the transformers tokenizers): T5 ids padded to 256 and never cut, the weights of
 * "(word:w)", nested and escaped groups, CLIP-L's first 77-token chunk and what falls after it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "kiln.h"
#include "pipeline/trace.h"
#include "test.h"
#include "text/comfy_prompt.h"

static void test_golden(void) {
    golden g;
    if (!golden_open(&g, "comfy_tokens")) return;
    kiln_tokenizer *t5 = NULL, *clip = NULL;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_load_kind(KILN_TOK_T5, NULL, &t5, &err) == KILN_OK);
    CHECK(kiln_tokenizer_load_kind(KILN_TOK_CLIP, NULL, &clip, &err) == KILN_OK);
    json_error_t je;
    json_t *prompts = json_loads(golden_meta(&g, "prompts") ? golden_meta(&g, "prompts") : "", 0, &je);
    CHECK(prompts && json_array_size(prompts) == 10);
    for (size_t i = 0; t5 && clip && prompts && i < json_array_size(prompts); i++) {
        const char *p = json_string_value(json_array_get(prompts, i));
        char key[64];
        size_t n = 0, nw = 0, nc = 0, nd = 0;
        snprintf(key, sizeof key, "t5_ids.%zu", i);
        int32_t *ids = golden_i32(&g, key, &n);
        snprintf(key, sizeof key, "t5_weights.%zu", i);
        float *w = golden_f32(&g, key, &nw);
        snprintf(key, sizeof key, "clip_ids.%zu", i);
        int32_t *cids = golden_i32(&g, key, &nc);
        snprintf(key, sizeof key, "clip_dropped.%zu", i);
        int32_t *drop = golden_i32(&g, key, &nd);
        kiln_comfy_tokens a = {0}, b = {0};
        CHECK(kiln_comfy_tokenize(t5, KILN_COMFY_T5XXL, p, strlen(p), &a, &err) == KILN_OK);
        CHECK(kiln_comfy_tokenize(clip, KILN_COMFY_CLIP_L, p, strlen(p), &b, &err) == KILN_OK);
        bool ok = ids && a.n == n && !memcmp(a.ids, ids, n * sizeof *ids);
        CHECK_MSG(ok, "prompt %zu: T5 ids (%zu, golden %zu)", i, a.n, n);
        bool wok = w && a.n == nw;
        for (size_t k = 0; wok && k < nw; k++) wok = (float)a.weights[k] == w[k];
        CHECK_MSG(wok, "prompt %zu: T5 weights", i);
        bool cok = cids && b.n == nc && !memcmp(b.ids, cids, nc * sizeof *cids);
        CHECK_MSG(cok, "prompt %zu: CLIP-L first chunk", i);
        for (size_t k = 0; cids && !cok && k < nc && k < b.n; k++)
            if (b.ids[k] != cids[k]) {
                printf("   clip[%zu] %d vs %d\n", k, b.ids[k], cids[k]);
                break;
            }
        CHECK_MSG(drop && b.n_dropped == (size_t)drop[0], "prompt %zu: %zu CLIP tokens after the chunk, golden %d", i,
                  b.n_dropped, drop ? drop[0] : -1);
        kiln_comfy_tokens_free(&a);
        kiln_comfy_tokens_free(&b);
        free(ids), free(w), free(cids), free(drop);
    }
    json_decref(prompts);
    kiln_tokenizer_free(t5);
    kiln_tokenizer_free(clip);
    golden_close(&g);
}

/* the weight parser alone: ComfyUI's segments for the syntax corners */
static void test_weights(void) {
    struct { const char *in; int n; const char *text[4]; double w[4]; } cases[] = {
        {"plain", 1, {"plain"}, {1.0}},
        {"a (b:1.5) c", 3, {"a ", "b", " c"}, {1.0, 1.5, 1.0}},
        {"((x))", 1, {"x"}, {1.1 * 1.1}},
        {"\\(lit\\)", 1, {"(lit)"}, {1.0}},
        {"(x:y)", 1, {"x:y"}, {1.1}},          /* not a float: the 1.1 stays and so does ":y" */
        {"(:2)", 1, {":2"}, {1.1}},            /* rfind(':') must be > 0 */
        {"(x: 1_5 )", 1, {"x"}, {15.0}},       /* Python's float() takes spaces and underscores */
        {"a)b(c", 1, {"a)b(c"}, {1.0}},        /* a stray ')' then an unclosed '(' stay text */
        {"(a(b:2)c)", 3, {"a", "b", "c"}, {1.1, 2.0, 1.1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiln_comfy_segment *s;
        size_t n;
        kiln_err err = {0};
        CHECK(kiln_comfy_parse_weights(cases[i].in, strlen(cases[i].in), &s, &n, &err) == KILN_OK);
        bool ok = (int)n == cases[i].n;
        for (size_t k = 0; ok && k < n; k++) ok = !strcmp(s[k].text, cases[i].text[k]) && s[k].weight == cases[i].w[k];
        CHECK_MSG(ok, "'%s': %zu segments (want %d)%s%s", cases[i].in, n, cases[i].n, n ? ", first " : "",
                  n ? s[0].text : "");
        kiln_comfy_segments_free(s, n);
    }
    char deep[600];
    memset(deep, '(', 300);
    memset(deep + 300, ')', 300);
    kiln_comfy_segment *s;
    size_t n;
    kiln_err err = {0};
    CHECK(kiln_comfy_parse_weights(deep, sizeof deep, &s, &n, &err) == KILN_E_LIMIT);
}

typedef struct two {
    float *features, *pooled;
    size_t n_features, n_pooled;
} two;

static void on_trace(void *ctx, const char *name, const float *data, size_t n) {
    two *t = ctx;
    float **dst = !strcmp(name, "features") ? &t->features : !strcmp(name, "pooled") ? &t->pooled : NULL;
    if (!dst) return;
    *dst = malloc(n * sizeof(float));
    memcpy(*dst, data, n * sizeof(float));
    if (dst == &t->features) t->n_features = n;
    else t->n_pooled = n;
}

/* The engine's KILN_TEXT_COMFY conditioning (exact f32) against ComfyUI's encode_token_weights on the tiny FLUX.1
 * encoders: the weighted T5 rows (z - z_empty) * w + z_empty, the unweighted prompt as it is, CLIP-L's pooled. */
static void test_weighted_features(void) {
    golden g;
    if (!golden_open(&g, "comfy_text_features")) return;
    kiln_engine_config cfg = kiln_engine_config_default();
    static char u[1024], c[1024], c2[1024], v[1024];
    snprintf(u, sizeof u, "%s", test_src_path("tests/data/tiny/flux1/comfy/diffusion_models/flux1-dev.safetensors"));
    snprintf(c, sizeof c, "%s", test_src_path("tests/data/tiny/flux1/comfy/text_encoders/clip_l.safetensors"));
    snprintf(c2, sizeof c2, "%s", test_src_path("tests/data/tiny/flux1/comfy/text_encoders/t5xxl_fp16.safetensors"));
    snprintf(v, sizeof v, "%s", test_src_path("tests/data/tiny/flux1/comfy/vae/ae.safetensors"));
    cfg.unet_path = u, cfg.clip_path = c, cfg.clip2_path = c2, cfg.vae_path = v;
    cfg.exact = true;
    kiln_err err = {0};
    kiln_engine *eng = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    json_error_t je;
    json_t *prompts = json_loads(golden_meta(&g, "prompts") ? golden_meta(&g, "prompts") : "", 0, &je);
    for (size_t i = 0; eng && prompts && i < json_array_size(prompts); i++) {
        kiln_request req = kiln_request_default();
        req.prompt = json_string_value(json_array_get(prompts, i));
        req.text_rule = KILN_TEXT_COMFY;
        req.width = req.height = 32;
        req.steps = 1;
        req.seed = 1;
        two t = {0};
        kiln_result *res = NULL;
        CHECK_MSG(kiln_generate_traced(eng, &req, on_trace, &t, &res, &err) == KILN_OK, "%s", err.msg);
        char key[32], label[32];
        snprintf(label, sizeof label, " (prompt %zu)", i);
        snprintf(key, sizeof key, "features.%zu", i);
        CHECK(t.features && golden_compare(&g, key, t.features, t.n_features, label));
        snprintf(key, sizeof key, "pooled.%zu", i);
        CHECK(t.pooled && golden_compare(&g, key, t.pooled, t.n_pooled, label));
        free(t.features);
        free(t.pooled);
        kiln_result_free(res);
    }
    json_decref(prompts);
    kiln_engine_close(eng);
    golden_close(&g);
}

int main(void) {
    RUN(test_golden);
    RUN(test_weights);
    RUN(test_weighted_features);
    return test_summary();
}
