/* convert.h - dtype conversions between f32 and bf16, f16, fp8 e4m3 (e4m3fn) and fp8 e5m2.
 *
 *     float out[n];
 *     kiln_convert(out, KILN_DT_F32, weights_bf16, KILN_DT_BF16, n, pool, &err);   // pool may be NULL
 *     float x = kiln_bf16_to_f32(0x3f80);                                           // 1.0f, scalar helper
 *
 * Semantics (bit-exact with PyTorch's CPU casts, and identical on every code path):
 *   - f32 -> bf16 / f16 / fp8: round to nearest, ties to even. Subnormal results are kept (no flush to zero).
 *   - NaN stays NaN (quiet, sign kept). Infinity stays infinity where the target has one (bf16, f16, e5m2).
 *   - fp8 saturates: a finite value beyond the largest finite fp8 value becomes +-448 (e4m3) or +-57344
 *     (e5m2); e4m3 has no infinity, so +-inf becomes +-448 too. (f16 does not saturate: overflow is inf.)
 *   - -> f32 conversions are exact.
 *
 * Speed: the bulk loops pick an implementation at run time from what the CPU supports (AVX-512 F/BW,
 * AVX2 + F16C, or plain C), so one binary runs on any x86-64 and uses the widest vectors available;
 * kiln_convert also splits buffers over 1 MiB across the pool's threads. The vector bf16/fp8 paths use
 * integer arithmetic rather than AVX-512 BF16's VCVTNEPS2BF16, because that instruction flushes subnormals
 * and would break bit-exactness with the reference.
 */
#ifndef KILN_TENSOR_CONVERT_H
#define KILN_TENSOR_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "tensor/tensor.h"

/* Converts n elements. Supported pairs: f32 <-> {f32, bf16, f16, f8_e4m3, f8_e5m2}, and any of those to
 * itself (a copy). Anything else is KILN_E_UNSUPPORTED. dst and src must not overlap (unless equal for a
 * same-dtype copy). pool may be NULL (single thread). */
kiln_status kiln_convert(void *dst, kiln_dtype dst_dt, const void *src, kiln_dtype src_dt, size_t n,
                         kiln_pool *pool, kiln_err *err);

/* Single-threaded bulk loops (dispatched by CPU). */
void kiln_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void kiln_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n);
void kiln_f16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void kiln_f32_to_f16_n(uint16_t *dst, const float *src, size_t n);
void kiln_e4m3_to_f32_n(float *dst, const uint8_t *src, size_t n);
void kiln_f32_to_e4m3_n(uint8_t *dst, const float *src, size_t n);
void kiln_e5m2_to_f32_n(float *dst, const uint8_t *src, size_t n);
void kiln_f32_to_e5m2_n(uint8_t *dst, const float *src, size_t n);

/* Like kiln_bf16_to_f32_n with non-temporal (cache-bypassing) stores: for outputs much bigger than the
 * caches, it saves the read-for-ownership of every destination line. kiln_convert switches to it by itself
 * for bf16 -> f32 outputs of KILN_CONVERT_STREAM_BYTES or more. Same results bit for bit. */
void kiln_bf16_to_f32_stream_n(float *dst, const uint16_t *src, size_t n);
#define KILN_CONVERT_STREAM_BYTES ((size_t)64 << 20)

/* Which implementation the bulk loops use. */
typedef enum kiln_isa { KILN_ISA_SCALAR = 0, KILN_ISA_AVX2, KILN_ISA_AVX512, KILN_ISA_COUNT } kiln_isa;
const char *kiln_isa_name(kiln_isa isa);
/* The best level this CPU supports. */
kiln_isa kiln_isa_detect(void);
kiln_isa kiln_convert_isa(void);
/* For tests and benchmarks: force a level. Returns false (and changes nothing) if the CPU lacks it. */
bool kiln_convert_set_isa(kiln_isa isa);

/* ---- scalar helpers (the reference every vector path is tested against) ------------------------------- */

static inline uint32_t kiln_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float kiln_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float kiln_bf16_to_f32(uint16_t h) { return kiln_bits_f32((uint32_t)h << 16); }
static inline uint16_t kiln_f32_to_bf16(float f) {
    uint32_t u = kiln_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN: keep it, make it quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
float kiln_f16_to_f32(uint16_t h);
uint16_t kiln_f32_to_f16(float f);
float kiln_e4m3_to_f32(uint8_t b);
uint8_t kiln_f32_to_e4m3(float f);
float kiln_e5m2_to_f32(uint8_t b);
uint8_t kiln_f32_to_e5m2(float f);

#endif
