/* cmd_bench_ops.c - `kiln bench-ops`: times every compute op on the real FLUX.2 [klein] shapes and prints
 * GFLOP/s (or GB/s for memory-bound ops) and the fraction of this machine's measured peak; `--peak` runs only
 * the peak microbenchmark (cpu_bench.h). The DiT matmuls are also run through OpenBLAS (dlopen'ed, if present:
 * cblas_sbgemm on bf16 copies of the activations - conversion not timed - and cblas_sgemm on f32 copies of the
 * weights) in the same process, and the ratio kiln / best OpenBLAS path is printed.
 *
 *   kiln bench-ops [--shapes 512|1024|all] [--threads N] [--repeat R] [--only SUBSTR] [--exact] [--no-blas]
 *   kiln bench-ops --peak [--threads N]
 *
 * Every timing is the median of R runs after one warm-up run. Sizes: 512 px = 1024 image + 512 text tokens,
 * 1024 px = 4096 + 512; Qwen3 and T5-XXL (FLUX.1's text encoder) at 512 tokens; VAE convs at the decoder's channel
 * counts. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "compute/cpu/cpu_bench.h"
#include "compute/ops.h"

typedef enum bkind { B_MATMUL, B_ATTN, B_ATTN_BIAS, B_LN_MOD, B_RMS, B_ROPE, B_SWIGLU, B_SILU_MUL, B_GELU_MUL,
                     B_GATED_ADD, B_CONV, B_GN, B_UPS, B_COPY } bkind;

typedef struct bcase {
    const char *name;
    bkind kind;
    int set;                /* 512, 1024, or 0 = both (text encoder) */
    int64_t a, b, c, d, e;  /* per kind, see run_case */
} bcase;

/* matmul: a=M b=N c=K d=epilogue; attention: a=S b=Hq c=Hkv d=causal e=head dim (0: 128), with an additive
 * [Hq*S, S] bias and scale 1 for B_ATTN_BIAS (T5's relative positions); row ops: a=rows b=cols c=group;
 * conv: a=Ci b=Co c=H(=W) d=k e=stride; group_norm/upsample: a=C b=H(=W) */
static const bcase cases[] = {
    {"dit.single.linear1", B_MATMUL, 512, 1536, 27648, 3072, KILN_EPI_NONE, 0},
    {"dit.single.linear2", B_MATMUL, 512, 1536, 3072, 12288, KILN_EPI_GATED_RESIDUAL, 0},
    {"dit.double.qkv", B_MATMUL, 512, 1024, 9216, 3072, KILN_EPI_NONE, 0},
    {"dit.double.proj", B_MATMUL, 512, 1024, 3072, 3072, KILN_EPI_GATED_RESIDUAL, 0},
    {"dit.double.mlp_in", B_MATMUL, 512, 1024, 18432, 3072, KILN_EPI_NONE, 0},
    {"dit.double.mlp_out", B_MATMUL, 512, 1024, 3072, 9216, KILN_EPI_GATED_RESIDUAL, 0},
    {"dit.double.modulation", B_MATMUL, 512, 1, 18432, 3072, KILN_EPI_NONE, 0}, /* one vector: a read of w */
    {"dit.single.linear1", B_MATMUL, 1024, 4608, 27648, 3072, KILN_EPI_NONE, 0},
    {"dit.single.linear2", B_MATMUL, 1024, 4608, 3072, 12288, KILN_EPI_GATED_RESIDUAL, 0},
    {"dit.double.qkv", B_MATMUL, 1024, 4096, 9216, 3072, KILN_EPI_NONE, 0},
    {"dit.double.mlp_out", B_MATMUL, 1024, 4096, 3072, 9216, KILN_EPI_GATED_RESIDUAL, 0},
    {"qwen3.q", B_MATMUL, 0, 512, 4096, 2560, KILN_EPI_NONE, 0},
    {"qwen3.k", B_MATMUL, 0, 512, 1024, 2560, KILN_EPI_NONE, 0},
    {"qwen3.o", B_MATMUL, 0, 512, 2560, 4096, KILN_EPI_ADD, 0},
    {"qwen3.gate", B_MATMUL, 0, 512, 9728, 2560, KILN_EPI_NONE, 0},
    {"qwen3.down", B_MATMUL, 0, 512, 2560, 9728, KILN_EPI_ADD, 0},
    {"dit.attention", B_ATTN, 512, 1536, 24, 24, 0, 0},
    {"dit.attention", B_ATTN, 1024, 4608, 24, 24, 0, 0},
    {"qwen3.attention", B_ATTN, 0, 512, 32, 8, 1, 0},
    {"t5.attention", B_ATTN_BIAS, 0, 512, 64, 64, 0, 64},
    {"dit.layer_norm_modulate", B_LN_MOD, 512, 1536, 3072, 0, 0, 0},
    {"dit.rms_norm.qk", B_RMS, 512, 1536, 6144, 128, 0, 0},
    {"dit.rope", B_ROPE, 512, 1536, 6144, 0, 0, 0},
    {"dit.swiglu", B_SWIGLU, 512, 1536, 9216, 0, 0, 0},
    {"dit.gated_add", B_GATED_ADD, 512, 1536, 3072, 0, 0, 0},
    {"dit.copy.concat", B_COPY, 512, 1536, 3072, 0, 0, 0},
    {"dit.layer_norm_modulate", B_LN_MOD, 1024, 4608, 3072, 0, 0, 0},
    {"dit.swiglu", B_SWIGLU, 1024, 4608, 9216, 0, 0, 0},
    {"qwen3.silu_mul", B_SILU_MUL, 0, 512, 9728, 0, 0, 0},
    {"t5.gelu_mul", B_GELU_MUL, 0, 512, 10240, 0, 0, 0},
    {"qwen3.rms_norm", B_RMS, 0, 512, 2560, 2560, 0, 0},
    {"vae.conv3x3.512@64", B_CONV, 512, 512, 512, 64, 3, 1},
    {"vae.conv3x3.512@128", B_CONV, 512, 512, 512, 128, 3, 1},
    {"vae.conv3x3.256@256", B_CONV, 512, 256, 256, 256, 3, 1},
    {"vae.conv3x3.128@512", B_CONV, 512, 128, 128, 512, 3, 1},
    {"vae.conv1x1.256to128@512", B_CONV, 512, 256, 128, 512, 1, 1},
    {"vae.conv3x3.128@1024", B_CONV, 1024, 128, 128, 1024, 3, 1},
    {"vae.conv3x3.s2.128@512", B_CONV, 1024, 128, 128, 512, 3, 2},
    {"vae.conv_out.128to3@512", B_CONV, 512, 128, 3, 512, 3, 1},
    {"vae.conv_out.128to3@1024", B_CONV, 1024, 128, 3, 1024, 3, 1},
    {"vae.group_norm.512@128", B_GN, 512, 512, 128, 0, 0, 0},
    {"vae.group_norm.128@512", B_GN, 512, 128, 512, 0, 0, 0},
    {"vae.upsample2x.512@128", B_UPS, 512, 512, 128, 0, 0, 0},
};

/* ---- OpenBLAS, loaded at run time so kiln does not depend on it ---- */
typedef void (*sbgemm_fn)(int, int, int, int, int, int, float, const uint16_t *, int, const uint16_t *, int, float,
                          float *, int);
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void (*setthreads_fn)(int);
static sbgemm_fn blas_sbgemm;
static sgemm_fn blas_sgemm;
enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };

static void load_blas(int threads) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    blas_sbgemm = (sbgemm_fn)dlsym(h, "cblas_sbgemm");
    blas_sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    setthreads_fn st = (setthreads_fn)dlsym(h, "openblas_set_num_threads");
    if (st) st(threads);
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void fill(float *p, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Process CPU seconds: divided by the thread count it is the time the op would take if it had its cores to
 * itself - the figure used for rates, since this machine's cores are shared with other processes. */
static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct bench_ctx {
    double last_cpu; /* CPU seconds / threads of the last timed op (median) */
    double last_peak; /* the peak measured next to the last timed op's rounds (see TIME_OP), GFLOP/s */
    kiln_backend *be;
    int repeat, threads;
    bool blas;
    int peak_kind; /* kiln_peak_kind the FAST/EXACT compute ops are measured against */
    int attn_peak_kind; /* the same for attention: only AMX has a bf16 attention kernel, the others are f32 */
} bench_ctx;

/* The peak is measured again right before every timed round of a compute op (a short run of the same
 * register-only loop as --peak), and the op's fraction of peak is the median over rounds of its rate over that
 * round's peak. On a VM whose core is shared with another tenant the available AMX/FMA rate changes by 2x
 * from one second to the next; a peak taken once at start-up and compared to an op timed a minute later
 * measures the neighbour, not the op. The adjacent peak runs on ONE thread and is multiplied by the thread
 * count: on this VM a short multi-thread peak run reads anywhere from 0.1x to 2x the hardware rate (the host
 * deschedules one vCPU while the other waits at the pool's barrier), while one thread reads within a few per
 * cent, and quiet multi-thread runs scale linearly (2 threads: 2.0-2.05x one). */
#define ADJACENT_PEAK_S 0.05

/* Times fn R times after a warm-up; returns the median seconds (or -1 on an op error). peak: the kiln_peak_kind
 * measured next to each round, or NO_PEAK. */
#define NO_PEAK (-1)
#define TIME_OP(ctx, secs, call, peak)                                                                         \
    do {                                                                                                      \
        double ts_[64], cs_[64], pc_[64];                                                                     \
        int r_ = (ctx)->repeat > 64 ? 64 : (ctx)->repeat;                                                     \
        kiln_err e_ = {0};                                                                                    \
        kiln_err *err = &e_;                                                                                  \
        (secs) = -1;                                                                                          \
        if ((call) != KILN_OK) {                                                                              \
            fprintf(stderr, "kiln: bench-ops: %s\n", e_.msg);                                                 \
            break;                                                                                            \
        }                                                                                                     \
        for (int i_ = 0; i_ < r_; i_++) {                                                                     \
            double pk_ = (peak) != NO_PEAK                                                                    \
                             ? (ctx)->threads * kiln_cpu_peak_gflops((kiln_peak_kind)(peak), 1, ADJACENT_PEAK_S)  \
                             : 0;                                                                             \
            double t0_ = kiln_clock_s(), c0_ = cpu_s();                                                       \
            (void)(call);                                                                                     \
            ts_[i_] = kiln_clock_s() - t0_;                                                                   \
            cs_[i_] = (cpu_s() - c0_) / (ctx)->threads;                                                       \
            pc_[i_] = cs_[i_] * pk_; /* GFLOP the peak loop does in the op's time: rate / peak = flops / it */  \
        }                                                                                                     \
        (secs) = median(ts_, r_);                                                                             \
        (ctx)->last_cpu = median(cs_, r_);                                                                    \
        /* an effective peak such that flops / last_cpu / last_peak = the median per-round fraction */       \
        (ctx)->last_peak = (ctx)->last_cpu > 0 ? median(pc_, r_) / (ctx)->last_cpu : 0;                       \
    } while (0)

#define TIME_PLAIN(ctx, secs, stmt)                                                                           \
    do {                                                                                                      \
        double ts_[64];                                                                                       \
        int r_ = (ctx)->repeat > 64 ? 64 : (ctx)->repeat;                                                     \
        double cs_[64];                                                                                       \
        stmt;                                                                                                 \
        for (int i_ = 0; i_ < r_; i_++) {                                                                     \
            double t0_ = kiln_clock_s(), c0_ = cpu_s();                                                       \
            stmt;                                                                                             \
            ts_[i_] = kiln_clock_s() - t0_;                                                                   \
            cs_[i_] = (cpu_s() - c0_) / (ctx)->threads;                                                       \
        }                                                                                                     \
        (secs) = median(ts_, r_);                                                                             \
        (ctx)->last_cpu = median(cs_, r_);                                                                    \
    } while (0)

static float *falloc(int64_t n) { return kiln_aligned_alloc((size_t)n * sizeof(float)); }

static void print_row(const char *name, const char *shape, double secs, double cpu, double flops, double bytes,
                      double peak, const char *extra) {
    if (secs < 0) {
        printf("%-24s %-27s failed\n", name, shape);
        return;
    }
    if (flops > 0)
        printf("%-24s %-27s %8.2f ms %8.2f ms %8.1f GFLOP/s %5.1f%%%s\n", name, shape, secs * 1e3, cpu * 1e3,
               flops / cpu / 1e9, 100.0 * flops / cpu / 1e9 / peak, extra);
    else
        printf("%-24s %-27s %8.2f ms %8.2f ms %8.1f GB/s%s\n", name, shape, secs * 1e3, cpu * 1e3, bytes / cpu / 1e9,
               extra);
    fflush(stdout);
}

static int run_matmul(bench_ctx *c, const bcase *bc) {
    int64_t M = bc->a, N = bc->b, K = bc->c;
    float *x = falloc(M * K), *y = falloc(M * N), *gate = falloc(N), *wf = NULL;
    uint16_t *w = kiln_aligned_alloc((size_t)(N * K) * 2);
    if (!x || !y || !gate || !w) {
        fprintf(stderr, "kiln: bench-ops: out of memory for %s\n", bc->name);
        kiln_aligned_free(x), kiln_aligned_free(y), kiln_aligned_free(gate), kiln_aligned_free(w);
        return 6;
    }
    fill(x, M * K, 1), fill(y, M * N, 2), fill(gate, N, 3);
    float *tmp = falloc(K);
    for (int64_t n = 0; n < N; n++) {
        fill(tmp, K, (uint32_t)(n + 7));
        for (int64_t k = 0; k < K; k++) w[n * K + k] = to_bf16(tmp[k] * 0.05f);
    }
    kiln_aligned_free(tmp);
    kiln_tensor xt = kiln_tensor_make(x, KILN_DT_F32, 2, (int64_t[]){M, K});
    kiln_tensor yt = kiln_tensor_make(y, KILN_DT_F32, 2, (int64_t[]){M, N});
    kiln_tensor wt = kiln_tensor_make(w, KILN_DT_BF16, 2, (int64_t[]){N, K});
    kiln_tensor gt = kiln_tensor_make(gate, KILN_DT_F32, 1, (int64_t[]){N});
    kiln_epilogue epi = {(kiln_epilogue_kind)bc->d, &gt};
    double secs, flops = 2.0 * (double)M * N * K;
    TIME_OP(c, secs, kiln_matmul_epi(c->be, &yt, &xt, &wt, NULL, &epi, err), c->peak_kind);
    double cpu = c->last_cpu, cbsb = -1, cbsg = -1;
    char shape[64], extra[160] = "";
    snprintf(shape, sizeof shape, "[%lld,%lld]x[%lld,%lld]^T", (long long)M, (long long)K, (long long)N, (long long)K);
    double peak = c->last_peak;
    if (c->blas && (blas_sbgemm || blas_sgemm) && secs > 0) {
        double best = 1e30, tsb = -1, tsg = -1, wbest = 1e30;
        if (blas_sbgemm) {
            uint16_t *xb = kiln_aligned_alloc((size_t)(M * K) * 2);
            if (xb) {
                for (int64_t i = 0; i < M * K; i++) xb[i] = to_bf16(x[i]);
                TIME_PLAIN(c, tsb, blas_sbgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, xb,
                                               (int)K, w, (int)K, 0.0f, y, (int)N));
                cbsb = c->last_cpu;
                best = cbsb;
                wbest = tsb;
                kiln_aligned_free(xb);
            }
        }
        if (blas_sgemm && (wf = falloc(N * K))) {
            for (int64_t i = 0; i < N * K; i++) {
                uint32_t u = (uint32_t)w[i] << 16;
                memcpy(&wf[i], &u, 4);
            }
            TIME_PLAIN(c, tsg, blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x,
                                          (int)K, wf, (int)K, 0.0f, y, (int)N));
            cbsg = c->last_cpu;
            if (cbsg < best) best = cbsg;
            if (tsg < wbest) wbest = tsg;
            kiln_aligned_free(wf);
        }
        char sb[32] = "n/a";
        if (cbsb > 0) snprintf(sb, sizeof sb, "%.1f", flops / cbsb / 1e9);
        snprintf(extra, sizeof extra, " | openblas sbgemm %s sgemm %.1f GFLOP/s | kiln faster %.2fx (wall %.2fx)", sb,
                 cbsg > 0 ? flops / cbsg / 1e9 : 0.0, best / cpu, wbest / secs);
    }
    print_row(bc->name, shape, secs, cpu, flops, 0, peak, extra);
    kiln_aligned_free(x), kiln_aligned_free(y), kiln_aligned_free(gate), kiln_aligned_free(w);
    return secs < 0 ? 1 : 0;
}

static int run_attention(bench_ctx *c, const bcase *bc) {
    int64_t S = bc->a, hq = bc->b, hkv = bc->c, dh = bc->e ? bc->e : 128, ld = (hq + 2 * hkv) * dh;
    const bool with_bias = bc->kind == B_ATTN_BIAS;
    float *qkv = falloc(S * ld), *o = falloc(S * hq * dh), *bias = with_bias ? falloc(hq * S * S) : NULL;
    if (!qkv || !o || (with_bias && !bias)) {
        kiln_aligned_free(qkv), kiln_aligned_free(o), kiln_aligned_free(bias);
        return 6;
    }
    fill(qkv, S * ld, 5);
    if (bias) fill(bias, hq * S * S, 6);
    kiln_tensor bt = kiln_tensor_make(bias, KILN_DT_F32, 2, (int64_t[]){hq * S, S});
    kiln_tensor q = kiln_tensor_make(qkv, KILN_DT_F32, 2, (int64_t[]){S, hq * dh});
    kiln_tensor k = kiln_tensor_make(qkv + hq * dh, KILN_DT_F32, 2, (int64_t[]){S, hkv * dh});
    kiln_tensor v = kiln_tensor_make(qkv + (hq + hkv) * dh, KILN_DT_F32, 2, (int64_t[]){S, hkv * dh});
    q.stride[0] = k.stride[0] = v.stride[0] = ld;
    kiln_tensor ot = kiln_tensor_make(o, KILN_DT_F32, 2, (int64_t[]){S, hq * dh});
    double secs;
    const float scale = with_bias ? 1.0f : 1.0f / sqrtf((float)dh);
    TIME_OP(c, secs, c->be->ops->attention(c->be, &ot, &q, &k, &v, (int)hq, (int)hkv, scale, bc->d != 0, NULL,
                                           with_bias ? &bt : NULL, err),
            c->attn_peak_kind);
    /* 4 S^2 Dh flops per head (QK^T and PV), halved when causal */
    double flops = 4.0 * (double)S * S * dh * hq * (bc->d ? 0.5 : 1.0);
    char shape[64];
    snprintf(shape, sizeof shape, "S=%lld %lldq/%lldkv x%lld%s", (long long)S, (long long)hq, (long long)hkv,
             (long long)dh, bc->d ? " causal" : with_bias ? " bias" : "");
    print_row(bc->name, shape, secs, c->last_cpu, flops, 0, c->last_peak, "");
    kiln_aligned_free(qkv), kiln_aligned_free(o), kiln_aligned_free(bias);
    return secs < 0 ? 1 : 0;
}

static int run_conv(bench_ctx *c, const bcase *bc) {
    int64_t ci = bc->a, co = bc->b, h = bc->c, k = bc->d, s = bc->e;
    int pb = k == 3 ? (s == 2 ? 0 : 1) : 0, pe = k == 3 ? 1 : 0;
    int64_t ho = (h + pb + pe - k) / s + 1;
    float *x = falloc(ci * h * h), *y = falloc(co * ho * ho);
    uint16_t *w = kiln_aligned_alloc((size_t)(co * ci * k * k) * 2);
    if (!x || !y || !w) {
        kiln_aligned_free(x), kiln_aligned_free(y), kiln_aligned_free(w);
        return 6;
    }
    fill(x, ci * h * h, 9);
    for (int64_t i = 0; i < co * ci * k * k; i++) w[i] = to_bf16(((float)(i % 17) - 8.0f) * 0.01f);
    kiln_tensor xt = kiln_tensor_make(x, KILN_DT_F32, 4, (int64_t[]){1, ci, h, h});
    kiln_tensor yt = kiln_tensor_make(y, KILN_DT_F32, 4, (int64_t[]){1, co, ho, ho});
    kiln_tensor wt = kiln_tensor_make(w, KILN_DT_BF16, 4, (int64_t[]){co, ci, k, k});
    double secs, flops = 2.0 * (double)co * ho * ho * ci * k * k;
    TIME_OP(c, secs, c->be->ops->conv2d(c->be, &yt, &xt, &wt, NULL, (int)s, pb, pe, err), c->peak_kind);
    char shape[64];
    snprintf(shape, sizeof shape, "%lld->%lld %lldx%lld k%lld s%lld", (long long)ci, (long long)co, (long long)h,
             (long long)h, (long long)k, (long long)s);
    print_row(bc->name, shape, secs, c->last_cpu, flops, 0, c->last_peak, "");
    kiln_aligned_free(x), kiln_aligned_free(y), kiln_aligned_free(w);
    return secs < 0 ? 1 : 0;
}

/* Memory-bound ops: GB/s of the bytes they must read and write. */
static int run_rowop(bench_ctx *c, const bcase *bc) {
    int64_t R = bc->a, C = bc->b, n = R * C;
    int64_t big = bc->kind == B_SWIGLU ? 2 * n : bc->kind == B_GN || bc->kind == B_UPS ? bc->a * bc->b * bc->b * 4 : n;
    float *x = falloc(big), *y = falloc(big), *v = falloc(C > 4096 ? C : 4096), *v2 = falloc(C > 4096 ? C : 4096);
    if (!x || !y || !v || !v2) {
        kiln_aligned_free(x), kiln_aligned_free(y), kiln_aligned_free(v), kiln_aligned_free(v2);
        return 6;
    }
    fill(x, big, 11), fill(y, big, 12), fill(v, C > 4096 ? C : 4096, 13), fill(v2, C > 4096 ? C : 4096, 14);
    kiln_backend *be = c->be;
    kiln_tensor xt = kiln_tensor_make(x, KILN_DT_F32, 2, (int64_t[]){R, C});
    kiln_tensor yt = kiln_tensor_make(y, KILN_DT_F32, 2, (int64_t[]){R, C});
    kiln_tensor vt = kiln_tensor_make(v, KILN_DT_F32, 1, (int64_t[]){C});
    kiln_tensor v2t = kiln_tensor_make(v2, KILN_DT_F32, 1, (int64_t[]){C});
    double secs = -1, bytes = 8.0 * (double)n;
    char shape[64];
    snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)R, (long long)C);
    switch (bc->kind) {
    case B_LN_MOD: TIME_OP(c, secs, be->ops->layer_norm_modulate(be, &yt, &xt, &vt, &v2t, 1e-6f, err), NO_PEAK); break;
    case B_RMS: {
        kiln_tensor gt = kiln_tensor_make(v, KILN_DT_F32, 1, (int64_t[]){bc->c});
        TIME_OP(c, secs, be->ops->rms_norm(be, &yt, &xt, &gt, 1e-6f, err), NO_PEAK);
        break;
    }
    case B_ROPE: {
        kiln_tensor ct = kiln_tensor_make(y, KILN_DT_F32, 2, (int64_t[]){R, 64});
        kiln_tensor st = kiln_tensor_make(y + R * 64, KILN_DT_F32, 2, (int64_t[]){R, 64});
        TIME_OP(c, secs, be->ops->rope(be, &xt, &ct, &st, (int)(C / 128), true, err), NO_PEAK);
        break;
    }
    case B_SWIGLU: {
        kiln_tensor abt = kiln_tensor_make(x, KILN_DT_F32, 2, (int64_t[]){R, 2 * C});
        TIME_OP(c, secs, be->ops->swiglu(be, &yt, &abt, err), NO_PEAK);
        bytes = 12.0 * (double)n;
        break;
    }
    case B_SILU_MUL:
        TIME_OP(c, secs, be->ops->silu_mul(be, &yt, &xt, &yt, err), NO_PEAK);
        bytes = 12.0 * (double)n;
        break;
    case B_GELU_MUL:
        TIME_OP(c, secs, be->ops->gelu_mul(be, &yt, &xt, &yt, err), NO_PEAK);
        bytes = 12.0 * (double)n;
        break;
    case B_GATED_ADD:
        TIME_OP(c, secs, be->ops->gated_add(be, &yt, &vt, &xt, err), NO_PEAK);
        bytes = 12.0 * (double)n;
        break;
    case B_COPY: {
        kiln_tensor half = kiln_tensor_make(y, KILN_DT_F32, 2, (int64_t[]){R / 2, C});
        kiln_tensor xh = kiln_tensor_make(x, KILN_DT_F32, 2, (int64_t[]){R / 2, C});
        half.stride[0] = C, xh.stride[0] = C;
        TIME_OP(c, secs, be->ops->copy(be, &half, &xh, err), NO_PEAK);
        bytes = 4.0 * (double)n;
        break;
    }
    case B_GN: {
        int64_t ch = bc->a, hw = bc->b;
        kiln_tensor it = kiln_tensor_make(x, KILN_DT_F32, 4, (int64_t[]){1, ch, hw, hw});
        kiln_tensor ot = kiln_tensor_make(y, KILN_DT_F32, 4, (int64_t[]){1, ch, hw, hw});
        kiln_tensor gt = kiln_tensor_make(v, KILN_DT_F32, 1, (int64_t[]){ch});
        kiln_tensor bt = kiln_tensor_make(v2, KILN_DT_F32, 1, (int64_t[]){ch});
        TIME_OP(c, secs, be->ops->group_norm(be, &ot, &it, 32, &gt, &bt, 1e-6f, true, err), NO_PEAK);
        bytes = 8.0 * (double)(ch * hw * hw);
        snprintf(shape, sizeof shape, "[1,%lld,%lld,%lld] silu", (long long)ch, (long long)hw, (long long)hw);
        break;
    }
    case B_UPS: {
        int64_t ch = bc->a, hw = bc->b;
        kiln_tensor it = kiln_tensor_make(x, KILN_DT_F32, 4, (int64_t[]){1, ch, hw, hw});
        kiln_tensor ot = kiln_tensor_make(y, KILN_DT_F32, 4, (int64_t[]){1, ch, 2 * hw, 2 * hw});
        TIME_OP(c, secs, be->ops->upsample2x(be, &ot, &it, err), NO_PEAK);
        bytes = 20.0 * (double)(ch * hw * hw);
        snprintf(shape, sizeof shape, "[1,%lld,%lld,%lld]", (long long)ch, (long long)hw, (long long)hw);
        break;
    }
    default: break;
    }
    print_row(bc->name, shape, secs, c->last_cpu, 0, bytes, 0, "");
    kiln_aligned_free(x), kiln_aligned_free(y), kiln_aligned_free(v), kiln_aligned_free(v2);
    return secs < 0 ? 1 : 0;
}

static bool opt_shapes(void *ctx, const char *v, char *why, size_t cap) {
    int set = !strcmp(v, "512") ? 512 : !strcmp(v, "1024") ? 1024 : !strcmp(v, "all") ? 0 : -1;
    if (set < 0) return snprintf(why, cap, "takes 512, 1024 or all"), false;
    *(int *)ctx = set;
    return true;
}

int kiln_cmd_bench_ops(int argc, char **argv) {
    int threads = 0, repeat = 3, set = 512;
    bool peak_only = false, exact = false, no_blas = false;
    const char *only = NULL;
    const kiln_opt opts[] = {
        KILN_OPT_CALL("--shapes", NULL, "512|1024|all", "which image size's shapes (default 512)", opt_shapes, &set),
        KILN_OPT_INT("--threads", NULL, "N", "threads (default 0: KILN_THREADS or all CPUs)", &threads, 0, 1024),
        KILN_OPT_INT("--repeat", NULL, "R", "runs per op; the median is shown (default 3)", &repeat, 1, 64),
        KILN_OPT_STR("--only", NULL, "SUBSTR", "only the ops whose name contains SUBSTR", &only),
        KILN_OPT_FLAG("--exact", NULL, "f32 matmuls (the --exact precision)", &exact),
        KILN_OPT_FLAG("--no-blas", NULL, "do not time OpenBLAS beside kiln", &no_blas),
        KILN_OPT_FLAG("--peak", NULL, "only measure and print the machine's peaks", &peak_only),
    };
    const kiln_opts spec = {
        .cmd = "kiln bench-ops", .opts = opts, .n = KILN_N(opts),
        .synopsis = "usage: kiln bench-ops [--shapes 512|1024|all] [--threads N] [--repeat R] [--only SUBSTR] [--exact]\n"
                    "                      [--no-blas]\n"
                    "       kiln bench-ops --peak [--threads N]\n"
                    "Times every compute op on FLUX.2 [klein] shapes (median of R runs; default 512, R=3).\n\n"};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    bool blas = !no_blas;
    kiln_err err = {0};
    kiln_backend *be;
    if (kiln_backend_open_cpu(threads, &be, &err) != KILN_OK) {
        fprintf(stderr, "kiln: bench-ops: %s\n", err.msg);
        return kiln_status_exit_code(err.code);
    }
    int nthreads = threads;
    if (nthreads == 0) {
        const char *env = getenv("KILN_THREADS");
        nthreads = env && atoi(env) > 0 ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    }
    printf("# kiln bench-ops: backend %s, %d threads, precision %s\n", be->ops->name, nthreads, exact ? "exact" : "fast");
    double pk[KILN_PEAK_COUNT];
    for (int k = 0; k < KILN_PEAK_COUNT; k++) {
        pk[k] = kiln_cpu_peak_gflops((kiln_peak_kind)k, nthreads, 0.7);
        printf("# peak %-16s %9.1f GFLOP/s%s\n", kiln_peak_name((kiln_peak_kind)k), pk[k], pk[k] ? "" : " (not on this CPU)");
    }
    if (peak_only) {
        kiln_backend_close(be);
        return 0;
    }
    bench_ctx c = {.be = be, .repeat = repeat, .threads = nthreads, .blas = blas};
    bool amx = strstr(be->ops->name, "amx") != NULL, avx512 = amx || strstr(be->ops->name, "avx512") != NULL;
    kiln_peak_kind f32k = avx512 ? KILN_PEAK_F32_AVX512 : KILN_PEAK_F32_AVX2;
    /* the AVX-512 tier's FAST matmul is the packed f32 FMA kernel unless bf16 dot products are the faster unit */
    bool dot = avx512 && kiln_cpu_prefers_bf16_dot();
    c.peak_kind = exact ? f32k : amx ? KILN_PEAK_AMX_BF16 : dot ? KILN_PEAK_BF16_AVX512 : f32k;
    c.attn_peak_kind = amx && !exact ? KILN_PEAK_AMX_BF16 : f32k;
    if (exact) be->precision = KILN_PREC_EXACT;
    if (blas) load_blas(nthreads);
    printf("# columns: name, shape, wall ms, CPU ms per thread (the op's time had it the cores to itself), rate per\n"
           "# CPU-second (GFLOP/s or GB/s), %% of peak; OpenBLAS is timed the same way on the same data\n");
    printf("# %%peak: against %s for the FAST matmul/conv and %s for attention (f32 FMA for --exact),\n"
           "# measured again before every round of the op (median of the per-round fractions: the rate the cores give\n"
           "# changes with load)%s\n",
           amx ? "the AMX bf16 peak" : dot ? "the AVX-512 bf16 peak" : "the f32 FMA peak",
           amx ? "the AMX bf16 peak" : "the f32 FMA peak",
           blas && !blas_sbgemm && !blas_sgemm ? "; OpenBLAS not found" : "");
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bcase *bc = &cases[i];
        if (set && bc->set && bc->set != set) continue;
        if (only && !strstr(bc->name, only)) continue;
        int r = bc->kind == B_MATMUL ? run_matmul(&c, bc)
                : bc->kind == B_ATTN || bc->kind == B_ATTN_BIAS ? run_attention(&c, bc)
                : bc->kind == B_CONV ? run_conv(&c, bc)
                                     : run_rowop(&c, bc);
        if (r && !rc) rc = r;
    }
    kiln_backend_close(be);
    return rc;
}
