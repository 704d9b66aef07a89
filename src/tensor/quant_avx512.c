/* quant_avx512.c - dequantisation on AVX-512 F/BW/VL: 16 floats per step. Kernels: quant_kernels.inc (their
 * byte unpacking is 256 bits wide on both tiers; the conversion and scaling here is 512). */
#include "tensor/quant_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define QTARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
#define QSUF avx512

/* 16 signed bytes -> 16 floats, times a, minus b. */
QTARGET static inline void emit16(float *y, __m128i q16, float a, float b) {
    __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q16));
    _mm512_storeu_ps(y, _mm512_sub_ps(_mm512_mul_ps(f, _mm512_set1_ps(a)), _mm512_set1_ps(b)));
}

QTARGET static inline void emit32(float *y, __m256i q, float a0, float b0, float a1, float b1) {
    emit16(y, _mm256_castsi256_si128(q), a0, b0);
    emit16(y + 16, _mm256_extracti128_si256(q, 1), a1, b1);
}

#include "tensor/quant_kernels.inc"

QTARGET static void f16_avx512(float *y, const uint8_t *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + 2 * i))));
    kiln_dequant_ref_fns[QS_F16](y + i, x + 2 * i, n - i);
}

QTARGET static void bf16_avx512(float *y, const uint8_t *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + 2 * i)));
        _mm512_storeu_si512(y + i, _mm512_slli_epi32(w, 16));
    }
    kiln_dequant_ref_fns[QS_BF16](y + i, x + 2 * i, n - i);
}

const kiln_dequant_fn kiln_dequant_avx512_fns[QS_COUNT] = {
    [QS_F16] = f16_avx512,   [QS_BF16] = bf16_avx512, [QS_Q8_0] = q8_0_avx512, [QS_Q4_0] = q4_0_avx512,
    [QS_Q5_0] = q5_0_avx512, [QS_Q2_K] = q2_k_avx512, [QS_Q3_K] = q3_k_avx512, [QS_Q4_K] = q4_k_avx512,
    [QS_Q5_K] = q5_k_avx512, [QS_Q6_K] = q6_k_avx512,
};
#else
const kiln_dequant_fn kiln_dequant_avx512_fns[QS_COUNT];
#endif
