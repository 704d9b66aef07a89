/* generate.c - one text-to-image request through the stages of DESIGN.md, each timed (kiln_generate).
 *
 *   InputValidation     request checks, tokenization (prompt, and the negative prompt for CFG), memory estimate
 *   TextEncoding        Qwen3 -> features [batch x 512, 3 x hidden] (cond, then uncond with CFG)
 *   LatentPreparation   noise [128, H/16, W/16] per image (seed + i, or injected) -> tokens
 *   TimestepPreparation sigma schedule (empirical mu)
 *   Denoising           n x (DiT forward over the whole batch, CFG, Euler)
 *   Decoding            tokens -> BN de-normalise -> unpatchify -> VAE decode -> RGB8, one image at a time
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "models/dit_ulysses.h"
#include "models/latent.h"
#include "models/views.h"
#include "pipeline/decode_batch.h"
#include "pipeline/denoise_step.h"
#include "pipeline/edit_inputs.h"
#include "pipeline/engine_flux1.h"
#include "pipeline/engine_internal.h"
#include "pipeline/memory.h"
#include "pipeline/noise.h"
#include "pipeline/run_common.h"
#include "pipeline/ref_image.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "pipeline/vae_dist.h"
#include "pipeline/vae_plan.h"

/* A bound on geometry, not on memory: 8192 keeps every pixel and token index inside an int (8192^2 x 3 bytes, 262,144
 * tokens). What a size really needs is the memory estimate's to refuse (validate): at 4096x4096 the DiT's 65,536
 * image tokens fit (attention takes O(sequence) extra memory) and the VAE decode tiles itself. */
#define MAX_SIDE 8192
#define MAX_BATCH 16
#define MAX_STEPS 1000

typedef struct run {
    kiln_engine *e;
    const kiln_request *req;
    kiln_result *res;
    kiln_stage_clock clk;
    bool base;            /* the klein base variant (50 steps by default) */
    bool cfg;             /* classifier-free guidance (cfg_decision: the request's rule) */
    bool neg_zero;        /* CFG's unconditional branch is all-zero features (ConditioningZeroOut) */
    int B, Bd;            /* images, and DiT batch (2B with CFG) */
    int h16, w16, N, L, steps;
    float guidance;
    int n_seq;            /* distinct prompts to encode: 1, or batch with per-image prompts (+1 negative for CFG) */
    kiln_tokens tok[MAX_BATCH + 1];
    float *feat;          /* backend [Bd * L, ctx] */
    float *x, *xin, *v;   /* backend latents: [B*N, 128], [Bd*N, 128], [Bd*N, 128] */
    float *tmp;           /* backend [B*N, 128] */
    float *dt;            /* backend [128]: the step's Euler dt (denoise_step.h) */
    float *sigmas;
    kiln_flux2_dit_ws *ws;
    int vae_tile;         /* 0: untiled decode; else the latent tile side (pipeline/vae_plan.h) */
    int W, H;             /* output size: the request's, or from the first reference / the init image */
    /* editing (Flux2KleinPipeline image=): the prepared references (ref_image.h), their token grids, and the
     * backend buffer of the DiT's full output [Bd * (N + n_ref_tok), 128] */
    int n_refs, n_ref_tok;
    uint8_t *ref_rgb[KILN_MAX_REFS];
    int ref_w[KILN_MAX_REFS], ref_h[KILN_MAX_REFS], ref_h16[KILN_MAX_REFS], ref_w16[KILN_MAX_REFS];
    float *vfull;
    uint8_t *init_rgb;    /* img2img: the prepared init image (W x H) */
    int k0;               /* img2img: the first step that runs (kiln_img2img_start); 0 otherwise */
    kiln_trace_fn trace;  /* tests only (trace.h); host pointers, CPU backend */
    void *trace_ctx;
} run;

static void trace(run *r, const char *name, const float *data, size_t n) {
    if (r->trace) r->trace(r->trace_ctx, name, data, n);
}

/* latent_preview: the step's report with image 0's latent downloaded to the host. */
static kiln_status report_latent(run *r, int step, double eta, bool *go_on, kiln_err *err) {
    size_t n = (size_t)r->N * 128;
    float *host = kiln_malloc(n * sizeof(float));
    if (!host) return KILN_FAIL(err, KILN_E_NOMEM, "latent preview: out of memory");
    kiln_status s = r->e->be->ops->download(r->e->be, host, r->x, n * sizeof(float), err);
    if (s == KILN_OK) {
        kiln_progress p = {r->clk.stage, step, r->steps, kiln_clock_s() - r->clk.t0, eta, host, r->h16, r->w16};
        *go_on = r->req->progress(r->req->progress_ctx, &p);
    }
    kiln_free(host);
    return s;
}

/* The guidance scale the request runs with and whether CFG runs, by the request's rule (kiln.h kiln_cfg_rule). */
static float cfg_guidance(const kiln_request *q) {
    return q->cfg_rule == KILN_CFG_COMFY ? q->guidance : q->guidance > 0 ? q->guidance : 4.0f;
}
static bool cfg_decision(const kiln_engine *e, const kiln_request *q) {
    double g = cfg_guidance(q);
    if (q->cfg_rule == KILN_CFG_COMFY) /* comfy/samplers.py: math.isclose(cond_scale, 1.0) skips the uncond pass */
        return !(fabs(g - 1.0) <= 1e-9 * fmax(fabs(g), 1.0));
    return e->variant == KILN_VARIANT_BASE && g > 1.0; /* Flux2KleinPipeline.do_classifier_free_guidance */
}

/* Bytes the request needs if every model stays resident (*keep) and if the text encoder is released before
 * the DiT runs (*release): the weights and, per phase, every buffer live in it - the backend's (which the CUDA
 * arena is sized from; KILN_STRICT_PLAN checks them against what was allocated: run_common.h) and the host's
 * (the CPU's limit is the process's memory). */
static void estimate(const kiln_engine *e, const run *r, size_t *keep, size_t *release) {
    const kiln_dtype act = kiln_backend_act_dtype(e->be);
    /* the DiT's ranks, as denoise decides them: tensor-parallel groups, the sequence-parallel ranks Ulysses can
     * split the heads and image tokens over (the KV cache runs whole on every rank) */
    const int tp = e->grid_tp ? e->grid_tp->size : 1, heads = e->dit->heads / tp;
    int sp = e->grid_tp ? e->grid_sp->size : e->comm ? e->comm->size : 1;
    kiln_err why = {0};
    if (sp > 1 && ((e->kv && r->n_refs) || kiln_dit_ulysses_check(sp, heads, r->N + r->n_ref_tok, &why) != KILN_OK))
        sp = 1;
    const size_t f = sizeof(float), C = (size_t)e->dit->ctx_dim, ch = (size_t)e->dit->in_ch;
    const size_t seqs = r->n_seq ? (size_t)r->n_seq : (r->cfg ? 2 : 1), L = (size_t)r->L;
    const size_t feats = (size_t)r->Bd * L * C * f; /* r->feat, through the denoising */
    /* encode_text: the encoder's activations for every sequence, its output `one`, and the features */
    size_t te_act = seqs * e->te_ws_seq + seqs * L * C * f + feats;
    /* prepare_latents: x, tmp, v; xin (CFG or references) and vfull (references) hold the references too */
    const size_t per = (size_t)r->N * ch, Tt = (size_t)r->N + r->n_ref_tok;
    size_t lat = (2 * (size_t)r->B + (size_t)r->Bd) * per * f;
    if (r->cfg || r->n_refs) lat += (size_t)r->Bd * Tt * ch * f;
    if (r->n_refs) lat += (size_t)r->Bd * Tt * ch * f;
    /* encoding an init or reference image (kiln_edit_encode_tokens: pixels and latent on the backend and three
     * copies on the host, the encoder's activations), with the features and latents live */
    size_t enc = 0;
    for (int k = -1; k < r->n_refs; k++) {
        int H = k < 0 ? (r->init_rgb ? r->H : 0) : 16 * r->ref_h16[k], W = k < 0 ? r->W : 16 * r->ref_w16[k];
        if (!H) continue;
        size_t npx = (size_t)3 * H * W, nz = (size_t)e->vae->z_ch * (H / 8) * (W / 8);
        size_t one = kiln_flux2_vae_encode_workspace(e->vae, H, W, act) + (2 * npx + 4 * nz) * f;
        if (one > enc) enc = one;
    }
    size_t host_lat = ((size_t)r->B + 2) * per * f + (size_t)r->n_ref_tok * ch * f; /* prepare_latents' host copies */
    size_t enc_act = feats + lat + enc + host_lat;
    /* the denoising: the DiT's workspace (with the KV cache) and the step's 128-value buffer */
    size_t dit_act = kiln_flux2_dit_workspace(e->dit, r->Bd, r->L, r->N, r->n_ref_tok, e->kv && r->n_refs, sp, tp, act) +
                     feats + lat + 128 * f;
    /* the decode (release_denoiser freed the rest): x, the latent and the image on the backend (the tiled decode
     * writes the image on the host), the decoder's work memory, and on the host the latent's copies, the image
     * and the batch's 8-bit images */
    size_t px = (size_t)r->h16 * 16 * r->w16 * 16;
    size_t vae_act = (size_t)r->B * per * f + per * f + (r->vae_tile ? 0 : px * 3 * f) +
                     kiln_vae_plan_bytes(e->vae, 2 * r->h16, 2 * r->w16, r->vae_tile, act) + 3 * per * f +
                     px * 3 * (f + r->B);
    size_t after_te = dit_act > vae_act ? dit_act : vae_act;
    if (enc_act > after_te) after_te = enc_act;
    size_t act_peak = te_act > after_te ? te_act : after_te;
    log_debug("memory plan (VAE tile %d): text %zu, image encode %zu, denoise %zu, decode %zu bytes", r->vae_tile,
              te_act, enc_act, dit_act, vae_act);
    *keep = e->te_bytes + e->dit_bytes + e->vae_bytes + act_peak;
    size_t a = e->te_bytes + te_act, b = e->dit_bytes + e->vae_bytes + after_te;
    *release = a > b ? a : b;
}

static size_t release_with_tile(void *ctx, int tile) {
    run *r = ctx;
    size_t keep, release;
    r->vae_tile = tile;
    estimate(r->e, r, &keep, &release);
    return release;
}

/* The decode's tiling (r->vae_tile: the engine's forced tile, or automatically the largest tile that brings an
 * untiled request over the memory limit lim within it) and the estimate with it. */
static void plan_vae(const kiln_engine *e, run *r, size_t lim, size_t *keep, size_t *release) {
    r->vae_tile = kiln_vae_pick_tile(e->cfg.vae_tile, lim, release_with_tile, r);
    estimate(e, r, keep, release);
}

/* Tokenizes one prompt with the klein template. A prompt longer than the template's 512 tokens is cut as the
 * official pipeline cuts it (the tokenizer's truncation drops the tail, the template's end included), and a
 * warning says how many tokens went. */
static kiln_status tokenize(run *r, const char *what, const char *p, kiln_tokens *out, kiln_err *err) {
    kiln_tok_options opt = kiln_tok_options_klein();
    KILN_TRY(kiln_tokenizer_encode_prompt(r->e->tok, p, strlen(p), &opt, out, err));
    if (out->truncated)
        kiln_result_add_warning(r->res, "%s truncated: %zu tokens dropped (with the klein template it is %zu tokens, the text encoder "
                    "takes %zu; the end of the template is among those dropped, as in the official pipeline)",
                    what, out->n_full - out->n_real, out->n_full, out->n_real);
    return KILN_OK;
}

static kiln_status tokenize_prompt(void *ctx, const char *what, const char *p, int i, kiln_err *err) {
    run *r = ctx;
    return tokenize(r, what, p, &r->tok[i], err);
}

/* Reference and init images: checked and prepared as the official pipeline prepares them (ref_image.h); the
 * output size defaults to the first reference's prepared size (Flux2KleinPipeline: height = height or
 * image_height), or the init image's. */
static kiln_status prepare_images(run *r, kiln_err *err) {
    const kiln_request *q = r->req;
    r->W = q->width;
    r->H = q->height;
    if (q->n_refs < 0 || q->n_refs > KILN_MAX_REFS || (q->n_refs > 0 && !q->refs))
        return KILN_FAIL(err, KILN_E_INVALID, "%d reference images: 0..%d are accepted", q->n_refs, KILN_MAX_REFS);
    for (int k = 0; k < q->n_refs; k++) {
        const kiln_image_in *im = &q->refs[k];
        kiln_status s = kiln_ref_prepare(im->pixels, im->width, im->height, &r->ref_rgb[k], &r->ref_w[k],
                                         &r->ref_h[k], err);
        if (s != KILN_OK) return kiln_err_prefix(err, "reference image %d", k + 1);
        r->ref_h16[k] = r->ref_h[k] / 16;
        r->ref_w16[k] = r->ref_w[k] / 16;
        r->n_ref_tok += r->ref_h16[k] * r->ref_w16[k];
        r->n_refs = k + 1;
        if (r->W == 0 && r->H == 0) {
            r->W = r->ref_w[k];
            r->H = r->ref_h[k];
        }
    }
    if (q->init_image) {
        const kiln_image_in *im = q->init_image;
        if (q->sigmas && q->strength != 0.0f) /* the schedule's first sigma is where the image is noised to */
            return KILN_FAIL(err, KILN_E_INVALID, "strength %g with a given sigma schedule: give one or the other",
                             q->strength);
        if (!q->sigmas && !(q->strength > 0.0f && q->strength <= 1.0f))
            return KILN_FAIL(err, KILN_E_INVALID, "strength %g: image-to-image needs 0 < strength <= 1", q->strength);
        if (!im->pixels || im->width < 16 || im->height < 16 || im->width > MAX_SIDE || im->height > MAX_SIDE)
            return KILN_FAIL(err, KILN_E_INVALID, "init image %dx%d: sides must be 16..%d", im->width, im->height,
                             MAX_SIDE);
        int cw = im->width / 16 * 16, ch = im->height / 16 * 16, left = (im->width - cw) / 2, top = (im->height - ch) / 2;
        if (r->W == 0 && r->H == 0) {
            r->W = cw;
            r->H = ch;
        }
        if (r->W != cw || r->H != ch)
            return KILN_FAIL(err, KILN_E_INVALID, "init image %dx%d (%dx%d in multiples of 16) and output %dx%d differ: "
                             "resize the init image first", im->width, im->height, cw, ch, r->W, r->H);
        r->init_rgb = kiln_malloc((size_t)cw * ch * 3);
        if (!r->init_rgb) return KILN_FAIL(err, KILN_E_NOMEM, "init image: out of memory");
        for (int y = 0; y < ch; y++)
            memcpy(r->init_rgb + (size_t)y * cw * 3, im->pixels + ((size_t)(y + top) * im->width + left) * 3, (size_t)cw * 3);
    } else if (q->strength != 0.0f) {
        return KILN_FAIL(err, KILN_E_INVALID, "strength %g without an init image", q->strength);
    }
    return KILN_OK;
}

static kiln_status validate(run *r, kiln_err *err) {
    const kiln_request *q = r->req;
    kiln_engine *e = r->e;
    /* first, before any check can fail: every rank makes this collective for every call (mem_agree.h) */
    kiln_mem_limit lim;
    KILN_TRY(kiln_engine_memory_limit(e, &lim, err));
    if (!q->prompt) return KILN_FAIL(err, KILN_E_INVALID, "no prompt (use \"\" for an empty one)");
    KILN_TRY(prepare_images(r, err));
    if (r->W <= 0 || r->H <= 0 || r->W % 16 || r->H % 16)
        return KILN_FAIL(err, KILN_E_INVALID, "image size %dx%d: width and height must be positive multiples of 16",
                         r->W, r->H);
    if (r->W > MAX_SIDE || r->H > MAX_SIDE)
        return KILN_FAIL(err, KILN_E_LIMIT, "image size %dx%d: the largest side kiln accepts is %d (beyond, "
                         "pixel indices would overflow; what fits below is the memory estimate's call)", r->W, r->H,
                         MAX_SIDE);
    KILN_TRY(kiln_vae_tile_check(e->cfg.vae_tile, err));
    if (q->steps < 0 || q->steps > MAX_STEPS)
        return KILN_FAIL(err, KILN_E_INVALID, "steps %d: must be 1..%d (0 = the model's default)", q->steps,
                         MAX_STEPS);
    if (q->batch < 1 || q->batch > MAX_BATCH)
        return KILN_FAIL(err, KILN_E_INVALID, "batch %d: must be 1..%d", q->batch, MAX_BATCH);
    if (!(q->guidance >= 0.0f) || q->guidance > 1000.0f)
        return KILN_FAIL(err, KILN_E_INVALID, "guidance %g: must be 0..1000 (0 = the default 4.0; 1 or less "
                         "turns classifier-free guidance off)", q->guidance);
    if (q->text_rule != KILN_TEXT_DIFFUSERS) /* ComfyUI's klein text encoding is not kiln's (docs/server.md) */
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "text_rule %d with FLUX.2: kiln encodes klein prompts as diffusers "
                         "does only", (int)q->text_rule);
    if (q->cfg_rule != KILN_CFG_OFFICIAL && q->cfg_rule != KILN_CFG_COMFY)
        return KILN_FAIL(err, KILN_E_INVALID, "cfg_rule %d: must be KILN_CFG_OFFICIAL or KILN_CFG_COMFY",
                         (int)q->cfg_rule);
    if (q->negative_zero && q->negative_prompt && *q->negative_prompt)
        return KILN_FAIL(err, KILN_E_INVALID, "a zeroed negative conditioning and a negative prompt at once");
    bool comfy = q->cfg_rule == KILN_CFG_COMFY;
    r->base = e->variant == KILN_VARIANT_BASE;
    r->guidance = cfg_guidance(q);
    r->cfg = cfg_decision(e, q);
    if (e->kv && r->cfg && r->n_refs) /* the KV pipeline has no CFG; what its unconditional half would see is undefined */
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "classifier-free guidance (cfg %g) with reference images on "
                         "Flux2KleinKVPipeline: the KV pipeline has no guidance", r->guidance);
    r->neg_zero = r->cfg && q->negative_zero;
    r->B = q->batch;
    r->Bd = r->cfg ? 2 * r->B : r->B;
    r->h16 = r->H / 16;
    r->w16 = r->W / 16;
    r->N = r->h16 * r->w16;
    r->steps = q->steps ? q->steps : (r->base ? 50 : 4);
    if (q->prompt_2) return KILN_FAIL(err, KILN_E_INVALID, "prompt_2 (FLUX.1's T5 text): FLUX.2 has one text encoder");
    if (q->sigmas) {
        KILN_TRY(kiln_sigmas_check(q->sigmas, q->n_sigmas, q->steps, MAX_STEPS, err));
        r->steps = q->n_sigmas - 1;
    } else if (q->n_sigmas) {
        return KILN_FAIL(err, KILN_E_INVALID, "n_sigmas %d without sigmas", q->n_sigmas);
    }
    if (r->init_rgb && !q->sigmas) {
        r->k0 = kiln_img2img_start(r->steps, q->strength);
        if (r->k0 >= r->steps)
            return KILN_FAIL(err, KILN_E_INVALID, "strength %g with %d steps leaves no step to run", q->strength, r->steps);
    }
    if (!comfy && !r->base && q->guidance > 1.0f)
        kiln_result_add_warning(r->res, "guidance %.2f ignored: the distilled klein runs without CFG", q->guidance);
    if (!r->cfg && q->negative_prompt && *q->negative_prompt)
        kiln_result_add_warning(r->res, "negative prompt ignored: %s", comfy    ? "cfg 1 turns classifier-free guidance off"
                                                      : r->base ? "guidance <= 1 turns classifier-free guidance off"
                                                                : "the distilled klein runs without CFG");
    size_t need_noise = (size_t)r->B * 128 * r->N;
    if (q->noise && q->noise_count != need_noise)
        return KILN_FAIL(err, KILN_E_INVALID, "injected noise has %zu values; %d image(s) of %dx%d need %d x 128 x "
                         "%d x %d = %zu", q->noise_count, r->B, r->W, r->H, r->B, r->h16, r->w16,
                         need_noise);

    KILN_TRY(kiln_request_each_prompt(q, r->B, tokenize_prompt, r, &r->n_seq, err));
    const int n_prompts = r->n_seq;
    if (r->cfg && !r->neg_zero) { /* the unconditional branch: the negative prompt, "" by default (the pipeline's) */
        const char *neg = q->negative_prompt ? q->negative_prompt : "";
        KILN_TRY(tokenize(r, "negative prompt", neg, &r->tok[n_prompts], err));
        r->n_seq = n_prompts + 1;
    }
    r->L = (int)r->tok[0].n;

    size_t keep, release;
    const size_t limit = lim.bytes;
    plan_vae(e, r, limit, &keep, &release);
    if (r->vae_tile) log_info("VAE decode in %dx%d-latent tiles", r->vae_tile, r->vae_tile);
    return kiln_request_plan_memory(e, &lim, keep, release, e->te_bytes + e->dit_bytes + e->vae_bytes,
                                    "the text encoder", r->W, r->H, r->B, &e->te_released, err);
}

static kiln_status encode_text(run *r, kiln_err *err) {
    kiln_engine *e = r->e;
    kiln_backend *be = e->be;
    KILN_TRY(kiln_engine_open_text_encoder(e, err));
    int seqs = r->n_seq, L = r->L;
    bool per_image = r->req->prompts != NULL;
    int64_t C = e->dit->ctx_dim;
    int32_t *ids = kiln_malloc((size_t)seqs * L * sizeof *ids);
    uint8_t *mask = kiln_malloc((size_t)seqs * L);
    float *one = be->ops->alloc(be, (size_t)seqs * L * C * sizeof(float));
    r->feat = be->ops->alloc(be, (size_t)r->Bd * L * C * sizeof(float));
    kiln_status s = KILN_OK;
    if (!ids || !mask || !one || !r->feat) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "text encoding: out of memory");
        goto done;
    }
    for (int i = 0; i < seqs; i++) {
        memcpy(ids + (size_t)i * L, r->tok[i].ids, (size_t)L * sizeof *ids);
        memcpy(mask + (size_t)i * L, r->tok[i].mask, (size_t)L);
    }
    s = kiln_qwen3_encode_tp(e->te, be, e->grid_tp, ids, mask, seqs, L, one, err);
    if (s != KILN_OK) goto done;
    /* DiT batch order: the B images' prompt features, then (CFG) B copies of the negative prompt's. */
    kiln_tensor src = kiln_f32_2d(one, (int64_t)seqs * L, C), dst = kiln_f32_2d(r->feat, (int64_t)r->Bd * L, C);
    if (r->neg_zero) { /* ConditioningZeroOut: zeros_like the conditioning, for the B unconditional rows */
        size_t n = (size_t)r->B * L * (size_t)C;
        float *zeros = kiln_calloc(n, sizeof(float));
        s = zeros ? be->ops->upload(be, r->feat + n, zeros, n * sizeof(float), err)
                  : KILN_FAIL(err, KILN_E_NOMEM, "text encoding: out of memory");
        kiln_free(zeros);
    }
    int copies = r->neg_zero ? r->B : r->Bd;
    for (int i = 0; i < copies && s == KILN_OK; i++) {
        int seq = i < r->B ? (per_image ? i : 0) : seqs - 1;
        kiln_tensor sv = kiln_tensor_rows(&src, (int64_t)seq * L, L);
        kiln_tensor dv = kiln_tensor_rows(&dst, (int64_t)i * L, L);
        s = be->ops->copy(be, &dv, &sv, err);
    }
    if (s == KILN_OK && r->trace) {
        size_t per = (size_t)r->B * L * (size_t)C;
        trace(r, "features", r->feat, per);
        if (r->cfg) trace(r, "negative_features", r->feat + per, per);
    }
done:
    kiln_free(ids);
    kiln_free(mask);
    if (one) be->ops->free(be, one);
    if (s == KILN_OK && e->te_released) kiln_engine_close_text_encoder(e);
    return s;
}

/* The schedule: the request's (ComfyUI's samplers) or the variant's. */
static void fill_sigmas(run *r) {
    if (r->req->sigmas) memcpy(r->sigmas, r->req->sigmas, ((size_t)r->steps + 1) * sizeof *r->sigmas);
    else kiln_flux2_schedule_cfg_f32(&r->e->sched, r->steps, r->N, r->sigmas);
}

static kiln_status prepare_latents(run *r, kiln_err *err) {
    kiln_backend *be = r->e->be;
    size_t per = (size_t)128 * r->N, nb = (size_t)r->B * per * sizeof(float);
    r->x = be->ops->alloc(be, nb);
    r->tmp = be->ops->alloc(be, nb);
    r->v = be->ops->alloc(be, (size_t)r->Bd * per * sizeof(float));
    /* with references every DiT sample is [noisy ; references]: xin always, and the full output apart */
    const size_t T = (size_t)r->N + r->n_ref_tok;
    bool need_xin = r->cfg || r->n_refs;
    r->xin = need_xin ? be->ops->alloc(be, (size_t)r->Bd * T * 128 * sizeof(float)) : NULL;
    r->vfull = r->n_refs ? be->ops->alloc(be, (size_t)r->Bd * T * 128 * sizeof(float)) : NULL;
    float *grid = kiln_malloc(per * sizeof(float)), *host = kiln_malloc(nb);
    float *x0 = r->init_rgb ? kiln_malloc(per * sizeof(float)) : NULL;
    float *reft = r->n_refs ? kiln_malloc((size_t)r->n_ref_tok * 128 * sizeof(float)) : NULL;
    kiln_status s = KILN_OK;
    if (!r->x || !r->tmp || !r->v || (need_xin && !r->xin) || (r->n_refs && (!r->vfull || !reft)) || !grid ||
        !host || (r->init_rgb && !x0)) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "latents: out of memory");
        goto done;
    }
    float sigma0 = 1.0f;
    if (r->init_rgb) { /* img2img: the encoded image, and the sigma the strength selects (diffusers scale_noise) */
        if ((s = kiln_edit_encode_tokens(r->e->vae, be, r->init_rgb, r->W, r->H, x0, err)) != KILN_OK) goto done;
        fill_sigmas(r);
        sigma0 = r->sigmas[r->k0];
        if (r->trace) trace(r, "init_latent", x0, per);
    } else if (r->req->sigmas) { /* a given schedule noises the empty latent (0) to its first sigma */
        sigma0 = r->req->sigmas[0];
    }
    for (int i = 0; i < r->B; i++) {
        const float *g = grid;
        if (r->req->noise) g = r->req->noise + (size_t)i * per;
        else kiln_noise_fill(grid, per, kiln_request_image_seed(r->req, i));
        float *t = host + (size_t)i * per;
        kiln_grid_to_tokens(g, 128, r->h16, r->w16, t);
        if (x0) /* sigma * noise + (1 - sigma) * sample, in f32 as torch */
            for (size_t j = 0; j < per; j++) t[j] = sigma0 * t[j] + (1.0f - sigma0) * x0[j];
        else if (sigma0 != 1.0f)
            for (size_t j = 0; j < per; j++) t[j] = sigma0 * t[j];
    }
    if ((s = be->ops->upload(be, r->x, host, nb, err)) != KILN_OK) goto done;
    if (r->n_refs) { /* the reference tokens, encoded once, into every DiT sample's tail (they never change) */
        float *p = reft;
        for (int k = 0; k < r->n_refs && s == KILN_OK; k++) {
            s = kiln_edit_encode_tokens(r->e->vae, be, r->ref_rgb[k], r->ref_w[k], r->ref_h[k], p, err);
            p += (size_t)r->ref_h16[k] * r->ref_w16[k] * 128;
        }
        if (s != KILN_OK) goto done;
        if (r->trace) trace(r, "ref_tokens", reft, (size_t)r->n_ref_tok * 128);
        for (int j = 0; j < r->Bd && s == KILN_OK; j++)
            s = be->ops->upload(be, r->xin + ((size_t)j * T + r->N) * 128, reft, (size_t)r->n_ref_tok * 128 * sizeof(float), err);
    }
done:
    kiln_free(grid);
    kiln_free(host);
    kiln_free(x0);
    kiln_free(reft);
    return s;
}

/* Each step: upload its inputs, then the body (kiln_denoise_step_run: a CUDA graph per shape on the GPU); the
 * timing, tracing, sync and progress stay out here because a graph body may not sync or look at host data. */
static kiln_status denoise(run *r, kiln_err *err) {
    kiln_engine *e = r->e;
    kiln_backend *be = e->be;
    int64_t BN = (int64_t)r->B * r->N;
    /* several ranks: Ulysses sequence parallelism when they divide the heads and the image-stream tokens
     * (references included), else every rank runs the whole DiT (the same numbers; only the VAE decode is then
     * spread) */
    kiln_comm *tp = e->grid_tp, *sp = tp ? e->grid_sp : e->comm; /* --tp: the grid (kiln_comm_grid) */
    if (sp && sp->size == 1) sp = NULL;
    const bool kv = e->kv && r->n_refs; /* 9B-KV with references: step 0 extracts their K/V, steps 1+ use them */
    if (kv && sp) {
        log_info("Flux2KleinKVPipeline's reference cache is not split over ranks; every rank runs the whole DiT");
        sp = NULL;
    }
    const int heads = e->dit->heads / (tp ? tp->size : 1);
    kiln_err why = {0};
    if (tp) log_info("tensor parallelism: %d ranks x %d heads", tp->size, heads);
    if (sp && kiln_dit_ulysses_check(sp->size, heads, r->N + r->n_ref_tok, &why) != KILN_OK) {
        log_info("%s; every %s runs the whole DiT", why.msg, tp ? "tensor-parallel group" : "rank");
        sp = NULL;
    }
    if (sp) log_info("sequence parallelism (Ulysses): %d ranks x %d image tokens", sp->size, (r->N + r->n_ref_tok) / sp->size);
    if (kv) KILN_TRY(kiln_flux2_dit_ws_create_kv(e->dit, be, r->Bd, r->L, r->h16, r->w16, r->n_refs, r->ref_h16,
                                                 r->ref_w16, &r->ws, err));
    else KILN_TRY(kiln_flux2_dit_ws_create_full(e->dit, be, sp, tp, r->Bd, r->L, r->h16, r->w16, r->n_refs,
                                                r->ref_h16, r->ref_w16, &r->ws, err));
    log_info("DiT activations in %s", kiln_dtype_name(kiln_flux2_dit_ws_act_dtype(r->ws)));
    r->dt = be->ops->alloc(be, 128 * sizeof(float));
    if (!r->dt) return KILN_FAIL(err, KILN_E_NOMEM, "denoising: out of memory");
    KILN_TRY(kiln_flux2_dit_set_text(e->dit, be, r->ws, r->feat, err)); /* the same for every step */
    kiln_denoise_step stx = {e->dit, r->ws, r->B, r->N, r->cfg, r->guidance, r->x, r->xin, r->v, r->tmp, r->dt,
                             r->n_ref_tok, r->vfull};
    /* KV steps 1+: the references are not in the input (their cached K/V are), so the plain step body */
    kiln_denoise_step stc = stx;
    stc.n_ref = 0;
    double loop_t0 = kiln_clock_s();
    const int n_run = r->steps - r->k0; /* img2img runs the schedule's tail */
    for (int ks = 0; ks < n_run; ks++) {
        const int k = r->k0 + ks;
        double st0 = kiln_clock_s();
        float t = kiln_flux2_timestep_value(r->sigmas[k]);
        kiln_denoise_step *st = kv && ks > 0 ? &stc : &stx;
        kiln_flux2_dit_kv_set_mode(r->ws, kv && ks > 0);
        /* Euler: x += (sigma_next - sigma) * v, with f32 sigmas */
        KILN_TRY(kiln_denoise_step_set(st, be, t, r->sigmas[k + 1] - r->sigmas[k], err));
        char name[64];
        if (r->trace) { /* the halves of the body, eagerly, with a look at the velocity in between */
            KILN_TRY(kiln_denoise_step_forward(st, be, err));
            float ts = t / 1000.0f;
            snprintf(name, sizeof name, "step%d.timestep", ks);
            trace(r, name, &ts, 1);
            snprintf(name, sizeof name, "step%d.velocity", ks);
            trace(r, name, r->v, (size_t)BN * 128);
            if (r->cfg) {
                snprintf(name, sizeof name, "step%d.velocity_uncond", ks);
                trace(r, name, r->v + BN * 128, (size_t)BN * 128);
            }
            KILN_TRY(kiln_denoise_step_update(st, be, err));
        } else {
            KILN_TRY(kiln_denoise_step_run(st, be, err));
        }
        KILN_TRY(be->ops->sync(be, err));
        if (r->trace) {
            snprintf(name, sizeof name, "step%d.latents", ks);
            trace(r, name, r->x, (size_t)BN * 128);
        }
        double now = kiln_clock_s();
        r->res->step_ms[ks] = (now - st0) * 1e3;
        double eta = (now - loop_t0) / (ks + 1) * (n_run - ks - 1);
        bool go_on = true;
        if (r->req->latent_preview && r->req->progress) KILN_TRY(report_latent(r, ks + 1, eta, &go_on, err));
        else go_on = kiln_stage_report(&r->clk, r->req, ks + 1, n_run, eta);
        if (!go_on) return KILN_FAIL(err, KILN_E_CANCELLED, "cancelled after denoising step %d/%d", ks + 1, n_run);
    }
    return KILN_OK;
}

/* FLUX.2's latent rule: tokens -> grid, BatchNorm denormalised, 2x2 patches unfolded (Flux2KleinPipeline). */
static void to_vae_input(void *ctx, const float *tok, float *grid, float *z) {
    run *r = ctx;
    const kiln_flux2_vae *vae = r->e->vae;
    kiln_tokens_to_grid(tok, 128, r->h16, r->w16, grid);
    kiln_latent_bn_denormalize(grid, 128, r->N, vae->bn_mean.data, vae->bn_var.data, vae->bn_eps);
    kiln_latent_unpatchify(grid, vae->z_ch, r->h16, r->w16, z);
    trace(r, "latent.image", z, (size_t)128 * r->N);
}

static kiln_status decode(run *r, kiln_err *err) {
    kiln_decode_batch d = {.be = r->e->be, .comm = r->e->comm, .vae = r->e->vae, .x = r->x, .B = r->B, .C = 128,
                           .h16 = r->h16, .w16 = r->w16, .tile = r->vae_tile, .to_vae_input = to_vae_input, .ctx = r,
                           .res = r->res, .req = r->req, .trace = r->trace, .trace_ctx = r->trace_ctx};
    return kiln_decode_batch_run(&d, err);
}

/* What only the denoising reads - the DiT's workspace, the text features, the step's buffers - freed before the
 * decode, which then has the memory to itself (the plan counts the two apart: estimate's max). */
static void release_denoiser(run *r) {
    kiln_backend *be = r->e->be;
    float **bufs[] = {&r->feat, &r->xin, &r->v, &r->tmp, &r->dt, &r->vfull};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (*bufs[i]) be->ops->free(be, *bufs[i]);
        *bufs[i] = NULL;
    }
    kiln_flux2_dit_ws_free(be, r->ws);
    r->ws = NULL;
}

static void run_free(run *r) {
    kiln_backend *be = r->e->be;
    for (int i = 0; i <= MAX_BATCH; i++) kiln_tokens_free(&r->tok[i]);
    release_denoiser(r);
    if (r->x) be->ops->free(be, r->x);
    kiln_free(r->sigmas);
    for (int k = 0; k < KILN_MAX_REFS; k++) kiln_free(r->ref_rgb[k]);
    kiln_free(r->init_rgb);
}

static void fill_meta(run *r) {
    kiln_result *res = r->res;
    const kiln_request *q = r->req;
    res->width = r->W;
    res->height = r->H;
    res->steps = r->steps - r->k0;
    res->batch = r->B;
    res->guidance = r->cfg || r->base ? r->guidance : 1.0f;
    res->variant = r->e->variant;
    kiln_result_fill_ids(res, q, r->e->commit, r->e->n_requests);
}

kiln_status kiln_generate(kiln_engine *e, const kiln_request *req, kiln_result **out, kiln_err *err) {
    return kiln_generate_traced(e, req, NULL, NULL, out, err);
}

kiln_status kiln_generate_traced(kiln_engine *e, const kiln_request *req, kiln_trace_fn trace_fn, void *trace_ctx,
                                 kiln_result **out, kiln_err *err) {
    *out = NULL;
    if (!e || !req) return KILN_FAIL(err, KILN_E_INVALID, "kiln_generate: no engine or request");
    if (e->f1) return kiln_generate_flux1(e, req, trace_fn, trace_ctx, out, err); /* generate_flux1.c */
    run r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.req = req;
    r.trace = trace_fn;
    r.trace_ctx = trace_ctx;
    struct kiln_lora_set *lora = NULL; /* the request's adapters, on the DiT for this request only */
    kiln_status s = kiln_request_begin(e, &r.clk, &r.res, err);
    if (s != KILN_OK) return s;
    /* img2img runs the schedule's tail: its denoising reports the steps that run */
#define STAGE(st, call)                                                                                       \
    KILN_RUN_STAGE(s, &r.clk, req, r.res, st, (st) == KILN_STAGE_DENOISING ? r.steps - r.k0 : 0, call, err)

    STAGE(KILN_STAGE_INPUT_VALIDATION, validate(&r, err));
    if ((s = kiln_engine_lora_attach(e, req, &lora, err)) != KILN_OK) goto done; /* adapters checked up front */
    /* the adapters' [rows, rank] intermediates (compute/lora.c), at most one at a time, for the DiT's most rows */
    s = kiln_request_plan_more(e, (size_t)r.Bd * (size_t)(r.L + r.N + r.n_ref_tok) * (size_t)kiln_lora_max_rank(lora) *
                                      sizeof(float), err);
    if (s != KILN_OK) goto done;
    fill_meta(&r);
    if ((s = kiln_result_alloc_arrays(r.res, r.B, r.steps, &r.sigmas, err)) != KILN_OK) goto done;
    r.res->n_steps = r.steps - r.k0;
    STAGE(KILN_STAGE_TEXT_ENCODING, encode_text(&r, err));
    STAGE(KILN_STAGE_LATENT_PREPARATION, prepare_latents(&r, err));
    STAGE(KILN_STAGE_TIMESTEP_PREPARATION, (fill_sigmas(&r), KILN_OK));
    trace(&r, "sigmas", r.sigmas + r.k0, (size_t)(r.steps - r.k0) + 1); /* img2img: the schedule's tail */
    r.res->sigmas_first = r.sigmas[r.k0];
    r.res->sigmas_last_nonzero = r.sigmas[r.steps - 1];
    STAGE(KILN_STAGE_DENOISING, denoise(&r, err));
    release_denoiser(&r);
    STAGE(KILN_STAGE_DECODING, decode(&r, err));
#undef STAGE
    kiln_result_finish(r.res, &r.clk);
done:
    kiln_lora_detach(lora);
    run_free(&r);
    return kiln_request_end(e, s, r.res, out, err);
}

kiln_status kiln_estimate_memory(kiln_engine *e, const kiln_request *req, size_t *bytes, kiln_err *err) {
    if (!e || !req) return KILN_FAIL(err, KILN_E_INVALID, "kiln_estimate_memory: no engine or request");
    if (e->f1) return kiln_estimate_memory_flux1(e, req, bytes, err);
    run r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.req = req;
    /* reference and init images: their prepared sizes count (reference tokens, encoder), and set the default size */
    kiln_status s = prepare_images(&r, err);
    for (int k = 0; k < KILN_MAX_REFS; k++) kiln_free(r.ref_rgb[k]);
    kiln_free(r.init_rgb);
    if (s != KILN_OK) return s;
    if (r.W <= 0 || r.H <= 0 || r.W % 16 || r.H % 16 || req->batch < 1)
        return KILN_FAIL(err, KILN_E_INVALID, "image size %dx%d batch %d: sizes must be positive multiples of 16",
                         r.W, r.H, req->batch);
    r.base = e->variant == KILN_VARIANT_BASE;
    r.cfg = cfg_decision(e, req);
    r.B = req->batch;
    r.Bd = r.cfg ? 2 * r.B : r.B;
    r.h16 = r.H / 16;
    r.w16 = r.W / 16;
    r.N = r.h16 * r.w16;
    r.L = KILN_TOK_DEFAULT_MAX_LEN;
    size_t keep, release;
    /* this rank's memory, no agreement: a query that one rank may make alone (a collective would wait for the
     * others); kiln_generate plans with the ranks' agreed limit */
    size_t limit = kiln_engine_local_memory_limit(e);
    plan_vae(e, &r, limit, &keep, &release);
    *bytes = (limit && keep > limit) ? release : keep;
    return KILN_OK;
}
