/* test_tensor_quant.c - GGML dequantisation and quantisation (tensor/quant.h).
 *
 * The expected values come from the gguf PyPI package (tools/reference/make_gguf.py wrote them into
 * tests/data/gguf/quant/): for each type kiln dequantises, random blocks and the package's dequantize of them.
 * The scalar reference must equal them bit for bit, and every vector tier this CPU has must equal the
 * reference bit for bit (checked at several lengths, so that loop tails and block offsets are exercised).
 * Q8_0 quantisation must equal the package's quantize byte for byte; Q4_K (which the package cannot quantise)
 * must round-trip within its step size and choose its factors as documented. */
#include <math.h>
#include <stdint.h>

#include "base/alloc.h"
#include "tensor/quant.h"
#include "test.h"

static void *read_all(const char *rel, size_t *len) {
    FILE *f = fopen(test_src_path(rel), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = kiln_malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        kiln_free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static const uint32_t all_types[] = {KILN_QT_F32,  KILN_QT_F16,  KILN_QT_BF16, KILN_QT_Q8_0,
                                     KILN_QT_Q4_0, KILN_QT_Q5_0, KILN_QT_Q2_K, KILN_QT_Q3_K,
                                     KILN_QT_Q4_K, KILN_QT_Q5_K, KILN_QT_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

typedef struct fixture {
    const kiln_qtype_info *q;
    uint8_t *blocks;
    float *expect;
    size_t n; /* values */
} fixture;

static bool load_fixture(uint32_t id, fixture *fx) {
    char path[128];
    size_t nb = 0, ne = 0;
    fx->q = kiln_qtype_get(id);
    snprintf(path, sizeof path, "tests/data/gguf/quant/%s.blocks", fx->q->name);
    fx->blocks = read_all(path, &nb);
    snprintf(path, sizeof path, "tests/data/gguf/quant/%s.f32", fx->q->name);
    fx->expect = read_all(path, &ne);
    fx->n = ne / 4;
    bool ok = fx->blocks && fx->expect && nb == kiln_qtype_nbytes(fx->q, fx->n) && fx->n > 0;
    CHECK_MSG(ok, "fixture for %s missing or inconsistent (%zu bytes of blocks, %zu of values)", fx->q->name, nb, ne);
    return ok;
}

static void free_fixture(fixture *fx) {
    kiln_free(fx->blocks);
    kiln_free(fx->expect);
}

/* Bitwise equality, reporting the first difference. */
static bool same_bits(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            CHECK_MSG(0, "%s: value %zu is %.9g (0x%08x), expected %.9g (0x%08x)", what, i, a[i],
                      kiln_f32_bits(a[i]), b[i], kiln_f32_bits(b[i]));
            return false;
        }
    return true;
}

static void test_table(void) {
    const kiln_qtype_info *q = kiln_qtype_get(KILN_QT_Q4_K);
    CHECK(q && q->block == 256 && q->bytes == 144 && q->dequant);
    CHECK_EQ_STR(kiln_qtype_get(KILN_QT_Q6_K)->name, "Q6_K");
    CHECK(kiln_qtype_get(KILN_QT_Q3_K)->bytes == 110 && kiln_qtype_get(KILN_QT_Q2_K)->bytes == 84);
    CHECK(kiln_qtype_get(KILN_QT_Q5_0)->bytes == 22 && kiln_qtype_get(KILN_QT_Q5_K)->bytes == 176);
    CHECK(kiln_qtype_by_name("q8_0") == kiln_qtype_get(KILN_QT_Q8_0));
    CHECK(kiln_qtype_get(4) == NULL && kiln_qtype_get(99) == NULL); /* retired and never-defined ids */
    const kiln_qtype_info *iq = kiln_qtype_get(16);
    CHECK(iq && !iq->dequant && strcmp(iq->name, "IQ2_XXS") == 0);
    for (size_t i = 0; i < N_TYPES; i++) CHECK(kiln_qtype_get(all_types[i])->dequant);
}

static void test_errors(void) {
    float out[256];
    uint8_t in[256] = {0};
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_dequant(out, KILN_QT_Q4_K, in, 100, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "not whole blocks of 256");
    CHECK_EQ_INT(kiln_dequant(out, 16, in, 256, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "cannot dequantise GGML type IQ2_XXS");
    CHECK_EQ_INT(kiln_dequant(out, 99, in, 32, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "id 99 is not a known type");
    CHECK_EQ_INT(kiln_quantize(in, KILN_QT_Q6_K, out, 256, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "cannot quantise to GGML type Q6_K");
}

/* The reference against the gguf package, bit for bit. */
static void test_reference_matches_gguf(void) {
    for (size_t t = 0; t < N_TYPES; t++) {
        fixture fx;
        if (load_fixture(all_types[t], &fx)) {
            float *got = kiln_malloc(fx.n * sizeof *got);
            kiln_err err = {0};
            CHECK_EQ_INT(kiln_dequant_ref(got, fx.q->id, fx.blocks, fx.n, &err), KILN_OK);
            char what[64];
            snprintf(what, sizeof what, "%s reference vs gguf", fx.q->name);
            same_bits(got, fx.expect, fx.n, what);
            kiln_free(got);
        }
        free_fixture(&fx);
    }
}

/* Every tier this machine runs against the reference, on prefixes of the fixture (1 block, 2, ..., all), with
 * the source at an odd address (the kernels must not assume alignment). */
static void test_tiers_match_reference(void) {
    kiln_isa saved = kiln_quant_isa();
    int tiers_run = 0;
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        if (!kiln_quant_set_isa((kiln_isa)isa)) {
            printf("  (tier %s: not on this CPU)\n", kiln_isa_name((kiln_isa)isa));
            continue;
        }
        tiers_run++;
        for (size_t t = 0; t < N_TYPES; t++) {
            fixture fx;
            if (!load_fixture(all_types[t], &fx)) {
                free_fixture(&fx);
                continue;
            }
            if (isa != KILN_ISA_SCALAR)
                CHECK_MSG(kiln_quant_isa_has((kiln_isa)isa, fx.q->id), "tier %s has no %s kernel",
                          kiln_isa_name((kiln_isa)isa), fx.q->name);
            size_t bytes = kiln_qtype_nbytes(fx.q, fx.n);
            uint8_t *odd = kiln_malloc(bytes + 1);
            memcpy(odd + 1, fx.blocks, bytes);
            float *want = kiln_malloc(fx.n * 4), *got = kiln_malloc((fx.n + 1) * 4);
            kiln_dequant_ref(want, fx.q->id, fx.blocks, fx.n, NULL);
            size_t step = fx.q->block == 1 ? 1 : fx.q->block;
            for (size_t n = step; n <= fx.n; n += (fx.q->block == 1 ? 7 : step)) {
                got[n] = -12345.0f; /* sentinel: nothing written past n */
                kiln_err err = {0};
                CHECK_EQ_INT(kiln_dequant(got, fx.q->id, odd + 1, n, &err), KILN_OK);
                char what[96];
                snprintf(what, sizeof what, "%s on %s, %zu values", fx.q->name, kiln_isa_name((kiln_isa)isa), n);
                if (!same_bits(got, want, n, what)) break;
                CHECK_MSG(got[n] == -12345.0f, "%s wrote past the end", what);
            }
            kiln_free(odd);
            kiln_free(want);
            kiln_free(got);
            free_fixture(&fx);
        }
    }
    kiln_quant_set_isa(saved);
    CHECK(tiers_run >= 1);
    printf("  %d tier(s) checked\n", tiers_run);
}

/* A hand-made Q4_K block: the 6-bit scale/min packing of sub-blocks 0-3 and 4-7 differs, so set distinct values
 * for each and check the dequantised numbers directly. */
static void test_q4_k_hand_block(void) {
    uint8_t blk[144] = {0};
    uint16_t one = kiln_f32_to_f16(1.0f), half = kiln_f32_to_f16(0.5f);
    blk[0] = (uint8_t)one, blk[1] = (uint8_t)(one >> 8);   /* d = 1 */
    blk[2] = (uint8_t)half, blk[3] = (uint8_t)(half >> 8); /* dmin = 0.5 */
    uint8_t sc[8] = {1, 2, 3, 63, 33, 47, 16, 5}, m[8] = {0, 1, 62, 7, 40, 3, 63, 17};
    for (int j = 0; j < 4; j++) {
        blk[4 + j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        blk[8 + j] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        blk[12 + j] = (uint8_t)((sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
    }
    for (int i = 0; i < 128; i++) blk[16 + i] = (uint8_t)(i * 37 + 11);
    float y[256];
    kiln_quant_set_isa(KILN_ISA_SCALAR);
    CHECK_EQ_INT(kiln_dequant(y, KILN_QT_Q4_K, blk, 256, NULL), KILN_OK);
    kiln_quant_set_isa(kiln_isa_detect());
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            int q = (blk[16 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
            float want = (float)sc[j] * (float)q - 0.5f * (float)m[j];
            CHECK_MSG(y[32 * j + l] == want, "sub-block %d value %d: %g, expected %g", j, l, y[32 * j + l], want);
            if (y[32 * j + l] != want) return;
        }
}

static void test_q8_0_quantize_matches_gguf(void) {
    size_t nin = 0, nq = 0;
    float *in = read_all("tests/data/gguf/quant/Q8_0.in.f32", &nin);
    uint8_t *want = read_all("tests/data/gguf/quant/Q8_0.q", &nq);
    CHECK(in && want && nq == nin / 4 / 32 * 34);
    if (in && want) {
        uint8_t *got = kiln_malloc(nq);
        CHECK_EQ_INT(kiln_quantize(got, KILN_QT_Q8_0, in, nin / 4, NULL), KILN_OK);
        for (size_t i = 0; i < nq; i++)
            if (got[i] != want[i]) {
                CHECK_MSG(0, "byte %zu (block %zu) is 0x%02x, the gguf package wrote 0x%02x", i, i / 34, got[i], want[i]);
                break;
            }
        kiln_free(got);
    }
    kiln_free(in);
    kiln_free(want);
}

/* Q4_K round trip: every value within half a step (d * sc / 2) plus the rounding of the min, on random data of
 * several magnitudes, and zeros stay zeros. */
static void test_q4_k_round_trip(void) {
    enum { N = 256 * 8 };
    float x[N], y[N];
    uint8_t q[144 * 8];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        float u = (float)(s >> 8) / 16777216.0f - 0.5f;
        x[i] = u * (i < 256 ? 0.0f : i < 1024 ? 0.02f : 3.0f) + (i >= 1536 ? 0.7f : 0.0f); /* last: all positive */
    }
    CHECK_EQ_INT(kiln_quantize(q, KILN_QT_Q4_K, x, N, NULL), KILN_OK);
    CHECK_EQ_INT(kiln_dequant(y, KILN_QT_Q4_K, q, N, NULL), KILN_OK);
    for (int b = 0; b < N / 256; b++) {
        float lo = 0, hi = 0, worst = 0;
        for (int i = 256 * b; i < 256 * (b + 1); i++) {
            lo = fminf(lo, x[i]);
            hi = fmaxf(hi, x[i]);
            worst = fmaxf(worst, fabsf(x[i] - y[i]));
        }
        /* one q step of the block's widest sub-block is (hi - lo) / 15; the 6-bit scale/min rounding adds at
         * most half a step of d and dmin each (1/63 of the range) */
        float bound = (hi - lo) / 15 * 0.5f + (hi - lo) / 63 * 16 + 1e-6f;
        CHECK_MSG(worst <= bound, "block %d: error %g over %g", b, worst, bound);
        if (b == 0) CHECK_MSG(worst == 0, "zeros came back as %g", worst);
    }
}

/* Slices of a weight matrix (the GEMM packing's access) equal the same values of whole-row dequantisation, for
 * every type, on every tier; misaligned slices are refused. */
static void test_row_slices(void) {
    kiln_isa saved = kiln_quant_isa();
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        if (!kiln_quant_set_isa((kiln_isa)isa)) continue;
        for (size_t t = 0; t < N_TYPES; t++) {
            fixture fx;
            if (!load_fixture(all_types[t], &fx)) {
                free_fixture(&fx);
                continue;
            }
            int64_t b = fx.q->block, K = fx.q->block == 1 ? 64 : 2 * b, rows = (int64_t)fx.n / K;
            float *all = kiln_malloc(fx.n * 4), *sl = kiln_malloc(fx.n * 4);
            kiln_dequant_ref(all, fx.q->id, fx.blocks, (size_t)(rows * K), NULL);
            const int64_t k0 = b == 1 ? 5 : b, k1 = K, r0 = 1, r1 = rows - 1, ld = k1 - k0 + 3;
            kiln_err err = {0};
            CHECK_EQ_INT(kiln_dequant_rows(sl, ld, fx.q->id, fx.blocks, K, r0, r1, k0, k1, &err), KILN_OK);
            for (int64_t r = r0; r < r1; r++)
                CHECK_MSG(!memcmp(sl + (r - r0) * ld, all + r * K + k0, (size_t)(k1 - k0) * 4), "%s on %s: row %lld",
                          fx.q->name, kiln_isa_name((kiln_isa)isa), (long long)r);
            if (b > 1) {
                CHECK_EQ_INT(kiln_dequant_rows(sl, ld, fx.q->id, fx.blocks, K, 0, 1, 1, K, &err), KILN_E_INVALID);
                CHECK_ERR_CONTAINS(&err, "not on block boundaries");
            }
            kiln_free(all);
            kiln_free(sl);
            free_fixture(&fx);
        }
    }
    kiln_quant_set_isa(saved);
}

int main(void) {
    RUN(test_table);
    RUN(test_errors);
    RUN(test_reference_matches_gguf);
    RUN(test_tiers_match_reference);
    RUN(test_q4_k_hand_block);
    RUN(test_q8_0_quantize_matches_gguf);
    RUN(test_q4_k_round_trip);
    RUN(test_row_slices);
    return test_summary();
}
