/* quant_ref.c - scalar dequantisation of every supported GGML type: the reference the vector tiers are tested
 * against, and itself tested bit for bit against the gguf package (tests/unit/test_tensor_quant.c).
 *
 * Each kernel writes value e of a block (e in block order, the order of the row) from the bits described in
 * quant.h. Arithmetic is float32 in the gguf package's order: the per-sub-block factors first (d * scale,
 * dmin * min), then factor * q, then the subtraction. The file is built with -ffp-contract=off. */
#include "tensor/quant_internal.h"

static void f32_ref(float *y, const uint8_t *x, size_t nb) { memcpy(y, x, nb * 4); }

static void f16_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t i = 0; i < nb; i++) y[i] = kiln_q_half(x + 2 * i);
}

static void bf16_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t i = 0; i < nb; i++) y[i] = kiln_bf16_to_f32((uint16_t)(x[2 * i] | x[2 * i + 1] << 8));
}

static void q8_0_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 34, y += 32) {
        float d = kiln_q_half(x);
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * d;
    }
}

static void q4_0_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 18, y += 32) {
        float d = kiln_q_half(x);
        const uint8_t *qs = x + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

static void q5_0_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 22, y += 32) {
        float d = kiln_q_half(x);
        uint32_t qh = kiln_q_u32(x + 2);
        const uint8_t *qs = x + 6;
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (float)(lo - 16) * d;
            y[j + 16] = (float)(hi - 16) * d;
        }
    }
}

/* Q2_K: value e = 128 g + 32 s + l (g 0..1, s 0..3, l 0..31) is bits 2s..2s+1 of qs[32 g + l]; sub-block e / 16
 * has scale (low nibble) and min (high nibble) in scales[e / 16]. */
static void q2_k_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 84, y += 256) {
        const uint8_t *scales = x, *qs = x + 16;
        float d = kiln_q_half(x + 80), dmin = kiln_q_half(x + 82);
        for (int e = 0; e < 256; e++) {
            int g = e / 128, s = (e / 32) % 4, l = e % 32;
            int q = (qs[32 * g + l] >> (2 * s)) & 3;
            float dl = d * (float)(scales[e / 16] & 0xF), ml = dmin * (float)(scales[e / 16] >> 4);
            y[e] = dl * (float)q - ml;
        }
    }
}

/* Q3_K: the low two bits of value e = 128 g + 32 s + l sit as in Q2_K; bit 2 is bit e / 32 of hmask[e % 32],
 * stored inverted (a set bit means no -4 offset); scale per 16 values. */
static void q3_k_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 110, y += 256) {
        const uint8_t *hmask = x, *qs = x + 32;
        int8_t sc[16];
        kiln_q_scales_k3(x + 96, sc);
        float d = kiln_q_half(x + 108);
        for (int e = 0; e < 256; e++) {
            int g = e / 128, s = (e / 32) % 4, l = e % 32;
            int lo = (qs[32 * g + l] >> (2 * s)) & 3;
            int h = (hmask[l] >> (e / 32)) & 1;
            float dl = d * (float)sc[e / 16];
            y[e] = dl * (float)(lo - ((h ^ 1) << 2));
        }
    }
}

/* Q4_K: value e = 64 g + 32 h + l is nibble h of qs[32 g + l]; 8 sub-blocks of 32 with 6-bit scale and min. */
static void q4_k_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 144, y += 256) {
        float d = kiln_q_half(x), dmin = kiln_q_half(x + 2);
        const uint8_t *qs = x + 16;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            kiln_q_scale_min_k4(x + 4, j, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
                y[32 * j + l] = dl * (float)q - ml;
            }
        }
    }
}

/* Q5_K: Q4_K plus bit 4 of value e = 32 j + l from bit j of qh[l]. */
static void q5_k_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 176, y += 256) {
        float d = kiln_q_half(x), dmin = kiln_q_half(x + 2);
        const uint8_t *qh = x + 16, *qs = x + 48;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            kiln_q_scale_min_k4(x + 4, j, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int q = ((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) | ((qh[l] >> j) & 1) << 4;
                y[32 * j + l] = dl * (float)q - ml;
            }
        }
    }
}

/* Q6_K: value e = 128 g + r (g 0..1, r 0..127): low 4 bits are nibble r / 64 of ql[64 g + r % 64], high 2 bits
 * are bits 2 (r / 32).. of qh[32 g + r % 32]; minus 32; int8 scale per 16 values. */
static void q6_k_ref(float *y, const uint8_t *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 210, y += 256) {
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        float d = kiln_q_half(x + 208);
        for (int e = 0; e < 256; e++) {
            int g = e / 128, r = e % 128;
            int lo = (ql[64 * g + r % 64] >> (4 * (r / 64))) & 0xF;
            int hi = (qh[32 * g + r % 32] >> (2 * (r / 32))) & 3;
            float dl = d * (float)sc[e / 16];
            y[e] = dl * (float)((lo | hi << 4) - 32);
        }
    }
}

const kiln_dequant_fn kiln_dequant_ref_fns[QS_COUNT] = {
    [QS_F32] = f32_ref,   [QS_F16] = f16_ref,   [QS_BF16] = bf16_ref, [QS_Q8_0] = q8_0_ref,
    [QS_Q4_0] = q4_0_ref, [QS_Q5_0] = q5_0_ref, [QS_Q2_K] = q2_k_ref, [QS_Q3_K] = q3_k_ref,
    [QS_Q4_K] = q4_k_ref, [QS_Q5_K] = q5_k_ref, [QS_Q6_K] = q6_k_ref,
};
