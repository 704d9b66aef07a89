/* run_common.h - what every model family's request (generate.c, generate_flux1.c) does the same way: the stage
 * clock and its progress reports, the result's warnings and ids, and storing a decoded image.
 *
 *     kiln_stage_clock clk = {.t0 = kiln_clock_s()};
 *     KILN_TRY(kiln_stage_begin(&clk, req, KILN_STAGE_DENOISING, n_steps, err));   (cancellable)
 *     ... kiln_stage_report(&clk, req, step, n_steps, eta) after each step ...
 *     kiln_stage_end(&clk, res);                                                     (wall and CPU ms)
 */
#ifndef KILN_PIPELINE_RUN_COMMON_H
#define KILN_PIPELINE_RUN_COMMON_H

#include "kiln.h"
#include "pipeline/trace.h"

typedef struct kiln_stage_clock {
    double t0;                  /* the request's start (kiln_clock_s) */
    double stage_t0, stage_cpu0; /* the running stage's start: wall and process CPU seconds */
    kiln_stage stage;
} kiln_stage_clock;

/* The request's progress callback for the running stage; true when there is none. false: the caller cancels. */
bool kiln_stage_report(const kiln_stage_clock *c, const kiln_request *q, int step, int n_steps, double eta);
/* Starts stage s and reports it (step 0 of n_steps: the denoising steps, 0 for other stages); a callback that
 * says stop gives KILN_E_CANCELLED naming the stage. */
kiln_status kiln_stage_begin(kiln_stage_clock *c, const kiln_request *q, kiln_stage s, int n_steps, kiln_err *err);
/* Adds the running stage's wall and CPU time to res. */
void kiln_stage_end(const kiln_stage_clock *c, kiln_result *res);

/* Appends one line to res->warnings (kiln.h) and logs it; out of memory: the warning stays in the log only. */
void kiln_result_add_warning(kiln_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The result's prompt, tag, commit and request id (the request's, else one made from the time and count). */
void kiln_result_fill_ids(kiln_result *res, const kiln_request *q, const char *commit, uint64_t n_requests);
/* Image i's seed: the request's per-image seeds, else seed + i. */
uint64_t kiln_request_image_seed(const kiln_request *q, int i);
/* Stores image i of res from the VAE's [3, H, W] output pix (diffusers' rounding), its seed, and, when
 * tracing, its [H, W, 3] float image as "image_float.image"; res->n_images becomes i + 1. */
kiln_status kiln_result_store_image(kiln_result *res, const kiln_request *q, int i, const float *pix, int H, int W,
                                    kiln_trace_fn trace, void *trace_ctx, kiln_err *err);

#endif
