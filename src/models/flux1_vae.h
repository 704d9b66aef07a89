/* flux1_vae.h - the FLUX.1 VAE (diffusers AutoencoderKL as FLUX.1's vae/config.json builds it; BFL ae.safetensors).
 *
 *     kiln_flux2_vae *vae;
 *     KILN_TRY(kiln_flux1_vae_load_config(ck, "vae/config.json" or NULL, &vae, &err));
 *     kiln_flux1_vae_unscale(vae, z, n);                    // FluxPipeline: z / scaling_factor + shift_factor
 *     KILN_TRY(kiln_flux2_vae_decode(vae, be, z, h, w, rgb, &err));   // the same decoder code as FLUX.2
 *
 * The network is FLUX.2's VAE without its latent batch norm and, in FLUX.1's config (use_quant_conv and
 * use_post_quant_conv false), without the two 1x1 convs: one struct and one decode serve both (flux2_vae.c).
 * 16 latent channels in the real model (read from the weights). FluxPipeline un-normalises with
 * latents / scaling_factor + shift_factor before vae.decode, in f32.
 */
#ifndef KILN_MODELS_FLUX1_VAE_H
#define KILN_MODELS_FLUX1_VAE_H

#include "models/flux2_vae.h"

/* FLUX.1's scaling_factor and shift_factor, used without a config (a single ae.safetensors). */
#define KILN_FLUX1_VAE_SCALING 0.3611
#define KILN_FLUX1_VAE_SHIFT 0.1159

/* config_json NULL: FLUX.1's values. Read as AutoencoderKL reads them: norm_num_groups, scaling_factor,
 * shift_factor (null refused: FluxPipeline adds it), use_quant_conv / use_post_quant_conv (default true: must agree
 * with whether the weights have the convs); the structure (levels, layers_per_block, latent_channels) must agree
 * with the weights. Refused by name: act_fn other than silu, block types other than Down/UpDecoderBlock2D,
 * mid_block_add_attention false, in/out_channels other than 3. A file with FLUX.2's bn.running_mean is refused
 * (it is a FLUX.2 VAE). Errors: KILN_E_FORMAT / KILN_E_UNSUPPORTED / KILN_E_NOT_FOUND naming the key or tensor. */
kiln_status kiln_flux1_vae_load_config(const kiln_st_file *ck, const char *config_json, kiln_flux2_vae **out,
                                       kiln_err *err);

/* z[i] = z[i] / scaling_factor + shift_factor over n floats, in f32 as torch computes it. */
void kiln_flux1_vae_unscale(const kiln_flux2_vae *m, float *z, size_t n);

#endif
