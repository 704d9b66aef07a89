/* test_pipeline_batch.c - per-image prompts and seeds (kiln_request.seeds): a batch of two images with prompts
 * {A, B} and seeds {s1, s2} gives byte-identical images to two single runs (A, s1) and (B, s2) on the tiny
 * model. This is what lets the server batch queued jobs of different clients into one forward. */
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "pipeline/trace.h"
#include "test.h"

/* The f32 latents the VAE receives, image after image: the u8 pixels alone hide most differences (a batch of two
 * once ran a different matmul kernel than a single image, and the pixels still matched). */
typedef struct latents {
    float *data;
    size_t n;
} latents;

static void on_trace(void *ctx, const char *name, const float *data, size_t n) {
    latents *l = ctx;
    if (strcmp(name, "latent.image") != 0) return;
    float *p = realloc(l->data, sizeof(float) * (l->n + n));
    if (!p) return;
    memcpy(p + l->n, data, sizeof(float) * n);
    l->data = p, l->n += n;
}

static latents lat_a, lat_b, lat_both, *lat_cur;

static kiln_result *gen(kiln_engine *eng, int batch, const char *prompt, const char *const *prompts, uint64_t seed,
                        const uint64_t *seeds) {
    kiln_request req = kiln_request_default();
    req.width = 32;
    req.height = 48;
    req.steps = 2;
    req.batch = batch;
    req.prompt = prompt;
    req.prompts = prompts;
    req.seed = seed;
    req.seeds = seeds;
    kiln_result *res = NULL;
    kiln_err err = {0};
    CHECK_MSG(lat_cur ? kiln_generate_traced(eng, &req, on_trace, lat_cur, &res, &err) == KILN_OK
                      : kiln_generate(eng, &req, &res, &err) == KILN_OK,
              "%s", err.msg);
    return res;
}

static void test_batch_equals_singles(void) {
    kiln_engine_config cfg = kiln_engine_config_default();
    char md[4096];
    snprintf(md, sizeof md, "%s", test_src_path("tests/data/tiny/diffusers"));
    cfg.model_dir = md;
    cfg.n_threads = 2;
    kiln_engine *eng = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    if (!eng) return;
    const char *prompts[2] = {"a red fox in the snow", "a lighthouse at dusk, oil painting"};
    const uint64_t seeds[2] = {42, 7};
    lat_cur = &lat_both;
    kiln_result *both = gen(eng, 2, prompts[0], prompts, 0, seeds);
    lat_cur = &lat_a;
    kiln_result *a = gen(eng, 1, prompts[0], NULL, seeds[0], NULL);
    lat_cur = &lat_b;
    kiln_result *b = gen(eng, 1, prompts[1], NULL, seeds[1], NULL);
    lat_cur = NULL;
    /* bit for bit, in f32: image i of the batch is the single run of (prompt i, seed i) */
    CHECK(lat_a.n > 0 && lat_b.n == lat_a.n && lat_both.n == 2 * lat_a.n);
    if (lat_a.n > 0 && lat_b.n == lat_a.n && lat_both.n == 2 * lat_a.n) {
        CHECK(!memcmp(lat_both.data, lat_a.data, sizeof(float) * lat_a.n));
        CHECK(!memcmp(lat_both.data + lat_a.n, lat_b.data, sizeof(float) * lat_b.n));
    }
    free(lat_a.data), free(lat_b.data), free(lat_both.data);
    if (both && a && b) {
        CHECK_EQ_INT(both->n_images, 2);
        size_t n = (size_t)32 * 48 * 3;
        CHECK(both->images[0].seed == 42 && both->images[1].seed == 7);
        CHECK(!memcmp(both->images[0].pixels, a->images[0].pixels, n));
        CHECK(!memcmp(both->images[1].pixels, b->images[0].pixels, n));
        CHECK(memcmp(a->images[0].pixels, b->images[0].pixels, n) != 0); /* the two differ: the test has teeth */
    }
    /* seeds == NULL keeps seed + i */
    kiln_result *plain = gen(eng, 2, prompts[0], NULL, 42, NULL);
    if (plain) CHECK(plain->images[0].seed == 42 && plain->images[1].seed == 43);
    if (plain && a) CHECK(!memcmp(plain->images[0].pixels, a->images[0].pixels, (size_t)32 * 48 * 3));
    kiln_result_free(plain);
    kiln_result_free(both);
    kiln_result_free(a);
    kiln_result_free(b);
    kiln_engine_close(eng);
}

int main(void) {
    RUN(test_batch_equals_singles);
    return test_summary();
}
