/* gemm_avx2.c - the AVX2+FMA parts of the packed matmul kernel (gemm_packed.c): its 6 x 16 micro-kernel and
 * its weight pack. bf16 weights are widened in registers (a shift). */
#include <immintrin.h>

#include "compute/cpu/gemm.h"

#define TARGET __attribute__((target("avx2,fma,f16c")))

TARGET static inline __m256 load8(const void *p, bool bf16) {
    if (bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)p);
}

static inline float ld(const void *p, int64_t k, bool bf16) {
    return bf16 ? bf16_to_f32(((const uint16_t *)p)[k]) : ((const float *)p)[k];
}

/* The packed kernel's 6 x 16 micro-kernel (gemm_packed.c): 12 ymm sums, two panel vectors and one broadcast x
 * value - 15 of the 16 ymm registers. */
TARGET void cpu_gemm_micro_avx2(const float *xp, const float *panel, int64_t kc, float *acc, int64_t ld,
                                bool first) {
    __m256 c[GEMM_AVX2_MR][2];
    #pragma GCC unroll 6
    for (int i = 0; i < GEMM_AVX2_MR; i++) {
        c[i][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i * ld);
        c[i][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i * ld + 8);
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 w0 = _mm256_load_ps(panel + k * 16), w1 = _mm256_load_ps(panel + k * 16 + 8);
        #pragma GCC unroll 6
        for (int i = 0; i < GEMM_AVX2_MR; i++) {
            __m256 a = _mm256_broadcast_ss(xp + k * GEMM_AVX2_MR + i);
            c[i][0] = _mm256_fmadd_ps(a, w0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(a, w1, c[i][1]);
        }
    }
    #pragma GCC unroll 6
    for (int i = 0; i < GEMM_AVX2_MR; i++) {
        _mm256_storeu_ps(acc + i * ld, c[i][0]);
        _mm256_storeu_ps(acc + i * ld + 8, c[i][1]);
    }
}

/* r[i] = column i of the 8 x 8 matrix whose rows are r[0..7]. */
TARGET static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

/* The packed kernel's weight pack (gemm_packed.c): 8 weight rows x 8 k at a time, widened and transposed in
 * registers; edges (rows past n1, k tails) go element by element. */
TARGET void cpu_gemm_pack_panel_avx2(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols,
                                     int64_t kc, int64_t ke) {
    const int nr = GEMM_AVX2_NR;
    const int64_t kl = ke - kc;
    for (int64_t j0 = 0; j0 < ncols; j0 += 8) {
        float *grp = panel + (j0 / nr) * kl * nr + j0 % nr;
        int64_t k = 0;
        if (n0 + j0 + 8 <= n1)
            for (; k + 8 <= kl; k += 8) {
                __m256 r[8];
                for (int i = 0; i < 8; i++) r[i] = load8((const char *)g->w + (size_t)((n0 + j0 + i) * g->ldw + kc + k) * (g->w_bf16 ? 2 : 4), g->w_bf16);
                transpose8(r);
                for (int i = 0; i < 8; i++) _mm256_store_ps(grp + (k + i) * nr, r[i]);
            }
        for (; k < kl; k++)
            for (int i = 0; i < 8; i++) {
                const int64_t n = n0 + j0 + i;
                grp[k * nr + i] = n >= n1 ? 0.0f : ld(g->w, n * g->ldw + kc + k, g->w_bf16);
            }
    }
}
