/* config.c - config.json lookups with jansson (see config.h). */
#include "models/config.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

static json_t *load(const char *path) {
    if (!path) return NULL;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (root && !json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    return root;
}

bool kiln_config_number(const char *path, const char *key, double *out) {
    json_t *root = load(path);
    if (!root) return false;
    json_t *v = json_object_get(root, key);
    bool ok = v && json_is_number(v);
    if (ok) *out = json_number_value(v);
    json_decref(root);
    return ok;
}

int kiln_config_ints(const char *path, const char *key, int *out, int cap) {
    json_t *root = load(path);
    if (!root) return 0;
    json_t *v = json_object_get(root, key);
    int n = 0;
    if (v && json_is_array(v) && (int)json_array_size(v) <= cap) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_integer(e)) {
                n = 0;
                break;
            }
            out[n++] = (int)json_integer_value(e);
        }
    }
    json_decref(root);
    return n;
}

bool kiln_config_bool(const char *path, const char *key, bool *found) {
    json_t *root = load(path);
    if (found) *found = false;
    if (!root) return false;
    json_t *v = json_object_get(root, key);
    bool r = false;
    if (v && json_is_boolean(v)) {
        r = json_is_true(v);
        if (found) *found = true;
    }
    json_decref(root);
    return r;
}

kiln_status kiln_config_open(const char *path, json_t **out, kiln_err *err) {
    *out = NULL;
    if (!path || !*path) return KILN_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return KILN_OK;
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    fclose(f);
    if (!root) return KILN_FAIL(err, KILN_E_FORMAT, "%s: not valid JSON (line %d: %s)", path, je.line, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: not a JSON object", path);
    }
    *out = root;
    return KILN_OK;
}

const json_t *kiln_cfg_get(const json_t *c, const char *key) {
    const json_t *v = c ? json_object_get(c, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

double kiln_cfg_num(const json_t *c, const char *key, double dflt) {
    const json_t *v = kiln_cfg_get(c, key);
    return v && json_is_number(v) ? json_number_value(v) : dflt;
}

bool kiln_cfg_true(const json_t *c, const char *key) { return json_is_true(kiln_cfg_get(c, key)); }

const char *kiln_cfg_str(const json_t *c, const char *key) {
    const json_t *v = kiln_cfg_get(c, key);
    return v && json_is_string(v) ? json_string_value(v) : NULL;
}

kiln_status kiln_cfg_number(const json_t *c, const char *what, const char *key, double *out, kiln_err *err) {
    const json_t *v = kiln_cfg_get(c, key);
    if (!v) return KILN_OK;
    if (!json_is_number(v)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s must be a number", what, key);
    *out = json_number_value(v);
    return KILN_OK;
}

kiln_status kiln_cfg_int(const json_t *c, const char *what, const char *key, int *out, kiln_err *err) {
    const json_t *v = kiln_cfg_get(c, key);
    if (!v) return KILN_OK;
    if (!json_is_integer(v) || json_integer_value(v) < -1000000000 || json_integer_value(v) > 1000000000)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s must be an integer", what, key);
    *out = (int)json_integer_value(v);
    return KILN_OK;
}

kiln_status kiln_cfg_boolean(const json_t *c, const char *what, const char *key, bool *out, kiln_err *err) {
    const json_t *v = kiln_cfg_get(c, key);
    if (!v) return KILN_OK;
    if (!json_is_boolean(v)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s must be true or false", what, key);
    *out = json_is_true(v);
    return KILN_OK;
}

kiln_status kiln_cfg_expect_str(const json_t *c, const char *what, const char *key, const char *want, kiln_err *err) {
    const json_t *v = kiln_cfg_get(c, key);
    if (!v) return KILN_OK;
    if (!json_is_string(v)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s must be a string", what, key);
    if (strcmp(json_string_value(v), want))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s \"%s\" is not supported (kiln implements \"%s\")", what,
                         key, json_string_value(v), want);
    return KILN_OK;
}
