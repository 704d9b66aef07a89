/* comfy_sigmas.h - ComfyUI's sigma schedules for flow models (comfy/model_sampling.py ModelSamplingFlux,
 * comfy/samplers.py simple_scheduler / normal_scheduler, BasicScheduler's and KSampler's denoise), in float32
 * as torch computes them, so a graph samples at exactly ComfyUI's sigmas.
 *
 *     float s[5];
 *     int n = kiln_comfy_sigmas(1.15, "simple", 4, 1.0, s, 5);  // FLUX.1 [dev]'s default shift: 5 values
 *
 * Facts (read from ComfyUI for facts only): the model keeps a table sigma_i = flux_time_shift(shift, 1, t_i),
 * t_i = (i + 1) / 10000 (torch.arange / 10000 in float32), flux_time_shift(mu, 1, t) = e^mu / (e^mu + (1/t - 1));
 * torch evaluates `python_float / tensor` as reciprocal(tensor) * python_float. The shift is the model's
 * (FLUX.1 [dev] 1.15, [schnell] 1.0, FLUX.2 2.02) or ModelSamplingFlux's line through (256, base_shift) and
 * (4096, max_shift) at width * height / 256 tokens.
 */
#ifndef KILN_PIPELINE_COMFY_SIGMAS_H
#define KILN_PIPELINE_COMFY_SIGMAS_H

#include <stdbool.h>

#define KILN_COMFY_TIMESTEPS 10000

/* ModelSamplingFlux.sigma(t) in float32. */
float kiln_comfy_flux_sigma(double shift, float t);

/* ModelSamplingFlux node's shift for an image of width x height. */
double kiln_comfy_flux_shift(double max_shift, double base_shift, int width, int height);

/* true for the scheduler names kiln computes ("simple", "normal", "sgm_uniform"). */
bool kiln_comfy_scheduler_known(const char *name);

/* The sigmas BasicScheduler (and KSampler, whose rule is the same for any denoise ComfyUI treats as < 1) gives:
 * with denoise < 1, int(steps / denoise) total steps of which the last steps + 1 sigmas are kept; denoise <= 0
 * gives none (returns 0). Writes at most cap values; returns how many there are (steps + 1 at most), or -1 for
 * an unknown scheduler or a schedule longer than cap. */
int kiln_comfy_sigmas(double shift, const char *scheduler, int steps, double denoise, float *out, int cap);

/* Flux2Scheduler's sigmas (comfy_extras/nodes_flux.py get_schedule): steps + 1 values, mu the empirical mu of
 * round(width * height / 256) tokens (Python's round, half to even), t = torch.linspace(1, 0, steps + 1) in
 * float32, each shifted as kiln_comfy_flux_sigma shifts it. Returns steps + 1, or -1 when cap is too small. */
int kiln_comfy_flux2_sigmas(int steps, int width, int height, float *out, int cap);

#endif
