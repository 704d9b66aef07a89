/* trace.h - kiln_generate with a look inside: every stage's output handed to a callback as it is produced,
 * so the golden tests can compare each stage with the official pipeline's (not a public API).
 *
 *     static void on(void *ctx, const char *name, const float *data, size_t n) { ... }
 *     kiln_generate_traced(eng, &req, on, ctx, &res, &err);
 *
 * Names (host f32, CPU backend only) and layouts, matching the golden files:
 *   "features"                [B, L, ctx]       the conditional text features of the B images
 *   "negative_features"       [B, L, ctx]       (base) the empty prompt's
 *   "sigmas"                  [steps + 1]       f32
 *   "step<k>.timestep"        [1]               sigma_k as the DiT receives it / 1000
 *   "step<k>.velocity"        [B, N, 128]       the DiT output (base: the conditional one, before CFG)
 *   "step<k>.velocity_uncond" [B, N, 128]       (base)
 *   "step<k>.latents"         [B, N, 128]       after the Euler update
 *   "latent.image"            [z, 2h, 2w]       per image, in batch order: de-normalised, unpatchified
 *                                               (the VAE's input; the golden's "latent" is all B of them)
 *   "image_float.image"       [H, W, 3]         per image: clamp(x/2 + 0.5, 0, 1) (golden "image_float")
 */
#ifndef KILN_PIPELINE_TRACE_H
#define KILN_PIPELINE_TRACE_H

#include <stddef.h>

#include "kiln.h"

typedef void (*kiln_trace_fn)(void *ctx, const char *name, const float *data, size_t n);

kiln_status kiln_generate_traced(kiln_engine *eng, const kiln_request *req, kiln_trace_fn trace, void *ctx,
                                 kiln_result **out, kiln_err *err);

#endif
