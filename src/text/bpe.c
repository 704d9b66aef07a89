/* bpe.c - byte-level BPE on one pre-tokenized word, and the word cache.
 *
 * The merge loop is HF tokenizers' (models/bpe/word.rs merge_all), step for step, because ties and stale
 * candidates decide ids in corner cases: every adjacent pair that is a merge goes into a min-heap ordered by
 * (rank, position); the top is popped, skipped if its left symbol was merged away, has no right neighbour, or
 * the pair there no longer yields the same new id; otherwise the two symbols fuse and the new pairs with the
 * left and right neighbours are pushed. That is "always merge the lowest-ranked pair, leftmost first" in
 * O(n log n), so a 10k-letter word costs milliseconds, not seconds.
 */
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

uint64_t kiln_hash_bytes(const void *p, size_t n) {
    /* FNV-1a, then a final mix so the low bits (the slot index) depend on every byte */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

kiln_status kiln_idbuf_append(kiln_idbuf *b, const int32_t *ids, size_t n, kiln_err *err) {
    if (n > b->cap - b->n || !b->v) {
        size_t need;
        if (!kiln_add_size(b->n, n, &need)) return KILN_FAIL(err, KILN_E_NOMEM, "token buffer size overflow");
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need) cap *= 2;
        size_t bytes;
        if (!kiln_mul_size(cap, sizeof *b->v, &bytes))
            return KILN_FAIL(err, KILN_E_NOMEM, "token buffer size overflow");
        int32_t *v = kiln_realloc(b->v, bytes);
        if (!v) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for %zu token ids", cap);
        b->v = v;
        b->cap = cap;
    }
    if (n) memcpy(b->v + b->n, ids, n * sizeof *ids);
    b->n += n;
    return KILN_OK;
}

kiln_status kiln_idbuf_push(kiln_idbuf *b, int32_t id, kiln_err *err) {
    if (b->n < b->cap && b->v) {
        b->v[b->n++] = id;
        return KILN_OK;
    }
    return kiln_idbuf_append(b, &id, 1, err);
}

/* ---- the cache ---- */

#define CACHE_MAX_WORD 128 /* longer words are rare and not worth a slot */

kiln_status kiln_bpe_cache_init(kiln_bpe_cache *c, size_t slots, kiln_err *err) {
    memset(c, 0, sizeof *c);
    c->slots = kiln_calloc(slots, sizeof *c->slots);
    if (!c->slots) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the BPE cache");
    c->mask = slots - 1;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        kiln_free(c->slots);
        c->slots = NULL;
        return KILN_FAIL(err, KILN_E_INTERNAL, "pthread_mutex_init failed");
    }
    c->lock_ok = true;
    return KILN_OK;
}

void kiln_bpe_cache_free(kiln_bpe_cache *c) {
    if (c->slots)
        for (size_t i = 0; i <= c->mask; i++) kiln_free(c->slots[i].word);
    kiln_free(c->slots);
    if (c->lock_ok) pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

/* Copies the cached ids of word into ids[] (room for len ids); returns their count, or -1 on a miss. */
static int cache_get(kiln_bpe_cache *c, uint64_t h, const char *word, size_t len, int32_t *ids) {
    int n = -1;
    kiln_bpe_cache_slot *s = &c->slots[h & c->mask];
    pthread_mutex_lock(&c->lock);
    if (s->word && s->hash == h && s->len == len && memcmp(s->word, word, len) == 0) {
        n = s->n;
        memcpy(ids, s->word + len, (size_t)n * sizeof *ids);
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* Best effort: a failed allocation just leaves the word uncached. */
static void cache_put(kiln_bpe_cache *c, uint64_t h, const char *word, size_t len, const int32_t *ids, size_t n) {
    char *e = kiln_malloc(len + n * sizeof *ids);
    if (!e) return;
    memcpy(e, word, len);
    memcpy(e + len, ids, n * sizeof *ids);
    kiln_bpe_cache_slot *s = &c->slots[h & c->mask];
    pthread_mutex_lock(&c->lock);
    char *old = s->word;
    s->word = e;
    s->hash = h;
    s->len = (uint16_t)len;
    s->n = (uint16_t)n;
    pthread_mutex_unlock(&c->lock);
    kiln_free(old);
}

/* ---- the merge loop ---- */

typedef struct sym {
    int32_t id;
    int32_t prev, next; /* -1 = none */
    int32_t len;        /* bytes; 0 once merged into its left neighbour */
} sym;

typedef struct cand {
    uint32_t rank;
    int32_t pos;
    int32_t id;
} cand;

static bool cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0];
    cand last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        const cand *bc = &last;
        if (l < m && cand_less(&h[l], bc)) {
            best = l;
            bc = &h[l];
        }
        if (l + 1 < m && cand_less(&h[l + 1], bc)) best = l + 1;
        if (best == i) break;
        h[i] = h[best];
        i = best;
    }
    if (m) h[i] = last;
    return top;
}

static void push_pair(const kiln_tokenizer *tok, const sym *s, int32_t pos, cand *heap, size_t *nheap) {
    int32_t nx = s[pos].next;
    uint32_t rank;
    int32_t id;
    if (nx >= 0 && kiln_merge_lookup(tok, s[pos].id, s[nx].id, &rank, &id))
        heap_push(heap, nheap, (cand){rank, pos, id});
}

/* Runs the merges over s[0..n) and writes the surviving ids to ids[]; returns their count. */
static size_t merge_all(const kiln_tokenizer *tok, sym *s, size_t n, cand *heap, int32_t *ids) {
    size_t nheap = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(tok, s, (int32_t)i, heap, &nheap);
    while (nheap) {
        cand c = heap_pop(heap, &nheap);
        sym *a = &s[c.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &s[a->next];
        uint32_t rank;
        int32_t id;
        if (!kiln_merge_lookup(tok, a->id, b->id, &rank, &id) || id != c.id) continue; /* stale */
        a->id = c.id;
        a->len += b->len;
        a->next = b->next;
        b->len = 0;
        if (a->next >= 0) s[a->next].prev = c.pos;
        if (a->prev >= 0) push_pair(tok, s, a->prev, heap, &nheap);
        push_pair(tok, s, c.pos, heap, &nheap);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0 && (size_t)i < n; i = s[i].next) ids[k++] = s[i].id;
    return k;
}

kiln_status kiln_bpe_word(const kiln_tokenizer *tok, const char *word, size_t len, bool eow, kiln_idbuf *out,
                          kiln_err *err) {
    if (len == 0) return KILN_OK;
    if (tok->ignore_merges) {
        int32_t whole = kiln_vocab_lookup(tok, word, len);
        if (whole >= 0) return kiln_idbuf_push(out, whole, err);
    }
    if (len == 1) return kiln_idbuf_push(out, (eow ? tok->eow_id : tok->byte_id)[(unsigned char)word[0]], err);

    kiln_bpe_cache *cache = (kiln_bpe_cache *)&tok->cache; /* the cache is the one mutable part; it has a lock */
    bool cacheable = len <= CACHE_MAX_WORD && cache->slots;
    uint64_t h = 0;
    int32_t small_ids[CACHE_MAX_WORD];
    if (cacheable) {
        h = kiln_hash_bytes(word, len);
        int n = cache_get(cache, h, word, len, small_ids);
        if (n >= 0) return kiln_idbuf_append(out, small_ids, (size_t)n, err);
    }

    /* symbols, heap (at most n-1 initial pairs + 2 per merge < 3n) and output ids */
    sym small_syms[CACHE_MAX_WORD];
    cand small_heap[3 * CACHE_MAX_WORD];
    sym *s = small_syms;
    cand *heap = small_heap;
    int32_t *ids = small_ids;
    void *big = NULL;
    if (len > CACHE_MAX_WORD) {
        if (len > (size_t)INT32_MAX / 4) return KILN_FAIL(err, KILN_E_LIMIT, "word of %zu bytes is too long", len);
        size_t per = sizeof(sym) + 3 * sizeof(cand) + sizeof(int32_t), total;
        if (!kiln_mul_size(len, per, &total)) return KILN_FAIL(err, KILN_E_NOMEM, "word size overflow");
        big = kiln_malloc(total);
        if (!big) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a %zu-byte word", len);
        s = big;
        heap = (cand *)(s + len);
        ids = (int32_t *)(heap + 3 * len);
    }
    for (size_t i = 0; i < len; i++)
        s[i] = (sym){tok->byte_id[(unsigned char)word[i]], (int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1, 1};
    if (eow) s[len - 1].id = tok->eow_id[(unsigned char)word[len - 1]]; /* HF appends "</w>" to the last symbol */
    size_t k = merge_all(tok, s, len, heap, ids);
    kiln_status st = kiln_idbuf_append(out, ids, k, err);
    if (st == KILN_OK && cacheable) cache_put(cache, h, word, len, ids, k);
    kiln_free(big);
    return st;
}
