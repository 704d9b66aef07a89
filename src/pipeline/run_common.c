/* run_common.c - the parts of a request every model family shares (run_common.h). */
#include "pipeline/run_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "models/latent.h"
#include "pipeline/engine_internal.h"
#include "pipeline/memory.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool kiln_stage_report(const kiln_stage_clock *c, const kiln_request *q, int step, int n_steps, double eta) {
    if (!q->progress) return true;
    kiln_progress p = {c->stage, step, n_steps, kiln_clock_s() - c->t0, eta, NULL, 0, 0};
    return q->progress(q->progress_ctx, &p);
}

kiln_status kiln_stage_begin(kiln_stage_clock *c, const kiln_request *q, kiln_stage s, int n_steps, kiln_err *err) {
    c->stage = s;
    c->stage_t0 = kiln_clock_s();
    c->stage_cpu0 = cpu_s();
    if (!kiln_stage_report(c, q, 0, n_steps, -1.0))
        return KILN_FAIL(err, KILN_E_CANCELLED, "cancelled during %s", kiln_stage_name(s));
    return KILN_OK;
}

void kiln_stage_end(const kiln_stage_clock *c, kiln_result *res) {
    res->stage_ms[c->stage] += (kiln_clock_s() - c->stage_t0) * 1e3;
    res->stage_cpu_ms[c->stage] += (cpu_s() - c->stage_cpu0) * 1e3;
}

kiln_status kiln_request_begin(kiln_engine *e, kiln_stage_clock *clk, kiln_result **res, kiln_err *err) {
    pthread_mutex_lock(&e->lock);
    e->n_requests++;
    kiln_mem_reset_peak();
    e->act_base = e->be->alloc_peak = e->be->alloc_live; /* what the request allocates is counted from here */
    e->act_planned = 0;
    clk->t0 = kiln_clock_s();
    *res = kiln_calloc(1, sizeof **res);
    if (!*res) {
        pthread_mutex_unlock(&e->lock);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    (*res)->timestamp = kiln_clock_wall_s();
    return KILN_OK;
}

kiln_status kiln_result_alloc_arrays(kiln_result *res, int n_images, int steps, float **sigmas, kiln_err *err) {
    res->images = kiln_calloc((size_t)n_images, sizeof *res->images);
    res->step_ms = kiln_calloc((size_t)steps, sizeof *res->step_ms);
    *sigmas = kiln_malloc(((size_t)steps + 1) * sizeof **sigmas);
    if (!res->images || !res->step_ms || !*sigmas) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    return KILN_OK;
}

void kiln_result_finish(kiln_result *res, const kiln_stage_clock *clk) {
    res->total_ms = (kiln_clock_s() - clk->t0) * 1e3;
    res->peak_memory_bytes = kiln_mem_peak_rss();
}

kiln_status kiln_request_end(kiln_engine *e, kiln_status s, kiln_result *res, kiln_result **out, kiln_err *err) {
    size_t peak = e->be->alloc_peak > e->act_base ? e->be->alloc_peak - e->act_base : 0;
    const size_t planned = e->act_planned;
    pthread_mutex_unlock(&e->lock);
    if (s == KILN_OK) {
        res->act_peak_bytes = peak;
        res->act_planned_bytes = planned;
        /* A plan below the peak sizes a GPU's arena too small (the rest is cudaMalloc'd, slower) and lets through
         * a request a memory limit should have refused: the tests run with KILN_STRICT_PLAN=1, which makes that a
         * failure, so every request any test makes checks the plan; elsewhere it is a line in the log. */
        if (peak > planned) {
            const char *strict = getenv("KILN_STRICT_PLAN");
            if (strict && strcmp(strict, "0"))
                s = KILN_FAIL(err, KILN_E_INTERNAL, "memory plan: the activations peaked at %zu bytes, above the "
                              "%zu bytes the plan counted (KILN_STRICT_PLAN)", peak, planned);
            else
                log_warn("activation memory peaked at %.2f MB, above the %.2f MB the memory plan counted",
                         peak / 1e6, planned / 1e6);
        } else {
            log_debug("activation memory peaked at %.2f MB of the %.2f MB planned", peak / 1e6, planned / 1e6);
        }
    }
    if (s != KILN_OK) {
        kiln_result_free(res);
        return s;
    }
    *out = res;
    return KILN_OK;
}

kiln_status kiln_request_each_prompt(const kiln_request *q, int B, kiln_prompt_fn fn, void *ctx, int *n_seq,
                                     kiln_err *err) {
    int n_prompts = q->prompts ? B : 1;
    for (int i = 0; i < n_prompts; i++) {
        const char *p = q->prompts ? q->prompts[i] : q->prompt;
        if (!p) return KILN_FAIL(err, KILN_E_INVALID, "prompt %d of the batch is missing", i);
        char what[32];
        if (q->prompts) snprintf(what, sizeof what, "prompt %d", i);
        else snprintf(what, sizeof what, "prompt");
        KILN_TRY(fn(ctx, what, p, i, err));
        *n_seq = i + 1;
    }
    return KILN_OK;
}

kiln_status kiln_request_plan_memory(kiln_engine *e, const kiln_mem_limit *lim, size_t keep, size_t release,
                                     size_t weights, const char *encoder, int W, int H, int B, bool *release_te,
                                     kiln_err *err) {
    const size_t limit = lim->bytes;
    bool rel = e->cfg.te_policy == KILN_TE_RELEASE;
    if (limit && (rel ? release : keep) > limit) {
        char where[64];
        if (release > limit || e->cfg.te_policy == KILN_TE_KEEP)
            return KILN_FAIL(err, KILN_E_LIMIT, "not enough memory: %dx%d x %d image(s) needs about %.2f GB (%.2f GB "
                             "with %s released before the DiT), %.2f GB is available%s; try a smaller size or batch",
                             W, H, B, keep / 1e9, release / 1e9, encoder, limit / 1e9,
                             kiln_mem_limit_where(lim, where, sizeof where));
        rel = true;
        log_info("memory is tight (%.2f GB needed, %.2f GB usable): releasing %s after encoding", keep / 1e9,
                 limit / 1e9, encoder);
    }
    *release_te = rel;
    /* The backend sizes its activation memory from this plan (CUDA: the arena; compute/ops.h reserve). */
    e->act_planned = keep > weights ? keep - weights : 0;
    return e->be->ops->reserve(e->be, e->act_planned, err);
}

kiln_status kiln_request_plan_more(kiln_engine *e, size_t bytes, kiln_err *err) {
    if (!bytes) return KILN_OK;
    e->act_planned += bytes;
    return e->be->ops->reserve(e->be, e->act_planned, err);
}

void kiln_result_add_warning(kiln_result *res, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_info("%s", line);
    size_t have = res->warnings ? strlen(res->warnings) : 0, add = strlen(line);
    char *w = kiln_realloc(res->warnings, have + add + 2);
    if (!w) return;
    memcpy(w + have, line, add);
    w[have + add] = '\n';
    w[have + add + 1] = 0;
    res->warnings = w;
}

void kiln_result_fill_ids(kiln_result *res, const kiln_request *q, const char *commit, uint64_t n_requests) {
    snprintf(res->prompt_used, sizeof res->prompt_used, "%s", q->prompt ? q->prompt : "");
    snprintf(res->tag, sizeof res->tag, "%s", q->tag ? q->tag : "");
    snprintf(res->commit, sizeof res->commit, "%s", commit);
    if (q->request_id) snprintf(res->request_id, sizeof res->request_id, "%s", q->request_id);
    else snprintf(res->request_id, sizeof res->request_id, "kiln-%llx-%llu", (unsigned long long)(res->timestamp * 1e3),
                  (unsigned long long)n_requests);
}

uint64_t kiln_request_image_seed(const kiln_request *q, int i) {
    return q->seeds ? q->seeds[i] : q->seed + (uint64_t)i;
}

kiln_status kiln_result_store_image(kiln_result *res, const kiln_request *q, int i, const float *pix, int H, int W,
                                    kiln_trace_fn trace, void *trace_ctx, kiln_err *err) {
    kiln_image *im = &res->images[i];
    im->width = W;
    im->height = H;
    im->seed = kiln_request_image_seed(q, i);
    im->pixels = kiln_malloc((size_t)3 * H * W);
    if (!im->pixels) return KILN_FAIL(err, KILN_E_NOMEM, "decoding: out of memory");
    kiln_image_from_vae(pix, H, W, im->pixels);
    if (trace) {
        size_t np = (size_t)H * W;
        float *hwc = kiln_malloc(np * 3 * sizeof(float));
        if (hwc) {
            kiln_image_unit_from_vae(pix, H, W, hwc);
            trace(trace_ctx, "image_float.image", hwc, np * 3);
            kiln_free(hwc);
        }
    }
    res->n_images = i + 1;
    return KILN_OK;
}
