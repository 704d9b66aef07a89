/* cuda_arena.c - device-memory sub-allocator and lifetime planner (see cuda_arena.h). Host logic only. */
#include "compute/cuda/cuda_arena.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

static uint64_t round_up(uint64_t n) { return (n + KCU_ARENA_ALIGN - 1) / KCU_ARENA_ALIGN * KCU_ARENA_ALIGN; }

kiln_status kcu_arena_init(kcu_arena *a, uint64_t capacity, kiln_err *err) {
    memset(a, 0, sizeof *a);
    a->capacity = capacity / KCU_ARENA_ALIGN * KCU_ARENA_ALIGN;
    a->cap = 64;
    a->blocks = kiln_calloc(a->cap, sizeof *a->blocks);
    if (!a->blocks) return KILN_FAIL(err, KILN_E_NOMEM, "device arena: out of host memory for its block list");
    a->blocks[0] = (kcu_block){0, a->capacity, false};
    a->n = a->capacity ? 1 : 0;
    return KILN_OK;
}

void kcu_arena_destroy(kcu_arena *a) {
    kiln_free(a->blocks);
    memset(a, 0, sizeof *a);
}

void kcu_arena_reset(kcu_arena *a) {
    if (!a->blocks) return;
    a->blocks[0] = (kcu_block){0, a->capacity, false};
    a->n = a->capacity ? 1 : 0;
    a->in_use = a->asked_in_use = 0;
}

bool kcu_arena_alloc(kcu_arena *a, uint64_t bytes, uint64_t *off) {
    uint64_t need = round_up(bytes ? bytes : 1);
    if (need < bytes) { /* overflow in rounding */
        a->n_fails++;
        return false;
    }
    size_t best = (size_t)-1;
    for (size_t i = 0; i < a->n; i++)
        if (!a->blocks[i].used && a->blocks[i].size >= need && (best == (size_t)-1 || a->blocks[i].size < a->blocks[best].size))
            best = i;
    if (best == (size_t)-1) {
        a->n_fails++;
        return false;
    }
    kcu_block *b = &a->blocks[best];
    if (b->size > need) { /* split: the tail stays free */
        if (a->n == a->cap) {
            size_t ncap = a->cap * 2;
            kcu_block *nb = kiln_realloc(a->blocks, ncap * sizeof *nb);
            if (!nb) {
                a->n_fails++;
                return false;
            }
            a->blocks = nb;
            a->cap = ncap;
            b = &a->blocks[best];
        }
        memmove(&a->blocks[best + 2], &a->blocks[best + 1], (a->n - best - 1) * sizeof *b);
        a->blocks[best + 1] = (kcu_block){b->off + need, b->size - need, false};
        b->size = need;
        a->n++;
    }
    b->used = true;
    b->asked = bytes;
    a->in_use += b->size;
    a->asked_in_use += bytes;
    if (a->in_use > a->peak) a->peak = a->in_use;
    a->n_allocs++;
    *off = b->off;
    return true;
}

static void remove_block(kcu_arena *a, size_t i) {
    memmove(&a->blocks[i], &a->blocks[i + 1], (a->n - i - 1) * sizeof *a->blocks);
    a->n--;
}

bool kcu_arena_free(kcu_arena *a, uint64_t off) {
    size_t lo = 0, hi = a->n; /* binary search: blocks are sorted by offset */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->blocks[mid].off < off) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= a->n || a->blocks[lo].off != off || !a->blocks[lo].used) return false;
    size_t i = lo;
    a->blocks[i].used = false;
    a->in_use -= a->blocks[i].size;
    a->asked_in_use -= a->blocks[i].asked;
    if (i + 1 < a->n && !a->blocks[i + 1].used) {
        a->blocks[i].size += a->blocks[i + 1].size;
        remove_block(a, i + 1);
    }
    if (i > 0 && !a->blocks[i - 1].used) {
        a->blocks[i - 1].size += a->blocks[i].size;
        remove_block(a, i);
    }
    return true;
}

uint64_t kcu_arena_largest_free(const kcu_arena *a) {
    uint64_t best = 0;
    for (size_t i = 0; i < a->n; i++)
        if (!a->blocks[i].used && a->blocks[i].size > best) best = a->blocks[i].size;
    return best;
}

bool kcu_arena_check(const kcu_arena *a) {
    uint64_t off = 0, used = 0, asked = 0;
    for (size_t i = 0; i < a->n; i++) {
        const kcu_block *b = &a->blocks[i];
        if (b->off != off || b->size == 0 || b->size % KCU_ARENA_ALIGN) return false;
        if (i > 0 && !b->used && !a->blocks[i - 1].used) return false;
        if (b->used && b->asked > b->size) return false;
        if (b->used) used += b->size, asked += b->asked;
        off += b->size;
    }
    return off == a->capacity && used == a->in_use && asked == a->asked_in_use;
}

/* ---- offline planner ---- */

static int by_size_desc(const void *pa, const void *pb) {
    const kcu_plan_buf *a = *(const kcu_plan_buf *const *)pa, *b = *(const kcu_plan_buf *const *)pb;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->first - b->first;
}

static int by_off(const void *pa, const void *pb) {
    const kcu_plan_buf *a = *(const kcu_plan_buf *const *)pa, *b = *(const kcu_plan_buf *const *)pb;
    return a->off < b->off ? -1 : a->off > b->off;
}

kiln_status kcu_plan(kcu_plan_buf *bufs, size_t n, uint64_t *total, kiln_err *err) {
    *total = 0;
    if (n == 0) return KILN_OK;
    for (size_t i = 0; i < n; i++)
        if (bufs[i].first > bufs[i].last)
            return KILN_FAIL(err, KILN_E_INVALID, "arena plan: buffer %zu lives from op %d to op %d", i, bufs[i].first,
                             bufs[i].last);
    kcu_plan_buf **order = kiln_calloc(n, sizeof *order), **live = kiln_calloc(n, sizeof *live);
    if (!order || !live) {
        kiln_free(order);
        kiln_free(live);
        return KILN_FAIL(err, KILN_E_NOMEM, "arena plan: out of memory for %zu buffers", n);
    }
    for (size_t i = 0; i < n; i++) order[i] = &bufs[i];
    qsort(order, n, sizeof *order, by_size_desc);
    for (size_t i = 0; i < n; i++) {
        kcu_plan_buf *b = order[i];
        uint64_t need = round_up(b->size ? b->size : 1);
        size_t nl = 0; /* placed buffers whose lifetime overlaps b's */
        for (size_t j = 0; j < i; j++)
            if (order[j]->first <= b->last && b->first <= order[j]->last) live[nl++] = order[j];
        qsort(live, nl, sizeof *live, by_off);
        uint64_t off = 0; /* lowest gap that fits */
        for (size_t j = 0; j < nl; j++) {
            if (live[j]->off >= off + need) break;
            uint64_t end = live[j]->off + round_up(live[j]->size ? live[j]->size : 1);
            if (end > off) off = end;
        }
        b->off = off;
        if (off + need > *total) *total = off + need;
    }
    kiln_free(order);
    kiln_free(live);
    return KILN_OK;
}

uint64_t kcu_arena_capacity_for(uint64_t need, uint64_t current, uint64_t in_use, uint64_t free_b, uint64_t total_b) {
    uint64_t want = need + need / 16 + KCU_ARENA_SLACK_MIN;
    want = (want + (2ull << 20) - 1) & ~((2ull << 20) - 1);
    if (want <= current || in_use > 0) return current;
    uint64_t avail = free_b + current; /* the current arena is released before the new one is reserved */
    uint64_t headroom = KCU_ARENA_HEADROOM(total_b);
    uint64_t cap = avail > headroom ? (avail - headroom) & ~((2ull << 20) - 1) : 0;
    if (want > cap) want = cap;
    if (want < KCU_ARENA_SLACK_MIN) return current;
    return want > current ? want : current;
}
