/* peak.c - the peak-rate microbenchmark behind cpu_bench.h. Each thread runs a block of independent
 * multiply-adds on registers (or AMX tiles) only - no memory traffic - so the figure is what the execution units
 * can do, the ceiling every kernel is measured against. */
#include <immintrin.h>
#include <time.h>

#include "compute/cpu/cpu_bench.h"
#include "compute/cpu/cpu_internal.h"

static const char *const names[] = {"f32 fma avx2", "f32 fma avx512", "bf16 dot avx512", "bf16 amx"};
const char *kiln_peak_name(kiln_peak_kind k) { return (unsigned)k < KILN_PEAK_COUNT ? names[k] : "?"; }

#define ITERS 4096
/* The accumulator arrays must live in registers: without full unrolling GCC -O2 keeps them in memory and the
 * loop measures store-to-load forwarding instead (a first version of this file reported half the FMA peak;
 * OpenBLAS sgemm then ran "above peak"). */

__attribute__((target("avx2,fma"))) static double run_avx2(long reps) {
    __m256 a[12], b = _mm256_set1_ps(1e-7f), c = _mm256_set1_ps(0.999f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long r = 0; r < reps; r++)
        for (int it = 0; it < ITERS; it++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], c, b);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm256_cvtss_f32(a[i]);
    __asm__ volatile("" ::"x"(s));
    return (double)reps * ITERS * 12 * 16;
}

__attribute__((target("avx512f,fma"))) static double run_avx512(long reps) {
    __m512 a[16], b = _mm512_set1_ps(1e-7f), c = _mm512_set1_ps(0.999f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    for (long r = 0; r < reps; r++)
        for (int it = 0; it < ITERS; it++)
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], c, b);
    float s = 0;
    for (int i = 0; i < 16; i++) s += _mm512_cvtss_f32(a[i]);
    __asm__ volatile("" ::"x"(s));
    return (double)reps * ITERS * 16 * 32;
}

__attribute__((target("avx512f,avx512bf16"))) static double run_bf16(long reps) {
    __m512 a[16];
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3400);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    for (long r = 0; r < reps; r++)
        for (int it = 0; it < ITERS; it++)
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) a[i] = _mm512_dpbf16_ps(a[i], x, y);
    float s = 0;
    for (int i = 0; i < 16; i++) s += _mm512_cvtss_f32(a[i]);
    __asm__ volatile("" ::"x"(s));
    return (double)reps * ITERS * 16 * 64;
}

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* GCC's _tile_loadconfig tells the compiler it reads only 8 bytes, so stores to the rest of the config may be
 * dropped; this asm names the whole 64-byte struct as its input. */
static inline void amx_load_config(const amx_cfg *c) { __asm__ volatile("ldtilecfg %0" ::"m"(*c)); }

__attribute__((target("amx-tile,amx-bf16"))) static double run_amx(long reps) {
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    amx_load_config(&cfg);
    uint16_t ones[16 * 32] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) ones[i] = 0x3f80; /* 1.0: real operands, in case zeros were skipped */
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long r = 0; r < reps; r++)
        for (int it = 0; it < ITERS / 16; it++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    _tile_release();
    return (double)reps * (ITERS / 16) * 4 * 16384.0;
}

typedef struct peak_job {
    kiln_peak_kind kind;
    long reps;
    double flops[KILN_POOL_MAX_THREADS];
} peak_job;

static void peak_task(void *ctx, size_t i, int thread) {
    peak_job *j = ctx;
    double f = 0;
    switch (j->kind) {
    case KILN_PEAK_F32_AVX2: f = run_avx2(j->reps); break;
    case KILN_PEAK_F32_AVX512: f = run_avx512(j->reps); break;
    case KILN_PEAK_BF16_AVX512: f = run_bf16(j->reps); break;
    default: f = run_amx(j->reps); break;
    }
    j->flops[i] = f;
}

double kiln_cpu_peak_gflops(kiln_peak_kind k, int n_threads, double seconds) {
    kiln_cpu_tier t = kiln_cpu_detect_tier();
    if ((k == KILN_PEAK_F32_AVX2 && t < KILN_CPU_AVX2) || ((k == KILN_PEAK_F32_AVX512 || k == KILN_PEAK_BF16_AVX512) && t < KILN_CPU_AVX512) ||
        (k == KILN_PEAK_AMX_BF16 && t < KILN_CPU_AMX) || (unsigned)k >= KILN_PEAK_COUNT)
        return 0;
    kiln_pool *pool;
    if (kiln_pool_create(n_threads, &pool, NULL) != KILN_OK) return 0;
    int n = kiln_pool_size(pool);
    peak_job j = {.kind = k, .reps = 1};
    double runs[8];
    int nr = 0;
    /* The rate per CPU-second times the thread count: on a shared machine other processes take turns on our
     * cores, and wall time would charge their turns to us. The median of seven runs: under heavy steal the
     * CPU-time accounting itself is noisy in both directions (single runs read up to 2x the hardware's
     * 1024 flop/cycle for AMX), so neither the best nor the worst run is trusted. */
    for (int attempt = 0; attempt < 8; attempt++) {
        struct timespec a, b;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        kiln_pool_run(pool, (size_t)n, peak_task, &j);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        double dt = ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9) / n, total = 0;
        for (int i = 0; i < n; i++) total += j.flops[i];
        if (attempt == 0) { /* calibrate the repetitions to the wanted duration */
            j.reps = (long)(seconds / 7 / (dt > 1e-6 ? dt : 1e-6));
            if (j.reps < 1) j.reps = 1;
            continue;
        }
        runs[nr++] = total / (dt > 1e-9 ? dt : 1e-9);
    }
    for (int a = 1; a < nr; a++) /* insertion sort of seven numbers */
        for (int b = a; b > 0 && runs[b] < runs[b - 1]; b--) {
            double tmp = runs[b];
            runs[b] = runs[b - 1];
            runs[b - 1] = tmp;
        }
    kiln_pool_destroy(pool);
    return runs[nr / 2] / 1e9;
}
