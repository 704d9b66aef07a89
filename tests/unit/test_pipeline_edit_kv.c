/* test_pipeline_edit_kv.c - FLUX.2 [klein] 9B-KV against the official Flux2KleinKVPipeline (goldens kv_t2i, kv_r1,
 * kv_r3 from tools/reference/make_kv_goldens.py on tests/data/tiny/diffusers-9b-kv: the tiny 9B-shaped model under
 * a model_index.json naming the KV pipeline). Without references the KV pipeline is the standard forward; with
 * them step 0 runs the references (modulated at the fixed timestep, attending only to themselves) and caches
 * their K/V in every block, and steps 1-3 run the noisy tokens alone against that cache: every step's velocity
 * and latents, the reference tokens, the sigmas and the images are compared (edit_harness.h), the uint8 image by
 * PSNR: >= 60 dB with exact (f32) matmuls against the fp32 pipeline, >= 40 dB in the default precision. The
 * three-reference kv_r3 is test_pipeline_edit_kv_large.c. Also: what the KV engine refuses (the base variant, CFG
 * with references) and that it says what it runs. */
#include "edit_harness.h"

static void test_kv_t2i(void) {
    run_case("kv_t2i", false, true);
    run_case("kv_t2i", false, false);
}

static void test_kv_r1(void) {
    run_case("kv_r1", false, true);
    run_case("kv_r1", false, false);
}

static void test_kv_refusals(void) {
    kiln_err err = {0};
    kiln_engine_config cfg = kiln_engine_config_default();
    char md[1024];
    snprintf(md, sizeof md, "%s", test_src_path("tests/data/tiny/diffusers-9b-kv"));
    cfg.model_dir = md;
    kiln_engine *eng = NULL;
    cfg.variant = KILN_VARIANT_BASE; /* the KV pipeline has no CFG */
    CHECK(kiln_engine_open(&cfg, &eng, &err) == KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "Flux2KleinKVPipeline");
    cfg.variant = KILN_VARIANT_AUTO;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    if (!eng) return;
    CHECK(strstr(kiln_engine_describe(eng), "Flux2KleinKVPipeline") != NULL);
    CHECK(kiln_engine_variant(eng) == KILN_VARIANT_DISTILLED);
    uint8_t *px = kiln_calloc(96 * 64 * 3, 1);
    kiln_image_in im = {px, 96, 64};
    kiln_request req = kiln_request_default();
    req.refs = &im;
    req.n_refs = 1;
    req.steps = 1;
    req.cfg_rule = KILN_CFG_COMFY; /* a graph's cfg 3 would need an unconditional half the KV pipeline never runs */
    req.guidance = 3.0f;
    kiln_result *res = NULL;
    CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "Flux2KleinKVPipeline");
    req.guidance = 1.0f; /* cfg 1: no unconditional half */
    CHECK_MSG(kiln_generate(eng, &req, &res, &err) == KILN_OK, "%s", err.msg);
    kiln_result_free(res);
    kiln_engine_close(eng);
    kiln_free(px);
}

int main(void) {
    g_size = "9b-kv";
    RUN(test_kv_refusals);
    RUN(test_kv_t2i);
    RUN(test_kv_r1);
    return test_summary();
}
