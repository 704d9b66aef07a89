/* run_common.h - what every model family's request (generate.c, generate_flux1.c) does the same way: the request's
 * frame (the engine's lock, the result, its totals), the stage clock and its progress reports, the batch's prompts,
 * the memory plan's text-encoder decision, the result's warnings and ids, and storing a decoded image.
 *
 *     kiln_status s = kiln_request_begin(e, &r.clk, &r.res, err);          (locks e; r.res allocated)
 *     if (s != KILN_OK) return s;
 *     KILN_RUN_STAGE(s, &r.clk, req, r.res, KILN_STAGE_DENOISING, n_steps, denoise(&r, err), err);
 *     ...      (inside: kiln_stage_report(&r.clk, req, step, n_steps, eta) after each step; cancellable)
 *     kiln_result_finish(r.res, &r.clk);                                   (total time, peak memory)
 * done:
 *     ... free the run ...
 *     return kiln_request_end(e, s, r.res, out, err);                           (unlocks e; r.res to *out or freed)
 */
#ifndef KILN_PIPELINE_RUN_COMMON_H
#define KILN_PIPELINE_RUN_COMMON_H

#include "kiln.h"
#include "pipeline/mem_agree.h"
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

/* One timed stage of a request function: begins stage st on clock clk (reported; a progress callback that says
 * stop cancels), evaluates call, and ends the stage (its times into res) whatever call returned. A failure leaves
 * its status in s and jumps to the function's `done:` label, where the run is freed. n_steps: what the denoising
 * stage reports as its step count, 0 for the other stages (kiln_stage_begin). */
#define KILN_RUN_STAGE(s, clk, req, res, st, n_steps, call, err)                                              \
    do {                                                                                                      \
        if (((s) = kiln_stage_begin((clk), (req), (st), (n_steps), (err))) != KILN_OK) goto done;             \
        (s) = (call);                                                                                         \
        kiln_stage_end((clk), (res));                                                                         \
        if ((s) != KILN_OK) goto done;                                                                        \
    } while (0)

/* Starts a request on engine e: takes the engine's lock (its models serve one request at a time), counts the
 * request, resets the process's peak-memory mark, starts clk and allocates *res with its timestamp. The lock is
 * held until kiln_request_end. Out of memory: KILN_E_NOMEM with the lock released again and *res NULL. */
kiln_status kiln_request_begin(kiln_engine *e, kiln_stage_clock *clk, kiln_result **res, kiln_err *err);
/* Allocates res's n_images images and steps step times (kiln_result_free frees them) and *sigmas, the run's
 * schedule of steps + 1 values (the caller frees it, also on failure). Out of memory: KILN_E_NOMEM. */
kiln_status kiln_result_alloc_arrays(kiln_result *res, int n_images, int steps, float **sigmas, kiln_err *err);
/* Once every stage ran: the request's total wall time (from clk's start) and peak memory into res. */
void kiln_result_finish(kiln_result *res, const kiln_stage_clock *clk);
/* Ends a request started with kiln_request_begin, after the caller freed its run: releases the engine's lock, then
 * hands res to *out when s is KILN_OK, else frees it (*out stays NULL). Returns s. A request that ran records its
 * activations' peak beside the memory plan's figure (kiln_result.act_peak_bytes); a peak above the plan is logged,
 * and with KILN_STRICT_PLAN=1 (the tests) fails the request, KILN_E_INTERNAL. */
kiln_status kiln_request_end(kiln_engine *e, kiln_status s, kiln_result *res, kiln_result **out, kiln_err *err);

/* One prompt of the batch: i its index, what its name in messages ("prompt 2", or "prompt" when the request has
 * one prompt for every image). */
typedef kiln_status (*kiln_prompt_fn)(void *ctx, const char *what, const char *prompt, int i, kiln_err *err);
/* Calls fn for each prompt of a batch of B images: the request's per-image prompts (B of them), else its one
 * prompt; *n_seq counts the prompts done. A missing per-image prompt: KILN_E_INVALID; fn's error stops the loop. */
kiln_status kiln_request_each_prompt(const kiln_request *q, int B, kiln_prompt_fn fn, void *ctx, int *n_seq,
                                     kiln_err *err);

/* The memory plan's last word on a W x H request of B images, from its estimate: keep bytes with every model
 * resident, release bytes with the text encoder (named `encoder` in messages) released before the DiT runs, of
 * which weights are the models' own. *release_te: the engine's te_policy, or forced when only the release fits the
 * limit lim; neither fits (or the policy keeps the encoder): KILN_E_LIMIT naming the sizes and the tightest rank.
 * Then the backend reserves the activations' share, keep - weights (compute/ops.h reserve), and its error is
 * returned (*release_te is set before). */
kiln_status kiln_request_plan_memory(kiln_engine *e, const kiln_mem_limit *lim, size_t keep, size_t release,
                                     size_t weights, const char *encoder, int W, int H, int B, bool *release_te,
                                     kiln_err *err);

/* Adds bytes to the plan's activations (a need found after kiln_request_plan_memory: the request's LoRA adapters'
 * intermediates, once they are attached) and reserves again. */
kiln_status kiln_request_plan_more(kiln_engine *e, size_t bytes, kiln_err *err);

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
