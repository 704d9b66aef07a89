/* flux2_dit.h - the FLUX.2 [klein] diffusion transformer (spec 1): double-stream blocks, single-stream blocks,
 * shared modulation, 4-axis interleaved RoPE, sinusoidal timestep embedding, final adaLN.
 *
 *     kiln_flux2_dit *dit;
 *     KILN_TRY(kiln_flux2_dit_load(ck, config_json_or_NULL, &dit, &err));   // BFL or diffusers names
 *     kiln_flux2_dit_ws *ws;                                               // all activations, made once
 *     KILN_TRY(kiln_flux2_dit_ws_create(dit, be, batch, n_txt, h16, w16, &ws, &err));
 *     for each step: KILN_TRY(kiln_flux2_dit_forward(dit, be, ws, x, txt, t, v, &err));
 *     kiln_flux2_dit_ws_free(be, ws); kiln_flux2_dit_free(dit);               // ck must outlive dit
 *
 * forward = set_timestep (host embedding + upload) + set_text (once per request) + run. A caller replaying the
 * step as a CUDA graph calls set_text once and set_timestep before each step itself, and captures only run:
 * run launches ops on workspace memory and nothing else (see compute/graph.h).
 *
 * Layouts (detected from the names, never configured): BFL/ComfyUI single file (fused img/txt qkv,
 * final_layer.adaLN_modulation.1 rows = [shift; scale]) and diffusers (split to_q/to_k/to_v, norm_out rows =
 * [scale; shift]). Both load into the same struct: the fused qkv is used as one matmul, the split one as three
 * matmuls into the column blocks of the same buffer; the final-layer halves are row views. No weight copies.
 * Dimensions come from the weights' shapes, so the tiny test models and the real 4B run the same code.
 */
#ifndef KILN_MODELS_FLUX2_DIT_H
#define KILN_MODELS_FLUX2_DIT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compute/comm.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/weights.h"

typedef enum kiln_dit_layout { KILN_LAYOUT_BFL = 0, KILN_LAYOUT_DIFFUSERS = 1 } kiln_dit_layout;

typedef struct kiln_flux2_stream {
    kiln_tensor qkv;              /* [3D, D] fused (BFL); data NULL for the split layout */
    kiln_tensor q, k, v;          /* [D, D] each (diffusers to_q/to_k/to_v; row views of qkv for BFL) */
    kiln_tensor q_norm, k_norm;   /* f32 [Dh] per-head RMS gains */
    kiln_tensor proj;             /* [D, D]   attention output projection */
    kiln_tensor mlp_in;           /* [2F, D]  SwiGLU input: rows 0..F-1 gate, F..2F-1 value */
    kiln_tensor mlp_out;          /* [D, F] */
} kiln_flux2_stream;

typedef struct kiln_flux2_double {
    kiln_flux2_stream img, txt;
} kiln_flux2_double;

typedef struct kiln_flux2_single {
    kiln_tensor linear1;          /* [3D + 2F, D]  q | k | v | mlp gate | mlp value */
    kiln_tensor linear2;          /* [D, D + F]    input = attention out | mlp activation */
    kiln_tensor q_norm, k_norm;   /* f32 [Dh] */
} kiln_flux2_single;

typedef struct kiln_flux2_dit {
    kiln_dit_layout layout;
    int hidden;                   /* D   3072 */
    int heads, head_dim;          /* H   24, Dh 128 */
    int mlp_hidden;               /* F   9216 */
    int in_ch, out_ch;            /* 128, 128 */
    int ctx_dim;                  /* 7680 = 3 x Qwen3 hidden */
    int t_ch;                     /* 256 sinusoidal timestep channels */
    int n_double, n_single;       /* 5, 20 */
    int axes[4];                  /* RoPE dims per axis: 32 x 4 */
    double theta;                 /* 2000 */
    float eps;                    /* 1e-6 */
    kiln_tensor img_in;           /* [D, in_ch] */
    kiln_tensor txt_in;           /* [D, ctx_dim] */
    kiln_tensor t_in, t_out;      /* [D, t_ch], [D, D]  timestep MLP */
    kiln_tensor mod_img;          /* [6D, D]  shift1 scale1 gate1 shift2 scale2 gate2 */
    kiln_tensor mod_txt;          /* [6D, D] */
    kiln_tensor mod_single;       /* [3D, D]  shift scale gate */
    kiln_tensor final_shift;      /* [D, D]   row view of the final adaLN weight */
    kiln_tensor final_scale;      /* [D, D] */
    kiln_tensor final_out;        /* [out_ch, D] */
    kiln_flux2_double *dbl;
    kiln_flux2_single *sgl;
    kiln_wset ws;
} kiln_flux2_dit;

/* config_json: NULL or transformer/config.json (axes_dims_rope, rope_theta, eps). */
kiln_status kiln_flux2_dit_load(const kiln_st_file *ck, const char *config_json, kiln_flux2_dit **out,
                                kiln_err *err);
void kiln_flux2_dit_free(kiln_flux2_dit *m);

/* The 256 (t_ch) sinusoidal channels for timestep value s (= 1000 sigma): [cos(s f_i) | sin(s f_i)],
 * f_i = exp(-ln(10000) i / (t_ch/2)), in f32 as diffusers computes them. */
void kiln_flux2_timestep_embedding(float s, int t_ch, float *out);

/* The DiT's timestep value for a sigma, rounded as the diffusers pipeline does in f32:
 * ((sigma * 1000) / 1000) * 1000 (scheduler timesteps, the pipeline's /1000, the model's *1000). */
float kiln_flux2_timestep_value(float sigma);

typedef struct kiln_flux2_dit_ws kiln_flux2_dit_ws;

/* Activations for `batch` sequences of n_txt text tokens and an h16 x w16 token grid (RoPE tables built
 * here). The text projection is computed once per request on the first forward after ws_create or
 * kiln_flux2_dit_ws_new_text. */
kiln_status kiln_flux2_dit_ws_create(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                     int w16, kiln_flux2_dit_ws **out, kiln_err *err);
/* The same with reference images (editing, Flux2KleinPipeline image=): each sample's image stream is its h16*w16
 * noisy tokens followed by the n_refs references' ref_h16[k]*ref_w16[k] tokens, with position ids (10 + 10 k,
 * y, x, 0). run's x and v are then [batch * (h16*w16 + reference tokens), in_ch]; the caller slices v. */
kiln_status kiln_flux2_dit_ws_create_refs(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                          int w16, int n_refs, const int *ref_h16, const int *ref_w16,
                                          kiln_flux2_dit_ws **out, kiln_err *err);
/* The same over the ranks of comm (NULL or one rank: kiln_flux2_dit_ws_create): Ulysses sequence parallelism
 * (models/dit_ulysses.h). kiln_flux2_dit_run then takes and returns the FULL x and v on every rank; each rank
 * computes its share of the image tokens. KILN_E_INVALID when the ranks do not divide the heads and the image
 * tokens. */
kiln_status kiln_flux2_dit_ws_create_sp(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, int batch,
                                        int n_txt, int h16, int w16, kiln_flux2_dit_ws **out, kiln_err *err);
/* All of it: references, sequence parallelism over sp (the image stream, references included, split over its
 * ranks; NULL: none) and tensor parallelism over tp (NULL or one rank: none; docs/parallel.md): each rank of tp
 * computes H/t heads and F/t MLP units of every block from row and column views of the weights, and one
 * all-reduce per block half sums the projections out. With both, sp must divide H/t. */
kiln_status kiln_flux2_dit_ws_create_full(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *sp, kiln_comm *tp,
                                          int batch, int n_txt, int h16, int w16, int n_refs, const int *ref_h16,
                                          const int *ref_w16, kiln_flux2_dit_ws **out, kiln_err *err);
/* FLUX.2 [klein] 9B-KV (Flux2KleinKVPipeline, models/dit_kv.h), one rank: the same reference images as
 * ws_create_refs (same position ids), run as the KV pipeline runs them. The workspace starts in EXTRACT mode (step
 * 0): x and v as with ws_create_refs ([noisy ; references] per sample, v sliced by the caller), the reference rows
 * modulated at the fixed timestep, attending only to each other, every block caching their K/V. After
 * kiln_flux2_dit_kv_set_mode(ws, true) (steps 1+) run takes and returns the noisy tokens only, [batch*h16*w16,
 * in_ch], and the cached K/V join every block's keys. KILN_E_INVALID without references (the KV pipeline then runs
 * the standard forward: use ws_create). */
kiln_status kiln_flux2_dit_ws_create_kv(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                        int w16, int n_refs, const int *ref_h16, const int *ref_w16,
                                        kiln_flux2_dit_ws **out, kiln_err *err);
/* EXTRACT (false) or CACHED (true); no effect on a workspace that is not KV. */
void kiln_flux2_dit_kv_set_mode(kiln_flux2_dit_ws *ws, bool cached);
/* KILN_OK when tensor parallelism over t ranks can split m: t divides the heads and the MLP units, and no block
 * weight is GGML-quantised (blocks cannot be cut by columns) or LoRA-patched; else the reason. */
kiln_status kiln_flux2_dit_tp_check(const kiln_flux2_dit *m, int t, kiln_err *err);
void kiln_flux2_dit_ws_free(kiln_backend *be, kiln_flux2_dit_ws *ws);
void kiln_flux2_dit_ws_new_text(kiln_flux2_dit_ws *ws);
/* The dtype ws keeps its activations in (compute/ops.h kiln_backend_act_dtype; f32 under SP or TP). */
kiln_dtype kiln_flux2_dit_ws_act_dtype(const kiln_flux2_dit_ws *ws);
/* Bytes a workspace allocates on each rank (ws_create_full over sp sequence- and tp tensor-parallel ranks, 1 =
 * none; kv: ws_create_kv, whose cache of every block, scratch and reference modulation it adds) for n_img noisy and
 * n_ref_tok reference tokens, activations in dt (f32 under SP or TP, as the workspace keeps them). */
size_t kiln_flux2_dit_workspace(const kiln_flux2_dit *m, int batch, int n_txt, int n_img, int n_ref_tok, bool kv,
                                int sp, int tp, kiln_dtype dt);

/* One evaluation: x [batch*N, in_ch] noisy tokens, txt [batch*n_txt, ctx_dim] text features, t = the
 * timestep value (kiln_flux2_timestep_value(sigma)), v [batch*N, out_ch] velocity out. All backend memory.
 * Allocates nothing. */
kiln_status kiln_flux2_dit_forward(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *ws,
                                   const float *x, const float *txt, float t, float *v, kiln_err *err);

/* The parts of forward. set_timestep: the sinusoidal embedding of t, uploaded into the workspace (the one
 * per-step input of run). set_text: the text projection of txt into the workspace (once per request). run: the
 * evaluation from those two, x and v as in forward; launches ops only (no upload, allocation or sync), so it
 * can be captured as a CUDA graph. KILN_E_INTERNAL if set_text was never called. */
kiln_status kiln_flux2_dit_set_timestep(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *ws, float t,
                                       kiln_err *err);
kiln_status kiln_flux2_dit_set_text(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *ws, const float *txt,
                                    kiln_err *err);
kiln_status kiln_flux2_dit_run(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *ws, const float *x,
                               float *v, kiln_err *err);

/* key with the workspace's shape (batch, text and image tokens) and every buffer address mixed in
 * (kiln_graph_key): a captured run is valid only for the same workspace memory. */
uint64_t kiln_flux2_dit_ws_key(const kiln_flux2_dit_ws *ws, uint64_t key);

#endif
