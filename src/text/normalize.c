/* normalize.c - the tokenizer's normaliser: none, Unicode NFC through utf8proc, or (dispatched from here) CLIP's
 * (clip.c) or SentencePiece's precompiled charsmap (charsmap.c).
 *
 * Fast path: a code point below U+0300 is NFC-stable and never composes with what precedes it (the first
 * combining mark is U+0300; Hangul jamo and every other composing character lie above), so text whose bytes
 * are all below 0xCC (the lead byte of U+0300) is already NFC and is returned as is, with no allocation.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/alloc.h"
#include "text/tok_internal.h"
#include "text/unicode_compat.h"

kiln_status kiln_nfc(const char *text, size_t len, const char **out, size_t *out_len, char **owned, kiln_err *err) {
    *out = text;
    *out_len = len;
    *owned = NULL;
    if (len == 0) return KILN_OK;
    bool simple = true;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] >= 0xCC) {
            simple = false;
            break;
        }
    if (simple) return KILN_OK;
    if (len > (size_t)(PTRDIFF_MAX / 8)) return KILN_FAIL(err, KILN_E_LIMIT, "text too long to normalise");
    /* pieces between boundary code points, each normalised by utf8proc; the boundaries are copied as they are */
    char *res = NULL;
    size_t res_len = 0, res_cap = 0, piece = 0, i = 0;
    bool cut = false;
    while (i <= len) {
        uint32_t cp = 0;
        int n = 1;
        bool boundary = false;
        if (i < len && (unsigned char)text[i] >= 0xC0) {
            n = kiln_utf8_decode((const unsigned char *)text + i, &cp);
            boundary = kiln_cp_in(kiln_hf_nfc_boundary, kiln_hf_nfc_boundary_count, cp);
        }
        if (!boundary && i < len) {
            i += (size_t)n;
            continue;
        }
        if (!cut && i == len) break; /* no boundary at all: one utf8proc call below */
        cut = true;
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t m = 0;
        if (i > piece) {
            m = utf8proc_map((const utf8proc_uint8_t *)text + piece, (utf8proc_ssize_t)(i - piece), &dst,
                             (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
            if (m < 0) {
                free(res);
                return KILN_FAIL(err, m == UTF8PROC_ERROR_NOMEM ? KILN_E_NOMEM : KILN_E_INVALID,
                                 "NFC normalisation failed: %s", utf8proc_errmsg(m));
            }
        }
        size_t add = (size_t)m + (i < len ? (size_t)n : 0);
        if (res_len + add + 1 > res_cap) {
            size_t cap = res_cap ? res_cap : len + 16;
            while (cap < res_len + add + 1) cap *= 2;
            char *r = realloc(res, cap);
            if (!r) {
                free(dst);
                free(res);
                return KILN_FAIL(err, KILN_E_NOMEM, "out of memory normalising text");
            }
            res = r;
            res_cap = cap;
        }
        if (m) memcpy(res + res_len, dst, (size_t)m);
        free(dst);
        res_len += (size_t)m;
        if (i < len) {
            memcpy(res + res_len, text + i, (size_t)n);
            res_len += (size_t)n;
        }
        i += (size_t)n;
        piece = i;
    }
    if (cut) {
        *out = res;
        *out_len = res_len;
        *owned = res;
        return KILN_OK;
    }
    utf8proc_uint8_t *dst = NULL;
    /* no UTF8PROC_NULLTERM: NUL is an ordinary character, as in a Rust string */
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &dst,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) {
        if (n == UTF8PROC_ERROR_NOMEM) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory normalising text");
        return KILN_FAIL(err, KILN_E_INVALID, "NFC normalisation failed: %s", utf8proc_errmsg(n));
    }
    *out = (const char *)dst;
    *out_len = (size_t)n;
    *owned = (char *)dst;
    return KILN_OK;
}

kiln_status kiln_normalize(const kiln_tokenizer *tok, const char *text, size_t len, const char **out,
                           size_t *out_len, char **owned, kiln_err *err) {
    *out = text;
    *out_len = len;
    *owned = NULL;
    if (len == 0) return KILN_OK;
    char *res = NULL;
    size_t n = 0;
    switch (tok->normalizer) {
    case KILN_NORM_NONE: return KILN_OK;
    case KILN_NORM_NFC: return kiln_nfc(text, len, out, out_len, owned, err);
    case KILN_NORM_CLIP: KILN_TRY(kiln_clip_normalize(text, len, &res, &n, err)); break;
    case KILN_NORM_PRECOMPILED: KILN_TRY(kiln_charsmap_normalize(tok->charsmap, text, len, &res, &n, err)); break;
    }
    /* the contract is free(): copy into a malloc'd buffer (kiln_malloc is not plain malloc) */
    char *m = malloc(n + 1);
    if (!m) {
        kiln_free(res);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory normalising text");
    }
    memcpy(m, res, n);
    m[n] = '\0';
    kiln_free(res);
    *out = m;
    *out_len = n;
    *owned = m;
    return KILN_OK;
}
