/* model_dirs.c - list and resolve model files by name (see model_dirs.h). */
#include "graph/model_dirs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char *const kind_folders[KILN_MODELS_KIND_COUNT][2] = {
    {"diffusion_models", "unet"},
    {"text_encoders", "clip"},
    {"vae", NULL},
    {"loras", NULL},
    {"checkpoints", NULL},
};

const char *kiln_model_kind_folder(kiln_model_kind k) {
    return (unsigned)k < KILN_MODELS_KIND_COUNT ? kind_folders[k][0] : "unknown";
}

bool kiln_model_kind_from_folder(const char *folder, kiln_model_kind *out) {
    for (int k = 0; k < KILN_MODELS_KIND_COUNT; k++)
        for (int a = 0; a < 2; a++)
            if (kind_folders[k][a] && folder && !strcmp(folder, kind_folders[k][a])) {
                *out = (kiln_model_kind)k;
                return true;
            }
    return false;
}

bool kiln_model_name_ok(const char *name) {
    if (!name || !*name || name[0] == '.' || strlen(name) > 255) return false;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20) return false;
    return true;
}

static bool has_ext(const char *name, const char *const *exts, size_t n_exts) {
    size_t n = strlen(name);
    for (size_t i = 0; i < n_exts; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && !strcasecmp(name + n - e, exts[i])) return true;
    }
    return false;
}

static bool has_model_ext(const char *name) {
    static const char *const exts[] = {".safetensors", ".sft", ".gguf"};
    return has_ext(name, exts, sizeof exts / sizeof exts[0]);
}

static bool has_image_ext(const char *name) {
    static const char *const exts[] = {".png", ".jpg", ".jpeg", ".webp"};
    return has_ext(name, exts, sizeof exts / sizeof exts[0]);
}

static int cmp_json_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Adds the plain names of dir's files that keep(name) accepts to names (no duplicates). */
static void collect(const char *dir, bool (*keep)(const char *), char **names, size_t cap, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && *n < cap) {
        if (!kiln_model_name_ok(e->d_name) || !keep(e->d_name)) continue;
        bool dup = false;
        for (size_t i = 0; i < *n; i++) dup = dup || !strcmp(names[i], e->d_name);
        if (!dup && (names[*n] = strdup(e->d_name))) (*n)++;
    }
    closedir(d);
}

static json_t *sorted_array(char **names, size_t n) {
    json_t *arr = json_array();
    qsort(names, n, sizeof names[0], cmp_json_str);
    for (size_t i = 0; i < n; i++) {
        if (arr) json_array_append_new(arr, json_string(names[i]));
        free(names[i]);
    }
    return arr;
}

json_t *kiln_input_images_list(const char *dir) {
    char *names[1024];
    size_t n = 0;
    if (dir) collect(dir, has_image_ext, names, sizeof names / sizeof names[0], &n);
    return sorted_array(names, n);
}

json_t *kiln_models_list(const char *root, kiln_model_kind k) {
    if (!root || (unsigned)k >= KILN_MODELS_KIND_COUNT) return json_array();
    char *names[1024];
    size_t n = 0;
    for (int a = 0; a < 2 && kind_folders[k][a]; a++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, kind_folders[k][a]);
        collect(dir, has_model_ext, names, sizeof names / sizeof names[0], &n);
    }
    return sorted_array(names, n);
}

json_t *kiln_models_with_ext(json_t *list, const char *ext) {
    if (!ext) return json_incref(list);
    json_t *out = json_array();
    size_t ne = strlen(ext);
    for (size_t i = 0; out && i < json_array_size(list); i++) {
        const char *s = json_string_value(json_array_get(list, i));
        size_t n = s ? strlen(s) : 0;
        if (n > ne && !strcmp(s + n - ne, ext)) json_array_append_new(out, json_string(s));
    }
    return out;
}

kiln_status kiln_models_resolve(const char *root, kiln_model_kind k, const char *name, char *path, size_t cap,
                                kiln_err *err) {
    if (!kiln_model_name_ok(name)) return KILN_FAIL(err, KILN_E_INVALID, "bad model file name");
    if (!root || (unsigned)k >= KILN_MODELS_KIND_COUNT)
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "no model folder configured");
    for (int a = 0; a < 2 && kind_folders[k][a]; a++) {
        int w = snprintf(path, cap, "%s/%s/%s", root, kind_folders[k][a], name);
        struct stat sb;
        if (w > 0 && (size_t)w < cap && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return KILN_OK;
    }
    return KILN_FAIL(err, KILN_E_NOT_FOUND, "model %s not found in %s/%s", name, root, kind_folders[k][0]);
}
