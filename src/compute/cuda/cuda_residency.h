/* cuda_residency.h - which memory is the GPU's, and the host weights already uploaded to it.
 *
 * Two small host-side tables (pure logic, unit-tested in tests/unit/test_compute_cuda_residency.c):
 *
 *   kcu_ranges   the device allocations this backend made outside its arena (sorted [base, base+size)
 *                intervals): "does this pointer point into memory I allocated?" also for a view into the
 *                middle of a buffer. With the arena's range it lets the backend accept an activation whose
 *                tensor still says KILN_BACKEND_CPU although its bytes came from ops->alloc.
 *   kcu_wcache   host weight (address, bytes) -> its device copy. A weight argument (matmul/conv w, bias, norm
 *                gains) that lives in host memory - an mmapped checkpoint - is uploaded on first use and the
 *                copy reused ever after: weights are uploaded once, and models need not know about devices.
 *                Contract: host memory passed as a weight stays unchanged while the backend is open.
 */
#ifndef KILN_COMPUTE_CUDA_RESIDENCY_H
#define KILN_COMPUTE_CUDA_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kcu_range {
    uintptr_t base;
    size_t size;
} kcu_range;

typedef struct kcu_ranges {
    kcu_range *r; /* sorted by base, non-overlapping */
    size_t n, cap;
} kcu_ranges;

void kcu_ranges_init(kcu_ranges *rs);
void kcu_ranges_free(kcu_ranges *rs);
/* Adds [base, base+size). KILN_E_NOMEM; KILN_E_INTERNAL if it overlaps an existing range. */
kiln_status kcu_ranges_add(kcu_ranges *rs, const void *base, size_t size, kiln_err *err);
/* Removes the range starting at base; false if there is none. */
bool kcu_ranges_remove(kcu_ranges *rs, const void *base);
/* true when p lies inside one of the ranges. */
bool kcu_ranges_contains(const kcu_ranges *rs, const void *p);

typedef struct kcu_wentry {
    const void *host;
    size_t bytes;
    void *dev;
} kcu_wentry;

typedef struct kcu_wcache {
    kcu_wentry *e; /* open addressing on the host address; capacity a power of two */
    size_t cap, count;
    size_t bytes; /* device bytes held */
} kcu_wcache;

void kcu_wcache_init(kcu_wcache *c);
/* Calls release(ctx, dev) for every device copy, then frees the table. */
void kcu_wcache_free(kcu_wcache *c, void (*release)(void *ctx, void *dev), void *ctx);
/* The device copy of exactly (host, bytes), or NULL. */
void *kcu_wcache_find(const kcu_wcache *c, const void *host, size_t bytes);
/* Records a device copy. KILN_E_NOMEM when the table cannot grow. A second entry for the same host address
 * with another size is kept separately (a weight viewed at two sizes gets two copies). */
kiln_status kcu_wcache_put(kcu_wcache *c, const void *host, size_t bytes, void *dev, kiln_err *err);

#endif
