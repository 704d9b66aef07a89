/* model_dirs.c - list and resolve model files by name (see model_dirs.h). */
#include "graph/model_dirs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const kind_folders[KILN_MODELS_KIND_COUNT][2] = {
    {"diffusion_models", "unet"},
    {"text_encoders", "clip"},
    {"vae", NULL},
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

static bool has_model_ext(const char *name) {
    static const char *const exts[] = {".safetensors", ".sft", ".gguf"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && !strcmp(name + n - e, exts[i])) return true;
    }
    return false;
}

static int cmp_json_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *kiln_models_list(const char *root, kiln_model_kind k) {
    json_t *arr = json_array();
    if (!arr || !root || (unsigned)k >= KILN_MODELS_KIND_COUNT) return arr;
    char *names[1024];
    size_t n = 0;
    for (int a = 0; a < 2 && kind_folders[k][a]; a++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, kind_folders[k][a]);
        DIR *d = opendir(dir);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d)) && n < sizeof names / sizeof names[0]) {
            if (!kiln_model_name_ok(e->d_name) || !has_model_ext(e->d_name)) continue;
            bool dup = false;
            for (size_t i = 0; i < n; i++) dup = dup || !strcmp(names[i], e->d_name);
            if (!dup && (names[n] = strdup(e->d_name))) n++;
        }
        closedir(d);
    }
    qsort(names, n, sizeof names[0], cmp_json_str);
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, json_string(names[i]));
        free(names[i]);
    }
    return arr;
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
