/* edit_harness.h - runs an editing / img2img / klein 9B golden through kiln and compares every stage (shared by
 * test_pipeline_edit.c and test_pipeline_edit_large.c; see the former's comment). */
#ifndef KILN_TEST_EDIT_HARNESS_H
#define KILN_TEST_EDIT_HARNESS_H

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/sha256.h"
#include "golden.h"
#include "io/image_load.h"
#include "kiln.h"
#include "pipeline/ref_image.h"
#include "pipeline/trace.h"
#include "test.h"
#include "trace_capture.h"

typedef struct loaded {
    uint8_t *px[KILN_MAX_REFS + 1];
    kiln_image_in im[KILN_MAX_REFS + 1];
    int n;
} loaded;

static inline bool load_image(loaded *l, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/images/%s.png", name);
    kiln_err err = {0};
    kiln_image_in *im = &l->im[l->n];
    CHECK_MSG(kiln_image_load(test_src_path(rel), NULL, &l->px[l->n], &im->width, &im->height, &err) == KILN_OK, "%s",
              err.msg);
    im->pixels = l->px[l->n];
    if (!im->pixels) return false;
    l->n++;
    return true;
}

/* The tiny klein 4B (size "4b") or the 9B-shaped one ("9b"), as a diffusers folder or ComfyUI single files; "9b-kv":
 * the 9B-shaped folder under Flux2KleinKVPipeline (its single files are klein 9B's: they cannot say KV). */
static const char *g_size = "4b";

static inline kiln_engine *open_engine(bool comfy, bool exact) {
    const bool kv = !strcmp(g_size, "9b-kv"), b9 = kv || !strcmp(g_size, "9b");
    kiln_err err = {0};
    kiln_engine_config cfg = kiln_engine_config_default();
    static char md[1024], u[1024], c[1024], v[1024];
    if (!comfy) {
        snprintf(md, sizeof md, "%s", test_src_path(kv   ? "tests/data/tiny/diffusers-9b-kv"
                                                    : b9 ? "tests/data/tiny/diffusers-9b"
                                                         : "tests/data/tiny/diffusers"));
        cfg.model_dir = md;
    } else {
        snprintf(u, sizeof u, "%s", test_src_path(b9 ? "tests/data/tiny/comfy-9b/flux-2-klein-9b.safetensors"
                                                     : "tests/data/tiny/comfy/flux-2-klein-4b.safetensors"));
        snprintf(c, sizeof c, "%s", test_src_path(b9 ? "tests/data/tiny/comfy-9b/qwen_3_8b.safetensors"
                                                     : "tests/data/tiny/comfy/qwen_3_4b.safetensors"));
        snprintf(v, sizeof v, "%s", test_src_path(b9 ? "tests/data/tiny/comfy-9b/flux2-vae.safetensors"
                                                     : "tests/data/tiny/comfy/flux2-vae.safetensors"));
        cfg.unet_path = u;
        cfg.clip_path = c;
        cfg.vae_path = v;
    }
    cfg.exact = exact;
    kiln_engine *eng = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    return eng;
}

/* One golden through one engine. exact: against <name>_f32 at >= 60 dB; else every stage against <name>_bf16 with
 * its tolerances and the image against <name>_f32 at >= 40 dB. */
static inline void run_case(const char *name, bool comfy, bool exact) {
    char gname[64], oname[64];
    snprintf(gname, sizeof gname, "%s_%s", name, exact ? "f32" : "bf16");
    snprintf(oname, sizeof oname, "%s_f32", name);
    const char *label = comfy ? (exact ? " (comfy, exact)" : " (comfy)") : (exact ? " (exact)" : "");
    golden g, o;
    if (!golden_open(&g, gname)) return;
    if (!golden_open(&o, oname)) {
        golden_close(&g);
        return;
    }
    int W = atoi(golden_meta(&g, "width")), H = atoi(golden_meta(&g, "height"));
    const char *sr = golden_meta(&g, "steps_run"), *rw = golden_meta(&g, "request_width");
    int steps = atoi(golden_meta(&g, "steps")), n_run = sr ? atoi(sr) : steps;
    json_error_t je;
    const char *refs_meta = golden_meta(&g, "refs");
    json_t *prompts = json_loads(golden_meta(&g, "prompts"), 0, &je);
    json_t *refs = refs_meta ? json_loads(refs_meta, 0, &je) : NULL;
    loaded l = {0};
    for (size_t i = 0; refs && i < json_array_size(refs); i++) load_image(&l, json_string_value(json_array_get(refs, i)));
    int n_refs = l.n;
    const char *init = golden_meta(&g, "init");
    if (init) load_image(&l, init);
    size_t n_noise;
    float *noise = golden_f32(&g, "noise", &n_noise);
    kiln_engine *eng = open_engine(comfy, exact);
    traces tr = {0};
    kiln_result *res = NULL;
    if (!eng || !noise || !prompts) goto out;
    kiln_request req = kiln_request_default();
    req.prompt = json_string_value(json_array_get(prompts, 0));
    req.width = rw ? atoi(rw) : W; /* 0: the size comes from the first reference */
    req.height = rw ? atoi(golden_meta(&g, "request_height")) : H;
    req.steps = steps;
    req.noise = noise;
    req.noise_count = n_noise;
    req.refs = n_refs ? l.im : NULL;
    req.n_refs = n_refs;
    if (init) {
        req.init_image = &l.im[n_refs];
        req.strength = atof(golden_meta(&g, "strength"));
    }
    kiln_err err = {0};
    CHECK_MSG(kiln_generate_traced(eng, &req, trace_capture, &tr, &res, &err) == KILN_OK, "%s: %s", name, err.msg);
    if (!res) goto out;
    CHECK_EQ_INT(res->width, W);
    CHECK_EQ_INT(res->height, H);
    CHECK_EQ_INT(res->n_steps, n_run);
    const char *stages[] = {"features", "sigmas", "ref_tokens", "init_latent", "image_float"};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        if (!kiln_st_find(g.f, stages[i])) continue;
        trace_buf *b = trace_find(&tr, stages[i]);
        CHECK_MSG(b != NULL, "%s: no trace %s", name, stages[i]);
        if (b) golden_compare(&g, stages[i], b->data, b->n, label);
    }
    for (int k = 0; k < n_run; k++) {
        const char *parts[] = {"timestep", "velocity", "latents"};
        for (int p = 0; p < 3; p++) {
            char key[64];
            snprintf(key, sizeof key, "step%d.%s", k, parts[p]);
            CHECK_MSG(kiln_st_find(g.f, key) != NULL, "golden %s has no %s", gname, key);
            trace_buf *b = trace_find(&tr, key);
            CHECK_MSG(b != NULL, "%s: no trace %s", name, key);
            if (b) golden_compare(&g, key, b->data, b->n, label);
        }
    }
    size_t n_u8 = 0, n_o = 0;
    float *ref = golden_f32(&g, "image_u8", &n_u8), *oref = golden_f32(&o, "image_u8", &n_o);
    CHECK_MSG(ref && n_u8 == (size_t)W * H * 3 && n_o == n_u8, "%s: image_u8 sizes", name);
    if (ref && oref && n_u8 == (size_t)W * H * 3 && n_o == n_u8 && res->n_images == 1) {
        float *f = malloc(n_u8 * sizeof(float));
        for (size_t i = 0; i < n_u8; i++) f[i] = res->images[0].pixels[i];
        golden_compare(&g, "image_u8", f, n_u8, label);
        free(f);
        double p = psnr_u8(res->images[0].pixels, oref, n_u8), bar = exact ? 60.0 : 40.0;
        printf("  %-13s %-16s image PSNR vs the fp32 pipeline %6.1f dB (bar %.0f)\n", name, label, p, bar);
        CHECK_MSG(p >= bar, "%s%s: PSNR %.1f dB < %.0f", name, label, p, bar);
    }
    free(ref);
    free(oref);
out:
    kiln_result_free(res);
    traces_free(&tr);
    kiln_engine_close(eng);
    for (int i = 0; i < l.n; i++) kiln_free(l.px[i]);
    json_decref(prompts);
    json_decref(refs);
    free(noise);
    golden_close(&g);
    golden_close(&o);
}

#endif
