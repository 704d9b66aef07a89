/* tokenizer.c - loading tokenizer.json into the structures of tok_internal.h, and the lookups.
 *
 * The file is read the way HF tokenizers reads it, and whatever would make HF tokenize differently from this
 * code is refused: a model other than BPE, dropout, subword prefixes/suffixes, byte fallback, a normaliser other
 * than NFC, a pre-tokenizer other than Split(regex, Isolated) + ByteLevel(no regex, no prefix space), a
 * post-processor that adds tokens, truncation or padding baked into the file, single_word added tokens.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "base/alloc.h"
#include "base/log.h"
#include "text/tok_internal.h"

#define MAX_ID (1 << 24) /* ids above this are certainly a corrupt file */

/* ---- small helpers ---- */

static size_t pow2_at_least(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

/* GPT-2 form (UTF-8 of stand-in characters) -> raw bytes into out (room for len bytes: never longer). Returns
 * the raw length, or -1 if a character is not one of the 256 stand-ins. */
static long gpt2_to_raw(const char *s, size_t len, char *out) {
    size_t i = 0, k = 0;
    if (kiln_utf8_invalid_at(s, len) != len) return -1;
    while (i < len) {
        uint32_t cp;
        i += (size_t)kiln_utf8_decode((const unsigned char *)s + i, &cp);
        int b = kiln_cp_to_byte(cp);
        if (b < 0) return -1;
        out[k++] = (char)b;
    }
    return (long)k;
}

static const char *piece_ptr(const kiln_tokenizer *tok, int32_t id) { return tok->pool + tok->piece_off[id]; }

int32_t kiln_vocab_lookup(const kiln_tokenizer *tok, const char *s, size_t len) {
    size_t i = (size_t)kiln_hash_bytes(s, len) & tok->vocab.mask;
    for (;;) {
        int32_t id = tok->vocab.slots[i];
        if (id < 0) return -1;
        if ((size_t)tok->piece_len[id] == len && memcmp(piece_ptr(tok, id), s, len) == 0) return id;
        i = (i + 1) & tok->vocab.mask;
    }
}

static void merge_insert(kiln_tokenizer *tok, int32_t left, int32_t right, uint32_t rank, int32_t id) {
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & tok->merges.mask;
    for (;;) {
        kiln_merge_slot *s = &tok->merges.slots[i];
        if (s->key == 0 || s->key == key) { /* a repeated pair takes the later rank, as HF's HashMap collect */
            if (s->key == 0) tok->n_merges++;
            *s = (kiln_merge_slot){key, rank, id};
            return;
        }
        i = (i + 1) & tok->merges.mask;
    }
}

static const char *jtype(const json_t *obj) {
    const json_t *t = json_object_get(obj, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

static bool jbool(const json_t *obj, const char *key, bool dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* True when key is absent, null, or an empty string. */
static bool jempty(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return !v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0);
}

/* ---- sections ---- */

static kiln_status load_normalizer(kiln_tokenizer *tok, const json_t *n, kiln_err *err) {
    tok->normalizer = KILN_NORM_NONE;
    if (!n || json_is_null(n)) return KILN_OK;
    const char *t = jtype(n);
    if (t && !strcmp(t, "NFC")) {
        tok->normalizer = KILN_NORM_NFC;
        return KILN_OK;
    }
    if (t && !strcmp(t, "Sequence")) {
        const json_t *list = json_object_get(n, "normalizers");
        size_t i;
        const json_t *e;
        if (!json_is_array(list)) return KILN_FAIL(err, KILN_E_FORMAT, "normalizer Sequence without a list");
        json_array_foreach(list, i, e) KILN_TRY(load_normalizer(tok, e, err)); /* NFC twice is NFC */
        return KILN_OK;
    }
    return KILN_FAIL(err, KILN_E_UNSUPPORTED, "normalizer type %s is not supported (only NFC)", t ? t : "(none)");
}

static kiln_status load_pre_tokenizer(kiln_tokenizer *tok, const json_t *p, kiln_err *err) {
    const json_t *split = NULL, *bl = NULL;
    const char *t = p ? jtype(p) : NULL;
    if (t && !strcmp(t, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (json_is_array(list) && json_array_size(list) == 2) {
            split = json_array_get(list, 0);
            bl = json_array_get(list, 1);
        }
    }
    const char *ts = split ? jtype(split) : NULL, *tb = bl ? jtype(bl) : NULL;
    if (!ts || strcmp(ts, "Split") || !tb || strcmp(tb, "ByteLevel"))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                         "pre_tokenizer must be Sequence[Split, ByteLevel] (the Qwen2/Qwen3 layout); found %s",
                         t ? t : "(none)");
    const json_t *pat = json_object_get(split, "pattern");
    const json_t *re = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
    const json_t *beh = json_object_get(split, "behavior");
    if (!json_is_string(re))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "Split pre-tokenizer without a Regex pattern is not supported");
    if (!json_is_string(beh) || strcmp(json_string_value(beh), "Isolated") || jbool(split, "invert", false))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "Split pre-tokenizer: only behavior Isolated, invert false");
    if (jbool(bl, "add_prefix_space", false) || jbool(bl, "use_regex", true))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                         "ByteLevel pre-tokenizer: add_prefix_space and use_regex must be false");
    if (strlen(json_string_value(re)) != json_string_length(re))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "pre-tokenizer regex contains a NUL character");
    return kiln_pretok_compile(tok, json_string_value(re), err);
}

static kiln_status check_passive(const json_t *root, kiln_err *err) {
    static const char *const must_be_null[] = {"truncation", "padding"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_object_get(root, must_be_null[i]);
        if (v && !json_is_null(v))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "tokenizer.json sets %s; kiln does that itself, refusing",
                             must_be_null[i]);
    }
    const json_t *pp = json_object_get(root, "post_processor");
    if (pp && !json_is_null(pp) && (!jtype(pp) || strcmp(jtype(pp), "ByteLevel")))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "post_processor %s is not supported (only ByteLevel or null)",
                         jtype(pp) ? jtype(pp) : "(none)");
    const json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec) && (!jtype(dec) || strcmp(jtype(dec), "ByteLevel")))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "decoder %s is not supported (only ByteLevel or null)",
                         jtype(dec) ? jtype(dec) : "(none)");
    return KILN_OK;
}

/* Vocabulary: fills piece tables for ids < n_ids from model.vocab. */
kiln_status kiln_tok_load_vocab(kiln_tokenizer *tok, const void *json_vocab, size_t *pool_used, kiln_err *err) {
    const json_t *vocab = json_vocab;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        size_t klen = strlen(key);
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || (size_t)id >= tok->n_ids)
            return KILN_FAIL(err, KILN_E_FORMAT, "vocab entry \"%.40s\" has a bad id", key);
        if (tok->piece_len[id] >= 0)
            return KILN_FAIL(err, KILN_E_FORMAT, "vocab id %lld is given to two tokens", (long long)id);
        long raw = gpt2_to_raw(key, klen, tok->pool + *pool_used);
        if (raw < 0)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                             "vocab entry \"%.40s\" is not byte-level (a character outside the GPT-2 byte map)", key);
        if (raw == 0) return KILN_FAIL(err, KILN_E_FORMAT, "vocab has an empty token (id %lld)", (long long)id);
        tok->piece_off[id] = *pool_used;
        tok->piece_len[id] = (int32_t)raw;
        if (kiln_vocab_lookup(tok, tok->pool + *pool_used, (size_t)raw) >= 0)
            return KILN_FAIL(err, KILN_E_FORMAT, "vocab token \"%.40s\" appears twice", key);
        *pool_used += (size_t)raw;
        size_t i = (size_t)kiln_hash_bytes(piece_ptr(tok, (int32_t)id), (size_t)raw) & tok->vocab.mask;
        while (tok->vocab.slots[i] >= 0) i = (i + 1) & tok->vocab.mask;
        tok->vocab.slots[i] = (int32_t)id;
        if (raw == 1) tok->byte_id[(unsigned char)tok->pool[tok->piece_off[id]]] = (int32_t)id;
    }
    for (int b = 0; b < 256; b++)
        if (tok->byte_id[b] < 0)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "vocab lacks the single-byte token for byte 0x%02x", b);
    return KILN_OK;
}

/* One side of a merge -> id (the token must be in the vocabulary). */
static kiln_status merge_side(const kiln_tokenizer *tok, const char *s, size_t len, size_t rank, int32_t *id,
                              kiln_err *err) {
    char buf[1024];
    long raw = len <= sizeof buf ? gpt2_to_raw(s, len, buf) : -1;
    *id = raw > 0 ? kiln_vocab_lookup(tok, buf, (size_t)raw) : -1;
    if (*id < 0) return KILN_FAIL(err, KILN_E_FORMAT, "merge %zu: token \"%.*s\" is not in the vocab", rank,
                                  (int)(len > 40 ? 40 : len), s);
    return KILN_OK;
}

kiln_status kiln_tok_load_merges(kiln_tokenizer *tok, const void *json_merges, kiln_err *err) {
    const json_t *merges = json_merges;
    size_t n = json_array_size(merges);
    KILN_TRY(kiln_tok_init_merges(tok, n, err));
    for (size_t r = 0; r < n; r++) {
        const json_t *m = json_array_get(merges, r);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) { /* "a b": exactly one space, as HF requires */
            a = json_string_value(m);
            const char *sp = memchr(a, ' ', json_string_length(m));
            if (!sp || memchr(sp + 1, ' ', json_string_length(m) - (size_t)(sp + 1 - a)))
                return KILN_FAIL(err, KILN_E_FORMAT, "merge %zu is not two tokens separated by one space", r);
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = json_string_length(m) - la - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            la = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            lb = json_string_length(json_array_get(m, 1));
        } else return KILN_FAIL(err, KILN_E_FORMAT, "merge %zu is neither \"a b\" nor [\"a\", \"b\"]", r);
        KILN_TRY(kiln_tok_add_merge(tok, a, la, b, lb, r, err));
    }
    return KILN_OK;
}

kiln_status kiln_tok_init_merges(kiln_tokenizer *tok, size_t n, kiln_err *err) {
    tok->merges.mask = pow2_at_least(n * 2 + 16) - 1;
    tok->merges.slots = kiln_calloc(tok->merges.mask + 1, sizeof *tok->merges.slots);
    if (!tok->merges.slots) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for %zu merges", n);
    if (n >= UINT32_MAX) return KILN_FAIL(err, KILN_E_LIMIT, "too many merges");
    return KILN_OK;
}

kiln_status kiln_tok_add_merge(kiln_tokenizer *tok, const char *a, size_t la, const char *b, size_t lb, size_t r,
                               kiln_err *err) {
    int32_t ia, ib;
    KILN_TRY(merge_side(tok, a, la, r, &ia, err));
    KILN_TRY(merge_side(tok, b, lb, r, &ib, err));
    size_t l1 = (size_t)tok->piece_len[ia], l2 = (size_t)tok->piece_len[ib];
    char buf[2048];
    if (l1 + l2 > sizeof buf) return KILN_FAIL(err, KILN_E_LIMIT, "merge %zu: tokens too long", r);
    memcpy(buf, piece_ptr(tok, ia), l1);
    memcpy(buf + l1, piece_ptr(tok, ib), l2);
    int32_t id = kiln_vocab_lookup(tok, buf, l1 + l2);
    if (id < 0) return KILN_FAIL(err, KILN_E_FORMAT, "merge %zu: the merged token is not in the vocab", r);
    merge_insert(tok, ia, ib, (uint32_t)r, id);
    return KILN_OK;
}

/* HF's ByteLevel decoder: a token whose characters are all byte stand-ins decodes to those bytes; any other
 * token decodes to its own UTF-8. Added tokens go through the same rule. */
static size_t added_piece(const char *content, size_t len, char *out) {
    long raw = gpt2_to_raw(content, len, out);
    if (raw >= 0) return (size_t)raw;
    memcpy(out, content, len);
    return len;
}

kiln_status kiln_tok_load_added(kiln_tokenizer *tok, const void *json_added, size_t *pool_used, kiln_err *err) {
    const json_t *list = json_added;
    size_t n = json_array_size(list);
    if (n == 0) return KILN_OK;
    tok->added = kiln_calloc(n, sizeof *tok->added);
    if (!tok->added) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for added tokens");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(list, i);
        const json_t *jid = json_object_get(e, "id"), *jc = json_object_get(e, "content");
        if (!json_is_integer(jid) || !json_is_string(jc) || json_string_length(jc) == 0 ||
            json_integer_value(jid) < 0 || (size_t)json_integer_value(jid) >= tok->n_ids)
            return KILN_FAIL(err, KILN_E_FORMAT, "added_tokens[%zu] needs an id and a non-empty content", i);
        if (jbool(e, "single_word", false))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "added token \"%.40s\": single_word is not supported",
                             json_string_value(jc));
        kiln_added_token *a = &tok->added[tok->n_added++];
        a->id = (int32_t)json_integer_value(jid);
        a->lstrip = jbool(e, "lstrip", false);
        a->rstrip = jbool(e, "rstrip", false);
        a->normalized = jbool(e, "normalized", false);
        a->special = jbool(e, "special", false);
        const char *c = json_string_value(jc);
        size_t clen = json_string_length(jc);
        a->orig = kiln_strndup(c, clen);
        if (!a->orig) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for added tokens");
        a->orig_len = clen;
        if (a->normalized && tok->normalizer == KILN_NORM_NFC) { /* HF matches these in normalised text */
            utf8proc_uint8_t *d = NULL;
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)c, (utf8proc_ssize_t)clen, &d,
                                              (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
            if (m <= 0) {
                free(d);
                return KILN_FAIL(err, KILN_E_FORMAT, "added token %d does not normalise", a->id);
            }
            a->content = kiln_strndup((const char *)d, (size_t)m);
            free(d);
            a->len = (size_t)m;
        } else {
            a->content = kiln_strndup(c, clen);
            a->len = clen;
        }
        if (!a->content) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for added tokens");
        if (a->normalized) tok->any_normalized_added = true;
        else tok->added_first[(unsigned char)a->content[0] >> 6] |= 1ull << ((unsigned char)a->content[0] & 63);
        /* the piece an id decodes to: an added token overrides a vocab entry with the same id, as in HF */
        tok->piece_off[a->id] = *pool_used;
        tok->piece_len[a->id] = (int32_t)added_piece(c, clen, tok->pool + *pool_used);
        *pool_used += (size_t)tok->piece_len[a->id];
    }
    return KILN_OK;
}

static kiln_status load_json(kiln_tokenizer *tok, const json_t *root, kiln_err *err) {
    if (!json_is_object(root)) return KILN_FAIL(err, KILN_E_FORMAT, "not a JSON object");
    const json_t *m0 = json_object_get(root, "model");
    if (json_is_object(m0) && jtype(m0) && !strcmp(jtype(m0), "Unigram")) /* checks its own sections */
        return kiln_unigram_load(tok, root, err);
    KILN_TRY(check_passive(root, err));
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return KILN_FAIL(err, KILN_E_FORMAT, "no \"model\" object");
    const char *mt = jtype(model);
    if (mt && !strcmp(mt, "Unigram")) return kiln_unigram_load(tok, root, err);
    if (mt && strcmp(mt, "BPE"))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "model type %s is not supported (only BPE and Unigram)", mt);
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "BPE dropout is not supported");
    if (!jempty(model, "continuing_subword_prefix") || !jempty(model, "end_of_word_suffix"))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                         "BPE continuing_subword_prefix / end_of_word_suffix are not supported");
    if (jbool(model, "byte_fallback", false))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "BPE byte_fallback is not supported");
    tok->ignore_merges = jbool(model, "ignore_merges", false);
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    const json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab) || !json_is_array(merges))
        return KILN_FAIL(err, KILN_E_FORMAT, "model needs a \"vocab\" object and a \"merges\" array");
    if (added && !json_is_array(added)) return KILN_FAIL(err, KILN_E_FORMAT, "\"added_tokens\" is not an array");
    KILN_TRY(load_normalizer(tok, json_object_get(root, "normalizer"), err));
    KILN_TRY(load_pre_tokenizer(tok, json_object_get(root, "pre_tokenizer"), err));

    /* sizes: ids up to the largest given, pool up to the total key bytes (raw is never longer than GPT-2 form) */
    size_t n_ids = 0, pool = 1;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (id >= 0 && id < MAX_ID && (size_t)id + 1 > n_ids) n_ids = (size_t)id + 1;
        pool += strlen(key);
    }
    size_t i;
    json_t *e;
    json_array_foreach((json_t *)added, i, e) {
        json_int_t id = json_integer_value(json_object_get(e, "id"));
        if (id >= 0 && id < MAX_ID && (size_t)id + 1 > n_ids) n_ids = (size_t)id + 1;
        pool += json_string_length(json_object_get(e, "content"));
    }
    KILN_TRY(kiln_tok_alloc(tok, n_ids, pool, json_object_size(vocab), err));
    size_t used = 0;
    KILN_TRY(kiln_tok_load_vocab(tok, vocab, &used, err));
    KILN_TRY(kiln_tok_load_merges(tok, merges, err));
    if (added) KILN_TRY(kiln_tok_load_added(tok, added, &used, err));
    tok->pool_len = used;
    return kiln_bpe_cache_init(&tok->cache, 1 << 14, err);
}

kiln_status kiln_tok_alloc(kiln_tokenizer *tok, size_t n_ids, size_t pool, size_t n_vocab, kiln_err *err) {
    if (n_ids == 0) return KILN_FAIL(err, KILN_E_FORMAT, "empty vocab");
    tok->n_ids = n_ids;
    tok->pool = kiln_malloc(pool);
    tok->piece_off = kiln_calloc(n_ids, sizeof *tok->piece_off);
    tok->piece_len = kiln_malloc(n_ids * sizeof *tok->piece_len);
    tok->vocab.mask = pow2_at_least(n_vocab * 2 + 16) - 1;
    tok->vocab.slots = kiln_malloc((tok->vocab.mask + 1) * sizeof *tok->vocab.slots);
    if (!tok->pool || !tok->piece_off || !tok->piece_len || !tok->vocab.slots)
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a %zu-token vocab", n_ids);
    memset(tok->piece_len, 0xff, n_ids * sizeof *tok->piece_len); /* -1: no token */
    memset(tok->vocab.slots, 0xff, (tok->vocab.mask + 1) * sizeof *tok->vocab.slots);
    memset(tok->byte_id, 0xff, sizeof tok->byte_id);
    memset(tok->eow_id, 0xff, sizeof tok->eow_id);
    return KILN_OK;
}

kiln_status kiln_tok_read_file(const char *path, size_t limit, char **out, size_t *out_len, kiln_err *err) {
    *out = NULL;
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    /* one read, then parse from memory: jansson's FILE reader goes through getc() per byte */
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return KILN_FAIL(err, KILN_E_IO, "%s: not a regular file", path);
    }
    if ((unsigned long long)sb.st_size > limit) {
        fclose(f);
        return KILN_FAIL(err, KILN_E_LIMIT, "%s: %lld bytes is over the %zu-byte limit for a tokenizer file", path,
                         (long long)sb.st_size, limit);
    }
    size_t end = (size_t)sb.st_size;
    char *buf = kiln_malloc(end + 1);
    if (!buf) {
        fclose(f);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for %zu bytes", path, end);
    }
    size_t len = fread(buf, 1, end, f);
    fclose(f);
    if (len != end) {
        kiln_free(buf);
        return KILN_FAIL(err, KILN_E_IO, "%s: read failed", path);
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return KILN_OK;
}

static void tok_defaults(kiln_tokenizer *tok) {
    tok->kind = KILN_TOK_QWEN3;
    tok->bos_id = tok->eos_id = -1;
    tok->pad_id = KILN_QWEN3_PAD_ID;
}

kiln_status kiln_tokenizer_load(const char *path, kiln_tokenizer **out, kiln_err *err) {
    *out = NULL;
    if (!path) return KILN_FAIL(err, KILN_E_INVALID, "no tokenizer path");
    char *buf;
    size_t len;
    KILN_TRY(kiln_tok_read_file(path, (size_t)1 << 30, &buf, &len, err));
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    kiln_free(buf);
    if (!root)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
    kiln_tokenizer *tok = kiln_calloc(1, sizeof *tok);
    if (!tok) {
        json_decref(root);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a tokenizer");
    }
    tok_defaults(tok);
    kiln_status st = load_json(tok, root, err);
    json_decref(root);
    if (st != KILN_OK) {
        kiln_err_prefix(err, "%s", path);
        kiln_tokenizer_free(tok);
        return st;
    }
    log_debug("tokenizer %s: %zu ids, %zu merges, %zu added tokens, JIT %s", path, tok->n_ids, tok->n_merges,
              tok->n_added, tok->regex_jit ? "on" : "off");
    *out = tok;
    return KILN_OK;
}

kiln_status kiln_tokenizer_load_dir(const char *dir, kiln_tokenizer **out, kiln_err *err) {
    *out = NULL;
    if (!dir || !*dir) return KILN_FAIL(err, KILN_E_INVALID, "no tokenizer folder");
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) return kiln_tokenizer_load(dir, out, err);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tokenizer.json", dir) >= (int)sizeof path)
        return KILN_FAIL(err, KILN_E_LIMIT, "tokenizer folder path too long");
    if (access(path, R_OK) == 0) return kiln_tokenizer_load(path, out, err);
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    if (access(path, R_OK) != 0)
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: neither tokenizer.json nor vocab.json + merges.txt", dir);
    kiln_tokenizer *tok = kiln_calloc(1, sizeof *tok);
    if (!tok) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a tokenizer");
    tok_defaults(tok);
    kiln_status st = kiln_clip_load(tok, dir, err);
    if (st != KILN_OK) {
        kiln_err_prefix(err, "%s", dir);
        kiln_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return KILN_OK;
}

kiln_tok_kind kiln_tokenizer_kind(const kiln_tokenizer *tok) { return tok ? tok->kind : KILN_TOK_QWEN3; }

void kiln_tokenizer_free(kiln_tokenizer *tok) {
    if (!tok) return;
    kiln_bpe_cache_free(&tok->cache);
    kiln_pretok_free(tok);
    kiln_unigram_free(tok->unigram);
    kiln_charsmap_free(tok->charsmap);
    for (size_t i = 0; i < tok->n_added; i++) {
        kiln_free(tok->added[i].content);
        kiln_free(tok->added[i].orig);
    }
    kiln_free(tok->added);
    kiln_free(tok->merges.slots);
    kiln_free(tok->vocab.slots);
    kiln_free(tok->piece_len);
    kiln_free(tok->piece_off);
    kiln_free(tok->pool);
    kiln_free(tok);
}

const char *kiln_tokenizer_piece(const kiln_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || (size_t)id >= tok->n_ids || tok->piece_len[id] < 0) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)tok->piece_len[id];
    return piece_ptr(tok, id);
}

int32_t kiln_tokenizer_token_id(const kiln_tokenizer *tok, const char *token) {
    if (!tok || !token) return -1;
    size_t len = strlen(token);
    for (size_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].orig_len == len && !memcmp(tok->added[i].orig, token, len)) return tok->added[i].id;
    if (tok->kind == KILN_TOK_T5) return len ? kiln_vocab_lookup(tok, token, len) : -1; /* pieces are UTF-8 */
    char buf[1024];
    long raw = len <= sizeof buf ? gpt2_to_raw(token, len, buf) : -1;
    return raw > 0 ? kiln_vocab_lookup(tok, buf, (size_t)raw) : -1;
}

size_t kiln_tokenizer_vocab_size(const kiln_tokenizer *tok) { return tok ? tok->n_ids : 0; }
