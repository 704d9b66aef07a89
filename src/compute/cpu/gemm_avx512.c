/* gemm_avx512.c - AVX-512 micro-kernels: a 4 x 4 tile of dot products along K.
 * FAST: vdpbf16ps on bf16 x and bf16 w (32 products per instruction, f32 accumulation) - the weights are read
 * as stored, so no packing is needed. EXACT: f32 FMA with bf16 weights widened in registers (a shift).
 * K tails use masked loads (zeros add nothing). */
#include <immintrin.h>

#include "compute/cpu/gemm.h"
#include "compute/cpu/transpose_avx512.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

TARGET static inline __m512 widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

TARGET static void tile_fast(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, float *acc) {
    const uint16_t *x[4], *w[4];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        x[i] = g->xb + (m0 + (i < mr ? i : 0)) * g->ldxb;
        w[i] = (const uint16_t *)g->w + (n0 + (i < nr ? i : 0)) * g->ldw;
    }
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
    __m512 c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    int64_t K = g->K, k = 0;
#define STEP(LOAD)                                                                                            \
    do {                                                                                                      \
        __m512bh w0 = (__m512bh)LOAD(w[0] + k), w1 = (__m512bh)LOAD(w[1] + k), w2 = (__m512bh)LOAD(w[2] + k),   \
                 w3 = (__m512bh)LOAD(w[3] + k);                                                                \
        __m512bh a = (__m512bh)LOAD(x[0] + k);                                                                 \
        c00 = _mm512_dpbf16_ps(c00, a, w0), c01 = _mm512_dpbf16_ps(c01, a, w1);                                \
        c02 = _mm512_dpbf16_ps(c02, a, w2), c03 = _mm512_dpbf16_ps(c03, a, w3);                                \
        a = (__m512bh)LOAD(x[1] + k);                                                                          \
        c10 = _mm512_dpbf16_ps(c10, a, w0), c11 = _mm512_dpbf16_ps(c11, a, w1);                                \
        c12 = _mm512_dpbf16_ps(c12, a, w2), c13 = _mm512_dpbf16_ps(c13, a, w3);                                \
        a = (__m512bh)LOAD(x[2] + k);                                                                          \
        c20 = _mm512_dpbf16_ps(c20, a, w0), c21 = _mm512_dpbf16_ps(c21, a, w1);                                \
        c22 = _mm512_dpbf16_ps(c22, a, w2), c23 = _mm512_dpbf16_ps(c23, a, w3);                                \
        a = (__m512bh)LOAD(x[3] + k);                                                                          \
        c30 = _mm512_dpbf16_ps(c30, a, w0), c31 = _mm512_dpbf16_ps(c31, a, w1);                                \
        c32 = _mm512_dpbf16_ps(c32, a, w2), c33 = _mm512_dpbf16_ps(c33, a, w3);                                \
    } while (0)
#define LOADU(p) _mm512_loadu_si512((const void *)(p))
    for (; k + 32 <= K; k += 32) STEP(LOADU);
    if (k < K) {
        __mmask32 m = (__mmask32)((1ull << (K - k)) - 1);
#define LOADM(p) _mm512_maskz_loadu_epi16(m, (const void *)(p))
        STEP(LOADM);
#undef LOADM
    }
#undef LOADU
#undef STEP
    float r[16] = {_mm512_reduce_add_ps(c00), _mm512_reduce_add_ps(c01), _mm512_reduce_add_ps(c02),
                   _mm512_reduce_add_ps(c03), _mm512_reduce_add_ps(c10), _mm512_reduce_add_ps(c11),
                   _mm512_reduce_add_ps(c12), _mm512_reduce_add_ps(c13), _mm512_reduce_add_ps(c20),
                   _mm512_reduce_add_ps(c21), _mm512_reduce_add_ps(c22), _mm512_reduce_add_ps(c23),
                   _mm512_reduce_add_ps(c30), _mm512_reduce_add_ps(c31), _mm512_reduce_add_ps(c32),
                   _mm512_reduce_add_ps(c33)};
    memcpy(acc, r, sizeof r);
}

/* EXACT: acc[i][j] over K with x f32 and w bf16 (widened) or f32. */
TARGET static void tile_exact(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, float *acc) {
    const float *x[4];
    const char *w[4];
    size_t wsz = g->w_bf16 ? 2 : 4;
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        x[i] = g->x + (m0 + (i < mr ? i : 0)) * g->ldx;
        w[i] = (const char *)g->w + (size_t)((n0 + (i < nr ? i : 0)) * g->ldw) * wsz;
    }
    __m512 c[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) c[i][j] = _mm512_setzero_ps();
    int64_t K = g->K;
    for (int64_t k = 0; k < K; k += 16) {
        __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
        __m512 wv[4];
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            wv[j] = g->w_bf16 ? widen_bf16(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w[j] + k))
                              : _mm512_maskz_loadu_ps(m, (const float *)w[j] + k);
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512 a = _mm512_maskz_loadu_ps(m, x[i] + k);
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) c[i][j] = _mm512_fmadd_ps(a, wv[j], c[i][j]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[i * GEMM_NR + j] = _mm512_reduce_add_ps(c[i][j]);
}

TARGET void cpu_gemm_tile_avx512(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, float *acc) {
    if (g->fast) tile_fast(g, m0, mr, n0, nr, acc);
    else tile_exact(g, m0, mr, n0, nr, acc);
}

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
