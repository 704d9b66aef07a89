/* digest.c - sha256 of bytes, files and graphs; the model digest cache (see digest.h). */
#include "bench/digest.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/sha256.h"
#include "bench/canon.h"

/* The hashing is base/sha256's; the bench keeps its names and one promise of its own: a digest in a report is
 * never empty (64 zeros, an obviously fake digest, if libcrypto or memory fails). */
void kiln_sha256_hex(const void *data, size_t len, char hex[65]) {
    if (kiln_sha256_buffer(data, len, hex)) return;
    memset(hex, '0', 64);
    hex[64] = 0;
}

kiln_status kiln_sha256_file(const char *path, char hex[65], kiln_err *err) {
    return kiln_sha256_path(path, hex, NULL, err);
}

kiln_status kiln_graph_digest(const json_t *graph, char hex[65], kiln_err *err) {
    char *s;
    size_t n;
    KILN_TRY(kiln_json_canonical(graph, &s, &n, err));
    kiln_sha256_hex(s, n, hex);
    kiln_free(s);
    return KILN_OK;
}

/* ---- the model digest cache: {"<abs path>": {"size": N, "mtime_ns": N, "sha256": "..."}} ---------------- */

struct kiln_digest_cache {
    char *path; /* NULL: in memory only */
    json_t *entries;
    bool dirty;
};

static bool is_hex64(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

kiln_digest_cache *kiln_digest_cache_open(const char *path, kiln_err *err) {
    kiln_digest_cache *c = kiln_calloc(1, sizeof *c);
    if (!c) {
        KILN_FAIL(err, KILN_E_NOMEM, "digest cache: out of memory");
        return NULL;
    }
    c->entries = json_object();
    if (!c->entries || (path && !(c->path = kiln_strdup(path)))) {
        kiln_digest_cache_close(c);
        KILN_FAIL(err, KILN_E_NOMEM, "digest cache: out of memory");
        return NULL;
    }
    if (!path) return c;
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (errno != ENOENT) log_warn("digest cache %s unreadable, starting empty: %s", path, je.text);
        return c;
    }
    if (!json_is_object(root)) {
        log_warn("digest cache %s is not an object, starting empty", path);
        json_decref(root);
        return c;
    }
    /* Keep only well-formed entries: a hand-edited cache never poisons a report. */
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (json_is_integer(json_object_get(v, "size")) && json_is_integer(json_object_get(v, "mtime_ns")) &&
            is_hex64(json_string_value(json_object_get(v, "sha256"))))
            json_object_set(c->entries, key, v);
    }
    json_decref(root);
    return c;
}

kiln_status kiln_digest_cache_file(kiln_digest_cache *c, const char *path, char hex[65], bool *from_cache,
                                   kiln_err *err) {
    if (from_cache) *from_cache = false;
    char abs[PATH_MAX];
    if (!realpath(path, abs))
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (stat(abs, &st) != 0) return KILN_FAIL(err, KILN_E_IO, "%s: %s", abs, strerror(errno));
    long long size = (long long)st.st_size;
    long long mtime = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    json_t *e = json_object_get(c->entries, abs);
    if (e && json_integer_value(json_object_get(e, "size")) == size &&
        json_integer_value(json_object_get(e, "mtime_ns")) == mtime) {
        snprintf(hex, 65, "%s", json_string_value(json_object_get(e, "sha256")));
        if (from_cache) *from_cache = true;
        return KILN_OK;
    }
    KILN_TRY(kiln_sha256_file(abs, hex, err));
    json_t *ne = json_pack("{s:I,s:I,s:s}", "size", (json_int_t)size, "mtime_ns", (json_int_t)mtime, "sha256", hex);
    if (!ne || json_object_set_new(c->entries, abs, ne) != 0)
        return KILN_FAIL(err, KILN_E_NOMEM, "digest cache: out of memory");
    c->dirty = true;
    return KILN_OK;
}

void kiln_digest_cache_close(kiln_digest_cache *c) {
    if (!c) return;
    if (c->path && c->dirty) {
        size_t n = strlen(c->path) + 16;
        char *tmp = kiln_malloc(n);
        if (tmp) {
            snprintf(tmp, n, "%s.tmp", c->path);
            if (json_dump_file(c->entries, tmp, JSON_INDENT(1) | JSON_SORT_KEYS) == 0) {
                if (rename(tmp, c->path) != 0) log_warn("digest cache %s: %s", c->path, strerror(errno));
            } else {
                log_warn("digest cache %s: could not write", tmp);
                remove(tmp);
            }
            kiln_free(tmp);
        }
    }
    json_decref(c->entries);
    kiln_free(c->path);
    kiln_free(c);
}
