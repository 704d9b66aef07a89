/* comfy_prompt.c - ComfyUI's prompt weights and FLUX.1 token sequences (see comfy_prompt.h). The parser follows
 * sd1_clip.py's escape_important / parse_parentheses / token_weights step by step; it works on bytes, which is the
 * same as Python's code points here because '(', ')', ':' and '\\' are ASCII and never part of a UTF-8 sequence. */
#include "text/comfy_prompt.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/bytes.h"

#define MAX_DEPTH 256 /* nested groups; Python's recursion limit stops ComfyUI itself near 1000 */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static bool sb_put(sbuf *b, const char *s, size_t n) { return kiln_bytes_append(&b->p, &b->n, &b->cap, 64, s, n); }

typedef struct seglist {
    kiln_comfy_segment *v;
    size_t n, cap;
} seglist;

/* unescape_important: the placeholders back to literal parentheses */
static bool seg_add(seglist *l, const char *s, size_t n, double w) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        kiln_comfy_segment *v = kiln_realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    sbuf b = {0};
    if (!sb_put(&b, "", 0)) return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == 0 && i + 1 < n && (s[i + 1] == 1 || s[i + 1] == 2)) {
            if (!sb_put(&b, s[i + 1] == 1 ? ")" : "(", 1)) break;
            i++;
        } else if (!sb_put(&b, s + i, 1)) {
            break;
        }
    }
    if (!b.p) return false;
    l->v[l->n++] = (kiln_comfy_segment){b.p, b.n, w};
    return true;
}

/* Python's float(s) for ASCII text: surrounding whitespace, a sign, digits with single '_' between digits, a
 * fraction, an exponent, or inf / infinity / nan in any case. Non-ASCII digits and spaces (which Python also
 * takes) are not taken: the group then keeps ComfyUI's 1.1 and its ":w" stays text, a documented difference. */
static bool py_float(const char *s, size_t n, double *out) {
    size_t a = 0, b = n;
    while (a < b && strchr(" \t\n\r\f\v", s[a])) a++;
    while (b > a && strchr(" \t\n\r\f\v", s[b - 1])) b--;
    if (a == b || b - a > 300) return false;
    char buf[320];
    size_t k = 0, i = a;
    if (s[i] == '+' || s[i] == '-') buf[k++] = s[i++];
    size_t rest = b - i;
    static const char *const words[] = {"inf", "infinity", "nan"};
    for (int w = 0; w < 3; w++)
        if (rest == strlen(words[w]) && !strncasecmp(s + i, words[w], rest)) {
            double v = w == 2 ? NAN : INFINITY;
            *out = buf[0] == '-' && k ? -v : v;
            return true;
        }
    bool digits = false, exp_digits = false, in_exp = false, dot = false;
    for (; i < b; i++) {
        char c = s[i];
        if (isdigit((unsigned char)c)) {
            buf[k++] = c;
            if (in_exp) exp_digits = true;
            else digits = true;
        } else if (c == '_') { /* only between two digits */
            if (i == a || i + 1 >= b || !isdigit((unsigned char)s[i - 1]) || !isdigit((unsigned char)s[i + 1]))
                return false;
        } else if (c == '.' && !dot && !in_exp) {
            buf[k++] = c;
            dot = true;
        } else if ((c == 'e' || c == 'E') && !in_exp && digits) {
            buf[k++] = c;
            in_exp = true;
            if (i + 1 < b && (s[i + 1] == '+' || s[i + 1] == '-')) buf[k++] = s[++i];
        } else {
            return false;
        }
    }
    if (!digits || (in_exp && !exp_digits)) return false;
    buf[k] = 0;
    *out = strtod(buf, NULL);
    return true;
}

/* parse_parentheses + token_weights on s[0..n) at weight w */
static kiln_status weights(const char *s, size_t n, double w, int depth, seglist *out, kiln_err *err) {
    if (depth > MAX_DEPTH) return KILN_FAIL(err, KILN_E_LIMIT, "prompt weights nested deeper than %d", MAX_DEPTH);
    size_t start = 0, i = 0;
    long nesting = 0;
    /* parse_parentheses: pieces are the text between top-level groups and the groups themselves */
    while (i <= n) {
        bool end = i == n;
        char c = end ? 0 : s[i];
        size_t piece_end = 0;
        bool emit = false;
        if (!end && c == '(') {
            if (nesting == 0 && i > start) { /* the text before the group */
                piece_end = i;
                emit = true;
            }
            nesting++;
        } else if (!end && c == ')') {
            nesting--;
            if (nesting == 0) {
                piece_end = i + 1;
                emit = true;
            }
        } else if (end && i > start) {
            piece_end = i;
            emit = true;
        }
        if (emit) {
            const char *x = s + start;
            size_t xl = piece_end - start;
            if (xl >= 2 && x[0] == '(' && x[xl - 1] == ')') {
                x++;
                xl -= 2;
                double gw = w * 1.1;
                size_t colon = xl;
                for (size_t k = xl; k-- > 0;)
                    if (x[k] == ':') {
                        colon = k;
                        break;
                    }
                double v;
                if (colon != xl && colon > 0 && py_float(x + colon + 1, xl - colon - 1, &v)) {
                    gw = v;
                    xl = colon;
                }
                KILN_TRY(weights(x, xl, gw, depth + 1, out, err));
            } else if (!seg_add(out, x, xl, w)) {
                return KILN_FAIL(err, KILN_E_NOMEM, "out of memory parsing the prompt");
            }
            start = piece_end;
        }
        i++;
    }
    return KILN_OK;
}

void kiln_comfy_segments_free(kiln_comfy_segment *segs, size_t n) {
    for (size_t i = 0; segs && i < n; i++) kiln_free(segs[i].text);
    kiln_free(segs);
}

kiln_status kiln_comfy_parse_weights(const char *text, size_t len, kiln_comfy_segment **segs, size_t *n,
                                     kiln_err *err) {
    *segs = NULL;
    *n = 0;
    if (len > KILN_TOK_MAX_INPUT_BYTES)
        return KILN_FAIL(err, KILN_E_LIMIT, "prompt of %zu bytes (at most %zu)", len, KILN_TOK_MAX_INPUT_BYTES);
    /* escape_important: "\)" then "\(" become placeholders that the parser passes over */
    sbuf e = {0}, f = {0};
    bool ok = sb_put(&e, "", 0) && sb_put(&f, "", 0);
    for (size_t i = 0; ok && i < len; i++) {
        if (text[i] == '\\' && i + 1 < len && text[i + 1] == ')') ok = sb_put(&e, "\0\1", 2), i++;
        else ok = sb_put(&e, text + i, 1);
    }
    for (size_t i = 0; ok && i < e.n; i++) {
        if (e.p[i] == '\\' && i + 1 < e.n && e.p[i + 1] == '(') ok = sb_put(&f, "\0\2", 2), i++;
        else ok = sb_put(&f, e.p + i, 1);
    }
    kiln_free(e.p);
    seglist l = {0};
    kiln_status s = ok ? weights(f.p, f.n, 1.0, 0, &l, err) : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    kiln_free(f.p);
    if (s != KILN_OK) {
        kiln_comfy_segments_free(l.v, l.n);
        return s;
    }
    *segs = l.v;
    *n = l.n;
    return KILN_OK;
}

void kiln_comfy_tokens_free(kiln_comfy_tokens *t) {
    if (!t) return;
    kiln_free(t->ids);
    kiln_free(t->weights);
    memset(t, 0, sizeof *t);
}

typedef struct tokbuf {
    int32_t *ids;
    double *w;
    size_t n, cap;
} tokbuf;

static bool tb_put(tokbuf *b, int32_t id, double w) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 128;
        int32_t *ids = kiln_realloc(b->ids, cap * sizeof *ids);
        if (!ids) return false;
        b->ids = ids;
        double *ww = kiln_realloc(b->w, cap * sizeof *ww);
        if (!ww) return false;
        b->w = ww;
        b->cap = cap;
    }
    b->ids[b->n] = id;
    b->w[b->n++] = w;
    return true;
}

/* The tokenizer's start and end ids, as SDTokenizer reads them from tokenizer('') (CLIP: both; T5: end only). */
static kiln_status special_ids(const kiln_tokenizer *tok, int32_t *start, int32_t *end, kiln_err *err) {
    kiln_tok_options o = {.template_kind = KILN_TEMPLATE_NONE, .padding = KILN_PAD_NONE, .pad_id = -1};
    kiln_tokens t;
    KILN_TRY(kiln_tokenizer_encode_prompt(tok, "", 0, &o, &t, err));
    *start = t.n == 2 ? t.ids[0] : -1;
    *end = t.n ? t.ids[t.n - 1] : -1;
    size_t n = t.n;
    kiln_tokens_free(&t);
    if (n < 1 || n > 2 || *end < 0) return KILN_FAIL(err, KILN_E_INVALID, "the tokenizer has no end token");
    return KILN_OK;
}

kiln_status kiln_comfy_tokenize(const kiln_tokenizer *tok, kiln_comfy_encoder enc, const char *text, size_t len,
                                kiln_comfy_tokens *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    int32_t start, end;
    KILN_TRY(special_ids(tok, &start, &end, err));
    bool clip = enc == KILN_COMFY_CLIP_L;
    if (clip != (start >= 0))
        return KILN_FAIL(err, KILN_E_INVALID, "ComfyUI's %s tokenisation with a %s tokenizer", clip ? "CLIP-L" : "T5",
                         start >= 0 ? "CLIP" : "T5");
    kiln_comfy_segment *segs;
    size_t n_segs;
    KILN_TRY(kiln_comfy_parse_weights(text, len, &segs, &n_segs, err));
    tokbuf b = {0};
    kiln_status s = KILN_OK;
    bool ok = !clip || tb_put(&b, start, 1.0), first_open = true, weighted = false;
    size_t real = 0, dropped = 0;
    for (size_t g = 0; g < n_segs && ok && s == KILN_OK; g++) {
        if (!segs[g].len) continue; /* ComfyUI drops empty pieces */
        int32_t *ids;
        size_t n;
        if ((s = kiln_tokenizer_encode(tok, segs[g].text, segs[g].len, &ids, &n, err)) != KILN_OK) break;
        double w = segs[g].weight;
        size_t k = 0;
        if (!clip) { /* T5: one sequence of every token (max_length 99999999) */
            for (; k < n && ok; k++) ok = tb_put(&b, ids[k], w);
            real += n;
            weighted |= n && w != 1.0;
        } else { /* CLIP-L: the first 77-token chunk, built as SDTokenizer builds its chunks */
            bool large = n >= 8;
            while (k < n && first_open && ok) {
                if ((n - k) + b.n > KILN_COMFY_CLIP_LENGTH - 1) {
                    size_t room = KILN_COMFY_CLIP_LENGTH - b.n - 1;
                    if (large)
                        for (size_t j = 0; j < room && ok; j++, k++) ok = tb_put(&b, ids[k], w), real++;
                    first_open = false; /* end token and padding below; what is left goes to later chunks */
                } else {
                    for (; k < n && ok; k++) ok = tb_put(&b, ids[k], w), real++;
                }
            }
            dropped += n - k;
        }
        kiln_free(ids);
    }
    kiln_comfy_segments_free(segs, n_segs);
    ok = ok && tb_put(&b, end, 1.0);
    size_t want = clip ? KILN_COMFY_CLIP_LENGTH : KILN_COMFY_T5_MIN_LENGTH;
    int32_t pad = clip ? end : 0; /* CLIP pads with its end token (pad_with_end), T5 with <pad> 0 */
    while (ok && b.n < want) ok = tb_put(&b, pad, 1.0);
    if (s == KILN_OK && !ok) s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the prompt's tokens");
    if (s != KILN_OK) {
        kiln_free(b.ids);
        kiln_free(b.w);
        return s;
    }
    *out = (kiln_comfy_tokens){b.ids, b.w, b.n, real, dropped, clip ? false : weighted};
    return KILN_OK;
}
