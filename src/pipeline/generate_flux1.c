/* generate_flux1.c - one FLUX.1 [dev] / [schnell] text-to-image request as diffusers' FluxPipeline runs it, through
 * the stages of DESIGN.md, each timed (kiln_generate dispatches here for a FLUX.1 engine).
 *
 *   InputValidation     request checks; CLIP tokens (77: BOS + 75 + EOS, padded with EOS) and T5 tokens
 *                       (max_sequence_length 512 [dev] / 256 [schnell], text + </s>, padded with <pad>), both cut
 *                       at the tail with a warning as the official pipeline warns; memory plan
 *   TextEncoding        CLIP pooled vector [B, 768] and T5 last_hidden_state [B x L, 4096]; T5 released when tight
 *   LatentPreparation   noise [64, H/16, W/16] per image (seed + i, or injected) -> packed tokens [N, 64]
 *   TimestepPreparation sigmas linspace(1, 1/n, n), dev: calculate_shift's mu (exponential shift); schnell: none
 *   Denoising           n x (DiT over the whole batch with timestep t/1000 and, for dev, the guidance; Euler)
 *   Decoding            unpack 2x2 -> latents / scaling_factor + shift_factor -> VAE decode -> RGB8, per image
 *
 * The request's frame (lock, result, timed stages), the prompt loop, the text encoder's release, warnings, result
 * ids and image storing are generate.c's too (run_common.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "models/dit_ulysses.h"
#include "models/flux1_vae.h"
#include "models/latent.h"
#include "models/views.h"
#include "pipeline/decode_batch.h"
#include "pipeline/engine_flux1.h"
#include "pipeline/engine_internal.h"
#include "pipeline/memory.h"
#include "pipeline/noise.h"
#include "pipeline/run_common.h"
#include "pipeline/schedule.h"
#include "pipeline/vae_plan.h"
#include "text/comfy_prompt.h"

#define MAX_SIDE 2048
#define MAX_BATCH 16
#define MAX_STEPS 1000
#define CLIP_LEN 77
#define MAX_T5_TOKENS 16384 /* ComfyUI's T5 has no cap; kiln's memory estimate would refuse long before */

typedef struct run {
    kiln_engine *e;
    kiln_flux1_models *f;
    const kiln_request *req;
    kiln_result *res;
    kiln_stage_clock clk;
    int B, C, h16, w16, N, L, steps, n_seq;
    int vae_tile;             /* 0: untiled decode; else the latent tile side (pipeline/vae_plan.h) */
    float guidance;           /* dev: fed to the DiT; schnell: unused */
    kiln_tokens clip[MAX_BATCH], t5[MAX_BATCH];
    double *t5_weights[MAX_BATCH]; /* KILN_TEXT_COMFY: per T5 token (NULL: all 1) */
    float *txt, *pooled;      /* backend [B*L, ctx], [B, pooled] */
    float *x, *v, *tmp;       /* backend [B*N, C] */
    float *sigmas;
    kiln_flux1_dit_ws *ws;
    kiln_trace_fn trace;
    void *trace_ctx;
} run;

static void trace(run *r, const char *name, const float *data, size_t n) {
    if (r->trace) r->trace(r->trace_ctx, name, data, n);
}

/* T5's token budget: what FLUX.1's model cards run (dev 512, schnell 256; FluxPipeline's own default is 512). */
static int t5_length(const kiln_flux1_models *f) { return f->dev ? 512 : 256; }

/* Bytes of a request, as generate.c's estimate: per phase every buffer live in it, the backend's (KILN_STRICT_PLAN
 * checks them: run_common.h) and the host's. Text: T5 (the largest text stage) beside the features; the DiT with
 * its latents; the decode (FLUX.2's decoder) after release_denoiser. */
static void estimate(const kiln_flux1_models *f, const run *r, size_t *keep, size_t *release) {
    const kiln_backend *be = r->e->be;
    const kiln_dtype act = kiln_backend_act_dtype(be);
    int sp = r->e->comm ? r->e->comm->size : 1; /* as denoise decides it */
    kiln_err why = {0};
    if (sp > 1 && kiln_dit_ulysses_check(sp, f->dit->heads, r->N, &why) != KILN_OK) sp = 1;
    const size_t fs = sizeof(float);
    size_t R = (size_t)r->n_seq * r->L, D = (size_t)f->t5_d, I = (size_t)f->t5_inner;
    size_t S = (size_t)r->L, F = (size_t)f->t5_ff;
    size_t feats = ((size_t)r->B * r->L * f->dit->ctx_dim + (size_t)r->B * f->dit->pooled_dim) * fs;
    /* T5's buffers (t5_encoder.c), the encoders' outputs and the features, and comfy_weights' empty-prompt pass */
    size_t t5_act = (R * (2 * D + 4 * I + 3 * F) + ((size_t)f->t5_heads + 2) * S * S + 2 * S * (size_t)f->t5_dkv) * fs +
                    2 * feats + S * D * fs;
    size_t lat = (size_t)3 * r->B * r->N * r->C * fs; /* x, v, tmp */
    size_t dit_act = kiln_flux1_dit_workspace(f->dit, r->B, r->L, r->N, sp, act) + lat + feats;
    size_t px = (size_t)r->h16 * 16 * r->w16 * 16, per = (size_t)r->N * r->C;
    size_t vae_act = (size_t)r->B * per * fs + per * fs + (r->vae_tile ? 0 : px * 3 * fs) +
                     kiln_vae_plan_bytes(f->vae, 2 * r->h16, 2 * r->w16, r->vae_tile, act) + 3 * per * fs +
                     px * 3 * (fs + r->B);
    size_t act_peak = t5_act > dit_act ? t5_act : dit_act;
    log_debug("memory plan (VAE tile %d): text %zu, denoise %zu, decode %zu bytes", r->vae_tile, t5_act, dit_act,
              vae_act);
    if (vae_act > act_peak) act_peak = vae_act;
    *keep = f->clip_bytes + f->t5_bytes + f->dit_bytes + f->vae_bytes + act_peak;
    size_t a = f->clip_bytes + f->t5_bytes + t5_act;
    size_t b = f->clip_bytes + f->dit_bytes + f->vae_bytes + (dit_act > vae_act ? dit_act : vae_act);
    *release = a > b ? a : b;
}

static size_t release_with_tile(void *ctx, int tile) {
    run *r = ctx;
    size_t keep, release;
    r->vae_tile = tile;
    estimate(r->f, r, &keep, &release);
    return release;
}

/* The decode's tiling (r->vae_tile: forced, or automatic when the untiled decode would not fit) and the
 * request's estimate with it. */
static void plan(run *r, size_t limit, size_t *keep, size_t *release) {
    r->vae_tile = kiln_vae_pick_tile(r->e->cfg.vae_tile, limit, release_with_tile, r);
    estimate(r->f, r, keep, release);
}

/* ComfyUI's tokens (text/comfy_prompt.h) as a kiln_tokens (its mask zeroed: FLUX.1's encoders take no mask) */
static kiln_status comfy_tokens(const kiln_tokenizer *tok, kiln_comfy_encoder enc, const char *p, kiln_tokens *out,
                                double **weights, size_t *dropped, kiln_err *err) {
    kiln_comfy_tokens t;
    KILN_TRY(kiln_comfy_tokenize(tok, enc, p, strlen(p), &t, err));
    out->ids = t.ids;
    out->n = t.n;
    out->n_real = out->n_full = t.n_real;
    out->mask = kiln_calloc(t.n, 1);
    for (size_t k = 0; out->mask && k < t.n; k++)
        if (!isfinite(t.weights[k])) {
            kiln_free(t.weights);
            return KILN_FAIL(err, KILN_E_INVALID, "prompt weight %g: ComfyUI's weights must be finite here (a "
                             "non-finite one makes every feature NaN)", t.weights[k]);
        }
    if (!out->mask) {
        kiln_free(t.weights);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for tokens");
    }
    if (dropped) *dropped = t.n_dropped;
    if (weights && t.weighted) *weights = t.weights;
    else kiln_free(t.weights);
    return KILN_OK;
}

/* ComfyUI's rule: CLIP-L's first chunk, T5 never cut (the run's L is the longest prompt's, set after all) */
static kiln_status tokenize_comfy(run *r, const char *what, const char *p, int i, kiln_err *err) {
    size_t dropped = 0;
    KILN_TRY(comfy_tokens(r->f->tok_clip, KILN_COMFY_CLIP_L, p, &r->clip[i], NULL, &dropped, err));
    const char *p2 = r->req->prompt_2 && !r->req->prompts ? r->req->prompt_2 : p; /* CLIPTextEncodeFlux's t5xxl */
    KILN_TRY(comfy_tokens(r->f->tok_t5, KILN_COMFY_T5XXL, p2, &r->t5[i], &r->t5_weights[i], NULL, err));
    if (dropped)
        kiln_result_add_warning(r->res, "%s: %zu tokens after CLIP-L's first 77-token chunk are not read (FLUX.1 takes "
                                "that chunk's pooled output, as ComfyUI does)", what, dropped);
    if (r->t5[i].n > MAX_T5_TOKENS)
        return KILN_FAIL(err, KILN_E_LIMIT, "%s: %zu T5 tokens, at most %d", what, r->t5[i].n, MAX_T5_TOKENS);
    if ((int)r->t5[i].n > r->L) r->L = (int)r->t5[i].n;
    return KILN_OK;
}

/* Prompt i of the batch (kiln_request_each_prompt) into clip[i] and t5[i]. */
static kiln_status tokenize(void *ctx, const char *what, const char *p, int i, kiln_err *err) {
    run *r = ctx;
    if (r->req->text_rule == KILN_TEXT_COMFY) return tokenize_comfy(r, what, p, i, err);
    kiln_tok_options oc = kiln_tok_options_flux1_clip(), ot = kiln_tok_options_flux1_t5((size_t)r->L);
    KILN_TRY(kiln_tokenizer_encode_prompt(r->f->tok_clip, p, strlen(p), &oc, &r->clip[i], err));
    const char *p2 = r->req->prompt_2 && !r->req->prompts ? r->req->prompt_2 : p; /* diffusers' prompt_2 */
    KILN_TRY(kiln_tokenizer_encode_prompt(r->f->tok_t5, p2, strlen(p2), &ot, &r->t5[i], err));
    /* FluxPipeline's warnings: "The following part of your input was truncated because CLIP can only handle
     * sequences up to 77 tokens" / "... because `max_sequence_length` is set to N tokens" */
    if (r->clip[i].truncated)
        kiln_result_add_warning(r->res, "%s truncated for CLIP: %zu of its %zu tokens dropped (CLIP takes 77 with its start and end "
                    "tokens, as in the official pipeline)", what, r->clip[i].n_full - r->clip[i].n_real,
                    r->clip[i].n_full);
    if (r->t5[i].truncated)
        kiln_result_add_warning(r->res, "%s truncated for T5: %zu of its %zu tokens dropped (max_sequence_length %d with the end "
                    "token, as in the official pipeline)", what, r->t5[i].n_full - r->t5[i].n_real, r->t5[i].n_full,
                    r->L);
    return KILN_OK;
}

static kiln_status validate(run *r, kiln_err *err) {
    const kiln_request *q = r->req;
    kiln_engine *e = r->e;
    kiln_flux1_models *f = r->f;
    /* first, before any check can fail: every rank makes this collective for every call (mem_agree.h) */
    kiln_mem_limit lim;
    KILN_TRY(kiln_engine_memory_limit(e, &lim, err));
    if (!q->prompt) return KILN_FAIL(err, KILN_E_INVALID, "no prompt (use \"\" for an empty one)");
    if (q->width <= 0 || q->height <= 0 || q->width % 16 || q->height % 16)
        return KILN_FAIL(err, KILN_E_INVALID, "image size %dx%d: width and height must be positive multiples of 16",
                         q->width, q->height);
    if (q->width > MAX_SIDE || q->height > MAX_SIDE)
        return KILN_FAIL(err, KILN_E_LIMIT, "image size %dx%d: the largest side kiln accepts is %d", q->width,
                         q->height, MAX_SIDE);
    if (q->steps < 0 || q->steps > MAX_STEPS)
        return KILN_FAIL(err, KILN_E_INVALID, "steps %d: must be 1..%d (0 = the model's default)", q->steps,
                         MAX_STEPS);
    KILN_TRY(kiln_vae_tile_check(r->e->cfg.vae_tile, err));
    /* what FluxPipeline has no counterpart for here: refused by name, never ignored */
    if (q->n_refs > 0)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "reference images with FLUX.1 [dev]/[schnell]: these models take "
                         "none (reference editing is FLUX.2 [klein]'s, or FLUX.1 Kontext's, which kiln does not run)");
    if (q->init_image)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "an init image (image-to-image) with FLUX.1 is not implemented yet "
                         "(diffusers' FluxImg2ImgPipeline); FLUX.2 [klein] supports it");
    if (q->n_loras > 0)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "LoRA adapters with FLUX.1 are not implemented yet (FLUX.2 "
                         "[klein] supports them)");
    if (q->batch < 1 || q->batch > MAX_BATCH)
        return KILN_FAIL(err, KILN_E_INVALID, "batch %d: must be 1..%d", q->batch, MAX_BATCH);
    if (!(q->guidance >= 0.0f) || q->guidance > 1000.0f)
        return KILN_FAIL(err, KILN_E_INVALID, "guidance %g: must be 0..1000 (0 = FLUX.1 [dev]'s default 3.5)",
                         q->guidance);
    if (q->cfg_rule == KILN_CFG_COMFY) /* ComfyUI's cfg and FluxGuidance are two numbers; the request has one */
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "FLUX.1 with ComfyUI's CFG rule is not supported yet (the request "
                         "carries one guidance value: FLUX.1 [dev]'s distilled guidance)");
    if (q->cfg_rule != KILN_CFG_OFFICIAL)
        return KILN_FAIL(err, KILN_E_INVALID, "cfg_rule %d: must be KILN_CFG_OFFICIAL or KILN_CFG_COMFY",
                         (int)q->cfg_rule);
    r->B = q->batch;
    r->C = f->dit->in_ch;
    r->h16 = q->height / 16;
    r->w16 = q->width / 16;
    r->N = r->h16 * r->w16;
    if (q->text_rule != KILN_TEXT_DIFFUSERS && q->text_rule != KILN_TEXT_COMFY)
        return KILN_FAIL(err, KILN_E_INVALID, "text_rule %d: must be KILN_TEXT_DIFFUSERS or KILN_TEXT_COMFY",
                         (int)q->text_rule);
    r->L = q->text_rule == KILN_TEXT_COMFY ? KILN_COMFY_T5_MIN_LENGTH : t5_length(f); /* comfy: grows to the longest */
    r->steps = q->steps ? q->steps : (f->dev ? 28 : 4);
    if (q->prompt_2 && q->prompts)
        return KILN_FAIL(err, KILN_E_INVALID, "prompt_2 with per-image prompts: give one or the other");
    if (q->sigmas) {
        KILN_TRY(kiln_sigmas_check(q->sigmas, q->n_sigmas, q->steps, MAX_STEPS, err));
        r->steps = q->n_sigmas - 1;
    } else if (q->n_sigmas) {
        return KILN_FAIL(err, KILN_E_INVALID, "n_sigmas %d without sigmas", q->n_sigmas);
    }
    r->guidance = f->dev ? (q->guidance > 0 ? q->guidance : 3.5f) : 0.0f;
    if (!f->dev && q->guidance > 0)
        kiln_result_add_warning(r->res, "guidance %.2f ignored: FLUX.1 [schnell] has no guidance embedder", q->guidance);
    if ((q->negative_prompt && *q->negative_prompt) || q->negative_zero)
        kiln_result_add_warning(r->res, "negative prompt ignored: FluxPipeline runs without classifier-free guidance "
                    "(true_cfg_scale 1)");
    size_t need = (size_t)r->B * r->C * r->N;
    if (q->noise && q->noise_count != need)
        return KILN_FAIL(err, KILN_E_INVALID, "injected noise has %zu values; %d image(s) of %dx%d need %d x %d x %d "
                         "x %d = %zu", q->noise_count, r->B, q->width, q->height, r->B, r->C, r->h16, r->w16, need);
    KILN_TRY(kiln_request_each_prompt(q, r->B, tokenize, r, &r->n_seq, err));
    size_t keep, release;
    const size_t limit = lim.bytes;
    plan(r, limit, &keep, &release);
    if (r->vae_tile) log_info("VAE decode in %dx%d-latent tiles", r->vae_tile, r->vae_tile);
    return kiln_request_plan_memory(e, &lim, keep, release, f->clip_bytes + f->t5_bytes + f->dit_bytes + f->vae_bytes,
                                    "T5", q->width, q->height, r->B, &f->t5_released, err);
}

/* ComfyUI's encode_token_weights for the prompts with weights: the empty prompt's T5 features z_empty at the same
 * length (gen_empty_tokens: </s>, then <pad>), and each token of weight w becomes (z - z_empty) * w + z_empty, in
 * float32 as torch computes it. txt: backend [n * L, D]. */
static kiln_status comfy_weights(run *r, float *txt, int n, kiln_err *err) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= r->t5_weights[i] != NULL;
    if (!any) return KILN_OK;
    kiln_backend *be = r->e->be;
    int L = r->L;
    size_t D = (size_t)r->f->t5_d, all = (size_t)n * L * D;
    int32_t *eid = kiln_calloc((size_t)L, sizeof *eid);
    float *ze = be->ops->alloc(be, (size_t)L * D * sizeof(float));
    float *hz = kiln_malloc(all * sizeof *hz), *he = kiln_malloc((size_t)L * D * sizeof *he);
    kiln_status s = eid && ze && hz && he ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "prompt weights: out of memory");
    if (s == KILN_OK) {
        eid[0] = 1; /* </s> */
        s = kiln_t5_encoder_encode(r->f->t5, be, eid, 1, L, ze, err);
    }
    if (s == KILN_OK) s = be->ops->download(be, hz, txt, all * sizeof *hz, err);
    if (s == KILN_OK) s = be->ops->download(be, he, ze, (size_t)L * D * sizeof *he, err);
    for (int i = 0; i < n && s == KILN_OK; i++)
        for (int j = 0; r->t5_weights[i] && j < (int)r->t5[i].n; j++) {
            double w = r->t5_weights[i][j];
            if (w == 1.0) continue;
            float *z = hz + ((size_t)i * L + j) * D, fw = (float)w;
            const float *e0 = he + (size_t)j * D;
            for (size_t d = 0; d < D; d++) z[d] = (z[d] - e0[d]) * fw + e0[d];
        }
    if (s == KILN_OK) s = be->ops->upload(be, txt, hz, all * sizeof *hz, err);
    kiln_free(eid);
    kiln_free(hz);
    kiln_free(he);
    if (ze) be->ops->free(be, ze);
    return s;
}

static kiln_status encode_text(run *r, kiln_err *err) {
    kiln_engine *e = r->e;
    kiln_flux1_models *f = r->f;
    kiln_backend *be = e->be;
    KILN_TRY(kiln_flux1_open_t5(e, err));
    int n = r->n_seq, L = r->L;
    int64_t Dc = f->clip->hidden, Dt = f->t5_d;
    int32_t *cid = kiln_malloc((size_t)n * CLIP_LEN * sizeof *cid), *tid = kiln_malloc((size_t)n * L * sizeof *tid);
    float *pool1 = be->ops->alloc(be, (size_t)n * Dc * sizeof(float));
    float *txt1 = be->ops->alloc(be, (size_t)n * L * Dt * sizeof(float));
    r->pooled = be->ops->alloc(be, (size_t)r->B * Dc * sizeof(float));
    r->txt = be->ops->alloc(be, (size_t)r->B * L * Dt * sizeof(float));
    kiln_status s = KILN_OK;
    if (!cid || !tid || !pool1 || !txt1 || !r->pooled || !r->txt) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "text encoding: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        memcpy(cid + (size_t)i * CLIP_LEN, r->clip[i].ids, CLIP_LEN * sizeof *cid);
        memcpy(tid + (size_t)i * L, r->t5[i].ids, r->t5[i].n * sizeof *tid);
        for (size_t k = r->t5[i].n; k < (size_t)L; k++) tid[(size_t)i * L + k] = 0; /* a shorter prompt of the batch */
    }
    if (r->trace) { /* the ids, as floats (exact below 2^24) */
        float *fid = kiln_malloc((size_t)n * L * sizeof *fid);
        for (size_t i = 0; fid && i < (size_t)n * CLIP_LEN; i++) fid[i] = (float)cid[i];
        if (fid) trace(r, "clip_ids", fid, (size_t)n * CLIP_LEN);
        for (size_t i = 0; fid && i < (size_t)n * L; i++) fid[i] = (float)tid[i];
        if (fid) trace(r, "t5_ids", fid, (size_t)n * L);
        kiln_free(fid);
    }
    if ((s = kiln_clip_text_encode(f->clip, be, cid, n, CLIP_LEN, NULL, pool1, err))) goto done;
    if ((s = kiln_t5_encoder_encode(f->t5, be, tid, n, L, txt1, err))) goto done;
    if ((s = comfy_weights(r, txt1, n, err))) goto done;
    /* image i gets its own prompt's features, or the one prompt's (num_images_per_prompt repeats them) */
    kiln_tensor P1 = kiln_f32_2d(pool1, n, Dc), P = kiln_f32_2d(r->pooled, r->B, Dc);
    kiln_tensor T1 = kiln_f32_2d(txt1, (int64_t)n * L, Dt), T = kiln_f32_2d(r->txt, (int64_t)r->B * L, Dt);
    for (int i = 0; i < r->B && s == KILN_OK; i++) {
        int src = n > 1 ? i : 0;
        kiln_tensor pd = kiln_tensor_rows(&P, i, 1), ps = kiln_tensor_rows(&P1, src, 1);
        kiln_tensor td = kiln_tensor_rows(&T, (int64_t)i * L, L), ts = kiln_tensor_rows(&T1, (int64_t)src * L, L);
        s = be->ops->copy(be, &pd, &ps, err);
        if (s == KILN_OK) s = be->ops->copy(be, &td, &ts, err);
    }
    if (s == KILN_OK) s = be->ops->sync(be, err);
    if (s == KILN_OK && r->trace) {
        trace(r, "pooled", r->pooled, (size_t)r->B * Dc);
        trace(r, "features", r->txt, (size_t)r->B * L * Dt);
    }
done:
    kiln_free(cid);
    kiln_free(tid);
    if (pool1) be->ops->free(be, pool1);
    if (txt1) be->ops->free(be, txt1);
    if (s == KILN_OK && f->t5_released) kiln_flux1_close_t5(e);
    return s;
}

static kiln_status prepare_latents(run *r, kiln_err *err) {
    kiln_backend *be = r->e->be;
    size_t per = (size_t)r->C * r->N, nb = (size_t)r->B * per * sizeof(float);
    r->x = be->ops->alloc(be, nb);
    r->v = be->ops->alloc(be, nb);
    r->tmp = be->ops->alloc(be, nb);
    float *grid = kiln_malloc(per * sizeof(float)), *host = kiln_malloc(nb);
    kiln_status s = KILN_OK;
    if (!r->x || !r->v || !r->tmp || !grid || !host) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "latents: out of memory");
        goto done;
    }
    for (int i = 0; i < r->B; i++) {
        const float *g = grid;
        if (r->req->noise) g = r->req->noise + (size_t)i * per;
        else kiln_noise_fill(grid, per, kiln_request_image_seed(r->req, i));
        float *t = host + (size_t)i * per;
        kiln_grid_to_tokens(g, r->C, r->h16, r->w16, t); /* _pack_latents' token order */
        trace(r, "noise.image", g, per);
        /* a given schedule: ComfyUI's noise_scaling of an empty latent, sigma * noise + (1 - sigma) * 0, in f32 */
        if (r->req->sigmas && r->req->sigmas[0] != 1.0f)
            for (size_t j = 0; j < per; j++) t[j] = r->req->sigmas[0] * t[j];
    }
    s = be->ops->upload(be, r->x, host, nb, err);
done:
    kiln_free(grid);
    kiln_free(host);
    return s;
}

static kiln_status denoise(run *r, kiln_err *err) {
    kiln_engine *e = r->e;
    kiln_backend *be = e->be;
    const kiln_ops *op = be->ops;
    int64_t BN = (int64_t)r->B * r->N;
    /* several ranks: Ulysses sequence parallelism when they divide the heads and the image tokens, else every rank
     * runs the whole DiT (the same numbers) */
    kiln_comm *sp = e->comm && e->comm->size > 1 ? e->comm : NULL;
    kiln_err why = {0};
    if (sp && kiln_dit_ulysses_check(sp->size, r->f->dit->heads, r->N, &why) != KILN_OK) {
        log_info("%s; every rank runs the whole DiT", why.msg);
        sp = NULL;
    }
    if (sp) log_info("sequence parallelism (Ulysses): %d ranks x %d image tokens", sp->size, r->N / sp->size);
    KILN_TRY(kiln_flux1_dit_ws_create_sp(r->f->dit, be, sp, r->B, r->L, r->h16, r->w16, &r->ws, err));
    log_info("DiT activations in %s", kiln_dtype_name(kiln_flux1_dit_ws_act_dtype(r->ws)));
    kiln_tensor X = kiln_f32_2d(r->x, BN, r->C), V = kiln_f32_2d(r->v, BN, r->C), T = kiln_f32_2d(r->tmp, BN, r->C);
    double loop_t0 = kiln_clock_s();
    for (int k = 0; k < r->steps; k++) {
        double st0 = kiln_clock_s();
        /* FluxPipeline: timesteps = sigmas * 1000 (f32), the DiT gets timestep / 1000 */
        float t = r->sigmas[k] * 1000.0f, tp = t / 1000.0f;
        KILN_TRY(kiln_flux1_dit_forward(r->f->dit, be, r->ws, r->x, r->txt, r->pooled, tp, r->guidance, r->v, err));
        /* Euler: x += (sigma_next - sigma) * v, the product rounded before the add as torch does */
        KILN_TRY(op->scale_shift(be, &T, &V, r->sigmas[k + 1] - r->sigmas[k], 0.0f, err));
        if (r->trace) {
            KILN_TRY(op->sync(be, err));
            char name[64];
            snprintf(name, sizeof name, "step%d.timestep", k);
            trace(r, name, &tp, 1);
            if (r->f->dev) {
                snprintf(name, sizeof name, "step%d.guidance", k);
                trace(r, name, &r->guidance, 1);
            }
            snprintf(name, sizeof name, "step%d.velocity", k);
            trace(r, name, r->v, (size_t)BN * r->C);
        }
        KILN_TRY(op->add(be, &X, &X, &T, err));
        KILN_TRY(op->sync(be, err));
        if (r->trace) {
            char name[64];
            snprintf(name, sizeof name, "step%d.latents", k);
            trace(r, name, r->x, (size_t)BN * r->C);
        }
        double now = kiln_clock_s();
        r->res->step_ms[k] = (now - st0) * 1e3;
        double eta = (now - loop_t0) / (k + 1) * (r->steps - k - 1);
        if (!kiln_stage_report(&r->clk, r->req, k + 1, r->steps, eta))
            return KILN_FAIL(err, KILN_E_CANCELLED, "cancelled after denoising step %d/%d", k + 1, r->steps);
    }
    return KILN_OK;
}

/* FLUX.1's latent rule: tokens -> grid, 2x2 patches unfolded (_unpack_latents: channel c*4 + dy*2 + dx), then
 * the autoencoder's scaling and shift undone. */
static void to_vae_input(void *ctx, const float *tok, float *grid, float *z) {
    run *r = ctx;
    const size_t per = (size_t)r->C * r->N;
    kiln_tokens_to_grid(tok, r->C, r->h16, r->w16, grid);
    kiln_latent_unpatchify(grid, r->f->vae->z_ch, r->h16, r->w16, z);
    kiln_flux1_vae_unscale(r->f->vae, z, per);
    trace(r, "vae_input.image", z, per);
}

static kiln_status decode(run *r, kiln_err *err) {
    kiln_decode_batch d = {.be = r->e->be, .comm = r->e->comm, .vae = r->f->vae, .x = r->x, .B = r->B, .C = r->C,
                           .h16 = r->h16, .w16 = r->w16, .tile = r->vae_tile, .to_vae_input = to_vae_input, .ctx = r,
                           .res = r->res, .req = r->req, .trace = r->trace, .trace_ctx = r->trace_ctx};
    return kiln_decode_batch_run(&d, err);
}

/* What only the denoising reads - the DiT's workspace, the text features, the step's buffers - freed before the
 * decode, which then has the memory to itself (the plan counts the two apart: estimate's max). */
static void release_denoiser(run *r) {
    kiln_backend *be = r->e->be;
    float **bufs[] = {&r->txt, &r->pooled, &r->v, &r->tmp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (*bufs[i]) be->ops->free(be, *bufs[i]);
        *bufs[i] = NULL;
    }
    kiln_flux1_dit_ws_free(be, r->ws);
    r->ws = NULL;
}

static void run_free(run *r) {
    kiln_backend *be = r->e->be;
    for (int i = 0; i < MAX_BATCH; i++) {
        kiln_tokens_free(&r->clip[i]);
        kiln_tokens_free(&r->t5[i]);
        kiln_free(r->t5_weights[i]);
    }
    release_denoiser(r);
    if (r->x) be->ops->free(be, r->x);
    kiln_free(r->sigmas);
}

static void fill_meta(run *r) {
    kiln_result *res = r->res;
    const kiln_request *q = r->req;
    res->width = q->width;
    res->height = q->height;
    res->steps = r->steps;
    res->batch = r->B;
    res->guidance = r->guidance;
    res->variant = r->e->variant;
    kiln_result_fill_ids(res, q, r->e->commit, r->e->n_requests);
}

kiln_status kiln_generate_flux1(kiln_engine *e, const kiln_request *req, kiln_trace_fn trace_fn, void *trace_ctx,
                                kiln_result **out, kiln_err *err) {
    *out = NULL;
    run r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.f = e->f1;
    r.req = req;
    r.trace = trace_fn;
    r.trace_ctx = trace_ctx;
    kiln_status s = kiln_request_begin(e, &r.clk, &r.res, err);
    if (s != KILN_OK) return s;
#define STAGE(st, call)                                                                                       \
    KILN_RUN_STAGE(s, &r.clk, req, r.res, st, (st) == KILN_STAGE_DENOISING ? r.steps : 0, call, err)

    STAGE(KILN_STAGE_INPUT_VALIDATION, validate(&r, err));
    fill_meta(&r);
    if ((s = kiln_result_alloc_arrays(r.res, r.B, r.steps, &r.sigmas, err)) != KILN_OK) goto done;
    r.res->n_steps = r.steps;
    STAGE(KILN_STAGE_TEXT_ENCODING, encode_text(&r, err));
    STAGE(KILN_STAGE_LATENT_PREPARATION, prepare_latents(&r, err));
    if (req->sigmas) /* the caller's schedule (ComfyUI's samplers) */
        STAGE(KILN_STAGE_TIMESTEP_PREPARATION,
              (memcpy(r.sigmas, req->sigmas, ((size_t)r.steps + 1) * sizeof *r.sigmas), KILN_OK));
    else
        STAGE(KILN_STAGE_TIMESTEP_PREPARATION,
              (kiln_flux2_schedule_cfg_f32(&r.f->sched, r.steps, r.N, r.sigmas), KILN_OK));
    trace(&r, "sigmas", r.sigmas, (size_t)r.steps + 1);
    r.res->sigmas_first = r.sigmas[0];
    r.res->sigmas_last_nonzero = r.sigmas[r.steps - 1];
    STAGE(KILN_STAGE_DENOISING, denoise(&r, err));
    release_denoiser(&r);
    STAGE(KILN_STAGE_DECODING, decode(&r, err));
#undef STAGE
    kiln_result_finish(r.res, &r.clk);
done:
    run_free(&r);
    return kiln_request_end(e, s, r.res, out, err);
}

kiln_status kiln_estimate_memory_flux1(kiln_engine *e, const kiln_request *req, size_t *bytes, kiln_err *err) {
    if (req->width <= 0 || req->height <= 0 || req->width % 16 || req->height % 16 || req->batch < 1 ||
        req->batch > MAX_BATCH)
        return KILN_FAIL(err, KILN_E_INVALID, "image size %dx%d batch %d: sizes must be positive multiples of 16",
                         req->width, req->height, req->batch);
    run r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.f = e->f1;
    r.B = req->batch;
    r.C = r.f->dit->in_ch;
    r.h16 = req->height / 16;
    r.w16 = req->width / 16;
    r.N = r.h16 * r.w16;
    r.L = t5_length(r.f);
    r.n_seq = req->prompts ? r.B : 1;
    /* this rank's memory, no agreement: a query one rank may make alone (generate.c's kiln_estimate_memory) */
    size_t keep, release, limit = kiln_engine_local_memory_limit(e);
    plan(&r, limit, &keep, &release);
    *bytes = (limit && keep > limit) ? release : keep;
    return KILN_OK;
}
