/* mem_ranges.h - a set of disjoint address ranges [base, base+size), each with a value: "which of my buffers
 * does this pointer point into?", also for a view into the middle of a buffer.
 *
 * Used by both backends to enforce the residency contract (ops.h): the CUDA backend keeps its cudaMalloc'd
 * allocations and its placed weights (host range -> device copy) in one; the CPU backend's strict-residency
 * mode keeps every allocation and placement. Host logic only, unit-tested (tests/unit/test_compute_ranges.c).
 */
#ifndef KILN_COMPUTE_MEM_RANGES_H
#define KILN_COMPUTE_MEM_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/tensor.h"

typedef struct kiln_range {
    uintptr_t base;
    size_t size;
    void *value; /* what the owner maps the range to (a device copy), or NULL */
} kiln_range;

typedef struct kiln_ranges {
    kiln_range *r; /* sorted by base, non-overlapping */
    size_t n, cap;
} kiln_ranges;

void kiln_ranges_init(kiln_ranges *rs);
void kiln_ranges_free(kiln_ranges *rs);
/* Adds [base, base+size) -> value. size 0 counts as 1. KILN_E_NOMEM; KILN_E_INVALID if base is NULL or the
 * range overlaps one already in the set (memory cannot be owned twice). */
kiln_status kiln_ranges_add(kiln_ranges *rs, const void *base, size_t size, void *value, kiln_err *err);
/* Removes the range starting exactly at base; false if there is none. *value (if not NULL) gets its value. */
bool kiln_ranges_remove(kiln_ranges *rs, const void *base, void **value);
/* The range holding p, or NULL. */
const kiln_range *kiln_ranges_find(const kiln_ranges *rs, const void *p);
/* true when [p, p+bytes) lies inside ONE range (bytes 0 counts as 1). */
bool kiln_ranges_covers(const kiln_ranges *rs, const void *p, size_t bytes);

/* The bytes a (possibly strided) tensor touches, as offsets [*lo, *hi) from t->data; *lo == *hi when empty. */
void kiln_tensor_span(const kiln_tensor *t, int64_t *lo, int64_t *hi);

#endif
