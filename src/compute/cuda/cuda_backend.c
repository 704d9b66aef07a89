/* cuda_backend.c - the CUDA backend: opening it (device, stream, cuBLASLt, arena), memory, copies, closing, the
 * ops table, and CUDA-graph runs. Host C only: every CUDA call goes through the kcu_* wrappers in the .cu files.
 * Compiled in every build; its body only when kiln is built with CUDA (KILN_HAVE_CUDA) - otherwise
 * src/compute/backend.c's kiln_backend_open_cuda answers KILN_E_DEVICE. */
#include "compute/cuda/cuda_backend.h"

#ifdef KILN_HAVE_CUDA

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/cuda/cuda_internal.h"
#include "compute/cuda/cuda_ops.h"

/* ---- memory: the arena first, cudaMalloc when it is full (or absent) ---- */

static bool in_arena(const kiln_cuda_backend *cb, const void *p) {
    const char *b = cb->arena_base;
    return b && (const char *)p >= b && (const char *)p < b + cb->arena.capacity;
}

bool kcu_owns(const kiln_cuda_backend *cb, const void *p) { return in_arena(cb, p) || kiln_ranges_find(&cb->devmem, p) != NULL; }

static void release_weight(void *ctx, void *dev) { kcu_free(dev); }

/* ops->place: one device copy per placement, uploaded now (before any graph capture: loads happen first). */
static kiln_status cuda_place(kiln_backend *be, const void *host, size_t bytes, kiln_err *err) {
    kiln_cuda_backend *cb = cuda_be(be);
    if (!host) return KILN_FAIL(err, KILN_E_INVALID, "place of %zu bytes at NULL", bytes);
    KILN_TRY(kcu_use(cb, err));
    if (cb->capturing) return KILN_FAIL(err, KILN_E_INVALID, "place of %zu bytes during CUDA-graph capture", bytes);
    void *d = kcu_malloc(bytes ? bytes : 1);
    if (!d)
        return KILN_FAIL(err, KILN_E_NOMEM, "CUDA device out of memory placing %zu MiB of weights (%zu MiB placed "
                         "already)", bytes >> 20, cb->placed.bytes >> 20);
    kiln_status s = kcu_upload_staged(cb, d, host, bytes, err);
    if (s == KILN_OK) s = kcu_placements_add(&cb->placed, host, bytes, d, err);
    if (s != KILN_OK) kcu_free(d);
    if (cb->placed.bytes > cb->placed_peak) cb->placed_peak = cb->placed.bytes;
    return s;
}

static void cuda_unplace(kiln_backend *be, const void *host) {
    kiln_cuda_backend *cb = cuda_be(be);
    kcu_use(cb, NULL);
    void *d = kcu_placements_remove(&cb->placed, host);
    if (!d) {
        log_error("cuda: unplace of %p: not a placement of this backend", host);
        return;
    }
    kcu_free(d); /* cudaFree waits for the work that may still read it */
}

/* Replaces the (empty) arena by one of `bytes`. A failed reservation leaves no arena (allocations then fall back to
 * cudaMalloc) and is not an error. Captured graphs hold the old addresses: arena_gen bumps. */
static kiln_status arena_replace(kiln_cuda_backend *cb, uint64_t bytes, kiln_err *err) {
    if (cb->arena.peak > cb->arena_peak) cb->arena_peak = cb->arena.peak;
    kcu_free(cb->arena_base);
    cb->arena_base = NULL;
    kcu_arena_destroy(&cb->arena);
    cb->arena_gen++;
    KILN_TRY(kcu_arena_init(&cb->arena, 0, err));
    void *base = kcu_malloc(bytes);
    if (!base) {
        log_warn("cuda: could not reserve a %llu MiB arena; allocations will be cudaMallocs",
                 (unsigned long long)(bytes >> 20));
        return KILN_OK;
    }
    kcu_arena_destroy(&cb->arena);
    kiln_status s = kcu_arena_init(&cb->arena, bytes, err);
    if (s != KILN_OK) {
        kcu_free(base);
        kcu_arena_init(&cb->arena, 0, NULL);
        return s;
    }
    cb->arena_base = base;
    return KILN_OK;
}

static kiln_status cuda_reserve(kiln_backend *be, size_t bytes, kiln_err *err) {
    kiln_cuda_backend *cb = cuda_be(be);
    if (cb->arena_fixed) return KILN_OK;
    KILN_TRY(kcu_use(cb, err));
    size_t free_b = 0, total_b = 0;
    KILN_TRY(kcu_mem_info(&free_b, &total_b, err));
    uint64_t cap = kcu_arena_capacity_for(bytes, cb->arena.capacity, cb->arena.in_use, free_b, total_b);
    if (cap == cb->arena.capacity) return KILN_OK;
    KILN_TRY(kcu_sync(cb, err)); /* nothing queued may still use the old arena */
    log_debug("cuda: arena %llu -> %llu MiB for a request planned at %zu MiB", (unsigned long long)(cb->arena.capacity >> 20),
              (unsigned long long)(cap >> 20), bytes >> 20);
    return arena_replace(cb, cap, err);
}

static void *cuda_alloc(kiln_backend *be, size_t bytes) {
    kiln_cuda_backend *cb = cuda_be(be);
    if (kcu_use(cb, NULL) != KILN_OK) return NULL;
    uint64_t off;
    if (cb->arena_base && kcu_arena_alloc(&cb->arena, bytes, &off)) {
        kiln_backend_count_alloc(be, bytes); /* as asked, as the memory plan counts (the arena's slack covers rounding) */
        return (char *)cb->arena_base + off;
    }
    if (cb->capturing) {
        log_error("cuda: allocation of %zu bytes during CUDA-graph capture does not fit the arena", bytes);
        return NULL;
    }
    void *p = kcu_malloc(bytes);
    if (p && kiln_ranges_add(&cb->devmem, p, bytes ? bytes : 1, NULL, NULL) != KILN_OK) {
        kcu_free(p);
        return NULL;
    }
    if (p) {
        kiln_backend_count_alloc(be, bytes ? bytes : 1); /* as the range records it */
        cb->devmem_bytes += bytes;
        if (cb->devmem_bytes > cb->devmem_peak) cb->devmem_peak = cb->devmem_bytes;
    }
    return p;
}

static void cuda_free(kiln_backend *be, void *p) {
    kiln_cuda_backend *cb = cuda_be(be);
    if (!p) return;
    kcu_use(cb, NULL);
    if (in_arena(cb, p)) {
        uint64_t asked = cb->arena.asked_in_use;
        if (!kcu_arena_free(&cb->arena, (uint64_t)((char *)p - (char *)cb->arena_base)))
            log_error("cuda: free of %p: not the start of a live arena block (double free?)", p);
        kiln_backend_count_free(be, asked - cb->arena.asked_in_use);
        return;
    }
    const kiln_range *r = kiln_ranges_find(&cb->devmem, p);
    if (r && r->base == (uintptr_t)p) {
        cb->devmem_bytes -= r->size;
        kiln_backend_count_free(be, r->size);
    }
    if (!kiln_ranges_remove(&cb->devmem, p, NULL)) log_error("cuda: free of %p: not allocated by this backend", p);
    kcu_free(p);
}

static kiln_status cuda_upload(kiln_backend *be, void *dst, const void *src, size_t bytes, kiln_err *err) {
    if (bytes && (!dst || !src)) return KILN_FAIL(err, KILN_E_INVALID, "upload of %zu bytes with a NULL pointer", bytes);
    KILN_TRY(kcu_use(cuda_be(be), err));
    return kcu_memcpy_h2d(cuda_be(be), dst, src, bytes, err);
}

static kiln_status cuda_download(kiln_backend *be, void *dst, const void *src, size_t bytes, kiln_err *err) {
    if (bytes && (!dst || !src))
        return KILN_FAIL(err, KILN_E_INVALID, "download of %zu bytes with a NULL pointer", bytes);
    KILN_TRY(kcu_use(cuda_be(be), err));
    return kcu_memcpy_d2h(cuda_be(be), dst, src, bytes, err);
}

static kiln_status cuda_sync(kiln_backend *be, kiln_err *err) {
    KILN_TRY(kcu_use(cuda_be(be), err));
    KILN_TRY(kcu_sync(cuda_be(be), err));
    return kcu_prof_flush(cuda_be(be), err);
}

/* KILN_CUDA_PROFILE=1: the per-op table, one log line per op */
static void prof_report(kiln_cuda_backend *cb) {
    if (!cb->prof) return;
    kiln_err e = {0};
    if (kcu_prof_flush(cb, &e) != KILN_OK) log_warn("cuda: profile: %s", e.msg);
    char buf[8192];
    kcu_prof_format(cb->prof, buf, sizeof buf);
    for (char *line = buf, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) break;
        *nl = 0;
        log_info("%s", line);
    }
}

static void cuda_close(kiln_backend *be) {
    kiln_cuda_backend *cb = cuda_be(be);
    if (!cb) return;
    if (cb->stream) kcu_use(cb, NULL);
    if (cb->arena.peak > cb->arena_peak) cb->arena_peak = cb->arena.peak;
    prof_report(cb);
    kcu_prof_free(cb->prof);
    cb->prof = NULL;
    /* One parseable line (tests/gpu/run.sh reads it): device memory kiln itself used at its peak, by kind -
     * not nvidia-smi's memory.used, which counts the CUDA context and whatever else runs. */
    log_info("cuda: memory peak: arena %llu MiB (capacity %llu MiB), weights %llu MiB, outside the arena %llu MiB, "
             "scratch %llu MiB, workspace %llu MiB; %llu GEMM shapes (%llu hits), %llu graphs captured, %llu replays; "
             "%llu GEMM calls with a fused epilogue",
             (unsigned long long)(cb->arena_peak >> 20), (unsigned long long)(cb->arena.capacity >> 20),
             (unsigned long long)(cb->placed_peak >> 20), (unsigned long long)(cb->devmem_peak >> 20),
             (unsigned long long)(cb->scratch_bytes >> 20), (unsigned long long)(cb->workspace_bytes >> 20),
             (unsigned long long)cb->algos.count, (unsigned long long)cb->algos.hits,
             (unsigned long long)cb->graphs.n_captures, (unsigned long long)cb->graphs.n_replays,
             (unsigned long long)cb->gemm_fused);
    if (cb->attention == 3)
        log_info("cuda: attention: %llu calls by cuDNN, %llu by the tensor-core kernel (shapes cuDNN does not take)",
                 (unsigned long long)cb->cudnn_calls, (unsigned long long)cb->cudnn_fallbacks);
    if (cb->conv_cudnn)
        log_info("cuda: conv2d: %llu calls by cuDNN, %llu by im2col and a GEMM (shapes cuDNN does not take)",
                 (unsigned long long)cb->cudnn_convs, (unsigned long long)cb->conv_fallbacks);
#ifdef KILN_HAVE_CUDNN
    kcu_cudnn_close(cb);
#endif
    kcu_graph_cache_clear(&cb->graphs, kcu_graph_destroy, cb);
    kcu_algo_cache_free(&cb->algos);
    if (cb->placed.r.n)
        log_warn("cuda: %zu weight placements (%zu MiB) still live at close", cb->placed.r.n, cb->placed.bytes >> 20);
    kcu_placements_free(&cb->placed, release_weight, NULL);
    kiln_ranges_free(&cb->devmem);
    kcu_arena_destroy(&cb->arena);
    kcu_close(cb);
    kiln_free(cb);
}

static const kiln_ops cuda_ops = {
    .name = "cuda",
    .matmul = cuda_matmul,
    .attention = cuda_attention,
    .rms_norm = cuda_rms_norm,
    .layer_norm_modulate = cuda_layer_norm_modulate,
    .rope = cuda_rope,
    .swiglu = cuda_swiglu,
    .silu_mul = cuda_silu_mul,
    .gelu_mul = cuda_gelu_mul,
    .silu = cuda_silu,
    .gelu_tanh = cuda_gelu_tanh,
    .softmax = cuda_softmax,
    .add = cuda_add,
    .gated_add = cuda_gated_add,
    .scale_shift = cuda_scale_shift,
    .copy = cuda_copy,
    .conv2d = cuda_conv2d,
    .group_norm = cuda_group_norm,
    .upsample2x = cuda_upsample2x,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .place = cuda_place,
    .unplace = cuda_unplace,
    .reserve = cuda_reserve,
    .upload = cuda_upload,
    .download = cuda_download,
    .sync = cuda_sync,
    .close = cuda_close,
};

int kiln_backend_cuda_cc(const kiln_backend *be) {
    if (!be || be->kind != KILN_BACKEND_CUDA) return 0;
    const kiln_cuda_backend *cb = (const kiln_cuda_backend *)be;
    return cb->cc_major * 10 + cb->cc_minor;
}

/* An environment switch of the backend: its values, the first the default (unset or empty). */
typedef struct env_switch {
    const char *name;
    const char *values[4]; /* NULL-terminated when fewer */
    int *out;              /* the index of the value given */
} env_switch;

static kiln_status env_switch_read(const env_switch *sw, kiln_err *err) {
    const char *v = getenv(sw->name);
    *sw->out = 0;
    if (!v || !*v) return KILN_OK;
    char list[128] = "";
    for (int i = 0; i < 4 && sw->values[i]; i++) {
        if (!strcmp(v, sw->values[i])) {
            *sw->out = i;
            return KILN_OK;
        }
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? (i + 1 < 4 && sw->values[i + 1] ? ", " : " or ") : "",
                 sw->values[i]);
    }
    return KILN_FAIL(err, KILN_E_INVALID, "%s=%.60s: expected %s", sw->name, v, list);
}

kiln_status kiln_backend_open_cuda(int device, kiln_backend **out, kiln_err *err) {
    if (!out) return KILN_FAIL(err, KILN_E_INVALID, "kiln_backend_open_cuda: out is NULL");
    *out = NULL;
    if (device < 0) return KILN_FAIL(err, KILN_E_INVALID, "cuda:%d: device index must be >= 0", device);
    int n = 0;
    kiln_status s = kcu_device_count(&n, err);
    if (s != KILN_OK) return s;
    if (device >= n)
        return KILN_FAIL(err, KILN_E_DEVICE, "cuda:%d requested but this machine has %d CUDA device%s (cuda:0%s)",
                         device, n, n == 1 ? "" : "s", n > 1 ? "..cuda:N-1" : "");
    kiln_cuda_backend *cb = kiln_calloc(1, sizeof *cb);
    if (!cb) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory opening the CUDA backend");
    cb->base.ops = &cuda_ops;
    cb->base.kind = KILN_BACKEND_CUDA;
    cb->base.device = device;
    cb->base.precision = KILN_PREC_FAST;
    kcu_algo_cache_init(&cb->algos);
    kiln_ranges_init(&cb->devmem);
    kcu_placements_init(&cb->placed);
    kcu_graph_cache_init(&cb->graphs, 8);
    /* The backend's switches (docs/cuda-backend.md): unset or empty is the first value; a value not listed is
     * refused, naming the values the switch takes. */
    int det, att, bq, async, qsmem, fp8, fuse, conv, wide, act;
    const env_switch switches[] = {
        {"KILN_DETERMINISTIC", {"0", "1"}, &det},
        /* auto: the tensor-core kernel for FAST, the f32 one for EXACT; simple, tc: that kernel always; cudnn:
         * cuDNN's SDPA where it takes the call, else tensor cores */
        {"KILN_CUDA_ATTENTION", {"auto", "simple", "tc", "cudnn"}, &att},
        {"KILN_CUDA_TC_BQ", {"64", "128"}, &bq},
        {"KILN_CUDA_TC_ASYNC", {"1", "0"}, &async},
        {"KILN_CUDA_TC_QSMEM", {"0", "1"}, &qsmem},
        {"KILN_CUDA_FP8", {"0", "1"}, &fp8},
        {"KILN_CUDA_FUSE", {"1", "0"}, &fuse},
        {"KILN_CUDA_CONV", {"gemm", "cudnn"}, &conv},
        {"KILN_CUDA_WIDE_ATTENTION", {"tc", "gemm"}, &wide},
        /* FAST models keep their activations in bf16 here (compute/ops.h kiln_backend_act_dtype), as PyTorch runs
         * a bf16 model: half the memory traffic of every elementwise op, and no conversion pass before a GEMM */
        {"KILN_CUDA_ACT", {"bf16", "f32"}, &act},
    };
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++)
        if ((s = env_switch_read(&switches[i], err)) != KILN_OK) {
            kiln_free(cb);
            return s;
        }
    cb->deterministic = det == 1;
    cb->attention = att;
    cb->tc_bq = bq ? 128 : 64;
    cb->tc_async = async == 0;
    cb->tc_qsmem = qsmem == 1;
    cb->fp8_gemm = fp8 == 1;
    cb->fuse_epilogues = fuse == 0;
    cb->conv_cudnn = conv == 1;
    cb->wide_gemm = wide == 1;
    cb->base.bf16_activations = act == 0;
#ifndef KILN_HAVE_CUDNN
    if (cb->attention == 3 || cb->conv_cudnn) {
        kiln_free(cb);
        return KILN_FAIL(err, KILN_E_UNSUPPORTED,
                         "%s=cudnn: this kiln was built without cuDNN (CMake found no cuDNN frontend headers: "
                         "scripts/fetch-cudnn-frontend.sh)", cb->conv_cudnn ? "KILN_CUDA_CONV" : "KILN_CUDA_ATTENTION");
    }
#endif
    s = kcu_open(cb, device, err);
#ifdef KILN_HAVE_CUDNN
    if (s == KILN_OK && (cb->attention == 3 || cb->conv_cudnn))
        s = kcu_cudnn_open(cb, err); /* asked for: a failure to load is an error */
#endif
    const char *prof = getenv("KILN_CUDA_PROFILE"); /* closed (and reported) by cuda_close */
    if (s == KILN_OK && prof && *prof && strcmp(prof, "0") != 0 && !(cb->prof = calloc(1, sizeof *cb->prof)))
        s = KILN_FAIL(err, KILN_E_NOMEM, "KILN_CUDA_PROFILE: no memory");
    if (s == KILN_OK) s = kcu_arena_init(&cb->arena, 0, err);
    if (s == KILN_OK) {
        /* The activation arena: sized per request from its plan (cuda_reserve); KILN_CUDA_ARENA_MB fixes it at
         * open instead (0 = none: every allocation a cudaMalloc). */
        const char *mb = getenv("KILN_CUDA_ARENA_MB");
        cb->arena_fixed = mb && *mb;
        uint64_t want = cb->arena_fixed ? (uint64_t)strtoull(mb, NULL, 10) << 20 : 0;
        if (want) s = arena_replace(cb, want, err);
    }
    if (s != KILN_OK) {
        kiln_err_prefix(err, "cuda:%d: ", device);
        cuda_close(&cb->base);
        return s;
    }
    log_info("cuda: %s, arena %llu MiB, attention %s, %s activations in FAST%s", cb->name,
             (unsigned long long)(cb->arena.capacity >> 20),
             cb->attention == 3   ? "cuDNN SDPA (else tensor cores)"
             : cb->attention == 2 ? "tensor cores"
             : cb->attention == 1 ? "simple"
                                  : "tensor cores (FAST), simple (EXACT)",
             cb->base.bf16_activations ? "bf16" : "f32", cb->deterministic ? ", deterministic" : "");
    *out = &cb->base;
    return KILN_OK;
}

/* ---- CUDA graphs ---- */

static kiln_status graph_run(kiln_cuda_backend *cb, uint64_t key, kiln_graph_body body, void *ctx, kiln_err *err) {
    const char *env = getenv("KILN_CUDA_GRAPHS");
    /* eager when asked, and while profiling (an event recorded in a capture would be replayed as a node) */
    if ((env && strcmp(env, "0") == 0) || cb->prof) return body(&cb->base, ctx, err);
    KILN_TRY(kcu_use(cb, err));
    void *exec = NULL, *stale = NULL;
    kcu_graph_action act = kcu_graph_cache_begin(&cb->graphs, key, cb->arena_gen, &exec, &stale);
    if (stale) {
        kiln_status s = kcu_sync(cb, err); /* the stale graph may still be running */
        kcu_graph_destroy(cb, stale);
        if (s != KILN_OK) return s;
    }
    if (act == KCU_GRAPH_REPLAY) return kcu_graph_launch(cb, exec, err);
    if (act == KCU_GRAPH_EAGER) return body(&cb->base, ctx, err);
    kiln_status s = kcu_capture_begin(cb, err);
    if (s != KILN_OK) {
        kcu_graph_cache_captured(&cb->graphs, key, NULL);
        return body(&cb->base, ctx, err);
    }
    kiln_status bs = body(&cb->base, ctx, err);
    kiln_err cap_err = {0};
    s = kcu_capture_end(cb, &exec, &cap_err);
    kcu_graph_cache_captured(&cb->graphs, key, s == KILN_OK && bs == KILN_OK ? exec : NULL);
    if (s == KILN_OK && bs == KILN_OK) return kcu_graph_launch(cb, exec, err);
    if (exec) kcu_graph_destroy(cb, exec);
    /* Nothing captured ran: run the body for real, and never capture this shape again. */
    log_info("cuda: graph capture of shape %llx failed (%s); running it eagerly from now on", (unsigned long long)key,
             bs != KILN_OK ? err->msg : cap_err.msg);
    kiln_err_clear(err);
    return body(&cb->base, ctx, err);
}

#endif /* KILN_HAVE_CUDA */

kiln_status kiln_backend_graph_run(kiln_backend *be, uint64_t key, kiln_graph_body body, void *ctx, kiln_err *err) {
    if (!be || !body) return KILN_FAIL(err, KILN_E_INVALID, "kiln_backend_graph_run: NULL backend or body");
#ifdef KILN_HAVE_CUDA
    if (be->kind == KILN_BACKEND_CUDA) return graph_run(cuda_be(be), key, body, ctx, err);
#endif
    return body(be, ctx, err);
}
