/* lora.h - low-rank adapter terms applied beside a weight's matmul, at run time (no copy of the weight).
 *
 *   y (op)= x . w^T (+ bias)  +  sum over the terms of  (x . A^T) . B^T
 *
 * A term is A f32 [r, K] and B f32 [N, r] (the adapter's strength and alpha / rank already folded into B), both
 * in memory the backend owns (placed or allocated). The epilogue (NONE / ADD / GATED_RESIDUAL) is linear, so
 * each term is one more product with the same epilogue: y = P then y += D; y += P then y += D; y += g * P
 * then y += g * D. Only a [M, r] intermediate is allocated per term. models/lora.c builds the terms from adapter
 * files and hangs them on the model's kiln_tensors (kiln_tensor.lora). */
#ifndef KILN_COMPUTE_LORA_H
#define KILN_COMPUTE_LORA_H

#include "compute/ops.h"

typedef struct kiln_lora_term {
    kiln_tensor a; /* f32 [r, K] */
    kiln_tensor b; /* f32 [N, r] */
    const struct kiln_lora_term *next;
} kiln_lora_term;

/* The matmul op for a weight with w->lora set, through be's own matmul: what backends call from their matmul
 * (the base product is be->ops->matmul on w without its terms). */
kiln_status kiln_matmul_lora(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                             const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err);

#endif
