/* pretok.c - the pre-tokenizer: split normalised text with the file's regex (HF "Split", behaviour Isolated:
 * every match is a piece and so is every stretch between matches), then BPE each piece's bytes.
 *
 * PCRE2 runs the pattern with UTF + UCP, so \p{L}, \p{N} and \s are Unicode classes as in HF's Oniguruma, and
 * with the JIT when the platform has one. The text was validated as UTF-8 before it got here, so matching
 * skips PCRE2's own check.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "text/tok_internal.h"
#include "text/unicode_compat.h"

/* ---- translating the pattern from Oniguruma's classes to PCRE2's ----
 * HF compiles the pattern with Oniguruma. PCRE2 reads the same syntax, but three classes differ: \s (PCRE2 adds
 * U+180E), \p{L} and \p{N} (Oniguruma's Unicode tables are newer). unicode_compat.c holds the measured
 * differences; here each \s becomes Oniguruma's explicit set and each \p{L} / \p{N} gains the missing ranges.
 * Escapes whose meaning differs and that no supported tokenizer uses (\w \d \h \v \b, their negations, \P{L},
 * \P{N}, \S inside a class, \Q) are refused rather than silently matched differently. */

typedef struct strbuf {
    char *p;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = kiln_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_ranges(strbuf *b, const kiln_cp_range *r, size_t n) {
    char tmp[40];
    for (size_t i = 0; i < n; i++) {
        int k = r[i].lo == r[i].hi ? snprintf(tmp, sizeof tmp, "\\x{%X}", r[i].lo)
                                   : snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", r[i].lo, r[i].hi);
        sb_add(b, tmp, (size_t)k);
    }
}

kiln_status kiln_pretok_translate(const char *in, char **out, kiln_err *err) {
    strbuf b = {0};
    bool in_class = false;
    *out = NULL;
    for (size_t i = 0; in[i]; i++) {
        char c = in[i];
        if (c == '[' && !in_class) {
            in_class = true;
            sb_add(&b, "[", 1);
            if (in[i + 1] == '^') sb_add(&b, &in[++i], 1);
            if (in[i + 1] == ']') sb_add(&b, &in[++i], 1); /* a leading ] is literal */
            continue;
        }
        if (c == ']' && in_class) {
            in_class = false;
            sb_add(&b, "]", 1);
            continue;
        }
        if (c != '\\') {
            sb_add(&b, &c, 1);
            continue;
        }
        char e = in[i + 1];
        if (!e) break;
        const char *rest = &in[i + 2];
        if (e == 's' || (e == 'S' && !in_class)) {
            sb_str(&b, in_class ? "" : e == 's' ? "[" : "[^");
            sb_ranges(&b, kiln_onig_white_space, kiln_onig_white_space_count);
            if (!in_class) sb_add(&b, "]", 1);
            i++;
        } else if (e == 'p' && (!strncmp(rest, "{L}", 3) || !strncmp(rest, "{N}", 3) || *rest == 'L' || *rest == 'N')) {
            bool letter = rest[0] == 'L' || rest[1] == 'L';
            sb_str(&b, in_class ? "" : "[");
            sb_str(&b, letter ? "\\p{L}" : "\\p{N}");
            if (letter) sb_ranges(&b, kiln_onig_letter_extra, kiln_onig_letter_extra_count);
            else sb_ranges(&b, kiln_onig_number_extra, kiln_onig_number_extra_count);
            if (!in_class) sb_add(&b, "]", 1);
            i += 1 + (rest[0] == '{' ? 3 : 1);
        } else if (strchr("wWdDhHvVbBQS", e) ||
                   (e == 'P' && (*rest == 'L' || *rest == 'N' || !strncmp(rest, "{L}", 3) || !strncmp(rest, "{N}", 3)))) {
            kiln_free(b.p);
            return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                             "pre-tokenizer regex uses \\%c%s, which Oniguruma (HF) and PCRE2 define differently",
                             e, in_class ? " inside a class" : "");
        } else {
            sb_add(&b, &in[i], 2); /* any other escape means the same in both */
            i++;
        }
    }
    if (b.oom || !b.p) {
        kiln_free(b.p);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory translating the pre-tokenizer regex");
    }
    *out = b.p;
    return KILN_OK;
}

kiln_status kiln_regex_compile(const char *file_pattern, void **re_out, bool *jit, kiln_err *err) {
    int ec;
    PCRE2_SIZE eo;
    char *pattern;
    KILN_TRY(kiln_pretok_translate(file_pattern, &pattern, err));
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    log_debug("pre-tokenizer regex for PCRE2: %s", pattern);
    kiln_free(pattern);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "pre-tokenizer regex does not compile at offset %zu: %s",
                         (size_t)eo, (const char *)msg);
    }
    uint32_t minlen = 0;
    if (pcre2_pattern_info(re, PCRE2_INFO_MINLENGTH, &minlen) != 0 || minlen == 0) {
        /* HF and PCRE2 step over empty matches differently; no byte-level tokenizer needs them */
        pcre2_code_free(re);
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "pre-tokenizer regex can match the empty string");
    }
    *re_out = re;
    *jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    if (!*jit) log_info("PCRE2 JIT unavailable; the pre-tokenizer regex runs interpreted (slower)");
    return KILN_OK;
}

kiln_status kiln_pretok_compile(kiln_tokenizer *tok, const char *file_pattern, kiln_err *err) {
    return kiln_regex_compile(file_pattern, &tok->regex, &tok->regex_jit, err);
}

void kiln_pretok_free(kiln_tokenizer *tok) {
    pcre2_code_free((pcre2_code *)tok->regex);
    pcre2_code_free((pcre2_code *)tok->regex2);
    tok->regex = tok->regex2 = NULL;
}

/* One match from offset `at`: 1 and [*s, *e) on a match, 0 on none, <0 a PCRE2 error. Retries with a larger
 * JIT stack (created on demand, freed by the caller via *ctx / *stack) when the default 32 KiB is too small. */
static int match_at(const pcre2_code *re, bool jit, const char *text, size_t len, size_t at, pcre2_match_data *md,
                    pcre2_match_context **ctx, pcre2_jit_stack **stack, size_t *s, size_t *e) {
    for (int attempt = 0;; attempt++) {
        int rc = jit
                     ? pcre2_jit_match(re, (PCRE2_SPTR)text, len, at, PCRE2_NO_UTF_CHECK, md, *ctx)
                     : pcre2_match(re, (PCRE2_SPTR)text, len, at, PCRE2_NO_UTF_CHECK, md, *ctx);
        if (rc == PCRE2_ERROR_NOMATCH) return 0;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && attempt == 0 && !*stack) {
            *ctx = pcre2_match_context_create(NULL);
            *stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
            if (!*ctx || !*stack) return PCRE2_ERROR_NOMEMORY;
            pcre2_jit_stack_assign(*ctx, NULL, *stack);
            continue;
        }
        if (rc < 0) return rc;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        *s = ov[0];
        *e = ov[1];
        return 1;
    }
}

kiln_status kiln_pretok_encode(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                               kiln_err *err) {
    if (len == 0) return KILN_OK;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern((const pcre2_code *)tok->regex, NULL);
    if (!md) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for regex match data");
    pcre2_match_context *ctx = NULL;
    pcre2_jit_stack *stack = NULL;
    kiln_status st = KILN_OK;
    size_t at = 0;
    while (at < len && st == KILN_OK) {
        size_t s, e;
        int rc = match_at(tok->regex, tok->regex_jit, text, len, at, md, &ctx, &stack, &s, &e);
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = KILN_FAIL(err, rc == PCRE2_ERROR_NOMEMORY ? KILN_E_NOMEM : KILN_E_LIMIT,
                           "pre-tokenizer regex failed at byte %zu: %s", at, (const char *)msg);
            break;
        }
        if (rc == 0) { /* the rest is one gap piece */
            st = kiln_bpe_word(tok, text + at, len - at, false, out, err);
            break;
        }
        if (e == s) { /* cannot happen: compile refuses patterns whose minimum match length is 0 */
            st = KILN_FAIL(err, KILN_E_INTERNAL, "pre-tokenizer regex matched the empty string at byte %zu", s);
            break;
        }
        if (s > at) st = kiln_bpe_word(tok, text + at, s - at, false, out, err);
        if (st == KILN_OK) st = kiln_bpe_word(tok, text + s, e - s, false, out, err);
        at = e;
    }
    pcre2_match_data_free(md);
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    return st;
}

static kiln_status regex_failed(int rc, size_t at, kiln_err *err) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return KILN_FAIL(err, rc == PCRE2_ERROR_NOMEMORY ? KILN_E_NOMEM : KILN_E_LIMIT,
                     "pre-tokenizer regex failed at byte %zu: %s", at, (const char *)msg);
}

/* ByteLevel's split of one CLIP piece (behaviour Isolated: matches and gaps are both pieces), each BPE'd. */
static kiln_status clip_piece(const kiln_tokenizer *tok, const char *text, size_t len, pcre2_match_data *md,
                              pcre2_match_context **ctx, pcre2_jit_stack **stack, kiln_idbuf *out, kiln_err *err) {
    size_t at = 0;
    while (at < len) {
        size_t s, e;
        int rc = match_at(tok->regex2, tok->regex2_jit, text, len, at, md, ctx, stack, &s, &e);
        if (rc < 0) return regex_failed(rc, at, err);
        if (rc == 0) return kiln_bpe_word(tok, text + at, len - at, true, out, err);
        if (s > at) KILN_TRY(kiln_bpe_word(tok, text + at, s - at, true, out, err));
        KILN_TRY(kiln_bpe_word(tok, text + s, e - s, true, out, err));
        at = e;
    }
    return KILN_OK;
}

kiln_status kiln_pretok_encode_clip(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                                    kiln_err *err) {
    if (len == 0) return KILN_OK;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern((const pcre2_code *)tok->regex, NULL);
    pcre2_match_data *md2 = pcre2_match_data_create_from_pattern((const pcre2_code *)tok->regex2, NULL);
    pcre2_match_context *ctx = NULL, *ctx2 = NULL;
    pcre2_jit_stack *stack = NULL, *stack2 = NULL;
    kiln_status st = md && md2 ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "out of memory for regex match data");
    size_t at = 0;
    while (at < len && st == KILN_OK) { /* Split(Removed, invert): the matches are the pieces, gaps are dropped */
        size_t s, e;
        int rc = match_at(tok->regex, tok->regex_jit, text, len, at, md, &ctx, &stack, &s, &e);
        if (rc < 0) st = regex_failed(rc, at, err);
        if (rc <= 0) break;
        st = clip_piece(tok, text + s, e - s, md2, &ctx2, &stack2, out, err);
        at = e;
    }
    pcre2_match_data_free(md);
    pcre2_match_data_free(md2);
    pcre2_match_context_free(ctx);
    pcre2_match_context_free(ctx2);
    pcre2_jit_stack_free(stack);
    pcre2_jit_stack_free(stack2);
    return st;
}
