/* latent.h - moving between the DiT's token space and the VAE's latent image (spec 3.4, 4.3, 4.4).
 *
 * The DiT works on tokens [N, 128], N = h*w (h = H/16, w = W/16), token index y*w + x. Token channel c*4 +
 * pi*2 + pj is latent channel c at pixel (2y+pi, 2x+pj), after batch-norm normalisation with the VAE's
 * running statistics (eps 1e-4). One image at a time; batches call these per image.
 *
 *     kiln_grid_to_tokens(noise_grid, 128, h, w, tokens);        // randn [128,h,w] -> [N,128]
 *     ... denoise ...
 *     kiln_tokens_to_grid(tokens, 128, h, w, grid);              // [N,128] -> [128,h,w]
 *     kiln_latent_bn_denormalize(grid, 128, h * w, mean, var, 1e-4f);
 *     kiln_latent_unpatchify(grid, 32, h, w, z);                 // [128,h,w] -> [32,2h,2w]
 *     ... VAE decode to x [3,H,W] in [-1,1] ...
 *     kiln_image_from_vae(x, H, W, rgb);                         // -> RGB8 HWC, diffusers rounding
 */
#ifndef KILN_MODELS_LATENT_H
#define KILN_MODELS_LATENT_H

#include <stdint.h>

/* grid [C, h, w] <-> tokens [h*w, C]. */
void kiln_grid_to_tokens(const float *grid, int c, int h, int w, float *tokens);
void kiln_tokens_to_grid(const float *tokens, int c, int h, int w, float *grid);

/* x[c, i] = (x - mean[c]) / sqrt(var[c] + eps) and its inverse, over [C, n]. */
void kiln_latent_bn_normalize(float *x, int c, int64_t n, const float *mean, const float *var, float eps);
void kiln_latent_bn_denormalize(float *x, int c, int64_t n, const float *mean, const float *var, float eps);

/* z [C, 2h, 2w] <-> zp [4C, h, w], zp[c*4 + pi*2 + pj, i, j] = z[c, 2i+pi, 2j+pj]. */
void kiln_latent_patchify(const float *z, int c, int h, int w, float *zp);
void kiln_latent_unpatchify(const float *zp, int c, int h, int w, float *z);

/* VAE output x [3, H, W] (about [-1, 1]) -> RGB8 [H, W, 3]: round(clamp(x/2 + 0.5, 0, 1) * 255) as diffusers'
 * VaeImageProcessor (round half to even, like torch.round). */
void kiln_image_from_vae(const float *x, int height, int width, uint8_t *rgb);
/* The same before the u8 step: [H, W, 3] floats clamp(x/2 + 0.5, 0, 1), diffusers' output_type="np". */
void kiln_image_unit_from_vae(const float *x, int height, int width, float *hwc);
/* RGB8 -> [3, H, W] in [-1, 1]: 2 * (p / 255) - 1 (encoder input, spec 3.3). */
void kiln_image_to_vae(const uint8_t *rgb, int height, int width, float *x);

#endif
