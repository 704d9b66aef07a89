/* cuda_residency.c - placed weights, host range -> device copy (see cuda_residency.h). Host logic only. */
#include "compute/cuda/cuda_residency.h"

#include <string.h>

void kcu_placements_init(kcu_placements *p) {
    memset(p, 0, sizeof *p);
    kiln_ranges_init(&p->r);
}

void kcu_placements_free(kcu_placements *p, void (*release)(void *ctx, void *dev), void *ctx) {
    for (size_t i = 0; i < p->r.n; i++)
        if (release) release(ctx, p->r.r[i].value);
    kiln_ranges_free(&p->r);
    p->bytes = 0;
}

kiln_status kcu_placements_add(kcu_placements *p, const void *host, size_t bytes, void *dev, kiln_err *err) {
    if (!dev) return KILN_FAIL(err, KILN_E_INVALID, "placement of %p without a device copy", host);
    KILN_TRY(kiln_ranges_add(&p->r, host, bytes, dev, err));
    p->bytes += bytes;
    return KILN_OK;
}

void *kcu_placements_remove(kcu_placements *p, const void *host) {
    const kiln_range *r = kiln_ranges_find(&p->r, host);
    if (!r || r->base != (uintptr_t)host) return NULL;
    size_t size = r->size;
    void *dev = NULL;
    kiln_ranges_remove(&p->r, host, &dev);
    p->bytes -= size;
    return dev;
}

void *kcu_placements_translate(const kcu_placements *p, const void *ptr, size_t bytes) {
    if (!kiln_ranges_covers(&p->r, ptr, bytes)) return NULL;
    const kiln_range *r = kiln_ranges_find(&p->r, ptr);
    return (char *)r->value + ((uintptr_t)ptr - r->base);
}
