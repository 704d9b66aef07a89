/* cuda_graph_cache.c - CUDA-graph capture bookkeeping (see cuda_graph_cache.h). Host logic only. */
#include "compute/cuda/cuda_graph_cache.h"

#include <string.h>

void kcu_graph_cache_init(kcu_graph_cache *gc, int capacity) {
    memset(gc, 0, sizeof *gc);
    gc->capacity = capacity < 1 ? 1 : capacity > KCU_GRAPH_MAX ? KCU_GRAPH_MAX : capacity;
}

static kcu_graph_entry *find(kcu_graph_cache *gc, uint64_t key) {
    for (int i = 0; i < gc->capacity; i++)
        if (gc->e[i].used && gc->e[i].key == key) return &gc->e[i];
    return NULL;
}

const kcu_graph_entry *kcu_graph_cache_get(const kcu_graph_cache *gc, uint64_t key) {
    return find((kcu_graph_cache *)gc, key);
}

/* A free slot, or the least recently used one not being captured (its graph goes to *stale). */
static kcu_graph_entry *take_slot(kcu_graph_cache *gc, void **stale) {
    kcu_graph_entry *lru = NULL;
    for (int i = 0; i < gc->capacity; i++) {
        if (!gc->e[i].used) return &gc->e[i];
        if (gc->e[i].state != KCU_GS_CAPTURING && (!lru || gc->e[i].last_use < lru->last_use)) lru = &gc->e[i];
    }
    if (!lru) return NULL;
    if (lru->exec) *stale = lru->exec;
    gc->n_evictions++;
    memset(lru, 0, sizeof *lru);
    return lru;
}

kcu_graph_action kcu_graph_cache_begin(kcu_graph_cache *gc, uint64_t key, uint64_t arena_gen, void **exec,
                                       void **stale) {
    *exec = NULL;
    *stale = NULL;
    if (gc->capturing) return KCU_GRAPH_EAGER; /* nested: the outer capture records this work */
    gc->tick++;
    kcu_graph_entry *e = find(gc, key);
    if (e && e->state == KCU_GS_READY && e->arena_gen != arena_gen) { /* pointers inside the graph are stale */
        *stale = e->exec;
        e->exec = NULL;
        e->state = KCU_GS_SEEN; /* the layout changed, but this shape ran before: capture right away */
    }
    if (!e) {
        e = take_slot(gc, stale);
        if (!e) return KCU_GRAPH_EAGER;
        e->used = true;
        e->key = key;
        e->state = KCU_GS_SEEN;
        e->last_use = gc->tick;
        return KCU_GRAPH_EAGER;
    }
    e->last_use = gc->tick;
    switch (e->state) {
    case KCU_GS_READY:
        e->replays++;
        gc->n_replays++;
        *exec = e->exec;
        return KCU_GRAPH_REPLAY;
    case KCU_GS_SEEN:
        e->state = KCU_GS_CAPTURING;
        e->arena_gen = arena_gen;
        gc->capturing = true;
        return KCU_GRAPH_CAPTURE;
    case KCU_GS_CAPTURING: /* unreachable while gc->capturing guards; be safe */
    case KCU_GS_FAILED:
    default:
        return KCU_GRAPH_EAGER;
    }
}

void kcu_graph_cache_captured(kcu_graph_cache *gc, uint64_t key, void *exec) {
    gc->capturing = false;
    kcu_graph_entry *e = find(gc, key);
    if (!e || e->state != KCU_GS_CAPTURING) return;
    if (exec) {
        e->exec = exec;
        e->state = KCU_GS_READY;
        gc->n_captures++;
    } else {
        e->state = KCU_GS_FAILED;
    }
}

void kcu_graph_cache_clear(kcu_graph_cache *gc, void (*destroy)(void *ctx, void *exec), void *ctx) {
    for (int i = 0; i < gc->capacity; i++)
        if (gc->e[i].used && gc->e[i].exec && destroy) destroy(ctx, gc->e[i].exec);
    int cap = gc->capacity;
    kcu_graph_cache_init(gc, cap);
}
