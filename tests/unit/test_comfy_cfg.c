/* test_comfy_cfg.c - a ComfyUI graph's CFG through the server engine (graph/engine.h, what VAEDecode calls) is
 * ComfyUI's rule (issues 16/17): CFG whenever cfg is not 1, whatever the variant the single files open as, against
 * the negative CLIPTextEncode text, or all-zero features for ConditioningZeroOut (negative_prompt NULL).
 *
 * On the tiny ComfyUI single files (tests/data/tiny/comfy), opened by the server as the distilled klein:
 *   cfg 4 + negative text  == the C API with the base variant, guidance 4 and that negative_prompt (what
 *                             `kiln generate --base --guidance 4 --negative-prompt` runs), pixel for pixel;
 *   cfg 1                  == the distilled image (conditional prediction only), and the negative is reported unused;
 *   another negative text changes the image at cfg 4; ConditioningZeroOut differs from the empty-prompt negative.
 * About 2 s (release). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kiln.h"
#include "server/engine_select.h"
#include "test.h"

#define SIDE 32
#define PIXELS ((size_t)SIDE * SIDE * 3)

static char unet[1024], clip[1024], vae[1024];

/* One image through the server's engine, as a graph with this cfg and negative (NULL: ConditioningZeroOut). */
static bool graph_image(kiln_gen_engine *e, float cfg, const char *negative, uint8_t *px, char *warnings) {
    kiln_gen_params p = {.unet_path = unet, .clip_path = clip, .vae_path = vae, .prompt = "a red fox",
                         .negative_prompt = negative, .width = SIDE, .height = SIDE, .steps = 2, .batch = 1,
                         .seed = 7, .cfg = cfg, .sampler = "euler", .request_id = "t"};
    kiln_gen_images out = {0};
    kiln_err err = {0};
    kiln_status s = e->generate(e->self, &p, NULL, NULL, &out, &err);
    CHECK_MSG(s == KILN_OK, "%s", err.msg);
    bool ok = s == KILN_OK && out.n == 1 && out.width == SIDE && out.height == SIDE;
    if (ok) memcpy(px, out.pixels, PIXELS);
    if (warnings) snprintf(warnings, 512, "%s", out.warnings);
    kiln_free(out.pixels);
    return ok;
}

/* The same image through the C API on the same files, diffusers' rule, the given variant. */
static bool api_image(kiln_variant variant, float guidance, const char *negative, uint8_t *px) {
    kiln_engine_config cfg = kiln_engine_config_default();
    cfg.unet_path = unet;
    cfg.clip_path = clip;
    cfg.vae_path = vae;
    cfg.variant = variant;
    kiln_engine *eng = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    if (!eng) return false;
    kiln_request req = kiln_request_default();
    req.prompt = "a red fox";
    req.width = req.height = SIDE;
    req.steps = 2;
    req.seed = 7;
    req.guidance = guidance;
    req.negative_prompt = negative;
    kiln_result *res = NULL;
    kiln_status s = kiln_generate(eng, &req, &res, &err);
    CHECK_MSG(s == KILN_OK, "%s", err.msg);
    bool ok = s == KILN_OK && res->n_images == 1;
    if (ok) memcpy(px, res->images[0].pixels, PIXELS);
    kiln_result_free(res);
    kiln_engine_close(eng);
    return ok;
}

static void test_comfy_cfg(void) {
    snprintf(unet, sizeof unet, "%s", test_src_path("tests/data/tiny/comfy/flux-2-klein-4b.safetensors"));
    snprintf(clip, sizeof clip, "%s", test_src_path("tests/data/tiny/comfy/qwen_3_4b.safetensors"));
    snprintf(vae, sizeof vae, "%s", test_src_path("tests/data/tiny/comfy/flux2-vae.safetensors"));
    kiln_gen_engine *e = kiln_server_engine_new("cpu");
    CHECK(e != NULL);
    if (!e) return;
    static uint8_t g4[PIXELS], base4[PIXELS], g1[PIXELS], dist[PIXELS], g4b[PIXELS], gzero[PIXELS], gempty[PIXELS];
    char w1[512] = "", w4[512] = "";
    bool ok = graph_image(e, 4.0f, "blurry, low quality", g4, w4) &&
              api_image(KILN_VARIANT_BASE, 4.0f, "blurry, low quality", base4) &&
              graph_image(e, 1.0f, "blurry, low quality", g1, w1) && api_image(KILN_VARIANT_DISTILLED, 0, NULL, dist) &&
              graph_image(e, 4.0f, "a green field", g4b, NULL) && graph_image(e, 4.0f, NULL, gzero, NULL) &&
              graph_image(e, 4.0f, "", gempty, NULL);
    CHECK(ok);
    if (ok) {
        CHECK_MSG(!memcmp(g4, base4, PIXELS), "graph cfg 4 differs from the base variant with guidance 4");
        CHECK_MSG(!strstr(w4, "ignored"), "cfg 4 warned: '%s'", w4);
        CHECK_MSG(!memcmp(g1, dist, PIXELS), "graph cfg 1 differs from the conditional-only (distilled) image");
        CHECK_MSG(strstr(w1, "negative prompt ignored"), "cfg 1: no warning that CFG is off: '%s'", w1);
        CHECK_MSG(memcmp(g4, g1, PIXELS), "cfg 4 gave the cfg 1 image");
        CHECK_MSG(memcmp(g4, g4b, PIXELS), "another negative text left the cfg 4 image unchanged");
        CHECK_MSG(memcmp(gzero, gempty, PIXELS), "ConditioningZeroOut gave the empty-prompt negative's image");
    }
    kiln_server_engine_free(e);
}

/* The C API refuses what it cannot mean: an unknown rule, and a zeroed negative given a text as well. */
static void test_refusals(void) {
    kiln_engine_config cfg = kiln_engine_config_default();
    cfg.unet_path = unet;
    cfg.clip_path = clip;
    cfg.vae_path = vae;
    kiln_engine *eng = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    if (!eng) return;
    kiln_request req = kiln_request_default();
    req.width = req.height = SIDE;
    req.steps = 1;
    req.cfg_rule = (kiln_cfg_rule)7;
    kiln_result *res = NULL;
    CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID && !res);
    CHECK_ERR_CONTAINS(&err, "cfg_rule 7");
    req.cfg_rule = KILN_CFG_COMFY;
    req.negative_zero = true;
    req.negative_prompt = "x";
    CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID && !res);
    CHECK_ERR_CONTAINS(&err, "zeroed negative");
    kiln_engine_close(eng);
}

int main(void) {
    RUN(test_comfy_cfg);
    RUN(test_refusals);
    return test_summary();
}
