/* safetensors_write.c - the streaming checkpoint writer (see safetensors.h).
 *
 * The header (names, dtypes, shapes, offsets) is known up front, so it is written first and the tensor bytes
 * are streamed after it: a 16 GB checkpoint never has to exist in memory. Tensors are packed back to back in
 * spec order, which is what the reference safetensors library expects; the header is padded with spaces to a
 * multiple of 8 bytes so the data section starts 8-byte aligned. Output goes to PATH.tmp and is renamed
 * into place only after every byte has been written and fsynced.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "io/safetensors.h"

struct kiln_st_writer {
    int fd;
    bool created; /* tmp exists on disk and must be removed on abort */
    char *path, *tmp;
    uint64_t expected, written; /* data bytes */
};

static kiln_status build_header(const kiln_st_spec *specs, size_t n, const char *const *meta_keys,
                                const char *const *meta_values, size_t n_meta, char **out, size_t *out_len,
                                uint64_t *data_bytes, kiln_err *err) {
    kiln_status s = KILN_OK;
    json_t *root = json_object();
    if (!root) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory building a safetensors header");
    if (n_meta) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m) != 0) goto nomem;
        for (size_t i = 0; i < n_meta; i++) {
            if (!meta_keys[i] || !meta_values[i] || !kiln_utf8_valid(meta_keys[i], strlen(meta_keys[i]), NULL) ||
                !kiln_utf8_valid(meta_values[i], strlen(meta_values[i]), NULL)) {
                s = KILN_FAIL(err, KILN_E_INVALID, "metadata entry %zu is missing or not UTF-8", i);
                goto out;
            }
            if (json_object_set_new(m, meta_keys[i], json_string(meta_values[i])) != 0) goto nomem;
        }
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const kiln_st_spec *sp = &specs[i];
        if (!sp->name || !*sp->name || !kiln_utf8_valid(sp->name, strlen(sp->name), NULL) ||
            strcmp(sp->name, "__metadata__") == 0) {
            s = KILN_FAIL(err, KILN_E_INVALID, "tensor %zu: name is empty, reserved or not UTF-8", i);
            goto out;
        }
        if (json_object_get(root, sp->name)) {
            s = KILN_FAIL(err, KILN_E_INVALID, "tensor '%s' is listed twice", sp->name);
            goto out;
        }
        if ((unsigned)sp->dtype >= KILN_DT_COUNT || sp->ndim < 0 || sp->ndim > KILN_MAX_DIMS) {
            s = KILN_FAIL(err, KILN_E_INVALID, "tensor '%s': bad dtype or ndim %d", sp->name, sp->ndim);
            goto out;
        }
        size_t bytes = kiln_dtype_size(sp->dtype);
        json_t *shape = json_array(), *t = json_object();
        if (!t || json_object_set_new(root, sp->name, t) != 0) {
            json_decref(shape);
            goto nomem;
        }
        if (!shape || json_object_set_new(t, "dtype", json_string(kiln_dtype_safetensors_name(sp->dtype))) != 0 ||
            json_object_set_new(t, "shape", shape) != 0)
            goto nomem;
        for (int d = 0; d < sp->ndim; d++) {
            if (sp->shape[d] < 0 || !kiln_mul_size(bytes, (size_t)sp->shape[d], &bytes)) {
                s = KILN_FAIL(err, KILN_E_INVALID, "tensor '%s': bad or too large shape", sp->name);
                goto out;
            }
            if (json_array_append_new(shape, json_integer(sp->shape[d])) != 0) goto nomem;
        }
        if (off + bytes < off || off + bytes > INT64_MAX) {
            s = KILN_FAIL(err, KILN_E_INVALID, "total tensor bytes overflow at '%s'", sp->name);
            goto out;
        }
        json_t *offs = json_pack("[II]", (json_int_t)off, (json_int_t)(off + bytes));
        if (!offs || json_object_set_new(t, "data_offsets", offs) != 0) goto nomem;
        off += bytes;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    if (!text) goto nomem;
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    char *buf = kiln_malloc(8 + padded);
    if (!buf) {
        free(text); /* json_dumps uses jansson's allocator (malloc) */
        goto nomem;
    }
    for (int b = 0; b < 8; b++) buf[b] = (char)(((uint64_t)padded >> (8 * b)) & 0xff);
    memcpy(buf + 8, text, len);
    memset(buf + 8 + len, ' ', padded - len);
    free(text);
    *out = buf;
    *out_len = 8 + padded;
    *data_bytes = off;
    goto out;
nomem:
    s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory building a safetensors header");
out:
    json_decref(root);
    return s;
}

static kiln_status write_all(int fd, const void *data, size_t n, const char *path, kiln_err *err) {
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return KILN_FAIL(err, KILN_E_IO, "%s: write failed: %s", path, strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return KILN_OK;
}

kiln_status kiln_st_writer_open(const char *path, const kiln_st_spec *specs, size_t n, const char *const *meta_keys,
                                const char *const *meta_values, size_t n_meta, kiln_st_writer **out,
                                kiln_err *err) {
    *out = NULL;
    if (!path || !*path) return KILN_FAIL(err, KILN_E_INVALID, "no output path");
    char *hdr = NULL;
    size_t hdr_len = 0;
    uint64_t data_bytes = 0;
    kiln_status s = build_header(specs, n, meta_keys, meta_values, n_meta, &hdr, &hdr_len, &data_bytes, err);
    if (s != KILN_OK) return kiln_err_prefix(err, "%s", path);
    kiln_st_writer *w = kiln_calloc(1, sizeof *w);
    size_t tmp_len = strlen(path) + 5;
    if (w) {
        w->fd = -1;
        w->path = kiln_strdup(path);
        w->tmp = kiln_malloc(tmp_len);
    }
    if (!w || !w->path || !w->tmp) {
        kiln_free(hdr);
        kiln_st_writer_abort(w);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    }
    snprintf(w->tmp, tmp_len, "%s.tmp", path);
    w->expected = data_bytes;
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    w->created = w->fd >= 0;
    if (w->fd < 0) {
        s = KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: cannot create: %s", w->tmp,
                      strerror(errno));
        kiln_free(hdr);
        kiln_free(w->path);
        kiln_free(w->tmp);
        kiln_free(w);
        return s;
    }
    s = write_all(w->fd, hdr, hdr_len, w->tmp, err);
    kiln_free(hdr);
    if (s != KILN_OK) {
        kiln_st_writer_abort(w);
        return s;
    }
    *out = w;
    return KILN_OK;
}

kiln_status kiln_st_writer_write(kiln_st_writer *w, const void *data, size_t bytes, kiln_err *err) {
    if (bytes > w->expected - w->written)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %zu more bytes would pass the %llu bytes the header declares",
                         w->path, bytes, (unsigned long long)w->expected);
    KILN_TRY(write_all(w->fd, data, bytes, w->tmp, err));
    w->written += bytes;
    return KILN_OK;
}

uint64_t kiln_st_writer_data_bytes(const kiln_st_writer *w) { return w->expected; }

kiln_status kiln_st_writer_skip(kiln_st_writer *w, uint64_t bytes, kiln_err *err) {
    if (bytes > w->expected - w->written)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: skipping %llu bytes would pass the end", w->path,
                         (unsigned long long)bytes);
    off_t end = lseek(w->fd, 0, SEEK_CUR);
    if (end < 0 || lseek(w->fd, (off_t)bytes, SEEK_CUR) < 0 || ftruncate(w->fd, end + (off_t)bytes) != 0)
        return KILN_FAIL(err, KILN_E_IO, "%s: cannot extend: %s", w->tmp, strerror(errno));
    w->written += bytes;
    return KILN_OK;
}

kiln_status kiln_st_writer_finish(kiln_st_writer *w, kiln_err *err) {
    kiln_status s = KILN_OK;
    if (w->written != w->expected) {
        s = KILN_FAIL(err, KILN_E_INVALID, "%s: only %llu of %llu data bytes were written", w->path,
                      (unsigned long long)w->written, (unsigned long long)w->expected);
        kiln_st_writer_abort(w);
        return s;
    }
    if (fsync(w->fd) != 0) s = KILN_FAIL(err, KILN_E_IO, "%s: fsync failed: %s", w->tmp, strerror(errno));
    if (close(w->fd) != 0 && s == KILN_OK)
        s = KILN_FAIL(err, KILN_E_IO, "%s: close failed: %s", w->tmp, strerror(errno));
    w->fd = -1;
    if (s == KILN_OK && rename(w->tmp, w->path) != 0)
        s = KILN_FAIL(err, KILN_E_IO, "%s: rename into place failed: %s", w->path, strerror(errno));
    if (s == KILN_OK) w->created = false;
    if (s != KILN_OK) {
        kiln_st_writer_abort(w);
        return s;
    }
    /* Make the rename itself durable. */
    char *dir = kiln_strdup(w->path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
        int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        kiln_free(dir);
    }
    kiln_free(w->path);
    kiln_free(w->tmp);
    kiln_free(w);
    return KILN_OK;
}

void kiln_st_writer_abort(kiln_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->created) unlink(w->tmp);
    kiln_free(w->path);
    kiln_free(w->tmp);
    kiln_free(w);
}
