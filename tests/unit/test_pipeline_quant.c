/* test_pipeline_quant.c - FLUX.2 [klein] from quantised DiT files: GGUF (Q8_0, Q4_K, Q6_K; BFL tensor names, as
 * the FLUX GGUFs in circulation and ComfyUI-GGUF use them) and fp8 safetensors (BFL/ComfyUI weight_scale layout,
 * ComfyUI scaled-fp8 scale_weight), against the official Flux2KleinPipeline run on the same dequantised weights
 * (tools/reference/make_quant_goldens.py). --exact, the tiny text encoder and VAE of tests/data/tiny/comfy.
 * FLUX.1 [dev] likewise (GGUF Q8_0, Q4_K; fp8 comfy-quant): the tiny [dev] DiT quantised under BFL names, its
 * fused qkv / linear1 rows sliced as views of the quantised rows, biases unquantised, against FluxPipeline on the
 * same dequantised weights (make_flux1_quant_goldens.py) with the tiny CLIP, T5 and VAE of tests/data/tiny/flux1.
 *
 * Bar: the uint8 image >= 60 dB PSNR against the oracle's (the issue's). Also printed: PSNR against the oracle's
 * image on the UNQUANTISED model - the quality cost of each format on this tiny model (docs/benchmarks.md), checked
 * only to be below the same-weights figure (a quantisation that changes nothing would be a broken test). The
 * weights must stay quantised in memory: the engine reports the DiT's bytes as the file's, not a bf16 copy's.
 * The text encoders from llama.cpp-named GGUFs likewise (tools/reference/make_te_gguf.py): klein with a Q8_0 Qwen3
 * GGUF (tests/data/gguf/te/qwen3-tiny-q8_0.gguf: the tiny Qwen3, o_proj Q8_0 and the rest F16/F32 as llama.cpp's
 * converter falls back) against Flux2KleinPipeline with that encoder's dequantised weights, and FLUX.1 [dev] with a
 * Q8_0 T5 GGUF (t5-tiny-q8_0.gguf, its token embedding quantised) against FluxPipeline; the DiTs unquantised.
 *
 * KILN_TEST_DEVICE=cuda[:N] runs the engine on that device instead of the CPU (the emulated GPU's ctest
 * emu_pipeline_quant: the CUDA backend's dequantisation in the whole pipeline, same bars), and
 * KILN_TEST_FORMATS=a,b,... runs only those formats (the names below: q4_k, fp8_scaled, flux1_q8_0, te_qwen3...);
 * a format not run is printed "not run", and a name that matches no format fails. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "compute/cuda/cuda_device.h"
#include "golden.h"
#include "kiln.h"
#include "test.h"

static double psnr_u8(const uint8_t *a, const float *b, size_t n) {
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    if (se == 0) return 999.0;
    return 10.0 * log10(255.0 * 255.0 / (se / n));
}

/* The golden gname: its "file" is the quantised DiT, or (te) the quantised text encoder (klein's Qwen3, FLUX.1's
 * T5); the other models are the tiny ones of tests/data/tiny/comfy or tests/data/tiny/flux1/comfy. */
static void run_golden(const char *gname, const char *fmt, bool flux1, bool te) {
    golden g;
    if (!golden_open(&g, gname)) return;
    int W = atoi(golden_meta(&g, "width")), H = atoi(golden_meta(&g, "height")), steps = atoi(golden_meta(&g, "steps"));
    json_error_t je;
    json_t *prompts = json_loads(golden_meta(&g, "prompts"), 0, &je);
    size_t n_noise = 0, n_img = 0, n_bf = 0;
    float *noise = golden_f32(&g, "noise", &n_noise), *ref = golden_f32(&g, "image_u8", &n_img);
    float *ref_bf16 = golden_f32(&g, "image_u8_bf16", &n_bf);
    static char u[1024], c[1024], c2[1024], v[1024];
    const char *file = golden_meta(&g, "file");
    snprintf(u, sizeof u, "%s", test_src_path(!te ? file : flux1 ? "tests/data/tiny/flux1/comfy/diffusion_models/"
                                              "flux1-dev.safetensors" : "tests/data/tiny/comfy/flux-2-klein-4b.safetensors"));
    snprintf(c, sizeof c, "%s", test_src_path(flux1 ? "tests/data/tiny/flux1/comfy/text_encoders/clip_l.safetensors"
                                              : te ? file : "tests/data/tiny/comfy/qwen_3_4b.safetensors"));
    snprintf(c2, sizeof c2, "%s", test_src_path(te ? file : "tests/data/tiny/flux1/comfy/text_encoders/t5xxl_fp16.safetensors"));
    snprintf(v, sizeof v, "%s", test_src_path(flux1 ? "tests/data/tiny/flux1/comfy/vae/ae.safetensors"
                                                    : "tests/data/tiny/comfy/flux2-vae.safetensors"));
    kiln_engine_config cfg = kiln_engine_config_default();
    cfg.unet_path = u, cfg.clip_path = c, cfg.vae_path = v;
    if (flux1) cfg.clip2_path = c2;
    cfg.exact = true;
    kiln_err err = {0};
    const char *dev = getenv("KILN_TEST_DEVICE");
    kiln_backend_kind kind = KILN_BACKEND_CPU;
    CHECK_MSG(kiln_device_parse(dev, &kind, &cfg.device_index, &err) == KILN_OK, "KILN_TEST_DEVICE: %s", err.msg);
    cfg.device = kind == KILN_BACKEND_CUDA ? KILN_DEVICE_CUDA : KILN_DEVICE_CPU;
    kiln_engine *eng = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s: %s", fmt, err.msg);
    if (eng && noise && ref && ref_bf16 && prompts) {
        kiln_request req = kiln_request_default();
        req.prompt = json_string_value(json_array_get(prompts, 0));
        req.width = W, req.height = H, req.steps = steps;
        if (flux1) req.guidance = (float)atof(golden_meta(&g, "guidance_scale"));
        req.noise = noise, req.noise_count = n_noise;
        kiln_result *res = NULL;
        CHECK_MSG(kiln_generate(eng, &req, &res, &err) == KILN_OK, "%s: %s", fmt, err.msg);
        if (res && res->n_images == 1 && n_img == (size_t)W * H * 3 && n_bf == n_img) {
            double p = psnr_u8(res->images[0].pixels, ref, n_img), q = psnr_u8(res->images[0].pixels, ref_bf16, n_img);
            printf("  %-10s (%s): %.2f dB vs the oracle on the same dequantised weights; %.2f dB vs the unquantised "
                   "%s's image\n", fmt, golden_meta(&g, "types"), p, q, te ? "text encoder" : "model");
            CHECK_MSG(p >= 60.0, "%s: PSNR %.2f dB < 60 dB", fmt, p);
            CHECK_MSG(q < p, "%s: the quantised model's image equals the unquantised one's (%.2f dB)", fmt, q);
        } else {
            CHECK_MSG(0, "%s: no image of the golden's size", fmt);
        }
        kiln_result_free(res);
    }
    kiln_engine_close(eng);
    json_decref(prompts);
    free(noise), free(ref), free(ref_bf16);
    golden_close(&g);
}

/* KILN_TEST_FORMATS: whether name is to run (and a record that it exists, for the check of unknown names) */
static const char *const known[] = {"q8_0", "q4_k", "q6_k", "fp8_bfl", "fp8_scaled", "flux1_q8_0", "flux1_q4_k",
                                    "flux1_fp8_bfl", "te_qwen3", "te_t5"};
static bool selected(const char *name) {
    const char *list = getenv("KILN_TEST_FORMATS");
    if (!list || !*list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        p += len + (e ? 1 : 0);
    }
    printf("  not run: %s (KILN_TEST_FORMATS=%s)\n", name, list);
    return false;
}

static void run_format(const char *fmt, bool flux1) {
    char gname[64], sel[32];
    snprintf(sel, sizeof sel, "%s%s", flux1 ? "flux1_" : "", fmt);
    if (!selected(sel)) return;
    snprintf(gname, sizeof gname, "quant_%s%s_f32", flux1 ? "flux1_" : "", fmt);
    run_golden(gname, fmt, flux1, false);
}

static void test_q8_0(void) { run_format("q8_0", false); }
static void test_q4_k(void) { run_format("q4_k", false); }
static void test_q6_k(void) { run_format("q6_k", false); }
static void test_fp8_bfl(void) { run_format("fp8_bfl", false); }
static void test_fp8_scaled(void) { run_format("fp8_scaled", false); }
static void test_flux1_q8_0(void) { run_format("q8_0", true); }
static void test_flux1_q4_k(void) { run_format("q4_k", true); }
static void test_flux1_fp8_bfl(void) { run_format("fp8_bfl", true); }
static void test_te_qwen3_q8_0_gguf(void) {
    if (selected("te_qwen3")) run_golden("gguf_te_klein_q8_0", "Qwen3 Q8_0", false, true);
}
static void test_te_t5_q8_0_gguf(void) {
    if (selected("te_t5")) run_golden("gguf_te_flux1_t5_q8_0", "T5 Q8_0", true, true);
}

/* every name in KILN_TEST_FORMATS is a format: a misspelt one would silently run nothing */
static void test_formats_known(void) {
    const char *list = getenv("KILN_TEST_FORMATS");
    for (const char *p = list ? list : ""; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool found = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            found |= strlen(known[i]) == len && !strncmp(known[i], p, len);
        CHECK_MSG(found, "KILN_TEST_FORMATS names an unknown format '%.*s'", (int)len, p);
        p += len + (e ? 1 : 0);
    }
}

int main(void) {
    RUN(test_formats_known);
    RUN(test_q8_0);
    RUN(test_q4_k);
    RUN(test_q6_k);
    RUN(test_fp8_bfl);
    RUN(test_fp8_scaled);
    RUN(test_flux1_q8_0);
    RUN(test_flux1_q4_k);
    RUN(test_flux1_fp8_bfl);
    RUN(test_te_qwen3_q8_0_gguf);
    RUN(test_te_t5_q8_0_gguf);
    return test_summary();
}
