/* gguf.c - the GGUF reader: mmap, strict validation of every count, string, offset and size (see gguf.h).
 *
 * Nothing in the file is trusted. All reading goes through a cursor that checks each read against the bytes
 * left before it happens, so a count or length can never form a pointer outside the file, and every count is
 * bounded by the smallest encoding of its entries before anything is allocated for them (a 2^60 tensor count
 * in a 100-byte file fails at once instead of asking for memory). Sizes are computed with overflow checks. */
#define _GNU_SOURCE /* qsort_r */
#include "io/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "tensor/quant.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ALIGNMENT (1u << 20)
/* The smallest possible encodings, which bound the counts: a kv is a key (8-byte length + at least 1 byte), a
 * type and at least one value byte; a tensor info is a name (8 + 1), n_dims, one dimension, a type, an offset. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_BYTES (8 + 1 + 4 + 8 + 4 + 8)

struct kiln_gguf_file {
    char *label;
    const uint8_t *base;
    size_t len;
    bool mapped;
    uint32_t version, alignment;
    uint64_t data_offset;
    kiln_gguf_kv *kvs;
    size_t n_kv;
    kiln_gguf_tensor *tensors;
    size_t n_tensors;
    uint32_t *by_name; /* tensor indices sorted by name, for kiln_gguf_find */
};

typedef struct cursor {
    const uint8_t *p;
    size_t len, pos;
    const char *label;
    kiln_err *err;
} cursor;

/* ---- reading primitives: each checks the bytes left first --------------------------------------------------- */

static kiln_status need(cursor *c, uint64_t n, const char *what) {
    if (n > c->len - c->pos)
        return KILN_FAIL(c->err, KILN_E_FORMAT,
                         "%s: %s at byte %zu needs %llu bytes but only %zu are left (file is %zu bytes; truncated?)",
                         c->label, what, c->pos, (unsigned long long)n, c->len - c->pos, c->len);
    return KILN_OK;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static kiln_status get_u32(cursor *c, uint32_t *v, const char *what) {
    KILN_TRY(need(c, 4, what));
    *v = (uint32_t)le(c->p + c->pos, 4);
    c->pos += 4;
    return KILN_OK;
}

static kiln_status get_u64(cursor *c, uint64_t *v, const char *what) {
    KILN_TRY(need(c, 8, what));
    *v = le(c->p + c->pos, 8);
    c->pos += 8;
    return KILN_OK;
}

/* A string: u64 length + bytes. Returns a pointer into the file (not NUL-terminated). */
static kiln_status get_str(cursor *c, const char **s, uint64_t *n, const char *what) {
    char w[160];
    snprintf(w, sizeof w, "the length of %s", what);
    KILN_TRY(get_u64(c, n, w));
    snprintf(w, sizeof w, "%s (%llu bytes)", what, (unsigned long long)*n);
    KILN_TRY(need(c, *n, w));
    *s = (const char *)c->p + c->pos;
    c->pos += (size_t)*n;
    return KILN_OK;
}

/* A name (key or tensor name): non-empty UTF-8 without NUL, copied NUL-terminated. */
static kiln_status get_name(cursor *c, char **out, const char *what) {
    const char *s;
    uint64_t n;
    KILN_TRY(get_str(c, &s, &n, what));
    if (n == 0) return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s at byte %zu is empty", c->label, what, c->pos - 8);
    if (memchr(s, 0, (size_t)n) || !kiln_utf8_valid(s, (size_t)n, NULL))
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s at byte %zu is not UTF-8 text (or holds a NUL)", c->label,
                         what, c->pos - (size_t)n);
    *out = kiln_strndup(s, (size_t)n);
    if (!*out) return KILN_FAIL(c->err, KILN_E_NOMEM, "%s: out of memory", c->label);
    return KILN_OK;
}

static const uint8_t vtype_size[KILN_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *kiln_gguf_vtype_name(kiln_gguf_vtype t) {
    static const char *const names[KILN_GGUF_VTYPE_COUNT] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                             "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < KILN_GGUF_VTYPE_COUNT ? names[t] : "?";
}

/* One value of scalar type t (not an array): checks bools and strings, skips over it. */
static kiln_status skip_value(cursor *c, kiln_gguf_vtype t, const char *key) {
    char what[160];
    if (t == KILN_GGUF_STRING) {
        const char *s;
        uint64_t n;
        snprintf(what, sizeof what, "string value of '%s'", key);
        return get_str(c, &s, &n, what);
    }
    snprintf(what, sizeof what, "%s value of '%s'", kiln_gguf_vtype_name(t), key);
    KILN_TRY(need(c, vtype_size[t], what));
    if (t == KILN_GGUF_BOOL && c->p[c->pos] > 1)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: bool value of '%s' at byte %zu is %u, not 0 or 1", c->label, key,
                         c->pos, c->p[c->pos]);
    c->pos += vtype_size[t];
    return KILN_OK;
}

static kiln_status get_vtype(cursor *c, kiln_gguf_vtype *t, const char *key, const char *which) {
    uint32_t v;
    char what[160];
    snprintf(what, sizeof what, "the %s type of '%s'", which, key);
    KILN_TRY(get_u32(c, &v, what));
    if (v >= KILN_GGUF_VTYPE_COUNT)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: '%s' has unknown %s type %u (known: 0..12)", c->label, key,
                         which, v);
    *t = (kiln_gguf_vtype)v;
    return KILN_OK;
}

static kiln_status parse_kv(cursor *c, kiln_gguf_kv *kv) {
    char *key;
    KILN_TRY(get_name(c, &key, "a metadata key"));
    kv->key = key;
    KILN_TRY(get_vtype(c, &kv->type, key, "value"));
    kv->elem_type = kv->type;
    kv->count = 1;
    if (kv->type == KILN_GGUF_ARRAY) {
        KILN_TRY(get_vtype(c, &kv->elem_type, key, "array element"));
        if (kv->elem_type == KILN_GGUF_ARRAY)
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: '%s' is an array of arrays, which GGUF readers do not "
                             "support", c->label, key);
        char what[160];
        snprintf(what, sizeof what, "the element count of '%s'", key);
        KILN_TRY(get_u64(c, &kv->count, what));
        uint64_t min = kv->elem_type == KILN_GGUF_STRING ? 8 : vtype_size[kv->elem_type];
        if (kv->count > (c->len - c->pos) / min)
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: array '%s' claims %llu %s elements, more than the %zu "
                             "bytes left can hold", c->label, key, (unsigned long long)kv->count,
                             kiln_gguf_vtype_name(kv->elem_type), c->len - c->pos);
    }
    kv->raw = c->p + c->pos;
    if (kv->type == KILN_GGUF_STRING) {
        const char *s;
        uint64_t n;
        char what[160];
        snprintf(what, sizeof what, "string value of '%s'", key);
        KILN_TRY(get_str(c, &s, &n, what));
        if (memchr(s, 0, (size_t)n))
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: string value of '%s' holds a NUL byte", c->label, key);
        kv->str = kiln_strndup(s, (size_t)n);
        if (!kv->str) return KILN_FAIL(c->err, KILN_E_NOMEM, "%s: out of memory", c->label);
        return KILN_OK;
    }
    if (kv->type != KILN_GGUF_ARRAY) return skip_value(c, kv->type, key);
    if (kv->elem_type != KILN_GGUF_STRING && kv->elem_type != KILN_GGUF_BOOL) {
        char what[160];
        snprintf(what, sizeof what, "the %llu elements of '%s'", (unsigned long long)kv->count, key);
        KILN_TRY(need(c, kv->count * vtype_size[kv->elem_type], what)); /* bounded above: no overflow */
        c->pos += (size_t)(kv->count * vtype_size[kv->elem_type]);
        return KILN_OK;
    }
    for (uint64_t i = 0; i < kv->count; i++) KILN_TRY(skip_value(c, kv->elem_type, key));
    return KILN_OK;
}

static kiln_status parse_tensor_info(cursor *c, kiln_gguf_tensor *t) {
    char *name;
    KILN_TRY(get_name(c, &name, "a tensor name"));
    t->name = name;
    char what[200];
    uint32_t nd;
    snprintf(what, sizeof what, "the dimension count of tensor '%s'", name);
    KILN_TRY(get_u32(c, &nd, what));
    if (nd < 1 || nd > KILN_GGUF_MAX_DIMS)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s' has %u dimensions (GGUF allows 1 to %d)", c->label,
                         name, nd, KILN_GGUF_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t d;
        snprintf(what, sizeof what, "dimension %u of tensor '%s'", i, name);
        KILN_TRY(get_u64(c, &d, what));
        if (d == 0)
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s' has a dimension of size 0", c->label, name);
        if (d > INT64_MAX || numel > INT64_MAX / d) overflow = true;
        else numel *= d;
        t->ne[i] = (int64_t)d;
        t->shape[nd - 1 - i] = (int64_t)d;
    }
    if (overflow) return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s': its shape is too large", c->label, name);
    t->numel = numel;
    snprintf(what, sizeof what, "the type of tensor '%s'", name);
    KILN_TRY(get_u32(c, &t->type, what));
    const kiln_qtype_info *q = kiln_qtype_get(t->type);
    if (!q) return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s' has unknown GGML type %u", c->label, name, t->type);
    if ((uint64_t)t->ne[0] % q->block)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s': a row of %lld values is not a whole number of %s "
                         "blocks of %u", c->label, name, (long long)t->ne[0], q->name, q->block);
    uint64_t blocks = numel / q->block;
    if (blocks > UINT64_MAX / q->bytes || blocks * q->bytes > SIZE_MAX)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s': its size is too large", c->label, name);
    t->nbytes = (size_t)(blocks * q->bytes);
    snprintf(what, sizeof what, "the offset of tensor '%s'", name);
    return get_u64(c, &t->offset, what);
}

/* ---- the whole file ------------------------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b, void *ctx) {
    const kiln_gguf_tensor *t = ctx;
    return strcmp(t[*(const uint32_t *)a].name, t[*(const uint32_t *)b].name);
}

static int cmp_offset(const void *a, const void *b, void *ctx) {
    const kiln_gguf_tensor *t = ctx;
    uint64_t x = t[*(const uint32_t *)a].offset, y = t[*(const uint32_t *)b].offset;
    return x < y ? -1 : x > y;
}

static kiln_status check_alignment(kiln_gguf_file *g, kiln_err *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const kiln_gguf_kv *kv = kiln_gguf_kv_find(g, "general.alignment");
    if (!kv) return KILN_OK;
    if (kv->type != KILN_GGUF_U32)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: general.alignment is a %s, not a u32", g->label,
                         kiln_gguf_vtype_name(kv->type));
    uint32_t a = (uint32_t)le(kv->raw, 4);
    if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: general.alignment %u is not a power of two from 1 to %u", g->label,
                         a, GGUF_MAX_ALIGNMENT);
    g->alignment = a;
    return KILN_OK;
}

static kiln_status parse(kiln_gguf_file *g, kiln_err *err) {
    cursor c = {g->base, g->len, 0, g->label, err};
    KILN_TRY(need(&c, 4, "the magic"));
    if (memcmp(g->base, GGUF_MAGIC, 4) != 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: not a GGUF file (starts with %02x %02x %02x %02x, not \"GGUF\")",
                         g->label, g->base[0], g->base[1], g->base[2], g->base[3]);
    c.pos = 4;
    KILN_TRY(get_u32(&c, &g->version, "the version"));
    if (g->version == 1)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: GGUF version 1 (32-bit counts, 2023) is not supported; versions 2 "
                         "and 3 are", g->label);
    if (g->version != 2 && g->version != 3) {
        uint32_t sw = __builtin_bswap32(g->version);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: GGUF version %u is not supported (2 and 3 are)%s", g->label,
                         g->version, sw == 2 || sw == 3 ? "; this is a big-endian file" : "");
    }
    uint64_t n_tensors, n_kv;
    KILN_TRY(get_u64(&c, &n_tensors, "the tensor count"));
    KILN_TRY(get_u64(&c, &n_kv, "the metadata count"));
    size_t left = g->len - c.pos;
    if (n_kv > left / MIN_KV_BYTES)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %llu metadata entries cannot fit in the %zu bytes after the header",
                         g->label, (unsigned long long)n_kv, left);
    if (n_tensors > left / MIN_TENSOR_BYTES || n_tensors > UINT32_MAX)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %llu tensor infos cannot fit in the %zu bytes after the header",
                         g->label, (unsigned long long)n_tensors, left);
    g->kvs = kiln_calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    g->tensors = kiln_calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->by_name = kiln_calloc(n_tensors ? n_tensors : 1, sizeof *g->by_name);
    if (!g->kvs || !g->tensors || !g->by_name) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", g->label);
    for (size_t k = 0; k < n_kv; k++) {
        kiln_gguf_kv *kv = &g->kvs[k];
        kiln_status s = parse_kv(&c, kv);
        g->n_kv = k + 1; /* (zeroed entries: close frees whatever this one got) */
        if (s != KILN_OK) return s;
        for (size_t i = 0; i < k; i++)
            if (strcmp(g->kvs[i].key, kv->key) == 0)
                return KILN_FAIL(err, KILN_E_FORMAT, "%s: metadata key '%s' appears twice", g->label, kv->key);
    }
    KILN_TRY(check_alignment(g, err));
    for (size_t k = 0; k < n_tensors; k++) {
        kiln_status s = parse_tensor_info(&c, &g->tensors[k]);
        g->by_name[k] = (uint32_t)k;
        g->n_tensors = k + 1;
        if (s != KILN_OK) return s;
    }
    /* the data section starts at the next multiple of the alignment (the padding may be cut off only if there
     * is no data at all) */
    uint64_t data = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    g->data_offset = data;
    for (size_t i = 0; i < g->n_tensors; i++) {
        kiln_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s' starts at data offset %llu, not a multiple of the "
                             "alignment %u", g->label, t->name, (unsigned long long)t->offset, g->alignment);
        if (data > g->len || t->offset > g->len - data || t->nbytes > g->len - data - t->offset)
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s' (%zu bytes at data offset %llu, file offset %llu) "
                             "runs past the end of the file (%zu bytes; truncated?)", g->label, t->name, t->nbytes,
                             (unsigned long long)t->offset, (unsigned long long)(data + t->offset), g->len);
        t->data = g->base + data + t->offset;
    }
    if (g->n_tensors) {
        /* duplicates: sort by name */
        qsort_r(g->by_name, g->n_tensors, sizeof *g->by_name, cmp_name, g->tensors);
        for (size_t i = 1; i < g->n_tensors; i++)
            if (strcmp(g->tensors[g->by_name[i]].name, g->tensors[g->by_name[i - 1]].name) == 0)
                return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor name '%s' appears twice", g->label,
                                 g->tensors[g->by_name[i]].name);
        /* overlap: sort a copy by offset; each must start at or after the previous one's end */
        uint32_t *ord = kiln_malloc(g->n_tensors * sizeof *ord);
        if (!ord) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", g->label);
        for (size_t i = 0; i < g->n_tensors; i++) ord[i] = (uint32_t)i;
        qsort_r(ord, g->n_tensors, sizeof *ord, cmp_offset, g->tensors);
        kiln_status s = KILN_OK;
        for (size_t i = 1; i < g->n_tensors && s == KILN_OK; i++) {
            const kiln_gguf_tensor *a = &g->tensors[ord[i - 1]], *b = &g->tensors[ord[i]];
            if (b->offset < a->offset + a->nbytes)
                s = KILN_FAIL(err, KILN_E_FORMAT, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                              g->label, a->name, (unsigned long long)a->offset,
                              (unsigned long long)(a->offset + a->nbytes), b->name, (unsigned long long)b->offset,
                              (unsigned long long)(b->offset + b->nbytes));
        }
        kiln_free(ord);
        KILN_TRY(s);
    }
    return KILN_OK;
}

static kiln_status new_file(const char *label, kiln_gguf_file **out, kiln_err *err) {
    kiln_gguf_file *g = kiln_calloc(1, sizeof *g);
    if (g) g->label = kiln_strdup(label);
    if (!g || !g->label) {
        kiln_free(g);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    }
    *out = g;
    return KILN_OK;
}

static kiln_status finish(kiln_gguf_file *g, kiln_gguf_file **out, kiln_err *err) {
    kiln_status s = parse(g, err);
    if (s != KILN_OK) {
        kiln_gguf_close(g);
        return s;
    }
    *out = g;
    return KILN_OK;
}

kiln_status kiln_gguf_open_memory(const void *buf, size_t len, const char *label, kiln_gguf_file **out,
                                  kiln_err *err) {
    *out = NULL;
    kiln_gguf_file *g;
    KILN_TRY(new_file(label ? label : "<memory>", &g, err));
    g->base = buf;
    g->len = len;
    return finish(g, out, err);
}

kiln_status kiln_gguf_open(const char *path, kiln_gguf_file **out, kiln_err *err) {
    *out = NULL;
    if (!path || !*path) return KILN_FAIL(err, KILN_E_INVALID, "no GGUF path given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: cannot open: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return KILN_FAIL(err, KILN_E_INVALID, "%s: not a regular file", path);
    }
    kiln_gguf_file *g;
    kiln_status s = new_file(path, &g, err);
    if (s != KILN_OK) {
        close(fd);
        return s;
    }
    static const uint8_t empty[1];
    g->base = empty; /* a 0-byte file cannot be mapped; the parser reports it as too short */
    if (st.st_size > 0) {
        if ((uint64_t)st.st_size > SIZE_MAX) {
            close(fd);
            kiln_gguf_close(g);
            return KILN_FAIL(err, KILN_E_LIMIT, "%s: file too large to map", path);
        }
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            kiln_gguf_close(g);
            return KILN_FAIL(err, KILN_E_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
        g->base = p;
        g->len = (size_t)st.st_size;
        g->mapped = true;
    }
    close(fd);
    return finish(g, out, err);
}

bool kiln_gguf_sniff(const char *path) {
    char m[4];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool yes = fread(m, 1, 4, f) == 4 && memcmp(m, GGUF_MAGIC, 4) == 0;
    fclose(f);
    return yes;
}

void kiln_gguf_close(kiln_gguf_file *g) {
    if (!g) return;
    if (g->mapped) munmap((void *)g->base, g->len);
    for (size_t i = 0; i < g->n_kv; i++) {
        kiln_free((void *)g->kvs[i].key);
        kiln_free((void *)g->kvs[i].str);
    }
    for (size_t i = 0; i < g->n_tensors; i++) kiln_free((void *)g->tensors[i].name);
    kiln_free(g->kvs);
    kiln_free(g->tensors);
    kiln_free(g->by_name);
    kiln_free(g->label);
    kiln_free(g);
}

/* ---- queries -------------------------------------------------------------------------------------------------- */

uint32_t kiln_gguf_version(const kiln_gguf_file *g) { return g->version; }
uint32_t kiln_gguf_alignment(const kiln_gguf_file *g) { return g->alignment; }
uint64_t kiln_gguf_data_offset(const kiln_gguf_file *g) { return g->data_offset; }
const char *kiln_gguf_label(const kiln_gguf_file *g) { return g->label; }
size_t kiln_gguf_count(const kiln_gguf_file *g) { return g->n_tensors; }
size_t kiln_gguf_kv_count(const kiln_gguf_file *g) { return g->n_kv; }

const kiln_gguf_tensor *kiln_gguf_at(const kiln_gguf_file *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const kiln_gguf_tensor *kiln_gguf_find(const kiln_gguf_file *g, const char *name) {
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->tensors[g->by_name[mid]].name, name);
        if (c == 0) return &g->tensors[g->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const kiln_gguf_kv *kiln_gguf_kv_at(const kiln_gguf_file *g, size_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }

const kiln_gguf_kv *kiln_gguf_kv_find(const kiln_gguf_file *g, const char *key) {
    for (size_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0) return &g->kvs[i];
    return NULL;
}

const char *kiln_gguf_architecture(const kiln_gguf_file *g) {
    const kiln_gguf_kv *kv = kiln_gguf_kv_find(g, "general.architecture");
    return kv ? kv->str : NULL;
}

static bool element(const kiln_gguf_kv *kv, uint64_t i, const uint8_t **p) {
    if (i >= kv->count || kv->elem_type == KILN_GGUF_STRING || kv->elem_type == KILN_GGUF_ARRAY) return false;
    *p = kv->raw + i * vtype_size[kv->elem_type];
    return true;
}

bool kiln_gguf_kv_int(const kiln_gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p;
    if (!element(kv, i, &p)) return false;
    switch (kv->elem_type) {
    case KILN_GGUF_U8: case KILN_GGUF_BOOL: *out = p[0]; return true;
    case KILN_GGUF_I8: *out = (int8_t)p[0]; return true;
    case KILN_GGUF_U16: *out = (int64_t)le(p, 2); return true;
    case KILN_GGUF_I16: *out = (int16_t)le(p, 2); return true;
    case KILN_GGUF_U32: *out = (int64_t)le(p, 4); return true;
    case KILN_GGUF_I32: *out = (int32_t)le(p, 4); return true;
    case KILN_GGUF_I64: *out = (int64_t)le(p, 8); return true;
    case KILN_GGUF_U64: {
        uint64_t v = le(p, 8);
        if (v > INT64_MAX) return false;
        *out = (int64_t)v;
        return true;
    }
    default: return false;
    }
}

bool kiln_gguf_kv_uint(const kiln_gguf_kv *kv, uint64_t i, uint64_t *out) {
    const uint8_t *p;
    if (kv->elem_type == KILN_GGUF_U64 && element(kv, i, &p)) {
        *out = le(p, 8);
        return true;
    }
    int64_t v;
    if (!kiln_gguf_kv_int(kv, i, &v) || v < 0) return false;
    *out = (uint64_t)v;
    return true;
}

bool kiln_gguf_kv_float(const kiln_gguf_kv *kv, uint64_t i, double *out) {
    const uint8_t *p;
    if (!element(kv, i, &p)) return false;
    if (kv->elem_type == KILN_GGUF_F32) {
        uint32_t u = (uint32_t)le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return true;
    }
    if (kv->elem_type == KILN_GGUF_F64) {
        uint64_t u = le(p, 8);
        memcpy(out, &u, 8);
        return true;
    }
    return false;
}

bool kiln_gguf_kv_array_str(const kiln_gguf_kv *kv, uint64_t i, const char **s, size_t *len) {
    if (kv->type != KILN_GGUF_ARRAY || kv->elem_type != KILN_GGUF_STRING || i >= kv->count) return false;
    const uint8_t *p = kv->raw; /* validated at open: every length fits */
    for (uint64_t k = 0; k < i; k++) p += 8 + le(p, 8);
    *len = (size_t)le(p, 8);
    *s = (const char *)p + 8;
    return true;
}
