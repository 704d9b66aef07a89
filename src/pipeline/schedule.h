/* schedule.h - the FLUX.2 sigma schedule (empirical mu + exponential time shift), FLUX.1's (calculate_shift's mu,
 * or none for schnell) and the Euler update.
 *
 *     double sig[5];
 *     kiln_flux2_schedule(4, 512 / 16 * 512 / 16, sig);   // 1, 0.958085, 0.883982, 0.717497, 0
 *     for (k = 0; k < 4; k++) { v = DiT(x, sig[k]); kiln_euler_step(x, v, n, sig[k], sig[k + 1]); }
 *
 * Facts: spec/flux2-klein.md 4.1 (BFL sampling.py get_schedule / compute_empirical_mu, identical in diffusers,
 * ComfyUI Flux2Scheduler). Computed in double precision; callers round to f32 where the reference does.
 */
#ifndef KILN_PIPELINE_SCHEDULE_H
#define KILN_PIPELINE_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

/* How set_timesteps shifts the sigmas (scheduler/scheduler_config.json of FlowMatchEulerDiscreteScheduler). */
typedef enum kiln_shift_kind {
    KILN_SHIFT_EXPONENTIAL = 0, /* use_dynamic_shifting, time_shift_type "exponential": e^mu / (e^mu + (1/t - 1)) */
    KILN_SHIFT_LINEAR,          /* use_dynamic_shifting, time_shift_type "linear":      mu / (mu + (1/t - 1)) */
    KILN_SHIFT_STATIC,          /* use_dynamic_shifting false: shift t / (1 + (shift - 1) t), mu unused */
} kiln_shift_kind;

typedef struct kiln_sched_config {
    kiln_shift_kind kind;
    double shift; /* KILN_SHIFT_STATIC only */
    /* FLUX.1 (FluxPipeline): mu = calculate_shift(image tokens, base_image_seq_len, max_image_seq_len, base_shift,
     * max_shift), a line through (base_seq, base_shift) and (max_seq, max_shift); FLUX.2 uses the empirical mu. */
    bool flux1_mu;
    double base_seq, max_seq, base_shift, max_shift; /* 256, 4096, 0.5, 1.15 */
} kiln_sched_config;

/* klein's own scheduler (dynamic, exponential): also what kiln uses without a scheduler folder. */
kiln_sched_config kiln_sched_config_klein(void);

/* Reads scheduler_config.json (path NULL or absent: klein's). Refuses by name every key that changes the maths
 * and that kiln does not implement (shift_terminal, karras/exponential/beta sigmas, invert_sigmas,
 * stochastic_sampling, use_flow_sigmas, num_train_timesteps other than 1000, an unknown time_shift_type).
 * Errors: KILN_E_UNSUPPORTED / KILN_E_FORMAT naming the file and the key. */
kiln_status kiln_sched_config_read(const char *path, kiln_sched_config *out, kiln_err *err);

/* FLUX.1's scheduler without a scheduler_config.json (single files), as the official configs have it: [dev]
 * dynamic (exponential) shifting with calculate_shift's 256/4096/0.5/1.15; [schnell] static shift 1 (no shift). */
kiln_sched_config kiln_sched_config_flux1(bool dev);

/* scheduler_config.json for FluxPipeline (path NULL or absent: kiln_sched_config_flux1(dev)): the same keys and
 * refusals as kiln_sched_config_read, plus base_image_seq_len, max_image_seq_len, base_shift, max_shift (the
 * pipeline's defaults 256, 4096, 0.5, 1.15 when absent; max_image_seq_len must differ from base). */
kiln_status kiln_sched_config_read_flux1(const char *path, bool dev, kiln_sched_config *out, kiln_err *err);

/* The mu a pipeline uses: calculate_shift for FLUX.1 (in double, as python computes it), else the empirical mu. */
double kiln_sched_mu(const kiln_sched_config *c, int n_steps, long n_tokens);

/* mu for n_steps steps at n_tokens image tokens ((H/16)*(W/16)). */
double kiln_flux2_empirical_mu(int n_steps, long n_tokens);

/* sigmas[0..n_steps]: sigma_k = e^mu / (e^mu + (1/t_k - 1)), t_k = 1 - k/n; sigmas[0] = 1, sigmas[n] = 0.
 * n_steps >= 1 (callers validate); sigmas must hold n_steps + 1 values. */
void kiln_flux2_schedule(int n_steps, long n_tokens, double *sigmas);

/* The same schedule rounded the way the diffusers pipeline computes it, which is what the references
 * run: t_k = f32(linspace(1, 1/n, n) in double), then e^mu / (e^mu + (1/t_k - 1)) evaluated in f32
 * (numpy float32 arithmetic with e^mu rounded to f32); sigmas[n] = 0. Differs from the double schedule
 * by at most 1 ulp, but the DiT sees 1000 sigma, so the last step's velocity notices. */
void kiln_flux2_schedule_f32(int n_steps, long n_tokens, float *sigmas);
/* The same with a scheduler config (static or linear shift), rounded as numpy float32 rounds it. */
void kiln_flux2_schedule_cfg_f32(const kiln_sched_config *c, int n_steps, long n_tokens, float *sigmas);

/* A caller's schedule (kiln_request.sigmas): n >= 2 values, sigmas[0] in (0, 1], strictly decreasing, the last 0,
 * and steps (the request's) 0 or n - 1; at most max_steps + 1 values. KILN_E_INVALID naming the first bad value. */
kiln_status kiln_sigmas_check(const float *sigmas, int n, int steps, int max_steps, kiln_err *err);

/* x += (sigma_next - sigma) * v over n floats (rectified-flow Euler, f32 like the references). */
void kiln_euler_step(float *x, const float *v, size_t n, double sigma, double sigma_next);

/* Classifier-free guidance in place: v_cond = v_uncond + g * (v_cond - v_uncond) over n floats. */
void kiln_cfg_combine(float *v_cond, const float *v_uncond, size_t n, float guidance);

#endif
