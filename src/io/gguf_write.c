/* gguf_write.c - the streaming GGUF writer (see gguf.h): header, metadata and tensor infos first (all sizes are
 * known from the specs), then each tensor's bytes padded to the alignment. Output goes to PATH.tmp and is
 * renamed into place only after every byte has been written and fsynced. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "io/gguf.h"
#include "tensor/quant.h"

struct kiln_gguf_writer {
    int fd;
    char *path, *tmp;
    uint32_t alignment;
    uint64_t *sizes; /* per tensor */
    size_t n, cur;
    uint64_t cur_written;
    uint8_t buf[1 << 16]; /* write buffer */
    size_t buffered;
};

static kiln_status flush(kiln_gguf_writer *w, kiln_err *err) {
    size_t off = 0;
    while (off < w->buffered) {
        ssize_t k = write(w->fd, w->buf + off, w->buffered - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return KILN_FAIL(err, KILN_E_IO, "%s: write failed: %s", w->tmp, strerror(errno));
        off += (size_t)k;
    }
    w->buffered = 0;
    return KILN_OK;
}

static kiln_status out(kiln_gguf_writer *w, const void *p, size_t n, kiln_err *err) {
    const uint8_t *b = p;
    while (n) {
        if (w->buffered == sizeof w->buf) KILN_TRY(flush(w, err));
        size_t k = sizeof w->buf - w->buffered < n ? sizeof w->buf - w->buffered : n;
        memcpy(w->buf + w->buffered, b, k);
        w->buffered += k, b += k, n -= k;
    }
    return KILN_OK;
}

static kiln_status out_u32(kiln_gguf_writer *w, uint32_t v, kiln_err *err) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return out(w, b, 4, err);
}
static kiln_status out_u64(kiln_gguf_writer *w, uint64_t v, kiln_err *err) {
    KILN_TRY(out_u32(w, (uint32_t)v, err));
    return out_u32(w, (uint32_t)(v >> 32), err);
}
static kiln_status out_str(kiln_gguf_writer *w, const char *s, kiln_err *err) {
    KILN_TRY(out_u64(w, strlen(s), err));
    return out(w, s, strlen(s), err);
}
static kiln_status pad(kiln_gguf_writer *w, uint64_t pos, kiln_err *err) {
    static const uint8_t zeros[64];
    uint64_t n = (w->alignment - pos % w->alignment) % w->alignment;
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        KILN_TRY(out(w, zeros, k, err));
        n -= k;
    }
    return KILN_OK;
}

void kiln_gguf_writer_abort(kiln_gguf_writer *w) {
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp);
    }
    kiln_free(w->path);
    kiln_free(w->tmp);
    kiln_free(w->sizes);
    kiln_free(w);
}

static kiln_status check_specs(const kiln_gguf_wspec *specs, size_t n, uint64_t *sizes, kiln_err *err) {
    for (size_t i = 0; i < n; i++) {
        const kiln_gguf_wspec *sp = &specs[i];
        const kiln_qtype_info *q = kiln_qtype_get(sp->type);
        if (!sp->name || !*sp->name) return KILN_FAIL(err, KILN_E_INVALID, "GGUF tensor %zu has no name", i);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(specs[j].name, sp->name))
                return KILN_FAIL(err, KILN_E_INVALID, "GGUF tensor '%s' is listed twice", sp->name);
        if (!q) return KILN_FAIL(err, KILN_E_INVALID, "GGUF tensor '%s': unknown GGML type %u", sp->name, sp->type);
        if (sp->ndim < 1 || sp->ndim > KILN_GGUF_MAX_DIMS)
            return KILN_FAIL(err, KILN_E_INVALID, "GGUF tensor '%s': %d dimensions (1 to 4)", sp->name, sp->ndim);
        uint64_t numel = 1;
        for (int d = 0; d < sp->ndim; d++) {
            if (sp->shape[d] < 1) return KILN_FAIL(err, KILN_E_INVALID, "GGUF tensor '%s': a dimension < 1", sp->name);
            numel *= (uint64_t)sp->shape[d];
        }
        if ((uint64_t)sp->shape[sp->ndim - 1] % q->block)
            return KILN_FAIL(err, KILN_E_INVALID, "GGUF tensor '%s': a row of %lld is not whole %s blocks of %u",
                             sp->name, (long long)sp->shape[sp->ndim - 1], q->name, q->block);
        sizes[i] = numel / q->block * q->bytes;
    }
    return KILN_OK;
}

kiln_status kiln_gguf_writer_open(const char *path, const kiln_gguf_wspec *specs, size_t n, const kiln_gguf_wkv *kvs,
                                  size_t n_kv, kiln_gguf_writer **outp, kiln_err *err) {
    *outp = NULL;
    kiln_gguf_writer *w = kiln_calloc(1, sizeof *w);
    if (!w) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    w->fd = -1;
    w->alignment = 32;
    w->n = n;
    w->path = kiln_strdup(path);
    w->tmp = kiln_malloc(strlen(path) + 5);
    w->sizes = kiln_calloc(n ? n : 1, sizeof *w->sizes);
    if (!w->path || !w->tmp || !w->sizes) {
        kiln_gguf_writer_abort(w);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    snprintf(w->tmp, strlen(path) + 5, "%s.tmp", path);
    kiln_status s = check_specs(specs, n, w->sizes, err);
    for (size_t i = 0; s == KILN_OK && i < n_kv; i++) {
        if (kvs[i].type != KILN_GGUF_STRING && kvs[i].type != KILN_GGUF_U32)
            s = KILN_FAIL(err, KILN_E_INVALID, "GGUF metadata '%s': the writer takes strings and u32s", kvs[i].key);
        else if (!strcmp(kvs[i].key, "general.alignment")) {
            uint32_t a = kvs[i].u32;
            if (kvs[i].type != KILN_GGUF_U32 || !a || (a & (a - 1)))
                s = KILN_FAIL(err, KILN_E_INVALID, "general.alignment must be a u32 power of two");
            else w->alignment = a;
        }
    }
    if (s != KILN_OK) {
        kiln_gguf_writer_abort(w);
        return s;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        s = KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: cannot create: %s", w->tmp,
                      strerror(errno));
        kiln_gguf_writer_abort(w);
        return s;
    }
    /* header and metadata */
    uint64_t pos = 0;
    s = out(w, "GGUF", 4, err);
    if (s == KILN_OK) s = out_u32(w, 3, err);
    if (s == KILN_OK) s = out_u64(w, n, err);
    if (s == KILN_OK) s = out_u64(w, n_kv, err);
    pos = 24;
    for (size_t i = 0; s == KILN_OK && i < n_kv; i++) {
        s = out_str(w, kvs[i].key, err);
        if (s == KILN_OK) s = out_u32(w, kvs[i].type, err);
        if (s == KILN_OK) s = kvs[i].type == KILN_GGUF_STRING ? out_str(w, kvs[i].str, err) : out_u32(w, kvs[i].u32, err);
        pos += 8 + strlen(kvs[i].key) + 4 + (kvs[i].type == KILN_GGUF_STRING ? 8 + strlen(kvs[i].str) : 4);
    }
    /* tensor infos: offsets are each tensor's place in the data section, padded to the alignment */
    uint64_t off = 0;
    for (size_t i = 0; s == KILN_OK && i < n; i++) {
        const kiln_gguf_wspec *sp = &specs[i];
        s = out_str(w, sp->name, err);
        if (s == KILN_OK) s = out_u32(w, (uint32_t)sp->ndim, err);
        for (int d = sp->ndim - 1; s == KILN_OK && d >= 0; d--) s = out_u64(w, (uint64_t)sp->shape[d], err);
        if (s == KILN_OK) s = out_u32(w, sp->type, err);
        if (s == KILN_OK) s = out_u64(w, off, err);
        pos += 8 + strlen(sp->name) + 4 + 8 * (uint64_t)sp->ndim + 4 + 8;
        off += (w->sizes[i] + w->alignment - 1) / w->alignment * w->alignment;
    }
    if (s == KILN_OK) s = pad(w, pos, err);
    if (s != KILN_OK) {
        kiln_gguf_writer_abort(w);
        return s;
    }
    *outp = w;
    return KILN_OK;
}

kiln_status kiln_gguf_writer_write(kiln_gguf_writer *w, const void *data, size_t bytes, kiln_err *err) {
    const uint8_t *p = data;
    while (bytes) {
        while (w->cur < w->n && w->cur_written == w->sizes[w->cur]) { /* tensor done: pad, next */
            KILN_TRY(pad(w, w->sizes[w->cur], err));
            w->cur++;
            w->cur_written = 0;
        }
        if (w->cur == w->n) return KILN_FAIL(err, KILN_E_INVALID, "%s: more bytes than the tensors hold", w->path);
        uint64_t room = w->sizes[w->cur] - w->cur_written;
        size_t k = room < bytes ? (size_t)room : bytes;
        KILN_TRY(out(w, p, k, err));
        w->cur_written += k, p += k, bytes -= k;
    }
    return KILN_OK;
}

kiln_status kiln_gguf_writer_finish(kiln_gguf_writer *w, kiln_err *err) {
    kiln_status s = KILN_OK;
    while (s == KILN_OK && w->cur < w->n && w->cur_written == w->sizes[w->cur]) {
        s = pad(w, w->sizes[w->cur], err);
        w->cur++;
        w->cur_written = 0;
    }
    if (s == KILN_OK && w->cur < w->n)
        s = KILN_FAIL(err, KILN_E_INVALID, "%s: tensor %zu of %zu is incomplete (%llu of %llu bytes)", w->path, w->cur + 1,
                      w->n, (unsigned long long)w->cur_written, (unsigned long long)w->sizes[w->cur]);
    if (s == KILN_OK) s = flush(w, err);
    if (s == KILN_OK && fsync(w->fd) != 0) s = KILN_FAIL(err, KILN_E_IO, "%s: fsync failed: %s", w->tmp, strerror(errno));
    if (s == KILN_OK && close(w->fd) != 0) s = KILN_FAIL(err, KILN_E_IO, "%s: close failed: %s", w->tmp, strerror(errno));
    if (s != KILN_OK) {
        kiln_gguf_writer_abort(w);
        return s;
    }
    w->fd = -1;
    if (rename(w->tmp, w->path) != 0) {
        s = KILN_FAIL(err, KILN_E_IO, "%s: cannot rename into place: %s", w->path, strerror(errno));
        unlink(w->tmp);
    }
    kiln_gguf_writer_abort(w); /* frees (fd is closed) */
    return s;
}
