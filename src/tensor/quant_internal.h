/* quant_internal.h - the per-tier dequantisation kernels behind kiln_dequant (quant.c dispatches). Each kernel
 * turns nb whole blocks at src into nb * block f32 values at dst. */
#ifndef KILN_TENSOR_QUANT_INTERNAL_H
#define KILN_TENSOR_QUANT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tensor/convert.h"

typedef void (*kiln_dequant_fn)(float *dst, const uint8_t *src, size_t nb);

/* One slot per dequantisable type, in this order. */
enum { QS_F32, QS_F16, QS_BF16, QS_Q8_0, QS_Q4_0, QS_Q5_0, QS_Q2_K, QS_Q3_K, QS_Q4_K, QS_Q5_K, QS_Q6_K, QS_COUNT };

/* The scalar reference (quant_ref.c) and the vector tiers (quant_avx2.c, quant_avx512.c); a NULL entry in a
 * vector tier means that tier runs the reference for the type. */
extern const kiln_dequant_fn kiln_dequant_ref_fns[QS_COUNT];
extern const kiln_dequant_fn kiln_dequant_avx2_fns[QS_COUNT];
extern const kiln_dequant_fn kiln_dequant_avx512_fns[QS_COUNT];

static inline float kiln_q_half(const uint8_t *p) { return kiln_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline uint32_t kiln_q_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q4_K / Q5_K 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes: j < 4 in the low 6 bits of
 * bytes j (scale) and j + 4 (min); j >= 4 in byte j + 4's nibbles (low: scale, high: min) with the top two bits
 * taken from bits 6-7 of bytes j - 4 (scale) and j (min). */
static inline void kiln_q_scale_min_k4(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Q3_K's 16 signed 6-bit scales: low 4 bits in bytes 0-7 (k < 8: low nibble of byte k, else high nibble of
 * byte k - 8), high 2 bits in bytes 8-11 (bits 2*(k/4)..+1 of byte 8 + k%4); minus 32. */
static inline void kiln_q_scales_k3(const uint8_t *s, int8_t out[16]) {
    for (int k = 0; k < 16; k++) {
        int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
        int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        out[k] = (int8_t)((lo | hi << 4) - 32);
    }
}

#endif
