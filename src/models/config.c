/* config.c - config.json lookups with jansson (see config.h). */
#include "models/config.h"

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
