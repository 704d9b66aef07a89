/* coerce.c - widget literals converted as ComfyUI's validate_inputs converts them (execution.py: int(v),
 * float(v), str(v), bool(v)), so a graph ComfyUI accepts is accepted here with the same values:
 *
 *   INT      an integer; a finite real truncated toward zero; a boolean as 0/1; a string holding a decimal
 *            integer ("42", " -7 "). Up to 2^64-1 (ComfyUI's seed maximum): values above INT64_MAX keep their
 *            bits in the int64 (the seed inputs read them back as uint64).
 *   FLOAT    a number; a boolean; a string strtod reads whole. Never NaN or infinity.
 *   STRING   a string; a number written as Python's str() writes it; a boolean as True/False.
 *   BOOLEAN  Python's bool(): false, 0, 0.0 and "" are false, everything else (even "false") true.
 *
 * Big integers: jansson stores int64 only, so kiln_graph_quote_big_ints (used on request bodies before
 * parsing) turns an integer literal beyond int64 into a string literal, which the INT rule above reads back. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "graph/graph.h"

static bool int_text(const char *s, long double *mag, int64_t *bits) {
    while (*s == ' ' || *s == '\t') s++;
    char *end;
    errno = 0;
    if (*s == '-') {
        long long v = strtoll(s, &end, 10);
        if (errno || end == s) return false;
        *bits = v;
        *mag = (long double)v;
    } else {
        if (*s == '+') s++;
        if (*s < '0' || *s > '9') return false;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno) return false;
        *bits = (int64_t)v;
        *mag = (long double)v;
    }
    while (*end == ' ' || *end == '\t') end++;
    return *end == 0;
}

bool kiln_coerce_int(json_t *v, int64_t *bits, long double *value) {
    if (json_is_integer(v)) {
        *bits = json_integer_value(v);
        *value = (long double)*bits;
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || fabs(d) >= 9.2e18) return false;
        *bits = (int64_t)trunc(d);
        *value = (long double)*bits;
        return true;
    }
    if (json_is_boolean(v)) {
        *bits = json_is_true(v);
        *value = (long double)*bits;
        return true;
    }
    return json_is_string(v) && int_text(json_string_value(v), value, bits);
}

bool kiln_coerce_float(json_t *v, double *out) {
    double d;
    if (json_is_number(v)) {
        d = json_number_value(v);
    } else if (json_is_boolean(v)) {
        d = json_is_true(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        d = strtod(s, &end);
        while (*end == ' ' || *end == '\t') end++;
        if (end == s || *end || errno == ERANGE) return false;
    } else {
        return false;
    }
    if (!isfinite(d)) return false;
    *out = d;
    return true;
}

char *kiln_coerce_string(json_t *v) {
    char buf[64];
    if (json_is_string(v)) return kiln_strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d)) return NULL;
        snprintf(buf, sizeof buf, "%.17g", d);
        for (int p = 1; p < 17; p++) { /* the shortest text that reads back exactly, as Python's repr */
            char t[64];
            snprintf(t, sizeof t, "%.*g", p, d);
            if (strtod(t, NULL) == d) {
                snprintf(buf, sizeof buf, "%s", t);
                break;
            }
        }
        if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", sizeof buf - strlen(buf) - 1); /* str(1.0) == "1.0" */
    } else if (json_is_boolean(v)) {
        snprintf(buf, sizeof buf, "%s", json_is_true(v) ? "True" : "False");
    } else {
        return NULL;
    }
    return kiln_strdup(buf);
}

bool kiln_coerce_bool(json_t *v, bool *out) {
    if (json_is_boolean(v)) *out = json_is_true(v);
    else if (json_is_integer(v)) *out = json_integer_value(v) != 0;
    else if (json_is_real(v)) *out = json_real_value(v) != 0.0;
    else if (json_is_string(v)) *out = json_string_value(v)[0] != 0;
    else return false;
    return true;
}

char *kiln_graph_quote_big_ints(const char *body, size_t len, size_t *out_len) {
    /* one pass: count the integers to quote, then copy with quotes around them */
    char *out = NULL;
    size_t o = 0;
    for (int pass = 0; pass < 2; pass++) {
        bool in_str = false;
        o = 0;
        for (size_t i = 0; i < len; i++) {
            char c = body[i];
            if (in_str) {
                if (c == '\\' && i + 1 < len) {
                    if (out) out[o] = c, out[o + 1] = body[i + 1];
                    o += 2;
                    i++;
                    continue;
                }
                if (c == '"') in_str = false;
            } else if (c == '"') {
                in_str = true;
            } else if ((c == '-' || (c >= '0' && c <= '9')) && (i == 0 || strchr(" \t\r\n:[,", body[i - 1]))) {
                size_t j = i + (c == '-');
                while (j < len && body[j] >= '0' && body[j] <= '9') j++;
                size_t digits = j - i - (c == '-');
                bool integer = digits > 0 && (j == len || !strchr(".eE", body[j]));
                if (integer && digits >= 19) {
                    char tmp[32];
                    bool big = digits > 20;
                    if (!big) {
                        snprintf(tmp, sizeof tmp, "%.*s", (int)(j - i), body + i);
                        errno = 0;
                        strtoll(tmp, NULL, 10);
                        big = errno == ERANGE;
                    }
                    if (big) {
                        if (out) {
                            out[o] = '"';
                            memcpy(out + o + 1, body + i, j - i);
                            out[o + 1 + (j - i)] = '"';
                        }
                        o += j - i + 2;
                        i = j - 1;
                        continue;
                    }
                }
                if (out) memcpy(out + o, body + i, j - i);
                o += j - i;
                i = j - 1;
                continue;
            }
            if (out) out[o] = c;
            o++;
        }
        if (pass == 0) {
            if (o == len) return NULL; /* nothing to quote */
            if (!(out = kiln_malloc(o + 1))) return NULL;
        }
    }
    out[o] = 0;
    *out_len = o;
    return out;
}
