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
} kiln_dit_sp;

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
