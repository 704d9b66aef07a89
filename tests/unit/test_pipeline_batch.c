/* test_pipeline_batch.c - per-image prompts and seeds (kiln_request.seeds): a batch of two images with prompts
 * {A, B} and seeds {s1, s2} gives byte-identical images to two single runs (A, s1) and (B, s2) on the tiny
 * model. This is what lets the server batch queued jobs of different clients into one forward. */
#include <string.h>

#include "kiln.h"
#include "test.h"

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
    CHECK_MSG(kiln_generate(eng, &req, &res, &err) == KILN_OK, "%s", err.msg);
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
    kiln_result *both = gen(eng, 2, prompts[0], prompts, 0, seeds);
    kiln_result *a = gen(eng, 1, prompts[0], NULL, seeds[0], NULL);
    kiln_result *b = gen(eng, 1, prompts[1], NULL, seeds[1], NULL);
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
