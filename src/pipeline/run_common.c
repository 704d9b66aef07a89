/* run_common.c - the parts of a request every model family shares (run_common.h). */
#include "pipeline/run_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "models/latent.h"

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
