/* nodes_sampling.c - the nodes that build a sampler's recipe: loaders (UNETLoader, CLIPLoader, DualCLIPLoader,
 * VAELoader, the LoRA loaders, ModelSamplingFlux), conditioning (CLIPTextEncode, CLIPTextEncodeFlux,
 * FluxGuidance, ConditioningZeroOut, ReferenceLatent), schedules and guiders, the samplers and VAEDecode, which
 * hands the recipe to the engine (engine.h). Values are copied deeply: a node's output may feed many nodes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "pipeline/comfy_sigmas.h"
#include "graph/exec.h"
#include "io/detect.h"
#include "io/gguf.h"
#include "io/safetensors.h"

static kiln_status nomem(kiln_exec *ex) { return KILN_FAIL(ex->err, KILN_E_NOMEM, "out of memory"); }

static char *dup_or_null(const char *s) { return s ? kiln_strdup(s) : NULL; }

static void warn(kiln_exec *ex, const char *id, const char *text) {
    if (ex->hooks && ex->hooks->warning) ex->hooks->warning(ex->hooks->ctx, id, text);
}

static int resolve(kiln_exec *ex, kiln_model_kind k, const char *name, char **out) {
    char path[4096];
    KILN_TRY(kiln_models_resolve(ex->env->models_root, k, name, path, sizeof path, ex->err));
    return (*out = kiln_strdup(path)) ? KILN_OK : nomem(ex);
}

/* ---- loaders ------------------------------------------------------------------------------------------------ */

/* The family of a diffusion model file, from its tensor names (io/detect.h's rules): a FLUX.1 DiT with or
 * without the guidance embedder, else FLUX.2 (an unreadable file is the engine's to report). */
static kiln_graph_family model_family(const char *path) {
    kiln_st_file *f = NULL;
    kiln_err e = {0};
    if (kiln_st_open_part(path, KILN_CKPT_DIT, &f, &e) != KILN_OK) return KILN_GF_FLUX2;
    kiln_detect_result d;
    kiln_detect(f, &d);
    kiln_graph_family fam = KILN_GF_FLUX2;
    if (d.family == KILN_FAMILY_FLUX1_DIT)
        fam = kiln_st_find(f, "guidance_in.in_layer.weight") ||
                      kiln_st_find(f, "time_text_embed.guidance_embedder.linear_1.weight")
                  ? KILN_GF_FLUX1_DEV
                  : KILN_GF_FLUX1_SCHNELL;
    kiln_st_close(f);
    return fam;
}

/* ComfyUI's model_sampling shift of each family (supported_models.py: Flux 1.15 by ModelSamplingFlux's
 * default, FluxSchnell 1.0, Flux2 2.02). */
static double family_shift(kiln_graph_family f) {
    return f == KILN_GF_FLUX1_DEV ? 1.15 : f == KILN_GF_FLUX1_SCHNELL ? 1.0 : 2.02;
}

int kiln_node_unet_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    out->kind = KILN_V_MODEL;
    KILN_TRY(resolve(ex, KILN_MODELS_DIFFUSION, in[0]->str, &out->str));
    out->model.family = model_family(out->str);
    out->model.shift = family_shift(out->model.family);
    return KILN_OK;
}

/* UnetLoaderGGUF (ComfyUI-GGUF): UNETLoader on a .gguf file, which must be one (the GGUF magic); the engine then
 * reads it as `kiln generate --unet x.gguf` does. Submission already kept unet_name to the folder's .gguf names. */
int kiln_node_unet_loader_gguf(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    const char *name = in[0]->str;
    size_t n = strlen(name);
    if (n < 5 || strcmp(name + n - 5, ".gguf") != 0)
        return KILN_FAIL(ex->err, KILN_E_INVALID, "node %s: UnetLoaderGGUF unet_name %s is not a .gguf file", id, name);
    KILN_TRY(kiln_node_unet_loader(ex, id, in, out));
    if (!kiln_gguf_sniff(out->str))
        return KILN_FAIL(ex->err, KILN_E_INVALID, "node %s: UnetLoaderGGUF unet_name %s is not a GGUF file (it does "
                         "not start with the GGUF magic)", id, name);
    return KILN_OK;
}

/* UnetLoaderGGUFAdvanced: dequant_dtype and patch_dtype are default or float32 (the table's list, what kiln does);
 * patch_on_device only says where ComfyUI keeps LoRA patches, which changes no pixel: ignored. */
int kiln_node_unet_loader_gguf_advanced(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    for (int i = 1; i <= 2; i++)
        if (strcmp(in[i]->str, "default") != 0 && strcmp(in[i]->str, "float32") != 0)
            return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: UnetLoaderGGUFAdvanced %s %s: kiln dequantises "
                             "GGUF to float32 (default or float32)", id, i == 1 ? "dequant_dtype" : "patch_dtype",
                             in[i]->str);
    return kiln_node_unet_loader_gguf(ex, id, in, out);
}

/* The family of one part of a ComfyUI checkpoint (io/safetensors.h KILN_CKPT_*), or UNKNOWN when it has none. */
static kiln_family part_family(const char *path, const char *part) {
    kiln_st_file *f = NULL;
    kiln_err e = {0};
    if (kiln_st_open_part(path, part, &f, &e) != KILN_OK) return KILN_FAMILY_UNKNOWN;
    kiln_detect_result d;
    kiln_detect(f, &d);
    kiln_st_close(f);
    return d.family;
}

static bool is_checkpoint(const char *path) {
    kiln_st_file *f = NULL;
    kiln_err e = {0};
    if (kiln_st_open(path, &f, &e) != KILN_OK) return false;
    bool yes = kiln_st_is_checkpoint(f);
    kiln_st_close(f);
    return yes;
}

/* CheckpointLoaderSimple: one file, three outputs that all name it (the engine opens each model as its part, as
 * ComfyUI's load_checkpoint_guess_config splits the state dict). kiln runs FLUX.1 checkpoints: the file must hold
 * a FLUX.1 DiT, CLIP-L, T5-XXL and the VAE; anything else (SD1.x/SDXL/SD3 checkpoints, a FLUX.1 file without its
 * encoders) is refused by name here rather than half-way through the engine. */
int kiln_node_checkpoint_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    char *path = NULL;
    KILN_TRY(resolve(ex, KILN_MODELS_CHECKPOINT, in[0]->str, &path));
    static const struct { const char *part; kiln_family fam; const char *what; } want[] = {
        {KILN_CKPT_DIT, KILN_FAMILY_FLUX1_DIT, "a FLUX.1 diffusion model"},
        {KILN_CKPT_CLIP_L, KILN_FAMILY_CLIP_TEXT, "CLIP-L"},
        {KILN_CKPT_T5XXL, KILN_FAMILY_T5, "T5-XXL"},
        {KILN_CKPT_VAE, KILN_FAMILY_FLUX1_VAE, "FLUX.1's VAE"},
    };
    bool ckpt = is_checkpoint(path);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!ckpt || part_family(path, want[i].part) != want[i].fam) {
            kiln_free(path);
            return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: CheckpointLoaderSimple %s is not a FLUX.1 "
                             "checkpoint: %s under %s is missing (kiln loads the diffusion model, CLIP-L, T5-XXL and "
                             "the VAE of one file, under model.diffusion_model., text_encoders.clip_l.transformer., "
                             "text_encoders.t5xxl.transformer. and vae.)", id, in[0]->str, want[i].what, want[i].part);
        }
    out[0].kind = KILN_V_MODEL;
    out[0].model.family = model_family(path);
    out[0].model.shift = family_shift(out[0].model.family);
    out[1].kind = KILN_V_CLIP;
    out[2].kind = KILN_V_VAE;
    out[0].str = path;
    if (!(out[1].str = kiln_strdup(path)) || !(out[1].str2 = kiln_strdup(path)) || !(out[2].str = kiln_strdup(path)))
        return nomem(ex);
    return KILN_OK;
}

int kiln_node_clip_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    if (strcmp(in[1]->str, "flux2") != 0)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "CLIPLoader type %s: kiln runs flux2 only", in[1]->str);
    out->kind = KILN_V_CLIP;
    return resolve(ex, KILN_MODELS_TEXT_ENCODER, in[0]->str, &out->str);
}

static kiln_family encoder_family(const char *path) {
    kiln_st_file *f = NULL;
    kiln_err e = {0};
    if (kiln_st_open(path, &f, &e) != KILN_OK) return KILN_FAMILY_UNKNOWN;
    kiln_detect_result d;
    kiln_detect(f, &d);
    kiln_st_close(f);
    return d.family;
}

int kiln_node_dual_clip_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    if (strcmp(in[2]->str, "flux") != 0)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "DualCLIPLoader type %s: kiln runs flux (FLUX.1) only",
                         in[2]->str);
    out->kind = KILN_V_CLIP;
    KILN_TRY(resolve(ex, KILN_MODELS_TEXT_ENCODER, in[0]->str, &out->str));
    KILN_TRY(resolve(ex, KILN_MODELS_TEXT_ENCODER, in[1]->str, &out->str2));
    /* ComfyUI tells the two apart by their tensors, not their order: so does kiln (str CLIP-L, str2 T5) */
    if (encoder_family(out->str) == KILN_FAMILY_T5 && encoder_family(out->str2) == KILN_FAMILY_CLIP_TEXT) {
        char *t = out->str;
        out->str = out->str2;
        out->str2 = t;
    }
    return KILN_OK;
}

int kiln_node_vae_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    out->kind = KILN_V_VAE;
    return resolve(ex, KILN_MODELS_VAE, in[0]->str, &out->str);
}

static int copy_model(kiln_exec *ex, const kiln_value *m, kiln_value *out) {
    out->kind = KILN_V_MODEL;
    if (!(out->str = kiln_strdup(m->str)) || !kiln_model_info_copy(&out->model, &m->model)) return nomem(ex);
    return KILN_OK;
}

static int add_lora(kiln_exec *ex, const char *id, const kiln_value *model, const char *name, double strength,
                    kiln_value *out) {
    KILN_TRY(copy_model(ex, model, out));
    if (strength == 0.0) return KILN_OK; /* ComfyUI returns the model unchanged */
    kiln_model_info *m = &out->model;
    if (m->n_loras >= KILN_GRAPH_MAX_LORAS)
        return KILN_FAIL(ex->err, KILN_E_LIMIT, "node %s: more than %d LoRA adapters on one model", id,
                         KILN_GRAPH_MAX_LORAS);
    KILN_TRY(resolve(ex, KILN_MODELS_LORA, name, &m->lora_path[m->n_loras]));
    m->lora_strength[m->n_loras++] = (float)strength;
    return KILN_OK;
}

int kiln_node_lora_loader_model_only(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    return add_lora(ex, id, in[0], in[1]->str, in[2]->f, out); /* model, lora_name, strength_model */
}

int kiln_node_lora_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* model, clip, lora_name, strength_model, strength_clip -> MODEL, CLIP */
    KILN_TRY(add_lora(ex, id, in[0], in[2]->str, in[3]->f, &out[0]));
    out[1].kind = KILN_V_CLIP;
    if (!(out[1].str = kiln_strdup(in[1]->str)) || (in[1]->str2 && !(out[1].str2 = kiln_strdup(in[1]->str2))))
        return nomem(ex);
    if (in[4]->f != 0.0) {
        char msg[160];
        snprintf(msg, sizeof msg, "strength_clip %g ignored: kiln applies LoRA adapters to the diffusion model only",
                 in[4]->f);
        warn(ex, id, msg);
    }
    return KILN_OK;
}

int kiln_node_model_sampling_flux(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    /* model, max_shift, base_shift, width, height */
    KILN_TRY(copy_model(ex, in[0], out));
    out->model.shift = kiln_comfy_flux_shift(in[1]->f, in[2]->f, (int)in[3]->i, (int)in[4]->i);
    return KILN_OK;
}

/* ---- conditioning ------------------------------------------------------------------------------------------- */

static int copy_cond(kiln_exec *ex, const kiln_value *c, kiln_value *out) {
    out->kind = KILN_V_CONDITIONING;
    out->zero = c->zero;
    out->str = dup_or_null(c->str);
    out->str2 = dup_or_null(c->str2);
    out->str3 = dup_or_null(c->str3);
    if ((c->str && !out->str) || (c->str2 && !out->str2) || (c->str3 && !out->str3) ||
        !kiln_cond_info_copy(&out->cond, &c->cond))
        return nomem(ex);
    return KILN_OK;
}

static int encode(kiln_exec *ex, const char *text, const kiln_value *clip, kiln_value *out) {
    out->kind = KILN_V_CONDITIONING;
    out->str = kiln_strdup(text ? text : "");
    out->str2 = kiln_strdup(clip->str);
    out->str3 = dup_or_null(clip->str2);
    return out->str && out->str2 && (!clip->str2 || out->str3) ? KILN_OK : nomem(ex);
}

int kiln_node_clip_text_encode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    return encode(ex, in[0]->str, in[1], out); /* text, clip */
}

int kiln_node_clip_text_encode_flux(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* clip, clip_l, t5xxl, guidance */
    if (!in[0]->str2)
        return KILN_FAIL(ex->err, KILN_E_INVALID, "node %s: CLIPTextEncodeFlux needs FLUX.1's DualCLIPLoader", id);
    KILN_TRY(encode(ex, in[1]->str, in[0], out));
    if (!(out->cond.text2 = kiln_strdup(in[2]->str ? in[2]->str : ""))) return nomem(ex);
    out->cond.has_guidance = true;
    out->cond.guidance = in[3]->f;
    return KILN_OK;
}

int kiln_node_flux_guidance(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    KILN_TRY(copy_cond(ex, in[0], out));
    out->cond.has_guidance = true;
    out->cond.guidance = in[1]->f;
    return KILN_OK;
}

int kiln_node_conditioning_zero_out(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    KILN_TRY(copy_cond(ex, in[0], out));
    out->zero = true;
    return KILN_OK;
}

int kiln_node_reference_latent(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    KILN_TRY(copy_cond(ex, in[0], out));
    const kiln_value *lat = in[1]; /* optional: absent, the conditioning as it is */
    if (!lat || lat->kind != KILN_V_LATENT) return KILN_OK;
    if (lat->latent.sampled || !lat->latent.encoded.pixels)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: a reference must be a VAEEncode'd image", id);
    kiln_cond_info *c = &out->cond;
    if (c->n_refs >= KILN_GRAPH_MAX_REFS)
        return KILN_FAIL(ex->err, KILN_E_LIMIT, "node %s: more than %d reference images", id, KILN_GRAPH_MAX_REFS);
    if (!kiln_rgb_copy(&c->refs[c->n_refs], &lat->latent.encoded)) return nomem(ex);
    c->n_refs++;
    return KILN_OK;
}

/* ---- latents, noise, schedules, guiders --------------------------------------------------------------------- */

int kiln_node_empty_flux2_latent(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)ex, (void)id;
    out->kind = KILN_V_LATENT;
    out->latent.width = (int)(in[0]->i / 16 * 16); /* the latent grid kiln's engines take */
    out->latent.height = (int)(in[1]->i / 16 * 16);
    out->latent.batch = (int)in[2]->i;
    return KILN_OK;
}

int kiln_node_random_noise(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)ex, (void)id;
    out->kind = KILN_V_NOISE;
    out->i = in[0]->i;
    return KILN_OK;
}

int kiln_node_ksampler_select(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    out->kind = KILN_V_SAMPLER;
    return (out->str = kiln_strdup(in[0]->str)) ? KILN_OK : nomem(ex);
}

int kiln_node_flux2_scheduler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    /* steps, width, height: ComfyUI's schedule at the size given (which may differ from the latent's) */
    out->kind = KILN_V_SIGMAS;
    int steps = (int)in[0]->i;
    if (!(out->sigmas = kiln_malloc(((size_t)steps + 1) * sizeof *out->sigmas))) return nomem(ex);
    out->n_sigmas = kiln_comfy_flux2_sigmas(steps, (int)in[1]->i, (int)in[2]->i, out->sigmas, steps + 1);
    out->i = steps;
    return KILN_OK;
}

/* ComfyUI's sigmas for a model (its shift) into a fresh buffer: *n values (0 for denoise 0). */
static int comfy_sigmas(kiln_exec *ex, const char *id, const kiln_model_info *m, const char *scheduler, int steps,
                        double denoise, float **out, int *n) {
    if (!(*out = kiln_malloc(((size_t)steps + 1) * sizeof **out))) return nomem(ex);
    *n = kiln_comfy_sigmas(m->shift, scheduler, steps, denoise, *out, steps + 1);
    if (*n < 0)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: scheduler %s is not one kiln computes", id, scheduler);
    return KILN_OK;
}

int kiln_node_basic_scheduler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* model, scheduler, steps, denoise */
    out->kind = KILN_V_SIGMAS;
    KILN_TRY(comfy_sigmas(ex, id, &in[0]->model, in[1]->str, (int)in[2]->i, in[3]->f, &out->sigmas, &out->n_sigmas));
    out->i = out->n_sigmas - 1;
    return KILN_OK;
}

/* Fills the model/conditioning half of a recipe (a guider's, a KSampler's). */
static int recipe_guidance(kiln_exec *ex, kiln_latent *r, const kiln_value *model, const kiln_value *pos,
                           const kiln_value *neg, double cfg) {
    if (pos->zero)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "a zeroed positive conditioning is not supported");
    r->model_path = kiln_strdup(model->str);
    r->clip_path = dup_or_null(pos->str2 ? pos->str2 : neg ? neg->str2 : NULL);
    r->clip2_path = dup_or_null(pos->str3);
    r->prompt = kiln_strdup(pos->str ? pos->str : "");
    r->negative = !neg || neg->zero ? NULL : kiln_strdup(neg->str ? neg->str : "");
    r->cfg = cfg;
    if (!r->model_path || !r->prompt || (neg && !neg->zero && !r->negative) || (pos->str3 && !r->clip2_path) ||
        !kiln_model_info_copy(&r->model, &model->model) || !kiln_cond_info_copy(&r->pos, &pos->cond))
        return nomem(ex);
    if (!r->clip_path) return KILN_FAIL(ex->err, KILN_E_INVALID, "the conditioning names no text encoder");
    return KILN_OK;
}

int kiln_node_cfg_guider(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    out->kind = KILN_V_GUIDER;
    return recipe_guidance(ex, &out->latent, in[0], in[1], in[2], in[3]->f);
}

int kiln_node_basic_guider(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    out->kind = KILN_V_GUIDER; /* one conditioning, no CFG: cfg 1 */
    return recipe_guidance(ex, &out->latent, in[0], in[1], NULL, 1.0);
}

/* ---- samplers ----------------------------------------------------------------------------------------------- */

/* Takes the latent_image half of a recipe: its size, and a VAEEncode'd image as the init image when the
 * schedule starts below 1 (ComfyUI noises the image to sigmas[0]; at 1 the image is all noise, so it is not
 * needed). */
static int recipe_latent(kiln_exec *ex, const char *id, kiln_latent *r, const kiln_value *latent) {
    if (latent->latent.sampled)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED,
                         "node %s: sampling an already sampled latent is not supported (decode and VAEEncode it)", id);
    r->width = latent->latent.width;
    r->height = latent->latent.height;
    r->batch = latent->latent.batch;
    r->sampled = true;
    snprintf(r->sampler_node, sizeof r->sampler_node, "%s", id);
    if (r->n_sigmas == 0 && r->sigmas)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: an empty sigma schedule (denoise 0) is not supported",
                         id);
    if (latent->latent.encoded.pixels && r->sigmas && r->sigmas[0] < 1.0f &&
        !kiln_rgb_copy(&r->encoded, &latent->latent.encoded))
        return nomem(ex);
    return KILN_OK;
}

static int copy_sigmas(kiln_exec *ex, kiln_latent *r, const kiln_value *sig) {
    r->steps = (int)sig->i;
    if (!sig->sigmas) return KILN_OK; /* Flux2Scheduler: the engine's own schedule */
    if (!(r->sigmas = kiln_malloc((size_t)(sig->n_sigmas > 0 ? sig->n_sigmas : 1) * sizeof *r->sigmas)))
        return nomem(ex);
    memcpy(r->sigmas, sig->sigmas, (size_t)sig->n_sigmas * sizeof *r->sigmas);
    r->n_sigmas = sig->n_sigmas;
    return KILN_OK;
}

int kiln_node_sampler_custom_advanced(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* in: noise, guider, sampler, sigmas, latent_image; out: output, denoised_output (the same recipe) */
    const kiln_latent *g = &in[1]->latent;
    for (int k = 0; k < 2; k++) {
        kiln_value *o = &out[k];
        o->kind = KILN_V_LATENT;
        kiln_latent *r = &o->latent;
        r->model_path = kiln_strdup(g->model_path);
        r->clip_path = kiln_strdup(g->clip_path);
        r->clip2_path = dup_or_null(g->clip2_path);
        r->prompt = kiln_strdup(g->prompt);
        r->negative = dup_or_null(g->negative);
        r->cfg = g->cfg;
        r->seed = (uint64_t)in[0]->i;
        r->sampler = kiln_strdup(in[2]->str);
        if (!r->model_path || !r->clip_path || !r->prompt || !r->sampler || (g->negative && !r->negative) ||
            (g->clip2_path && !r->clip2_path) || !kiln_model_info_copy(&r->model, &g->model) ||
            !kiln_cond_info_copy(&r->pos, &g->pos))
            return nomem(ex);
        KILN_TRY(copy_sigmas(ex, r, in[3]));
        KILN_TRY(recipe_latent(ex, id, r, in[4]));
    }
    return KILN_OK;
}

int kiln_node_ksampler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* in: model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise */
    out->kind = KILN_V_LATENT;
    kiln_latent *r = &out->latent;
    KILN_TRY(recipe_guidance(ex, r, in[0], in[6], in[7], in[3]->f));
    r->seed = (uint64_t)in[1]->i;
    if (!(r->sampler = kiln_strdup(in[4]->str))) return nomem(ex);
    /* ComfyUI's KSampler.set_steps: denoise above 0.9999 is the full schedule, else int(steps / denoise)'s tail */
    double denoise = in[9]->f > 0.9999 ? 1.0 : in[9]->f;
    KILN_TRY(comfy_sigmas(ex, id, &in[0]->model, in[5]->str, (int)in[2]->i, denoise, &r->sigmas, &r->n_sigmas));
    r->steps = r->n_sigmas - 1;
    return recipe_latent(ex, id, r, in[8]);
}

/* ---- VAEDecode: the engine call ----------------------------------------------------------------------------- */

typedef struct progress_ctx {
    kiln_exec *ex;
    const char *node;
} progress_ctx;

static bool on_step(void *ctx, int step, int n_steps) {
    progress_ctx *pc = ctx;
    const kiln_exec_hooks *h = pc->ex->hooks;
    if (h && h->progress) h->progress(h->ctx, pc->node, step, n_steps);
    return !(h && h->should_stop && h->should_stop(h->ctx));
}

static void on_latent(void *ctx, const float *latent, int h16, int w16) {
    progress_ctx *pc = ctx;
    const kiln_exec_hooks *h = pc->ex->hooks;
    h->latent_preview(h->ctx, pc->node, latent, h16, w16);
}

int kiln_node_vae_decode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    const kiln_latent *r = &in[0]->latent;
    if (!r->sampled)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED,
                         "node %s: VAEDecode of an unsampled latent: kiln decodes only a sampler's output", id);
    if (!ex->env->engine || !ex->env->engine->generate)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "no image engine is configured in this server");
    kiln_gen_lora loras[KILN_GRAPH_MAX_LORAS];
    for (int i = 0; i < r->model.n_loras; i++) loras[i] = (kiln_gen_lora){r->model.lora_path[i], r->model.lora_strength[i]};
    kiln_gen_image refs[KILN_GRAPH_MAX_REFS];
    for (int i = 0; i < r->pos.n_refs; i++)
        refs[i] = (kiln_gen_image){r->pos.refs[i].pixels, r->pos.refs[i].width, r->pos.refs[i].height};
    kiln_gen_image init = {r->encoded.pixels, r->encoded.width, r->encoded.height};
    bool dev = r->model.family == KILN_GF_FLUX1_DEV;
    kiln_gen_params p = {
        .unet_path = r->model_path, .clip_path = r->clip_path, .vae_path = in[1]->str, .clip2_path = r->clip2_path,
        .prompt = r->prompt, .prompt_2 = r->pos.text2, .negative_prompt = r->negative, .width = r->width,
        .height = r->height, .steps = r->steps, .batch = r->batch, .seed = r->seed, .cfg = (float)r->cfg,
        .comfy_noise = !ex->env->openai_rules, .comfy_text = !ex->env->openai_rules,
        /* ComfyUI's Flux model: the conditioning's guidance, 3.5 when none was set */
        .guidance = dev ? (float)(r->pos.has_guidance ? r->pos.guidance : 3.5) : 0.0f,
        .sigmas = r->sigmas, .n_sigmas = r->n_sigmas, .loras = r->model.n_loras ? loras : NULL,
        .n_loras = r->model.n_loras, .refs = r->pos.n_refs ? refs : NULL, .n_refs = r->pos.n_refs,
        .init_image = init.pixels ? &init : NULL, .sampler = r->sampler, .request_id = ex->env->prompt_id,
        .latent = ex->hooks && ex->hooks->latent_preview ? on_latent : NULL,
    };
    progress_ctx pc = {ex, r->sampler_node};
    kiln_gen_images imgs = {0};
    kiln_status s = ex->env->engine->generate(ex->env->engine->self, &p, on_step, &pc, &imgs, ex->err);
    if (s != KILN_OK) {
        kiln_free(imgs.pixels);
        return s;
    }
    if (!imgs.pixels || imgs.n <= 0 || imgs.width <= 0 || imgs.height <= 0) {
        kiln_free(imgs.pixels);
        return KILN_FAIL(ex->err, KILN_E_INTERNAL, "the engine returned no images");
    }
    if (imgs.warnings[0]) warn(ex, id, imgs.warnings);
    if (ex->env->engine_ms) *ex->env->engine_ms += imgs.engine_ms;
    if (ex->env->peak_memory_bytes && imgs.peak_memory_bytes > *ex->env->peak_memory_bytes)
        *ex->env->peak_memory_bytes = imgs.peak_memory_bytes;
    out->kind = KILN_V_IMAGE;
    out->n_images = imgs.n;
    out->width = imgs.width;
    out->height = imgs.height;
    out->pixels = imgs.pixels;
    return KILN_OK;
}
