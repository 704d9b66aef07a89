/* unigram.c - the T5 tokenizer: a SentencePiece Unigram model as HF tokenizers runs it, with the pipeline
 * transformers 5 T5Tokenizer builds (see tokenizer.h).
 *
 * Pre-tokenizer: WhitespaceSplit (runs of non-White_Space characters) then Metaspace(U+2581, prepend always,
 * split): each run gets a leading U+2581 unless it has one, and is cut before every U+2581 (the delimiter starts
 * the next piece). Model (tokenizers models/unigram/model.rs encode_optimized): over each piece, best[e] is the
 * best-scoring segmentation of bytes [0, e); for each character start s in order, every vocabulary piece that
 * starts there (a byte trie's common-prefix search, shortest first) offers best[s] + score, taken only when
 * strictly better, so ties go to the earliest start (the longest piece); a character no single-character piece
 * covers is <unk> with score min_score - 10. Backtracking fuses consecutive <unk> nodes into one string, which is
 * then looked up again (and is <unk> unless the vocabulary holds it). Scores are doubles, as HF's f64.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

#define UNK_PENALTY 10.0
#define META "\xE2\x96\x81" /* U+2581 */

/* trie edge (node, byte) -> child, open addressing */
typedef struct edge {
    uint64_t key; /* (node << 8 | byte) + 1; 0 = empty */
    int32_t child;
} edge;

struct kiln_unigram {
    double *score; /* per id */
    double min_score;
    int32_t unk_id;
    edge *edges;
    size_t edge_mask;
    int32_t *node_id; /* id of the piece ending at a node, or -1 */
    size_t n_nodes, cap_nodes;
};

void kiln_unigram_free(kiln_unigram *u) {
    if (!u) return;
    kiln_free(u->score);
    kiln_free(u->edges);
    kiln_free(u->node_id);
    kiln_free(u);
}

static size_t edge_slot(const kiln_unigram *u, uint64_t key) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & u->edge_mask;
    while (u->edges[i].key && u->edges[i].key != key) i = (i + 1) & u->edge_mask;
    return i;
}

static int32_t child_of(const kiln_unigram *u, int32_t node, unsigned char c) {
    uint64_t key = ((uint64_t)(uint32_t)node << 8 | c) + 1;
    const edge *e = &u->edges[edge_slot(u, key)];
    return e->key ? e->child : -1;
}

static kiln_status trie_insert(kiln_unigram *u, const char *s, size_t len, int32_t id, kiln_err *err) {
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        uint64_t key = ((uint64_t)(uint32_t)node << 8 | (unsigned char)s[i]) + 1;
        size_t slot = edge_slot(u, key);
        if (!u->edges[slot].key) {
            if (u->n_nodes == u->cap_nodes) return KILN_FAIL(err, KILN_E_INTERNAL, "trie node count exceeded");
            u->node_id[u->n_nodes] = -1;
            u->edges[slot] = (edge){key, (int32_t)u->n_nodes++};
        }
        node = u->edges[slot].child;
    }
    u->node_id[node] = id;
    return KILN_OK;
}

/* The Precompiled member of the file's normaliser (alone or inside a Sequence); NULL when there is none. */
static const json_t *find_precompiled(const json_t *n) {
    const json_t *t = json_object_get(n, "type");
    if (!json_is_string(t)) return NULL;
    if (!strcmp(json_string_value(t), "Precompiled")) return n;
    if (strcmp(json_string_value(t), "Sequence")) return NULL;
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(n, "normalizers"), i, e) {
        const json_t *p = find_precompiled(e);
        if (p) return p;
    }
    return NULL;
}

static kiln_status load_charsmap(kiln_tokenizer *tok, const json_t *root, kiln_err *err) {
    const json_t *norm = json_object_get(root, "normalizer");
    const json_t *pc = json_is_object(norm) ? find_precompiled(norm) : NULL;
    if (!pc) { /* T5Tokenizer sets no normaliser when the file has no charsmap */
        tok->normalizer = KILN_NORM_NONE;
        return KILN_OK;
    }
    const json_t *b64 = json_object_get(pc, "precompiled_charsmap");
    if (!json_is_string(b64)) return KILN_FAIL(err, KILN_E_FORMAT, "Precompiled normalizer without a charsmap");
    unsigned char *blob;
    size_t n;
    KILN_TRY(kiln_base64_decode(json_string_value(b64), json_string_length(b64), &blob, &n, err));
    kiln_status st = kiln_charsmap_parse(blob, n, &tok->charsmap, err);
    kiln_free(blob);
    tok->normalizer = KILN_NORM_PRECOMPILED;
    return st;
}

static kiln_status load_pieces(kiln_tokenizer *tok, kiln_unigram *u, const json_t *vocab, kiln_err *err) {
    size_t n = json_array_size(vocab), pool = 1, i;
    const json_t *e;
    json_array_foreach(vocab, i, e) {
        const json_t *p = json_array_get(e, 0), *sc = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) || !json_is_number(sc) ||
            !isfinite(json_number_value(sc)))
            return KILN_FAIL(err, KILN_E_FORMAT, "Unigram vocab[%zu] is not [piece, score]", i);
        pool += json_string_length(p);
    }
    KILN_TRY(kiln_tok_alloc(tok, n, pool + 4096, n, err)); /* + room for added tokens' pieces */
    u->score = kiln_malloc(n * sizeof *u->score);
    u->cap_nodes = pool + 1;
    u->node_id = kiln_malloc(u->cap_nodes * sizeof *u->node_id);
    size_t slots = 16;
    while (slots < 2 * pool) slots <<= 1;
    u->edge_mask = slots - 1;
    u->edges = kiln_calloc(slots, sizeof *u->edges);
    if (!u->score || !u->node_id || !u->edges)
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a %zu-piece Unigram vocab", n);
    u->node_id[0] = -1;
    u->n_nodes = 1;
    u->min_score = INFINITY;
    size_t used = 0;
    json_array_foreach(vocab, i, e) {
        const json_t *p = json_array_get(e, 0);
        const char *s = json_string_value(p);
        size_t len = json_string_length(p);
        u->score[i] = json_number_value(json_array_get(e, 1));
        if (u->score[i] < u->min_score) u->min_score = u->score[i];
        if (kiln_utf8_invalid_at(s, len) != len)
            return KILN_FAIL(err, KILN_E_FORMAT, "Unigram vocab[%zu] is not UTF-8", i);
        memcpy(tok->pool + used, s, len);
        tok->piece_off[i] = used;
        tok->piece_len[i] = (int32_t)len;
        used += len;
        if (len == 0) continue; /* an empty piece is never matched */
        if (kiln_vocab_lookup(tok, s, len) >= 0)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "Unigram vocab piece \"%.40s\" appears twice", s);
        size_t slot = (size_t)kiln_hash_bytes(s, len) & tok->vocab.mask;
        while (tok->vocab.slots[slot] >= 0) slot = (slot + 1) & tok->vocab.mask;
        tok->vocab.slots[slot] = (int32_t)i;
        KILN_TRY(trie_insert(u, s, len, (int32_t)i, err));
    }
    tok->pool_len = used;
    return KILN_OK;
}

kiln_status kiln_unigram_load(kiln_tokenizer *tok, const void *json_root, kiln_err *err) {
    const json_t *root = json_root, *model = json_object_get(root, "model");
    static const char *const must_be_null[] = {"truncation", "padding"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_object_get(root, must_be_null[i]);
        if (v && !json_is_null(v))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "tokenizer.json sets %s; kiln does that itself, refusing",
                             must_be_null[i]);
    }
    const json_t *unk = json_object_get(model, "unk_id"), *vocab = json_object_get(model, "vocab");
    const json_t *bf = json_object_get(model, "byte_fallback");
    if (json_is_true(bf)) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "Unigram byte_fallback is not supported");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "Unigram model needs a non-empty \"vocab\" array");
    if (!json_is_integer(unk) || json_integer_value(unk) < 0 ||
        (size_t)json_integer_value(unk) >= json_array_size(vocab))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "Unigram unk_id missing or outside the vocab");
    if (json_array_size(vocab) > (1u << 24)) return KILN_FAIL(err, KILN_E_LIMIT, "Unigram vocab too large");
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added)) return KILN_FAIL(err, KILN_E_FORMAT, "\"added_tokens\" is not an array");
    size_t i;
    const json_t *e;
    json_array_foreach(added, i, e) { /* T5's added tokens are vocab entries (ids 0-2, 32000-32099) */
        const json_t *id = json_object_get(e, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            (size_t)json_integer_value(id) >= json_array_size(vocab))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "added_tokens[%zu] is not a Unigram vocab id", i);
    }
    kiln_unigram *u = kiln_calloc(1, sizeof *u);
    if (!u) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a Unigram model");
    tok->unigram = u;
    u->unk_id = (int32_t)json_integer_value(unk);
    KILN_TRY(load_charsmap(tok, root, err));
    KILN_TRY(load_pieces(tok, u, vocab, err));
    size_t used = tok->pool_len, room = 4096;
    json_array_foreach(added, i, e) {
        size_t l = json_string_length(json_object_get(e, "content"));
        if (l > room) return KILN_FAIL(err, KILN_E_LIMIT, "added tokens too long");
        room -= l;
    }
    if (added) KILN_TRY(kiln_tok_load_added(tok, added, &used, err));
    tok->pool_len = used;
    tok->kind = KILN_TOK_T5;
    /* T5Tokenizer's defaults (eos "</s>", pad "<pad>"); its post-processor is "$A </s>" */
    tok->eos_id = kiln_tokenizer_token_id(tok, "</s>");
    tok->pad_id = kiln_tokenizer_token_id(tok, "<pad>");
    if (tok->eos_id < 0 || tok->pad_id < 0) return KILN_FAIL(err, KILN_E_FORMAT, "vocab lacks </s> or <pad>");
    return KILN_OK;
}

/* ---- encoding ---- */

typedef struct best {
    double score;
    size_t start; /* SIZE_MAX: not reached yet */
    int32_t id;
} best;

/* Viterbi over one pre-tokenized piece; appends its ids. */
static kiln_status viterbi(const kiln_tokenizer *tok, const char *s, size_t len, kiln_idbuf *out, kiln_err *err) {
    const kiln_unigram *u = tok->unigram;
    if (len == 0) return KILN_OK;
    best *b = kiln_malloc((len + 1) * sizeof *b);
    int32_t *rev = kiln_malloc((len + 1) * sizeof *rev);
    if (!b || !rev) {
        kiln_free(b);
        kiln_free(rev);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a %zu-byte piece", len);
    }
    for (size_t i = 0; i <= len; i++) b[i] = (best){0.0, SIZE_MAX, -1};
    const double unk_score = u->min_score - UNK_PENALTY;
    const unsigned char *t = (const unsigned char *)s;
    for (size_t at = 0; at < len;) {
        uint32_t cp;
        size_t mblen = (size_t)kiln_utf8_decode(t + at, &cp);
        double here = b[at].score;
        bool single = false;
        int32_t node = 0;
        for (size_t k = at; k < len; k++) { /* common-prefix search, shortest first */
            node = child_of(u, node, t[k]);
            if (node < 0) break;
            int32_t id = u->node_id[node];
            if (id < 0) continue;
            best *tg = &b[k + 1];
            double cand = u->score[id] + here;
            if (tg->start == SIZE_MAX || cand > tg->score) *tg = (best){cand, at, id};
            if (k + 1 - at == mblen) single = true;
        }
        if (!single) {
            best *tg = &b[at + mblen];
            double cand = unk_score + here;
            if (tg->start == SIZE_MAX || cand > tg->score) *tg = (best){cand, at, u->unk_id};
        }
        at += mblen;
    }
    /* backtrack; runs of <unk> nodes become one string, looked up again */
    size_t n = 0, end = len, unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
        const best *nd = &b[end];
        if (nd->start >= end) { /* every character start has a node, so this cannot happen */
            kiln_free(b);
            kiln_free(rev);
            return KILN_FAIL(err, KILN_E_INTERNAL, "Unigram lattice has no path to byte %zu", end);
        }
        if (nd->id == u->unk_id) {
            if (!in_unk) unk_end = end;
            in_unk = true;
        } else {
            if (in_unk) {
                int32_t id = kiln_vocab_lookup(tok, s + end, unk_end - end);
                rev[n++] = id >= 0 ? id : u->unk_id;
                in_unk = false;
            }
            rev[n++] = nd->id;
        }
        end = nd->start;
    }
    if (in_unk) {
        int32_t id = kiln_vocab_lookup(tok, s, unk_end);
        rev[n++] = id >= 0 ? id : u->unk_id;
    }
    kiln_status st = KILN_OK;
    for (size_t i = n; i-- > 0 && st == KILN_OK;) st = kiln_idbuf_push(out, rev[i], err);
    kiln_free(b);
    kiln_free(rev);
    return st;
}

/* Metaspace over one whitespace-free run: prepend U+2581 unless present, cut before every U+2581. */
static kiln_status metaspace(const kiln_tokenizer *tok, const char *w, size_t len, kiln_idbuf *out, kiln_err *err) {
    bool has = len >= 3 && !memcmp(w, META, 3);
    char *buf = kiln_malloc(len + 3);
    if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a %zu-byte word", len);
    size_t n = 0;
    if (!has) {
        memcpy(buf, META, 3);
        n = 3;
    }
    memcpy(buf + n, w, len);
    n += len;
    kiln_status st = KILN_OK;
    size_t start = 0;
    for (size_t i = 3; i + 3 <= n && st == KILN_OK; i++)
        if (!memcmp(buf + i, META, 3)) {
            st = viterbi(tok, buf + start, i - start, out, err);
            start = i;
            i += 2;
        }
    if (st == KILN_OK) st = viterbi(tok, buf + start, n - start, out, err);
    kiln_free(buf);
    return st;
}

kiln_status kiln_unigram_encode(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                                kiln_err *err) {
    size_t i = 0;
    while (i < len) { /* WhitespaceSplit: Rust char::is_whitespace runs are dropped */
        size_t s = i;
        while (i < len) {
            uint32_t cp;
            int n = kiln_utf8_decode((const unsigned char *)text + i, &cp);
            if (kiln_unicode_is_white_space(cp)) break;
            i += (size_t)n;
        }
        if (i > s) KILN_TRY(metaspace(tok, text + s, i - s, out, err));
        while (i < len) {
            uint32_t cp;
            int n = kiln_utf8_decode((const unsigned char *)text + i, &cp);
            if (!kiln_unicode_is_white_space(cp)) break;
            i += (size_t)n;
        }
    }
    return KILN_OK;
}
