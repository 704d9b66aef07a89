/* cuda_graph_cache.h - CUDA-graph capture bookkeeping: which shapes have a captured graph, when to capture,
 * when to replay, when to throw a graph away.
 *
 * Why: one denoising step of the DiT is ~1000 kernel launches; replaying them as one CUDA graph removes the
 * launch gaps. A graph bakes in every pointer and every shape, so it is valid for one "shape key" (image tokens,
 * text tokens, batch, ...) and one arena layout only. The policy, per key:
 *
 *     first sighting        -> EAGER    run normally: warms the GEMM algorithm cache and grows scratch buffers,
 *                                       which must not happen during capture (no cudaMalloc while capturing)
 *     second sighting       -> CAPTURE  run under stream capture; the caller then reports capture_done/failed
 *     later sightings       -> REPLAY   launch the stored graph
 *     capture failed once   -> EAGER forever for that key (never retry a capture that broke)
 *     arena generation moved-> the stored graph is stale: handed back for destruction, the key starts over
 *
 * At most `capacity` graphs are kept; the least recently used one is evicted (handed back for destruction).
 * The graph handles are opaque (cudaGraphExec_t in cuda_graph.cu). Pure host logic, unit-tested in
 * tests/unit/test_compute_cuda_graph_cache.c.
 *
 *     kcu_graph_action act = kcu_graph_cache_begin(&gc, key, arena_gen, &exec, &stale);
 *     if (stale) destroy(stale);
 *     switch (act) { case KCU_GRAPH_REPLAY: launch(exec); break;
 *                    case KCU_GRAPH_CAPTURE: begin capture; body(); end -> kcu_graph_cache_captured(...); launch;
 *                    case KCU_GRAPH_EAGER: body(); }
 */
#ifndef KILN_COMPUTE_CUDA_GRAPH_CACHE_H
#define KILN_COMPUTE_CUDA_GRAPH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kcu_graph_state {
    KCU_GS_SEEN = 0,   /* ran eagerly once, capture next time */
    KCU_GS_CAPTURING,  /* capture in progress */
    KCU_GS_READY,      /* exec holds a graph */
    KCU_GS_FAILED,     /* capture failed: always eager */
} kcu_graph_state;

typedef enum kcu_graph_action { KCU_GRAPH_EAGER = 0, KCU_GRAPH_CAPTURE, KCU_GRAPH_REPLAY } kcu_graph_action;

#define KCU_GRAPH_MAX 16

typedef struct kcu_graph_entry {
    uint64_t key;
    uint64_t arena_gen; /* arena layout the graph was captured against */
    void *exec;         /* cudaGraphExec_t when READY */
    kcu_graph_state state;
    uint64_t last_use, replays;
    bool used;
} kcu_graph_entry;

typedef struct kcu_graph_cache {
    kcu_graph_entry e[KCU_GRAPH_MAX];
    int capacity; /* <= KCU_GRAPH_MAX */
    uint64_t tick;
    bool capturing; /* one capture at a time per stream */
    uint64_t n_captures, n_replays, n_evictions;
} kcu_graph_cache;

/* capacity clamped to 1..KCU_GRAPH_MAX. */
void kcu_graph_cache_init(kcu_graph_cache *gc, int capacity);
/* What to do for key now. *exec is set for REPLAY. *stale receives a graph the caller must destroy (evicted or
 * invalidated), or NULL. A capture already in progress (nested call) always answers EAGER. */
kcu_graph_action kcu_graph_cache_begin(kcu_graph_cache *gc, uint64_t key, uint64_t arena_gen, void **exec,
                                       void **stale);
/* Ends a CAPTURE: exec != NULL stores the graph (READY); NULL marks the key FAILED. */
void kcu_graph_cache_captured(kcu_graph_cache *gc, uint64_t key, void *exec);
/* Hands every stored graph to destroy(ctx, exec) and empties the cache. */
void kcu_graph_cache_clear(kcu_graph_cache *gc, void (*destroy)(void *ctx, void *exec), void *ctx);
/* The entry for key, or NULL (for tests and statistics). */
const kcu_graph_entry *kcu_graph_cache_get(const kcu_graph_cache *gc, uint64_t key);

#endif
