/* packed_micro.c - the packed kernel's 12 x 32 AVX-512 micro-kernel (as in src/compute/cpu/gemm_avx512.c, but
 * broadcasting x from MR separate row pointers, as the first version did) against a register-only FMA loop, one
 * thread, thread CPU time (docs/cpu-backend.md, "The vector tiers"). Columns: "L1" one panel group and one row
 * group repeated (everything in L1); "block" a 480-row block over 4 panel groups, row groups outer; "q-outer" the
 * same with panel groups outer. The argument is the x row stride in floats: 3072 (rows 12 KB apart, a multiple
 * of 4 KB: the 12 row streams share L1 sets) against e.g. 3088 (padded by a line). Rounds where the peak moves
 * ran beside a busy neighbour.
 *
 *     gcc -O2 -o /tmp/packed_micro tools/bench/packed_micro.c && /tmp/packed_micro 3072 && /tmp/packed_micro 3088
 *
 * Needs AVX-512F. */
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include <time.h>
#include <stdlib.h>
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx2")))
TARGET __attribute__((noinline)) void micro(const float *const *xr, const float *panel, int64_t kc, float *acc, int64_t ld, bool first) {
    __m512 c[12][2];
    #pragma GCC unroll 12
    for (int i = 0; i < 12; i++) { c[i][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i * ld); c[i][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i * ld + 16); }
    for (int64_t k = 0; k < kc; k++) {
        __m512 w0 = _mm512_load_ps(panel + k * 32), w1 = _mm512_load_ps(panel + k * 32 + 16);
        #pragma GCC unroll 12
        for (int i = 0; i < 12; i++) { __m512 a = _mm512_set1_ps(xr[i][k]); c[i][0] = _mm512_fmadd_ps(a, w0, c[i][0]); c[i][1] = _mm512_fmadd_ps(a, w1, c[i][1]); }
    }
    #pragma GCC unroll 12
    for (int i = 0; i < 12; i++) { _mm512_storeu_ps(acc + i * ld, c[i][0]); _mm512_storeu_ps(acc + i * ld + 16, c[i][1]); }
}
TARGET __attribute__((noinline)) double peak(long n) {
    __m512 c[12]; for (int i = 0; i < 12; i++) c[i] = _mm512_set1_ps(i);
    __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.999f);
    for (long k = 0; k < n; k++) {
        #pragma GCC unroll 12
        for (int i = 0; i < 12; i++) c[i] = _mm512_fmadd_ps(a, c[i], b);
    }
    float s = 0; for (int i = 0; i < 12; i++) s += c[i][0];
    return s;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    int K = 3072, kc = 256, BN = 128, BM = 480;
    long ldx = argc > 1 ? atol(argv[1]) : K;
    float *x = aligned_alloc(64, sizeof(float) * BM * ldx), *panel = aligned_alloc(64, 4 * BN * kc), *acc = aligned_alloc(64, 4 * BM * BN);
    for (long i = 0; i < BM * ldx; i++) x[i] = 0.001f * (i % 7);
    for (int i = 0; i < BN * kc; i++) panel[i] = 0.5f;
    for (int r = 0; r < 5; r++) {
        volatile double sink; double t0 = now(); sink = peak(20000000); (void)sink; double tp = now() - t0; double pk = 20000000.0 * 12 * 32 / tp / 1e9;
        /* L1: one panel group, one row block repeated */
        const float *xr[12]; for (int i = 0; i < 12; i++) xr[i] = x + i * ldx;
        t0 = now(); for (int it = 0; it < 20000; it++) micro(xr, panel, kc, acc, BN, false); double t1 = now() - t0;
        double l1 = 20000.0 * kc * 12 * 32 * 2 / t1 / 1e9;
        /* the real loop: 480 rows x 4 groups */
        t0 = now();
        for (int rep = 0; rep < 20; rep++)
            for (int m = 0; m < BM; m += 12) {
                for (int i = 0; i < 12; i++) xr[i] = x + (m + i) * ldx + (rep % 12) * 256;
                for (int q = 0; q < BN; q += 32) micro(xr, panel + q * kc, kc, acc + m * BN + q, BN, false);
            }
        double t2 = now() - t0; double bl = 20.0 * BM * BN * kc * 2 / t2 / 1e9;
        t0 = now();
        for (int rep = 0; rep < 20; rep++)
            for (int q = 0; q < BN; q += 32)
                for (int m = 0; m < BM; m += 12) {
                    for (int i = 0; i < 12; i++) xr[i] = x + (m + i) * ldx + (rep % 12) * 256;
                    micro(xr, panel + q * kc, kc, acc + m * BN + q, BN, false);
                }
        double t3 = now() - t0; double bq = 20.0 * BM * BN * kc * 2 / t3 / 1e9;
        printf("peak %.0f  L1 %.0f%%  block %.0f%%  q-outer %.0f%%\n", pk, 100 * l1 / pk, 100 * bl / pk, 100 * bq / pk);
    }
}
