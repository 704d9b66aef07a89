/* test_compute_cuda_arena.c - device-memory planning (host logic, no GPU needed): the sub-allocator keeps its
 * invariants under random alloc/free, coalesces, reuses the same offsets for a repeated pattern (what CUDA-graph
 * replays need), and the offline planner never overlaps two buffers that are live at the same time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/cuda/cuda_arena.h"
#include "test.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void test_basic(void) {
    kcu_arena a;
    CHECK_EQ_INT(kcu_arena_init(&a, 1 << 20, NULL), KILN_OK);
    uint64_t o1, o2, o3;
    CHECK(kcu_arena_alloc(&a, 1000, &o1));
    CHECK(kcu_arena_alloc(&a, 1, &o2));
    CHECK(kcu_arena_alloc(&a, 0, &o3));
    CHECK_EQ_INT(o1 % KCU_ARENA_ALIGN, 0);
    CHECK_EQ_INT(o2 % KCU_ARENA_ALIGN, 0);
    CHECK(o1 != o2 && o2 != o3 && o1 != o3);
    CHECK_EQ_INT(a.in_use, 1024 + 256 + 256);
    CHECK_EQ_INT(a.asked_in_use, 1000 + 1 + 0); /* what the allocations asked for, as the memory plan counts */
    CHECK(kcu_arena_check(&a));
    CHECK(kcu_arena_free(&a, o2));
    CHECK_EQ_INT(a.asked_in_use, 1000);
    CHECK(!kcu_arena_free(&a, o2)); /* double free refused */
    CHECK(!kcu_arena_free(&a, o1 + 256)); /* not a block start */
    CHECK(kcu_arena_free(&a, o1));
    CHECK(kcu_arena_free(&a, o3));
    CHECK(kcu_arena_check(&a));
    CHECK_EQ_INT(a.n, 1); /* fully coalesced */
    CHECK_EQ_INT(kcu_arena_largest_free(&a), 1 << 20);
    CHECK_EQ_INT(a.peak, 1024 + 256 + 256);
    uint64_t big;
    CHECK(!kcu_arena_alloc(&a, (1 << 20) + 1, &big)); /* too large */
    CHECK(kcu_arena_alloc(&a, 1 << 20, &big));      /* exactly all */
    CHECK_EQ_INT(big, 0);
    CHECK(!kcu_arena_alloc(&a, 1, &o1));
    CHECK(!kcu_arena_alloc(&a, UINT64_MAX, &o1)); /* rounding overflow is a failure, not a wrap */
    kcu_arena_reset(&a);
    CHECK_EQ_INT(a.in_use, 0);
    CHECK_EQ_INT(a.asked_in_use, 0);
    CHECK(kcu_arena_check(&a));
    kcu_arena_destroy(&a);
}

static void test_best_fit_and_reuse(void) {
    kcu_arena a;
    CHECK_EQ_INT(kcu_arena_init(&a, 64 * 1024, NULL), KILN_OK);
    uint64_t x, y, z, w;
    CHECK(kcu_arena_alloc(&a, 4096, &x));
    CHECK(kcu_arena_alloc(&a, 256, &y));
    CHECK(kcu_arena_alloc(&a, 1024, &z));
    CHECK(kcu_arena_alloc(&a, 256, &w));
    CHECK(kcu_arena_free(&a, x)); /* hole of 4096 */
    CHECK(kcu_arena_free(&a, z)); /* hole of 1024 */
    uint64_t t;
    CHECK(kcu_arena_alloc(&a, 1000, &t));
    CHECK_EQ_INT(t, z); /* best fit: the 1024 hole, not the 4096 one */
    CHECK(kcu_arena_check(&a));
    /* a repeated pattern (one denoising step after another) gets the same offsets every time */
    kcu_arena_reset(&a);
    uint64_t first[6], again[6];
    const uint64_t sizes[6] = {3000, 70000 / 8, 512, 4096, 100, 2048};
    for (int round = 0; round < 2; round++) {
        uint64_t *o = round ? again : first;
        for (int i = 0; i < 6; i++) CHECK(kcu_arena_alloc(&a, sizes[i], &o[i]));
        for (int i = 5; i >= 0; i -= 2) CHECK(kcu_arena_free(&a, o[i]));
        for (int i = 0; i < 6; i += 2) CHECK(kcu_arena_free(&a, o[i]));
        CHECK(kcu_arena_check(&a));
    }
    CHECK(memcmp(first, again, sizeof first) == 0);
    kcu_arena_destroy(&a);
}

static void test_random(void) {
    kcu_arena a;
    CHECK_EQ_INT(kcu_arena_init(&a, 1 << 24, NULL), KILN_OK);
    enum { SLOTS = 200 };
    uint64_t off[SLOTS], size[SLOTS];
    bool live[SLOTS] = {0};
    int overlaps = 0, broken = 0;
    for (int step = 0; step < 20000; step++) {
        int i = (int)(next_rand() % SLOTS);
        if (live[i]) {
            if (!kcu_arena_free(&a, off[i])) broken++;
            live[i] = false;
        } else {
            size[i] = next_rand() % 300000;
            if (kcu_arena_alloc(&a, size[i], &off[i])) {
                live[i] = true;
                for (int j = 0; j < SLOTS; j++) /* no two live blocks overlap */
                    if (j != i && live[j] && off[j] < off[i] + size[i] && off[i] < off[j] + size[j] && size[i] && size[j])
                        overlaps++;
            }
        }
        if (step % 997 == 0 && !kcu_arena_check(&a)) broken++;
    }
    CHECK_EQ_INT(overlaps, 0);
    CHECK_EQ_INT(broken, 0);
    for (int i = 0; i < SLOTS; i++)
        if (live[i]) CHECK(kcu_arena_free(&a, off[i]));
    CHECK(kcu_arena_check(&a));
    CHECK_EQ_INT(a.n, 1);
    CHECK_EQ_INT(a.in_use, 0);
    kcu_arena_destroy(&a);
}

static void test_alloc_failure_leaves_state(void) {
    kcu_arena a;
    CHECK_EQ_INT(kcu_arena_init(&a, 1 << 26, NULL), KILN_OK);
    uint64_t o;
    int n = 0;
    kiln_fault_alloc_fail_at(1, true); /* the block list cannot grow from here on */
    while (n < 1000 && kcu_arena_alloc(&a, 256, &o)) n++;
    kiln_fault_alloc_fail_at(0, false);
    CHECK(n >= 63 && n < 1000); /* the initial 64 slots, then a clean refusal */
    CHECK(kcu_arena_check(&a));
    CHECK(kcu_arena_alloc(&a, 256, &o)); /* and it grows again once memory is back */
    kcu_arena_destroy(&a);
    kiln_err err = {0};
    kiln_fault_alloc_fail_at(1, false);
    CHECK_EQ_INT(kcu_arena_init(&a, 1 << 20, &err), KILN_E_NOMEM);
    kiln_fault_alloc_fail_at(0, false);
    kcu_arena_destroy(&a);
}

static void test_plan(void) {
    /* a chain: each op reads the previous buffer and writes the next; only neighbours overlap in time */
    kcu_plan_buf b[8];
    for (int i = 0; i < 8; i++) b[i] = (kcu_plan_buf){.size = 1000 + 100 * (uint64_t)i, .first = i, .last = i + 1};
    uint64_t total;
    CHECK_EQ_INT(kcu_plan(b, 8, &total, NULL), KILN_OK);
    int overlaps = 0;
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++) {
            bool live = b[i].first <= b[j].last && b[j].first <= b[i].last;
            bool mem = b[i].off < b[j].off + b[j].size && b[j].off < b[i].off + b[i].size;
            if (live && mem) overlaps++;
        }
    CHECK_EQ_INT(overlaps, 0);
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++) {
        CHECK_EQ_INT(b[i].off % KCU_ARENA_ALIGN, 0);
        sum += (b[i].size + 255) / 256 * 256;
    }
    CHECK(total < sum);      /* reuse happened */
    CHECK(total >= 2 * 1792); /* at least the two largest neighbours (1700, 1800 rounded) */

    /* random lifetimes */
    enum { N = 300 };
    kcu_plan_buf r[N];
    for (int i = 0; i < N; i++) {
        int f = (int)(next_rand() % 100);
        r[i] = (kcu_plan_buf){.size = next_rand() % 100000, .first = f, .last = f + (int)(next_rand() % 20)};
    }
    CHECK_EQ_INT(kcu_plan(r, N, &total, NULL), KILN_OK);
    overlaps = 0;
    for (int i = 0; i < N; i++) {
        if (r[i].off + r[i].size > total) overlaps++;
        for (int j = i + 1; j < N; j++) {
            bool live = r[i].first <= r[j].last && r[j].first <= r[i].last;
            bool mem = r[i].off < r[j].off + r[j].size && r[j].off < r[i].off + r[i].size && r[i].size && r[j].size;
            if (live && mem) overlaps++;
        }
    }
    CHECK_EQ_INT(overlaps, 0);

    kiln_err err = {0};
    kcu_plan_buf bad = {.size = 1, .first = 3, .last = 2};
    CHECK_EQ_INT(kcu_plan(&bad, 1, &total, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "op 3 to op 2");
    CHECK_EQ_INT(kcu_plan(NULL, 0, &total, NULL), KILN_OK);
    CHECK_EQ_INT(total, 0);
}

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The arena is sized from the request's plan: not a quarter of free memory, never shrunk, never moved while in
 * use, capped by the device with headroom left. */
static void test_capacity_for_request(void) {
    const uint64_t h200 = 141 * GiB;
    /* 1024x1024 distilled needs ~3 GB of activations: the arena is that plus slack, not 35 GB (a quarter) */
    uint64_t c = kcu_arena_capacity_for(3 * GiB, 0, 0, 130 * GiB, h200);
    CHECK(c >= 3 * GiB + 3 * GiB / 16 && c <= 3 * GiB + 3 * GiB / 16 + KCU_ARENA_SLACK_MIN + 2 * MiB);
    CHECK(c % (2 * MiB) == 0);
    CHECK(c < 130 * GiB / 4);
    /* an arena that already holds the request is kept (its graphs stay valid) */
    CHECK_EQ_INT(kcu_arena_capacity_for(2 * GiB, c, 0, 120 * GiB, h200), c);
    /* a smaller later request never shrinks it */
    CHECK_EQ_INT(kcu_arena_capacity_for(100 * MiB, c, 0, 120 * GiB, h200), c);
    /* a larger request grows it, but not while blocks are live */
    uint64_t big = kcu_arena_capacity_for(10 * GiB, c, 0, 120 * GiB, h200);
    CHECK(big > 10 * GiB && big < 11 * GiB + KCU_ARENA_SLACK_MIN);
    CHECK_EQ_INT(kcu_arena_capacity_for(10 * GiB, c, 1, 120 * GiB, h200), c);
    /* a 24 GB card with 20 GB of weights: capped so headroom stays free (the rest falls back to cudaMalloc) */
    const uint64_t card = 24 * GiB;
    uint64_t capped = kcu_arena_capacity_for(6 * GiB, 0, 0, 4 * GiB, card);
    CHECK(capped > 0 && capped + KCU_ARENA_HEADROOM(card) <= 4 * GiB);
    CHECK_EQ_INT(KCU_ARENA_HEADROOM(card), 768 * MiB);
    /* the current arena's bytes count as available when it is replaced */
    uint64_t regrow = kcu_arena_capacity_for(6 * GiB, 2 * GiB, 0, 4 * GiB, card);
    CHECK(regrow > capped && regrow + KCU_ARENA_HEADROOM(card) <= 6 * GiB);
    /* nothing useful fits: keep what there is */
    CHECK_EQ_INT(kcu_arena_capacity_for(6 * GiB, 0, 0, 600 * MiB, card), 0);
    CHECK_EQ_INT(kcu_arena_capacity_for(0, 0, 0, 100 * GiB, h200), KCU_ARENA_SLACK_MIN);
}

int main(void) {
    RUN(test_basic);
    RUN(test_best_fit_and_reuse);
    RUN(test_random);
    RUN(test_alloc_failure_leaves_state);
    RUN(test_plan);
    RUN(test_capacity_for_request);
    return test_summary();
}
