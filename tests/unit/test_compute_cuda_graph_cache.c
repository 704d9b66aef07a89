/* test_compute_cuda_graph_cache.c - CUDA-graph capture bookkeeping (host logic, no GPU needed): eager, then
 * capture, then replay; failed captures stay eager; a moved arena invalidates; LRU eviction hands graphs back. */
#include <stdint.h>

#include "compute/cuda/cuda_graph_cache.h"
#include "compute/graph.h"
#include "test.h"

static int destroyed;
static void count_destroy(void *ctx, void *exec) { destroyed++; }

static void test_lifecycle(void) {
    kcu_graph_cache gc;
    kcu_graph_cache_init(&gc, 4);
    void *exec, *stale;
    uint64_t key = kiln_graph_key(kiln_graph_key(0, 4096), 512);
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, key, 1, &exec, &stale), KCU_GRAPH_EAGER);
    CHECK(stale == NULL);
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, key, 1, &exec, &stale), KCU_GRAPH_CAPTURE);
    /* a nested request while capturing is eager (the outer capture records it) */
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, 99, 1, &exec, &stale), KCU_GRAPH_EAGER);
    kcu_graph_cache_captured(&gc, key, (void *)0x1234);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(kcu_graph_cache_begin(&gc, key, 1, &exec, &stale), KCU_GRAPH_REPLAY);
        CHECK(exec == (void *)0x1234);
    }
    const kcu_graph_entry *e = kcu_graph_cache_get(&gc, key);
    CHECK(e && e->state == KCU_GS_READY && e->replays == 3);
    CHECK_EQ_INT(gc.n_captures, 1);
    /* the arena moved: the graph comes back as stale and the key is captured again right away */
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, key, 2, &exec, &stale), KCU_GRAPH_CAPTURE);
    CHECK(stale == (void *)0x1234);
    kcu_graph_cache_captured(&gc, key, (void *)0x5678);
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, key, 2, &exec, &stale), KCU_GRAPH_REPLAY);
    CHECK(exec == (void *)0x5678);
    destroyed = 0;
    kcu_graph_cache_clear(&gc, count_destroy, NULL);
    CHECK_EQ_INT(destroyed, 1);
    CHECK(kcu_graph_cache_get(&gc, key) == NULL);
}

static void test_failed_capture_stays_eager(void) {
    kcu_graph_cache gc;
    kcu_graph_cache_init(&gc, 4);
    void *exec, *stale;
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, 7, 1, &exec, &stale), KCU_GRAPH_EAGER);
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, 7, 1, &exec, &stale), KCU_GRAPH_CAPTURE);
    kcu_graph_cache_captured(&gc, 7, NULL);
    CHECK(!gc.capturing);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(kcu_graph_cache_begin(&gc, 7, 1, &exec, &stale), KCU_GRAPH_EAGER);
    CHECK_EQ_INT(kcu_graph_cache_get(&gc, 7)->state, KCU_GS_FAILED);
    /* a report for a key that is not capturing changes nothing */
    kcu_graph_cache_captured(&gc, 7, (void *)1);
    CHECK_EQ_INT(kcu_graph_cache_get(&gc, 7)->state, KCU_GS_FAILED);
}

static void test_lru_eviction(void) {
    kcu_graph_cache gc;
    kcu_graph_cache_init(&gc, 2);
    void *exec, *stale;
    for (uint64_t k = 1; k <= 2; k++) { /* two READY graphs */
        kcu_graph_cache_begin(&gc, k, 1, &exec, &stale);
        CHECK_EQ_INT(kcu_graph_cache_begin(&gc, k, 1, &exec, &stale), KCU_GRAPH_CAPTURE);
        kcu_graph_cache_captured(&gc, k, (void *)(uintptr_t)(0x100 * k));
    }
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, 1, 1, &exec, &stale), KCU_GRAPH_REPLAY); /* key 1 is now the newer */
    CHECK_EQ_INT(kcu_graph_cache_begin(&gc, 3, 1, &exec, &stale), KCU_GRAPH_EAGER);
    CHECK(stale == (void *)0x200); /* key 2 was least recently used */
    CHECK(kcu_graph_cache_get(&gc, 2) == NULL);
    CHECK(kcu_graph_cache_get(&gc, 1) != NULL);
    CHECK_EQ_INT(gc.n_evictions, 1);
    /* capacity is clamped */
    kcu_graph_cache_init(&gc, 0);
    CHECK_EQ_INT(gc.capacity, 1);
    kcu_graph_cache_init(&gc, 1000);
    CHECK_EQ_INT(gc.capacity, KCU_GRAPH_MAX);
}

static void test_keys(void) {
    CHECK(kiln_graph_key(0, 1) != kiln_graph_key(0, 2));
    CHECK(kiln_graph_key(kiln_graph_key(0, 1), 2) != kiln_graph_key(kiln_graph_key(0, 2), 1));
    CHECK_EQ_INT(kiln_graph_key(0, 4096), kiln_graph_key(0, 4096));
}

int main(void) {
    RUN(test_lifecycle);
    RUN(test_failed_capture_stays_eager);
    RUN(test_lru_eviction);
    RUN(test_keys);
    return test_summary();
}
