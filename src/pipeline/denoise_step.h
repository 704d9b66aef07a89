/* denoise_step.h - one denoising step of kiln_generate (DiT forward over the batch, CFG, Euler update) as a
 * body that kiln_backend_graph_run can capture and replay as one CUDA graph (compute/graph.h).
 *
 * A replayed graph repeats the captured launches exactly, so nothing that changes from step to step may be a
 * host scalar inside the body: the timestep (as the DiT's sinusoidal embedding) and the Euler dt live in
 * backend memory that kiln_denoise_step_set uploads BEFORE each run. The body itself only launches ops.
 *
 *     kiln_denoise_step st = {dit, ws, B, N, cfg, guidance, x, xin, v, tmp, dt};   // ws: set_text done
 *     for each step k:
 *         KILN_TRY(kiln_denoise_step_set(&st, be, t_k, sigma_{k+1} - sigma_k, &err));
 *         KILN_TRY(kiln_denoise_step_run(&st, be, &err));       // or _forward, look, _update (tracing)
 */
#ifndef KILN_PIPELINE_DENOISE_STEP_H
#define KILN_PIPELINE_DENOISE_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "compute/ops.h"
#include "models/flux2_dit.h"

typedef struct kiln_denoise_step {
    const kiln_flux2_dit *dit;
    kiln_flux2_dit_ws *ws; /* kiln_flux2_dit_set_text already done for this request */
    int B, N;              /* images, image tokens per image */
    bool cfg;              /* base model: the DiT batch is 2B (conditional, then unconditional), combined by CFG */
    float guidance;        /* CFG scale: constant per request, so it is part of the graph key */
    float *x;              /* backend [B*N, 128] latents, updated in place */
    float *xin;            /* backend [2B*N, 128] DiT input (cfg only: x twice) */
    float *v;              /* backend [Bd*N, 128] velocity (cfg: conditional, then unconditional) */
    float *tmp;            /* backend [B*N, 128] scratch */
    float *dt;             /* backend [128]: this step's sigma_next - sigma in every lane (the Euler gate) */
    /* Editing: reference tokens per sample (0: none). xin is then [Bd*(N+n_ref), 128] with each sample's
     * reference rows already filled, the DiT writes vfull [Bd*(N+n_ref), 128] and the first N rows of each
     * sample are copied to v (the pipeline's noise_pred[:, :N]). */
    int n_ref;
    float *vfull;
} kiln_denoise_step;

/* This step's inputs into backend memory: the DiT timestep embedding of t (kiln_flux2_timestep_value) and dt.
 * Uploads: call outside the body. */
kiln_status kiln_denoise_step_set(kiln_denoise_step *s, kiln_backend *be, float t, float dt, kiln_err *err);

/* The two halves of the body, for a caller that looks at the velocity in between (tracing): the DiT forward
 * (v), then CFG and the Euler update (x). Launch ops only. */
kiln_status kiln_denoise_step_forward(kiln_denoise_step *s, kiln_backend *be, kiln_err *err);
kiln_status kiln_denoise_step_update(kiln_denoise_step *s, kiln_backend *be, kiln_err *err);

/* forward + update through kiln_backend_graph_run under kiln_denoise_step_key (CPU: simply runs them). */
kiln_status kiln_denoise_step_run(kiln_denoise_step *s, kiln_backend *be, kiln_err *err);

/* The graph key: shape (B, N, text tokens, cfg), guidance, the model and every buffer address the body
 * touches - a graph bakes in pointers, and a later request's buffers may lie elsewhere. */
uint64_t kiln_denoise_step_key(const kiln_denoise_step *s);

#endif
