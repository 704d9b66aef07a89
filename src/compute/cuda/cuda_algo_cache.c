/* cuda_algo_cache.c - shape -> pinned GEMM algorithm (see cuda_algo_cache.h). */
#include "compute/cuda/cuda_algo_cache.h"

#include <string.h>

#include "base/alloc.h"

void kcu_algo_cache_init(kcu_algo_cache *c) { memset(c, 0, sizeof *c); }

void kcu_algo_cache_free(kcu_algo_cache *c) {
    kiln_free(c->slots);
    memset(c, 0, sizeof *c);
}

void kcu_algo_cache_clear(kcu_algo_cache *c) {
    if (c->slots) memset(c->slots, 0, c->cap * sizeof *c->slots);
    c->count = 0;
}

/* FNV-1a over the key's bytes: keys are zero-initialised so padding is stable. */
static uint64_t key_hash(const kcu_gemm_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static kcu_algo_slot *probe(kcu_algo_slot *slots, size_t cap, const kcu_gemm_key *key) {
    size_t i = (size_t)key_hash(key) & (cap - 1);
    for (;;) {
        kcu_algo_slot *s = &slots[i];
        if (!s->used || memcmp(&s->key, key, sizeof *key) == 0) return s;
        i = (i + 1) & (cap - 1);
    }
}

kcu_algo *kcu_algo_cache_find(kcu_algo_cache *c, const kcu_gemm_key *key) {
    if (c->cap) {
        kcu_algo_slot *s = probe(c->slots, c->cap, key);
        if (s->used) {
            c->hits++;
            s->algo.uses++;
            return &s->algo;
        }
    }
    c->misses++;
    return NULL;
}

static kiln_status grow(kcu_algo_cache *c, kiln_err *err) {
    size_t ncap = c->cap ? c->cap * 2 : 64;
    kcu_algo_slot *ns = kiln_calloc(ncap, sizeof *ns);
    if (!ns) return KILN_FAIL(err, KILN_E_NOMEM, "GEMM algorithm cache: out of memory growing to %zu entries", ncap);
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].used) *probe(ns, ncap, &c->slots[i].key) = c->slots[i];
    kiln_free(c->slots);
    c->slots = ns;
    c->cap = ncap;
    return KILN_OK;
}

kiln_status kcu_algo_cache_put(kcu_algo_cache *c, const kcu_gemm_key *key, const kcu_algo *algo, kiln_err *err) {
    if ((c->count + 1) * 2 > c->cap) KILN_TRY(grow(c, err)); /* load factor <= 1/2 keeps probes short */
    kcu_algo_slot *s = probe(c->slots, c->cap, key);
    if (!s->used) c->count++;
    s->key = *key;
    s->algo = *algo;
    s->used = 1;
    return KILN_OK;
}

int32_t kcu_ptr_align(const void *a, const void *b, const void *c) {
    uintptr_t u = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    int32_t al = 16;
    while (al > 1 && (u & (uintptr_t)(al - 1))) al /= 2;
    return al;
}
