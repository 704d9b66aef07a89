/* mem_ranges.c - disjoint address ranges with values (see mem_ranges.h). */
#include "compute/mem_ranges.h"

#include <string.h>

#include "base/alloc.h"

void kiln_ranges_init(kiln_ranges *rs) { memset(rs, 0, sizeof *rs); }

void kiln_ranges_free(kiln_ranges *rs) {
    kiln_free(rs->r);
    memset(rs, 0, sizeof *rs);
}

/* Index of the first range with base > p. */
static size_t upper(const kiln_ranges *rs, uintptr_t p) {
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->r[mid].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

const kiln_range *kiln_ranges_find(const kiln_ranges *rs, const void *p) {
    uintptr_t u = (uintptr_t)p;
    size_t i = upper(rs, u);
    return i > 0 && u - rs->r[i - 1].base < rs->r[i - 1].size ? &rs->r[i - 1] : NULL;
}

bool kiln_ranges_covers(const kiln_ranges *rs, const void *p, size_t bytes) {
    const kiln_range *r = kiln_ranges_find(rs, p);
    if (!r) return false;
    size_t off = (size_t)((uintptr_t)p - r->base), n = bytes ? bytes : 1;
    return n <= r->size - off;
}

kiln_status kiln_ranges_add(kiln_ranges *rs, const void *base, size_t size, void *value, kiln_err *err) {
    if (!base) return KILN_FAIL(err, KILN_E_INVALID, "memory range at NULL");
    uintptr_t b = (uintptr_t)base;
    if (!size) size = 1;
    if (size - 1 > UINTPTR_MAX - b) return KILN_FAIL(err, KILN_E_INVALID, "memory range %p+%zu wraps", base, size);
    size_t i = upper(rs, b);
    if ((i > 0 && b - rs->r[i - 1].base < rs->r[i - 1].size) || (i < rs->n && rs->r[i].base - b < size))
        return KILN_FAIL(err, KILN_E_INVALID, "memory range %p+%zu overlaps one already owned", base, size);
    if (rs->n == rs->cap) {
        size_t ncap = rs->cap ? rs->cap * 2 : 64;
        kiln_range *nr = kiln_realloc(rs->r, ncap * sizeof *nr);
        if (!nr) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory tracking memory ranges");
        rs->r = nr;
        rs->cap = ncap;
    }
    memmove(&rs->r[i + 1], &rs->r[i], (rs->n - i) * sizeof *rs->r);
    rs->r[i] = (kiln_range){b, size, value};
    rs->n++;
    return KILN_OK;
}

bool kiln_ranges_remove(kiln_ranges *rs, const void *base, void **value) {
    uintptr_t b = (uintptr_t)base;
    size_t i = upper(rs, b);
    if (i == 0 || rs->r[i - 1].base != b) return false;
    if (value) *value = rs->r[i - 1].value;
    memmove(&rs->r[i - 1], &rs->r[i], (rs->n - i) * sizeof *rs->r);
    rs->n--;
    return true;
}

void kiln_tensor_span(const kiln_tensor *t, int64_t *lo, int64_t *hi) {
    int64_t a = 0, b = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] <= 0) {
            *lo = *hi = 0;
            return;
        }
        int64_t span = (t->shape[d] - 1) * t->stride[d];
        if (span < 0) a += span;
        else b += span;
    }
    int64_t es = (int64_t)kiln_dtype_size(t->dtype);
    if (t->dtype == KILN_DT_QBLOCK && t->ndim == 2) { /* rows of blocks: stride[0] bytes apart, each that long */
        *lo = 0;
        *hi = t->shape[0] * t->stride[0];
        return;
    }
    *lo = a * es;
    *hi = (b + 1) * es;
}
