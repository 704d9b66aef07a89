/* engine_kiln.c - graph/engine.h implemented on include/kiln.h (see engine_select.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "kiln.h"
#include "server/engine_select.h"

typedef struct kiln_adapter {
    kiln_gen_engine iface;
    pthread_mutex_t mu;
    kiln_engine *eng;
    kiln_device_kind device;
    int device_index;
    char unet[4096], clip[4096], vae[4096];
} kiln_adapter;

typedef struct step_ctx {
    kiln_gen_progress_fn fn;
    void *ctx;
} step_ctx;

static bool on_progress(void *ctx, const kiln_progress *p) {
    step_ctx *sc = ctx;
    if (p->stage != KILN_STAGE_DENOISING || p->step == 0) return true; /* steps only: ComfyUI's progress */
    return sc->fn ? sc->fn(sc->ctx, p->step, p->n_steps) : true;
}

static void unload_locked(kiln_adapter *a) {
    kiln_engine_close(a->eng);
    a->eng = NULL;
    a->unet[0] = a->clip[0] = a->vae[0] = 0;
}

static kiln_status generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                            kiln_gen_images *out, kiln_err *err) {
    kiln_adapter *a = self;
    memset(out, 0, sizeof *out);
    if (p->negative_prompt && *p->negative_prompt)
        log_warn("serve: a negative prompt text is not used by kiln's engine yet (the empty prompt is)");
    pthread_mutex_lock(&a->mu);
    kiln_status s = KILN_OK;
    if (!a->eng || strcmp(a->unet, p->unet_path) || strcmp(a->clip, p->clip_path) || strcmp(a->vae, p->vae_path)) {
        unload_locked(a);
        kiln_engine_config cfg = kiln_engine_config_default();
        cfg.unet_path = p->unet_path;
        cfg.clip_path = p->clip_path;
        cfg.vae_path = p->vae_path;
        cfg.device = a->device;
        cfg.device_index = a->device_index;
        s = kiln_engine_open(&cfg, &a->eng, err);
        if (s == KILN_OK) {
            snprintf(a->unet, sizeof a->unet, "%s", p->unet_path);
            snprintf(a->clip, sizeof a->clip, "%s", p->clip_path);
            snprintf(a->vae, sizeof a->vae, "%s", p->vae_path);
        }
    }
    kiln_result *res = NULL;
    if (s == KILN_OK) {
        kiln_request req = kiln_request_default();
        step_ctx sc = {progress, pctx};
        req.prompt = p->prompt;
        req.width = p->width;
        req.height = p->height;
        req.steps = p->steps;
        req.batch = p->batch;
        req.seed = p->seed;
        req.guidance = p->cfg;
        req.request_id = p->request_id;
        req.progress = on_progress;
        req.progress_ctx = &sc;
        s = kiln_generate(a->eng, &req, &res, err);
    }
    pthread_mutex_unlock(&a->mu);
    if (s != KILN_OK) return s;
    size_t one = (size_t)res->images[0].width * (size_t)res->images[0].height * 3, all;
    if (res->n_images <= 0 || !kiln_mul_size(one, (size_t)res->n_images, &all) || !(out->pixels = kiln_malloc(all))) {
        kiln_result_free(res);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory copying the images");
    }
    for (int i = 0; i < res->n_images; i++) memcpy(out->pixels + one * (size_t)i, res->images[i].pixels, one);
    out->n = res->n_images;
    out->engine_ms = res->total_ms;
    out->peak_memory_bytes = res->peak_memory_bytes;
    out->width = res->images[0].width;
    out->height = res->images[0].height;
    kiln_result_free(res);
    return KILN_OK;
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
    a->iface.unload = unload;
    return &a->iface;
}

void kiln_server_engine_free(kiln_gen_engine *e) {
    if (!e) return;
    kiln_adapter *a = e->self;
    unload(a);
    pthread_mutex_destroy(&a->mu);
    kiln_free(a);
}
