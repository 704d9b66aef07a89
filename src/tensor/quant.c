/* quant.c - the GGML type table, run-time dispatch of dequantisation, and the quantisers (see quant.h). */
#include "tensor/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <strings.h>

#include "tensor/quant_internal.h"

/* Every type GGML defines (ggml.h / the gguf package's GGML_QUANT_SIZES), so that a file of any GGML type can be
 * sized, checked and named. Ids 4 and 5 (Q4_2, Q4_3) and 31-33, 36-38 were retired and are unknown. */
static const kiln_qtype_info qtypes[] = {
    {0, "F32", 1, 4, true},        {1, "F16", 1, 2, true},        {2, "Q4_0", 32, 18, true},
    {3, "Q4_1", 32, 20, false},    {6, "Q5_0", 32, 22, true},     {7, "Q5_1", 32, 24, false},
    {8, "Q8_0", 32, 34, true},     {9, "Q8_1", 32, 40, false},    {10, "Q2_K", 256, 84, true},
    {11, "Q3_K", 256, 110, true},  {12, "Q4_K", 256, 144, true},  {13, "Q5_K", 256, 176, true},
    {14, "Q6_K", 256, 210, true},  {15, "Q8_K", 256, 292, false}, {16, "IQ2_XXS", 256, 66, false},
    {17, "IQ2_XS", 256, 74, false}, {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
    {20, "IQ4_NL", 32, 18, false}, {21, "IQ3_S", 256, 110, false}, {22, "IQ2_S", 256, 82, false},
    {23, "IQ4_XS", 256, 136, false}, {24, "I8", 1, 1, false},     {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},      {27, "I64", 1, 8, false},      {28, "F64", 1, 8, false},
    {29, "IQ1_M", 256, 56, false}, {30, "BF16", 1, 2, true},      {34, "TQ1_0", 256, 54, false},
    {35, "TQ2_0", 256, 66, false}, {39, "MXFP4", 32, 17, false},  {40, "NVFP4", 64, 36, false},
    {41, "Q1_0", 128, 18, false},
};
#define N_QTYPES (sizeof qtypes / sizeof qtypes[0])

const kiln_qtype_info *kiln_qtype_get(uint32_t id) {
    for (size_t i = 0; i < N_QTYPES; i++)
        if (qtypes[i].id == id) return &qtypes[i];
    return NULL;
}

const kiln_qtype_info *kiln_qtype_by_name(const char *name) {
    for (size_t i = 0; i < N_QTYPES; i++)
        if (strcasecmp(qtypes[i].name, name) == 0) return &qtypes[i];
    return NULL;
}

static int slot_of(uint32_t id) {
    switch (id) {
    case KILN_QT_F32: return QS_F32;
    case KILN_QT_F16: return QS_F16;
    case KILN_QT_BF16: return QS_BF16;
    case KILN_QT_Q8_0: return QS_Q8_0;
    case KILN_QT_Q4_0: return QS_Q4_0;
    case KILN_QT_Q5_0: return QS_Q5_0;
    case KILN_QT_Q2_K: return QS_Q2_K;
    case KILN_QT_Q3_K: return QS_Q3_K;
    case KILN_QT_Q4_K: return QS_Q4_K;
    case KILN_QT_Q5_K: return QS_Q5_K;
    case KILN_QT_Q6_K: return QS_Q6_K;
    default: return -1;
    }
}

/* ---- dispatch ----------------------------------------------------------------------------------------------- */

static atomic_int current_isa = -1;

static const kiln_dequant_fn *tier_fns(kiln_isa isa) {
#if defined(__x86_64__)
    if (isa == KILN_ISA_AVX512) return kiln_dequant_avx512_fns;
    if (isa == KILN_ISA_AVX2) return kiln_dequant_avx2_fns;
#endif
    (void)isa;
    return kiln_dequant_ref_fns;
}

kiln_isa kiln_quant_isa(void) {
    int isa = atomic_load_explicit(&current_isa, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)kiln_isa_detect();
        atomic_store(&current_isa, isa);
    }
    return (kiln_isa)isa;
}

bool kiln_quant_set_isa(kiln_isa isa) {
    if ((unsigned)isa >= KILN_ISA_COUNT || isa > kiln_isa_detect()) return false;
    atomic_store(&current_isa, (int)isa);
    return true;
}

bool kiln_quant_isa_has(kiln_isa isa, uint32_t id) {
    int s = slot_of(id);
    /* F32 is a memcpy on every tier */
    return s >= 0 && (isa == KILN_ISA_SCALAR || s == QS_F32 || tier_fns(isa)[s] != NULL);
}

static kiln_status check_args(uint32_t id, size_t n, int *slot, size_t *nb, kiln_err *err) {
    const kiln_qtype_info *q = kiln_qtype_get(id);
    if (!q) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "GGML type id %u is not a known type", id);
    *slot = slot_of(id);
    if (*slot < 0) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "kiln cannot dequantise GGML type %s", q->name);
    if (n % q->block)
        return KILN_FAIL(err, KILN_E_INVALID, "%zu values of %s are not whole blocks of %u", n, q->name, q->block);
    *nb = n / q->block;
    return KILN_OK;
}

kiln_status kiln_dequant(float *dst, uint32_t id, const void *src, size_t n, kiln_err *err) {
    int s;
    size_t nb;
    KILN_TRY(check_args(id, n, &s, &nb, err));
    kiln_dequant_fn fn = tier_fns(kiln_quant_isa())[s];
    (fn ? fn : kiln_dequant_ref_fns[s])(dst, src, nb);
    return KILN_OK;
}

kiln_status kiln_dequant_ref(float *dst, uint32_t id, const void *src, size_t n, kiln_err *err) {
    int s;
    size_t nb;
    KILN_TRY(check_args(id, n, &s, &nb, err));
    kiln_dequant_ref_fns[s](dst, src, nb);
    return KILN_OK;
}

kiln_status kiln_dequant_rows(float *dst, int64_t ld, uint32_t id, const void *w, int64_t K, int64_t r0, int64_t r1,
                              int64_t k0, int64_t k1, kiln_err *err) {
    const kiln_qtype_info *q = kiln_qtype_get(id);
    int s = slot_of(id);
    if (!q || s < 0) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "kiln cannot dequantise GGML type %s", q ? q->name : "?");
    int64_t b = q->block;
    if (K < 0 || K % b || k0 < 0 || k0 % b || k1 < k0 || k1 > K || (k1 % b && k1 != K) || r0 < 0 || r1 < r0 || ld < k1 - k0)
        return KILN_FAIL(err, KILN_E_INVALID, "%s slice k [%lld, %lld) of rows [%lld, %lld) (K %lld, ld %lld) is not on "
                         "block boundaries of %u", q->name, (long long)k0, (long long)k1, (long long)r0, (long long)r1,
                         (long long)K, (long long)ld, q->block);
    kiln_dequant_fn fn = tier_fns(kiln_quant_isa())[s];
    if (!fn) fn = kiln_dequant_ref_fns[s];
    size_t row_bytes = (size_t)(K / b) * q->bytes, nb = (size_t)((k1 - k0) / b);
    const uint8_t *base = (const uint8_t *)w + (size_t)(k0 / b) * q->bytes;
    for (int64_t r = r0; r < r1; r++) fn(dst + (r - r0) * ld, base + (size_t)r * row_bytes, nb);
    return KILN_OK;
}

/* ---- quantisers --------------------------------------------------------------------------------------------- */

static void put_half(uint8_t *p, float f) {
    uint16_t h = kiln_f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* The gguf package's Q8_0 (itself ggml's reference): scale from the largest magnitude, round half away. */
static void quantize_q8_0(uint8_t *y, const float *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 32, y += 34) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127, id = d != 0 ? 1 / d : 0;
        put_half(y, d);
        for (int j = 0; j < 32; j++) y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

static uint8_t clamp_round(float v, int hi) {
    float r = roundf(v);
    return (uint8_t)(r < 0 ? 0 : r > (float)hi ? hi : (int)r);
}

/* Q4_K, kiln's quantiser: each sub-block of 32 maps [min(x, 0), max(x)] onto q = 0..15 (scale (max - min) / 15,
 * offset -min); the block's d and dmin are the largest scale and offset over 63, stored as f16, and each
 * sub-block's 6-bit scale and min are rounded against those stored values. The values are then rounded against
 * the factors the dequantiser will actually use, d * sc and dmin * m. (ggml's own quantiser searches around
 * these factors for a lower error; this one is the plain min-max fit, within one q step of it.) */
static void quantize_q4_k(uint8_t *y, const float *x, size_t nb) {
    for (size_t b = 0; b < nb; b++, x += 256, y += 144) {
        float scale[8], off[8], smax = 0, omax = 0;
        for (int j = 0; j < 8; j++) {
            float lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo = fminf(lo, x[32 * j + l]);
                hi = fmaxf(hi, x[32 * j + l]);
            }
            scale[j] = (hi - lo) / 15;
            off[j] = -lo;
            smax = fmaxf(smax, scale[j]);
            omax = fmaxf(omax, off[j]);
        }
        put_half(y, smax / 63);
        put_half(y + 2, omax / 63);
        float d = kiln_q_half(y), dmin = kiln_q_half(y + 2);
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            sc[j] = d > 0 ? clamp_round(scale[j] / d, 63) : 0;
            m[j] = dmin > 0 ? clamp_round(off[j] / dmin, 63) : 0;
        }
        uint8_t *s = y + 4;
        for (int j = 0; j < 4; j++) {
            s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
            s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
            s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
        }
        uint8_t *qs = y + 16;
        memset(qs, 0, 128);
        for (int j = 0; j < 8; j++) {
            float dl = d * (float)sc[j], ml = dmin * (float)m[j];
            for (int l = 0; l < 32; l++) {
                uint8_t q = dl > 0 ? clamp_round((x[32 * j + l] + ml) / dl, 15) : 0;
                qs[32 * (j / 2) + l] |= (uint8_t)(q << (4 * (j % 2)));
            }
        }
    }
}

kiln_status kiln_quantize(void *dst, uint32_t id, const float *src, size_t n, kiln_err *err) {
    const kiln_qtype_info *q = kiln_qtype_get(id);
    if (!q) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "GGML type id %u is not a known type", id);
    if (n % q->block)
        return KILN_FAIL(err, KILN_E_INVALID, "%zu values of %s are not whole blocks of %u", n, q->name, q->block);
    uint8_t *y = dst;
    switch (id) {
    case KILN_QT_F32: memcpy(dst, src, n * 4); return KILN_OK;
    case KILN_QT_F16:
        for (size_t i = 0; i < n; i++) put_half(y + 2 * i, src[i]);
        return KILN_OK;
    case KILN_QT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = kiln_f32_to_bf16(src[i]);
            y[2 * i] = (uint8_t)h;
            y[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return KILN_OK;
    case KILN_QT_Q8_0: quantize_q8_0(y, src, n / 32); return KILN_OK;
    case KILN_QT_Q4_K: quantize_q4_k(y, src, n / 256); return KILN_OK;
    default: return KILN_FAIL(err, KILN_E_UNSUPPORTED, "kiln cannot quantise to GGML type %s", q->name);
    }
}
