/* transpose_avx512.h - a 16 x 16 f32 transpose in AVX-512 registers, shared by the AMX matmul (activation pack,
 * C tile epilogue) and the packed-panel kernel's weight pack. Include after <immintrin.h>; callers are compiled
 * for avx512f (a function with a superset target may inline it). */
#ifndef KILN_COMPUTE_CPU_TRANSPOSE_AVX512_H
#define KILN_COMPUTE_CPU_TRANSPOSE_AVX512_H

#include <immintrin.h>

/* Transposes the 16 x 16 f32 tile t (row stride 16) in registers: r[i] = column i of t. */
__attribute__((target("avx512f"))) static inline void transpose16(const float *t, __m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i++) a[i] = _mm512_load_ps(t + 16 * i);
    for (int i = 0; i < 16; i += 2) { /* interleave pairs of rows: 32-bit elements */
        b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* 64-bit elements */
        a[i] = (__m512)_mm512_unpacklo_pd((__m512d)b[i], (__m512d)b[i + 2]);
        a[i + 1] = (__m512)_mm512_unpackhi_pd((__m512d)b[i], (__m512d)b[i + 2]);
        a[i + 2] = (__m512)_mm512_unpacklo_pd((__m512d)b[i + 1], (__m512d)b[i + 3]);
        a[i + 3] = (__m512)_mm512_unpackhi_pd((__m512d)b[i + 1], (__m512d)b[i + 3]);
    }
    /* now a[4q + j] holds, in each 128-bit lane L, elements (row 4q..4q+3, column 4L + j); gather lanes */
    for (int i = 0; i < 4; i++) {
        __m512 x0 = _mm512_shuffle_f32x4(a[i], a[4 + i], 0x88), x1 = _mm512_shuffle_f32x4(a[i], a[4 + i], 0xdd);
        __m512 y0 = _mm512_shuffle_f32x4(a[8 + i], a[12 + i], 0x88), y1 = _mm512_shuffle_f32x4(a[8 + i], a[12 + i], 0xdd);
        r[i] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
        r[4 + i] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
    }
}

#endif
