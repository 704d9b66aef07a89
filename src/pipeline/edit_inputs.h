/* edit_inputs.h - the image inputs of a FLUX.2 request (reference images, the img2img init image) turned into
 * DiT tokens, and the img2img start step. Used by generate.c; the preparation of the pixels is ref_image.h.
 *
 *     float *tok = kiln_malloc(h16 * w16 * 128 * sizeof(float));
 *     KILN_TRY(kiln_edit_encode_tokens(vae, be, rgb, W, H, tok, &err));   // [h16*w16, 128] host
 *     int k0 = kiln_img2img_start(steps, strength);                      // first step that runs
 */
#ifndef KILN_PIPELINE_EDIT_INPUTS_H
#define KILN_PIPELINE_EDIT_INPUTS_H

#include <stdint.h>

#include "base/status.h"
#include "compute/ops.h"
#include "models/flux2_vae.h"

/* RGB8 [H, W, 3] (W, H multiples of 16) -> VAE encoder posterior mean (the pipeline's sample_mode "argmax")
 * -> patchify 2x2 -> BatchNorm-normalise with the VAE's running statistics -> tokens [H/16 * W/16, 128],
 * row-major, in host memory: Flux2KleinPipeline._encode_vae_image then _pack_latents. KILN_E_UNSUPPORTED
 * when the VAE file has no encoder; KILN_E_NOMEM. */
kiln_status kiln_edit_encode_tokens(const kiln_flux2_vae *vae, kiln_backend *be, const uint8_t *rgb, int W, int H,
                                    float *tokens, kiln_err *err);

/* diffusers' get_timesteps (Flux2KleinInpaintPipeline, FluxImg2ImgPipeline): init = min(steps * strength, steps)
 * in double, t_start = int(max(steps - init, 0)). Steps t_start..steps-1 run. */
int kiln_img2img_start(int steps, double strength);

#endif
