/* find.c - where the tokenizer data is: a model folder's own tokenizer, $KILN_DATA_DIR, next to the
 * executable (an install or a build tree), then the source tree kiln was built from. See tokenizer.h. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/tok_internal.h"

#define QWEN3_REL "tokenizer/qwen3/tokenizer.json"

static bool is_file(const char *p) { return access(p, R_OK) == 0; }

/* Tries one candidate: on success copies it into buf. Appends it to the list of places tried. */
static bool try_path(const char *path, char *buf, size_t cap, char *tried, size_t tried_cap, bool *too_long) {
    size_t tl = strlen(tried);
    if (tl + strlen(path) + 3 < tried_cap) snprintf(tried + tl, tried_cap - tl, "%s%s", tl ? ", " : "", path);
    if (!is_file(path)) return false;
    if (strlen(path) + 1 > cap) {
        *too_long = true;
        return false;
    }
    memcpy(buf, path, strlen(path) + 1);
    return true;
}

kiln_status kiln_tokenizer_find(const char *model_dir, char *buf, size_t cap, kiln_err *err) {
    char path[PATH_MAX + 64], tried[2048] = "";
    bool too_long = false;
    if (!buf || cap == 0) return KILN_FAIL(err, KILN_E_INVALID, "no buffer for the tokenizer path");
    buf[0] = '\0';
    if (model_dir && *model_dir) {
        snprintf(path, sizeof path, "%s/tokenizer/tokenizer.json", model_dir);
        if (try_path(path, buf, cap, tried, sizeof tried, &too_long)) return KILN_OK;
        snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
        if (try_path(path, buf, cap, tried, sizeof tried, &too_long)) return KILN_OK;
    }
    const char *env = getenv("KILN_DATA_DIR");
    if (env && *env) {
        snprintf(path, sizeof path, "%s/" QWEN3_REL, env);
        if (try_path(path, buf, cap, tried, sizeof tried, &too_long)) return KILN_OK;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/../data/" QWEN3_REL, exe);
            if (try_path(path, buf, cap, tried, sizeof tried, &too_long)) return KILN_OK;
            snprintf(path, sizeof path, "%s/../share/kiln/" QWEN3_REL, exe);
            if (try_path(path, buf, cap, tried, sizeof tried, &too_long)) return KILN_OK;
        }
    }
#ifdef KILN_SOURCE_DIR
    snprintf(path, sizeof path, "%s/data/" QWEN3_REL, KILN_SOURCE_DIR);
    if (try_path(path, buf, cap, tried, sizeof tried, &too_long)) return KILN_OK;
#endif
    if (too_long) return KILN_FAIL(err, KILN_E_LIMIT, "tokenizer path longer than %zu bytes", cap);
    return KILN_FAIL(err, KILN_E_NOT_FOUND,
                     "no tokenizer.json found (set KILN_DATA_DIR to the folder holding " QWEN3_REL "); tried: %s",
                     tried);
}

kiln_status kiln_tokenizer_load_default(const char *model_dir, kiln_tokenizer **out, kiln_err *err) {
    char path[PATH_MAX + 64];
    *out = NULL;
    KILN_TRY(kiln_tokenizer_find(model_dir, path, sizeof path, err));
    return kiln_tokenizer_load(path, out, err);
}

/* ---- the FLUX.1 tokenizers (and Qwen3) by kind ---- */

static const struct {
    const char *name, *model_sub; /* data/tokenizer/<name>; a diffusers folder's subfolder */
} kinds[] = {
    [KILN_TOK_QWEN3] = {"qwen3", "tokenizer"},
    [KILN_TOK_CLIP] = {"clip-l", "tokenizer"},
    [KILN_TOK_T5] = {"t5", "tokenizer_2"},
};

bool kiln_tok_kind_parse(const char *name, kiln_tok_kind *out) {
    for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(name, kinds[i].name)) {
            *out = (kiln_tok_kind)i;
            return true;
        }
    return false;
}

const char *kiln_tok_kind_name(kiln_tok_kind kind) {
    return (unsigned)kind < sizeof kinds / sizeof kinds[0] ? kinds[kind].name : "unknown";
}

/* A folder holds a tokenizer when it has tokenizer.json or vocab.json. */
static bool has_tokenizer(const char *dir) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    if (is_file(p)) return true;
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    return is_file(p);
}

static kiln_status load_checked(kiln_tok_kind kind, const char *dir, kiln_tokenizer **out, kiln_err *err) {
    KILN_TRY(kiln_tokenizer_load_dir(dir, out, err));
    if ((*out)->kind != kind) {
        kiln_tok_kind got = (*out)->kind;
        kiln_tokenizer_free(*out);
        *out = NULL;
        return KILN_FAIL(err, KILN_E_FORMAT, "%s holds a %s tokenizer, not %s", dir, kiln_tok_kind_name(got),
                         kiln_tok_kind_name(kind));
    }
    return KILN_OK;
}

kiln_status kiln_tokenizer_load_kind(kiln_tok_kind kind, const char *model_dir, kiln_tokenizer **out,
                                     kiln_err *err) {
    *out = NULL;
    if ((unsigned)kind >= sizeof kinds / sizeof kinds[0])
        return KILN_FAIL(err, KILN_E_INVALID, "unknown tokenizer kind %d", (int)kind);
    if (kind == KILN_TOK_QWEN3) return kiln_tokenizer_load_default(model_dir, out, err);
    char path[PATH_MAX + 64], tried[2048] = "";
    const char *name = kinds[kind].name;
#define TRY_DIR(...)                                                                                          \
    do {                                                                                                      \
        snprintf(path, sizeof path, __VA_ARGS__);                                                             \
        size_t tl_ = strlen(tried);                                                                           \
        if (tl_ + strlen(path) + 3 < sizeof tried)                                                            \
            snprintf(tried + tl_, sizeof tried - tl_, "%s%s", tl_ ? ", " : "", path);                         \
        if (has_tokenizer(path)) return load_checked(kind, path, out, err);                                  \
    } while (0)
    if (model_dir && *model_dir) TRY_DIR("%s/%s", model_dir, kinds[kind].model_sub);
    const char *env = getenv("KILN_DATA_DIR");
    if (env && *env) TRY_DIR("%s/tokenizer/%s", env, name);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            TRY_DIR("%s/../data/tokenizer/%s", exe, name);
            TRY_DIR("%s/../share/kiln/tokenizer/%s", exe, name);
        }
    }
#ifdef KILN_SOURCE_DIR
    TRY_DIR("%s/data/tokenizer/%s", KILN_SOURCE_DIR, name);
#endif
#undef TRY_DIR
    return KILN_FAIL(err, KILN_E_NOT_FOUND, "no %s tokenizer found (set KILN_DATA_DIR); tried: %s", name, tried);
}
