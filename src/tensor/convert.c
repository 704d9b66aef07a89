/* convert.c - dtype conversions with run-time CPU dispatch (see convert.h).
 *
 * Three implementations of each bulk loop: plain C (the reference), AVX2 + F16C, AVX-512 F/BW. The vector
 * ones are compiled with __attribute__((target(...))) so the rest of kiln stays plain x86-64, and are chosen
 * once, at first use, with __builtin_cpu_supports. Conversions TO fp8 are rare (offline quantisation) and
 * stay scalar on every path; conversions FROM fp8 are on the weight-loading hot path and are vectorised.
 */
#include "tensor/convert.h"

#include <math.h>
#include <stdatomic.h>

#include "base/alloc.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define KILN_X86 1
#else
#define KILN_X86 0
#endif

/* ---- scalar reference ------------------------------------------------------------------------------------- */

float kiln_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return kiln_bits_f32(s | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0)); /* inf; NaN quiet */
    if (e == 0) return kiln_bits_f32(s | kiln_f32_bits((float)m * 0x1p-24f));             /* zero, subnormal */
    return kiln_bits_f32(s | ((e + 112) << 23) | (m << 13));
}

uint16_t kiln_f32_to_f16(float f) {
    uint32_t u = kiln_f32_bits(f), a = u & 0x7fffffffu;
    uint16_t s = (uint16_t)((u >> 16) & 0x8000);
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00 | ((a >> 13) & 0x3ff)); /* NaN: quiet, top payload */
    if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00);                     /* >= 65520 rounds to inf */
    if (a < 0x38800000u) return (uint16_t)(s | (uint16_t)rintf(fabsf(f) * 0x1p24f)); /* subnormal (RNE) */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1);
    return (uint16_t)(s | ((r >> 13) - (112u << 10)));
}

float kiln_e4m3_to_f32(uint8_t b) {
    uint32_t s = (uint32_t)(b & 0x80) << 24, em = b & 0x7f;
    if (em == 0x7f) return kiln_bits_f32(s | 0x7fc00000u);
    if (em < 8) return kiln_bits_f32(s | kiln_f32_bits((float)em * 0x1p-9f));
    return kiln_bits_f32(s | ((em + (120u << 3)) << 20));
}

uint8_t kiln_f32_to_e4m3(float f) {
    uint32_t u = kiln_f32_bits(f), a = u & 0x7fffffffu;
    uint8_t s = (uint8_t)((u >> 24) & 0x80);
    if (a > 0x7f800000u) return s | 0x7f;
    if (a >= 0x43e00000u) return s | 0x7e; /* >= 448 (inf included): saturate */
    if (a < 0x3c800000u) return s | (uint8_t)rintf(fabsf(f) * 0x1p9f); /* below 2^-6: subnormal */
    uint32_t r = a + 0x7ffffu + ((a >> 20) & 1);
    uint32_t code = (r >> 20) - (120u << 3);
    return s | (uint8_t)(code > 0x7e ? 0x7e : code);
}

float kiln_e5m2_to_f32(uint8_t b) { return kiln_f16_to_f32((uint16_t)(b << 8)); }

uint8_t kiln_f32_to_e5m2(float f) {
    uint32_t u = kiln_f32_bits(f), a = u & 0x7fffffffu;
    uint8_t s = (uint8_t)((u >> 24) & 0x80);
    if (a > 0x7f800000u) return s | 0x7f;
    if (a == 0x7f800000u) return s | 0x7c;
    if (a >= 0x47600000u) return s | 0x7b; /* >= 57344: saturate */
    if (a < 0x38800000u) return s | (uint8_t)rintf(fabsf(f) * 0x1p16f);
    uint32_t r = a + 0xfffffu + ((a >> 21) & 1);
    uint32_t code = (r >> 21) - (112u << 2);
    return s | (uint8_t)(code > 0x7b ? 0x7b : code);
}

static void bf16_to_f32_c(float *d, const uint16_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_bf16_to_f32(s[i]);
}
static void f32_to_bf16_c(uint16_t *d, const float *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_bf16(s[i]);
}
static void f16_to_f32_c(float *d, const uint16_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_f16_to_f32(s[i]);
}
static void f32_to_f16_c(uint16_t *d, const float *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_f16(s[i]);
}
static void e4m3_to_f32_c(float *d, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_e4m3_to_f32(s[i]);
}
static void e5m2_to_f32_c(float *d, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_e5m2_to_f32(s[i]);
}

void kiln_f32_to_e4m3_n(uint8_t *d, const float *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_e4m3(s[i]);
}
void kiln_f32_to_e5m2_n(uint8_t *d, const float *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_e5m2(s[i]);
}

#if KILN_X86
/* ---- AVX2 + F16C -------------------------------------------------------------------------------------- */
#define AVX2 __attribute__((target("avx2,f16c,fma")))

AVX2 static void bf16_to_f32_avx2(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i + 8)));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(a, 16));
        _mm256_storeu_si256((__m256i *)(d + i + 8), _mm256_slli_epi32(b, 16));
    }
    bf16_to_f32_c(d + i, s + i, n - i);
}

/* 8 floats -> 8 bf16 in the low 16 bits of each 32-bit lane. */
AVX2 static inline __m256i round_bf16_avx2(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, q, nan);
}

AVX2 static void f32_to_bf16_avx2(uint16_t *d, const float *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = round_bf16_avx2(_mm256_loadu_ps(s + i)), b = round_bf16_avx2(_mm256_loadu_ps(s + i + 8));
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8); /* packus works per 128-bit lane */
        _mm256_storeu_si256((__m256i *)(d + i), p);
    }
    f32_to_bf16_c(d + i, s + i, n - i);
}

AVX2 static void f16_to_f32_avx2(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    f16_to_f32_c(d + i, s + i, n - i);
}

AVX2 static void f32_to_f16_avx2(uint16_t *d, const float *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    f32_to_f16_c(d + i, s + i, n - i);
}

AVX2 static void e4m3_to_f32_avx2(float *d, const uint8_t *s, size_t n) {
    size_t i = 0;
    const __m256i k7f = _mm256_set1_epi32(0x7f), k80 = _mm256_set1_epi32(0x80);
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + i)));
        __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v, k80), 24), em = _mm256_and_si256(v, k7f);
        __m256i normal = _mm256_slli_epi32(_mm256_add_epi32(em, _mm256_set1_epi32(120 << 3)), 20);
        __m256i sub = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(0x1p-9f)));
        __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em);
        __m256i is_nan = _mm256_cmpeq_epi32(em, k7f);
        __m256i r = _mm256_blendv_epi8(normal, sub, is_sub);
        r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000), is_nan);
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_or_si256(r, sign));
    }
    e4m3_to_f32_c(d + i, s + i, n - i);
}

/* An e5m2 byte is the top byte of an f16. */
AVX2 static void e5m2_to_f32_avx2(float *d, const uint8_t *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(s + i))), 8);
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
    }
    e5m2_to_f32_c(d + i, s + i, n - i);
}

/* ---- AVX-512 F/BW ------------------------------------------------------------------------------------- */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c,fma")))

AVX512 static void bf16_to_f32_avx512(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
        _mm512_storeu_si512(d + i, _mm512_slli_epi32(a, 16));
        _mm512_storeu_si512(d + i + 16, _mm512_slli_epi32(b, 16));
    }
    bf16_to_f32_avx2(d + i, s + i, n - i);
}

/* Non-temporal variant for buffers far bigger than the caches: streaming stores skip the read-for-ownership
 * of the destination lines, which is a third of the memory traffic of a conversion. */
AVX512 static void bf16_to_f32_avx512_nt(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    while (i < n && ((uintptr_t)(d + i) & 63)) {
        d[i] = kiln_bf16_to_f32(s[i]);
        i++;
    }
    for (; i + 32 <= n; i += 32) {
        __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
        _mm512_stream_si512((void *)(d + i), _mm512_slli_epi32(a, 16));
        _mm512_stream_si512((void *)(d + i + 16), _mm512_slli_epi32(b, 16));
    }
    _mm_sfence();
    bf16_to_f32_c(d + i, s + i, n - i);
}

AVX2 static void bf16_to_f32_avx2_nt(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    while (i < n && ((uintptr_t)(d + i) & 31)) {
        d[i] = kiln_bf16_to_f32(s[i]);
        i++;
    }
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i + 8)));
        _mm256_stream_si256((__m256i *)(d + i), _mm256_slli_epi32(a, 16));
        _mm256_stream_si256((__m256i *)(d + i + 8), _mm256_slli_epi32(b, 16));
    }
    _mm_sfence();
    bf16_to_f32_c(d + i, s + i, n - i);
}

AVX512 static void f32_to_bf16_avx512(uint16_t *d, const float *s, size_t n) {
    size_t i = 0;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(s + i);
        __m512i u = _mm512_castps_si512(x);
        __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
        __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    f32_to_bf16_c(d + i, s + i, n - i);
}

AVX512 static void f16_to_f32_avx512(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    f16_to_f32_avx2(d + i, s + i, n - i);
}

AVX512 static void f32_to_f16_avx512(uint16_t *d, const float *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    f32_to_f16_avx2(d + i, s + i, n - i);
}

AVX512 static void e4m3_to_f32_avx512(float *d, const uint8_t *s, size_t n) {
    size_t i = 0;
    const __m512i k7f = _mm512_set1_epi32(0x7f), k80 = _mm512_set1_epi32(0x80);
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        __m512i sign = _mm512_slli_epi32(_mm512_and_si512(v, k80), 24), em = _mm512_and_si512(v, k7f);
        __m512i r = _mm512_slli_epi32(_mm512_add_epi32(em, _mm512_set1_epi32(120 << 3)), 20);
        __m512i sub = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(em), _mm512_set1_ps(0x1p-9f)));
        r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epi32_mask(em, _mm512_set1_epi32(8)), sub);
        r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(em, k7f), _mm512_set1_epi32(0x7fc00000));
        _mm512_storeu_si512(d + i, _mm512_or_si512(r, sign));
    }
    e4m3_to_f32_avx2(d + i, s + i, n - i);
}

AVX512 static void e5m2_to_f32_avx512(float *d, const uint8_t *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(s + i))), 8);
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(h));
    }
    e5m2_to_f32_avx2(d + i, s + i, n - i);
}
#endif

/* ---- dispatch ----------------------------------------------------------------------------------------- */

typedef struct impl {
    void (*bf16_to_f32)(float *, const uint16_t *, size_t);
    void (*f32_to_bf16)(uint16_t *, const float *, size_t);
    void (*f16_to_f32)(float *, const uint16_t *, size_t);
    void (*f32_to_f16)(uint16_t *, const float *, size_t);
    void (*e4m3_to_f32)(float *, const uint8_t *, size_t);
    void (*e5m2_to_f32)(float *, const uint8_t *, size_t);
    void (*bf16_to_f32_nt)(float *, const uint16_t *, size_t);
} impl;

static const impl impls[KILN_ISA_COUNT] = {
    [KILN_ISA_SCALAR] = {bf16_to_f32_c, f32_to_bf16_c, f16_to_f32_c, f32_to_f16_c, e4m3_to_f32_c, e5m2_to_f32_c,
                         bf16_to_f32_c},
#if KILN_X86
    [KILN_ISA_AVX2] = {bf16_to_f32_avx2, f32_to_bf16_avx2, f16_to_f32_avx2, f32_to_f16_avx2, e4m3_to_f32_avx2,
                       e5m2_to_f32_avx2, bf16_to_f32_avx2_nt},
    [KILN_ISA_AVX512] = {bf16_to_f32_avx512, f32_to_bf16_avx512, f16_to_f32_avx512, f32_to_f16_avx512,
                         e4m3_to_f32_avx512, e5m2_to_f32_avx512, bf16_to_f32_avx512_nt},
#endif
};

static atomic_int current_isa = -1;

/* F16C and FMA come from CPUID leaf 1 directly: clang 14's __builtin_cpu_supports does not know "f16c". */
static bool has_f16c_fma(void) {
#if KILN_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c & (1u << 29)) && (c & (1u << 12));
#else
    return false;
#endif
}

kiln_isa kiln_isa_detect(void) {
#if KILN_X86
    __builtin_cpu_init();
    bool f16c_fma = has_f16c_fma();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && f16c_fma)
        return KILN_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && f16c_fma) return KILN_ISA_AVX2;
#endif
    return KILN_ISA_SCALAR;
}

static const impl *get_impl(void) {
    int isa = atomic_load_explicit(&current_isa, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)kiln_isa_detect();
        atomic_store(&current_isa, isa);
    }
    return &impls[isa];
}

kiln_isa kiln_convert_isa(void) {
    get_impl();
    return (kiln_isa)atomic_load(&current_isa);
}

bool kiln_convert_set_isa(kiln_isa isa) {
    if ((unsigned)isa >= KILN_ISA_COUNT || isa > kiln_isa_detect() || !impls[isa].bf16_to_f32) return false;
    atomic_store(&current_isa, (int)isa);
    return true;
}

const char *kiln_isa_name(kiln_isa isa) {
    static const char *const names[KILN_ISA_COUNT] = {"scalar", "avx2", "avx512"};
    return (unsigned)isa < KILN_ISA_COUNT ? names[isa] : "?";
}

void kiln_bf16_to_f32_n(float *d, const uint16_t *s, size_t n) { get_impl()->bf16_to_f32(d, s, n); }
void kiln_f32_to_bf16_n(uint16_t *d, const float *s, size_t n) { get_impl()->f32_to_bf16(d, s, n); }
void kiln_f16_to_f32_n(float *d, const uint16_t *s, size_t n) { get_impl()->f16_to_f32(d, s, n); }
void kiln_f32_to_f16_n(uint16_t *d, const float *s, size_t n) { get_impl()->f32_to_f16(d, s, n); }
void kiln_e4m3_to_f32_n(float *d, const uint8_t *s, size_t n) { get_impl()->e4m3_to_f32(d, s, n); }
void kiln_e5m2_to_f32_n(float *d, const uint8_t *s, size_t n) { get_impl()->e5m2_to_f32(d, s, n); }
void kiln_bf16_to_f32_stream_n(float *d, const uint16_t *s, size_t n) { get_impl()->bf16_to_f32_nt(d, s, n); }

/* ---- kiln_convert: pick the loop, split over the pool ------------------------------------------------- */

typedef void (*conv_fn)(void *dst, const void *src, size_t n);

typedef struct conv_job {
    conv_fn fn;
    char *dst;
    const char *src;
    size_t n, chunk, dsz, ssz;
} conv_job;

static void conv_task(void *ctx, size_t i, int thread) {
    (void)thread;
    const conv_job *j = ctx;
    size_t start = i * j->chunk, count = j->n - start < j->chunk ? j->n - start : j->chunk;
    j->fn(j->dst + start * j->dsz, j->src + start * j->ssz, count);
}

static void copy_fn(void *d, const void *s, size_t n) { memcpy(d, s, n); }

#define WRAP(name, fn, DT, ST)                                                                                \
    static void name(void *d, const void *s, size_t n) { fn((DT *)d, (const ST *)s, n); }
WRAP(w_bf16_f32, kiln_bf16_to_f32_n, float, uint16_t)
WRAP(w_bf16_f32_nt, kiln_bf16_to_f32_stream_n, float, uint16_t)
WRAP(w_f32_bf16, kiln_f32_to_bf16_n, uint16_t, float)
WRAP(w_f16_f32, kiln_f16_to_f32_n, float, uint16_t)
WRAP(w_f32_f16, kiln_f32_to_f16_n, uint16_t, float)
WRAP(w_e4m3_f32, kiln_e4m3_to_f32_n, float, uint8_t)
WRAP(w_f32_e4m3, kiln_f32_to_e4m3_n, uint8_t, float)
WRAP(w_e5m2_f32, kiln_e5m2_to_f32_n, float, uint8_t)
WRAP(w_f32_e5m2, kiln_f32_to_e5m2_n, uint8_t, float)

kiln_status kiln_convert(void *dst, kiln_dtype dst_dt, const void *src, kiln_dtype src_dt, size_t n,
                         kiln_pool *pool, kiln_err *err) {
    conv_job j = {.dst = dst, .src = src, .n = n, .dsz = kiln_dtype_size(dst_dt), .ssz = kiln_dtype_size(src_dt)};
    if (dst_dt == src_dt && j.dsz) {
        j.fn = copy_fn;
        j.ssz = j.dsz = 1; /* copy bytes */
        if (!kiln_mul_size(n, kiln_dtype_size(src_dt), &j.n))
            return KILN_FAIL(err, KILN_E_INVALID, "convert: %zu elements overflow", n);
    } else if (dst_dt == KILN_DT_F32) {
        switch (src_dt) {
        case KILN_DT_BF16: j.fn = w_bf16_f32; break;
        case KILN_DT_F16: j.fn = w_f16_f32; break;
        case KILN_DT_F8_E4M3: j.fn = w_e4m3_f32; break;
        case KILN_DT_F8_E5M2: j.fn = w_e5m2_f32; break;
        default: break;
        }
    } else if (src_dt == KILN_DT_F32) {
        switch (dst_dt) {
        case KILN_DT_BF16: j.fn = w_f32_bf16; break;
        case KILN_DT_F16: j.fn = w_f32_f16; break;
        case KILN_DT_F8_E4M3: j.fn = w_f32_e4m3; break;
        case KILN_DT_F8_E5M2: j.fn = w_f32_e5m2; break;
        default: break;
        }
    }
    if (!j.fn)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "convert: %s to %s is not supported", kiln_dtype_name(src_dt),
                         kiln_dtype_name(dst_dt));
    if (j.n == 0) return KILN_OK;
    /* Outputs bigger than the last-level cache will not be in cache when read anyway: stream them. */
    if (j.fn == w_bf16_f32 && j.n * 4 >= KILN_CONVERT_STREAM_BYTES) j.fn = w_bf16_f32_nt;
    if (dst == src && dst_dt != src_dt)
        return KILN_FAIL(err, KILN_E_INVALID, "convert: %s to %s cannot run in place", kiln_dtype_name(src_dt),
                         kiln_dtype_name(dst_dt));
    /* Chunks of 256 Ki elements (>= 256 KiB each side): big enough to amortise the hand-off, small enough
     * to balance across threads. Below 1 MiB in total, threads cost more than they give. */
    j.chunk = (size_t)1 << 18;
    size_t tasks = (j.n + j.chunk - 1) / j.chunk;
    if (!pool || kiln_pool_size(pool) < 2 || j.n * (j.dsz + j.ssz) < ((size_t)1 << 20)) {
        j.fn(j.dst, j.src, j.n);
        return KILN_OK;
    }
    kiln_pool_run(pool, tasks, conv_task, &j);
    return KILN_OK;
}
