/* arena.h - a bump allocator for per-request activations: one big block, pointer bumps, reset in O(1).
 *
 *     kiln_arena a;
 *     KILN_TRY(kiln_arena_init(&a, 256 << 20, &err));        // or kiln_arena_init_buffer over memory you own
 *     size_t mark = kiln_arena_mark(&a);
 *     float *x = kiln_arena_alloc(&a, n * sizeof *x);          // 64-byte aligned; NULL when the arena is full
 *     ...
 *     kiln_arena_reset_to(&a, mark);                           // frees everything allocated after mark
 *     kiln_arena_free(&a);
 *
 * Why: the denoising loop must allocate nothing; an arena sized once per request (and its high-water mark,
 * which tells the next request what size to ask for) makes that true and cheap. Not thread-safe: one arena
 * per thread or per request.
 */
#ifndef KILN_BASE_ARENA_H
#define KILN_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_arena {
    uint8_t *base;
    size_t cap, used, high; /* bytes; high = the most ever in use */
    bool owned;             /* base came from kiln_aligned_alloc */
} kiln_arena;

/* Allocates cap bytes (64-byte aligned). KILN_E_NOMEM on failure (a is then empty but safe to free). */
kiln_status kiln_arena_init(kiln_arena *a, size_t cap, kiln_err *err);
/* Uses caller-owned memory; kiln_arena_free will not free it. buf is aligned up to 64 bytes internally. */
void kiln_arena_init_buffer(kiln_arena *a, void *buf, size_t cap);
/* n bytes, 64-byte aligned, uninitialised. NULL if they do not fit (the arena is unchanged). n = 0 is valid. */
void *kiln_arena_alloc(kiln_arena *a, size_t n);
/* As kiln_arena_alloc, for count * size bytes with overflow checking, zero-filled. */
void *kiln_arena_calloc(kiln_arena *a, size_t count, size_t size);
size_t kiln_arena_mark(const kiln_arena *a);
void kiln_arena_reset_to(kiln_arena *a, size_t mark);
void kiln_arena_reset(kiln_arena *a);
size_t kiln_arena_high_water(const kiln_arena *a);
void kiln_arena_free(kiln_arena *a);

#endif
