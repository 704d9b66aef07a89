/* target_engine.c - the in-process engine (include/kiln.h) as a benchmark target (see target.h). The graph's
 * knobs become a kiln_request: prompt (the CLIPTextEncode text), seed (RandomNoise / KSampler), width, height,
 * steps, batch, cfg as guidance. The model files named by the graph's loaders are found under a models root
 * (diffusion_models/ or unet/, text_encoders/ or clip/, vae/), so the same graph file runs here and on a server.
 * FLUX.1 graphs (the official templates' nodes): DualCLIPLoader's two files (which is T5 is read from the file,
 * as ComfyUI does not care about their order), CLIPTextEncodeFlux (its t5xxl text), FluxGuidance as
 * the distilled guidance, EmptySD3LatentImage, BasicScheduler, ModelSamplingFlux, BasicGuider; a true CFG above 1
 * is refused. The sigmas are ComfyUI's, as kiln serve's nodes compute them (graph_sigmas).
 * The engine is opened on the first submit and kept for the next ones, as a server would keep it. Graph nodes
 * the engine does not run (ImagePixelize and any other post-process) are refused with a clear error: measure
 * those graphs through `kiln serve`. exec_seconds is the engine's end-to-end time (total_ms); the per-stage
 * timings travel in stages; images are hashed from their pixels directly (no PNG round trip). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "compute/comm.h"
#include "compute/cuda/cuda_device.h"
#include "bench/digest.h"
#include "bench/target.h"
#include "io/detect.h"
#include "io/safetensors.h"
#include "kiln.h"
#include "pipeline/comfy_sigmas.h"
#include "pipeline/torch_randn.h"

#define KILN_ENGINE_MAX_STEPS 1000 /* kiln_generate's limit */

typedef struct engine_target {
    kiln_target base;
    char models[1024];
    char unet[1024], clip[1024], clip2[1024], vae[1024]; /* the files the open engine was made from */
    kiln_engine *eng;
    int threads;
    kiln_device_kind device; /* from engine@DEVICE: */
    int device_index;
    unsigned counter;
} engine_target;

/* The literal input of the first node of a class, or NULL. */
static const json_t *input_of(const json_t *g, const char *cls, const char *input) {
    const char *id;
    json_t *n;
    json_object_foreach((json_t *)g, id, n) {
        const char *c = json_string_value(json_object_get(n, "class_type"));
        if (c && !strcmp(c, cls)) return json_object_get(json_object_get(n, "inputs"), input);
    }
    return NULL;
}

static bool find_model(const char *root, const char *const *dirs, const char *name, char *out, size_t cap) {
    if (!name || !*name || strstr(name, "..") || name[0] == '/') return false;
    for (const char *const *d = dirs; *d; d++) {
        snprintf(out, cap, "%s/%s/%s", root, *d, name);
        if (access(out, R_OK) == 0) return true;
    }
    return false;
}

/* Whether a checkpoint file is a T5 encoder (what DualCLIPLoader's order does not say). */
static bool is_t5(const char *path) {
    kiln_st_file *ck = NULL;
    kiln_err e = {0};
    if (kiln_st_open(path, &ck, &e) != KILN_OK) return false;
    kiln_detect_result d;
    kiln_detect(ck, &d);
    kiln_st_close(ck);
    return d.family == KILN_FAMILY_T5;
}

/* The text encoders: CLIPLoader's one file (FLUX.2), or DualCLIPLoader's two as CLIP-L (clip) and T5 (clip2). */
static kiln_status find_text_encoders(const engine_target *t, const json_t *g, char *clip, char *clip2, size_t cap,
                                      kiln_err *err) {
    static const char *const dirs[] = {"text_encoders", "clip", NULL};
    clip2[0] = 0;
    const char *cn = json_string_value(input_of(g, "CLIPLoader", "clip_name"));
    if (cn) {
        if (!find_model(t->models, dirs, cn, clip, cap))
            return KILN_FAIL(err, KILN_E_NOT_FOUND, "engine target: text encoder %s is not under %s", cn, t->models);
        return KILN_OK;
    }
    const char *n1 = json_string_value(input_of(g, "DualCLIPLoader", "clip_name1"));
    const char *n2 = json_string_value(input_of(g, "DualCLIPLoader", "clip_name2"));
    const char *type = json_string_value(input_of(g, "DualCLIPLoader", "type"));
    if (!n1 || !n2)
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "engine target: the graph has no CLIPLoader clip_name or "
                         "DualCLIPLoader clip_name1 / clip_name2");
    if (type && strcmp(type, "flux"))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "engine target: DualCLIPLoader type %s (kiln runs type flux)", type);
    char a[1024], b[1024];
    if (!find_model(t->models, dirs, n1, a, sizeof a) || !find_model(t->models, dirs, n2, b, sizeof b))
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "engine target: text encoders %s and %s are not both under %s", n1, n2,
                         t->models);
    bool t5a = is_t5(a), t5b = is_t5(b);
    if (t5a == t5b)
        return KILN_FAIL(err, KILN_E_FORMAT, "engine target: DualCLIPLoader needs one CLIP-L and one T5 file; %s and "
                         "%s are %s T5", n1, n2, t5a ? "both" : "neither");
    snprintf(clip, cap, "%s", t5a ? b : a);
    snprintf(clip2, cap, "%s", t5a ? a : b);
    return KILN_OK;
}

/* The FLUX.1 knobs: CLIPTextEncodeFlux's text, FluxGuidance, no true CFG, the default shifts. */
static kiln_status flux1_knobs(const json_t *g, kiln_request *req, kiln_err *err) {
    const json_t *v;
    const char *tt = json_string_value(input_of(g, "CLIPTextEncodeFlux", "t5xxl"));
    if (tt) { /* (the bench writes its prompt into both clip_l and t5xxl: kiln_workflow_instantiate) */
        req->prompt = tt;
        if ((v = input_of(g, "CLIPTextEncodeFlux", "guidance"))) req->guidance = (float)json_number_value(v);
    }
    if ((v = input_of(g, "FluxGuidance", "guidance"))) req->guidance = (float)json_number_value(v);
    if (((v = input_of(g, "CFGGuider", "cfg")) || (v = input_of(g, "KSampler", "cfg"))) && json_number_value(v) != 1.0)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "engine target: FLUX.1 with a true CFG of %g (the official "
                         "FluxPipeline runs the distilled guidance only: cfg 1 and FluxGuidance)", json_number_value(v));
    return KILN_OK;
}

/* The graph's sigmas exactly as kiln serve's nodes compute them (pipeline/comfy_sigmas.h: ComfyUI's schedules),
 * so the engine target and the server make the same image of one graph: Flux2Scheduler's at its size, else
 * BasicScheduler's / KSampler's with the model's shift (ModelSamplingFlux's line when the graph has one). */
static kiln_status graph_sigmas(const json_t *g, kiln_variant variant, int steps, float *out, int cap, int *n,
                                kiln_err *err) {
    const json_t *fs = input_of(g, "Flux2Scheduler", "width");
    if (fs) {
        *n = kiln_comfy_flux2_sigmas(steps, (int)json_integer_value(fs),
                                     (int)json_integer_value(input_of(g, "Flux2Scheduler", "height")), out, cap);
    } else {
        const char *node = input_of(g, "BasicScheduler", "scheduler") ? "BasicScheduler" : "KSampler";
        const char *sched = json_string_value(input_of(g, node, "scheduler"));
        const json_t *dn = input_of(g, node, "denoise");
        double shift = variant == KILN_VARIANT_FLUX1_DEV ? 1.15 : variant == KILN_VARIANT_FLUX1_SCHNELL ? 1.0 : 2.02;
        const json_t *mx = input_of(g, "ModelSamplingFlux", "max_shift");
        if (mx)
            shift = kiln_comfy_flux_shift(json_number_value(mx),
                                          json_number_value(input_of(g, "ModelSamplingFlux", "base_shift")),
                                          (int)json_integer_value(input_of(g, "ModelSamplingFlux", "width")),
                                          (int)json_integer_value(input_of(g, "ModelSamplingFlux", "height")));
        *n = kiln_comfy_sigmas(shift, sched ? sched : "simple", steps, dn ? json_number_value(dn) : 1.0, out, cap);
    }
    if (*n < 2)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "engine target: the graph's schedule (%d steps) is not one kiln "
                         "computes", steps);
    return KILN_OK;
}

static kiln_status engine_submit(kiln_target *base, const json_t *g, kiln_submit_result *out, kiln_err *err) {
    engine_target *t = (engine_target *)base;
    /* Refuse what the engine does not do, before any work. */
    static const char *const known[] = {"UNETLoader", "CLIPLoader", "VAELoader", "CLIPTextEncode",
                                        "ConditioningZeroOut", "EmptyFlux2LatentImage", "EmptyLatentImage",
                                        "RandomNoise", "KSamplerSelect", "Flux2Scheduler", "CFGGuider",
                                        "SamplerCustomAdvanced", "KSampler", "VAEDecode", "SaveImage",
                                        "DualCLIPLoader", "CLIPTextEncodeFlux", "FluxGuidance", "EmptySD3LatentImage",
                                        "ModelSamplingFlux", "BasicGuider", "BasicScheduler", NULL};
    const char *id;
    json_t *n;
    json_object_foreach((json_t *)g, id, n) {
        const char *c = json_string_value(json_object_get(n, "class_type"));
        bool ok = false;
        for (const char *const *k = known; *k && !ok && c; k++) ok = !strcmp(*k, c);
        if (!ok)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                             "engine target: node %s (%s) is not part of text-to-image; measure this graph through "
                             "kiln serve (--url)", id, c ? c : "?");
    }
    static const char *const unet_dirs[] = {"diffusion_models", "unet", NULL};
    static const char *const vae_dirs[] = {"vae", NULL};
    char unet[1024], clip[1024], clip2[1024], vae[1024];
    const char *un = json_string_value(input_of(g, "UNETLoader", "unet_name"));
    const char *vn = json_string_value(input_of(g, "VAELoader", "vae_name"));
    if (!find_model(t->models, unet_dirs, un, unet, sizeof unet) || !find_model(t->models, vae_dirs, vn, vae, sizeof vae))
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "engine target: the graph's models (%s, %s) are not both under %s",
                         un ? un : "?", vn ? vn : "?", t->models);
    KILN_TRY(find_text_encoders(t, g, clip, clip2, sizeof clip, err));
    if (t->eng && (strcmp(unet, t->unet) || strcmp(clip, t->clip) || strcmp(clip2, t->clip2) || strcmp(vae, t->vae))) {
        kiln_engine_close(t->eng); /* another model set: reopen (timed as part of this submit's wall time) */
        t->eng = NULL;
    }
    double c0 = kiln_clock_s();
    out->t0 = kiln_clock_wall_s();
    if (!t->eng) {
        kiln_engine_config cfg = kiln_engine_config_default();
        cfg.unet_path = unet;
        cfg.clip_path = clip;
        cfg.clip2_path = clip2[0] ? clip2 : NULL;
        cfg.vae_path = vae;
        cfg.n_threads = t->threads;
        cfg.device = t->device;
        cfg.device_index = t->device_index;
        KILN_TRY(kiln_engine_open(&cfg, &t->eng, err));
        snprintf(t->unet, sizeof t->unet, "%s", unet);
        snprintf(t->clip, sizeof t->clip, "%s", clip);
        snprintf(t->clip2, sizeof t->clip2, "%s", clip2);
        snprintf(t->vae, sizeof t->vae, "%s", vae);
    }
    kiln_request req = kiln_request_default();
    const json_t *v;
    req.prompt = json_string_value(input_of(g, "CLIPTextEncode", "text"));
    if (!req.prompt) req.prompt = "";
    if ((v = input_of(g, "RandomNoise", "noise_seed")) || (v = input_of(g, "KSampler", "seed")))
        req.seed = (uint64_t)json_integer_value(v);
    const char *lat = input_of(g, "EmptyFlux2LatentImage", "width") ? "EmptyFlux2LatentImage"
                      : input_of(g, "EmptySD3LatentImage", "width") ? "EmptySD3LatentImage" : "EmptyLatentImage";
    req.width = (int)json_integer_value(input_of(g, lat, "width"));
    req.height = (int)json_integer_value(input_of(g, lat, "height"));
    req.batch = (int)json_integer_value(input_of(g, lat, "batch_size"));
    if ((v = input_of(g, "Flux2Scheduler", "steps")) || (v = input_of(g, "BasicScheduler", "steps")) ||
        (v = input_of(g, "KSampler", "steps")))
        req.steps = (int)json_integer_value(v);
    float sigmas[KILN_ENGINE_MAX_STEPS + 1];
    int n_sigmas = 0;
    if (req.steps < 1 || req.steps > KILN_ENGINE_MAX_STEPS)
        return KILN_FAIL(err, KILN_E_INVALID, "engine target: %d steps (1..%d)", req.steps, KILN_ENGINE_MAX_STEPS);
    KILN_TRY(graph_sigmas(g, kiln_engine_variant(t->eng), req.steps, sigmas, KILN_ENGINE_MAX_STEPS + 1, &n_sigmas, err));
    req.sigmas = sigmas;
    req.n_sigmas = n_sigmas;
    req.steps = 0; /* the schedule gives them */
    if (clip2[0]) KILN_TRY(flux1_knobs(g, &req, err));
    else if ((v = input_of(g, "CFGGuider", "cfg")) || (v = input_of(g, "KSampler", "cfg")))
        req.guidance = (float)json_number_value(v);
    /* kiln serve's graphs run with ComfyUI's noise (one torch.randn of the batch) and, for FLUX.1, ComfyUI's text
     * rule: the same here, or the engine's image would not be the server's */
    const bool flux1 = clip2[0] != 0;
    if (flux1) req.text_rule = KILN_TEXT_COMFY;
    float *noise = NULL;
    if (req.batch >= 1 && req.batch <= 16 && req.width >= 16 && req.height >= 16 && req.width % 16 == 0 &&
        req.height % 16 == 0 && req.width <= 8192 && req.height <= 8192) { /* else kiln_generate says what is wrong */
        const int ch = kiln_engine_latent_channels(t->eng);
        const size_t count = (size_t)req.batch * ch * (req.height / 16) * (req.width / 16);
        if (!(noise = kiln_malloc(count * sizeof *noise))) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        kiln_status ns = kiln_comfy_noise(noise, req.batch, ch, req.height / 16, req.width / 16, flux1, req.seed, err);
        if (ns != KILN_OK) {
            kiln_free(noise);
            return ns;
        }
        req.noise = noise;
        req.noise_count = count;
    }
    snprintf(out->prompt_id, sizeof out->prompt_id, "engine-%u", ++t->counter);
    req.request_id = out->prompt_id;
    kiln_result *res;
    kiln_status gs = kiln_generate(t->eng, &req, &res, err);
    kiln_free(noise);
    KILN_TRY(gs);
    out->images = kiln_calloc(res->n_images > 0 ? (size_t)res->n_images : 1, sizeof *out->images);
    if (!out->images) {
        kiln_result_free(res);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < res->n_images; i++) {
        kiln_bench_image *im = &out->images[i];
        const kiln_image *src = &res->images[i];
        snprintf(im->filename, sizeof im->filename, "%s-%d", out->prompt_id, i);
        snprintf(im->type, sizeof im->type, "memory");
        im->width = src->width;
        im->height = src->height;
        im->bytes = (size_t)src->width * (size_t)src->height * 3;
        kiln_sha256_hex(src->pixels, im->bytes, im->pixel_sha256);
    }
    out->n_images = res->n_images;
    out->stages = json_array();
    for (int s = 0; s < KILN_STAGE_COUNT; s++)
        if (res->stage_ms[s] > 0)
            json_array_append_new(out->stages, json_pack("{s:s,s:f}", "name", kiln_stage_name((kiln_stage)s),
                                                         "duration_ms", res->stage_ms[s]));
    out->exec_seconds = res->total_ms / 1000.0;
    out->exec_from_target = true;
    kiln_result_free(res);
    out->t1 = kiln_clock_wall_s();
    out->wall_seconds = kiln_clock_s() - c0;
    return KILN_OK;
}

static void engine_close(kiln_target *base) {
    engine_target *t = (engine_target *)base;
    kiln_engine_close(t->eng);
    kiln_free(t);
}

static const kiln_target_ops engine_ops = {engine_submit, NULL, engine_close};

kiln_status kiln_target_engine_open(const char *models_root, int threads, const char *device, kiln_target **out,
                                    kiln_err *err) {
    *out = NULL;
    kiln_backend_kind kind = KILN_BACKEND_CPU;
    int index = 0;
    KILN_TRY(kiln_device_parse(device, &kind, &index, err));
    /* Every rank would run its own bench loop and engine calls out of step with the others: a multi-rank engine
     * is measured behind `mpirun kiln serve`, whose rank 0 keeps the ranks in step (docs/parallel.md). */
    if (kiln_comm_launcher_size() > 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "engine target under mpirun (%d ranks): run `mpirun -np %d kiln serve "
                         "--sp ...` and measure it with an http target (kiln bench run/variants/serve --url)",
                         kiln_comm_launcher_size(), kiln_comm_launcher_size());
    if (!models_root || access(models_root, R_OK) != 0)
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "engine target: models folder %s not readable",
                         models_root ? models_root : "(none)");
    engine_target *t = kiln_calloc(1, sizeof *t);
    if (!t) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    snprintf(t->models, sizeof t->models, "%s", models_root);
    t->threads = threads;
    t->device = kind == KILN_BACKEND_CUDA ? KILN_DEVICE_CUDA : KILN_DEVICE_CPU;
    t->device_index = index;
    t->base.ops = &engine_ops;
    snprintf(t->base.kind, sizeof t->base.kind, "engine");
    snprintf(t->base.describe, sizeof t->base.describe, "in-process engine, models %s", models_root);
    *out = &t->base;
    return KILN_OK;
}
