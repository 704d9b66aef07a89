/* safetensors.c - the checkpoint reader: mmap, strict header validation, shards, O(1) lookup (see
 * safetensors.h). The writer lives in safetensors_write.c.
 *
 * A file is [u64 little-endian header length N][N bytes of UTF-8 JSON][data]. Nothing in the header is
 * trusted: every number is range-checked against the file before it is used to form a pointer, and the
 * ranges of all tensors are checked for overlap after sorting them by offset.
 */
#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/utf8.h"
#include "io/gguf.h"
#include "tensor/quant.h"

typedef struct st_shard {
    char *path; /* or the label of an in-memory image */
    const uint8_t *base;
    size_t len;
    bool mapped;
} st_shard;

struct kiln_st_file {
    char *label;
    st_shard *shards;
    size_t n_shards;
    kiln_st_tensor *tensors;
    size_t n, cap;
    uint32_t *slots; /* open addressing: tensor index + 1, 0 = empty */
    size_t n_slots;  /* power of two */
    const char *prefix;
    char **meta; /* key, value, key, value, ... */
    size_t n_meta;
    kiln_gguf_file *gguf; /* a GGUF file opened as a checkpoint: owns the mapping the tensors point into */
    kiln_gguf_te te;      /* a llama.cpp-named text encoder GGUF (kind NONE otherwise): its validated metadata */
};

/* Prefixes that wrap a model's own names in some single-file checkpoints (ComfyUI, A1111-era files). */
static const char *const known_prefixes[] = {
    "model.diffusion_model.",
    "diffusion_model.",
    "first_stage_model.",
    "text_encoders.qwen3_4b.transformer.",
    "vae.",
};

/* ---- hash table --------------------------------------------------------------------------------------- */

/* FNV-1a, streamable so that prefix + name can be hashed without building the joined string. */
static uint64_t fnv_add(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

/* Finds the tensor whose stored name equals pre + name (pre may be ""). */
static const kiln_st_tensor *lookup(const kiln_st_file *f, const char *pre, const char *name) {
    if (!f->n_slots) return NULL;
    size_t plen = strlen(pre);
    size_t mask = f->n_slots - 1;
    for (size_t i = fnv_add(fnv_add(FNV_INIT, pre), name) & mask;; i = (i + 1) & mask) {
        uint32_t v = f->slots[i];
        if (!v) return NULL;
        const kiln_st_tensor *t = &f->tensors[v - 1];
        if (strncmp(t->name, pre, plen) == 0 && strcmp(t->name + plen, name) == 0) return t;
    }
}

static kiln_status build_index(kiln_st_file *f, kiln_err *err) {
    size_t want = 16;
    while (want < 2 * f->n) want *= 2;
    f->slots = kiln_calloc(want, sizeof *f->slots);
    if (!f->slots) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for the name index", f->label);
    f->n_slots = want;
    for (size_t k = 0; k < f->n; k++) {
        const kiln_st_tensor *t = &f->tensors[k];
        size_t i = fnv_add(FNV_INIT, t->name) & (want - 1);
        for (; f->slots[i]; i = (i + 1) & (want - 1)) {
            const kiln_st_tensor *o = &f->tensors[f->slots[i] - 1];
            if (strcmp(o->name, t->name) == 0)
                return KILN_FAIL(err, KILN_E_FORMAT, "%s: duplicate tensor name '%s' (in %s and %s)", f->label,
                                 t->name, f->shards[o->shard].path, f->shards[t->shard].path);
        }
        f->slots[i] = (uint32_t)(k + 1);
    }
    return KILN_OK;
}

/* ---- header parsing ----------------------------------------------------------------------------------- */

static kiln_status add_meta(kiln_st_file *f, const char *key, const char *value, kiln_err *err) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return KILN_OK; /* shards repeat {"format":"pt"}: keep the first */
    char **m = kiln_realloc(f->meta, (f->n_meta + 1) * 2 * sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for metadata", f->label);
    f->meta = m;
    char *k = kiln_strdup(key), *v = k ? kiln_strdup(value) : NULL;
    if (!v) {
        kiln_free(k);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for metadata", f->label);
    }
    m[2 * f->n_meta] = k;
    m[2 * f->n_meta + 1] = v;
    f->n_meta++;
    return KILN_OK;
}

static kiln_status parse_metadata(kiln_st_file *f, const char *label, json_t *obj, kiln_err *err) {
    if (!json_is_object(obj))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: __metadata__ is not an object of strings", label);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!json_is_string(v))
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: __metadata__ value for '%s' is not a string", label, key);
        KILN_TRY(add_meta(f, key, json_string_value(v), err));
    }
    return KILN_OK;
}

/* Reads a non-negative JSON integer. */
static bool get_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 0) return false;
    *out = (uint64_t)x;
    return true;
}

static kiln_status parse_tensor(kiln_st_file *f, const char *label, int shard, const char *name, json_t *obj,
                                const uint8_t *data, size_t data_len, kiln_err *err) {
    if (!*name) return KILN_FAIL(err, KILN_E_FORMAT, "%s: a tensor has an empty name", label);
    if (!json_is_object(obj))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': entry is not an object", label, name);
    json_t *jdt = json_object_get(obj, "dtype"), *jshape = json_object_get(obj, "shape"),
           *joff = json_object_get(obj, "data_offsets");
    if (!json_is_string(jdt))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': missing or non-string dtype", label, name);
    kiln_dtype dt;
    if (!kiln_dtype_from_safetensors(json_string_value(jdt), &dt))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': unknown dtype '%s'", label, name,
                         json_string_value(jdt));
    if (!json_is_array(jshape))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': shape is missing or not a list", label, name);
    size_t ndim = json_array_size(jshape);
    if (ndim > KILN_MAX_DIMS)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': %zu dimensions, more than %d", label, name, ndim,
                         KILN_MAX_DIMS);
    kiln_st_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = (int)ndim;
    t.shard = shard;
    size_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < ndim; i++) {
        uint64_t d;
        if (!get_uint(json_array_get(jshape, i), &d))
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': shape entry %zu is not a non-negative integer",
                             label, name, i);
        t.shape[i] = (int64_t)d;
        if (d > SIZE_MAX || !kiln_mul_size(numel, (size_t)d, &numel)) overflow = true;
    }
    size_t nbytes = 0;
    if (overflow || !kiln_mul_size(numel, kiln_dtype_size(dt), &nbytes) || nbytes > INT64_MAX)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': shape is too large", label, name);
    uint64_t begin, end;
    if (!json_is_array(joff) || json_array_size(joff) != 2 || !get_uint(json_array_get(joff, 0), &begin) ||
        !get_uint(json_array_get(joff, 1), &end))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': data_offsets is not [begin, end] of non-negative "
                         "integers", label, name);
    if (begin > end)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s': data_offsets begin %llu > end %llu", label, name,
                         (unsigned long long)begin, (unsigned long long)end);
    if (end > data_len)
        return KILN_FAIL(err, KILN_E_FORMAT,
                         "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the file (data is %zu "
                         "bytes; truncated?)", label, name, (unsigned long long)begin, (unsigned long long)end,
                         data_len);
    if (end - begin != nbytes) {
        char sb[160];
        kiln_tensor view = kiln_tensor_make(NULL, dt, t.ndim, t.shape);
        return KILN_FAIL(err, KILN_E_FORMAT,
                         "%s: tensor '%s': dtype %s x shape %s is %zu bytes but data_offsets span %llu bytes",
                         label, name, kiln_dtype_safetensors_name(dt), kiln_shape_str(&view, sb, sizeof sb), nbytes,
                         (unsigned long long)(end - begin));
    }
    t.data = data + begin;
    t.nbytes = nbytes;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        kiln_st_tensor *nt = kiln_realloc(f->tensors, cap * sizeof *nt);
        if (!nt) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for %zu tensors", label, cap);
        f->tensors = nt;
        f->cap = cap;
    }
    char *owned = kiln_strdup(name);
    if (!owned) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for tensor names", label);
    t.name = owned;
    f->tensors[f->n++] = t;
    return KILN_OK;
}

static int cmp_tensor_pos(const void *a, const void *b) {
    const kiln_st_tensor *x = a, *y = b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    if (x->data != y->data) return (uintptr_t)x->data < (uintptr_t)y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Parses one safetensors image (buf, len) as shard number `shard`, appending its tensors to f. */
static kiln_status parse_image(kiln_st_file *f, int shard, const uint8_t *buf, size_t len, const char *label,
                               kiln_err *err) {
    if (len < 8)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: file is %zu bytes, too short for the 8-byte header length "
                         "(truncated?)", label, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen == 0) return KILN_FAIL(err, KILN_E_FORMAT, "%s: header length is 0", label);
    if (hlen > KILN_ST_MAX_HEADER)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: header length %llu exceeds the limit of %u bytes", label,
                         (unsigned long long)hlen, KILN_ST_MAX_HEADER);
    if (hlen > len - 8)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes; "
                         "truncated?)", label, (unsigned long long)hlen, len);
    const char *hdr = (const char *)buf + 8;
    size_t bad;
    if (!kiln_utf8_valid(hdr, (size_t)hlen, &bad))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: header is not valid UTF-8 (byte %zu of the header; a tensor "
                         "name or metadata string is not UTF-8)", label, bad);
    if (memchr(hdr, '\0', (size_t)hlen))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: header contains a NUL byte", label);
    json_error_t jerr;
    json_t *root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_duplicate_key)
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: header has duplicate tensor names (%s, at byte %d)", label,
                             jerr.text, jerr.position);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: header is not valid JSON: %s (at byte %d)", label, jerr.text,
                         jerr.position);
    }
    kiln_status s = KILN_OK;
    if (!json_is_object(root)) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: header is not a JSON object", label);
        goto out;
    }
    const uint8_t *data = buf + 8 + hlen;
    size_t data_len = len - 8 - (size_t)hlen;
    size_t first = f->n;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) s = parse_metadata(f, label, v, err);
        else s = parse_tensor(f, label, shard, key, v, data, data_len, err);
        if (s != KILN_OK) goto out;
    }
    /* Overlap: sort this shard's tensors by offset; each must start at or after the previous one's end.
     * Empty tensors occupy no bytes and cannot overlap anything. */
    if (f->n > first) qsort(f->tensors + first, f->n - first, sizeof *f->tensors, cmp_tensor_pos);
    const kiln_st_tensor *prev = NULL;
    for (size_t i = first; i < f->n; i++) {
        const kiln_st_tensor *t = &f->tensors[i];
        if (!t->nbytes) continue;
        if (prev && (const uint8_t *)t->data < (const uint8_t *)prev->data + prev->nbytes) {
            s = KILN_FAIL(err, KILN_E_FORMAT, "%s: tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", label,
                          prev->name, (size_t)((const uint8_t *)prev->data - data),
                          (size_t)((const uint8_t *)prev->data - data) + prev->nbytes, t->name,
                          (size_t)((const uint8_t *)t->data - data),
                          (size_t)((const uint8_t *)t->data - data) + t->nbytes);
            goto out;
        }
        prev = t;
    }
out:
    json_decref(root);
    return s;
}

/* ---- opening ------------------------------------------------------------------------------------------ */

static kiln_status new_file(const char *label, size_t n_shards, kiln_st_file **out, kiln_err *err) {
    kiln_st_file *f = kiln_calloc(1, sizeof *f);
    if (!f) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    f->prefix = "";
    f->label = kiln_strdup(label);
    f->shards = kiln_calloc(n_shards ? n_shards : 1, sizeof *f->shards);
    if (!f->label || !f->shards) {
        kiln_st_close(f);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    }
    f->n_shards = n_shards;
    *out = f;
    return KILN_OK;
}

static void detect_prefix(kiln_st_file *f) {
    if (!f->n) return;
    for (size_t p = 0; p < sizeof known_prefixes / sizeof known_prefixes[0]; p++) {
        size_t plen = strlen(known_prefixes[p]);
        size_t i = 0;
        while (i < f->n && strncmp(f->tensors[i].name, known_prefixes[p], plen) == 0) i++;
        if (i == f->n) {
            f->prefix = known_prefixes[p];
            return;
        }
    }
}

static kiln_status finish_open(kiln_st_file *f, kiln_err *err) {
    if (f->n) qsort(f->tensors, f->n, sizeof *f->tensors, cmp_tensor_pos); /* (qsort of NULL is undefined) */
    KILN_TRY(build_index(f, err));
    detect_prefix(f);
    return KILN_OK;
}

kiln_status kiln_st_open_memory(const void *buf, size_t len, const char *label, kiln_st_file **out,
                                kiln_err *err) {
    *out = NULL;
    if (!label) label = "<memory>";
    kiln_st_file *f;
    KILN_TRY(new_file(label, 1, &f, err));
    f->shards[0].path = kiln_strdup(label);
    f->shards[0].base = buf;
    f->shards[0].len = len;
    kiln_status s = f->shards[0].path ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    if (s == KILN_OK) s = parse_image(f, 0, buf, len, label, err);
    if (s == KILN_OK) s = finish_open(f, err);
    if (s != KILN_OK) {
        kiln_st_close(f);
        return s;
    }
    *out = f;
    return KILN_OK;
}

/* Maps path read-only into shard sh. */
static kiln_status map_shard(st_shard *sh, const char *path, kiln_err *err) {
    sh->path = kiln_strdup(path);
    if (!sh->path) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: cannot open: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return KILN_FAIL(err, KILN_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return KILN_FAIL(err, KILN_E_INVALID, "%s: not a regular file", path);
    }
    if (st.st_size == 0) { /* mmap of 0 bytes fails; the parser reports the short file */
        close(fd);
        return KILN_OK;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return KILN_FAIL(err, KILN_E_LIMIT, "%s: file too large to map", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return KILN_FAIL(err, KILN_E_IO, "%s: cannot mmap: %s", path, strerror(e));
    sh->base = p;
    sh->len = (size_t)st.st_size;
    sh->mapped = true;
    return KILN_OK;
}

/* A GGUF file (FLUX GGUFs keep the BFL tensor names, as ComfyUI-GGUF expects) as a checkpoint: its tensors, in
 * PyTorch order, pointing into the GGUF mapping; quantised ones as QBLOCK entries. A text encoder in llama.cpp's
 * naming (io/gguf_te.h) is validated against its metadata and its tensors renamed to the transformers names. */
static kiln_status open_gguf(const char *path, kiln_st_file **out, kiln_err *err) {
    kiln_gguf_file *g;
    KILN_TRY(kiln_gguf_open(path, &g, err));
    kiln_gguf_te te;
    kiln_status s = kiln_gguf_te_check(g, &te, err);
    kiln_st_file *f;
    if (s == KILN_OK) s = new_file(path, 1, &f, err);
    if (s != KILN_OK) {
        kiln_gguf_close(g);
        return s;
    }
    f->gguf = g;
    f->te = te;
    f->shards[0].path = kiln_strdup(path);
    size_t n = kiln_gguf_count(g);
    f->tensors = kiln_calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->shards[0].path || !f->tensors) s = KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; s == KILN_OK && i < n; i++) {
        const kiln_gguf_tensor *gt = kiln_gguf_at(g, i);
        kiln_st_tensor t = {.ndim = gt->ndim, .data = gt->data, .nbytes = gt->nbytes};
        for (int d = 0; d < gt->ndim; d++) t.shape[d] = gt->shape[d];
        switch (gt->type) {
        case KILN_QT_F32: t.dtype = KILN_DT_F32; break;
        case KILN_QT_F16: t.dtype = KILN_DT_F16; break;
        case KILN_QT_BF16: t.dtype = KILN_DT_BF16; break;
        default: t.dtype = KILN_DT_QBLOCK, t.qtype = gt->type; break;
        }
        char hf[256];
        if (te.kind != KILN_GGUF_TE_NONE && !kiln_gguf_te_hf_name(te.kind, gt->name, hf, sizeof hf))
            s = KILN_FAIL(err, KILN_E_INTERNAL, "%s: tensor '%s' passed the check but has no name", path, gt->name);
        t.name = s != KILN_OK ? NULL : kiln_strdup(te.kind != KILN_GGUF_TE_NONE ? hf : gt->name);
        if (s == KILN_OK && !t.name) s = KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory for tensor names", path);
        else f->tensors[f->n++] = t;
    }
    if (s == KILN_OK) s = finish_open(f, err);
    if (s != KILN_OK) {
        kiln_st_close(f);
        return s;
    }
    *out = f;
    return KILN_OK;
}

static kiln_status open_single(const char *path, kiln_st_file **out, kiln_err *err) {
    if (kiln_gguf_sniff(path)) return open_gguf(path, out, err);
    kiln_st_file *f;
    KILN_TRY(new_file(path, 1, &f, err));
    kiln_status s = map_shard(&f->shards[0], path, err);
    if (s == KILN_OK) s = parse_image(f, 0, f->shards[0].base, f->shards[0].len, path, err);
    if (s == KILN_OK) s = finish_open(f, err);
    if (s != KILN_OK) {
        kiln_st_close(f);
        return s;
    }
    *out = f;
    return KILN_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A shard path from an index must stay inside the index's folder. */
static bool safe_relative(const char *p) {
    if (!*p || p[0] == '/') return false;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
        s += n + (e ? 1 : 0);
    }
    return true;
}

/* Real indexes are tens of KB (one line per tensor); a bigger file is not an index. */
#define KILN_ST_MAX_INDEX (64u * 1024 * 1024)

static kiln_status open_index(const char *path, kiln_st_file **out, kiln_err *err) {
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > (off_t)KILN_ST_MAX_INDEX)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %lld bytes is too big for a shard index (limit %u)", path,
                         (long long)st.st_size, KILN_ST_MAX_INDEX);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (access(path, F_OK) != 0)
            return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: not valid JSON: %s (line %d)", path, jerr.text, jerr.line);
    }
    kiln_st_file *f = NULL;
    const char **names = NULL; /* distinct shard file names, borrowed from root */
    char *full = NULL;
    kiln_status s = KILN_OK;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: no \"weight_map\" object of tensor names to shard files", path);
        goto out;
    }
    names = kiln_calloc(json_object_size(map), sizeof *names);
    if (!names) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    size_t n_names = 0;
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const char *file = json_string_value(v);
        if (!file || !safe_relative(file)) {
            s = KILN_FAIL(err, KILN_E_FORMAT, "%s: weight_map entry '%s' does not name a shard file inside the "
                          "index's folder", path, key);
            goto out;
        }
        size_t i = 0;
        while (i < n_names && strcmp(names[i], file) != 0) i++;
        if (i == n_names) names[n_names++] = file;
    }
    s = new_file(path, n_names, &f, err);
    if (s != KILN_OK) goto out;
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    for (size_t i = 0; i < n_names; i++) {
        size_t need = dirlen + strlen(names[i]) + 1;
        char *p = kiln_realloc(full, need);
        if (!p) {
            s = KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
            goto out;
        }
        full = p;
        memcpy(full, path, dirlen);
        strcpy(full + dirlen, names[i]);
        s = map_shard(&f->shards[i], full, err);
        if (s != KILN_OK) {
            kiln_err_prefix(err, "%s names shard %s", path, names[i]);
            goto out;
        }
        s = parse_image(f, (int)i, f->shards[i].base, f->shards[i].len, f->shards[i].path, err);
        if (s != KILN_OK) goto out;
    }
    s = finish_open(f, err);
    if (s != KILN_OK) goto out;
    /* The index and the shards must agree both ways. */
    json_object_foreach(map, key, v) {
        const kiln_st_tensor *t = lookup(f, "", key);
        const char *file = json_string_value(v);
        if (!t) {
            s = KILN_FAIL(err, KILN_E_FORMAT, "%s: the index puts '%s' in %s, but that shard does not hold it",
                          path, key, file);
            goto out;
        }
        if (strcmp(names[t->shard], file) != 0) {
            s = KILN_FAIL(err, KILN_E_FORMAT, "%s: the index puts '%s' in %s, but it is in %s", path, key, file,
                          names[t->shard]);
            goto out;
        }
    }
    if (f->n != json_object_size(map)) {
        for (size_t i = 0; i < f->n; i++) {
            if (!json_object_get(map, f->tensors[i].name)) {
                s = KILN_FAIL(err, KILN_E_FORMAT, "%s: shard %s holds '%s', which the index does not list", path,
                              names[f->tensors[i].shard], f->tensors[i].name);
                goto out;
            }
        }
    }
out:
    kiln_free(full);
    kiln_free(names);
    json_decref(root);
    if (s != KILN_OK) {
        kiln_st_close(f);
        return s;
    }
    *out = f;
    return KILN_OK;
}

static kiln_status open_dir(const char *path, kiln_st_file **out, kiln_err *err) {
    DIR *d = opendir(path);
    if (!d) return KILN_FAIL(err, KILN_E_IO, "%s: cannot open folder: %s", path, strerror(errno));
    char index[1024] = "", single[1024] = "";
    int n_index = 0, n_single = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (ends_with(e->d_name, ".safetensors.index.json")) {
            n_index++;
            snprintf(index, sizeof index, "%s", e->d_name);
        } else if (ends_with(e->d_name, ".safetensors")) {
            n_single++;
            snprintf(single, sizeof single, "%s", e->d_name);
        }
    }
    closedir(d);
    const char *pick = NULL;
    if (n_index == 1) pick = index;
    else if (n_index > 1)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: folder holds %d shard indexes; name one", path, n_index);
    else if (n_single == 1) pick = single;
    else if (n_single > 1)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: folder holds %d .safetensors files and no index; name one",
                         path, n_single);
    else return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: folder holds no .safetensors file", path);
    size_t need = strlen(path) + strlen(pick) + 2;
    char *full = kiln_malloc(need);
    if (!full) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    snprintf(full, need, "%s/%s", path, pick);
    kiln_status s = n_index ? open_index(full, out, err) : open_single(full, out, err);
    kiln_free(full);
    return s;
}

kiln_status kiln_st_open(const char *path, kiln_st_file **out, kiln_err *err) {
    *out = NULL;
    if (!path || !*path) return KILN_FAIL(err, KILN_E_INVALID, "no checkpoint path given");
    struct stat st;
    if (stat(path, &st) != 0)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return open_dir(path, out, err);
    if (ends_with(path, ".json")) return open_index(path, out, err);
    return open_single(path, out, err);
}

static const char *const ckpt_parts[] = {KILN_CKPT_DIT, KILN_CKPT_CLIP_L, KILN_CKPT_T5XXL, KILN_CKPT_VAE};

static bool has_prefix(const kiln_st_file *f, const char *pre) {
    size_t n = strlen(pre);
    for (size_t i = 0; i < f->n; i++)
        if (!strncmp(f->tensors[i].name, pre, n)) return true;
    return false;
}

bool kiln_st_is_checkpoint(const kiln_st_file *f) {
    int parts = 0;
    for (size_t p = 0; p < sizeof ckpt_parts / sizeof ckpt_parts[0]; p++) parts += has_prefix(f, ckpt_parts[p]);
    return parts >= 2;
}

/* ComfyUI's per-layer fp8 declarations (_quantization_metadata, io/fp8_layout.h) describe the whole checkpoint:
 * a part keeps the layers whose weight it holds, so that each part's fp8 layout is checked on its own tensors. */
static kiln_status part_quant_metadata(kiln_st_file *f, kiln_err *err) {
    for (size_t i = 0; i < f->n_meta; i++) {
        if (strcmp(f->meta[2 * i], "_quantization_metadata")) continue;
        json_t *root = json_loads(f->meta[2 * i + 1], 0, NULL), *layers = json_object_get(root, "layers");
        if (!json_is_object(layers)) { /* malformed: left for kiln_fp8_scan to refuse by name */
            json_decref(root);
            return KILN_OK;
        }
        const char *layer;
        json_t *v, *tmp;
        json_object_foreach_safe(layers, tmp, layer, v) {
            char name[1024];
            if (snprintf(name, sizeof name, "%s.weight", layer) >= (int)sizeof name || !kiln_st_find(f, name))
                json_object_del(layers, layer);
        }
        char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(root);
        char *copy = text ? kiln_strdup(text) : NULL;
        free(text);
        if (!copy) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", f->label);
        kiln_free(f->meta[2 * i + 1]);
        f->meta[2 * i + 1] = copy;
    }
    return KILN_OK;
}

kiln_status kiln_st_open_part(const char *path, const char *part, kiln_st_file **out, kiln_err *err) {
    KILN_TRY(kiln_st_open(path, out, err));
    kiln_st_file *f = *out;
    if (!part || !kiln_st_is_checkpoint(f)) return KILN_OK;
    size_t n = strlen(part), kept = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!strncmp(f->tensors[i].name, part, n)) f->tensors[kept++] = f->tensors[i];
        else kiln_free((void *)f->tensors[i].name);
    }
    f->n = kept;
    kiln_free(f->slots);
    f->slots = NULL;
    /* the stored names keep the part's prefix; kiln_st_find adds it (part is one of the static ckpt_parts) */
    for (size_t p = 0; p < sizeof ckpt_parts / sizeof ckpt_parts[0]; p++)
        if (!strcmp(part, ckpt_parts[p])) f->prefix = ckpt_parts[p];
    kiln_status s = !kept ? KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: a ComfyUI checkpoint without %s* tensors", path, part)
                    : strcmp(f->prefix, part) ? KILN_FAIL(err, KILN_E_INVALID, "%s: unknown checkpoint part %s", path, part)
                                              : build_index(f, err);
    if (s == KILN_OK) s = part_quant_metadata(f, err);
    if (s != KILN_OK) {
        kiln_st_close(f);
        *out = NULL;
    }
    return s;
}

void kiln_st_close(kiln_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_shards; i++) {
        if (f->shards[i].mapped) munmap((void *)f->shards[i].base, f->shards[i].len);
        kiln_free(f->shards[i].path);
    }
    for (size_t i = 0; i < f->n; i++) kiln_free((void *)f->tensors[i].name);
    for (size_t i = 0; i < 2 * f->n_meta; i++) kiln_free(f->meta[i]);
    kiln_free(f->meta);
    kiln_free(f->tensors);
    kiln_free(f->slots);
    kiln_free(f->shards);
    kiln_free(f->label);
    kiln_gguf_close(f->gguf);
    kiln_free(f);
}

/* ---- queries ------------------------------------------------------------------------------------------ */

size_t kiln_st_count(const kiln_st_file *f) { return f->n; }

const kiln_st_tensor *kiln_st_at(const kiln_st_file *f, size_t i) { return i < f->n ? &f->tensors[i] : NULL; }

const kiln_st_tensor *kiln_st_find(const kiln_st_file *f, const char *name) {
    const kiln_st_tensor *t = lookup(f, "", name);
    if (!t && *f->prefix) t = lookup(f, f->prefix, name);
    return t;
}

const char *kiln_st_prefix(const kiln_st_file *f) { return f->prefix; }

const char *kiln_st_metadata(const kiln_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

size_t kiln_st_metadata_count(const kiln_st_file *f) { return f->n_meta; }

void kiln_st_metadata_at(const kiln_st_file *f, size_t i, const char **key, const char **value) {
    *key = i < f->n_meta ? f->meta[2 * i] : NULL;
    *value = i < f->n_meta ? f->meta[2 * i + 1] : NULL;
}

size_t kiln_st_shard_count(const kiln_st_file *f) { return f->n_shards; }

const char *kiln_st_shard_path(const kiln_st_file *f, size_t i) {
    return i < f->n_shards ? f->shards[i].path : NULL;
}

const char *kiln_st_label(const kiln_st_file *f) { return f->label; }

const kiln_gguf_te *kiln_st_gguf_te(const kiln_st_file *f) {
    return f->te.kind != KILN_GGUF_TE_NONE ? &f->te : NULL;
}

kiln_tensor kiln_st_view(const kiln_st_tensor *t) {
    if (t->dtype == KILN_DT_QBLOCK && t->ndim == 2) return kiln_tensor_make_q((void *)t->data, t->qtype, t->shape[0], t->shape[1]);
    return kiln_tensor_make((void *)t->data, t->dtype, t->ndim, t->shape);
}

kiln_status kiln_st_get(const kiln_st_file *f, const char *name, kiln_dtype dtype, int ndim,
                        const int64_t *shape, kiln_tensor *out, kiln_err *err) {
    const kiln_st_tensor *t = kiln_st_find(f, name);
    if (!t) return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: no tensor '%s'", f->label, name);
    kiln_tensor v = kiln_st_view(t);
    if (dtype != KILN_DT_COUNT && t->dtype != dtype)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s' is %s, expected %s", f->label, t->name,
                         kiln_dtype_name(t->dtype), kiln_dtype_name(dtype));
    bool ok = ndim < 0 || t->ndim == ndim;
    for (int i = 0; ok && ndim > 0 && shape && i < ndim; i++) ok = shape[i] < 0 || t->shape[i] == shape[i];
    if (!ok) {
        char have[160], want[160];
        kiln_tensor w = kiln_tensor_make(NULL, t->dtype, ndim < 0 ? 0 : ndim, shape ? shape : t->shape);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: tensor '%s' has shape %s, expected %s", f->label, t->name,
                         kiln_shape_str(&v, have, sizeof have), kiln_shape_str(&w, want, sizeof want));
    }
    if (out) *out = v;
    return KILN_OK;
}
