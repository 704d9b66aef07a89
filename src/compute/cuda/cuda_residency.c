/* cuda_residency.c - device ranges and the uploaded-weight cache (see cuda_residency.h). Host logic only. */
#include "compute/cuda/cuda_residency.h"

#include <string.h>

#include "base/alloc.h"

void kcu_ranges_init(kcu_ranges *rs) { memset(rs, 0, sizeof *rs); }

void kcu_ranges_free(kcu_ranges *rs) {
    kiln_free(rs->r);
    memset(rs, 0, sizeof *rs);
}

/* Index of the first range with base > p. */
static size_t upper(const kcu_ranges *rs, uintptr_t p) {
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rs->r[mid].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

bool kcu_ranges_contains(const kcu_ranges *rs, const void *p) {
    uintptr_t u = (uintptr_t)p;
    size_t i = upper(rs, u);
    return i > 0 && u - rs->r[i - 1].base < rs->r[i - 1].size;
}

kiln_status kcu_ranges_add(kcu_ranges *rs, const void *base, size_t size, kiln_err *err) {
    uintptr_t b = (uintptr_t)base;
    size_t i = upper(rs, b);
    if ((i > 0 && b - rs->r[i - 1].base < rs->r[i - 1].size) || (i < rs->n && rs->r[i].base - b < size))
        return KILN_FAIL(err, KILN_E_INTERNAL, "device range %p+%zu overlaps a known allocation", base, size);
    if (rs->n == rs->cap) {
        size_t ncap = rs->cap ? rs->cap * 2 : 64;
        kcu_range *nr = kiln_realloc(rs->r, ncap * sizeof *nr);
        if (!nr) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory tracking device allocations");
        rs->r = nr;
        rs->cap = ncap;
    }
    memmove(&rs->r[i + 1], &rs->r[i], (rs->n - i) * sizeof *rs->r);
    rs->r[i] = (kcu_range){b, size};
    rs->n++;
    return KILN_OK;
}

bool kcu_ranges_remove(kcu_ranges *rs, const void *base) {
    uintptr_t b = (uintptr_t)base;
    size_t i = upper(rs, b);
    if (i == 0 || rs->r[i - 1].base != b) return false;
    memmove(&rs->r[i - 1], &rs->r[i], (rs->n - i) * sizeof *rs->r);
    rs->n--;
    return true;
}

/* ---- weight cache ---- */

void kcu_wcache_init(kcu_wcache *c) { memset(c, 0, sizeof *c); }

void kcu_wcache_free(kcu_wcache *c, void (*release)(void *ctx, void *dev), void *ctx) {
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].host && release) release(ctx, c->e[i].dev);
    kiln_free(c->e);
    memset(c, 0, sizeof *c);
}

static size_t slot_of(const void *host, size_t bytes, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)host * 0x9e3779b97f4a7c15ull ^ (uint64_t)bytes * 0xc2b2ae3d27d4eb4full;
    return (size_t)(h >> 17) & (cap - 1);
}

void *kcu_wcache_find(const kcu_wcache *c, const void *host, size_t bytes) {
    if (!c->cap) return NULL;
    for (size_t i = slot_of(host, bytes, c->cap);; i = (i + 1) & (c->cap - 1)) {
        const kcu_wentry *e = &c->e[i];
        if (!e->host) return NULL;
        if (e->host == host && e->bytes == bytes) return e->dev;
    }
}

static void insert(kcu_wentry *tab, size_t cap, kcu_wentry e) {
    size_t i = slot_of(e.host, e.bytes, cap);
    while (tab[i].host) i = (i + 1) & (cap - 1);
    tab[i] = e;
}

kiln_status kcu_wcache_put(kcu_wcache *c, const void *host, size_t bytes, void *dev, kiln_err *err) {
    if (!host) return KILN_FAIL(err, KILN_E_INVALID, "weight cache: NULL host address");
    if ((c->count + 1) * 2 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        kcu_wentry *ne = kiln_calloc(ncap, sizeof *ne);
        if (!ne) return KILN_FAIL(err, KILN_E_NOMEM, "weight cache: out of memory growing to %zu entries", ncap);
        for (size_t i = 0; i < c->cap; i++)
            if (c->e[i].host) insert(ne, ncap, c->e[i]);
        kiln_free(c->e);
        c->e = ne;
        c->cap = ncap;
    }
    insert(c->e, c->cap, (kcu_wentry){host, bytes, dev});
    c->count++;
    c->bytes += bytes;
    return KILN_OK;
}
