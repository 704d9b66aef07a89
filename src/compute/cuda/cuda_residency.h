/* cuda_residency.h - the weights placed on the GPU: host range -> device copy, one entry per live placement.
 *
 * ops->place (compute/ops.h) uploads a host range - a mapped checkpoint's tensors, a loader's f32 copies - once,
 * at load, and records it here; ops->unplace (when the model is freed) removes the entry and frees the copy. An op
 * given a tensor whose bytes lie wholly inside a live placement uses the device copy at the same offset, so views
 * into a placed weight (the Q/K/V rows of a fused weight, one embedding row) need nothing of their own.
 *
 * Keyed by the placement, not by a host address alone: an entry lives exactly as long as the model that placed
 * it. The cache this replaces was keyed by (host address, size) and never forgot: when the text encoder was
 * released (its mapping unmapped) and mapped again, a new mapping at the old address hit the old device copy -
 * another model's bytes - and one elsewhere uploaded a second copy while the first leaked.
 * Host logic only, unit-tested in tests/unit/test_compute_cuda_residency.c.
 */
#ifndef KILN_COMPUTE_CUDA_RESIDENCY_H
#define KILN_COMPUTE_CUDA_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compute/mem_ranges.h"

typedef struct kcu_placements {
    kiln_ranges r; /* host range -> device copy (value) */
    size_t bytes;  /* device bytes held */
} kcu_placements;

void kcu_placements_init(kcu_placements *p);
/* Calls release(ctx, dev) for every device copy still held, then frees the table. */
void kcu_placements_free(kcu_placements *p, void (*release)(void *ctx, void *dev), void *ctx);
/* Records the device copy dev of [host, host+bytes). KILN_E_INVALID if it overlaps a live placement. */
kiln_status kcu_placements_add(kcu_placements *p, const void *host, size_t bytes, void *dev, kiln_err *err);
/* Ends the placement starting at host: returns its device copy (for the caller to free), NULL if none. */
void *kcu_placements_remove(kcu_placements *p, const void *host);
/* The device address of host bytes [ptr, ptr+bytes) when they lie wholly inside one live placement, else NULL. */
void *kcu_placements_translate(const kcu_placements *p, const void *ptr, size_t bytes);

#endif
