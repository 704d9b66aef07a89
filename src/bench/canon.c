/* canon.c - canonical JSON writer (see canon.h for the definition). */
#include "bench/canon.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (!b->failed && !kiln_bytes_append(&b->p, &b->len, &b->cap, 256, s, n)) b->failed = true;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

char *kiln_json_format_real(double d, char *buf, size_t cap) {
    if (!isfinite(d)) {
        snprintf(buf, cap, "null");
        return buf;
    }
    /* Shortest round-trip digits: try 1..17 significant digits in %e form. */
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e = [-]D[.DDD]e[+-]XX: split into sign, digit string and decimal exponent. */
    const char *s = e;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[24];
    size_t nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < sizeof digits - 1) digits[nd++] = *s;
    digits[nd] = 0;
    int exp10 = *s == 'e' ? atoi(s + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0; /* %e pads with zeros only at p > needed: trim */
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = -1; i > exp10; i--) out[o++] = '0';
            for (size_t i = 0; i < nd; i++) out[o++] = digits[i];
        } else {
            size_t intd = (size_t)exp10 + 1;
            for (size_t i = 0; i < intd; i++) out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > intd)
                for (size_t i = intd; i < nd; i++) out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++) out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(buf, cap, "%s", out);
    return buf;
}

static void put_string(sbuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (esc) {
            sb_put(b, s + i - run, run);
            run = 0;
            sb_puts(b, esc);
        } else {
            run++;
        }
    }
    sb_put(b, s + n - run, run);
    sb_put(b, "\"", 1);
}

static int cmp_key(const void *pa, const void *pb) {
    return strcmp(*(const char *const *)pa, *(const char *const *)pb); /* byte order = code point order */
}

static kiln_status put_value(sbuf *b, const json_t *v, kiln_err *err) {
    char num[64];
    switch (json_typeof(v)) {
    case JSON_NULL: sb_puts(b, "null"); break;
    case JSON_TRUE: sb_puts(b, "true"); break;
    case JSON_FALSE: sb_puts(b, "false"); break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sb_puts(b, num);
        break;
    case JSON_REAL:
        if (!isfinite(json_real_value(v))) return KILN_FAIL(err, KILN_E_INVALID, "canonical JSON: non-finite real");
        sb_puts(b, kiln_json_format_real(json_real_value(v), num, sizeof num));
        break;
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY:
        sb_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) sb_put(b, ",", 1);
            KILN_TRY(put_value(b, json_array_get(v, i), err));
        }
        sb_put(b, "]", 1);
        break;
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        const char **keys = n ? kiln_calloc(n, sizeof *keys) : NULL;
        if (n && !keys) return KILN_FAIL(err, KILN_E_NOMEM, "canonical JSON: out of memory");
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            if (k < n) keys[k++] = key;
        }
        if (k > 1) qsort(keys, k, sizeof *keys, cmp_key); /* keys is NULL for an empty object */
        sb_put(b, "{", 1);
        kiln_status st = KILN_OK;
        for (size_t i = 0; i < k && st == KILN_OK; i++) {
            if (i) sb_put(b, ",", 1);
            put_string(b, keys[i], strlen(keys[i]));
            sb_put(b, ":", 1);
            st = put_value(b, json_object_get(v, keys[i]), err);
        }
        sb_put(b, "}", 1);
        kiln_free(keys);
        return st;
    }
    }
    return KILN_OK;
}

kiln_status kiln_json_canonical(const json_t *v, char **out, size_t *len, kiln_err *err) {
    *out = NULL;
    *len = 0;
    sbuf b = {0};
    kiln_status st = put_value(&b, v, err);
    if (st == KILN_OK && (b.failed || !b.p)) {
        if (!b.failed) sb_put(&b, "", 0);
        if (b.failed || !b.p) st = KILN_FAIL(err, KILN_E_NOMEM, "canonical JSON: out of memory");
    }
    if (st != KILN_OK) {
        kiln_free(b.p);
        return st;
    }
    *out = b.p;
    *len = b.len;
    return KILN_OK;
}
