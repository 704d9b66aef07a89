/* test_tensor_convert.c - dtype conversions: hand-checked rounding/saturation cases, exhaustive round trips
 * over every bf16/f16/fp8 bit pattern, every CPU implementation (scalar, AVX2, AVX-512: whichever this CPU
 * has) bit-identical to the scalar reference, and the threaded kiln_convert equal to the serial one. */
#include <math.h>
#include <stdint.h>

#include "base/alloc.h"
#include "tensor/convert.h"
#include "tensor/tensor.h"
#include "test.h"

static float fb(uint32_t u) { return kiln_bits_f32(u); }

static void test_bf16_rounding(void) {
    CHECK_EQ_INT(kiln_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(kiln_f32_to_bf16(fb(0x3f808000)), 0x3f80); /* tie, even stays */
    CHECK_EQ_INT(kiln_f32_to_bf16(fb(0x3f818000)), 0x3f82); /* tie, odd rounds up */
    CHECK_EQ_INT(kiln_f32_to_bf16(fb(0x3f808001)), 0x3f81); /* above tie */
    CHECK_EQ_INT(kiln_f32_to_bf16(fb(0x00018000)), 0x0002); /* subnormal kept, tie to even */
    CHECK_EQ_INT(kiln_f32_to_bf16(fb(0x7f7fffff)), 0x7f80); /* max float rounds to inf */
    CHECK_EQ_INT(kiln_f32_to_bf16(-INFINITY), 0xff80);
    CHECK_EQ_INT(kiln_f32_to_bf16(-0.0f), 0x8000);
    uint16_t n = kiln_f32_to_bf16(fb(0x7f800001)); /* signalling NaN whose payload is all in the low bits */
    CHECK(isnan(kiln_bf16_to_f32(n)));
    CHECK(isnan(kiln_bf16_to_f32(kiln_f32_to_bf16(fb(0xffffffff)))));
    CHECK_EQ_INT(kiln_bf16_to_f32(0xc040) == -3.0f, 1);
}

static void test_f16_rounding(void) {
    CHECK_EQ_INT(kiln_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_INT(kiln_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(kiln_f32_to_f16(65519.0f), 0x7bff);
    CHECK_EQ_INT(kiln_f32_to_f16(65520.0f), 0x7c00); /* no saturation for f16: overflow is inf */
    CHECK_EQ_INT(kiln_f32_to_f16(0x1p-24f), 0x0001);
    CHECK_EQ_INT(kiln_f32_to_f16(0x1p-25f), 0x0000);      /* tie to even (0) */
    CHECK_EQ_INT(kiln_f32_to_f16(0x1.8p-24f), 0x0002);    /* 1.5 ulp: tie to even (2) */
    CHECK_EQ_INT(kiln_f32_to_f16(0x1.ffcp-15f), 0x0400);  /* rounds up into the smallest normal */
    CHECK_EQ_INT(kiln_f32_to_f16(-2.0f), 0xc000);
    CHECK(isnan(kiln_f16_to_f32(kiln_f32_to_f16(NAN))));
    CHECK(kiln_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(kiln_f16_to_f32(0x7c00) == INFINITY);
}

static void test_fp8_rounding_and_saturation(void) {
    CHECK_EQ_INT(kiln_f32_to_e4m3(1.0f), 0x38);
    CHECK_EQ_INT(kiln_f32_to_e4m3(448.0f), 0x7e);
    CHECK_EQ_INT(kiln_f32_to_e4m3(464.0f), 0x7e); /* tie between 448 and (absent) 480: even = 448 */
    CHECK_EQ_INT(kiln_f32_to_e4m3(500.0f), 0x7e);
    CHECK_EQ_INT(kiln_f32_to_e4m3(1e30f), 0x7e);
    CHECK_EQ_INT(kiln_f32_to_e4m3(INFINITY), 0x7e);
    CHECK_EQ_INT(kiln_f32_to_e4m3(-INFINITY), 0xfe);
    CHECK_EQ_INT(kiln_f32_to_e4m3(NAN) & 0x7f, 0x7f);
    CHECK_EQ_INT(kiln_f32_to_e4m3(0x1p-9f), 0x01);
    CHECK_EQ_INT(kiln_f32_to_e4m3(0x1p-10f), 0x00);  /* tie to even */
    CHECK_EQ_INT(kiln_f32_to_e4m3(0x1.8p-9f), 0x02); /* tie to even */
    CHECK_EQ_INT(kiln_f32_to_e4m3(-0.3125f), 0xaa);  /* -1.25 * 2^-2: exp 5, mant 2 */
    CHECK(kiln_e4m3_to_f32(0x7e) == 448.0f);
    CHECK(isnan(kiln_e4m3_to_f32(0xff)));
    CHECK(kiln_e4m3_to_f32(0x08) == 0x1p-6f);
    CHECK_EQ_INT(kiln_f32_to_e5m2(1.0f), 0x3c);
    CHECK_EQ_INT(kiln_f32_to_e5m2(57344.0f), 0x7b);
    CHECK_EQ_INT(kiln_f32_to_e5m2(61440.0f), 0x7b); /* would round to inf: saturates */
    CHECK_EQ_INT(kiln_f32_to_e5m2(-1e9f), 0xfb);
    CHECK_EQ_INT(kiln_f32_to_e5m2(INFINITY), 0x7c); /* e5m2 has an infinity: kept */
    CHECK_EQ_INT(kiln_f32_to_e5m2(0x1p-16f), 0x01);
    CHECK(isnan(kiln_e5m2_to_f32(kiln_f32_to_e5m2(NAN))));
    CHECK(kiln_e5m2_to_f32(0x7b) == 57344.0f);
}

/* Every 16-bit pattern survives 16 -> 32 -> 16 (NaN stays NaN); every fp8 pattern likewise. */
static void test_exhaustive_round_trips(void) {
    int bad_bf = 0, bad_h = 0, bad_e4 = 0, bad_e5 = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kiln_bf16_to_f32((uint16_t)h);
        uint16_t back = kiln_f32_to_bf16(f);
        bad_bf += isnan(f) ? !isnan(kiln_bf16_to_f32(back)) : back != h;
        float g = kiln_f16_to_f32((uint16_t)h);
        uint16_t back16 = kiln_f32_to_f16(g);
        bad_h += isnan(g) ? !isnan(kiln_f16_to_f32(back16)) : back16 != h;
    }
    for (uint32_t b = 0; b < 256; b++) {
        float f = kiln_e4m3_to_f32((uint8_t)b);
        bad_e4 += isnan(f) ? (kiln_f32_to_e4m3(f) & 0x7f) != 0x7f : kiln_f32_to_e4m3(f) != b;
        float g = kiln_e5m2_to_f32((uint8_t)b);
        bad_e5 += isnan(g) ? !isnan(kiln_e5m2_to_f32(kiln_f32_to_e5m2(g))) : kiln_f32_to_e5m2(g) != b;
    }
    CHECK_EQ_INT(bad_bf, 0);
    CHECK_EQ_INT(bad_h, 0);
    CHECK_EQ_INT(bad_e4, 0);
    CHECK_EQ_INT(bad_e5, 0);
    /* decoded values are ordered: codes 0..0x7e of e4m3 increase strictly */
    int unordered = 0;
    for (int b = 1; b < 0x7f; b++) unordered += !(kiln_e4m3_to_f32((uint8_t)b) > kiln_e4m3_to_f32((uint8_t)(b - 1)));
    CHECK_EQ_INT(unordered, 0);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static bool same_f32(float a, float b) { return (isnan(a) && isnan(b)) || kiln_f32_bits(a) == kiln_f32_bits(b); }

/* Every implementation this CPU supports gives the scalar reference's bits, at odd lengths (tails). */
static void test_every_isa_matches_scalar(void) {
    enum { N = 4099 };
    float *f = kiln_malloc(N * sizeof *f), *out = kiln_malloc(N * sizeof *out);
    uint16_t *h = kiln_malloc(N * 2), *h2 = kiln_malloc(N * 2);
    uint8_t *b = kiln_malloc(N), *b2 = kiln_malloc(N);
    const uint32_t specials[] = {0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff,
                                 0x00000001, 0x00018000, 0x3f808000, 0x3f818000, 0x477ff000, 0x47800000,
                                 0x43e00000, 0x43e80000, 0x33000000, 0x38800000, 0x7f7fffff};
    for (int i = 0; i < N; i++) {
        uint32_t u = i < (int)(sizeof specials / 4) ? specials[i] : rnd() ^ (rnd() << 16);
        if (i % 3 == 0 && i >= 32) u = (u & 0x83ffffffu) | 0x3c000000u; /* many values in the fp8/f16 range */
        f[i] = fb(u);
    }
    kiln_isa best = kiln_isa_detect();
    printf("  this CPU: %s\n", kiln_isa_name(best));
    for (int isa = 0; isa <= (int)best; isa++) {
        CHECK(kiln_convert_set_isa((kiln_isa)isa));
        CHECK_EQ_INT(kiln_convert_isa(), isa);
        for (int len = N; len >= N - 40; len -= 13) {
            int bad = 0;
            kiln_f32_to_bf16_n(h, f, (size_t)len);
            for (int i = 0; i < len; i++) {
                uint16_t want = kiln_f32_to_bf16(f[i]);
                bad += isnan(f[i]) ? !isnan(kiln_bf16_to_f32(h[i])) : h[i] != want;
            }
            kiln_bf16_to_f32_n(out, h, (size_t)len);
            for (int i = 0; i < len; i++) bad += !same_f32(out[i], kiln_bf16_to_f32(h[i]));
            kiln_bf16_to_f32_stream_n(out + 1, h, (size_t)len - 1); /* misaligned start: head loop */
            for (int i = 0; i < len - 1; i++) bad += !same_f32(out[i + 1], kiln_bf16_to_f32(h[i]));
            kiln_f32_to_f16_n(h2, f, (size_t)len);
            for (int i = 0; i < len; i++) {
                uint16_t want = kiln_f32_to_f16(f[i]);
                bad += isnan(f[i]) ? !isnan(kiln_f16_to_f32(h2[i])) : h2[i] != want;
            }
            for (int i = 0; i < len; i++) h2[i] = (uint16_t)rnd();
            kiln_f16_to_f32_n(out, h2, (size_t)len);
            for (int i = 0; i < len; i++) bad += !same_f32(out[i], kiln_f16_to_f32(h2[i]));
            kiln_f32_to_e4m3_n(b, f, (size_t)len);
            kiln_f32_to_e5m2_n(b2, f, (size_t)len);
            for (int i = 0; i < len; i++) bad += b[i] != kiln_f32_to_e4m3(f[i]) || b2[i] != kiln_f32_to_e5m2(f[i]);
            for (int i = 0; i < len; i++) b[i] = (uint8_t)rnd();
            kiln_e4m3_to_f32_n(out, b, (size_t)len);
            for (int i = 0; i < len; i++) bad += !same_f32(out[i], kiln_e4m3_to_f32(b[i]));
            kiln_e5m2_to_f32_n(out, b, (size_t)len);
            for (int i = 0; i < len; i++) bad += !same_f32(out[i], kiln_e5m2_to_f32(b[i]));
            CHECK_MSG(bad == 0, "isa %s len %d: %d mismatches", kiln_isa_name((kiln_isa)isa), len, bad);
        }
    }
    CHECK(!kiln_convert_set_isa(KILN_ISA_COUNT));
    kiln_convert_set_isa(best);
    kiln_free(f);
    kiln_free(out);
    kiln_free(h);
    kiln_free(h2);
    kiln_free(b);
    kiln_free(b2);
}

static void test_convert_threaded_and_errors(void) {
    enum { N = 3 * 1000 * 1000 + 7 };
    kiln_err err = {0};
    kiln_pool *pool;
    CHECK_EQ_INT(kiln_pool_create(3, &pool, &err), KILN_OK);
    uint16_t *src = kiln_malloc(N * 2);
    float *a = kiln_malloc(N * 4), *b = kiln_malloc(N * 4);
    for (size_t i = 0; i < N; i++) src[i] = (uint16_t)rnd();
    CHECK_EQ_INT(kiln_convert(a, KILN_DT_F32, src, KILN_DT_BF16, N, pool, &err), KILN_OK);
    kiln_bf16_to_f32_n(b, src, N);
    CHECK(memcmp(a, b, (size_t)N * 4) == 0);
    uint16_t *back = kiln_malloc(N * 2);
    CHECK_EQ_INT(kiln_convert(back, KILN_DT_BF16, a, KILN_DT_F32, N, pool, &err), KILN_OK);
    int bad = 0;
    for (size_t i = 0; i < N; i++) bad += isnan(a[i]) ? !isnan(kiln_bf16_to_f32(back[i])) : back[i] != src[i];
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(kiln_convert(back, KILN_DT_BF16, src, KILN_DT_BF16, N, pool, &err), KILN_OK); /* copy */
    CHECK(memcmp(back, src, (size_t)N * 2) == 0);
    CHECK_EQ_INT(kiln_convert(back, KILN_DT_BF16, src, KILN_DT_F16, 4, NULL, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "f16 to bf16 is not supported");
    CHECK_EQ_INT(kiln_convert(a, KILN_DT_F32, a, KILN_DT_BF16, 4, NULL, &err), KILN_E_INVALID);
    CHECK_EQ_INT(kiln_convert(a, KILN_DT_I64, a, KILN_DT_F32, 4, NULL, &err), KILN_E_UNSUPPORTED);
    kiln_free(src);
    kiln_free(a);
    kiln_free(b);
    kiln_free(back);
    kiln_pool_destroy(pool);
}

static void test_tensor_basics(void) {
    CHECK_EQ_INT(kiln_dtype_size(KILN_DT_BF16), 2);
    CHECK_EQ_INT(kiln_dtype_size(KILN_DT_F8_E4M3), 1);
    CHECK_EQ_INT(kiln_dtype_size(KILN_DT_I64), 8);
    CHECK_EQ_INT(kiln_dtype_size(KILN_DT_COUNT), 0);
    kiln_dtype dt;
    CHECK(kiln_dtype_from_safetensors("F8_E4M3", &dt) && dt == KILN_DT_F8_E4M3);
    CHECK(!kiln_dtype_from_safetensors("f32", &dt));
    CHECK_EQ_STR(kiln_dtype_name(KILN_DT_BF16), "bf16");
    CHECK_EQ_STR(kiln_dtype_safetensors_name(KILN_DT_BOOL), "BOOL");
    CHECK(kiln_dtype_is_float(KILN_DT_F16) && !kiln_dtype_is_float(KILN_DT_I32));
    float data[24];
    kiln_tensor t = kiln_tensor_make(data, KILN_DT_F32, 3, (int64_t[]){2, 3, 4});
    CHECK_EQ_INT(kiln_tensor_numel(&t), 24);
    CHECK_EQ_INT(kiln_tensor_nbytes(&t), 96);
    CHECK(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1);
    CHECK(kiln_tensor_is_contiguous(&t));
    char buf[64];
    CHECK_EQ_STR(kiln_shape_str(&t, buf, sizeof buf), "[2, 3, 4]");
    kiln_tensor r = kiln_tensor_rows(&t, 1, 1);
    CHECK(r.data == data + 12 && r.shape[0] == 1);
    kiln_tensor v;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_tensor_reshape(&t, 2, (int64_t[]){6, 4}, &v, &err), KILN_OK);
    CHECK(v.shape[0] == 6 && v.stride[0] == 4 && v.data == data);
    CHECK_EQ_INT(kiln_tensor_reshape(&t, 2, (int64_t[]){5, 5}, &v, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "[2, 3, 4] (24 elements) to 25");
    kiln_tensor s = t;
    s.stride[2] = 2;
    CHECK(!kiln_tensor_is_contiguous(&s));
    CHECK_EQ_INT(kiln_tensor_reshape(&s, 1, (int64_t[]){24}, &v, &err), KILN_E_INVALID);
    CHECK(kiln_tensor_same_shape(&t, &t) && !kiln_tensor_same_shape(&t, &v));
    kiln_tensor sc = kiln_tensor_make(data, KILN_DT_F32, 0, NULL);
    CHECK_EQ_INT(kiln_tensor_numel(&sc), 1);
    CHECK_EQ_STR(kiln_shape_str(&sc, buf, sizeof buf), "[]");
}

int main(void) {
    RUN(test_bf16_rounding);
    RUN(test_f16_rounding);
    RUN(test_fp8_rounding_and_saturation);
    RUN(test_exhaustive_round_trips);
    RUN(test_every_isa_matches_scalar);
    RUN(test_convert_threaded_and_errors);
    RUN(test_tensor_basics);
    return test_summary();
}
