/* charsmap.c - SentencePiece's precompiled charsmap normaliser (T5's nmt-NFKC), as HF tokenizers applies it.
 *
 * The blob (tokenizer.json normalizer "precompiled_charsmap", base64) is
 *     u32 little-endian trie_bytes | trie_bytes / 4 little-endian u32 units (a Darts double-array trie) |
 *     the replacement strings, each NUL-terminated
 * A trie unit packs: bits 0-7 the label byte (bit 31 too: a unit with bit 31 set never matches a byte), bit 8
 * "has a leaf", bit 9 an offset shift flag, bits 10-31 the offset: offset(u) = (u >> 10) << ((u & 0x200) >> 6).
 * Walking a key from node 0: pos ^= offset(unit[0]); per byte c: pos ^= c; the unit there must have label c;
 * pos ^= offset(unit); if it has a leaf, unit[pos] & 0x7fffffff is the offset of the replacement string.
 *
 * HF (spm_precompiled + normalizers/precompiled.rs) walks the text by extended grapheme clusters: a cluster
 * shorter than 6 bytes whose bytes START with a key is replaced, whole, by the replacement of the SHORTEST such
 * key (so "①" + U+0301 becomes "1": the accent goes); otherwise each character is replaced by its own key's
 * replacement or kept. A NUL byte ends a key walk. kiln does exactly that; clusters come from utf8proc (Unicode
 * 15), which can disagree with HF's unicode-segmentation only inside clusters of several characters.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

struct kiln_charsmap {
    uint32_t *units;
    size_t n_units;
    char *strings; /* replacement strings, NUL-separated */
    size_t n_strings;
};

static uint32_t offset_of(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t label_of(uint32_t u) { return u & ((1u << 31) | 0xFFu); }
static bool has_leaf(uint32_t u) { return (u >> 8) & 1; }

void kiln_charsmap_free(kiln_charsmap *m) {
    if (!m) return;
    kiln_free(m->units);
    kiln_free(m->strings);
    kiln_free(m);
}

kiln_status kiln_charsmap_parse(const unsigned char *blob, size_t len, kiln_charsmap **out, kiln_err *err) {
    *out = NULL;
    if (len < 4) return KILN_FAIL(err, KILN_E_FORMAT, "precompiled_charsmap: %zu bytes, no trie size", len);
    uint32_t trie = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
    if (trie % 4 || trie == 0 || trie > len - 4)
        return KILN_FAIL(err, KILN_E_FORMAT, "precompiled_charsmap: trie size %u does not fit %zu bytes", trie, len);
    size_t rest = len - 4 - trie;
    if (kiln_utf8_invalid_at((const char *)blob + 4 + trie, rest) != rest)
        return KILN_FAIL(err, KILN_E_FORMAT, "precompiled_charsmap: replacement strings are not UTF-8");
    kiln_charsmap *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the charsmap");
    m->n_units = trie / 4;
    m->units = kiln_malloc(trie);
    m->n_strings = rest;
    m->strings = kiln_malloc(rest + 1);
    if (!m->units || !m->strings) {
        kiln_charsmap_free(m);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the charsmap");
    }
    for (size_t i = 0; i < m->n_units; i++) {
        const unsigned char *p = blob + 4 + 4 * i;
        m->units[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    memcpy(m->strings, blob + 4 + trie, rest);
    m->strings[rest] = '\0'; /* a last string without its NUL ends here */
    *out = m;
    return KILN_OK;
}

/* The replacement of the shortest key that key[0..len) starts with: its string and length, or NULL. A walk that
 * leaves the array (a corrupt blob: HF would panic) or lands inside a character finds nothing. */
static const char *first_match(const kiln_charsmap *m, const unsigned char *key, size_t len, size_t *rlen) {
    size_t pos = offset_of(m->units[0]);
    for (size_t i = 0; i < len && key[i]; i++) {
        pos ^= key[i];
        if (pos >= m->n_units) return NULL;
        uint32_t u = m->units[pos];
        if (label_of(u) != key[i]) return NULL;
        pos ^= offset_of(u);
        if (has_leaf(u)) {
            if (pos >= m->n_units) return NULL;
            size_t at = m->units[pos] & 0x7fffffffu;
            if (at > m->n_strings || (at < m->n_strings && ((unsigned char)m->strings[at] & 0xC0) == 0x80))
                return NULL;
            *rlen = strlen(m->strings + at);
            return m->strings + at;
        }
    }
    return NULL;
}

typedef struct outbuf {
    char *p;
    size_t n, cap;
} outbuf;

static bool put(outbuf *o, const char *s, size_t n) {
    if (n > o->cap - o->n) {
        size_t cap = o->cap * 2 + n;
        char *p = kiln_realloc(o->p, cap + 1);
        if (!p) return false;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    return true;
}

kiln_status kiln_charsmap_normalize(const kiln_charsmap *m, const char *text, size_t len, char **out,
                                    size_t *out_len, kiln_err *err) {
    *out = NULL;
    *out_len = 0;
    outbuf o = {kiln_malloc(len + 16), 0, len + 15};
    if (!o.p) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory normalising %zu bytes", len);
    const unsigned char *t = (const unsigned char *)text;
    utf8proc_int32_t state = 0;
    size_t g = 0; /* start of the current grapheme cluster */
    bool ok = true;
    while (g < len && ok) {
        uint32_t cp;
        size_t e = g + (size_t)kiln_utf8_decode(t + g, &cp);
        /* extend the cluster while there is no break before the next character; the state runs over every
         * adjacent pair of the text in order, as utf8proc requires */
        while (e < len) {
            uint32_t nx;
            int n = kiln_utf8_decode(t + e, &nx);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)cp, (utf8proc_int32_t)nx, &state)) break;
            cp = nx;
            e += (size_t)n;
        }
        size_t rl;
        const char *r = e - g < 6 ? first_match(m, t + g, e - g, &rl) : NULL;
        if (r) ok = put(&o, r, rl);
        else
            for (size_t c = g; c < e && ok;) {
                uint32_t x;
                size_t n = (size_t)kiln_utf8_decode(t + c, &x);
                r = first_match(m, t + c, n, &rl);
                ok = r ? put(&o, r, rl) : put(&o, text + c, n);
                c += n;
            }
        g = e;
    }
    if (!ok) {
        kiln_free(o.p);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory normalising %zu bytes", len);
    }
    o.p[o.n] = '\0';
    *out = o.p;
    *out_len = o.n;
    return KILN_OK;
}

/* ---- base64 ---- */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

kiln_status kiln_base64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len, kiln_err *err) {
    *out = NULL;
    *out_len = 0;
    while (len && s[len - 1] == '=') len--;
    if (len % 4 == 1) return KILN_FAIL(err, KILN_E_FORMAT, "base64 text has a dangling character");
    unsigned char *b = kiln_malloc(len / 4 * 3 + 3);
    if (!b) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory decoding base64");
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            kiln_free(b);
            return KILN_FAIL(err, KILN_E_FORMAT, "base64 text has a bad character at %zu", i);
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    *out = b;
    *out_len = n;
    return KILN_OK;
}
