/* cuda_arena.h - device-memory planning in host C: a sub-allocator over one device reservation, and an
 * offline planner that packs buffers with known lifetimes.
 *
 * Why: cudaMalloc/cudaFree synchronise the device and cost tens of microseconds; a CUDA graph needs the same
 * addresses on every replay; and the denoising loop must allocate nothing. So the backend reserves one block of
 * device memory when it opens and hands out pieces of it with this allocator. Only offsets are managed here;
 * the caller adds them to the reservation's base pointer. Pure host logic, unit-tested on the CPU
 * (tests/unit/test_compute_cuda_arena.c).
 *
 *     kcu_arena a;  KILN_TRY(kcu_arena_init(&a, 8ull << 30, err));
 *     uint64_t off;
 *     if (kcu_arena_alloc(&a, bytes, &off)) use(base + off); else fall back to cudaMalloc;
 *     kcu_arena_free(&a, off);
 *     kcu_arena_destroy(&a);
 *
 * Allocation is best-fit over a free list kept sorted by offset, so freeing coalesces with both neighbours and
 * a steady alloc/free pattern (one denoising step after another) reuses exactly the same offsets.
 */
#ifndef KILN_COMPUTE_CUDA_ARENA_H
#define KILN_COMPUTE_CUDA_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define KCU_ARENA_ALIGN 256u /* cuBLASLt and 16-byte vector loads want at least 16; 256 matches cudaMalloc */

typedef struct kcu_block {
    uint64_t off, size;
    bool used;
    uint64_t asked; /* a used block: the bytes its allocation asked for (size rounds it up) */
} kcu_block;

typedef struct kcu_arena {
    uint64_t capacity;
    kcu_block *blocks; /* sorted by offset, covering [0, capacity) exactly, no two adjacent free blocks */
    size_t n, cap;
    uint64_t in_use, peak; /* bytes */
    uint64_t asked_in_use; /* the used blocks' asked bytes (what the pipeline's memory plan counts) */
    uint64_t n_allocs, n_fails;
} kcu_arena;

kiln_status kcu_arena_init(kcu_arena *a, uint64_t capacity, kiln_err *err);
void kcu_arena_destroy(kcu_arena *a);
/* Reserves `bytes` (rounded up to KCU_ARENA_ALIGN; 0 counts as 1). false when no free block is large enough or
 * the block list cannot grow (nothing changes then). */
bool kcu_arena_alloc(kcu_arena *a, uint64_t bytes, uint64_t *off);
/* Returns a block by its offset. false when off is not the start of a block in use (a double free or a pointer
 * from elsewhere: nothing changes). */
bool kcu_arena_free(kcu_arena *a, uint64_t off);
/* Frees everything at once (end of a request). */
void kcu_arena_reset(kcu_arena *a);
/* Size of the largest free block. */
uint64_t kcu_arena_largest_free(const kcu_arena *a);
/* Checks the invariants (sorted, contiguous, coalesced, in_use and asked_in_use add up). For tests and debug builds. */
bool kcu_arena_check(const kcu_arena *a);

/* Arena sizing from the request's plan (ops->reserve), not a fixed share of free memory at open (a quarter of
 * an H200 is 35 GB that the weights then cannot use; a quarter of a 24 GB card can be too small for 1024x1024).
 * need: the request's peak activation bytes (the pipeline's estimate, which counts every buffer it allocates);
 * current/in_use: the arena now; free_b/total_b: device memory (cudaMemGetInfo, with the arena's own bytes
 * counted as free when it may be replaced). Returns the capacity to run with:
 *   - current, when it already holds need plus slack, or when blocks are live (an arena in use cannot move);
 *   - else need + slack (1/16 for alignment and fragmentation, + 64 MiB), rounded up to 2 MiB, capped so that
 *     KCU_ARENA_HEADROOM of the device stays free for cuBLASLt, scratch and the CUDA context; what does not fit
 *     falls back to cudaMalloc (correct, only slower); current when not even 64 MiB would fit.
 * Never shrinks: a later smaller request keeps the larger arena (and its captured graphs). */
#define KCU_ARENA_SLACK_MIN (64ull << 20)
#define KCU_ARENA_HEADROOM(total) ((total) / 32 > (512ull << 20) ? (total) / 32 : (512ull << 20))
uint64_t kcu_arena_capacity_for(uint64_t need, uint64_t current, uint64_t in_use, uint64_t free_b, uint64_t total_b);

/* Offline planning: buffers with lifetimes [first, last] (inclusive op indices) get offsets such that two
 * buffers whose lifetimes overlap never overlap in memory. Greedy by size (largest first), each placed at the
 * lowest offset that fits beside the already-placed buffers it is live with. */
typedef struct kcu_plan_buf {
    uint64_t size;
    int first, last;
    uint64_t off; /* out */
} kcu_plan_buf;
/* Fills bufs[i].off and *total (the reservation needed). KILN_E_INVALID on first > last; KILN_E_NOMEM. */
kiln_status kcu_plan(kcu_plan_buf *bufs, size_t n, uint64_t *total, kiln_err *err);

#endif
