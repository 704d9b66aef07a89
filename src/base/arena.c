/* arena.c - bump allocator (see arena.h). */
#include "base/arena.h"

#include <string.h>

#include "base/alloc.h"

kiln_status kiln_arena_init(kiln_arena *a, size_t cap, kiln_err *err) {
    memset(a, 0, sizeof *a);
    a->base = kiln_aligned_alloc(cap);
    if (!a->base) return KILN_FAIL(err, KILN_E_NOMEM, "cannot allocate a %zu-byte arena", cap);
    a->cap = cap;
    a->owned = true;
    return KILN_OK;
}

void kiln_arena_init_buffer(kiln_arena *a, void *buf, size_t cap) {
    memset(a, 0, sizeof *a);
    uintptr_t p = (uintptr_t)buf, aligned = (p + KILN_ALIGN - 1) & ~(uintptr_t)(KILN_ALIGN - 1);
    if (!buf || aligned - p > cap) return; /* too small to hold anything aligned: an empty arena */
    a->base = (uint8_t *)aligned;
    a->cap = cap - (aligned - p);
}

void *kiln_arena_alloc(kiln_arena *a, size_t n) {
    size_t start = (a->used + KILN_ALIGN - 1) & ~(size_t)(KILN_ALIGN - 1);
    if (start < a->used || start > a->cap || n > a->cap - start) return NULL;
    a->used = start + n;
    if (a->used > a->high) a->high = a->used;
    return a->base + start;
}

void *kiln_arena_calloc(kiln_arena *a, size_t count, size_t size) {
    size_t n;
    if (!kiln_mul_size(count, size, &n)) return NULL;
    void *p = kiln_arena_alloc(a, n);
    if (p) memset(p, 0, n);
    return p;
}

size_t kiln_arena_mark(const kiln_arena *a) { return a->used; }

void kiln_arena_reset_to(kiln_arena *a, size_t mark) {
    if (mark <= a->used) a->used = mark;
}

void kiln_arena_reset(kiln_arena *a) { a->used = 0; }

size_t kiln_arena_high_water(const kiln_arena *a) { return a->high; }

void kiln_arena_free(kiln_arena *a) {
    if (a->owned) kiln_aligned_free(a->base);
    memset(a, 0, sizeof *a);
}
