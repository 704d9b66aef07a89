/* quant.h - GGML block-quantised weights (the types GGUF files hold): their block layouts, dequantisation to
 * f32 and the quantisers `kiln convert` uses.
 *
 *     const kiln_qtype_info *q = kiln_qtype_get(KILN_QT_Q4_K);      // block of 256 values in 144 bytes
 *     kiln_dequant(out_f32, KILN_QT_Q4_K, blocks, 4096, &err);        // n a multiple of q->block
 *
 * Type ids are GGML's (the numbers GGUF stores). kiln_qtype_get knows every id GGML defines, so a reader can size
 * and range-check any tensor and name its type, but only the types with `dequant` set can be turned into
 * numbers: F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q4_K, Q4_0, Q3_K, Q2_K.
 *
 * Results are bit-exact with the `gguf` PyPI package's dequantize (its numpy code computes in float32 in a fixed
 * order, e.g. Q4_K: (d * sc) * q - (dmin * m), never fused): tests/unit/test_tensor_quant.c checks each type on
 * committed random blocks. The vector paths (AVX2, AVX-512; chosen at run time like convert.h's loops) are
 * bit-exact with the scalar reference: the quant files are built with -ffp-contract=off so no multiply-subtract
 * is fused into an FMA, which would round once instead of twice.
 *
 * Block layouts (little-endian; d/dmin are IEEE half floats; "q" the stored integers):
 *   Q8_0  34 B / 32:  d, int8 q[32];                        x = q * d
 *   Q4_0  18 B / 32:  d, u8 qs[16];  q[j] = low nibble of qs[j], q[j+16] = high nibble;  x = (q - 8) * d
 *   Q5_0  22 B / 32:  d, u32 qh, u8 qs[16];  Q4_0's nibbles plus bit j of qh as bit 4;  x = (q - 16) * d
 *   Q2_K  84 B / 256: u8 scales[16] (low nibble scale, high nibble min per 16 values), u8 qs[64] (2 bits), d, dmin
 *   Q3_K 110 B / 256: u8 hmask[32], u8 qs[64] (2 low bits), u8 scales[12] (16 6-bit signed scales), d
 *   Q4_K 144 B / 256: d, dmin, u8 scales[12] (8 6-bit scales + 8 6-bit mins per 32 values), u8 qs[128]
 *   Q5_K 176 B / 256: d, dmin, u8 scales[12] (as Q4_K), u8 qh[32] (bit 4), u8 qs[128]
 *   Q6_K 210 B / 256: u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8 scales[16] (per 16 values), d
 * quant_ref.c spells out where each value's bits sit.
 */
#ifndef KILN_TENSOR_QUANT_H
#define KILN_TENSOR_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/convert.h"

/* The GGML type ids kiln dequantises (other ids are known by name only, see kiln_qtype_get). */
enum {
    KILN_QT_F32 = 0,
    KILN_QT_F16 = 1,
    KILN_QT_Q4_0 = 2,
    KILN_QT_Q5_0 = 6,
    KILN_QT_Q8_0 = 8,
    KILN_QT_Q2_K = 10,
    KILN_QT_Q3_K = 11,
    KILN_QT_Q4_K = 12,
    KILN_QT_Q5_K = 13,
    KILN_QT_Q6_K = 14,
    KILN_QT_BF16 = 30,
};

typedef struct kiln_qtype_info {
    uint32_t id;     /* GGML type id */
    const char *name; /* "Q4_K", "BF16", "IQ2_XXS", ... (GGML's spelling) */
    uint32_t block;  /* values per block (1 for plain floats and ints) */
    uint32_t bytes;  /* bytes per block */
    bool dequant;    /* kiln can dequantise it */
} kiln_qtype_info;

/* NULL for an id GGML does not define. */
const kiln_qtype_info *kiln_qtype_get(uint32_t id);
/* By name, case-insensitive ("q8_0", "Q4_K"); NULL if unknown. */
const kiln_qtype_info *kiln_qtype_by_name(const char *name);

/* Dequantises n values (n a multiple of the type's block) of type id from src to f32. KILN_E_UNSUPPORTED for a
 * type kiln cannot dequantise, KILN_E_INVALID for n not a whole number of blocks. src needs no alignment. */
kiln_status kiln_dequant(float *dst, uint32_t id, const void *src, size_t n, kiln_err *err);
/* The scalar reference (what every vector path is tested against). Same contract. */
kiln_status kiln_dequant_ref(float *dst, uint32_t id, const void *src, size_t n, kiln_err *err);

/* A K slice of a weight matrix: values k0..k1-1 of rows r0..r1-1 of a [rows, K] matrix stored row after row in
 * type id (a row is K / block blocks), as f32 into dst (row r at dst + (r - r0) * ld). k0 must be a multiple of
 * the block, and k1 too unless it is K; K a multiple of the block. What a GEMM's weight packing calls per K
 * slice, so that the weight stays quantised in memory. Same values as kiln_dequant of the whole rows. */
kiln_status kiln_dequant_rows(float *dst, int64_t ld, uint32_t id, const void *w, int64_t K, int64_t r0, int64_t r1,
                              int64_t k0, int64_t k1, kiln_err *err);

/* Which implementation kiln_dequant uses: the convert.h levels. set returns false if the CPU lacks it. */
kiln_isa kiln_quant_isa(void);
bool kiln_quant_set_isa(kiln_isa isa);
/* Whether the given level has its own code for type id (false: it runs the scalar reference; F32, a copy,
 * counts as covered everywhere). */
bool kiln_quant_isa_has(kiln_isa isa, uint32_t id);

/* Quantises n f32 values (a multiple of the block) to type id: F32, F16, BF16 (round to nearest even), Q8_0
 * (bit-exact with the gguf package's quantize: d = max|x| / 127 stored as f16, q = round-half-away(x / d)
 * computed as x * (1 / d)), Q4_K (kiln's own quantiser, see quant.c; the gguf package has none).
 * KILN_E_UNSUPPORTED for other types. */
kiln_status kiln_quantize(void *dst, uint32_t id, const float *src, size_t n, kiln_err *err);

/* Bytes of n values of type id (n a multiple of the block). */
static inline size_t kiln_qtype_nbytes(const kiln_qtype_info *q, size_t n) { return n / q->block * q->bytes; }

#endif
