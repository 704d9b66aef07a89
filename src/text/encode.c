/* encode.c - text -> ids in HF's order (added tokens in the raw text, then normalise, pre-tokenize, BPE), the
 * prompt template, padding/truncation and the mask, and ids -> text. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

/* ---- added tokens ---- */

/* The next added token (of the given normalized kind) in text[from..len), leftmost then longest, as HF's
 * Aho-Corasick with MatchKind::LeftmostLongest finds it. lstrip/rstrip widen the match over White_Space
 * (never back past `floor`, the end of the previous match), as HF's AddedVocabulary::find_matches does.
 * Returns the token index or -1; start and stop bound the span the token consumes. */
static long next_added(const kiln_tokenizer *tok, const char *text, size_t len, size_t from, size_t floor,
                       bool normalized, size_t *start, size_t *stop) {
    for (size_t i = from; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!normalized && !(tok->added_first[c >> 6] & (1ull << (c & 63)))) continue;
        long best = -1;
        for (size_t k = 0; k < tok->n_added; k++) {
            const kiln_added_token *a = &tok->added[k];
            if (a->normalized != normalized || a->len > len - i || (best >= 0 && a->len <= tok->added[best].len))
                continue;
            if (memcmp(text + i, a->content, a->len) == 0) best = (long)k;
        }
        if (best < 0) continue;
        const kiln_added_token *a = &tok->added[best];
        size_t s = i, e = i + a->len;
        if (a->lstrip) { /* back over whitespace characters */
            while (s > floor) {
                size_t p = s - 1;
                while (p > floor && ((unsigned char)text[p] & 0xC0) == 0x80) p--;
                uint32_t cp;
                kiln_utf8_decode((const unsigned char *)text + p, &cp);
                if (!kiln_unicode_is_white_space(cp)) break;
                s = p;
            }
        }
        if (a->rstrip) {
            while (e < len) {
                uint32_t cp;
                int n = kiln_utf8_decode((const unsigned char *)text + e, &cp);
                if (!kiln_unicode_is_white_space(cp)) break;
                e += (size_t)n;
            }
        }
        *start = s;
        *stop = e;
        return best;
    }
    return -1;
}

/* Pre-tokenizer + model of the tokenizer's kind over a normalised stretch with no added token in it. */
static kiln_status pretok_encode(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                                 kiln_err *err) {
    switch (tok->kind) {
    case KILN_TOK_CLIP: return kiln_pretok_encode_clip(tok, text, len, out, err);
    case KILN_TOK_T5: return kiln_unigram_encode(tok, text, len, out, err);
    case KILN_TOK_QWEN3: break;
    }
    return kiln_pretok_encode(tok, text, len, out, err);
}

/* A normalised stretch: split out normalized added tokens, pre-tokenize + BPE the rest. */
static kiln_status encode_normalized(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                                     kiln_err *err) {
    size_t at = 0;
    if (tok->any_normalized_added) {
        size_t s, e;
        long k;
        while ((k = next_added(tok, text, len, at, at, true, &s, &e)) >= 0) {
            KILN_TRY(pretok_encode(tok, text + at, s - at, out, err));
            KILN_TRY(kiln_idbuf_push(out, tok->added[k].id, err));
            at = e;
        }
    }
    return pretok_encode(tok, text + at, len - at, out, err);
}

/* A raw stretch with no (non-normalised) added token in it. */
static kiln_status encode_raw(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                              kiln_err *err) {
    if (len == 0) return KILN_OK;
    const char *norm;
    size_t nlen;
    char *owned;
    KILN_TRY(kiln_normalize(tok, text, len, &norm, &nlen, &owned, err));
    kiln_status st = encode_normalized(tok, norm, nlen, out, err);
    free(owned);
    return st;
}

static kiln_status encode_into(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                               kiln_err *err) {
    if (!tok) return KILN_FAIL(err, KILN_E_INVALID, "no tokenizer");
    if (!text && len) return KILN_FAIL(err, KILN_E_INVALID, "NULL text with length %zu", len);
    if (!text) text = ""; /* NULL with length 0: empty text (and no pointer arithmetic on NULL below) */
    if (len > KILN_TOK_MAX_INPUT_BYTES)
        return KILN_FAIL(err, KILN_E_LIMIT, "text of %zu bytes is over the tokenizer's limit of %zu", len,
                         KILN_TOK_MAX_INPUT_BYTES);
    size_t bad = kiln_utf8_invalid_at(text, len);
    if (bad != len)
        return KILN_FAIL(err, KILN_E_INVALID, "text is not valid UTF-8: byte 0x%02x at offset %zu",
                         (unsigned char)text[bad], bad);
    size_t at = 0, s, e;
    long k;
    while ((k = next_added(tok, text, len, at, at, false, &s, &e)) >= 0) {
        KILN_TRY(encode_raw(tok, text + at, s - at, out, err));
        KILN_TRY(kiln_idbuf_push(out, tok->added[k].id, err));
        at = e;
    }
    return encode_raw(tok, text + at, len - at, out, err);
}

kiln_status kiln_tokenizer_encode(const kiln_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                                  size_t *n, kiln_err *err) {
    *ids = NULL;
    *n = 0;
    kiln_idbuf b = {0};
    kiln_status st = encode_into(tok, text, len, &b, err);
    if (st == KILN_OK && !b.v) st = kiln_idbuf_append(&b, NULL, 0, err); /* non-NULL even when empty */
    if (st != KILN_OK) {
        kiln_free(b.v);
        return st;
    }
    *ids = b.v;
    *n = b.n;
    return KILN_OK;
}

/* ---- templates and padding ---- */

typedef struct tmpl {
    const char *name, *prefix, *suffix;
} tmpl;

/* spec 2.4: Qwen3 chat template, one user turn, add_generation_prompt, enable_thinking=False */
static const tmpl templates[] = {
    [KILN_TEMPLATE_NONE] = {"none", "", ""},
    [KILN_TEMPLATE_KLEIN] = {"klein", "<|im_start|>user\n",
                             "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
};

bool kiln_tok_template_parse(const char *name, kiln_tok_template *out) {
    for (size_t i = 0; name && i < sizeof templates / sizeof templates[0]; i++)
        if (!strcmp(name, templates[i].name)) {
            *out = (kiln_tok_template)i;
            return true;
        }
    return false;
}

kiln_tok_options kiln_tok_options_klein(void) {
    return (kiln_tok_options){KILN_TEMPLATE_KLEIN, KILN_PAD_DIFFUSERS, KILN_TOK_DEFAULT_MAX_LEN, KILN_QWEN3_PAD_ID};
}

kiln_tok_options kiln_tok_options_flux1_clip(void) {
    return (kiln_tok_options){KILN_TEMPLATE_NONE, KILN_PAD_DIFFUSERS, 77, -1};
}

kiln_tok_options kiln_tok_options_flux1_t5(size_t max_sequence_length) {
    return (kiln_tok_options){KILN_TEMPLATE_NONE, KILN_PAD_DIFFUSERS, max_sequence_length, -1};
}

void kiln_tokens_free(kiln_tokens *t) {
    if (!t) return;
    kiln_free(t->ids);
    kiln_free(t->mask);
    memset(t, 0, sizeof *t);
}

kiln_status kiln_tokenizer_encode_prompt(const kiln_tokenizer *tok, const char *prompt, size_t len,
                                         const kiln_tok_options *opt, kiln_tokens *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    kiln_tok_options o = opt ? *opt : kiln_tok_options_klein();
    if ((unsigned)o.template_kind >= sizeof templates / sizeof templates[0])
        return KILN_FAIL(err, KILN_E_INVALID, "unknown prompt template %d", (int)o.template_kind);
    if ((unsigned)o.padding > KILN_PAD_COMFY)
        return KILN_FAIL(err, KILN_E_INVALID, "unknown padding mode %d", (int)o.padding);
    if (o.max_length == 0) o.max_length = KILN_TOK_DEFAULT_MAX_LEN;
    if (o.max_length > ((size_t)1 << 20))
        return KILN_FAIL(err, KILN_E_INVALID, "max_length %zu is over 1048576", o.max_length);
    if (!tok) return KILN_FAIL(err, KILN_E_INVALID, "no tokenizer");
    if (o.pad_id < 0) o.pad_id = tok->pad_id;
    if (tok->kind != KILN_TOK_QWEN3 && (o.template_kind != KILN_TEMPLATE_NONE || o.padding == KILN_PAD_COMFY))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: the klein template and ComfyUI padding are Qwen3's only",
                         kiln_tok_kind_name(tok->kind));
    /* the post-processor's tokens around the text (RobertaProcessing / TemplateProcessing) */
    size_t n_special = (tok->bos_id >= 0) + (tok->eos_id >= 0);
    if (o.padding == KILN_PAD_DIFFUSERS && o.max_length < n_special)
        return KILN_FAIL(err, KILN_E_INVALID, "max_length %zu leaves no room for the %zu special tokens",
                         o.max_length, n_special);
    if ((size_t)o.pad_id >= tok->n_ids)
        return KILN_FAIL(err, KILN_E_INVALID, "pad id %d is not in the vocabulary", o.pad_id);
    if (!prompt && len) return KILN_FAIL(err, KILN_E_INVALID, "NULL prompt with length %zu", len);
    if (len > KILN_TOK_MAX_INPUT_BYTES)
        return KILN_FAIL(err, KILN_E_LIMIT, "prompt of %zu bytes is over the tokenizer's limit of %zu", len,
                         KILN_TOK_MAX_INPUT_BYTES);

    size_t bad = kiln_utf8_invalid_at(prompt, len); /* checked here so the offset is the prompt's own */
    if (bad != len)
        return KILN_FAIL(err, KILN_E_INVALID, "prompt is not valid UTF-8: byte 0x%02x at offset %zu",
                         (unsigned char)prompt[bad], bad);

    /* the template is applied to the text and the whole string encoded at once, as transformers does */
    const tmpl *t = &templates[o.template_kind];
    size_t lp = strlen(t->prefix), ls = strlen(t->suffix);
    char *text = kiln_malloc(lp + len + ls + 1);
    if (!text) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a %zu-byte prompt", len);
    memcpy(text, t->prefix, lp);
    if (len) memcpy(text + lp, prompt, len);
    memcpy(text + lp + len, t->suffix, ls);
    kiln_idbuf b = {0};
    kiln_status st = KILN_OK;
    if (tok->bos_id >= 0) st = kiln_idbuf_push(&b, tok->bos_id, err);
    if (st == KILN_OK) st = encode_into(tok, text, lp + len + ls, &b, err);
    kiln_free(text);
    /* transformers truncates the text to max_length minus the special tokens, then adds them */
    size_t n_full = b.n + (tok->eos_id >= 0);
    if (st == KILN_OK && o.padding == KILN_PAD_DIFFUSERS && n_full > o.max_length) b.n = o.max_length - (tok->eos_id >= 0);
    if (st == KILN_OK && tok->eos_id >= 0) st = kiln_idbuf_push(&b, tok->eos_id, err);
    if (st != KILN_OK) {
        kiln_free(b.v);
        return st;
    }
    size_t n_real = b.n, n = b.n;
    if (o.padding == KILN_PAD_DIFFUSERS) n = o.max_length; /* truncation side "right": the tail goes */
    else if (o.padding == KILN_PAD_COMFY && n < o.max_length) n = o.max_length;
    int32_t *ids = kiln_realloc(b.v, (n ? n : 1) * sizeof *ids);
    uint8_t *mask = kiln_malloc(n ? n : 1);
    if (!ids || !mask) {
        kiln_free(ids ? ids : b.v);
        kiln_free(mask);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for %zu tokens", n);
    }
    for (size_t i = n_real; i < n; i++) ids[i] = o.pad_id;
    memset(mask, 1, n_real);
    memset(mask + n_real, 0, n - n_real);
    *out = (kiln_tokens){ids, mask, n, n_real, n_full, n_full > n_real};
    return KILN_OK;
}

/* ---- decoding ---- */

/* Length of the maximal invalid subpart at s (>= 1), the unit Rust's from_utf8_lossy replaces by one U+FFFD. */
static size_t invalid_run(const unsigned char *s, size_t len) {
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else return 1;
    size_t k = 1;
    if (k < len && s[k] >= lo && s[k] <= hi) {
        k++;
        while (k <= need && k < len && (s[k] & 0xC0) == 0x80) k++;
    }
    return k;
}

kiln_status kiln_tokenizer_decode(const kiln_tokenizer *tok, const int32_t *ids, size_t n, char **out,
                                  size_t *out_len, kiln_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!tok || (!ids && n)) return KILN_FAIL(err, KILN_E_INVALID, "no tokenizer or ids");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        if (!kiln_tokenizer_piece(tok, ids[i], &l))
            return KILN_FAIL(err, KILN_E_INVALID, "id %d (position %zu) is not in the vocabulary", ids[i], i);
        total += l;
    }
    char *raw = kiln_malloc(total + 1);
    /* worst case every byte becomes U+FFFD (3 bytes) */
    size_t cap;
    if (!kiln_mul_size(total, 3, &cap) || !kiln_add_size(cap, 1, &cap)) {
        kiln_free(raw);
        return KILN_FAIL(err, KILN_E_NOMEM, "decode size overflow");
    }
    char *res = kiln_malloc(cap);
    if (!raw || !res) {
        kiln_free(raw);
        kiln_free(res);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory decoding %zu ids", n);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *p = kiln_tokenizer_piece(tok, ids[i], &l);
        memcpy(raw + k, p, l);
        k += l;
    }
    size_t at = 0, o = 0;
    while (at < total) {
        size_t bad = at + kiln_utf8_invalid_at(raw + at, total - at);
        memcpy(res + o, raw + at, bad - at);
        o += bad - at;
        if (bad == total) break;
        memcpy(res + o, "\xEF\xBF\xBD", 3);
        o += 3;
        at = bad + invalid_run((const unsigned char *)raw + bad, total - bad);
    }
    res[o] = '\0';
    kiln_free(raw);
    *out = res;
    if (out_len) *out_len = o;
    return KILN_OK;
}
