/* vec.h - 16-lane f32 vectors in GCC's vector extension, and exp() on them.
 *
 * Written once, compiled per tier: a file includes this inside functions carrying a target attribute (avx512f:
 * one zmm per vector; avx2: two ymm; baseline: four xmm), so the same source serves every tier without
 * intrinsics. Only static inline functions: each including file gets its own copy for its own target. */
#ifndef KILN_COMPUTE_CPU_VEC_H
#define KILN_COMPUTE_CPU_VEC_H

#include <stdint.h>
#include <string.h>

/* The functions below are always inlined into their target-attributed callers, so the 64-byte vector ABI that
 * GCC warns about for baseline x86-64 never applies to a real call. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

static inline __attribute__((always_inline)) v16f v16_load(const float *p) {
    v16f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline __attribute__((always_inline)) void v16_store(float *p, v16f v) { memcpy(p, &v, sizeof v); }
/* On AVX2 (a v16f is two ymm; the including file defines VEC_AVX2 first) "(v16f){0} + f" became scalar stores to
 * the stack reloaded as vectors - a store-forwarding stall per broadcast - while every lane written from the
 * scalar gives broadcasts. On AVX-512 the reverse held (the f32 attention ran at 0.57x with the lane list), so
 * each tier keeps the form that is fast there (docs/cpu-backend.md, "Elementwise and norms"). */
static inline __attribute__((always_inline)) v16f v16_set1(float f) {
#ifdef VEC_AVX2
    return (v16f){f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f};
#else
    return (v16f){0} + f;
#endif
}
/* GCC's C front end has no ?: on vectors: select with the all-ones masks that comparisons return. */
static inline __attribute__((always_inline)) v16f v16_select(v16i mask, v16f a, v16f b) {
    v16i ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    v16i r = (ai & mask) | (bi & ~mask);
    v16f f;
    memcpy(&f, &r, sizeof f);
    return f;
}
/* Lane comparisons (all-ones / zero masks). On AVX2 (VEC_AVX2) GCC 12 lowers a 16-lane vector comparison to 16
 * scalar compares; two 8-lane comparisons (vcmpps each) made the AVX2 f32 attention 2.2x and swiglu 4.3x faster
 * (with the v16_set1 above). On AVX-512 the split is slower (swiglu 0.17x), so other tiers compare all 16 lanes. */
typedef float v8f_half __attribute__((vector_size(32)));
typedef int32_t v8i_half __attribute__((vector_size(32)));
typedef uint32_t v8u_half __attribute__((vector_size(32)));
#ifdef VEC_AVX2
#define V16_CMP(NAME, T, HT, OP)                                                                              \
    static inline __attribute__((always_inline)) v16i NAME(T a, T b) {                                        \
        HT al, ah, bl, bh;                                                                                    \
        memcpy(&al, &a, 32), memcpy(&ah, (const char *)&a + 32, 32);                                          \
        memcpy(&bl, &b, 32), memcpy(&bh, (const char *)&b + 32, 32);                                          \
        v8i_half rl = (v8i_half)(al OP bl), rh = (v8i_half)(ah OP bh);                                        \
        v16i r;                                                                                               \
        memcpy(&r, &rl, 32), memcpy((char *)&r + 32, &rh, 32);                                                \
        return r;                                                                                             \
    }
#else
#define V16_CMP(NAME, T, HT, OP)                                                                              \
    static inline __attribute__((always_inline)) v16i NAME(T a, T b) { return (v16i)(a OP b); }
#endif
V16_CMP(v16_gt, v16f, v8f_half, >)
V16_CMP(v16_lt, v16f, v8f_half, <)
V16_CMP(v16_ne, v16f, v8f_half, !=)
static inline __attribute__((always_inline)) v16f v16_max(v16f a, v16f b) { return v16_select(v16_gt(a, b), a, b); }
static inline __attribute__((always_inline)) float v16_hmax(v16f v) {
    float m = v[0];
    for (int i = 1; i < 16; i++) m = v[i] > m ? v[i] : m;
    return m;
}
static inline __attribute__((always_inline)) float v16_hsum(v16f v) {
    float s = 0;
    for (int i = 0; i < 16; i++) s += v[i];
    return s;
}

typedef uint32_t v16u __attribute__((vector_size(64)));
V16_CMP(v16u_gt, v16u, v8u_half, >)
static inline __attribute__((always_inline)) v16u v16_set1u(uint32_t u) {
    return (v16u){u, u, u, u, u, u, u, u, u, u, u, u, u, u, u, u};
}

/* x rounded to the nearest bf16 (ties to even) and widened back to f32: the FAST operand precision, lane by
 * lane as kiln_f32_to_bf16 rounds one value (a NaN stays a NaN, made quiet). */
static inline __attribute__((always_inline)) v16f v16_round_bf16(v16f x) {
    v16u u, r;
    memcpy(&u, &x, sizeof u);
    r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    v16i nan = v16u_gt(u & 0x7fffffffu, v16_set1u(0x7f800000u));
    v16u q = (u & 0xffff0000u) | 0x00400000u;
    r = (v16u)(((v16i)q & nan) | ((v16i)r & ~nan));
    v16f f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* exp(x): x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 Taylor polynomial (relative error < 2e-7), 2^n built
 * in the exponent bits. Inputs below -87.3 give exactly 0 (so exp(-inf) = 0), above 88.3 give +inf (exp
 * overflows f32 at 88.72; the last 0.4 is given up to keep n <= 127). NaN gives NaN. */
static inline __attribute__((always_inline)) v16f v16_exp(v16f x) {
    const v16f lo = v16_set1(-87.3f), hi = v16_set1(88.3f);
    v16f xc = v16_select(v16_lt(x, lo), lo, x);
    xc = v16_select(v16_gt(xc, hi), hi, xc);
    v16f t = xc * 1.44269504088896341f;
    v16f n = (t + 12582912.0f) - 12582912.0f; /* round to nearest */
    v16f r = xc - n * 0.693359375f + n * 2.12194440e-4f; /* ln2 split in two for precision */
    v16f p = v16_set1(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    v16i e = (__builtin_convertvector(n, v16i) + 127) << 23;
    v16f s;
    memcpy(&s, &e, sizeof s);
    v16f y = p * s;
    y = v16_select(v16_lt(x, lo), (v16f){0}, y);
    y = v16_select(v16_gt(x, hi), v16_set1(__builtin_inff()), y);
    return v16_select(v16_ne(x, x), x, y);
}

#endif
