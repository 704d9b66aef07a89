/* cpu_backend.c - the CPU backend: opening it (thread pool, instruction-set tier), host memory, and the ops
 * table. The ops themselves live one file each beside this one. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/cpu/cpu_internal.h"

/* Each allocation carries its size in a header one alignment unit long, for free's count of live bytes. */
#define ALLOC_HEADER 64

static void *cpu_alloc(kiln_backend *be, size_t bytes) {
    if (bytes > SIZE_MAX - ALLOC_HEADER) return NULL;
    char *base = kiln_aligned_alloc(ALLOC_HEADER + (bytes ? bytes : 1));
    if (!base) return NULL;
    memcpy(base, &bytes, sizeof bytes);
    void *p = base + ALLOC_HEADER;
    kiln_err err = {0};
    if (cpu_strict_own(cpu_be(be), p, bytes, "allocation", &err) != KILN_OK) {
        log_error("%s", err.msg);
        kiln_aligned_free(base);
        return NULL;
    }
    kiln_backend_count_alloc(be, bytes);
    return p;
}

static void cpu_free(kiln_backend *be, void *p) {
    if (!p) return;
    cpu_strict_disown(cpu_be(be), p, "free of an allocation");
    char *base = (char *)p - ALLOC_HEADER;
    size_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    kiln_backend_count_free(be, bytes);
    kiln_aligned_free(base);
}

/* Placement on the CPU is zero copy: the host bytes are used where they are (a mapped checkpoint stays mapped,
 * nothing is duplicated); strict mode records the range. */
static kiln_status cpu_place(kiln_backend *be, const void *host, size_t bytes, kiln_err *err) {
    if (!host) return KILN_FAIL(err, KILN_E_INVALID, "place of %zu bytes at NULL", bytes);
    return cpu_strict_own(cpu_be(be), host, bytes, "placement", err);
}

static void cpu_unplace(kiln_backend *be, const void *host) { cpu_strict_disown(cpu_be(be), host, "unplace"); }

/* upload/download: a memmove; strict mode also checks that the backend side is memory it owns. */
static kiln_status cpu_copy_bytes(kiln_backend *be, void *dst, const void *src, size_t bytes, bool up,
                                  kiln_err *err) {
    if (bytes && (!dst || !src)) return KILN_FAIL(err, KILN_E_INVALID, "copy of %zu bytes with a NULL pointer", bytes);
    kiln_cpu_backend *cb = cpu_be(be);
    if (cb->strict && bytes) {
        const void *dev = up ? dst : src;
        pthread_mutex_lock(&cb->owned_lock);
        bool ok = kiln_ranges_covers(&cb->owned, dev, bytes);
        pthread_mutex_unlock(&cb->owned_lock);
        if (!ok)
            return KILN_FAIL(err, KILN_E_INVALID, "%s: %s of %zu bytes at %p is not memory this backend allocated "
                             "(strict residency)", up ? "upload" : "download", up ? "destination" : "source", bytes,
                             dev);
    }
    if (bytes) memmove(dst, src, bytes);
    return KILN_OK;
}
static kiln_status cpu_upload(kiln_backend *be, void *dst, const void *src, size_t bytes, kiln_err *err) {
    return cpu_copy_bytes(be, dst, src, bytes, true, err);
}
static kiln_status cpu_download(kiln_backend *be, void *dst, const void *src, size_t bytes, kiln_err *err) {
    return cpu_copy_bytes(be, dst, src, bytes, false, err);
}
static kiln_status cpu_sync(kiln_backend *be, kiln_err *err) { return KILN_OK; }
static kiln_status cpu_reserve(kiln_backend *be, size_t bytes, kiln_err *err) { return KILN_OK; }

static void cpu_close(kiln_backend *be) {
    if (!be) return;
    kiln_cpu_backend *cb = cpu_be(be);
    kiln_pool_destroy(cb->pool);
    kiln_aligned_free(cb->scratch);
    if (cb->strict) {
        if (cb->owned.n) log_warn("strict residency: %zu allocations or placements still live at close", cb->owned.n);
        kiln_ranges_free(&cb->owned);
        pthread_mutex_destroy(&cb->owned_lock);
    }
    kiln_free(be);
}

#define CPU_OPS_TABLE(ops_name)                                                                               \
    {                                                                                                         \
        .name = ops_name, .matmul = cpu_matmul, .attention = cpu_attention, .rms_norm = cpu_rms_norm,         \
        .layer_norm_modulate = cpu_layer_norm_modulate, .rope = cpu_rope, .swiglu = cpu_swiglu,               \
        .silu_mul = cpu_silu_mul, .gelu_mul = cpu_gelu_mul, .silu = cpu_silu, .gelu_tanh = cpu_gelu_tanh,     \
        .softmax = cpu_softmax,                                                                               \
        .add = cpu_add, .gated_add = cpu_gated_add, .scale_shift = cpu_scale_shift, .copy = cpu_copy,         \
        .conv2d = cpu_conv2d, .group_norm = cpu_group_norm, .upsample2x = cpu_upsample2x, .alloc = cpu_alloc, \
        .free = cpu_free, .place = cpu_place, .unplace = cpu_unplace, .reserve = cpu_reserve,              \
        .upload = cpu_upload,                                                                                 \
        .download = cpu_download, .sync = cpu_sync, .close = cpu_close,                                       \
    }

/* One table per tier so that be->ops->name says which kernels run; the functions dispatch on the tier. */
static const kiln_ops cpu_ops[] = {
    CPU_OPS_TABLE("cpu-generic"),
    CPU_OPS_TABLE("cpu-avx2"),
    CPU_OPS_TABLE("cpu-avx512bf16"),
    CPU_OPS_TABLE("cpu-amx"),
};

const kiln_ops *cpu_tier_ops(kiln_cpu_tier tier) { return &cpu_ops[tier]; }

kiln_status kiln_backend_open_cpu(int n_threads, kiln_backend **out, kiln_err *err) {
    if (!out) return KILN_FAIL(err, KILN_E_INVALID, "kiln_backend_open_cpu: out is NULL");
    *out = NULL;
    kiln_cpu_tier tier = kiln_cpu_detect_tier();
    const char *env = getenv("KILN_CPU");
    if (env && *env) {
        kiln_cpu_tier want;
        if (!kiln_cpu_parse_tier(env, &want))
            return KILN_FAIL(err, KILN_E_INVALID, "KILN_CPU=%s: expected generic, avx2, avx512 or amx", env);
        if (want > tier)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "KILN_CPU=%s: this CPU supports only up to %s", env,
                             kiln_cpu_tier_name(tier));
        tier = want;
    }
    const char *gemm = getenv("KILN_GEMM");
    if (gemm && *gemm && strcmp(gemm, "dot") != 0 && strcmp(gemm, "fma") != 0)
        return KILN_FAIL(err, KILN_E_INVALID, "KILN_GEMM=%s: expected dot or fma", gemm);
    kiln_cpu_backend *cb = kiln_calloc(1, sizeof *cb);
    if (!cb) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory opening the CPU backend");
    kiln_status s = kiln_pool_create(n_threads, &cb->pool, err);
    if (s != KILN_OK) {
        kiln_free(cb);
        return s;
    }
    cb->n_threads = kiln_pool_size(cb->pool);
    cb->tier = tier;
    cb->prefer_bf16_dot = kiln_cpu_prefers_bf16_dot();
    const char *strict = getenv("KILN_STRICT_RESIDENCY");
    cb->strict = strict && *strict && strcmp(strict, "0") != 0;
    if (cb->strict) {
        kiln_ranges_init(&cb->owned);
        pthread_mutex_init(&cb->owned_lock, NULL);
    }
    cb->base.ops = cb->strict ? cpu_strict_ops(tier) : &cpu_ops[tier];
    cb->base.kind = KILN_BACKEND_CPU;
    cb->base.device = 0;
    cb->base.precision = KILN_PREC_FAST;
    log_debug("cpu backend: %d threads, kernels %s%s", cb->n_threads, cb->base.ops->name,
              cb->strict ? ", strict residency" : "");
    *out = &cb->base;
    return KILN_OK;
}

typedef struct range_job {
    cpu_range_fn fn;
    void *ctx;
    int64_t rows, grain;
} range_job;

static void range_task(void *ctx, size_t i, int thread) {
    range_job *j = ctx;
    int64_t r0 = (int64_t)i * j->grain, r1 = r0 + j->grain < j->rows ? r0 + j->grain : j->rows;
    j->fn(j->ctx, r0, r1);
}

void cpu_parallel_rows(kiln_cpu_backend *cb, int64_t rows, int64_t grain, cpu_range_fn fn, void *ctx) {
    if (rows <= 0) return;
    if (grain < 1) grain = 1;
    range_job j = {fn, ctx, rows, grain};
    kiln_pool_run(cb->pool, (size_t)((rows + grain - 1) / grain), range_task, &j);
}

kiln_status cpu_scratch(kiln_cpu_backend *cb, size_t bytes, void **out, kiln_err *err) {
    if (bytes > cb->scratch_cap) {
        void *p = kiln_aligned_alloc(bytes);
        if (!p) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for %zu bytes of CPU scratch", bytes);
        kiln_aligned_free(cb->scratch);
        cb->scratch = p;
        cb->scratch_cap = bytes;
    }
    *out = cb->scratch;
    return KILN_OK;
}
