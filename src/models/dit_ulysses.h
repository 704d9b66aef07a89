/* dit_ulysses.h - Ulysses sequence parallelism for the DiT attention (one sample at a time).
 *
 * Each of P ranks holds Nl = N/P of a sample's image tokens (rank r: tokens r*Nl .. r*Nl+Nl-1) and ALL L text
 * tokens (the text stream is small and computed on every rank, identically). Around one attention:
 *   1. all-to-all, sequence -> heads: rank r sends rank s the q|k|v columns of head group s (H/P heads) of its
 *      Nl tokens; it receives head group r of all N image tokens, in token order;
 *   2. its text q|k|v columns of head group r are taken locally; [txt ; img] for H/P heads is attended exactly
 *      as on one rank (RoPE with the full table, softmax over all L+N keys): each head is computed whole on one
 *      rank, so no partial softmax is ever combined;
 *   3. image output, heads -> sequence: all-to-all back (rank r gets all head groups of its own tokens);
 *      text output: all-gather of the head groups, so every rank keeps the full text stream.
 * The degree P must divide the heads and the image tokens (kiln_dit_ulysses_check).
 */
#ifndef KILN_MODELS_DIT_ULYSSES_H
#define KILN_MODELS_DIT_ULYSSES_H

#include "compute/comm.h"
#include "models/dit_attention.h"

typedef struct kiln_dit_sp {
    kiln_comm *comm;
    int64_t N;                   /* image tokens of a sample, all ranks together (Nl = N / size) */
    float *send, *recv;          /* [Nl * 3D] each */
    float *cat, *cato;           /* [L + N, 3D/P], [L + N, D/P] */
    float *tgather;              /* [P * L * D/P] */
    float *x_l, *v_l;            /* this rank's rows of the DiT's input and output [B*Nl, in_ch], [B*Nl, out_ch] */
} kiln_dit_sp;

/* sp's buffers for B samples of Nf image tokens (all ranks together) and L text tokens, D attention columns
 * (the model's hidden, or this rank's share under tensor parallelism), in_ch/out_ch token channels. false when out
 * of memory (kiln_dit_sp_free frees what was made). */
/* What kiln_dit_sp_alloc allocates over P ranks (the memory plan's figure). */
size_t kiln_dit_sp_bytes(int P, int64_t B, int64_t L, int64_t Nf, int64_t D, int64_t in_ch, int64_t out_ch);
bool kiln_dit_sp_alloc(kiln_dit_sp *sp, kiln_backend *be, kiln_comm *comm, int64_t B, int64_t L, int64_t Nf,
                       int64_t D, int64_t in_ch, int64_t out_ch);
void kiln_dit_sp_free(kiln_dit_sp *sp, kiln_backend *be);
/* x [B*Nf, in_ch] (every rank's tokens) -> sp->x_l, this rank's rows of each sample. */
kiln_status kiln_dit_sp_take_rows(kiln_backend *be, const kiln_dit_sp *sp, const float *x, int64_t B, int64_t in_ch,
                                  kiln_err *err);
/* sp->v_l -> v [B*Nf, out_ch]: every rank's rows of each sample, on every rank (one all-gather per sample). */
kiln_status kiln_dit_sp_gather_rows(kiln_backend *be, const kiln_dit_sp *sp, float *v, int64_t B, int64_t out_ch,
                                    kiln_err *err);
/* kiln_dit_ulysses_attention for each of a->B samples. Double blocks: qkv_t [B*L, 3D], qkv_i [B*Nl, 3D] -> att_t,
 * att_i. Single blocks (qkv_i NULL): qkv_t [B*(L+Nl), >= 3D] sample-major, text first -> att_t [B*(L+Nl), D]. The
 * RoPE tables of a are taken over the full L + N rows. */
kiln_status kiln_dit_ulysses_batch(kiln_backend *be, const kiln_dit_sp *sp, const kiln_dit_attn *a,
                                   const kiln_tensor *qkv_t, const kiln_tensor *qkv_i, kiln_tensor *att_t,
                                   kiln_tensor *att_i, kiln_err *err);

/* KILN_E_INVALID (with the reason) unless size divides heads and n_img. */
kiln_status kiln_dit_ulysses_check(int size, int heads, int64_t n_img, kiln_err *err);
/* Floats of scratch kiln_dit_sp needs for L text tokens, N image tokens, hidden D over P ranks. */
size_t kiln_dit_ulysses_floats(int64_t L, int64_t N, int64_t D, int P);

/* One sample: qkv_t [L, >= 3D] and qkv_i [Nl, >= 3D] (views; q|k|v in the first 3D columns, q and k RMS-normed,
 * not rotated) -> att_t [L, D], att_i [Nl, D] (views). a: heads, head_dim, D of the whole model; cos/sin of the
 * full [L + N] sequence. */
kiln_status kiln_dit_ulysses_attention(kiln_backend *be, const kiln_dit_sp *sp, const kiln_dit_attn *a,
                                       const kiln_tensor *qkv_t, const kiln_tensor *qkv_i, kiln_tensor *att_t,
                                       kiln_tensor *att_i, kiln_err *err);

#endif
