/* schema.c - the shape walker and string lists (see schema.h). */
#include "bench/schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

/* A hostile report could name a million unknown keys; keep the first ones and count the rest. */
#define STRLIST_MAX 10000

void kiln_strlist_add(kiln_strlist *l, const char *fmt, ...) {
    if (l->n >= STRLIST_MAX) {
        l->dropped++;
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **p = kiln_realloc(l->items, cap * sizeof *p);
        if (!p) {
            l->dropped++;
            return;
        }
        l->items = p;
        l->cap = cap;
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = kiln_strdup(buf);
    if (!s) {
        l->dropped++;
        return;
    }
    l->items[l->n++] = s;
}

void kiln_strlist_free(kiln_strlist *l) {
    for (size_t i = 0; i < l->n; i++) kiln_free(l->items[i]);
    kiln_free(l->items);
    memset(l, 0, sizeof *l);
}

static unsigned type_bit(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return KILN_T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return KILN_T_BOOL;
    case JSON_INTEGER: return KILN_T_INT;
    case JSON_REAL: return KILN_T_REAL;
    case JSON_STRING: return KILN_T_STR;
    case JSON_ARRAY: return KILN_T_ARR;
    case JSON_OBJECT: return KILN_T_OBJ;
    }
    return 0;
}

const char *kiln_json_type_name(const json_t *v) {
    switch (type_bit(v)) {
    case KILN_T_NULL: return "null";
    case KILN_T_BOOL: return "boolean";
    case KILN_T_INT: return "integer";
    case KILN_T_REAL: return "real";
    case KILN_T_STR: return "string";
    case KILN_T_ARR: return "array";
    case KILN_T_OBJ: return "object";
    }
    return "?";
}

static void expected_types(unsigned t, char *buf, size_t cap) {
    static const struct { unsigned bit; const char *name; } names[] = {
        {KILN_T_OBJ, "object"}, {KILN_T_ARR, "array"}, {KILN_T_STR, "string"}, {KILN_T_NUM, "number"},
        {KILN_T_INT, "integer"}, {KILN_T_REAL, "real"}, {KILN_T_BOOL, "boolean"}, {KILN_T_NULL, "null"},
    };
    buf[0] = 0;
    unsigned left = t;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if ((left & names[i].bit) != names[i].bit) continue;
        left &= ~names[i].bit;
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", len ? " or " : "", names[i].name);
    }
}

void kiln_shape_check(const json_t *v, const kiln_shape *s, const char *path, kiln_strlist *problems,
                      kiln_strlist *unknown) {
    if (!s) return;
    if (!(type_bit(v) & s->types)) {
        char exp[96];
        expected_types(s->types, exp, sizeof exp);
        kiln_strlist_add(problems, "%s: expected %s, got %s", *path ? path : "/", exp, kiln_json_type_name(v));
        return;
    }
    char sub[1024];
    if (json_is_array(v) && s->items) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            snprintf(sub, sizeof sub, "%s/%zu", path, i);
            kiln_shape_check(json_array_get(v, i), s->items, sub, problems, unknown);
        }
    }
    if (!json_is_object(v)) return;
    const char *key;
    json_t *val;
    if (s->is_map) {
        json_object_foreach((json_t *)v, key, val) {
            snprintf(sub, sizeof sub, "%s/%s", path, key);
            kiln_shape_check(val, s->items, sub, problems, unknown);
        }
        return;
    }
    if (!s->fields) return; /* free-form object */
    for (const kiln_field *f = s->fields; f->key; f++) {
        json_t *fv = json_object_get(v, f->key);
        snprintf(sub, sizeof sub, "%s/%s", path, f->key);
        if (!fv) {
            if (f->required) kiln_strlist_add(problems, "%s: required field missing", sub);
            continue;
        }
        kiln_shape_check(fv, f->shape, sub, problems, unknown);
    }
    json_object_foreach((json_t *)v, key, val) {
        bool known = false;
        for (const kiln_field *f = s->fields; f->key && !known; f++) known = !strcmp(f->key, key);
        if (!known) kiln_strlist_add(unknown, "%s/%s", path, key);
    }
}
