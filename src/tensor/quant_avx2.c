/* quant_avx2.c - dequantisation on AVX2 (+ F16C): 8 floats per step. Kernels: quant_kernels.inc. */
#include "tensor/quant_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define QTARGET __attribute__((target("avx2,f16c")))
#define QSUF avx2

/* 8 signed bytes -> 8 floats, times a, minus b. */
QTARGET static inline void emit8(float *y, __m128i q8, float a, float b) {
    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(f, _mm256_set1_ps(a)), _mm256_set1_ps(b)));
}

QTARGET static inline void emit32(float *y, __m256i q, float a0, float b0, float a1, float b1) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    emit8(y, lo, a0, b0);
    emit8(y + 8, _mm_srli_si128(lo, 8), a0, b0);
    emit8(y + 16, hi, a1, b1);
    emit8(y + 24, _mm_srli_si128(hi, 8), a1, b1);
}

#include "tensor/quant_kernels.inc"

QTARGET static void f16_avx2(float *y, const uint8_t *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 2 * i))));
    kiln_dequant_ref_fns[QS_F16](y + i, x + 2 * i, n - i);
}

QTARGET static void bf16_avx2(float *y, const uint8_t *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + 2 * i)));
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(w, 16));
    }
    kiln_dequant_ref_fns[QS_BF16](y + i, x + 2 * i, n - i);
}

const kiln_dequant_fn kiln_dequant_avx2_fns[QS_COUNT] = {
    [QS_F16] = f16_avx2,       [QS_BF16] = bf16_avx2,     [QS_Q8_0] = q8_0_avx2, [QS_Q4_0] = q4_0_avx2,
    [QS_Q5_0] = q5_0_avx2,     [QS_Q2_K] = q2_k_avx2,     [QS_Q3_K] = q3_k_avx2, [QS_Q4_K] = q4_k_avx2,
    [QS_Q5_K] = q5_k_avx2,     [QS_Q6_K] = q6_k_avx2,
};
#else
const kiln_dequant_fn kiln_dequant_avx2_fns[QS_COUNT];
#endif
