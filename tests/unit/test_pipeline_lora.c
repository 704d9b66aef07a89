/* test_pipeline_lora.c - LoRA adapters on the FLUX.2 [klein] DiT (models/lora.h, compute/lora.h) against the
 * official pipeline: diffusers' Flux2KleinPipeline.load_lora_weights + fuse_lora on the tiny model
 * (tools/reference/make_lora_goldens.py), one golden per format (diffusers lora_A/lora_B, kohya lora_down/lora_up
 * with alpha, BFL/ai-toolkit diffusion_model.*) and one with two adapters stacked. kiln applies the adapters at
 * run time beside the base matmuls; the bar is >= 60 dB PSNR on the uint8 image, --exact, on both layouts the
 * engine loads (the ComfyUI single file: fused qkv; the diffusers folder: split q/k/v), so each mapping is used
 * both ways. The adapters must also change the image (vs the golden's image without them), come off again (the
 * next request without them gives the base image), and bad adapter files are refused with the reason. The same
 * goldens again with the adapters merged at load (kiln_request.lora_merge). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "kiln.h"
#include "test.h"

static double psnr_u8(const uint8_t *a, const float *b, size_t n) {
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    if (se == 0) return 999.0;
    return 10.0 * log10(255.0 * 255.0 / (se / n));
}

static kiln_engine *open_engine(bool comfy) {
    static char u[1024], c[1024], v[1024], md[1024];
    kiln_engine_config cfg = kiln_engine_config_default();
    if (comfy) {
        snprintf(u, sizeof u, "%s", test_src_path("tests/data/tiny/comfy/flux-2-klein-4b.safetensors"));
        snprintf(c, sizeof c, "%s", test_src_path("tests/data/tiny/comfy/qwen_3_4b.safetensors"));
        snprintf(v, sizeof v, "%s", test_src_path("tests/data/tiny/comfy/flux2-vae.safetensors"));
        cfg.unet_path = u, cfg.clip_path = c, cfg.vae_path = v;
    } else {
        snprintf(md, sizeof md, "%s", test_src_path("tests/data/tiny/diffusers"));
        cfg.model_dir = md;
    }
    cfg.exact = true;
    kiln_err err = {0};
    kiln_engine *e = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &e, &err) == KILN_OK, "%s", err.msg);
    return e;
}

/* Runs the golden's request with its adapters (with_loras) or without; returns the PSNR against image_u8 and, in
 * *base_db, against image_u8_base. */
static bool merge_mode;

static double run_case(kiln_engine *e, const char *case_name, bool with_loras, double *base_db, kiln_err *err_out) {
    char gname[64];
    snprintf(gname, sizeof gname, "lora_%s_f32", case_name);
    golden g;
    if (!golden_open(&g, gname)) return 0;
    json_error_t je;
    json_t *prompts = json_loads(golden_meta(&g, "prompts"), 0, &je), *ls = json_loads(golden_meta(&g, "loras"), 0, &je);
    size_t n_noise = 0, n_img = 0, n_base = 0;
    float *noise = golden_f32(&g, "noise", &n_noise), *ref = golden_f32(&g, "image_u8", &n_img);
    float *base = golden_f32(&g, "image_u8_base", &n_base);
    static char paths[8][1024];
    kiln_lora loras[8];
    int n = ls ? (int)json_array_size(ls) : 0;
    for (int i = 0; i < n && i < 8; i++) {
        snprintf(paths[i], sizeof paths[i], "%s", test_src_path(json_string_value(json_array_get(json_array_get(ls, i), 0))));
        loras[i] = (kiln_lora){paths[i], (float)json_number_value(json_array_get(json_array_get(ls, i), 1))};
    }
    kiln_request req = kiln_request_default();
    req.prompt = json_string_value(json_array_get(prompts, 0));
    req.width = atoi(golden_meta(&g, "width")), req.height = atoi(golden_meta(&g, "height"));
    req.steps = atoi(golden_meta(&g, "steps"));
    req.noise = noise, req.noise_count = n_noise;
    if (with_loras) req.loras = loras, req.n_loras = n, req.lora_merge = merge_mode;
    kiln_result *res = NULL;
    kiln_err err = {0};
    double p = 0;
    CHECK_MSG(kiln_generate(e, &req, &res, &err) == KILN_OK, "%s: %s", case_name, err.msg);
    if (res && n_img == (size_t)req.width * req.height * 3 && n_base == n_img) {
        p = psnr_u8(res->images[0].pixels, ref, n_img);
        *base_db = psnr_u8(res->images[0].pixels, base, n_img);
    }
    if (err_out) *err_out = err;
    kiln_result_free(res);
    json_decref(prompts), json_decref(ls);
    free(noise), free(ref), free(base);
    golden_close(&g);
    return p;
}

static void check_layout(bool comfy) {
    kiln_engine *e = open_engine(comfy);
    if (!e) return;
    const char *cases[] = {"diffusers", "kohya", "bfl", "stacked"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double base_db = 0, p = run_case(e, cases[i], true, &base_db, NULL);
        printf("  %-9s (%s layout): %.2f dB vs diffusers load_lora_weights + fuse; %.2f dB vs the image without "
               "adapters\n", cases[i], comfy ? "BFL" : "diffusers", p, base_db);
        CHECK_MSG(p >= 60.0, "%s: PSNR %.2f dB < 60 dB", cases[i], p);
        CHECK_MSG(base_db < 40.0, "%s: the adapters barely change the image (%.2f dB from the base)", cases[i], base_db);
    }
    /* merged at load instead (f32 copies of the adapted weights in --exact): the same images */
    merge_mode = true;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double base_db = 0, p = run_case(e, cases[i], true, &base_db, NULL);
        printf("  %-9s (%s layout, merged): %.2f dB vs diffusers load_lora_weights + fuse\n", cases[i],
               comfy ? "BFL" : "diffusers", p);
        CHECK_MSG(p >= 60.0, "%s merged: PSNR %.2f dB < 60 dB", cases[i], p);
    }
    merge_mode = false;
    /* and off again: the same request without adapters is the base image */
    double base_db = 0;
    run_case(e, "bfl", false, &base_db, NULL);
    CHECK_MSG(base_db >= 60.0, "after the adapters came off: %.2f dB from the base image", base_db);
    kiln_engine_close(e);
}

static void test_lora_bfl_layout(void) { check_layout(true); }
static void test_lora_diffusers_layout(void) { check_layout(false); }

static void test_lora_refusals(void) {
    kiln_engine *e = open_engine(true);
    if (!e) return;
    static const struct { const char *file, *needle; } bad[] = {
        {"tests/data/lora/bad-target.safetensors", "not a weight of this DiT"},
        {"tests/data/lora/bad-rank.safetensors", "rank mismatch"},
        {"tests/data/lora/bad-orphan.safetensors", "has no"},
        {"tests/data/lora/bad-alpha.safetensors", "alpha outside the kohya format"},
        {"tests/data/lora/no-such-file.safetensors", "no-such-file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        static char p[1024];
        snprintf(p, sizeof p, "%s", test_src_path(bad[i].file));
        kiln_lora l = {p, 1.0f};
        kiln_request req = kiln_request_default();
        req.prompt = "x";
        req.width = req.height = 32;
        req.steps = 1;
        req.loras = &l, req.n_loras = 1;
        kiln_result *res = NULL;
        kiln_err err = {0};
        CHECK_MSG(kiln_generate(e, &req, &res, &err) != KILN_OK, "%s accepted", bad[i].file);
        CHECK_ERR_CONTAINS(&err, bad[i].needle);
        kiln_result_free(res);
    }
    kiln_engine_close(e);
}

int main(void) {
    RUN(test_lora_bfl_layout);
    RUN(test_lora_diffusers_layout);
    RUN(test_lora_refusals);
    return test_summary();
}
