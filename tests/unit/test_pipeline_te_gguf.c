/* test_pipeline_te_gguf.c - FLUX.2 [klein] end to end with the text encoder from a llama.cpp-named Q8_0 GGUF
 * (tests/data/gguf/te/qwen3-tiny-q8_0.gguf: the committed tiny Qwen3, o_proj Q8_0 and the rest F16/F32 as
 * llama.cpp's converter falls back) against the official Flux2KleinPipeline run with that text encoder's
 * dequantised weights (tools/reference/make_te_gguf.py, golden gguf_te_klein_q8_0); the tiny DiT and VAE of
 * tests/data/tiny/comfy, --exact. Bar: the uint8 image >= 60 dB PSNR, the project's bound for quantised weights
 * (test_pipeline_quant.c). Also printed: PSNR against the image made with the unquantised text encoder.
 * FLUX.1 [dev] likewise with --clip2 a Q8_0 T5 GGUF (t5-tiny-q8_0.gguf: the tiny FLUX.1 T5 in llama.cpp's
 * t5encoder names, its token embedding quantised) against FluxPipeline (golden gguf_te_flux1_t5_q8_0). */
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

static void run_golden(const char *gname, bool flux1) {
    golden g;
    if (!golden_open(&g, gname)) return;
    int W = atoi(golden_meta(&g, "width")), H = atoi(golden_meta(&g, "height")), steps = atoi(golden_meta(&g, "steps"));
    json_error_t je;
    json_t *prompts = json_loads(golden_meta(&g, "prompts"), 0, &je);
    size_t n_noise = 0, n_img = 0, n_bf = 0;
    float *noise = golden_f32(&g, "noise", &n_noise), *ref = golden_f32(&g, "image_u8", &n_img);
    float *ref_bf16 = golden_f32(&g, "image_u8_bf16", &n_bf);
    static char u[1024], c[1024], c2[1024], v[1024];
    snprintf(u, sizeof u, "%s", test_src_path(flux1 ? "tests/data/tiny/flux1/comfy/diffusion_models/flux1-dev.safetensors"
                                                    : "tests/data/tiny/comfy/flux-2-klein-4b.safetensors"));
    snprintf(c, sizeof c, "%s", test_src_path(flux1 ? "tests/data/tiny/flux1/comfy/text_encoders/clip_l.safetensors"
                                                    : golden_meta(&g, "file")));
    snprintf(c2, sizeof c2, "%s", test_src_path(golden_meta(&g, "file")));
    snprintf(v, sizeof v, "%s", test_src_path(flux1 ? "tests/data/tiny/flux1/comfy/vae/ae.safetensors"
                                                    : "tests/data/tiny/comfy/flux2-vae.safetensors"));
    kiln_engine_config cfg = kiln_engine_config_default();
    cfg.unet_path = u, cfg.clip_path = c, cfg.vae_path = v;
    if (flux1) cfg.clip2_path = c2;
    cfg.exact = true;
    kiln_err err = {0};
    kiln_engine *eng = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    if (eng && noise && ref && ref_bf16 && prompts) {
        kiln_request req = kiln_request_default();
        req.prompt = json_string_value(json_array_get(prompts, 0));
        req.width = W, req.height = H, req.steps = steps;
        if (flux1) req.guidance = (float)atof(golden_meta(&g, "guidance_scale"));
        req.noise = noise, req.noise_count = n_noise;
        kiln_result *res = NULL;
        CHECK_MSG(kiln_generate(eng, &req, &res, &err) == KILN_OK, "%s", err.msg);
        if (res && res->n_images == 1 && n_img == (size_t)W * H * 3 && n_bf == n_img) {
            double p = psnr_u8(res->images[0].pixels, ref, n_img), q = psnr_u8(res->images[0].pixels, ref_bf16, n_img);
            printf("  %s Q8_0 GGUF (%s): %.2f dB vs the oracle on the same dequantised weights; %.2f dB vs the "
                   "unquantised text encoder's image\n", flux1 ? "T5" : "Qwen3", golden_meta(&g, "types"), p, q);
            CHECK_MSG(p >= 60.0, "%s: PSNR %.2f dB < 60 dB", gname, p);
        } else {
            CHECK_MSG(0, "no image of the golden's size");
        }
        kiln_result_free(res);
    }
    kiln_engine_close(eng);
    json_decref(prompts);
    free(noise), free(ref), free(ref_bf16);
    golden_close(&g);
}

static void test_klein_qwen3_q8_0(void) { run_golden("gguf_te_klein_q8_0", false); }
static void test_flux1_t5_q8_0(void) { run_golden("gguf_te_flux1_t5_q8_0", true); }

int main(void) {
    RUN(test_klein_qwen3_q8_0);
    RUN(test_flux1_t5_q8_0);
    return test_summary();
}
