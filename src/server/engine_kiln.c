/* engine_kiln.c - graph/engine.h implemented on include/kiln.h (see engine_select.h). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "kiln.h"
#include "pipeline/torch_randn.h"
#include "server/engine_select.h"

#define KILN_MAX_GEN_LORAS 8 /* graph/value.h KILN_GRAPH_MAX_LORAS */

typedef struct kiln_adapter {
    kiln_gen_engine iface;
    pthread_mutex_t mu;
    kiln_engine *eng;
    kiln_device_kind device;
    int device_index;
    int tp; /* kiln_engine_config.tp */
    bool exact;
    size_t memory_limit; /* kiln_engine_config.memory_limit */
    char unet[4096], clip[4096], clip2[4096], vae[4096];
} kiln_adapter;

typedef struct step_ctx {
    kiln_gen_progress_fn fn;
    void *ctx;
    void (*latent)(void *pctx, const float *latent, int h16, int w16);
} step_ctx;

static bool on_progress(void *ctx, const kiln_progress *p) {
    step_ctx *sc = ctx;
    if (p->stage != KILN_STAGE_DENOISING || p->step == 0) return true; /* steps only: ComfyUI's progress */
    if (p->latent && sc->latent) sc->latent(sc->ctx, p->latent, p->latent_h16, p->latent_w16);
    return sc->fn ? sc->fn(sc->ctx, p->step, p->n_steps) : true;
}

static void unload_locked(kiln_adapter *a) {
    kiln_engine_close(a->eng);
    a->eng = NULL;
    a->unet[0] = a->clip[0] = a->clip2[0] = a->vae[0] = 0;
}

/* ComfyUI's noise for each of the n requests (one torch.randn of its own batch from its own seed, as
 * comfy/sample.py prepare_noise draws it), side by side in kiln_request.noise's layout: channels is the engine's
 * (kiln_engine_latent_channels: 128 for FLUX.2, 64 for FLUX.1's packed latent). A size or batch the engine will
 * refuse gets no noise here (*out NULL): kiln_generate then says what is wrong. */
static kiln_status comfy_noise(const kiln_gen_params *ps, int n, int total, int channels, bool flux1, float **out,
                               size_t *count, kiln_err *err) {
    *out = NULL;
    *count = 0;
    int w = ps[0].width, h = ps[0].height;
    if (total < 1 || total > 16 || w < 16 || h < 16 || w % 16 || h % 16 || w > 8192 || h > 8192) return KILN_OK;
    size_t per = (size_t)channels * (size_t)(h / 16) * (size_t)(w / 16);
    float *buf = kiln_malloc(per * (size_t)total * sizeof *buf);
    if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the noise of %d images", total);
    for (int i = 0, k = 0; i < n; k += ps[i].batch, i++) {
        kiln_status s = kiln_comfy_noise(buf + per * (size_t)k, ps[i].batch, channels, h / 16, w / 16, flux1,
                                         ps[i].seed, err);
        if (s != KILN_OK) {
            kiln_free(buf);
            return s;
        }
    }
    *out = buf;
    *count = per * (size_t)total;
    return KILN_OK;
}

/* Runs n requests that differ only in prompt, seed and batch as one kiln_generate (per-image prompts and seeds,
 * so each image is exactly what its request alone would give) and splits the images back: outs[i] for ps[i]. */
static kiln_status generate_batch(void *self, const kiln_gen_params *ps, int n, kiln_gen_progress_fn progress,
                                  void *pctx, kiln_gen_images *outs, kiln_err *err) {
    kiln_adapter *a = self;
    const kiln_gen_params *p = &ps[0];
    memset(outs, 0, (size_t)n * sizeof *outs);
    int total = n == 1 ? p->batch : 0; /* one request: kiln_generate validates its batch */
    for (int i = 0; i < n; i++) {
        if (n > 1 && (ps[i].batch < 1 || total + ps[i].batch > 16))
            return KILN_FAIL(err, KILN_E_INVALID, "batching %d requests: more than 16 images", n);
        if (n > 1) total += ps[i].batch;
    }
    const char *prompts[16];
    uint64_t seeds[16];
    for (int i = 0, k = 0; i < n && n > 1; i++)
        for (int j = 0; j < ps[i].batch; j++, k++) {
            prompts[k] = ps[i].prompt;
            seeds[k] = ps[i].seed + (uint64_t)j;
        }
    if (p->n_loras > KILN_MAX_GEN_LORAS || p->n_refs > KILN_MAX_REFS)
        return KILN_FAIL(err, KILN_E_LIMIT, "%d LoRA adapters, %d references: at most %d and %d", p->n_loras, p->n_refs,
                         KILN_MAX_GEN_LORAS, KILN_MAX_REFS);
    kiln_lora loras[KILN_MAX_GEN_LORAS];
    for (int i = 0; i < p->n_loras; i++) loras[i] = (kiln_lora){p->loras[i].path, p->loras[i].strength};
    kiln_image_in refs[KILN_MAX_REFS];
    for (int i = 0; i < p->n_refs; i++) refs[i] = (kiln_image_in){p->refs[i].pixels, p->refs[i].width, p->refs[i].height};
    kiln_image_in init = {0};
    if (p->init_image) init = (kiln_image_in){p->init_image->pixels, p->init_image->width, p->init_image->height};
    const char *clip2 = p->clip2_path ? p->clip2_path : "";
    pthread_mutex_lock(&a->mu);
    kiln_status s = KILN_OK;
    if (!a->eng || strcmp(a->unet, p->unet_path) || strcmp(a->clip, p->clip_path) || strcmp(a->clip2, clip2) ||
        strcmp(a->vae, p->vae_path)) {
        unload_locked(a);
        kiln_engine_config cfg = kiln_engine_config_default();
        cfg.unet_path = p->unet_path;
        cfg.clip_path = p->clip_path;
        cfg.clip2_path = p->clip2_path;
        cfg.vae_path = p->vae_path;
        cfg.device = a->device;
        cfg.device_index = a->device_index;
        cfg.tp = a->tp;
        cfg.exact = a->exact;
        cfg.memory_limit = a->memory_limit;
        s = kiln_engine_open(&cfg, &a->eng, err);
        if (s == KILN_OK) {
            snprintf(a->unet, sizeof a->unet, "%s", p->unet_path);
            snprintf(a->clip, sizeof a->clip, "%s", p->clip_path);
            snprintf(a->clip2, sizeof a->clip2, "%s", clip2);
            snprintf(a->vae, sizeof a->vae, "%s", p->vae_path);
        }
    }
    kiln_result *res = NULL;
    float *noise = NULL;
    size_t noise_count = 0;
    bool flux1 = s == KILN_OK && kiln_engine_variant(a->eng) >= KILN_VARIANT_FLUX1_DEV;
    if (s == KILN_OK && p->comfy_noise)
        s = comfy_noise(ps, n, total, kiln_engine_latent_channels(a->eng), flux1, &noise, &noise_count, err);
    if (flux1 && fabsf(p->cfg - 1.0f) > 1e-9f * fmaxf(1.0f, fabsf(p->cfg))) /* math.isclose(cfg, 1) */
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "cfg %g with FLUX.1: kiln runs FLUX.1 at cfg 1 (its guidance is "
                      "FluxGuidance's, given to the DiT), as the official templates do", p->cfg);
    if (flux1 && (p->n_refs || p->init_image))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "reference or init images with FLUX.1: kiln edits with FLUX.2 [klein]");
    if (s == KILN_OK) {
        kiln_request req = kiln_request_default();
        step_ctx sc = {progress, pctx, p->latent};
        req.prompt = p->prompt;
        req.prompts = n > 1 ? prompts : NULL; /* one request: exactly the call it always was */
        req.seeds = n > 1 ? seeds : NULL;
        req.width = p->width;
        req.height = p->height;
        req.steps = p->steps;
        req.batch = total;
        req.seed = p->seed;
        req.noise = noise; /* ComfyUI's draw (comfy_noise), or NULL: kiln's generator from the seeds */
        req.noise_count = noise_count;
        req.guidance = p->cfg;
        /* A ComfyUI graph: CFG as ComfyUI decides it (cfg not 1, whatever the variant), against the negative
         * CLIPTextEncode text, or zeroed features for ConditioningZeroOut (negative_prompt NULL). Batched calls
         * share it (worker.c same_call). FLUX.1 runs at cfg 1 (checked above): no CFG, the negative unused, and
         * the guidance is the distilled one the DiT takes. */
        req.cfg_rule = flux1 ? KILN_CFG_OFFICIAL : KILN_CFG_COMFY;
        req.negative_prompt = flux1 ? NULL : p->negative_prompt;
        req.negative_zero = !flux1 && p->negative_prompt == NULL;
        if (flux1) req.guidance = p->guidance;
        req.prompt_2 = p->prompt_2;
        /* ComfyUI's FLUX.1 tokenisation for its graphs; FLUX.2 prompts as diffusers encodes them (docs/server.md) */
        req.text_rule = flux1 && p->comfy_text ? KILN_TEXT_COMFY : KILN_TEXT_DIFFUSERS;
        if (p->sigmas) { /* ComfyUI's schedule; steps follow from it */
            req.sigmas = p->sigmas;
            req.n_sigmas = p->n_sigmas;
            req.steps = 0;
        }
        req.loras = p->n_loras ? loras : NULL;
        req.n_loras = p->n_loras;
        req.refs = p->n_refs ? refs : NULL;
        req.n_refs = p->n_refs;
        req.init_image = p->init_image ? &init : NULL;
        req.request_id = p->request_id;
        req.progress = on_progress;
        req.progress_ctx = &sc;
        req.latent_preview = p->latent != NULL;
        s = kiln_generate(a->eng, &req, &res, err);
    }
    pthread_mutex_unlock(&a->mu);
    kiln_free(noise);
    if (s != KILN_OK) return s;
    if (res->n_images != total) {
        int got = res->n_images;
        kiln_result_free(res);
        return KILN_FAIL(err, KILN_E_INTERNAL, "the engine returned %d images for %d", got, total);
    }
    size_t one = (size_t)res->images[0].width * (size_t)res->images[0].height * 3;
    for (int i = 0, k = 0; i < n && s == KILN_OK; k += ps[i].batch, i++) {
        kiln_gen_images *o = &outs[i];
        size_t all;
        if (!kiln_mul_size(one, (size_t)ps[i].batch, &all) || !(o->pixels = kiln_malloc(all))) {
            s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory copying the images");
            break;
        }
        for (int j = 0; j < ps[i].batch; j++) memcpy(o->pixels + one * (size_t)j, res->images[k + j].pixels, one);
        o->n = ps[i].batch;
        o->engine_ms = res->total_ms; /* the shared forward's time: each job waited for all of it */
        o->peak_memory_bytes = res->peak_memory_bytes;
        _Static_assert(sizeof o->stage_ms / sizeof *o->stage_ms == KILN_STAGE_COUNT, "graph/engine.h's stage_ms");
        memcpy(o->stage_ms, res->stage_ms, sizeof o->stage_ms); /* the shared forward's, as engine_ms */
        o->width = res->images[0].width;
        o->height = res->images[0].height;
        snprintf(o->warnings, sizeof o->warnings, "%s", res->warnings ? res->warnings : "");
    }
    kiln_result_free(res);
    if (s != KILN_OK)
        for (int i = 0; i < n; i++) {
            kiln_free(outs[i].pixels);
            outs[i].pixels = NULL;
        }
    return s;
}

static kiln_status generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                            kiln_gen_images *out, kiln_err *err) {
    return generate_batch(self, p, 1, progress, pctx, out, err);
}

static void unload(void *self) {
    kiln_adapter *a = self;
    pthread_mutex_lock(&a->mu);
    unload_locked(a);
    pthread_mutex_unlock(&a->mu);
}

kiln_gen_engine *kiln_server_engine_new(const char *device) {
    kiln_device_kind kind = KILN_DEVICE_CPU;
    int index = 0;
    if (device && strcmp(device, "cpu") != 0) {
        char *end = NULL;
        if (!strcmp(device, "cuda")) kind = KILN_DEVICE_CUDA;
        else if (!strncmp(device, "cuda:", 5) && device[5] >= '0' && device[5] <= '9') {
            kind = KILN_DEVICE_CUDA;
            index = (int)strtol(device + 5, &end, 10);
            if (*end || index > 64) return NULL;
        } else {
            return NULL;
        }
    }
    kiln_adapter *a = kiln_calloc(1, sizeof *a);
    if (!a) return NULL;
    a->device = kind;
    a->device_index = index;
    pthread_mutex_init(&a->mu, NULL);
    a->iface.self = a;
    a->iface.generate = generate;
    a->iface.generate_batch = generate_batch;
    a->iface.unload = unload;
    return &a->iface;
}

void kiln_server_engine_set_tp(kiln_gen_engine *e, int tp) { ((kiln_adapter *)e->self)->tp = tp; }

void kiln_server_engine_set_exact(kiln_gen_engine *e, bool exact) { ((kiln_adapter *)e->self)->exact = exact; }

void kiln_server_engine_set_memory_limit(kiln_gen_engine *e, size_t bytes) {
    ((kiln_adapter *)e->self)->memory_limit = bytes;
}

void kiln_server_engine_free(kiln_gen_engine *e) {
    if (!e) return;
    kiln_adapter *a = e->self;
    unload(a);
    pthread_mutex_destroy(&a->mu);
    kiln_free(a);
}
