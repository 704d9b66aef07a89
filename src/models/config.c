/* config.c - config.json lookups with jansson (see config.h). */
#include "models/config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

kiln_status kiln_config_open(const char *path, json_t **out, kiln_err *err) {
    *out = NULL;
    if (!path || !*path) return KILN_OK;
    FILE *f = fopen(path, "rb");
    if (!f && errno == ENOENT) return KILN_OK; /* no such config: the caller's defaults */
    if (!f) return KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
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
