/* flux1_dit.h - the FLUX.1 [dev] / [schnell] diffusion transformer (diffusers FluxTransformer2DModel): x and
 * context embedders, time_text_embed (timestep + guidance (dev only) + CLIP pooled vector), double-stream
 * blocks with per-block AdaLayerNormZero, single-stream blocks with AdaLayerNormZeroSingle, 3-axis interleaved
 * RoPE (theta 10000), AdaLayerNormContinuous norm_out, proj_out. Every linear layer has a bias.
 *
 *     kiln_flux1_dit *dit;
 *     KILN_TRY(kiln_flux1_dit_load(ck, config_json_or_NULL, &dit, &err));  // diffusers names
 *     kiln_flux1_dit_ws *ws;
 *     KILN_TRY(kiln_flux1_dit_ws_create(dit, be, batch, n_txt, h, w, &ws, &err));
 *     for each step: KILN_TRY(kiln_flux1_dit_forward(dit, be, ws, x, txt, pooled, sigma, guidance, v, &err));
 *     kiln_flux1_dit_ws_free(be, ws); kiln_flux1_dit_free(dit);             // ck must outlive dit
 *
 * Differences from FLUX.2 that matter for exactness: the modulation is per block and per sample (the pooled
 * CLIP vector differs between prompts), GELU(tanh) MLPs instead of SwiGLU, separate q/k/v (+ bias) in the
 * single blocks, and norm_out's rows are [scale; shift]. Dimensions come from the weights' shapes.
 */
#ifndef KILN_MODELS_FLUX1_DIT_H
#define KILN_MODELS_FLUX1_DIT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compute/comm.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/weights.h"

/* y = x W^T + b. */
typedef struct kiln_flux1_linear {
    kiln_tensor w; /* [out, in] as stored */
    kiln_tensor b; /* f32 [out] */
} kiln_flux1_linear;

typedef struct kiln_flux1_stream {
    kiln_flux1_linear mod;           /* norm1(_context).linear [6D, D]: shift scale gate (attn) | shift scale gate (mlp) */
    kiln_flux1_linear q, k, v;       /* to_q/to_k/to_v or add_{q,k,v}_proj [D, D] */
    kiln_tensor q_norm, k_norm;      /* f32 [Dh] norm_q/norm_k or norm_added_q/norm_added_k */
    kiln_flux1_linear out;           /* to_out.0 or to_add_out [D, D] */
    kiln_flux1_linear ff_in, ff_out; /* ff(_context).net.0.proj [F, D], .net.2 [D, F] */
} kiln_flux1_stream;

typedef struct kiln_flux1_double {
    kiln_flux1_stream img, txt;
} kiln_flux1_double;

typedef struct kiln_flux1_single {
    kiln_flux1_linear mod;      /* norm.linear [3D, D]: shift scale gate */
    kiln_flux1_linear q, k, v;  /* attn.to_q/to_k/to_v [D, D] */
    kiln_tensor q_norm, k_norm; /* f32 [Dh] */
    kiln_flux1_linear mlp;      /* proj_mlp [F, D] */
    kiln_flux1_linear out;      /* proj_out [D, D + F]: input = attention out | GELU(mlp) */
} kiln_flux1_single;

typedef struct kiln_flux1_dit {
    int hidden;            /* D   3072 */
    int heads, head_dim;   /* H   24, Dh 128 */
    int mlp_hidden;        /* F   4 D */
    int in_ch, out_ch;     /* 64, 64 */
    int ctx_dim;           /* 4096 (T5-XXL) */
    int pooled_dim;        /* 768 (CLIP-L pooled) */
    int t_ch;              /* 256 sinusoidal channels */
    int n_double, n_single; /* 19, 38 */
    int axes[3];           /* 16, 56, 56 */
    double theta;          /* 10000 */
    bool guidance;         /* dev: guidance_embedder present */
    bool bfl;              /* BFL/ComfyUI names (flux1-dev.safetensors): fused qkv and linear1 viewed by rows,
                              final_layer.adaLN_modulation.1 rows [shift; scale] (diffusers: [scale; shift]) */
    kiln_flux1_linear x_in, ctx_in;      /* x_embedder [D, in_ch], context_embedder [D, ctx_dim] */
    kiln_flux1_linear t1, t2;            /* time_text_embed.timestep_embedder.linear_1 [D, t_ch], linear_2 */
    kiln_flux1_linear g1, g2;            /* .guidance_embedder (dev) */
    kiln_flux1_linear p1, p2;            /* .text_embedder.linear_1 [D, pooled], linear_2 [D, D] */
    kiln_flux1_linear norm_out;          /* norm_out.linear [2D, D]: scale | shift */
    kiln_flux1_linear proj_out;          /* [out_ch, D] */
    kiln_flux1_double *dbl;
    kiln_flux1_single *sgl;
    kiln_wset ws;
} kiln_flux1_dit;

/* ck: diffusers names (transformer/) or BFL names (ComfyUI's diffusion_models/flux1-dev.safetensors, also with the
 * model.diffusion_model. prefix), detected from the tensor names.
 * config_json: NULL or transformer/config.json. Read: axes_dims_rope (default 16,56,56), guidance_embeds (must
 * agree with the weights), patch_size (only 1), and the sizes, which must agree with the weights' shapes.
 * Errors name the tensor or key: KILN_E_NOT_FOUND, KILN_E_FORMAT, KILN_E_UNSUPPORTED. */
kiln_status kiln_flux1_dit_load(const kiln_st_file *ck, const char *config_json, kiln_flux1_dit **out, kiln_err *err);
void kiln_flux1_dit_free(kiln_flux1_dit *m);

/* Position ids (FluxPipeline): text tokens all (0, 0, 0); image token (y, x) of an h x w grid, row-major,
 * (0, y, x). ids are [n, 3]. */
void kiln_flux1_text_ids(int64_t n_txt, int32_t *ids);
void kiln_flux1_image_ids(int h, int w, int32_t *ids);

typedef struct kiln_flux1_dit_ws kiln_flux1_dit_ws;
/* The same over the ranks of comm (NULL or one rank: kiln_flux1_dit_ws_create): Ulysses sequence parallelism
 * (models/dit_ulysses.h), as kiln_flux2_dit_ws_create_sp: forward then takes and returns the FULL x and v on every
 * rank, each computing its share of the image tokens. KILN_E_INVALID unless the ranks divide the heads and the
 * image tokens. */
kiln_status kiln_flux1_dit_ws_create_sp(const kiln_flux1_dit *m, kiln_backend *be, kiln_comm *comm, int batch,
                                        int n_txt, int h, int w, kiln_flux1_dit_ws **out, kiln_err *err);

/* Activations for batch sequences of n_txt text tokens and an h x w token grid (RoPE tables built here). The
 * context projection is computed on the first forward after ws_create or kiln_flux1_dit_ws_new_text. */
kiln_status kiln_flux1_dit_ws_create(const kiln_flux1_dit *m, kiln_backend *be, int batch, int n_txt, int h, int w,
                                     kiln_flux1_dit_ws **out, kiln_err *err);
void kiln_flux1_dit_ws_free(kiln_backend *be, kiln_flux1_dit_ws *ws);
void kiln_flux1_dit_ws_new_text(kiln_flux1_dit_ws *ws);
/* The dtype ws keeps its activations in (compute/ops.h kiln_backend_act_dtype; f32 under SP). */
kiln_dtype kiln_flux1_dit_ws_act_dtype(const kiln_flux1_dit_ws *ws);
/* Bytes a workspace allocates on each of sp sequence-parallel ranks (1: ws_create) for n_img = h * w image tokens,
 * activations in dt (f32 under SP, as the workspace keeps them; test_models_flux1_dit checks it against the
 * allocations). */
size_t kiln_flux1_dit_workspace(const kiln_flux1_dit *m, int batch, int n_txt, int n_img, int sp, kiln_dtype dt);

/* One evaluation: x [batch*h*w, in_ch] packed latent tokens, txt [batch*n_txt, ctx_dim] T5 features, pooled
 * [batch, pooled_dim] CLIP pooled vectors, sigma = the timestep as FluxPipeline passes it (scheduler timestep /
 * 1000), guidance = the guidance scale (ignored by schnell), v [batch*h*w, out_ch] out. The model multiplies
 * sigma and guidance by 1000 in f32, as diffusers does. All backend memory. Allocates nothing. */
kiln_status kiln_flux1_dit_forward(const kiln_flux1_dit *m, kiln_backend *be, kiln_flux1_dit_ws *ws, const float *x,
                                   const float *txt, const float *pooled, float sigma, float guidance, float *v,
                                   kiln_err *err);

#endif
