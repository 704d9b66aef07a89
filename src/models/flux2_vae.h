/* flux2_vae.h - the FLUX.2 VAE decoder (spec 3.2) and its batch-norm latent statistics (spec 3.4).
 *
 *     kiln_flux2_vae *vae;
 *     KILN_TRY(kiln_flux2_vae_load(ck, &vae, &err));            // diffusers or BFL (ldm) names
 *     // z: [z_ch, h, w] latent of ONE image (after BN de-normalisation and unpatchify), backend memory
 *     KILN_TRY(kiln_flux2_vae_decode(vae, be, z, h, w, rgb_f32, &err));   // -> [3, 8h, 8w], about [-1, 1]
 *     kiln_flux2_vae_free(vae);                                   // ck must outlive vae
 *
 * Channel widths, the number of levels, ResNets per level and which levels upsample are read from the
 * weights' shapes, so the tiny test VAE and the real one (128/256/512/512, 3 ResNets per level) run the same
 * code. One image per call: decoding is memory-bound on the finest levels, and one image at a time keeps the
 * peak at ~4 activations of the finest level instead of 4 x batch.
 */
#ifndef KILN_MODELS_FLUX2_VAE_H
#define KILN_MODELS_FLUX2_VAE_H

#include <stdbool.h>

#include "base/status.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/weights.h"

#define KILN_VAE_MAX_LEVELS 6
#define KILN_VAE_MAX_RES 4

typedef struct kiln_vae_resnet {
    int cin, cout;
    kiln_tensor n1_g, n1_b;   /* f32 [cin]   GroupNorm 1 */
    kiln_tensor conv1_w;      /* [cout, cin, 3, 3] */
    kiln_tensor conv1_b;      /* f32 [cout] */
    kiln_tensor n2_g, n2_b;   /* f32 [cout] */
    kiln_tensor conv2_w;      /* [cout, cout, 3, 3] */
    kiln_tensor conv2_b;      /* f32 [cout] */
    kiln_tensor sc_w, sc_b;   /* [cout, cin, 1, 1], f32 [cout]: 1x1 shortcut when cin != cout (else data NULL) */
} kiln_vae_resnet;

typedef struct kiln_vae_attn {
    int c;
    kiln_tensor n_g, n_b;     /* f32 [C] GroupNorm */
    kiln_tensor q_w, k_w, v_w, o_w; /* [C, C] (diffusers linear or BFL 1x1 conv viewed as [C, C]) */
    kiln_tensor q_b, k_b, v_b, o_b; /* f32 [C] */
} kiln_vae_attn;

typedef struct kiln_vae_up_level {
    int n_res;
    kiln_vae_resnet res[KILN_VAE_MAX_RES];
    bool upsample;
    kiln_tensor up_w;         /* [C, C, 3, 3] conv after nearest 2x */
    kiln_tensor up_b;         /* f32 [C] */
} kiln_vae_up_level;

typedef struct kiln_flux2_vae {
    bool bfl_names;
    bool flux1;               /* FLUX.1's AutoencoderKL: no batch norm, (post_)quant_conv optional (absent in
                                 FLUX.1's file), latents scaled and shifted instead (flux1_vae.h) */
    double scaling_factor, shift_factor; /* FLUX.1: 0.3611, 0.1159 (vae/config.json); FLUX.2: unused */
    int z_ch;                 /* 32 */
    int groups;               /* 32 */
    float gn_eps, bn_eps;     /* 1e-6, 1e-4 */
    int n_levels;             /* decoder up levels, coarsest first (diffusers up_blocks order) */
    kiln_tensor pq_w, pq_b;   /* post_quant_conv [z, z] (1x1), f32 [z]; FLUX.1: data NULL when absent */
    kiln_tensor conv_in_w;    /* [Cmid, z, 3, 3] */
    kiln_tensor conv_in_b;
    kiln_vae_resnet mid_res[2];
    kiln_vae_attn mid_attn;
    kiln_vae_up_level up[KILN_VAE_MAX_LEVELS];
    kiln_tensor norm_out_g, norm_out_b; /* f32 [C0] */
    kiln_tensor conv_out_w;   /* [3, C0, 3, 3] */
    kiln_tensor conv_out_b;
    kiln_tensor bn_mean, bn_var; /* f32 [4 z_ch] running statistics of the patchified latent */

    /* Encoder (image editing / img2img; spec 3.3). Optional: has_encoder is false for decoder-only files. */
    bool has_encoder;
    int n_down;                  /* levels, finest first */
    kiln_tensor enc_in_w;        /* [C0, 3, 3, 3] */
    kiln_tensor enc_in_b;
    kiln_vae_up_level down[KILN_VAE_MAX_LEVELS]; /* .upsample = "downsamples after this level" (stride 2) */
    kiln_vae_resnet enc_mid_res[2];
    kiln_vae_attn enc_mid_attn;
    kiln_tensor enc_norm_g, enc_norm_b; /* f32 [Cmid] */
    kiln_tensor enc_out_w;       /* [2 z, Cmid, 3, 3] (mean | logvar) */
    kiln_tensor enc_out_b;
    kiln_tensor qc_w, qc_b;      /* quant_conv [2z, 2z] (1x1), f32 [2z]; FLUX.1: data NULL when absent */
    kiln_wset ws;
} kiln_flux2_vae;

kiln_status kiln_flux2_vae_load(const kiln_st_file *ck, kiln_flux2_vae **out, kiln_err *err);
/* The same with vae/config.json (NULL: the FLUX.2 defaults), read as AutoencoderKLFlux2 reads it:
 * norm_num_groups, batch_norm_eps; the structure (levels, layers_per_block, latent_channels) must agree with the
 * weights. Refused by name: act_fn other than silu, block types other than Down/UpDecoderBlock2D, patch_size
 * other than [2, 2], use_post_quant_conv / use_quant_conv / mid_block_add_attention false, in/out_channels other
 * than 3. GroupNorm eps is not a config key: diffusers' Encoder/Decoder fix it at 1e-6. */
kiln_status kiln_flux2_vae_load_config(const kiln_st_file *ck, const char *config_json, kiln_flux2_vae **out,
                                       kiln_err *err);
void kiln_flux2_vae_free(kiln_flux2_vae *m);

/* Bytes of activations a decode of an h x w latent allocates, in dt (kiln_backend_act_dtype); and an encode of an
 * H x W image (0 without an encoder). */
size_t kiln_flux2_vae_workspace(const kiln_flux2_vae *m, int h, int w, kiln_dtype dt);
size_t kiln_flux2_vae_encode_workspace(const kiln_flux2_vae *m, int H, int W, kiln_dtype dt);

/* z [z_ch, h, w] -> img [3, H, W] with H = h * 2^(levels that upsample). Backend memory both. */
kiln_status kiln_flux2_vae_decode(const kiln_flux2_vae *m, kiln_backend *be, const float *z, int h, int w,
                                  float *img, kiln_err *err);
/* img [3, H, W] in [-1, 1] -> mean [z_ch, H/8, W/8] (the posterior mean: the references' "argmax").
 * KILN_E_UNSUPPORTED when the file has no encoder; H and W multiples of 8. */
kiln_status kiln_flux2_vae_encode(const kiln_flux2_vae *m, kiln_backend *be, const float *img, int H, int W,
                                  float *mean, kiln_err *err);

/* The decoder's upscale factor (8 for FLUX.2). */
int kiln_flux2_vae_scale(const kiln_flux2_vae *m);

#endif
