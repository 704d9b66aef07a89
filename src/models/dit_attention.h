/* dit_attention.h - the attention step the FLUX.1 and FLUX.2 DiTs share: each sample's sequence is [txt ; img]
 * (TEXT FIRST), q and k rotated by the interleaved RoPE tables, full (non-causal) multi-head attention with
 * scale 1/sqrt(Dh). Only the ops table is called.
 *
 * Double-stream blocks keep the two streams apart (img [B*N, 3D] and txt [B*L, 3D] q|k|v, stream-major, so each
 * projection runs over the whole batch): kiln_dit_joint_attention gathers one sample's rows into cat, attends,
 * and scatters the output back into att_t / att_i. Single-stream blocks hold [txt ; img] already
 * (sample-major rows): kiln_dit_single_attention attends per sample in place of the views.
 */
#ifndef KILN_MODELS_DIT_ATTENTION_H
#define KILN_MODELS_DIT_ATTENTION_H

#include "base/status.h"
#include "compute/ops.h"

struct kiln_dit_attn;
/* One sample's attention after RoPE: q, k, v [L+N, D] views -> out [L+N, D]; b is the sample. */
typedef kiln_status (*kiln_dit_attend_fn)(kiln_backend *be, const struct kiln_dit_attn *a, int64_t b,
                                          const kiln_tensor *q, const kiln_tensor *k, const kiln_tensor *v,
                                          kiln_tensor *out, kiln_err *err);

typedef struct kiln_dit_attn {
    int64_t B, L, N;            /* samples, text tokens, image tokens per sample */
    int64_t D;                  /* hidden = heads x head_dim */
    int heads, head_dim;
    const kiln_tensor *cos, *sin; /* f32 [L+N, Dh/2] */
    /* NULL: full attention over the sample's L+N keys; else this does each sample's attention (the 9B-KV
     * reference cache: models/dit_kv.h) with attend_ctx */
    kiln_dit_attend_fn attend;
    const void *attend_ctx;
} kiln_dit_attn;

/* qkv_t [B*L, 3D], qkv_i [B*N, 3D] (q | k | v columns, q and k already RMS-normed) -> att_t [B*L, D],
 * att_i [B*N, D]. cat [L+N, 3D] and cato [L+N, D] are scratch. */
kiln_status kiln_dit_joint_attention(kiln_backend *be, const kiln_dit_attn *a, const kiln_tensor *qkv_t,
                                     const kiln_tensor *qkv_i, kiln_tensor *cat, kiln_tensor *cato, kiln_tensor *att_t,
                                     kiln_tensor *att_i, kiln_err *err);

/* qkv [B*(L+N), >= 3D] with q | k | v in its first 3D columns (RoPE applied here, in place) -> out [B*(L+N), D]
 * (a view: e.g. the first D columns of a wider buffer). */
kiln_status kiln_dit_single_attention(kiln_backend *be, const kiln_dit_attn *a, kiln_tensor *qkv, kiln_tensor *out,
                                      kiln_err *err);

/* The single-stream blocks' sequence S [B*(L+N), D]: each sample's text rows txt [B*L, D] then its image rows
 * img [B*N, D] (join), and the image rows taken back out of it after the blocks (split; the text rows are
 * dropped, as both official models drop them). */
kiln_status kiln_dit_join_streams(kiln_backend *be, kiln_tensor *S, const kiln_tensor *txt, const kiln_tensor *img,
                                  int64_t B, int64_t L, int64_t N, kiln_err *err);
kiln_status kiln_dit_split_image(kiln_backend *be, kiln_tensor *img, const kiln_tensor *S, int64_t B, int64_t L,
                                 int64_t N, kiln_err *err);

/* The RoPE tables of one [txt ; img] sequence: ids [T, n_axes] (text then image positions, from the model's own
 * id rules) -> cos/sin [T, Dh/2] f32, computed on the host and uploaded to the backend buffers rcos / rsin. */
kiln_status kiln_dit_rope_upload(kiln_backend *be, const int32_t *ids, int64_t T, const int *axes, int n_axes,
                                 double theta, int64_t half_dim, float *rcos, float *rsin, kiln_err *err);

#endif
