/* gemm_avx512.c - the AVX-512 parts of the packed matmul kernel (gemm_packed.c): the 12 x 32 micro-kernel (f32
 * FMA, and its vdpbf16ps variant over bf16 pairs) and the weight packs. bf16 weights are widened in registers
 * (a shift). */
#include <immintrin.h>

#include "compute/cpu/gemm.h"
#include "compute/cpu/transpose_avx512.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

TARGET static inline __m512 widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

/* The packed kernel's 12 x 32 micro-kernel (gemm_packed.c): 24 zmm sums, two panel vectors per k, each x value
 * broadcast from the packed x group. The bf16 variant (dot) has the same shape over pairs of k: the panel vectors
 * hold 16 columns x 2 k of bf16, each row's pair is one 32-bit broadcast, and vdpbf16ps adds both products. */
TARGET static inline __attribute__((always_inline)) void micro_12x32(const float *xp, const float *panel, int64_t kc,
                                                                    float *acc, int64_t ld, bool first, const bool dot) {
    __m512 c[GEMM_AVX512_MR][2];
    #pragma GCC unroll 12
    for (int i = 0; i < GEMM_AVX512_MR; i++) {
        c[i][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i * ld);
        c[i][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i * ld + 16);
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(panel + k * 32), w1 = _mm512_load_ps(panel + k * 32 + 16);
        #pragma GCC unroll 12
        for (int i = 0; i < GEMM_AVX512_MR; i++) {
            if (dot) {
                const __m512bh a = (__m512bh)_mm512_set1_epi32(((const int32_t *)xp)[k * GEMM_AVX512_MR + i]);
                c[i][0] = _mm512_dpbf16_ps(c[i][0], a, (__m512bh)w0);
                c[i][1] = _mm512_dpbf16_ps(c[i][1], a, (__m512bh)w1);
            } else {
                const __m512 a = _mm512_set1_ps(xp[k * GEMM_AVX512_MR + i]);
                c[i][0] = _mm512_fmadd_ps(a, w0, c[i][0]);
                c[i][1] = _mm512_fmadd_ps(a, w1, c[i][1]);
            }
        }
    }
    #pragma GCC unroll 12
    for (int i = 0; i < GEMM_AVX512_MR; i++) {
        _mm512_storeu_ps(acc + i * ld, c[i][0]);
        _mm512_storeu_ps(acc + i * ld + 16, c[i][1]);
    }
}

TARGET void cpu_gemm_micro_avx512(const float *xp, const float *panel, int64_t kc, float *acc, int64_t ld, bool first) {
    micro_12x32(xp, panel, kc, acc, ld, first, false);
}

TARGET void cpu_gemm_micro_dot_avx512(const float *xp, const float *panel, int64_t kp, float *acc, int64_t ld,
                                      bool first) {
    micro_12x32(xp, panel, kp, acc, ld, first, true);
}

/* The packed kernel's weight pack (gemm_packed.c): 16 weight rows x 16 k at a time are widened and transposed
 * in registers, so each k's 16 columns leave as one store; edges (rows past n1, k tails) go element by element. */
TARGET void cpu_gemm_pack_panel_avx512(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols,
                                       int64_t kc, int64_t ke) {
    const int nr = GEMM_AVX512_NR;
    const int64_t kl = ke - kc;
    float t[16][16] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < ncols; j0 += 16) {
        float *grp = panel + (j0 / nr) * kl * nr + j0 % nr;
        int64_t k = 0;
        if (n0 + j0 + 16 <= n1)
            for (; k + 16 <= kl; k += 16) {
                for (int r = 0; r < 16; r++) {
                    const int64_t off = (n0 + j0 + r) * g->ldw + kc + k;
                    __m512 v = g->w_bf16 ? widen_bf16(_mm256_loadu_si256((const __m256i *)((const uint16_t *)g->w + off)))
                                         : _mm512_loadu_ps((const float *)g->w + off);
                    _mm512_store_ps(t[r], v);
                }
                __m512 c[16];
                transpose16(&t[0][0], c);
                for (int i = 0; i < 16; i++) _mm512_store_ps(grp + (k + i) * nr, c[i]);
            }
        for (; k < kl; k++)
            for (int r = 0; r < 16; r++) {
                const int64_t n = n0 + j0 + r, off = n * g->ldw + kc + k;
                grp[k * nr + r] = n >= n1 ? 0.0f : g->w_bf16 ? bf16_to_f32(((const uint16_t *)g->w)[off]) : ((const float *)g->w)[off];
            }
    }
}

/* The bf16 variant's weight pack: a bf16 pair is one 32-bit word, so 16 weight rows x 16 pairs (64 bytes of each
 * row) transpose as a 16 x 16 block of words into 16 panel vectors "pair p of 16 columns"; edges word by word. */
TARGET void cpu_gemm_pack_panel_dot_avx512(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols,
                                           int64_t kc, int64_t ke) {
    const int nr = GEMM_AVX512_NR;
    const int64_t np = (ke - kc + 1) / 2; /* pairs in the slice */
    const uint16_t *w = g->w;
    uint32_t *pw = (uint32_t *)panel;
    float t[16][16] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < ncols; j0 += 16) {
        uint32_t *grp = pw + (j0 / nr) * np * nr + j0 % nr;
        int64_t p = 0;
        if (n0 + j0 + 16 <= n1)
            for (; kc + 2 * (p + 16) <= ke; p += 16) {
                for (int r = 0; r < 16; r++)
                    _mm512_store_ps(t[r], _mm512_loadu_ps((const float *)(w + (n0 + j0 + r) * g->ldw + kc + 2 * p)));
                __m512 c[16];
                transpose16(&t[0][0], c);
                for (int i = 0; i < 16; i++) _mm512_store_ps((float *)(grp + (p + i) * nr), c[i]);
            }
        for (; p < np; p++)
            for (int r = 0; r < 16; r++) {
                const int64_t n = n0 + j0 + r, k = kc + 2 * p;
                const uint16_t *wr = w + n * g->ldw;
                grp[p * nr + r] = n >= n1 ? 0 : (uint32_t)wr[k] | (k + 1 < ke ? (uint32_t)wr[k + 1] << 16 : 0);
            }
    }
}
