/* mkweights.c - random-weight checkpoints from a manifest (see mkweights.h).
 *
 * The loop: fill a 64 MiB buffer with pieces (tensor, element range, place in the buffer), generate all
 * pieces in parallel on the pool, hand the buffer to a writing thread and fill the other one meanwhile,
 * repeat. Small tensors share a buffer, large ones span many. Each piece is at most 256 Ki elements, so per-thread f32 scratch is 1 MiB.
 */
#include "io/mkweights.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/safetensors.h"
#include "tensor/convert.h"

enum { BUF_BYTES = 64 << 20, PIECE_ELEMS = 1 << 18, MAX_PIECES = 1024 };

/* ---- values ------------------------------------------------------------------------------------------- */

typedef enum gen_kind { GEN_NORMAL, GEN_GAIN, GEN_SMALL, GEN_UNIFORM_VAR, GEN_ZERO } gen_kind;

typedef struct gen {
    uint64_t key;
    gen_kind kind;
    float scale;
} gen;

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static void gen_init(gen *g, uint64_t seed, const char *name, kiln_dtype dt, int ndim, const int64_t *shape) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name, mixed with the seed */
    for (const char *s = name; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    g->key = mix64(h ^ mix64(seed + 0x9e3779b97f4a7c15ull));
    g->scale = 1.0f;
    bool is_norm = strstr(name, "norm") != NULL;
    if (!kiln_dtype_is_float(dt) || ends_with(name, "num_batches_tracked")) g->kind = GEN_ZERO;
    else if (ends_with(name, "running_var")) g->kind = GEN_UNIFORM_VAR;
    else if (ends_with(name, "running_mean")) g->kind = GEN_SMALL;
    else if (is_norm && (ends_with(name, ".weight") || ends_with(name, ".scale"))) g->kind = GEN_GAIN;
    else if (is_norm && ends_with(name, ".bias")) g->kind = GEN_SMALL;
    else {
        double fan_in = 1;
        for (int d = 1; d < ndim; d++) fan_in *= (double)shape[d];
        g->kind = GEN_NORMAL;
        g->scale = (float)(1.0 / sqrt(fan_in > 0 ? fan_in : 1));
    }
}

static inline float gen_value(const gen *g, uint64_t i) {
    uint64_t r = mix64(g->key + i * 0x9e3779b97f4a7c15ull);
    /* sum of four 16-bit uniforms: mean 131070, sd 65536/sqrt(3) = 37837.23 */
    float n = ((float)((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) - 131070.0f) *
              (1.0f / 37837.23f);
    switch (g->kind) {
    case GEN_NORMAL: return n * g->scale;
    case GEN_GAIN: return 1.0f + 0.1f * n;
    case GEN_SMALL: return 0.1f * n;
    case GEN_UNIFORM_VAR: return 0.5f + (float)(r >> 40) * 0x1p-24f;
    default: return 0.0f;
    }
}

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_GEN_AVX512 1
/* gen_value for GEN_NORMAL, 16 elements per step: the same integer hash, the same float operations in the
 * same order (no FMA), so the results equal the scalar ones bit for bit (test_io_mkweights checks). */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void gen_normal_avx512(const gen *g, uint64_t start,
                                                                                       size_t n, float *out) {
    const __m512i golden = _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ull);
    const __m512i c1 = _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull);
    const __m512i c2 = _mm512_set1_epi64((long long)0x94d049bb133111ebull);
    const __m512i m16 = _mm512_set1_epi64(0xffff);
    const __m512 bias = _mm512_set1_ps(131070.0f), k = _mm512_set1_ps(1.0f / 37837.23f), sc = _mm512_set1_ps(g->scale);
    /* z = key + index * golden, advanced by addition (wrapping, as in the scalar code): one multiply less */
    __m512i idx = _mm512_add_epi64(_mm512_set1_epi64((long long)start), _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    const __m512i key = _mm512_set1_epi64((long long)g->key);
    __m512i za = _mm512_add_epi64(key, _mm512_mullo_epi64(idx, golden));
    __m512i zb = _mm512_add_epi64(za, _mm512_mullo_epi64(_mm512_set1_epi64(8), golden));
    const __m512i step = _mm512_mullo_epi64(_mm512_set1_epi64(16), golden);
    size_t i = 0;
#define KILN_GEN_STEP(zin, dst)                                                                                \
    do {                                                                                                      \
        __m512i z = _mm512_mullo_epi64(_mm512_xor_si512(zin, _mm512_srli_epi64(zin, 30)), c1);                \
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);                            \
        z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));                                                    \
        __m512i sum = _mm512_add_epi64(                                                                       \
            _mm512_add_epi64(_mm512_and_si512(z, m16), _mm512_and_si512(_mm512_srli_epi64(z, 16), m16)),      \
            _mm512_add_epi64(_mm512_and_si512(_mm512_srli_epi64(z, 32), m16), _mm512_srli_epi64(z, 48)));      \
        __m512 v = _mm512_castps256_ps512(_mm512_cvtepi64_ps(sum)); /* exact: sums are < 2^18 */             \
        v = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(v, bias), k), sc);                                     \
        _mm256_storeu_ps(dst, _mm512_castps512_ps256(v));                                                     \
    } while (0)
    for (; i + 16 <= n; i += 16) { /* two independent chains: the multiplies have long latency */
        KILN_GEN_STEP(za, out + i);
        KILN_GEN_STEP(zb, out + i + 8);
        za = _mm512_add_epi64(za, step);
        zb = _mm512_add_epi64(zb, step);
    }
#undef KILN_GEN_STEP
    for (; i < n; i++) out[i] = gen_value(g, start + i);
}

static bool have_avx512dq(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    }
    return cached;
}
#else
#define KILN_GEN_AVX512 0
#endif

float kiln_mkweights_value(uint64_t seed, const char *name, kiln_dtype dtype, int ndim, const int64_t *shape,
                           uint64_t i) {
    gen g;
    gen_init(&g, seed, name, dtype, ndim, shape);
    return gen_value(&g, i);
}

/* ---- the parallel fill ------------------------------------------------------------------------------ */

typedef struct piece {
    gen g;
    kiln_dtype dtype;
    uint64_t start, count; /* elements of the tensor */
    size_t offset;         /* bytes into the buffer */
} piece;

typedef struct fill_job {
    piece pieces[MAX_PIECES];
    size_t n;
    uint8_t *buf;
    float *scratch;       /* PIECE_ELEMS floats per thread */
    uint8_t *out_scratch; /* PIECE_ELEMS * 8 bytes per thread */
    bool vector;          /* AVX-512 DQ generator available */
} fill_job;

static void fill_piece(void *ctx, size_t k, int thread) {
    fill_job *j = ctx;
    const piece *p = &j->pieces[k];
    size_t n = (size_t)p->count, esz = kiln_dtype_size(p->dtype);
    uint8_t *final = j->buf + p->offset;
    if (p->g.kind == GEN_ZERO) {
        memset(final, 0, n * esz);
        return;
    }
    float *f = j->scratch + (size_t)thread * PIECE_ELEMS;
#if KILN_GEN_AVX512
    if (p->g.kind == GEN_NORMAL && j->vector) gen_normal_avx512(&p->g, p->start, n, f);
    else
#endif
        for (size_t i = 0; i < n; i++) f[i] = gen_value(&p->g, p->start + i);
    /* Tensors are packed back to back, so a piece may start misaligned for its dtype (after an odd-sized
     * fp8 tensor, say); convert into aligned scratch then, and copy. */
    bool aligned = ((uintptr_t)final % esz) == 0;
    uint8_t *dst = aligned ? final : j->out_scratch + (size_t)thread * PIECE_ELEMS * 8;
    switch (p->dtype) {
    case KILN_DT_F32: memcpy(dst, f, n * 4); break;
    case KILN_DT_BF16: kiln_f32_to_bf16_n((uint16_t *)(void *)dst, f, n); break;
    case KILN_DT_F16: kiln_f32_to_f16_n((uint16_t *)(void *)dst, f, n); break;
    case KILN_DT_F8_E4M3: kiln_f32_to_e4m3_n(dst, f, n); break;
    case KILN_DT_F8_E5M2: kiln_f32_to_e5m2_n(dst, f, n); break;
    case KILN_DT_F64:
        for (size_t i = 0; i < n; i++) {
            double d = f[i];
            memcpy(dst + 8 * i, &d, 8);
        }
        break;
    default: memset(dst, 0, n * esz); break;
    }
    if (!aligned) memcpy(final, dst, n * esz);
}

/* ---- files ------------------------------------------------------------------------------------------ */

/* mkdir -p of the folder part of path (dir_only: path itself is a folder). */
static kiln_status make_dirs(const char *path, bool dir_only, kiln_err *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return KILN_FAIL(err, KILN_E_INVALID, "path too long: %s", path);
    if (!dir_only) {
        char *slash = strrchr(buf, '/');
        if (!slash) return KILN_OK;
        *slash = '\0';
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return KILN_FAIL(err, KILN_E_IO, "%s: cannot create folder: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return KILN_FAIL(err, KILN_E_IO, "%s: not a folder", buf);
    return KILN_OK;
}

/* Writes bytes to path atomically (tmp + fsync + rename). */
static kiln_status write_small_file(const char *path, const void *data, size_t n, kiln_err *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return KILN_FAIL(err, KILN_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return KILN_FAIL(err, KILN_E_IO, "%s: write failed: %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return KILN_FAIL(err, KILN_E_IO, "%s: cannot finish writing: %s", path, strerror(e));
    }
    return KILN_OK;
}

static kiln_status copy_file(const char *from, const char *to, kiln_err *err) {
    FILE *fp = fopen(from, "rb");
    if (!fp) return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: cannot open: %s", from, strerror(errno));
    size_t cap = 1 << 20, n = 0;
    char *buf = kiln_malloc(cap);
    kiln_status s = KILN_OK;
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, fp);
        n += r;
        if (n < cap) break;
        char *nb = kiln_realloc(buf, cap * 2);
        if (!nb) {
            kiln_free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf) s = KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", from);
    else if (ferror(fp)) s = KILN_FAIL(err, KILN_E_IO, "%s: read failed", from);
    fclose(fp);
    if (s == KILN_OK) s = write_small_file(to, buf, n, err);
    kiln_free(buf);
    return s;
}

/* Writing overlaps generating: buffer k is appended to the file by a short-lived thread while the pool fills
 * buffer k+1 (one thread per 64 MiB costs ~20 us; a file of 16 GB takes ~260). Only that thread touches the
 * kiln_st_writer until it is joined. */
typedef struct bg_write {
    pthread_t th;
    bool pending;
    kiln_st_writer *w;
    const uint8_t *data;
    size_t n;
    kiln_status status;
    kiln_err err;
} bg_write;

typedef struct run {
    const kiln_mkweights_opts *o;
    size_t buf_bytes;
    fill_job *job;
    uint8_t *bufs[2];
    int cur;
    bg_write bg;
    uint64_t done, total;
    double gen_s;
} run;

static void *bg_write_main(void *arg) {
    bg_write *b = arg;
    b->status = kiln_st_writer_write(b->w, b->data, b->n, &b->err);
    return NULL;
}

/* Waits for the write in flight (if any) and returns its status (copying its error into err). */
static kiln_status bg_join(run *r, kiln_err *err) {
    if (!r->bg.pending) return KILN_OK;
    pthread_join(r->bg.th, NULL);
    r->bg.pending = false;
    if (r->bg.status != KILN_OK && err) *err = r->bg.err;
    if (r->bg.status == KILN_OK) {
        r->done += r->bg.n;
        if (r->o->progress) r->o->progress(r->o->progress_ctx, r->done, r->total);
    }
    return r->bg.status;
}

static kiln_status flush(run *r, kiln_st_writer *w, size_t used, kiln_err *err) {
    if (!r->job->n) return KILN_OK;
    double t0 = kiln_clock_s();
    r->job->buf = r->bufs[r->cur];
    kiln_pool_run(r->o->pool, r->job->n, fill_piece, r->job);
    r->gen_s += kiln_clock_s() - t0;
    r->job->n = 0;
    KILN_TRY(bg_join(r, err)); /* the previous buffer is on its way to disk before this one goes */
    r->bg = (bg_write){.w = w, .data = r->bufs[r->cur], .n = used};
    if (pthread_create(&r->bg.th, NULL, bg_write_main, &r->bg) != 0) {
        KILN_TRY(kiln_st_writer_write(w, r->bufs[r->cur], used, err)); /* no thread: write here */
        r->done += used;
    } else r->bg.pending = true;
    r->cur ^= 1; /* fill the other buffer next */
    return KILN_OK;
}

/* Data order: by decreasing dtype size, manifest order within a size (what the reference safetensors writer
 * does). With the 8-byte-padded header this keeps every tensor aligned to its element size, so readers may
 * load f32/i64 values in place even when odd-sized bf16 or fp8 tensors are present. */
static size_t *data_order(const kiln_ckpt_manifest_file *mf) {
    size_t *ord = kiln_calloc(mf->n_tensors, sizeof *ord);
    if (!ord) return NULL;
    size_t k = 0;
    for (size_t sz = 8; sz >= 1; sz /= 2)
        for (size_t i = 0; i < mf->n_tensors; i++)
            if (kiln_dtype_size(mf->tensors[i].dtype) == sz) ord[k++] = i;
    return ord;
}

static kiln_status write_one(run *r, const kiln_ckpt_manifest_file *mf, const char *path, kiln_err *err) {
    kiln_st_spec *specs = kiln_calloc(mf->n_tensors, sizeof *specs);
    size_t *ord = data_order(mf);
    if (!specs || !ord) {
        kiln_free(specs);
        kiln_free(ord);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < mf->n_tensors; i++) {
        const kiln_ckpt_manifest_tensor *t = &mf->tensors[ord[i]];
        specs[i].name = t->name;
        specs[i].dtype = t->dtype;
        specs[i].ndim = t->ndim;
        memcpy(specs[i].shape, t->shape, sizeof specs[i].shape);
    }
    kiln_st_writer *w;
    kiln_status s = kiln_st_writer_open(path, specs, mf->n_tensors, mf->meta_keys, mf->meta_values, mf->n_meta,
                                        &w, err);
    kiln_free(specs);
    if (s != KILN_OK) {
        kiln_free(ord);
        return s;
    }
    if (r->o->sparse) {
        kiln_free(ord);
        s = kiln_st_writer_skip(w, mf->bytes, err);
        r->done += mf->bytes;
        if (s != KILN_OK) {
            kiln_st_writer_abort(w);
            return s;
        }
        return kiln_st_writer_finish(w, err);
    }
    size_t used = 0;
    for (size_t i = 0; i < mf->n_tensors && s == KILN_OK; i++) {
        const kiln_ckpt_manifest_tensor *t = &mf->tensors[ord[i]];
        size_t esz = kiln_dtype_size(t->dtype);
        uint64_t numel = t->bytes / esz;
        gen g;
        gen_init(&g, r->o->seed, t->name, t->dtype, t->ndim, t->shape);
        for (uint64_t start = 0; start < numel && s == KILN_OK;) {
            if (used + esz > r->buf_bytes || r->job->n == MAX_PIECES) {
                s = flush(r, w, used, err);
                used = 0;
                continue;
            }
            uint64_t count = numel - start;
            if (count > PIECE_ELEMS) count = PIECE_ELEMS;
            if (count > (r->buf_bytes - used) / esz) count = (r->buf_bytes - used) / esz;
            r->job->pieces[r->job->n++] = (piece){g, t->dtype, start, count, used};
            used += (size_t)count * esz;
            start += count;
        }
    }
    kiln_free(ord);
    if (s == KILN_OK) s = flush(r, w, used, err);
    kiln_status js = bg_join(r, s == KILN_OK ? err : NULL); /* never abort w under a running write */
    if (s == KILN_OK) s = js;
    if (s != KILN_OK) {
        kiln_st_writer_abort(w);
        return s;
    }
    return kiln_st_writer_finish(w, err);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const kiln_ckpt_manifest_tensor *const *)a)->name, (*(const kiln_ckpt_manifest_tensor *const *)b)->name);
}

static kiln_status write_index(const kiln_ckpt_manifest *m, const char *out_dir, kiln_err *err) {
    const char *slash = strrchr(m->index_path, '/');
    size_t dl = slash ? (size_t)(slash - m->index_path + 1) : 0;
    size_t n = 0;
    uint64_t total = 0;
    for (size_t f = 0; f < m->n_files; f++)
        if (m->files[f].in_index) n += m->files[f].n_tensors, total += m->files[f].bytes;
    const kiln_ckpt_manifest_tensor **ts = kiln_calloc(n ? n : 1, sizeof *ts);
    json_t *root = json_pack("{s:{s:I},s:{}}", "metadata", "total_size", (json_int_t)total, "weight_map");
    kiln_status s = KILN_OK;
    if (!ts || !root) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        goto out;
    }
    size_t k = 0;
    for (size_t f = 0; f < m->n_files; f++)
        for (size_t i = 0; m->files[f].in_index && i < m->files[f].n_tensors; i++) ts[k++] = &m->files[f].tensors[i];
    if (n) qsort(ts, n, sizeof *ts, cmp_name); /* HF writes weight_map sorted by name */
    json_t *map = json_object_get(root, "weight_map");
    for (size_t i = 0; i < n; i++) {
        const char *file = NULL;
        for (size_t f = 0; f < m->n_files && !file; f++)
            if (ts[i] >= m->files[f].tensors && ts[i] < m->files[f].tensors + m->files[f].n_tensors)
                file = m->files[f].path + dl;
        json_object_set_new(map, ts[i]->name, json_string(file));
    }
    char *text = json_dumps(root, JSON_INDENT(2));
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, m->index_path);
    s = text ? make_dirs(path, false, err) : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    if (s == KILN_OK) s = write_small_file(path, text, strlen(text), err);
    free(text);
out:
    json_decref(root);
    kiln_free(ts);
    return s;
}

kiln_status kiln_mkweights(const kiln_ckpt_manifest *m, const char *out_dir, const kiln_mkweights_opts *o,
                           kiln_mkweights_stats *stats, kiln_err *err) {
    double t0 = kiln_clock_s();
    if (stats) memset(stats, 0, sizeof *stats);
    KILN_TRY(make_dirs(out_dir, true, err));
    struct statvfs vfs;
    uint64_t need = m->total_bytes + ((uint64_t)m->total_tensors << 8);
    if (o->sparse) need = (uint64_t)m->total_tensors << 8;
    if (statvfs(out_dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < need)
        return KILN_FAIL(err, KILN_E_LIMIT, "%s: needs %.2f GB but only %.2f GB are free", out_dir, (double)need / 1e9,
                         (double)vfs.f_bavail * vfs.f_frsize / 1e9);
    char tokdir[4096];
    if (m->copy_tokenizer) { /* check the source before writing gigabytes */
        if (o->tokenizer_dir) snprintf(tokdir, sizeof tokdir, "%s", o->tokenizer_dir);
        else {
            const char *root = getenv("KILN_SOURCE_DIR");
            snprintf(tokdir, sizeof tokdir, "%s/data/tokenizer/qwen3", root && *root ? root : KILN_SOURCE_DIR);
        }
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/tokenizer.json", tokdir);
        if (access(probe, R_OK) != 0)
            return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: tokenizer to copy not found (set --tokenizer)", probe);
    }
    int threads = o->pool ? kiln_pool_size(o->pool) : 1;
    run r = {.o = o, .total = m->total_bytes, .buf_bytes = o->buffer_bytes >= 64 ? o->buffer_bytes : BUF_BYTES};
    r.job = kiln_calloc(1, sizeof *r.job);
    if (r.job) {
        r.bufs[0] = kiln_aligned_alloc(r.buf_bytes);
        r.bufs[1] = kiln_aligned_alloc(r.buf_bytes);
        r.job->scratch = kiln_aligned_alloc((size_t)threads * PIECE_ELEMS * sizeof(float));
        r.job->out_scratch = kiln_aligned_alloc((size_t)threads * PIECE_ELEMS * 8);
    }
    kiln_status s = KILN_OK;
#if KILN_GEN_AVX512
    if (r.job) r.job->vector = have_avx512dq() && getenv("KILN_MKWEIGHTS_SCALAR") == NULL;
#endif
    if (!r.job || !r.bufs[0] || !r.bufs[1] || !r.job->scratch || !r.job->out_scratch)
        s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory for buffers");
    char path[4096];
    for (size_t f = 0; s == KILN_OK && f < m->n_files; f++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, m->files[f].path);
        s = make_dirs(path, false, err);
        if (s == KILN_OK) s = write_one(&r, &m->files[f], path, err);
        log_info("mkweights: wrote %s (%.2f GB)", path, (double)m->files[f].bytes / 1e9);
        if (stats && s == KILN_OK) stats->files++, stats->tensors += m->files[f].n_tensors;
    }
    if (s == KILN_OK && m->index_path) s = write_index(m, out_dir, err);
    for (size_t i = 0; s == KILN_OK && i < m->n_extras; i++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, m->extras[i].path);
        s = make_dirs(path, false, err);
        if (s == KILN_OK) s = write_small_file(path, m->extras[i].json_text, strlen(m->extras[i].json_text), err);
    }
    if (s == KILN_OK && m->copy_tokenizer) {
        static const char *const tok_files[] = {"tokenizer.json", "tokenizer_config.json"};
        for (size_t i = 0; s == KILN_OK && i < 2; i++) {
            char from[4200];
            snprintf(from, sizeof from, "%s/%s", tokdir, tok_files[i]);
            snprintf(path, sizeof path, "%s/%s/%s", out_dir, m->copy_tokenizer, tok_files[i]);
            s = make_dirs(path, false, err);
            if (s == KILN_OK) s = copy_file(from, path, err);
        }
    }
    if (r.job) {
        kiln_aligned_free(r.bufs[0]);
        kiln_aligned_free(r.bufs[1]);
        kiln_aligned_free(r.job->scratch);
        kiln_aligned_free(r.job->out_scratch);
        kiln_free(r.job);
    }
    if (stats) {
        stats->bytes = r.done;
        stats->seconds = kiln_clock_s() - t0;
        stats->gen_seconds = r.gen_s;
    }
    return s;
}
