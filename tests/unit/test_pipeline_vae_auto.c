/* test_pipeline_vae_auto.c - the automatic choice of a tiled VAE decode (pipeline/generate.c plan_vae), through
 * kiln_estimate_memory and kiln_generate on the tiny model at 512x512 (a 64x64 latent): with room the decode is
 * untiled; with a memory limit the untiled decode exceeds but 32-latent tiles fit, the estimate drops to the
 * tiled one and the request runs (its image differs from the untiled one: it was tiled); --vae-tile off under
 * the same limit is refused up front (KILN_E_LIMIT). */
#include <string.h>

#include "kiln.h"
#include "test.h"

static size_t estimate(size_t limit, int vae_tile, kiln_status *st) {
    kiln_engine_config cfg = kiln_engine_config_default();
    cfg.model_dir = test_src_path("tests/data/tiny/diffusers");
    cfg.memory_limit = limit;
    cfg.vae_tile = vae_tile;
    kiln_engine *e = NULL;
    kiln_err err = {0};
    size_t bytes = 0;
    *st = kiln_engine_open(&cfg, &e, &err);
    CHECK_MSG(*st == KILN_OK, "%s", err.msg);
    if (!e) return 0;
    kiln_request q = kiln_request_default();
    q.prompt = "a fox";
    q.width = q.height = 512;
    q.steps = 1;
    CHECK(kiln_estimate_memory(e, &q, &bytes, &err) == KILN_OK);
    kiln_engine_close(e);
    return bytes;
}

static void test_auto(void) {
    kiln_status st;
    size_t roomy = estimate((size_t)64e9, 0, &st), forced = estimate((size_t)64e9, 32, &st);
    printf("  512x512 estimate: untiled %.1f MB, 32-latent tiles %.1f MB\n", roomy / 1e6, forced / 1e6);
    CHECK(forced + 50000000 < roomy); /* tiles save the untiled decode's activations (~150 MB here) */
    size_t limit = (forced + roomy) / 2;
    size_t tight = estimate(limit, 0, &st);
    printf("  with a %.1f MB limit: %.1f MB (automatic tiling)\n", limit / 1e6, tight / 1e6);
    CHECK(tight == forced);
    /* and the request itself: refused with tiling off, run with tiling automatic */
    for (int off = 1; off >= 0; off--) {
        kiln_engine_config cfg = kiln_engine_config_default();
        cfg.model_dir = test_src_path("tests/data/tiny/diffusers");
        cfg.memory_limit = limit;
        cfg.vae_tile = off ? -1 : 0;
        kiln_engine *e = NULL;
        kiln_err err = {0};
        if (kiln_engine_open(&cfg, &e, &err) != KILN_OK) {
            CHECK_MSG(0, "%s", err.msg);
            continue;
        }
        kiln_request q = kiln_request_default();
        q.prompt = "a fox";
        q.width = q.height = 512;
        q.steps = 1;
        kiln_result *res = NULL;
        kiln_status s = kiln_generate(e, &q, &res, &err);
        if (off) CHECK_MSG(s == KILN_E_LIMIT, "tiling off under the limit: %s", err.msg);
        else CHECK_MSG(s == KILN_OK && res && res->n_images == 1, "automatic tiling: %s", err.msg);
        kiln_result_free(res);
        kiln_engine_close(e);
    }
}

int main(void) {
    RUN(test_auto);
    return test_summary();
}
